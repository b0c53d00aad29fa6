"""experiments.platform.cpu: what the box took away from a run (steal, quota throttling) and
the CPU pinning that keeps a quota from freezing it."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from experiments.platform import cpu


def _proc(tmp_path: Path, mountinfo: str, cgroup: str, stat: str = "cpu 10 0 10 70 5 0 0 5 0 0\n") -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(mountinfo)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "stat").write_text(stat + "cpu0 1 2 3\n")
    return proc


def test_box_times_count_iowait_as_idle_and_steal_apart(tmp_path):
    proc = _proc(tmp_path, "", "")
    times = cpu.box_times(proc)
    assert (times.idle, times.steal, times.total) == (75, 5, 100)
    later = cpu.BoxTimes(idle=95, steal=25, total=200)
    assert cpu.idle_and_stolen_shares(times, later) == pytest.approx((0.2, 0.2))
    assert cpu.idle_and_stolen_shares(times, times) == (0.0, 0.0)  # no time passed


def test_a_v1_quota_and_its_throttling_are_found_on_the_process_cgroup_and_its_parents(tmp_path):
    root = tmp_path / "cg" / "cpu"
    inner = root / "ci" / "job"
    inner.mkdir(parents=True)
    (root / "ci" / "cpu.cfs_quota_us").write_text("150000\n")
    (root / "ci" / "cpu.cfs_period_us").write_text("100000\n")
    (root / "ci" / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 2500000000\n")
    (inner / "cpu.cfs_quota_us").write_text("-1\n")
    (inner / "cpu.cfs_period_us").write_text("100000\n")
    (inner / "cpu.stat").write_text("throttled_time 0\n")
    mountinfo = (f"32 31 0:29 / {root} rw,relatime - cgroup cgroup rw,cpu\n"
                 f"33 31 0:30 / {tmp_path}/cg/memory rw,relatime - cgroup cgroup rw,memory\n")
    proc = _proc(tmp_path, mountinfo, "4:memory:/elsewhere\n1:cpu:/ci/job\n")
    dirs = cpu.cgroup_cpu_dirs(proc)
    assert dirs == [(1, inner), (1, root / "ci"), (1, root)]
    assert cpu.quota_cores(dirs) == 1.5
    assert cpu.throttled_s(dirs) == 2.5


def test_a_v2_quota_inside_a_container_is_read_at_the_mount_root(tmp_path):
    root = tmp_path / "cg"
    root.mkdir()
    (root / "cpu.max").write_text("200000 100000\n")
    (root / "cpu.stat").write_text("usage_usec 5\nthrottled_usec 1500000\n")
    proc = _proc(tmp_path, f"41 31 0:38 /docker/abc {root} rw - cgroup2 cgroup2 rw\n", "0::/docker/abc\n")
    dirs = cpu.cgroup_cpu_dirs(proc)
    assert dirs == [(2, root)]
    assert cpu.quota_cores(dirs) == 2.0 and cpu.throttled_s(dirs) == 1.5
    (root / "cpu.max").write_text("max 100000\n")
    assert cpu.quota_cores(dirs) is None


def test_a_quota_keeps_as_many_cpus_as_it_covers_in_full():
    assert cpu.cpus_for_quota({0, 1, 2, 3}, None) == {0, 1, 2, 3}
    assert cpu.cpus_for_quota({0, 1, 2, 3}, 2.0) == {0, 1}
    assert cpu.cpus_for_quota({2, 5, 7}, 1.5) == {2}
    assert cpu.cpus_for_quota({0, 1}, 0.7) == {0}  # at least one
    assert cpu.cpus_for_quota({0, 1}, 4.0) == {0, 1}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin to one")
def test_pinning_holds_inside_and_is_undone_after(tmp_path):
    before = os.sched_getaffinity(0)
    quota = tmp_path / "cg"
    quota.mkdir()
    (quota / "cpu.max").write_text("100000 100000\n")
    with cpu.pinned_to_quota([(2, quota)]) as kept:
        assert kept == {min(before)} and os.sched_getaffinity(0) == kept
    assert os.sched_getaffinity(0) == before
    with cpu.pinned_to_quota([]) as kept:  # no quota: nothing changes
        assert kept == before and os.sched_getaffinity(0) == before


def test_lost_cpu_makes_a_run_untrustworthy():
    limits = {"min_cpu_idle": 0.05, "max_cpu_lost_share": 0.05}
    fine = {"cpu_idle_share": 0.4, "cpu_stolen_share": 0.01, "cpu_throttled_share": 0.02}
    assert cpu.cpu_reasons(fine, limits) == []
    throttled = {**fine, "cpu_throttled_share": 0.3}
    assert cpu.cpu_reasons(throttled, limits) == [
        "the box took 0.31 of the run's CPU time away (stolen 0.01, quota-throttled 0.30) > 0.05"]


def test_the_monitor_reports_shares_of_the_real_box():
    """The box's time the monitor calls busy covers at least the CPU time this process
    spent inside the monitored span (other processes only add to it)."""
    used_before = time.process_time()
    monitor = cpu.CpuMonitor(0.0)
    assert monitor.summary() == {"cpu_idle_share": 1.0, "cpu_stolen_share": 0.0, "cpu_throttled_share": 0.0}
    monitor.start()
    busy_until = time.process_time() + 1.0
    while time.process_time() < busy_until:
        pass
    time.sleep(1.2)
    monitor.stopped.set()
    monitor.join()
    used = time.process_time() - used_before
    summary = monitor.summary()
    assert len(monitor.per_second) >= 2 and all(0.0 <= summary[k] <= 1.0 for k in summary)
    first, last = monitor.points[0], monitor.points[-1]
    # /proc/stat's first line in USER_HZ, over the online CPUs os.cpu_count() counts (a
    # container whose /proc/stat is virtualised, LXCFS, would differ)
    all_cpus_s = (last.box.total - first.box.total) / os.sysconf("SC_CLK_TCK")
    assert all_cpus_s == pytest.approx((last.wall - first.wall) * os.cpu_count(), rel=0.1)
    busy_s = (1 - summary["cpu_idle_share"]) * all_cpus_s
    assert busy_s >= 0.9 * used - 0.05, (busy_s, used, summary)


def test_the_box_is_its_boot_id_cpu_and_memory_and_missing_files_are_none(tmp_path):
    (tmp_path / "sys/kernel/random").mkdir(parents=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text("42c0e918-ef4a-4551-8198-c441f411cd88\n")
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2695.948\n\n"
                                      "processor\t: 1\nmodel name\t: other\ncpu MHz\t\t: 1.0\n")
    (tmp_path / "meminfo").write_text("MemTotal:       24683656 kB\nMemFree:        1 kB\n")
    assert cpu.box_identity(tmp_path) == {"boot_id": "42c0e918-ef4a-4551-8198-c441f411cd88", "cpu_model": "AMD EPYC",
                                          "cpu_mhz": 2695.948, "memory_bytes": 24683656 * 1024}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cpu.box_identity(empty) == {"boot_id": None, "cpu_model": None, "cpu_mhz": None, "memory_bytes": None}
    real = cpu.box_identity()
    assert real["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert real["memory_bytes"] > 0


def test_the_cpu_loop_times_real_work():
    loop = cpu.cpu_loop_ms(repeats=2)
    assert 0.1 < loop < 5000
