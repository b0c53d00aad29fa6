"""experiments/gnn/metrics.py on hand-made event streams."""
from __future__ import annotations

import pytest

from experiments.gnn import metrics
from topologies import queues


def start(flow, t, src="tbh1", dst="tbh2", nbytes=1_000_000, sport=40000, dport=21000, iteration=0, phase="feature"):
    return {"kind": "flow_start", "t": t, "flow": flow, "src": src, "dst": dst, "src_task": "store0",
            "dst_task": "sampler1", "bytes": nbytes, "phase": phase, "iteration": iteration,
            "src_port": sport, "dst_port": dport, "host": src, "task": "store0"}


def end(flow, t, nbytes=1_000_000):
    return {"kind": "flow_end", "t": t, "flow": flow, "bytes": nbytes, "host": "tbh2", "task": "sampler1"}


def decision(t, src, dst, sport, dport, mbps):
    return {"t": t, "apply_s": 0.01, "active": [[src, dst]], "latency_s": [0.004],
            "set": [[src, dst, "tcp", sport, dport, mbps, 1]]}


def test_flow_rates_achieved_and_time_weighted_target():
    events = [start("a", 10.0), end("a", 10.5), start("local", 10.0, dst="tbh1"), end("local", 10.1)]
    # 80 Mbit/s for the first 0.25 s of the flow, then 40.
    decisions = [decision(9.0, "tbh1", "tbh2", 40000, 21000, 80.0), decision(10.25, "tbh1", "tbh2", 40000, 21000, 40.0)]
    rows = metrics.flows(events, decisions)
    assert [r["flow"] for r in rows] == ["a"]  # same-machine transfers are not network flows
    assert rows[0]["achieved_mbps"] == pytest.approx(16.0)
    assert rows[0]["target_mbps"] == pytest.approx(60.0)


def test_unended_flow_has_no_rate():
    rows = metrics.flows([start("a", 1.0)], [])
    assert rows[0]["duration_s"] is None and rows[0]["achieved_mbps"] is None and rows[0]["target_mbps"] is None


def iteration_end(task, iteration, t, loss, accuracy=None, compute=0.1, wait=0.2, sync=0.1):
    return {"kind": "iteration_end", "task": task, "host": "tbh2", "t": t, "iteration": iteration, "loss": loss,
            "val_accuracy": accuracy, "compute_s": compute, "wait_s": wait, "sync_s": sync}


def test_training_metrics():
    events = [{"kind": "hello", "t": 0.0, "task": "store0"}, {"kind": "hello", "t": 2.0, "task": "worker0"}]
    for i, (t, loss, acc) in enumerate([(3.0, 4.0, None), (4.0, 3.0, 0.5), (5.0, 2.0, 0.9), (7.0, 1.0, 0.95)]):
        events.append(iteration_end("worker0", i, t, loss, acc))
        events.append(iteration_end("worker1", i, t, loss + 1))
    result = metrics.training(events, target=0.85)
    assert result["iterations"] == 4
    assert result["train_loss_first"] == 4.5 and result["train_loss_last"] == 1.5
    assert result["val_accuracy"] == 0.95 and result["val_accuracy_best"] == 0.95
    assert result["time_to_accuracy_s"] == 3.0  # reached at t=5, everyone up at t=2
    assert result["first_iteration_s"] == 1.0  # worker0's first iteration ended at t=3
    assert result["time_to_accuracy_after_first_iteration_s"] == 2.0
    assert result["iteration_s_median"] == 1.0
    assert result["communication_share"] == pytest.approx(0.75)
    missed = metrics.training(events, target=0.99)
    assert missed["time_to_accuracy_s"] is None and missed["time_to_accuracy_after_first_iteration_s"] is None
    assert missed["first_iteration_s"] == 1.0


