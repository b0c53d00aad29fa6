"""Entry point of the controller process: ``python -m controller.main``.

os-ken 4 ships no manager CLI; this starts the one app through AppManager with
OpenFlow bound to 127.0.0.1 only.
"""
from __future__ import annotations

import argparse
import json
import logging

from os_ken.lib import hub

hub.patch(thread=False)

from os_ken import cfg  # noqa: E402  (must follow the eventlet patch)
from os_ken.base.app_manager import AppManager  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fabric", required=True, help="fabric JSON (topologies.fabric.Fabric.to_dict)")
    parser.add_argument("--socket", required=True, help="management unix socket path")
    parser.add_argument("--of-port", type=int, required=True, help="OpenFlow TCP port on 127.0.0.1")
    parser.add_argument("--state", help="state file: persisted after every change, recovered from on start")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    import os_ken.controller.controller  # noqa: F401  (registers the ofp_* options)
    cfg.CONF(args=["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(args.of_port)],
             project="os_ken")
    from controller.app import TrainbedController
    with open(args.fabric) as f:
        TrainbedController.config = {"fabric": json.load(f), "socket": args.socket, "state": args.state}
    AppManager.run_apps(["controller.app"])


if __name__ == "__main__":
    main()
