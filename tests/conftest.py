import os
import shutil

import pytest

from experiments.platform import cpu

_SESSION_START = {}


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0 and shutil.which("ovs-vswitchd") and shutil.which("iperf3"):
        return
    skip = pytest.mark.skip(reason="needs root, Open vSwitch and iperf3 (run `make test` as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def session_state(tmp_path_factory):
    """Module- and session-scoped fixtures keep their records and results in the
    session's directories too: no test run touches the checkout's results/latest."""
    root = tmp_path_factory.mktemp("session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINBED_STATE", str(root / "state"))
        patch.setenv("TRAINBED_RESULTS", str(root / "results"))
        yield


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Each test keeps its run records and results in its own directories."""
    monkeypatch.setenv("TRAINBED_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("TRAINBED_RESULTS", str(tmp_path / "results"))
    return tmp_path / "state"


SHORT_SEARCH_STEPS = 10


@pytest.fixture(scope="module")
def short_searches():
    """Searched gnn placements (``{kind: etp, ...}``) cut to a few steps judged by cost,
    for tests of spec and sweep validation: what they test is the checking, and a full
    search (10,000 steps, its candidates simulated: a minute on the Reddit profiles)
    per spec, scheduler and mutation tests the search again (test_gnn_place.py does)."""
    from experiments.gnn import search
    full = search.etp_placement

    def short(spec, profile, steps, seed, verify=True, simulated_cost=False, verify_best=0, progress=None):
        return full(spec, profile, min(steps, SHORT_SEARCH_STEPS), seed, verify=False, simulated_cost=simulated_cost)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search, "etp_placement", short)
        yield


def pytest_sessionstart(session):
    dirs = cpu.cgroup_cpu_dirs()
    _SESSION_START.update(dirs=dirs, first=cpu.sample(dirs))


def pytest_terminal_summary(terminalreporter):
    """The box the emulation tests ran on, in the log's tail: a CI failure of a packet
    test is first a question of whether the box froze the run."""
    if not _SESSION_START:
        return
    dirs = _SESSION_START["dirs"]
    session = cpu.shares(_SESSION_START["first"], cpu.sample(dirs))
    terminalreporter.write_line(
        f"box: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable, CPU quota {cpu.quota_cores(dirs)}; "
        f"over the session idle {session['cpu_idle_share']:.2f}, stolen {session['cpu_stolen_share']:.3f}, "
        f"quota-throttled {session['cpu_throttled_share']:.3f}")
