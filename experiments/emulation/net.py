"""Bring an emulated fabric up and down: private OVS, controller, Mininet, queues.

``Emulation`` is the one place where the fabric's data (``topologies``) becomes
real: it records every resource before creating it (``RunRecord``), applies the
queue plan after the net starts, hands the controller the hosts' namespaces for
sender-side rate limits, and tears everything down in reverse order. Use it as a
context manager; ``stop()`` is safe to call twice and after a partial start.
"""
from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import time
import uuid
from functools import partial
from pathlib import Path

from controller.client import ControllerClient
from experiments.emulation.ovs import PrivateOVS
from experiments.emulation.records import RunRecord, clean_record
from experiments.store import REPO_ROOT, write_json
from topologies import queues
from topologies.fabric import Fabric

# Interface and bridge names are global on the machine: one fabric at a time.
FABRIC_LOCK = "/run/trainbed-fabric.lock"


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_tc_batch(cmds: list[str], netns_pid: int | None = None) -> None:
    """Apply tc commands in one ``tc -batch`` (in a host's namespace when given)."""
    prefix = ["nsenter", f"--net=/proc/{netns_pid}/ns/net"] if netns_pid else []
    body = "\n".join(c.removeprefix("tc ") for c in cmds) + "\n"
    proc = subprocess.run([*prefix, "tc", "-batch", "-"], input=body, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tc batch failed: {proc.stderr.strip()}")


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Emulation:
    def __init__(self, fabric: Fabric, run_dir: str | Path, run_id: str | None = None):
        self.fabric = fabric
        self.run_dir = Path(run_dir)
        self.run_id = run_id or f"tb-{uuid.uuid4().hex[:8]}"
        self.record: RunRecord | None = None
        self.ovs: PrivateOVS | None = None
        self.controller: subprocess.Popen | None = None
        self.client: ControllerClient | None = None
        self.net = None
        self.children: list[subprocess.Popen] = []
        self.socket_path = ""
        self.lock = None

    # --- bring-up -----------------------------------------------------------------
    def __enter__(self) -> "Emulation":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.lock = open(FABRIC_LOCK, "a+")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock.close()
            self.lock = None
            raise RuntimeError(f"another trainbed fabric is up on this machine (lock {FABRIC_LOCK}); "
                               "wait for it or run `trainbed clean` if it crashed") from None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.record = RunRecord(self.run_id, str(self.run_dir))
        ovs_dir = self.record.path.parent / self.run_id
        self.record.set_ovs_dir(str(ovs_dir))
        self.ovs = PrivateOVS(ovs_dir)
        os.environ.update(self.ovs.env)  # Mininet's ovs-vsctl calls must find our OVS
        self.ovs.start()
        self._start_controller()
        self._start_net()
        self.client.call("register_hosts", pids={h.name: h.pid for h in self.net.hosts})
        self.client.wait_ready(timeout=60)

    def _start_controller(self) -> None:
        fabric_file = self.run_dir / "fabric.json"
        write_json(fabric_file, self.fabric.to_dict())
        # A unix socket path is limited to 108 bytes; the state dir is short.
        self.socket_path = str(self.record.path.parent / f"{self.run_id}.sock")
        self.of_port = free_tcp_port()
        log = open(self.run_dir / "controller.log", "wb")
        self.controller = subprocess.Popen(
            [sys.executable, "-m", "controller.main", "--fabric", str(fabric_file), "--socket", self.socket_path,
             "--of-port", str(self.of_port)], stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
            start_new_session=True)
        log.close()
        self.record.add_process(self.controller.pid, "controller")
        self.client = ControllerClient(self.socket_path)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise RuntimeError(f"controller exited with {self.controller.returncode}; see {self.run_dir}/controller.log")
            try:
                self.client.call("ping")
                return
            except OSError:
                self.client.close()
                time.sleep(0.1)
        raise RuntimeError("controller did not open its management socket within 30 s")

    def _start_net(self) -> None:
        from mininet.link import TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import OVSSwitch, RemoteController
        setLogLevel("critical")  # TCLink warns about htb quantum on every link
        self.record.add_links(self.fabric.interface_names())
        self.record.add_bridges([s.name for s in self.fabric.switches])
        switch = partial(OVSSwitch, datapath="user", protocols="OpenFlow13", failMode="secure")
        net = Mininet(switch=switch, link=TCLink, controller=None, autoSetMacs=False, build=False)
        self.net = net
        net.addController(RemoteController("c0", ip="127.0.0.1", port=self.of_port))
        for s in self.fabric.switches:
            net.addSwitch(s.name, dpid=f"{s.dpid:016x}")
        for h in self.fabric.hosts:
            net.addHost(h.name, ip=f"{h.ip}/16", mac=h.mac)
        for link in self.fabric.links:
            net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, bw=link.mbps)
        net.build()
        for host in net.hosts:
            self.record.add_process(host.pid, f"host {host.name}")
            self.record.add_netns(host.pid)
        net.start()
        self.apply_queue_plan()

    def apply_queue_plan(self) -> None:
        """The queue plan, applied in one place: every switch port, every host NIC."""
        cmds = [c for _sw, intf, mbps in self.fabric.switch_ports() for c in queues.switch_port_cmds(intf, mbps)]
        run_tc_batch(cmds)
        for link in self.fabric.host_links():
            run_tc_batch(queues.host_base_cmds(link.intf(link.a), link.mbps), self.host(link.a).pid)

    # --- use ------------------------------------------------------------------------
    def host(self, name: str):
        return self.net.get(name)

    def popen(self, host: str, args: list[str], **kwargs) -> subprocess.Popen:
        """Start a process in ``host``'s namespace; it is recorded and stopped with the run."""
        proc = self.host(host).popen(args, **kwargs)
        self.children.append(proc)
        self.record.add_process(proc.pid, f"{host}: {args[0]}")
        return proc

    def port_counters(self) -> dict[str, dict[int, dict[str, int]]]:
        """Per switch port, per queue: bytes/packets/dropped from ``tc -s class``."""
        out = {}
        for _sw, intf, _mbps in self.fabric.switch_ports():
            text = subprocess.run(["tc", "-s", "class", "show", "dev", intf], capture_output=True, text=True).stdout
            out[intf] = queues.queue_counters(text)
        return out

    # --- tear-down --------------------------------------------------------------------
    def stop(self) -> None:
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.children = []
        if self.client is not None:
            self.client.close()
        if self.net is not None:
            try:
                self.net.stop()
            finally:
                self.net = None
        if self.controller is not None:
            if self.controller.poll() is None:
                self.controller.terminate()
                try:
                    self.controller.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.controller.kill()
                    self.controller.wait()
            self.controller = None
        if self.ovs is not None:
            self.ovs.stop()
            self.ovs = None
        if self.record is not None:
            # Anything the normal path missed (a crash mid-start) goes by the record.
            clean_record(self.record.data)
            if self.socket_path:
                Path(self.socket_path).unlink(missing_ok=True)
            self.record.close()
            self.record = None
        if self.lock is not None:
            self.lock.close()  # releases the flock
            self.lock = None


