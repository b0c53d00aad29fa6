"""TCP connections of a run's hosts over time: the spec's ``capture.tcp_interval_s``.

Every interval, each captured host's established TCP connections as its kernel holds
them (``ss -tinH state established`` in the host's namespace): one row per connection
per sample in ``raw/tcp_sockets.csv`` (``time_s`` on the run's time axis, as
``cpu.csv``'s). The kernel's counters say how much a connection re-sent in all; the
samples say when, and which connection: a stalled collective is one connection whose
retransmission timer backed off.

A *backoff span* is a stretch of consecutive samples of one connection in which the
sender's retransmission timer has backed off (``backoff`` > 0: a timeout fired and no
ACK since has reset it) while data is outstanding (``unacked`` > 0): the connection is
waiting on its timer, not on its peer's application. ``raw/tcp_backoffs.csv`` lists
them, each with the smoothed RTT the sender held in the sample before it (what its
timeout was computed from). A span is as long as the samples show it: a span shorter
than the interval can be missed, and its ends are known to one interval.

The sampler's cost (its ``ss`` processes' CPU time) is reported beside the queue
sampler's: it competes with the emulation for the same cores.
"""
from __future__ import annotations

import csv
import threading
from dataclasses import dataclass, field
from pathlib import Path

from controller.hostnet import netns_cmd
from experiments.platform.sampling import Sampler

TCP_SOCKETS = "tcp_sockets.csv"
TCP_BACKOFFS = "tcp_backoffs.csv"
SOCKET_COLUMNS = ["time_s", "host", "local", "peer", "send_q", "recv_q", "rto_ms", "srtt_ms", "cwnd", "unacked",
                  "backoff", "retrans_total", "lost", "bytes_acked", "bytes_received"]
BACKOFF_COLUMNS = ["host", "local", "peer", "start_s", "end_s", "samples", "backoff_max", "rto_ms_max",
                   "srtt_ms_before"]


def ss_cmd(netns_pid: int | None) -> list[str]:
    """Every established TCP connection with the kernel's view of it, no header, numeric."""
    return netns_cmd(netns_pid, ["ss", "-tinH", "state", "established"])


def address(text: str) -> str:
    """``ss``'s endpoint as ``ip:port``: an IPv4-mapped IPv6 one (a dual-stack socket's
    peer, e.g. ``[::ffff:10.0.0.1]:20000``) as the IPv4 address it is."""
    if text.startswith("[::ffff:") and "]:" in text:
        ip, port = text[len("[::ffff:"):].split("]:", 1)
        return f"{ip}:{port}"
    return text


def _number(value: str) -> float:
    return float(value.rstrip("ms")) if value.endswith("ms") else float(value)


def parse_ss(text: str) -> list[dict]:
    """``ss -tinH state established``'s output as one dict a connection: ``local``,
    ``peer``, ``send_q``, ``recv_q`` and the info line's fields that say whether it
    waits on its timer (absent ones read 0: the kernel prints ``unacked``, ``backoff``,
    ``lost`` and ``retrans`` only when non-zero)."""
    conns: list[dict] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():  # "recv_q send_q local peer [process]"
            f = line.split()
            if len(f) < 4:
                raise ValueError(f"ss: unreadable connection line {line!r}")
            conns.append({"recv_q": int(f[0]), "send_q": int(f[1]), "local": address(f[2]), "peer": address(f[3]),
                          "rto_ms": 0.0, "srtt_ms": 0.0, "cwnd": 0, "unacked": 0, "backoff": 0, "retrans_total": 0,
                          "lost": 0, "bytes_acked": 0, "bytes_received": 0})
            continue
        if not conns:
            raise ValueError(f"ss: an info line before any connection: {line.strip()[:80]!r}")
        conn = conns[-1]
        for token in line.split():
            key, sep, value = token.partition(":")
            if not sep:
                continue
            if key == "rto":
                conn["rto_ms"] = _number(value)
            elif key == "rtt":
                conn["srtt_ms"] = _number(value.split("/", 1)[0])
            elif key == "retrans":  # "now/total"
                _now, slash, total = value.partition("/")
                if not slash:
                    raise ValueError(f"ss: unreadable retrans:{value}")
                conn["retrans_total"] = int(total)
            elif key in ("cwnd", "unacked", "backoff", "lost", "bytes_acked", "bytes_received"):
                conn[key] = int(value)
    return conns


