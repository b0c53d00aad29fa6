"""iperf3 reports -> per-interval series (hosts/traffic.py), on a real client report: the
priority test's low flow under BBR, 2-6 s, starved by a high flow from 4 s."""
import json
from pathlib import Path

import pytest

from hosts import traffic

REPORT = (Path(__file__).parent / "data" / "iperf3-client-starved.json").read_text()


def test_sender_series_reads_each_interval_at_its_end_in_run_time():
    series = traffic.sender_series(REPORT, start_offset_s=10.0)
    assert [round(t, 3) for t, *_ in series] == [13.001, 14.0, 15.0, 16.001]
    assert [r for _, r, _, _ in series] == [0, 0, 10, 11]
    assert [c for _, _, c, _ in series] == [196856, 214752, 187908, 214752]
    rtts = [rtt for *_, rtt in series]
    assert rtts[:2] == pytest.approx([6.802, 7.981])
    assert rtts[3] > 500  # starved: its packets wait in the low queue


def test_sender_series_refuses_a_failed_report():
    with pytest.raises(ValueError, match="iperf3 failed: unable to connect"):
        traffic.sender_series(json.dumps({"error": "unable to connect"}), 0.0)
    with pytest.raises(ValueError, match="not JSON"):
        traffic.sender_series("{", 0.0)
