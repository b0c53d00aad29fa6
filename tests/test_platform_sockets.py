"""The TCP sampler: ss's text read per connection, backoff spans cut from samples, and
a real sampler over a real connection on 127.0.0.1 (no fabric needed)."""
from __future__ import annotations

import csv
import shutil
import socket
import time

import pytest

from experiments.platform import sampling
from experiments.platform.sockets import BackoffSpans, TcpSampler, parse_ss

SS = """0      0      10.0.0.2:20000 10.0.0.1:41234
\t cubic wscale:9,9 rto:204 rtt:3.5/1.75 ato:40 mss:8948 cwnd:10 bytes_sent:1200 bytes_acked:1201 bytes_received:99 segs_out:5 lastsnd:10 busy:4ms rcv_space:89480 minrtt:0.04
0      131072 [::ffff:10.0.0.2]:20001 [::ffff:10.0.0.3]:50000
\t bbr:(bw:7084968744bps,mrtt:0.037,pacing_gain:2.88672) wscale:7,7 rto:1632 backoff:3 rtt:12.25/4.5 mss:8948 cwnd:1 unacked:14 retrans:1/9 lost:14 bytes_acked:5000 bytes_received:0
"""


def test_ss_text_is_read_per_connection_with_the_timer_fields():
    quiet, waiting = parse_ss(SS)
    assert quiet == {"recv_q": 0, "send_q": 0, "local": "10.0.0.2:20000", "peer": "10.0.0.1:41234", "rto_ms": 204.0,
                     "srtt_ms": 3.5, "cwnd": 10, "unacked": 0, "backoff": 0, "retrans_total": 0, "lost": 0,
                     "bytes_acked": 1201, "bytes_received": 99}
    # a dual-stack socket's IPv4-mapped addresses read as the IPv4 ones they are
    assert (waiting["local"], waiting["peer"], waiting["send_q"]) == ("10.0.0.2:20001", "10.0.0.3:50000", 131072)
    assert (waiting["rto_ms"], waiting["backoff"], waiting["unacked"], waiting["retrans_total"], waiting["lost"]) == \
        (1632.0, 3, 14, 9, 14)
    assert parse_ss("") == []


@pytest.mark.parametrize("text", ["0 0 10.0.0.1:1\n",  # no peer
                                  "\t rto:204\n",  # an info line of no connection
                                  "0 0 10.0.0.1:1 10.0.0.2:2\n\t cwnd:x\n",
                                  "0 0 10.0.0.1:1 10.0.0.2:2\n\t retrans:3\n"])
def test_unreadable_ss_text_is_an_error_not_a_silent_row(text):
    with pytest.raises(ValueError):
        parse_ss(text)


def _conn(local: str, backoff: int = 0, unacked: int = 0, srtt: float = 2.0, rto: float = 204.0) -> dict:
    return {"local": local, "peer": "10.0.0.9:9", "backoff": backoff, "unacked": unacked, "srtt_ms": srtt,
            "rto_ms": rto}


def test_a_span_is_the_samples_a_connection_waited_on_its_backed_off_timer_with_data_out():
    spans = BackoffSpans()
    spans.add(0.0, "tbh1", [_conn("a:1", srtt=3.0), _conn("b:2")])
    spans.add(0.5, "tbh1", [_conn("a:1", backoff=1, unacked=4, rto=400), _conn("b:2", backoff=2)])  # b: nothing out
    spans.add(1.0, "tbh1", [_conn("a:1", backoff=2, unacked=4, rto=800), _conn("b:2")])
    spans.add(1.5, "tbh1", [_conn("a:1", srtt=9.0), _conn("b:2", backoff=1, unacked=1)])
    spans.add(1.5, "tbh2", [_conn("c:3", backoff=1, unacked=2)])
    spans.add(2.0, "tbh1", [_conn("b:2", backoff=1, unacked=1)])  # tbh2 not sampled again: c still open
    got = spans.close()
    assert [(s["host"], s["local"], s["start_s"], s["end_s"], s["samples"]) for s in got] == [
        ("tbh1", "a:1", 0.5, 1.0, 2), ("tbh1", "b:2", 1.5, 2.0, 2), ("tbh2", "c:3", 1.5, 1.5, 1)]
    a = got[0]
    assert (a["backoff_max"], a["rto_ms_max"], a["srtt_ms_before"]) == (2, 800.0, 3.0)
    assert got[2]["srtt_ms_before"] is None  # never seen before it waited


