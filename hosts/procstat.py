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


def idle_and_stolen_shares(before: BoxTimes, after: BoxTimes) -> tuple[float, float]:
    """The shares of all CPUs' time between two readings spent idle and taken by the
    hypervisor (both 0 when no time passed)."""
    total = after.total - before.total
    if total <= 0:
        return 0.0, 0.0
    return (after.idle - before.idle) / total, (after.steal - before.steal) / total
