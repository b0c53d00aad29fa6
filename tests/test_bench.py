"""The capacity bench's all-to-all on a real fabric (root): what its packets did, and a
verdict reached by a run's own fidelity rules."""
from __future__ import annotations

import pytest

from experiments import bench
from experiments.platform.net import EmulationOptions
from experiments.platform.spec import FIDELITY_DEFAULTS
from topologies import queues
from topologies.fabric import star

pytestmark = pytest.mark.root


def test_all_to_all_measures_every_link_and_judges_it_as_a_run(tmp_path):
    fabric = star(hosts=3, host_mbps=20.0)
    r = bench.all_to_all(EmulationOptions(), fabric, tmp_path / "a2a", seconds=5.0)
    assert r["failed"] == 0
    # Every receiver got traffic, through the switch's queues, as wire packets (one
    # segment per packet: at most the jumbo MTU, not a GSO super-packet).
    assert 0 < r["min"] <= r["median"] < 1.2
    assert r["aggregate_mbps"] > 0
    assert 0 < r["unit_bytes"] <= queues.MAX_MTU + 64  # headers
    assert 0 <= r["retransmitted_share"] < 1
    reasons = r["untrustworthy_reasons"]
    assert r["trustworthy"] == (not reasons)
    # A slow link is named exactly when the slowest host fell below the run's limit.
    slow = [x for x in reasons if x.startswith("link ")]
    assert bool(slow) == (r["min"] < FIDELITY_DEFAULTS["min_link_goodput_ratio"])
    assert bool([x for x in reasons if x.startswith("CPU idle share")]) == (
        r["cpu_idle"] < FIDELITY_DEFAULTS["min_cpu_idle"])
