"""TCP connections of a run's hosts over time: the spec's ``capture.tcp_interval_s``.

Every interval, each captured host's established TCP connections as its kernel holds
them, read from the kernel's sock_diag netlink interface (what ``ss -tin`` reads, without
a process per host per sample): one row per connection per sample in
``raw/tcp_sockets.csv`` (``time_s`` on the run's time axis, as ``cpu.csv``'s). The
kernel's counters say how much a connection re-sent in all; the samples say when, and
which connection: a stalled collective is one connection whose retransmission timer
backed off.

A row's fields, from ``struct inet_diag_msg`` and ``struct tcp_info`` (linux/inet_diag.h,
linux/tcp.h): ``local``, ``peer`` (``ip:port``, ``[ipv6]:port``; an IPv4-mapped IPv6
address as the IPv4 one it is); ``recv_q`` (bytes received, not yet read by the
application) and ``send_q`` (bytes written, not yet acknowledged: sent or not), as ss's Recv-Q and
Send-Q; ``rto_ms`` (tcpi_rto, µs, as ms: the retransmission timeout, backoff
included); ``srtt_ms`` (tcpi_rtt, µs, as ms: the smoothed RTT); ``cwnd`` (segments);
``unacked`` (segments in flight); ``backoff`` (timeouts since the last ACK);
``retrans_total`` (segments re-sent over the connection's life); ``lost`` (segments
deemed lost now); ``bytes_acked``, ``bytes_received`` (over its life). A field the
kernel's ``tcp_info`` is too short to hold (an older kernel) reads 0, as in ss.

A *backoff span* is a stretch of consecutive samples of one connection in which the
sender's retransmission timer has backed off (``backoff`` > 0: a timeout fired and no
ACK since has reset it) while data is outstanding (``unacked`` > 0): the connection is
waiting on its timer, not on its peer's application. ``raw/tcp_backoffs.csv`` lists
them, each with the smoothed RTT the sender held in the sample before it (what its
timeout was computed from). A span is as long as the samples show it: a span shorter
than the interval can be missed, and its ends are known to one interval.

The sampler's cost (its thread's CPU time) is reported beside the queue sampler's: it
competes with the emulation for the same cores.
"""
from __future__ import annotations

import csv
import os
import socket
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

from experiments.platform import netlink, sampling
from experiments.platform.netlink import NETLINK_SOCK_DIAG, NLM_F_DUMP, NLM_F_REQUEST
from experiments.platform.sampling import Sampler

TCP_SOCKETS = "tcp_sockets.csv"
TCP_BACKOFFS = "tcp_backoffs.csv"
SOCKET_COLUMNS = ["time_s", "host", "local", "peer", "send_q", "recv_q", "rto_ms", "srtt_ms", "cwnd", "unacked",
                  "backoff", "retrans_total", "lost", "bytes_acked", "bytes_received"]
BACKOFF_COLUMNS = ["host", "local", "peer", "start_s", "end_s", "samples", "backoff_max", "rto_ms_max",
                   "srtt_ms_before"]

# linux/sock_diag.h, linux/inet_diag.h, netinet/tcp.h (netlink's own: netlink.py)
TCPDIAG_GETSOCK = 18
INET_DIAG_INFO = 2
TCP_ESTABLISHED = 1
V4_MAPPED = bytes(10) + b"\xff\xff"
WHAT = "sock_diag"

# Netlink is in host byte order, but for the addresses and ports (network order).
DIAG_REQ = struct.Struct("=BBBB48xII")  # inet_diag_req: family, src_len, dst_len, ext, sockid (0: any), states, dbs
DIAG_MSG = struct.Struct("=B3xHH16s16s16xII8x")  # inet_diag_msg: family, sport, dport, src, dst, rqueue, wqueue
# tcp_info's prefix: backoff, rto (µs), unacked, lost, rtt (µs), snd_cwnd, total_retrans, bytes_acked, bytes_received
TCP_INFO = struct.Struct("=4xB3xI12xI4xI32xI8xI16xI16xQQ")


def diag_request() -> bytes:
    """A dump request for every established TCP connection, IPv4 and IPv6, with its tcp_info.

    The older TCPDIAG_GETSOCK request, not SOCK_DIAG_BY_FAMILY's inet_diag_req_v2: the
    kernel answers it for both families in one walk of its TCP hash table (it dumps it
    as AF_UNSPEC), where v2 takes one walk per family. The table is the whole box's,
    every namespace's connections in it (262,144 buckets here), so a walk is most of a
    read's cost: the one walk halves it (``make bench``'s tcp_sampler rows)."""
    body = DIAG_REQ.pack(socket.AF_INET, 0, 0, 1 << (INET_DIAG_INFO - 1), 1 << TCP_ESTABLISHED, 0)
    return netlink.request(TCPDIAG_GETSOCK, body, NLM_F_REQUEST | NLM_F_DUMP)


REQUEST = diag_request()


