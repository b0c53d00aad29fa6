"""The one reader of /proc/stat's CPU times, for a run's idle and stolen share
(experiments.platform.cpu) and a host's busy share (hosts.colocation.utilization)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class BoxTimes:
    """Jiffies of all CPUs since boot, from the first line of /proc/stat."""

    idle: float  # idle + iowait
    steal: float
    total: float


def box_times(proc: Path = PROC) -> BoxTimes:
    fields = [float(x) for x in (proc / "stat").read_text().split("\n", 1)[0].split()[1:]]
    fields += [0.0] * (8 - len(fields))
    # user .. steal; guest and guest_nice (fields 9-10) are already inside user and nice
    return BoxTimes(idle=fields[3] + fields[4], steal=fields[7], total=sum(fields[:8]))


def idle_share(before: BoxTimes, after: BoxTimes) -> float:
    """The share of all CPUs' time between two readings spent idle (0 when none passed)."""
    total = after.total - before.total
    return (after.idle - before.idle) / total if total > 0 else 0.0


def stolen_share(before: BoxTimes, after: BoxTimes) -> float:
    """The share of all CPUs' time between two readings the hypervisor took."""
    total = after.total - before.total
    return (after.steal - before.steal) / total if total > 0 else 0.0
