"""iperf3 reports -> per-interval series (hosts/traffic.py), on a real client report: the
priority test's low flow under BBR, 2-6 s, starved by a high flow from 4 s."""
import json
from pathlib import Path

import pytest

from hosts import traffic

REPORT = (Path(__file__).parent / "data" / "iperf3-client-starved.json").read_text()


def test_sender_report_reads_each_interval_at_its_end_in_run_time():
    sender = traffic.sender_report(REPORT, start_offset_s=10.0)
    series = sender.intervals
    assert [round(p.time_s, 3) for p in series] == [13.001, 14.0, 15.0, 16.001]
    assert [p.retransmits for p in series] == [0, 0, 10, 11]
    assert [p.cwnd_bytes for p in series] == [196856, 214752, 187908, 214752]
    assert [p.rtt_ms for p in series[:2]] == pytest.approx([6.802, 7.981])
    assert series[3].rtt_ms > 500  # starved: its packets wait in the low queue
    assert sender.retransmits == 56  # iperf3's total over the whole test


@pytest.mark.parametrize("text, message", [
    ("{", r"^not JSON \("), ("[]", "^not an iperf3 report$"),
    (json.dumps({"error": "unable to connect", "intervals": [{}]}), "^iperf3: unable to connect$")])
def test_a_report_that_cannot_be_read_says_why_in_one_line(text, message):
    for read in (traffic.read_report, lambda t: traffic.sender_report(t, 0.0), lambda t: traffic.receiver_series(t, 0.0)):
        with pytest.raises(ValueError, match=message):
            read(text)
