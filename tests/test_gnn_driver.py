"""The OES side of the GNN driver (experiments.gnn.driver.OesRates) on hand-made
events, without a fabric: which flows are active, pending or not network flows."""
from __future__ import annotations

import io

import pytest

from controller.schedulers import oes
from experiments.channel import DriverError
from experiments.gnn.driver import OesRates

MACHINES = [oes.Machine("tbh1", 100, 100), oes.Machine("tbh2", 100, 100), oes.Machine("tbh3", 20, 20)]


def rates() -> OesRates:
    return OesRates(None, MACHINES, io.StringIO(), io.StringIO())


def start(flow, iteration=0, src="tbh1", dst="tbh2", src_task="store0", dst_task="sampler1", t=1.0):
    return {"kind": "flow_start", "t": t, "flow": flow, "src": src, "dst": dst, "src_task": src_task,
            "dst_task": dst_task, "iteration": iteration, "src_port": 40000, "dst_port": 21000}


def end(flow, t=2.0):
    return {"kind": "flow_end", "t": t, "flow": flow}


def active(r: OesRates) -> list[str]:
    return sorted(f.flow_id for f in r.pipeline.active)


def test_a_pairs_next_flow_waits_behind_the_previous_one():
    r = rates()
    assert r.on_flow_event(start("a/i0", 0))
    assert not r.on_flow_event(start("a/i1", 1))  # same task pair, still on the wire: pending
    assert r.on_flow_event(start("b/i0", 0, src="tbh3", src_task="store2"))
    assert active(r) == ["a/i0", "b/i0"]
    assert oes.oes_rates(MACHINES, r.pipeline.active) == {"a/i0": 50.0, "b/i0": 20.0}
    assert r.on_flow_event(end("a/i0"))
    assert active(r) == ["a/i1", "b/i0"]  # released when its predecessor ended
    assert len(r.pending_triggers) == 3  # a flow that went pending changed no rate


def test_same_machine_and_overtaken_flows_change_nothing():
    r = rates()
    assert not r.on_flow_event(start("local", src="tbh1", dst="tbh1"))
    assert not r.on_flow_event(end("local"))
    assert not r.on_flow_event(end("early"))  # its end overtook its start
    assert not r.on_flow_event(start("early"))
    assert active(r) == [] and r.started == {} and r.ended_early == set() and r.local == set()


def test_an_end_of_a_pending_flow_is_a_clear_error():
    r = rates()
    r.on_flow_event(start("a/i0", 0))
    r.on_flow_event(start("a/i1", 1))
    with pytest.raises(DriverError, match="a/i1 ended while pending"):
        r.on_flow_event(end("a/i1"))
