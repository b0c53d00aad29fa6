"""experiments/cojob/conformance.py's sender-queue check on hand-made events and counters."""
from __future__ import annotations

import pytest

from experiments.cojob.conformance import sender_queue_share


def flow(n, src, dst, t, size, src_port=40000, dst_port=5000):
    return [{"kind": "flow_start", "flow": n, "src": src, "dst": dst, "t": t, "src_port": src_port + n,
             "dst_port": dst_port},
            {"kind": "flow_end", "flow": n, "t": t + 1, "bytes": size}]


def test_each_flow_counts_in_the_sender_queue_in_force_at_its_start_and_loopback_not_at_all():
    events = [*flow(1, "tbh1", "tbh2", 0.0, 600), *flow(2, "tbh1", "tbh2", 5.0, 400),
              *flow(3, "tbh1", "tbh1", 0.0, 10_000)]  # worker and PS on one host: loopback
    decisions = [{"t": 1.0, "set": [["tbh1", "tbh2", "tcp", 40002, 5000, 2, 3]]}]  # flow 2 in sender queue 3
    counters = {"tbh1": {"0": {"bytes": 99}, "3": {"bytes": 400}, "7": {"bytes": 600}}}  # queue 0: control
    result = sender_queue_share(events, decisions, counters)
    assert result == {"sender_queue_match_share": pytest.approx(1.0), "per_host": {"tbh1": 1.0}}
    counters = {"tbh1": {"3": {"bytes": 100}, "7": {"bytes": 900}}}  # queue 3 got 10% of 40% asked for
    assert sender_queue_share(events, decisions, counters)["sender_queue_match_share"] == pytest.approx(0.7)
