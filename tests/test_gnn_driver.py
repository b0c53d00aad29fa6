"""The OES side of the GNN driver (experiments.gnn.driver.OesRates) on hand-made
events, without a fabric: which flows are active, pending or not network flows, and
the policy batches its decisions send; and the GNN run's verdict."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from fakes import FakeClient

from controller.schedulers import oes
from experiments import store
from experiments.gnn import runner
from experiments.gnn.driver import OesRates
from experiments.platform.channel import DriverError
from experiments.platform.cpu import CpuMonitor
from experiments.platform.spec import FIDELITY_DEFAULTS

MACHINES = [oes.Machine("tbh1", 100, 100), oes.Machine("tbh2", 100, 100), oes.Machine("tbh3", 20, 20)]


def rates() -> OesRates:
    return OesRates(SimpleNamespace(client=FakeClient()), MACHINES, io.StringIO(), io.StringIO())


def start(flow, iteration=0, src="tbh1", dst="tbh2", src_task="store0", dst_task="sampler1", t=1.0):
    return {"kind": "flow_start", "t": t, "flow": flow, "src": src, "dst": dst, "src_task": src_task,
            "dst_task": dst_task, "iteration": iteration, "bytes": 1_000_000, "src_port": 40000, "dst_port": 21000}


def end(flow, t=2.0):
    return {"kind": "flow_end", "t": t, "flow": flow}


def active(r: OesRates) -> list[str]:
    return sorted(f.flow_id for f in r.coordinator.pipeline.active)


def test_a_pairs_next_flow_waits_behind_the_previous_one():
    r = rates()
    assert r.on_flow_event(start("a/i0", 0))
    assert not r.on_flow_event(start("a/i1", 1))  # same task pair, still on the wire: pending
    assert r.on_flow_event(start("b/i0", 0, src="tbh3", src_task="store2"))
    assert active(r) == ["a/i0", "b/i0"]
    assert oes.oes_rates(MACHINES, r.coordinator.pipeline.active) == {"a/i0": 50.0, "b/i0": 20.0}
    assert r.on_flow_event(end("a/i0"))
    assert active(r) == ["a/i1", "b/i0"]  # released when its predecessor ended
    assert len(r.pending_triggers) == 3  # a flow that went pending changed no rate


def test_same_machine_and_overtaken_flows_change_nothing():
    r = rates()
    assert not r.on_flow_event(start("local", src="tbh1", dst="tbh1"))
    assert not r.on_flow_event(end("local"))
    assert not r.on_flow_event(end("early"))  # its end overtook its start
    assert not r.on_flow_event(start("early"))
    assert active(r) == [] and r.coordinator.started == {} and r.coordinator.ended_early == set() and r.coordinator.local == set()


def test_an_end_of_a_pending_flow_is_a_clear_error():
    r = rates()
    r.on_flow_event(start("a/i0", 0))
    r.on_flow_event(start("a/i1", 1))
    with pytest.raises(DriverError, match="a/i1 ended while pending"):
        r.on_flow_event(end("a/i1"))


def _rate_policy(event: dict, mbps: float) -> dict:
    return {"set": {"src": event["src"], "dst": event["dst"], "proto": "tcp", "src_port": event["src_port"],
                    "dst_port": event["dst_port"], "rate_mbps": mbps, "rate_mechanism": "host"}}


def test_a_decision_sends_the_changed_rates_and_keeps_the_policies_of_ended_flows(monkeypatch):
    r = rates()
    read_back = []
    monkeypatch.setattr(r, "read_back", lambda hosts=None: read_back.append(hosts))
    a0, b0 = start("a/i0", 0), start("b/i0", 0, src="tbh3", src_task="store2", t=1.5)
    r.on_flow_event(b0)
    r.on_flow_event(a0)
    r.decide()
    batches = r.em.client.batches
    assert batches == [[_rate_policy(a0, 50.0), _rate_policy(b0, 20.0)]]  # in flow id order
    [record] = [json.loads(line) for line in r.decisions_out.getvalue().splitlines()]
    assert record["set"] == [["tbh1", "tbh2", "tcp", 40000, 21000, 50.0, 100],
                             ["tbh3", "tbh2", "tcp", 40000, 21000, 20.0, 101]]
    assert len(record["latency_s"]) == 2 and r.pending_triggers == []
    assert read_back == [{"tbh1", "tbh3"}]  # the first decision's hosts are read back
    r.on_flow_event(end("b/i0"))
    r.decide()  # a alone: its rate changes; b's policy stays installed, unchanged
    assert batches[1] == [_rate_policy(a0, 100.0)]
    host_rate = {"rate_mechanism": "host"}
    assert r.policies.installed == {("tbh1", "tbh2", "tcp", 40000, 21000): {"rate_mbps": 100.0, **host_rate},
                                    ("tbh3", "tbh2", "tcp", 40000, 21000): {"rate_mbps": 20.0, **host_rate}}
    a1 = start("a/i1", 1, t=3.0)  # the pair's next flow, on the same connection, at the same rate
    r.on_flow_event(end("a/i0"))
    r.on_flow_event(a1)
    r.decide()
    assert len(batches) == 2 and r.decisions == 2 and r.pending_triggers == []
    assert read_back == [{"tbh1", "tbh3"}]  # the next read-back is READBACK_EVERY decisions later


def test_the_gnn_verdict_is_every_kinds_with_its_read_back_and_the_switch_loss(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    store.write_json(raw / "switch_packets.json", {"tbl1": {"received": 1000, "transmitted": 990}})
    store.write_json(raw / "queue_counters.json", {"tbl1-eth1": {"7": {"bytes": 0, "packets": 0, "dropped": 4}}})
    store.write_json(raw / "driver.json", {"readback_max_rel_error": 0.09, "readbacks": 3, "edge_cut_share": 0.2,
                                           "placement": {}})
    spec = {"workload": {"target_accuracy": None, "profile": False}, "fidelity": FIDELITY_DEFAULTS}
    summary = runner.analyse(spec, tmp_path, CpuMonitor(0.0), [{"start_s": 5.0, "end_s": 6.0}])
    assert summary["switch_loss_share"] == 6 / 1000
    assert summary["fidelity"]["untrustworthy_reasons"] == ["controller outage at 5.0 s",
                                                            "an installed rate is 9.0% off its OES target"]
    assert summary["trustworthy"] is False and summary["rate_readbacks"] == 3
    # nothing ran: the job's model has no iteration to replay
    assert summary["predicted_iteration_s"] is None and "untrustworthy" in summary["prediction_note"]


def test_the_rate_coordinator_is_pure_and_its_policy_pluggable():
    from experiments.gnn.coordinator import RateCoordinator
    c = RateCoordinator(MACHINES)
    assert c.on_flow_event(start("a/i0", 0, t=1.0))
    assert c.on_flow_event({**start("b/i0", 0, src="tbh3", src_task="store2", t=1.5), "src_port": 40001})
    decision = c.decide()
    assert decision.triggers == [1.0, 1.5] and c.pending_triggers == [] and decision.pending == 0
    assert decision.rates == {("tbh1", "tbh2", "tcp", 40000, 21000): 50.0, ("tbh3", "tbh2", "tcp", 40001, 21000): 20.0}
    # another rate policy of the same signature: an equal split of each receiver
    equal = RateCoordinator(MACHINES, policy=lambda machines, flows: {f.flow_id: 100.0 / len(flows) for f in flows})
    equal.on_flow_event(start("a/i0", 0))
    equal.on_flow_event({**start("b/i0", 0, src="tbh3", src_task="store2"), "src_port": 40001})
    assert set(equal.decide().rates.values()) == {50.0}


def test_oes_needs_no_flow_size_and_the_baselines_read_it():
    from controller.schedulers import oes
    from experiments.gnn.coordinator import RateCoordinator
    start = {"kind": "flow_start", "t": 0.0, "flow": "f", "src": "h1", "dst": "h2", "src_task": "a", "dst_task": "b",
             "iteration": 0, "src_port": 30000, "dst_port": 21000}
    machines = [oes.Machine("h1", 100, 100), oes.Machine("h2", 100, 100)]
    coordinator = RateCoordinator(machines)  # OES reads no remaining volume: an event without bytes is enough
    assert coordinator.on_flow_event(start) and list(coordinator.decide().rates.values()) == [100.0]
    mrtf = RateCoordinator(machines, oes.rate_policies()["mrtf"])
    assert mrtf.on_flow_event({**start, "bytes": 1_000_000}) and list(mrtf.decide().rates.values()) == [100.0]
    assert mrtf.on_flow_event({"kind": "flow_end", "t": 0.08, "flow": "f", "bytes": 1_000_000})
    assert mrtf.total_mbit == {} and mrtf.keys == {}
