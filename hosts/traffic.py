"""Bulk TCP traffic between emulated hosts with iperf3: goodput per interval, and the
sender's TCP state per interval.

Goodput is measured at the receiver (the iperf3 server's JSON intervals), so it
counts what the network delivered, not what the sender queued. The sender's report
(the client's intervals) says why: its retransmissions, congestion window and RTT.
"""
from __future__ import annotations

import json
from typing import NamedTuple

IPERF_BASE_PORT = 5201


def server_cmd(port: int) -> list[str]:
    """One-off iperf3 server with JSON output (written when the test ends)."""
    return ["iperf3", "-s", "-1", "-J", "-p", str(port)]


def client_cmd(dst_ip: str, port: int, duration_s: float, congestion: str | None = None) -> list[str]:
    cmd = ["iperf3", "-c", dst_ip, "-p", str(port), "-t", f"{duration_s:g}", "-J"]
    if congestion:
        cmd += ["-C", congestion]
    return cmd


def read_report(iperf_json: str) -> dict:
    """An iperf3 JSON report; ValueError (one line) if it is unparsable or reports an error."""
    try:
        report = json.loads(iperf_json)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err})") from None
    if not isinstance(report, dict):
        raise ValueError("not an iperf3 report")
    if report.get("error"):
        raise ValueError(f"iperf3: {report['error']}")
    return report


def receiver_series(iperf_json: str, start_offset_s: float) -> list[tuple[float, float]]:
    """(run time at the end of each interval [s], goodput [Mbit/s]) from an iperf3
    server report; ``start_offset_s`` is when the flow started in run time."""
    return [(start_offset_s + i["sum"]["end"], i["sum"]["bits_per_second"] / 1e6)
            for i in read_report(iperf_json).get("intervals", [])]


class SenderInterval(NamedTuple):
    time_s: float  # run time at the interval's end
    retransmits: int  # segments retransmitted in the interval
    cwnd_bytes: int  # congestion window at its end
    rtt_ms: float  # smoothed RTT at its end


class SenderReport(NamedTuple):
    intervals: list[SenderInterval]
    retransmits: int  # over the whole test: iperf3's own total (its intervals may leave out a short last one)


def sender_report(iperf_json: str, start_offset_s: float) -> SenderReport:
    """An iperf3 client report of one stream, per interval and in total; ``start_offset_s``
    is when the flow started in run time."""
    report = read_report(iperf_json)
    return SenderReport([SenderInterval(start_offset_s + i["streams"][0]["end"], i["streams"][0]["retransmits"],
                                        i["streams"][0]["snd_cwnd"], i["streams"][0]["rtt"] / 1000)
                         for i in report.get("intervals", [])],
                        report["end"]["sum_sent"]["retransmits"])
