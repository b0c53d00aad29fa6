"""Checks shared by the real-emulation tests: what a run must leave behind (nothing),
and whether the box let a run be faithful at all."""
from __future__ import annotations

import json
import os
from pathlib import Path

from experiments.platform import cpu
from experiments.platform.records import proc_stat
from experiments.platform.spec import FIDELITY_DEFAULTS

CPU_LOST = "the box took"  # how experiments.platform.cpu.cpu_reasons starts its steal/throttling reason


class CpuWatch:
    """Whether the box took CPU time away (steal, a quota) since ``start`` beyond the
    specs' default limit, for a timing check that is not a run with a verdict of its own."""

    def __init__(self):
        self._dirs = cpu.cgroup_cpu_dirs()
        self.start()

    def start(self) -> None:
        self._first = cpu.sample(self._dirs)

    def taken(self) -> str | None:
        """Why the timings since ``start`` cannot be judged (the runs' own reason), or None."""
        shares = cpu.shares(self._first, cpu.sample(self._dirs))
        return next(iter(cpu.cpu_reasons(shares, {**FIDELITY_DEFAULTS, "min_cpu_idle": 0.0})), None)


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped counts as gone)."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"


def cpu_was_taken(summary: dict) -> str | None:
    """The run's own reason when the box took CPU time away from it (steal, a quota):
    such a run says it is untrustworthy, and its packets cannot judge the emulation."""
    return next((r for r in summary["fidelity"]["untrustworthy_reasons"] if r.startswith(CPU_LOST)), None)


def netns_inodes() -> set[int]:
    inodes = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                inodes.add(os.stat(entry / "ns" / "net").st_ino)
            except OSError:
                pass
    return inodes


def processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace") and alive(int(entry.name)):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def assert_nothing_left(fabric, state: Path, run_dir: Path, namespaces_before: set[int]) -> None:
    present = {p.name for p in Path("/sys/class/net").iterdir()}
    assert not present & set(fabric.interface_names()), "links left behind"
    assert not present & {s.name for s in fabric.switches}, "bridges left behind"
    assert processes_mentioning(str(state)) == [], "OVS daemons or sockets left behind"
    assert processes_mentioning(str(run_dir)) == [], "controller left behind"
    assert netns_inodes() <= namespaces_before, "host namespaces (or their processes) left behind"
    assert list(state.glob("*.json")) == [], "run record not closed"


def why_records_stay(state: Path) -> str:
    """For a test's failure message: per run record still in ``state``, whether its
    owner (the run's process) lives, where its threads wait, and the end of what it
    printed (its run directory's traceback, or the output file a cluster worker keeps
    beside the cell's directory)."""
    lines = []
    for path in sorted(state.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as err:  # closed meanwhile, or half written
            lines.append(f"{path.name}: unreadable now ({err})")
            continue
        owner = record.get("owner_pid", 0)
        task_dir = Path(f"/proc/{owner}/task")
        waits = []
        if alive(owner) and task_dir.exists():
            for thread in sorted(task_dir.iterdir()):
                fields = proc_stat(thread.name)  # a thread's id reads as a pid in /proc
                try:
                    waits.append(f"{thread.name}:{fields[0]}:{(thread / 'wchan').read_text() or '-'}")
                except (OSError, TypeError):  # the thread ended meanwhile
                    continue
        lines.append(f"{path.name}: owner {owner} {'alive' if alive(owner) else 'gone'} "
                     f"(threads {' '.join(waits) or 'none'})")
        run_dir = Path(record.get("run_dir") or "/nonexistent")
        for printed in (run_dir / "traceback.txt", run_dir.parent / "output.txt"):
            if printed.exists():
                lines.append(f"{printed}: ..." + printed.read_text(errors="replace")[-1500:])
    return "\n".join(lines)
