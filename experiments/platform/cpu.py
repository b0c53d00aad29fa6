"""The CPU a run had: the box's idle share, and the time the box took away from it.

An emulated fabric is faithful only while its processes run when they are due. A
userspace switch descheduled for tens of milliseconds overflows its socket buffers,
and a strict-priority port serves the low flow while the high sender is frozen
(measured: a 1-core CFS quota on the 2-core box froze the run ~50 ms per 100 ms
period and the high flow's share fell from 0.98 to 0.71-0.75). Two such causes are
invisible in the idle share: a hypervisor's steal time (/proc/stat) and a cgroup CPU
quota, which freezes every process of the cgroup once a period's quota is spent
(``throttled`` in its cpu.stat). ``pinned_to_quota`` removes the second cause where
it can; ``CpuMonitor`` measures both, so a run can say it was not faithful.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hosts.procstat import PROC, BoxTimes, box_times, idle_and_stolen_shares


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def box_identity(proc: Path = PROC) -> dict:
    """Which box and boot a run had, and what it was: the kernel's boot id (new at every
    boot, so two runs with one boot id ran on one box, one after another), the CPU
    model and clock, and the memory. Missing files give None: a run is never refused
    for them."""
    boot = _read(proc / "sys/kernel/random/boot_id")
    cpuinfo = {}
    for line in (_read(proc / "cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        cpuinfo.setdefault(key.strip(), value.strip())  # the first CPU's
    memory = None
    for line in (_read(proc / "meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            memory = int(line.split()[1]) * 1024
    try:
        mhz = float(cpuinfo["cpu MHz"])
    except (KeyError, ValueError):
        mhz = None
    return {"boot_id": boot.strip() if boot else None, "cpu_model": cpuinfo.get("model name"),
            "cpu_mhz": mhz, "memory_bytes": memory}


def cpu_loop_ms(repeats: int = 3) -> float:
    """Milliseconds one core takes for a fixed pure-Python loop, the fastest of
    ``repeats`` (the others met other work): a box's speed, comparable between runs
    under one Python (what it read on the boxes here: docs/specs.md, Boxes)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        total = 0
        for i in range(500_000):
            total += i * i
        times.append(time.perf_counter() - start)
    return round(min(times) * 1000, 2)


