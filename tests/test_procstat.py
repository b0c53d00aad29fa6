"""hosts.procstat: the one reader of /proc/stat's CPU times."""
from __future__ import annotations

from hosts.procstat import box_times


def test_guest_time_is_not_counted_twice(tmp_path):
    # user nice system idle iowait irq softirq steal guest guest_nice: guest (30) and
    # guest_nice (2) are already inside user (40) and nice (2)
    (tmp_path / "stat").write_text("cpu 40 2 10 40 5 0 0 3 30 2\ncpu0 1 2 3\n")
    times = box_times(tmp_path)
    assert (times.idle, times.steal, times.total) == (45, 3, 100)


def test_an_old_kernel_without_steal_reads_none(tmp_path):
    (tmp_path / "stat").write_text("cpu 10 0 10 80 0 0 0\n")
    assert box_times(tmp_path).total == 100 and box_times(tmp_path).steal == 0
