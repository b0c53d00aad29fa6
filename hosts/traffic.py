"""Bulk TCP traffic between emulated hosts with iperf3: goodput per interval, and the
sender's TCP state per interval.

Goodput is measured at the receiver (the iperf3 server's JSON intervals), so it
counts what the network delivered, not what the sender queued. The sender's report
(the client's intervals) says why: its retransmissions, congestion window and RTT.
"""
from __future__ import annotations

import json

IPERF_BASE_PORT = 5201


def server_cmd(port: int) -> list[str]:
    """One-off iperf3 server with JSON output (written when the test ends)."""
    return ["iperf3", "-s", "-1", "-J", "-p", str(port)]


def client_cmd(dst_ip: str, port: int, duration_s: float, congestion: str | None = None) -> list[str]:
    cmd = ["iperf3", "-c", dst_ip, "-p", str(port), "-t", f"{duration_s:g}", "-J"]
    if congestion:
        cmd += ["-C", congestion]
    return cmd


def _intervals(iperf_json: str) -> list[dict]:
    try:
        report = json.loads(iperf_json)
    except json.JSONDecodeError as err:
        raise ValueError(f"iperf3 report is not JSON: {err}") from err
    if "error" in report and not report.get("intervals"):
        raise ValueError(f"iperf3 failed: {report['error']}")
    return report.get("intervals", [])


def receiver_series(iperf_json: str, start_offset_s: float) -> list[tuple[float, float]]:
    """(run time at the end of each interval [s], goodput [Mbit/s]) from an iperf3
    server report; ``start_offset_s`` is when the flow started in run time."""
    return [(start_offset_s + i["sum"]["end"], i["sum"]["bits_per_second"] / 1e6) for i in _intervals(iperf_json)]


def sender_series(iperf_json: str, start_offset_s: float) -> list[tuple[float, int, int, float]]:
    """(run time at the end of each interval [s], segments retransmitted in it, congestion
    window at its end [bytes], smoothed RTT at its end [ms]) from an iperf3 client report
    of one stream; ``start_offset_s`` is when the flow started in run time."""
    series = []
    for interval in _intervals(iperf_json):
        stream = interval["streams"][0]
        series.append((start_offset_s + stream["end"], stream["retransmits"], stream["snd_cwnd"], stream["rtt"] / 1000))
    return series


def check_report(iperf_json: str) -> None:
    """Raise ValueError (one line) if an iperf3 JSON report is unparsable or reports an error."""
    try:
        report = json.loads(iperf_json)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err})") from None
    if not isinstance(report, dict):
        raise ValueError("not an iperf3 report")
    if report.get("error"):
        raise ValueError(f"iperf3: {report['error']}")