def test_rate_update_percentiles_and_profile():
    decisions = [{"t": 1, "apply_s": 0.01 * k, "active": [], "latency_s": [0.001 * k], "set": [[]] * k}
                 for k in range(1, 11)]
    updates = metrics.rate_updates(decisions)
    assert updates["decisions"] == 10 and updates["largest_batch"] == 10
    assert updates["latency_ms_p50"] in (5.0, 6.0) and updates["latency_ms_p99"] == 10.0
    assert updates["one_flow_latency_ms_p99"] == 1.0
    events = [{"kind": "compute", "task": "worker0", "iteration": i, "seconds": 0.5} for i in range(60)]
    events += [start(f"f{i}", i, iteration=i) for i in range(60)]
    prof = metrics.profile(events, iterations=50)
    assert len(prof["compute_s"]["worker0"]) == 50 and len(prof["flows"]) == 50


def test_host_flow_rates_reads_tc_units():
    text = """class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b
class htb 1:105 parent 1:1 prio 0 rate 12345Kbit ceil 12345Kbit burst 14999b cburst 14999b
class htb 1:10 parent 1:1 prio 0 rate 800Kbit ceil 100Mbit burst 1600b cburst 1600b
class htb 1:107 parent 1:1 prio 0 rate 1Gbit ceil 1Gbit burst 1600b cburst 1600b
class htb 1:108 parent 1:1 prio 0 rate 900bit ceil 900bit burst 1600b cburst 1600b"""
    rates = queues.host_flow_rates(text)
    assert rates == {5: pytest.approx(12.345), 7: pytest.approx(1000.0), 8: pytest.approx(0.0009)}


def test_the_iteration_window_starts_at_the_first_work_and_leaves_start_up_out():
    events = [{"kind": "hello", "t": 1.0, "task": "store0"},  # before torch and DGL are imported
              {"kind": "compute", "t": 20.5, "seconds": 0.5, "task": "store0", "iteration": 0},
              {"kind": "flow_start", "t": 20.2, "flow": 1},
              {"kind": "flow_end", "t": 24.0, "flow": 1},
              {"kind": "iteration_end", "t": 24.4, "task": "worker0", "iteration": 7},
              {"kind": "bye", "t": 25.0, "task": "store0"}]
    assert metrics.iteration_window(events) == (20.0, 24.4)
    assert metrics.iteration_window(events[:1]) is None  # a run that failed in start-up: the whole run is judged


def test_binned_host_mbps_spreads_each_transfer_over_the_bins_it_spans():
    from experiments.gnn.metrics import binned_host_mbps
    rows = [{"start_t": "100.5", "duration_s": "1.0", "bytes": "1000000", "src": "tbh1", "dst": "tbh2"},
            {"start_t": "100.0", "duration_s": "0.5", "bytes": "500000", "src": "tbh2", "dst": "tbh1"},
            {"start_t": "100.2", "duration_s": "", "bytes": "9", "src": "tbh1", "dst": "tbh3"}]  # still on the wire
    sent, received = binned_host_mbps(rows, t0=100.0, bin_s=1.0)
    assert sent["tbh1"] == pytest.approx([4.0, 4.0])  # 8 Mbit over [0.5, 1.5): half in each bin
    assert received["tbh2"] == pytest.approx([4.0, 4.0])
    assert sent["tbh2"] == pytest.approx([4.0, 0.0]) and received["tbh1"] == pytest.approx([4.0, 0.0])
    assert "tbh3" not in received


def test_compute_by_task_is_the_mean_over_iterations_of_each_iterations_sum():
    from experiments.gnn.metrics import compute_by_task
    events = [{"kind": "compute", "task": "w0", "iteration": 0, "seconds": 1.0},
              {"kind": "compute", "task": "w0", "iteration": 0, "seconds": 0.5},
              {"kind": "compute", "task": "w0", "iteration": 1, "seconds": 2.5},
              {"kind": "flow_end", "task": "w0", "iteration": 1, "seconds": 99},
              {"kind": "compute", "task": "s0", "iteration": 0, "seconds": 0.25}]
    assert compute_by_task(events) == {"s0": 0.25, "w0": 2.0}
