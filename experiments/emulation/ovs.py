"""Private Open vSwitch instances (ovsdb-server + ovs-vswitchd) of one run.

An instance's db/run/log/etc directories live under one directory of the run's
own; every ``ovs-*`` tool that serves a switch (Mininet's included) finds its
instance through the ``OVS_*DIR`` variables of ``ovs_env()``. The system OVS
(/var/run/openvswitch) is never touched. Only the userspace datapath exists on
this kernel, and one ovs-vswitchd forwards the packets of all its bridges in a
single thread (the ports are AF_PACKET sockets, polled by the main loop), so a
run may split its switches over several instances to forward on several cores.
Userspace TSO keeps TCP checksums right.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
DAEMONS = ("ovs-vswitchd", "ovsdb-server")  # stop order
VSWITCHD_NICE = -10


def ovs_env(base: str | Path) -> dict[str, str]:
    base = Path(base)
    return {"OVS_RUNDIR": str(base / "run"), "OVS_DBDIR": str(base / "db"),
            "OVS_LOGDIR": str(base / "log"), "OVS_SYSCONFDIR": str(base / "etc")}


class PrivateOVS:
    def __init__(self, base: str | Path):
        self.base = Path(base)
        self.env = ovs_env(self.base)

    def _run(self, *cmd: str, timeout: float = 20) -> str:
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **self.env}, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def start(self) -> None:
        for d in self.env.values():
            Path(d).mkdir(parents=True, exist_ok=True)
        run, db, log = self.env["OVS_RUNDIR"], self.env["OVS_DBDIR"], self.env["OVS_LOGDIR"]
        self._run("ovsdb-tool", "create", f"{db}/conf.db", SCHEMA)
        self._run("ovsdb-server", f"{db}/conf.db", f"--remote=punix:{run}/db.sock",
                  f"--pidfile={run}/ovsdb-server.pid", "--detach", f"--log-file={log}/ovsdb-server.log")
        self._run("ovs-vsctl", "--no-wait", "init")
        self._run("ovs-vsctl", "--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true")
        # --enable-dummy: bridges of datapath type "dummy" (dpif-netdev without a kernel tap) exist.
        # nice -10: a switch is hardware of its own, so it goes before the hosts' programs when
        # they compete for the CPU (measured under a 0.7-core quota: high-priority share 0.17 -> 0.44).
        self._run("nice", "-n", f"{VSWITCHD_NICE}", "ovs-vswitchd", f"unix:{run}/db.sock", "--enable-dummy", f"--pidfile={run}/ovs-vswitchd.pid",
                  "--detach",
                  f"--log-file={log}/ovs-vswitchd.log")
        self._run("ovs-vsctl", "--timeout=10", "show")

    def vsctl(self, *args: str) -> str:
        return self._run("ovs-vsctl", "--timeout=10", *args)

    def cpu_seconds(self) -> float:
        """CPU time used so far by this instance's ovs-vswitchd (all its threads)."""
        pid = self.pids().get("ovs-vswitchd")
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, TypeError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def pids(self) -> dict[str, int]:
        return _pidfile_pids(self.base)

    def stop(self) -> list[str]:
        return stop_ovs_dir(self.base)


def _pidfile_pids(base: Path) -> dict[str, int]:
    pids = {}
    for daemon in DAEMONS:
        path = Path(base) / "run" / f"{daemon}.pid"
        try:
            pids[daemon] = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
    return pids


def _is_daemon_of(pid: int, daemon: str, base: Path) -> bool:
    """True if ``pid`` is ``daemon`` started on this directory (never someone else's)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return daemon in cmd and str(base) in cmd


def stop_ovs_dir(base: str | Path) -> list[str]:
    """Stop the daemons whose pidfiles live under ``base``; returns what was stopped."""
    base = Path(base)
    stopped = []
    for daemon, pid in _pidfile_pids(base).items():
        if not _is_daemon_of(pid, daemon, base):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _is_daemon_of(pid, daemon, base):
            time.sleep(0.05)
        if _is_daemon_of(pid, daemon, base):
            os.kill(pid, signal.SIGKILL)
        stopped.append(f"{daemon} {pid}")
    return stopped
