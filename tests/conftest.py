import os
import shutil
import time

import pytest

from experiments import cpu

_SESSION_START = {}


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0 and shutil.which("ovs-vswitchd") and shutil.which("iperf3"):
        return
    skip = pytest.mark.skip(reason="needs root, Open vSwitch and iperf3 (run `make test` as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Each test keeps its run records and results in its own directories."""
    monkeypatch.setenv("TRAINBED_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("TRAINBED_RESULTS", str(tmp_path / "results"))
    return tmp_path / "state"


def pytest_sessionstart(session):
    dirs = cpu.cgroup_cpu_dirs()
    _SESSION_START.update(wall=time.monotonic(), box=cpu.box_times(), throttled=cpu.throttled_s(dirs), dirs=dirs)


def pytest_terminal_summary(terminalreporter):
    """The box the emulation tests ran on, in the log's tail: a CI failure of a packet
    test is first a question of whether the box froze the run."""
    if not _SESSION_START:
        return
    dirs, box = _SESSION_START["dirs"], cpu.box_times()
    wall = time.monotonic() - _SESSION_START["wall"]
    throttled = (cpu.throttled_s(dirs) - _SESSION_START["throttled"]) / wall if wall > 0 else 0.0
    terminalreporter.write_line(
        f"box: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable, CPU quota {cpu.quota_cores(dirs)}; "
        f"over the session idle {cpu.idle_share(_SESSION_START['box'], box):.2f}, "
        f"stolen {cpu.stolen_share(_SESSION_START['box'], box):.3f}, quota-throttled {throttled:.3f}")
