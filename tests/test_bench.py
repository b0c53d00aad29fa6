"""The capacity bench's all-to-all: its verdict by a run's own fidelity rules, and one
run on a real fabric (root) measuring what its packets did."""
from __future__ import annotations

import pytest

from experiments import bench
from experiments.platform.net import EmulationOptions
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


@pytest.mark.root
def test_all_to_all_on_a_real_fabric(tmp_path):
    r = bench.all_to_all(EmulationOptions(), star(hosts=3, host_mbps=20.0), tmp_path / "a2a", seconds=5.0)
    assert r["failed"] == 0
    # Every receiver got traffic through the switch's queues, as wire packets (one
    # segment per packet: at most the jumbo MTU, not a GSO super-packet of many).
    assert 0 < r["min"] <= r["median"] < 1.2
    assert r["aggregate_mbps"] > 0
    assert 0 < r["unit_bytes"] <= queues.MAX_MTU + 64  # headers
    assert 0 <= r["retransmitted_share"] < 1
    assert r["trustworthy"] == (not r["untrustworthy_reasons"])
