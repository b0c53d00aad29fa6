"""What a run created, written down before (or as) it is created, for cleanup.

Each run has a record file ``<state dir>/<run id>.json`` (state dir:
``$TRAINBED_STATE`` or ``/run/trainbed``). It lists the processes the run
started (pid plus kernel start time, so a reused pid is never killed), the
network namespaces of its emulated hosts (by inode), its interface names, its
OVS bridges, its private OVS directory and its state files. ``clean_all`` removes exactly those,
and nothing matched by a broad name.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

STATE_DIR_DEFAULT = "/run/trainbed"


def state_dir() -> Path:
    path = Path(os.environ.get("TRAINBED_STATE", STATE_DIR_DEFAULT))
    path.mkdir(parents=True, exist_ok=True)
    return path


def proc_stat(pid) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the command name (which may hold spaces and
    parentheses), from the state on: proc(5)'s field n is index n - 3; None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def proc_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None if gone."""
    fields = proc_stat(pid)
    return None if fields is None else int(fields[19])


def netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


class RunRecord:
    """An append-only record of one run's resources, flushed on every change."""

    def __init__(self, run_id: str, run_dir: str | None = None):
        self.path = state_dir() / f"{run_id}.json"
        self.data = {"run_id": run_id, "run_dir": run_dir, "owner_pid": os.getpid(),
                     "owner_start": proc_start_time(os.getpid()),
                     "processes": [], "netns_inodes": [], "links": [], "bridges": [], "files": [],
                     "ovs_dir": None, "ovs_instances": {}}
        self._flush()

    def _flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def add_process(self, pid: int, what: str) -> None:
        self.data["processes"].append({"pid": pid, "start": proc_start_time(pid), "what": what})
        self._flush()

    def add_netns(self, pid: int) -> None:
        inode = netns_inode(pid)
        if inode is not None and inode != netns_inode(os.getpid()):
            self.data["netns_inodes"].append(inode)
            self._flush()

    def add_links(self, names: list[str]) -> None:
        self.data["links"] += names
        self._flush()

    def add_bridges(self, names: list[str]) -> None:
        self.data["bridges"] += names
        self._flush()

    def add_file(self, path: str) -> None:
        self.data["files"].append(path)
        self._flush()

    def set_ovs_dir(self, path: str) -> None:
        """The run's OVS directory: every instance's private directories live below it."""
        self.data["ovs_dir"] = path
        self._flush()

    def add_ovs_instance(self, path: str, switches: list[str]) -> None:
        self.data["ovs_instances"][path] = switches
        self._flush()

    def close(self) -> None:
        """The run tore itself down: drop the record."""
        self.path.unlink(missing_ok=True)


def _kill(pid: int, start: int | None, sig=signal.SIGKILL) -> bool:
    if start is None or proc_start_time(pid) != start:
        return False  # gone, or the pid now belongs to someone else
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _pids_in_netns(inodes: set[int]) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and netns_inode(int(entry.name)) in inodes:
            pids.append(int(entry.name))
    return pids


def _wait_gone(pids: list[tuple[int, int | None]], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(proc_start_time(p) == s for p, s in pids if s is not None):
        time.sleep(0.05)


def clean_record(data: dict) -> list[str]:
    """Remove everything one record names; returns what was removed."""
    from experiments.platform.ovs import (
        stop_ovs_dir,  # the OVS dir knows its own pidfiles
    )
    done = []
    inodes = set(data.get("netns_inodes", []))
    in_ns = [(pid, proc_start_time(pid)) for pid in _pids_in_netns(inodes)] if inodes else []
    for pid, start in in_ns:
        if _kill(pid, start):
            done.append(f"process {pid} (in a host namespace)")
    listed = [(p["pid"], p["start"]) for p in data.get("processes", [])]
    for pid, start in listed:
        if _kill(pid, start, signal.SIGTERM):
            done.append(f"process {pid}")
    _wait_gone(listed + in_ns)
    for pid, start in listed:
        _kill(pid, start)
    for instance_dir in data.get("ovs_instances", {}):
        done += stop_ovs_dir(instance_dir)
    existing = set(Path("/sys/class/net").iterdir()) if Path("/sys/class/net").exists() else set()
    names = {p.name for p in existing}
    for link in data.get("links", []) + data.get("bridges", []):
        if link in names:
            subprocess.run(["ip", "link", "del", link], capture_output=True)
            done.append(f"link {link}")
    if data.get("ovs_dir"):
        shutil.rmtree(data["ovs_dir"], ignore_errors=True)
    for path in data.get("files", []):
        if os.path.exists(path):
            os.unlink(path)
            done.append(f"file {path}")
    return done


def clean_all() -> str:
    """Clean every record whose owning runner is gone. Returns a one-line report."""
    removed, skipped = [], []
    for path in sorted(state_dir().glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            skipped.append(path.name)
            continue
        owner = data.get("owner_pid")
        if owner and owner != os.getpid() and proc_start_time(owner) == data.get("owner_start"):
            skipped.append(f"{data['run_id']} (runner {owner} still alive)")
            continue
        removed += clean_record(data)
        path.unlink(missing_ok=True)
    report = f"clean: removed {len(removed)} item(s)"
    if removed:
        report += ": " + ", ".join(removed)
    if skipped:
        report += f"; left alone: {', '.join(skipped)}"
    return report