def endpoint(family: int, raw: bytes, port: int) -> str:
    """An address as ss writes it, ``ip:port`` or ``[ipv6]:port``, but a dual-stack
    socket's IPv4-mapped IPv6 address (``::ffff:10.0.0.1``) as the IPv4 one it is."""
    if family == socket.AF_INET:
        return f"{socket.inet_ntop(socket.AF_INET, raw[:4])}:{port}"
    if raw[:12] == V4_MAPPED:
        return f"{socket.inet_ntop(socket.AF_INET, raw[12:16])}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, raw[:16])}]:{port}"


def parse_connection(kind: int, body: bytes) -> dict:
    """A connection of the dump's reply (a message of another type is a ValueError)."""
    if kind != TCPDIAG_GETSOCK:  # a reply's type is its request's
        raise ValueError(f"sock_diag: a message of type {kind}, not a connection")
    if len(body) < DIAG_MSG.size:
        raise ValueError(f"sock_diag: a connection of {len(body)} bytes, under inet_diag_msg's {DIAG_MSG.size}")
    family, sport, dport, src, dst, rqueue, wqueue = DIAG_MSG.unpack_from(body)
    info = netlink.attributes(body, DIAG_MSG.size, WHAT).get(INET_DIAG_INFO)
    if info is None:  # asked for (idiag_ext): without it every field would read a silent 0
        raise ValueError("sock_diag: a connection without its tcp_info")
    # an older kernel's shorter tcp_info: what it lacks reads 0; a newer one's longer tail is not read
    backoff, rto, unacked, lost, rtt, cwnd, retrans_total, acked, received = TCP_INFO.unpack(
        info[:TCP_INFO.size].ljust(TCP_INFO.size, b"\0"))
    return {"recv_q": rqueue, "send_q": wqueue, "local": endpoint(family, src, socket.ntohs(sport)),
            "peer": endpoint(family, dst, socket.ntohs(dport)), "rto_ms": rto / 1000, "srtt_ms": rtt / 1000,
            "cwnd": cwnd, "unacked": unacked, "backoff": backoff, "retrans_total": retrans_total, "lost": lost,
            "bytes_acked": acked, "bytes_received": received}


def _namespace_id(ns_path: str) -> tuple[int, int]:
    try:
        status = os.stat(ns_path)
    except OSError as err:
        raise OSError(err.errno, f"{ns_path}: {err.strerror}") from None
    return status.st_dev, status.st_ino


class TcpConnections:
    """A network namespace's established TCP connections (IPv4 and IPv6), read from its
    kernel through one sock_diag socket opened once in it."""

    def __init__(self, ns_path: str):
        self.ns_path, self.ns_id = ns_path, _namespace_id(ns_path)
        self.sock = netlink.netns_socket(ns_path, NETLINK_SOCK_DIAG)
        self.sock.settimeout(sampling.READ_TIMEOUT_S)  # a read that hangs ends the sampling

    def read(self) -> list[dict]:
        """The connections now; an OSError once the namespace's process is gone: the
        socket would keep reading the namespace it holds alive, emptied."""
        try:
            same = _namespace_id(self.ns_path) == self.ns_id
        except OSError:
            same = False
        if not same:
            raise OSError(f"{self.ns_path}: gone (its process ended)")
        return [parse_connection(kind, body) for kind, body in netlink.dump(self.sock, REQUEST, WHAT)]

    def close(self) -> None:
        self.sock.close()


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
        """Each host's namespace (its PID's; None: this process's) opened here, so a host
        that cannot be read fails before any sampling starts."""
        super().__init__(raw / TCP_SOCKETS, interval_s, t0)
        self.raw = raw
        self.connections: dict[str, TcpConnections] = {}
        for host, pid in host_pids.items():
            try:
                self.connections[host] = TcpConnections(f"/proc/{pid or 'self'}/ns/net")
            except BaseException as err:  # an interrupt too: each socket opened holds a namespace alive
                self.close()
                if isinstance(err, OSError):
                    raise OSError(f"{host}: its TCP connections cannot be read: {err.strerror or err}") from err
                raise
        self.spans = BackoffSpans()
        self.lock = threading.Lock()  # a sampler stuck past stop() must not add to the spans being closed

    def sample(self, t: float, writer) -> None:
        """Every host read first: a round that fails leaves no part of itself behind."""
        read = {}
        for host, conns in self.connections.items():
            try:
                read[host] = conns.read()
            except OSError as err:
                raise OSError(f"{host}: its TCP connections cannot be read: {err.strerror or err}") from err
        with self.lock:
            for host, conns in read.items():
                self.spans.add(t, host, conns)
                for c in conns:
                    writer.writerow([f"{t:.3f}", host, *(c[k] for k in SOCKET_COLUMNS[2:])])

    def close(self) -> None:
        """Release the sockets: each holds its host's namespace alive."""
        for conns in self.connections.values():
            conns.close()

    def stop(self) -> dict:
        """Stop sampling, write the backoff spans; the summary fields."""
        try:
            fields = super().stop()
        finally:
            self.close()
        with self.lock:
            spans = self.spans.close()
        with open(self.raw / TCP_BACKOFFS, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=BACKOFF_COLUMNS)
            writer.writeheader()
            writer.writerows(spans)
        longest = max((s["end_s"] - s["start_s"] for s in spans), default=0.0)
        return {**fields, "tcp_backoff_spans": len(spans), "tcp_backoff_longest_s": round(longest, 3)}
