"""The capacity bench's all-to-all: its verdict by a run's own fidelity rules, and one
run on a real fabric (root) measuring what its packets did."""
from __future__ import annotations

import pytest
from emulation_checks import CPU_LOST

from experiments import bench
from experiments.platform.net import EmulationOptions
from experiments.platform.spec import FIDELITY_DEFAULTS
from topologies import queues
from topologies.fabric import star

CALM = {"cpu_idle_share": 0.4, "cpu_stolen_share": 0.0, "cpu_throttled_share": 0.0}


def test_verdict_trusts_a_calm_run_whose_links_delivered():
    assert bench.verdict(CALM, {"tbh1-eth0": 0.97, "tbh2-eth0": 0.86}, failed=0, processes=2) == []


@pytest.mark.parametrize("shares, ratios, failed, expected", [
    ({**CALM, "cpu_idle_share": 0.02}, {"tbh1-eth0": 0.97}, 0, "CPU idle share 0.02 < 0.05"),
    ({**CALM, "cpu_stolen_share": 0.08}, {"tbh1-eth0": 0.97}, 0, "the box took 0.08 of the run's CPU time away"),
    ({**CALM, "cpu_throttled_share": 0.06}, {"tbh1-eth0": 0.97}, 0, "quota-throttled 0.06"),
    (CALM, {"tbh1-eth0": 0.97, "tbh2-eth0": 0.80}, 0, "link tbh2-eth0 goodput 0.80 of its rate < 0.85"),
    (CALM, {"tbh1-eth0": 0.97}, 1, "1 of 3 mesh processes failed"),
])
def test_verdict_names_each_limit_a_run_broke(shares, ratios, failed, expected):
    reasons = bench.verdict(shares, ratios, failed, processes=3)
    assert len(reasons) == 1 and expected in reasons[0], reasons


def _all_to_all(tmp_path):
    """One all-to-all of three hosts at 20 Mbit/s, run again once where the box took
    the run's CPU away (steal, a quota: the run says so), skipped if it does again."""
    for attempt in range(2):
        r = bench.all_to_all(EmulationOptions(), star(hosts=3, host_mbps=20.0), tmp_path / f"a2a{attempt}", seconds=5.0)
        taken = [reason for reason in r["untrustworthy_reasons"] if reason.startswith(CPU_LOST)]
        if not taken:
            return r
    pytest.skip(f"the box took the run's CPU twice: {taken}")


@pytest.mark.root
def test_all_to_all_on_a_real_fabric(tmp_path):
    r = _all_to_all(tmp_path)
    # What the switch's queues were handed: wire packets (one segment per packet: at
    # most the jumbo MTU's frame, not a GSO super-packet of many).
    assert 0 < r["unit_bytes"] <= queues.MAX_MTU + 64  # headers
    # Three links at 20 Mbit/s leave a 2-core box its CPU: each delivers what the verdict asks.
    assert r["failed"] == 0 and r["trustworthy"], r["untrustworthy_reasons"]
    assert FIDELITY_DEFAULTS["min_link_goodput_ratio"] <= r["min"] <= r["median"] < 1.0
    assert r["retransmitted_share"] < 0.05