def cgroup_cpu_dirs(proc: Path = PROC) -> list[tuple[int, Path]]:
    """(cgroup version, directory) of this process's CPU cgroup and each ancestor up to
    its mount's root, innermost first: a quota at any level freezes the process."""
    mounts = []  # (version, mount root within the hierarchy, mount point)
    for line in (proc / "self" / "mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, kind = left.split(), right.split()
        if kind and kind[0] == "cgroup2":
            mounts.append((2, fields[3], Path(fields[4])))
        elif kind and kind[0] == "cgroup" and "cpu" in kind[-1].split(","):
            mounts.append((1, fields[3], Path(fields[4])))
    dirs = []
    for line in (proc / "self" / "cgroup").read_text().splitlines():
        _hier, controllers, path = line.split(":", 2)
        version = 2 if controllers == "" else 1
        if version == 1 and "cpu" not in controllers.split(","):
            continue
        for mount_version, root, point in mounts:
            if mount_version != version:
                continue
            relative = os.path.relpath(path, root) if path.startswith(root) else "."
            here = (point / relative).resolve() if relative != "." else point
            while True:
                dirs.append((version, here))
                if here == point or point not in here.parents:
                    break
                here = here.parent
    return dirs


def _stat_value(path: Path, key: str) -> float | None:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return float(value)
    except OSError:
        return None
    return None


THROTTLED_KEY = {1: ("throttled_time", 1e9), 2: ("throttled_usec", 1e6)}  # cpu.stat key, units a second


def throttled_s(dirs: list[tuple[int, Path]]) -> float:
    """Seconds this process's cgroups have spent frozen by a CPU quota (the most of any
    level: the levels freeze together)."""
    seconds = [0.0]
    for version, d in dirs:
        key, per_second = THROTTLED_KEY[version]
        seconds.append((_stat_value(d / "cpu.stat", key) or 0.0) / per_second)
    return max(seconds)


def quota_cores(dirs: list[tuple[int, Path]]) -> float | None:
    """The tightest CPU quota over this process's cgroups, in cores; None: no quota."""
    quotas = []
    for version, d in dirs:
        try:
            if version == 1:
                quota = int((d / "cpu.cfs_quota_us").read_text())
                period = int((d / "cpu.cfs_period_us").read_text())
                if quota > 0 and period > 0:
                    quotas.append(quota / period)
            else:
                quota_text, period_text = (d / "cpu.max").read_text().split()
                if quota_text != "max":
                    quotas.append(int(quota_text) / int(period_text))
        except (OSError, ValueError):
            continue
    return min(quotas) if quotas else None


def cpus_for_quota(available: set[int], quota: float | None) -> set[int]:
    """The CPUs a run keeps under a quota: as many as the quota covers in full (at
    least one), so the run is slowed evenly instead of bursting on every CPU and then
    freezing for the rest of each period."""
    if quota is None:
        return set(available)
    keep = max(1, math.floor(quota + 1e-9))
    return set(sorted(available)[:keep])


@contextlib.contextmanager
def pinned_to_quota(dirs: list[tuple[int, Path]] | None = None):
    """Within: this thread (so every process and thread it starts) runs on the CPUs
    ``cpus_for_quota`` keeps; after: the CPUs it had. Yields the CPUs kept."""
    before = os.sched_getaffinity(0)
    keep = cpus_for_quota(before, quota_cores(cgroup_cpu_dirs() if dirs is None else dirs))
    if keep != before:
        os.sched_setaffinity(0, keep)
    try:
        yield keep
    finally:
        if keep != before:
            os.sched_setaffinity(0, before)


@dataclass(frozen=True)
class CpuSample:
    wall: float  # time.monotonic()
    box: BoxTimes
    throttled: float  # throttled_s
    epoch: float  # time.time(), the clock a run's events carry


def sample(dirs: list[tuple[int, Path]]) -> CpuSample:
    wall, epoch = time.monotonic(), time.time()
    return CpuSample(wall, box_times(), throttled_s(dirs), epoch)


def window_ends(points: list[CpuSample], start: float, end: float) -> tuple[CpuSample, CpuSample]:
    """The two samples (of ``points``, two or more in time order) that judge the epoch
    window ``[start, end]``: the first and last inside it, so that the 1 s sampling's
    edges add nothing from outside; a window holding fewer than two samples is
    judged from the samples around it (at most a sampling interval more on each
    side), and one wholly outside the sampled time from the nearest interval."""
    inside = [i for i, p in enumerate(points) if start <= p.epoch <= end]
    if len(inside) >= 2:
        return points[inside[0]], points[inside[-1]]
    first = max([i for i, p in enumerate(points) if p.epoch <= start], default=0)
    last = min([i for i, p in enumerate(points) if p.epoch >= end], default=len(points) - 1)
    first = min(first, len(points) - 2)
    return points[first], points[max(last, first + 1)]


def shares(a: CpuSample, b: CpuSample) -> dict:
    """Between two samples: the box's idle and stolen share, and the share of the wall
    time this process's cgroup was frozen by a quota."""
    wall = b.wall - a.wall
    throttled = (b.throttled - a.throttled) / wall if wall > 0 else 0.0
    idle, stolen = idle_and_stolen_shares(a.box, b.box)
    return {"cpu_idle_share": idle, "cpu_stolen_share": stolen, "cpu_throttled_share": min(max(throttled, 0.0), 1.0)}


class CpuMonitor(threading.Thread):
    """Samples, every second, the box's idle and stolen share and the seconds this
    process's cgroup was frozen by a quota (cpu.csv); judges them against a spec's
    ``fidelity`` limits."""

    def __init__(self, t0: float):
        super().__init__(daemon=True)
        self.t0 = t0
        self.dirs = cgroup_cpu_dirs()
        self.per_second: list[tuple[float, float, float, float]] = []  # time, idle, stolen, throttled share
        self.points = [sample(self.dirs)]  # the raw samples, first to last
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            now = sample(self.dirs)
            self.per_second.append((now.wall - self.t0, *shares(self.points[-1], now).values()))
            self.points.append(now)
        self.points.append(sample(self.dirs))

    def summary(self, window: tuple[float, float] | None = None) -> dict:
        """Shares over the monitored time, or over ``window`` (epoch seconds, as a
        run's events carry them: ``window_ends``); idle 1.0, nothing lost, when
        nothing was sampled."""
        if not self.per_second:
            return {"cpu_idle_share": 1.0, "cpu_stolen_share": 0.0, "cpu_throttled_share": 0.0}
        first, last = (self.points[0], self.points[-1]) if window is None else window_ends(self.points, *window)
        return shares(first, last)

    def seconds_of(self, window: tuple[float, float]) -> list[float]:
        """``window`` (epoch seconds) on cpu.csv's time axis (seconds since ``t0``)."""
        offset = self.points[0].epoch - (self.points[0].wall - self.t0)
        return [round(t - offset, 2) for t in window]

    def write_csv(self, path: Path) -> None:
        with open(path, "w") as f:
            f.write("time_s,idle_share,stolen_share,throttled_share\n")
            f.write("".join(f"{t:.2f},{i:.3f},{s:.3f},{th:.3f}\n" for t, i, s, th in self.per_second))


def lost_share(cpu: dict) -> float:
    """The share of the run's CPU time the box took away (hypervisor steal plus cgroup
    quota): what ``max_cpu_lost_share`` limits. ``cpu``: a ``CpuMonitor.summary()`` or a
    run summary; a share it lacks (an older summary) counts as 0."""
    return (cpu.get("cpu_stolen_share") or 0) + (cpu.get("cpu_throttled_share") or 0)


def cpu_reasons(cpu: dict, fidelity: dict) -> list[str]:
    """``cpu``: a ``CpuMonitor.summary()``; ``fidelity``: a spec's fidelity limits."""
    reasons = []
    if cpu["cpu_idle_share"] < fidelity["min_cpu_idle"]:
        reasons.append(f"CPU idle share {cpu['cpu_idle_share']:.2f} < {fidelity['min_cpu_idle']:.2f}")
    lost = lost_share(cpu)
    if lost > fidelity["max_cpu_lost_share"]:
        reasons.append(f"the box took {lost:.2f} of the run's CPU time away (stolen "
                       f"{cpu['cpu_stolen_share']:.2f}, quota-throttled {cpu['cpu_throttled_share']:.2f}) "
                       f"> {fidelity['max_cpu_lost_share']:.2f}")
    return reasons
