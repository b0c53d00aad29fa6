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


def test_a_sized_transfer_reports_every_byte_and_its_completion_time(tmp_path):
    """On 127.0.0.1: the receiver counts every byte per interval and acknowledges the
    end; the completion time runs from the sender's start to the last byte."""
    import socket
    import threading

    from hosts import transfer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    received, sent = {}, {}
    receiver = threading.Thread(target=transfer.receive, args=(received, ("127.0.0.1", port), 0.1, 10.0))
    receiver.start()
    transfer.send(sent, ("127.0.0.1", port), 3_000_001, None, 10.0)
    receiver.join(10)
    assert received["bytes"] == sent["bytes"] == sum(received["received"]) == 3_000_001
    fct = transfer.flow_completion_s(sent, received)
    assert 0 < fct <= sent["acknowledged_s"] - sent["started_s"]
    assert received["first_byte_s"] <= received["last_byte_s"]
    series = transfer.receiver_series(received, 5.0, sent["started_s"])
    assert sum(mbps * 0.1 * 1e6 / 8 for _, mbps in series) == pytest.approx(3_000_001)
    assert series[0][0] == pytest.approx(5.0 + received["accepted_s"] - sent["started_s"] + 0.1)
    # a receiver short of the sender's bytes (or either side's error) has no completion time
    assert transfer.flow_completion_s(sent, {**received, "bytes": 3_000_000}) is None
    assert transfer.flow_completion_s({**sent, "error": "OSError: reset"}, received) is None


def test_a_transfer_that_finds_no_receiver_writes_its_error_and_exits_1(tmp_path, capsys):
    from hosts import transfer
    out = tmp_path / "send.json"
    assert transfer.main(["send", "--to", "127.0.0.1:9", "--bytes", "10", "--out", str(out),
                          "--timeout-s", "0.3"]) == 1
    report = json.loads(out.read_text())
    assert report["bytes"] == 0 and report["error"].startswith("PeerError: receiver at 127.0.0.1:9 not listening")
    assert capsys.readouterr().err.startswith("hosts.transfer send: PeerError")