def test_a_connection_that_closes_while_it_waits_ends_its_span_at_its_last_sample():
    spans = BackoffSpans()
    spans.add(0.0, "tbh1", [_conn("a:1", backoff=1, unacked=1)])
    spans.add(0.5, "tbh1", [])
    spans.add(1.0, "tbh1", [_conn("a:1", backoff=1, unacked=1)])  # a new connection on the same ports
    assert [(s["start_s"], s["end_s"]) for s in spans.close()] == [(0.0, 0.0), (1.0, 1.0)]


def _sampled(sampler, rounds: int, deadline_s: float = 10.0) -> dict:
    """Run ``sampler`` until it has sampled ``rounds`` times (or ended), then stop it."""
    sampler.start()
    deadline = time.monotonic() + deadline_s
    while sampler.samples < rounds and sampler.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return sampler.stop()


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs iproute2's ss")
def test_the_sampler_records_a_live_connection_and_its_own_cost(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    ends = ("%s:%d" % client.getsockname(), "%s:%d" % server.getsockname())
    try:
        client.sendall(b"x" * 5000)
        fields = _sampled(TcpSampler({"here": None}, tmp_path, 0.1, time.monotonic()), 3)
    finally:
        for s in (client, peer, server):
            s.close()
    assert fields["tcp_samples"] >= 2 and fields["tcp_sampler_cpu_s"] > 0 and "tcp_sampler_error" not in fields
    rows = list(csv.DictReader((tmp_path / "tcp_sockets.csv").open()))
    ours = [r for r in rows if (r["local"], r["peer"]) == ends]
    assert len(ours) >= 2 and all(r["host"] == "here" and int(r["bytes_acked"]) > 5000 for r in ours), ours
    assert (fields["tcp_backoff_spans"], fields["tcp_backoff_longest_s"]) == (0, 0.0)
    assert (tmp_path / "tcp_backoffs.csv").read_text().splitlines() == [
        "host,local,peer,start_s,end_s,samples,backoff_max,rto_ms_max,srtt_ms_before"]


class _Failing(sampling.Sampler):
    header, prefix = ["time_s", "x"], "test"

    def __init__(self, path, fail):
        super().__init__(path, 0.05, time.monotonic())
        self.fail = fail

    def sample(self, t, writer):
        if self.samples == 2:
            self.fail(self)
        writer.writerow([f"{t:.3f}", self.samples])


def test_a_sampler_that_fails_any_way_keeps_its_rows_and_says_why(tmp_path):
    def unexpected(_sampler):
        raise KeyError("rtt")

    fields = _sampled(_Failing(tmp_path / "rows.csv", unexpected), 5)
    assert fields["test_samples"] == 2 and fields["test_sampler_error"] == "KeyError: 'rtt'"
    assert (tmp_path / "rows.csv").read_text().splitlines()[0] == "time_s,x"
    assert len((tmp_path / "rows.csv").read_text().splitlines()) == 3


def test_a_sampler_command_that_hangs_ends_the_sampling_instead_of_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(sampling, "COMMAND_TIMEOUT_S", 0.3)
    started = time.monotonic()
    fields = _sampled(_Failing(tmp_path / "rows.csv", lambda s: s.output(["sleep", "30"])), 5)
    assert time.monotonic() - started < 10
    assert fields["test_samples"] == 2 and "took over 0.3 s" in fields["test_sampler_error"]