@dataclass
class _Open:
    start_s: float
    end_s: float
    samples: int = 1
    backoff_max: int = 0
    rto_ms_max: float = 0.0
    srtt_ms_before: float | None = None


@dataclass
class BackoffSpans:
    """Backoff spans from consecutive samples: feed each sample's connections of a host
    with ``add``; ``close`` ends the spans still open at the last sample."""
    spans: list[dict] = field(default_factory=list)
    _open: dict[tuple, _Open] = field(default_factory=dict)
    _last_srtt: dict[tuple, float] = field(default_factory=dict)

    def add(self, t: float, host: str, conns: list[dict]) -> None:
        seen = set()
        for c in conns:
            key = (host, c["local"], c["peer"])
            seen.add(key)
            waiting = c["backoff"] > 0 and c["unacked"] > 0
            span = self._open.get(key)
            if waiting:
                if span is None:
                    span = self._open[key] = _Open(t, t, 0, srtt_ms_before=self._last_srtt.get(key))
                span.end_s, span.samples = t, span.samples + 1
                span.backoff_max = max(span.backoff_max, c["backoff"])
                span.rto_ms_max = max(span.rto_ms_max, c["rto_ms"])
            else:
                if span is not None:
                    self._finish(key)
                self._last_srtt[key] = c["srtt_ms"]
        for key in [k for k in self._open if k[0] == host and k not in seen]:
            self._finish(key)  # the connection closed while it waited
        for key in [k for k in self._last_srtt if k[0] == host and k not in seen]:
            del self._last_srtt[key]  # closed: a later connection on the same ports is another

    def _finish(self, key: tuple) -> None:
        span = self._open.pop(key)
        host, local, peer = key
        self.spans.append({"host": host, "local": local, "peer": peer, "start_s": round(span.start_s, 3),
                           "end_s": round(span.end_s, 3), "samples": span.samples, "backoff_max": span.backoff_max,
                           "rto_ms_max": span.rto_ms_max, "srtt_ms_before": span.srtt_ms_before})

    def close(self) -> list[dict]:
        for key in list(self._open):
            self._finish(key)
        return sorted(self.spans, key=lambda s: (s["start_s"], s["host"], s["local"]))


class TcpSampler(Sampler):
    """Every ``interval_s``, every host's established TCP connections into
    ``raw/tcp_sockets.csv``; its backoff spans into ``raw/tcp_backoffs.csv`` at ``stop``."""

    header = SOCKET_COLUMNS
    prefix = "tcp"

    def __init__(self, host_pids: dict[str, int | None], raw: Path, interval_s: float, t0: float):
        super().__init__(raw / TCP_SOCKETS, interval_s, t0)
        self.host_pids, self.raw = host_pids, raw
        self.spans = BackoffSpans()
        self.lock = threading.Lock()  # a sampler stuck past stop() must not add to the spans being closed

    def sample(self, t: float, writer) -> None:
        """Every host read first: a round that fails leaves no part of itself behind."""
        read = {host: parse_ss(self.output(ss_cmd(pid))) for host, pid in self.host_pids.items()}
        with self.lock:
            for host, conns in read.items():
                self.spans.add(t, host, conns)
                for c in conns:
                    writer.writerow([f"{t:.3f}", host, *(c[k] for k in SOCKET_COLUMNS[2:])])

    def stop(self) -> dict:
        """Stop sampling, write the backoff spans; the summary fields."""
        fields = super().stop()
        with self.lock:
            spans = self.spans.close()
        with open(self.raw / TCP_BACKOFFS, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=BACKOFF_COLUMNS)
            writer.writeheader()
            writer.writerows(spans)
        longest = max((s["end_s"] - s["start_s"] for s in spans), default=0.0)
        return {**fields, "tcp_backoff_spans": len(spans), "tcp_backoff_longest_s": round(longest, 3)}
