"""All-to-all bulk TCP traffic from one light process per emulated host, and its goodput.

One iperf3 process per flow is too heavy for an all-to-all bench (60 hosts are
3,540 flows on a 2-core box), so each host runs one single-threaded process that
drives all of its connections from one selector: it accepts a connection from every
peer, opens one to every peer, sends bulk data from one preallocated buffer for the
run's duration, and counts per incoming connection the bytes that arrived in each
interval. Goodput is measured at the receiver, so it counts what the network
delivered, not what the sender queued.

    python -m hosts.mesh --listen IP:PORT --peers IP:PORT,IP:PORT,... --duration-s D
        --interval-s 0.5 --out FILE.json [--start-at EPOCH_S] [--congestion bbr|cubic]
        [--connect-timeout-s 10]

Wire format: every connection opens with a HEADER_BYTES ASCII header, the sender's
listen address and its planned end (epoch seconds), then bulk bytes. The listen
address names the sender even where hosts share an IP (tests on 127.0.0.1); the
planned end tells a sender that finished from one that died. At the end a sender
half-closes and waits for the receiver to close, so every byte it counts as sent
was read by the receiver.

Report, written at the end (also on failure), peers named by their listen address
as given in --peers:
    {"host_addr": "IP:PORT", "start_epoch_s": float, "interval_s": float,
     "received": {peer: [bytes in interval 0, 1, ...]},  # interval i ends at (i+1)*interval_s
     "sent": {peer: total bytes}, "errors": [one-line strings]}
Every "received" list has the same length: the run's intervals, plus any in which
the tail of the data was still arriving after the end. The process exits 1 with the
errors on one stderr line if any occurred.
"""
from __future__ import annotations

import argparse
import errno
import json
import math
import os
import selectors
import socket
import sys
import time
from dataclasses import dataclass, field

from hosts.framing import ipv4_address

CHUNK_BYTES = 256 * 1024
# Unsent bytes a connection may hold in its send buffer. Without a bound, autotuning
# grows each send buffer to megabytes, and at the end 23 connections sharing a
# 25 Mbit/s link need longer than GRACE_S to deliver what was written before it.
NOTSENT_LOWAT_BYTES = 128 * 1024
HEADER_BYTES = 64
GRACE_S = 5.0
CONNECT_RETRY_S = 0.1
EARLY_EOF_SLACK_S = 0.05  # a sender's end, seen from a receiver on the same clock


def goodput_series(report: dict) -> list[tuple[float, float]]:
    """(seconds since the common start at the interval's end, Mbit/s) of everything the
    host received; the caller compares it with the host's link rate."""
    interval_s = report["interval_s"]
    totals = [sum(column) for column in zip(*report["received"].values())]
    return [((i + 1) * interval_s, total * 8 / interval_s / 1e6) for i, total in enumerate(totals)]


@dataclass
class Outgoing:
    """A connection this host sends on. States: waiting (to retry the connect),
    connecting, open, draining (half-closed, until the receiver closes), done, failed."""
    peer: str
    state: str = "waiting"
    sock: socket.socket | None = None
    retry_at: float = 0.0
    last_error: str = "not tried"
    sent: int = 0


@dataclass
class Incoming:
    """A connection this host receives on; the peer is known once its header is read."""
    sock: socket.socket
    header: bytearray = field(default_factory=bytearray)
    peer: str | None = None
    peer_end: float = 0.0  # monotonic


class Mesh:
    """One host's side of the all-to-all: every connection in one selector, times in
    time.monotonic() (converted once from the common epoch start)."""

    def __init__(self, listen: str, peers: list[str], start_epoch_s: float, duration_s: float,
                 interval_s: float, congestion: str | None, connect_timeout_s: float):
        self.clock_offset = time.time() - time.monotonic()
        self.listen = listen
        self.start_epoch_s = start_epoch_s
        self.start = start_epoch_s - self.clock_offset
        self.end = self.start + duration_s
        self.duration_s = duration_s
        self.interval_s = interval_s
        self.congestion = congestion
        self.connect_timeout_s = connect_timeout_s
        self.connect_deadline = time.monotonic() + connect_timeout_s
        self.header = f"{listen} {start_epoch_s + duration_s:.6f}".encode().ljust(HEADER_BYTES)
        self.payload = memoryview(bytearray(CHUNK_BYTES))
        self.recv_buffer = bytearray(CHUNK_BYTES)
        self.selector = selectors.DefaultSelector()
        self.listener: socket.socket | None = None
        self.outgoing = [Outgoing(peer) for peer in peers]
        self.unconnected = list(self.outgoing)
        self.expected_peers = set(peers)
        self.received: dict[str, list[int]] = {}
        self.finished_peers: set[str] = set()
        self.errors: list[str] = []
        self.sending = False
        self.stopped = False

    def run(self) -> None:
        """Drive every connection until all have closed, an error, or the end plus GRACE_S."""
        try:
            self.listener = socket.create_server(ipv4_address(self.listen), backlog=socket.SOMAXCONN)
        except OSError as err:
            self.errors.append(f"cannot listen on {self.listen}: {err}")
            return
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ)
        while not self.errors and not self.all_finished():
            now = time.monotonic()
            if now >= self.end + GRACE_S:
                self.note_unfinished()
                break
            self.on_clock(now)
            if self.errors:
                break
            for key, _ in self.selector.select(self.next_timer() - now):
                if key.data is None:
                    self.accept()
                elif isinstance(key.data, Outgoing):
                    self.on_outgoing(key.data)
                else:
                    self.on_incoming(key.data)
        for out in self.unconnected:  # so that every host names a peer that never came up
            if out.state != "failed":
                self.errors.append(f"not connected to {out.peer} ({out.last_error})")

    def close(self) -> None:
        """Close every socket, also those idle until the start, so peers see this host go at once."""
        sockets = {key.fileobj for key in self.selector.get_map().values()}
        sockets |= {out.sock for out in self.outgoing if out.sock}
        for sock in sockets:
            sock.close()
        self.selector.close()

    def report(self) -> dict:
        intervals = max([math.ceil(self.duration_s / self.interval_s - 1e-9)]
                        + [len(series) for series in self.received.values()])
        return {"host_addr": self.listen, "start_epoch_s": self.start_epoch_s, "interval_s": self.interval_s,
                "received": {peer: series + [0] * (intervals - len(series))
                             for peer, series in sorted(self.received.items())},
                "sent": {out.peer: out.sent for out in self.outgoing},
                "errors": self.errors}

    def all_finished(self) -> bool:
        return all(out.state == "done" for out in self.outgoing) and self.expected_peers <= self.finished_peers

    def next_timer(self) -> float:
        timers = [self.end + GRACE_S]
        if not self.stopped:
            timers.append(self.end if self.sending else self.start)
        if self.unconnected:
            timers.append(self.connect_deadline)
            timers += [out.retry_at for out in self.unconnected if out.state == "waiting"]
        return min(timers)

    def on_clock(self, now: float) -> None:
        """Start and stop sending, and (re)try connects, when their time has come."""
        if not self.sending and not self.stopped and now >= self.start:
            self.sending = True
            for out in self.outgoing:
                if out.state == "open":
                    self.watch(out, selectors.EVENT_WRITE)
        if not self.stopped and now >= self.end:
            self.sending, self.stopped = False, True
            for out in self.outgoing:
                if out.state == "open":
                    self.half_close(out)
        if self.unconnected and now >= self.connect_deadline:
            for out in self.unconnected:
                self.errors.append(f"could not connect to {out.peer} within {self.connect_timeout_s:g} s "
                                   f"({out.last_error})")
                out.state = "failed"
            return
        for out in self.unconnected:
            if out.state == "waiting" and now >= out.retry_at:
                self.connect(out)
                if self.errors:
                    return

    def connect(self, out: Outgoing) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, NOTSENT_LOWAT_BYTES)
        if self.congestion:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.congestion.encode())
            except OSError as err:
                sock.close()
                self.errors.append(f"cannot use congestion control {self.congestion}: {err}")
                return
        code = sock.connect_ex(ipv4_address(out.peer))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.retry_later(out, os.strerror(code))
            return
        out.sock, out.state = sock, "connecting"
        self.selector.register(sock, selectors.EVENT_WRITE, out)

    def retry_later(self, out: Outgoing, error: str) -> None:
        out.state, out.sock, out.last_error = "waiting", None, error
        out.retry_at = time.monotonic() + CONNECT_RETRY_S

    def on_outgoing(self, out: Outgoing) -> None:
        try:
            if out.state == "connecting":
                self.on_connected(out)
            elif out.state == "open":
                out.sent += out.sock.send(self.payload)
            elif out.sock.recv(4096) == b"":  # draining: the receiver read everything and closed
                self.selector.unregister(out.sock)
                out.sock.close()
                out.state = "done"
        except BlockingIOError:
            pass
        except OSError as err:
            self.errors.append(f"connection to {out.peer} broke: {err}")

    def on_connected(self, out: Outgoing) -> None:
        code = out.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self.selector.unregister(out.sock)
            out.sock.close()
            self.retry_later(out, os.strerror(code))
            return
        out.sock.sendall(self.header)  # fits: a new connection's send buffer is empty
        out.state = "open"
        self.unconnected.remove(out)
        if self.stopped:
            self.half_close(out)
        elif not self.sending:
            self.selector.unregister(out.sock)  # until the common start

    def half_close(self, out: Outgoing) -> None:
        try:
            out.sock.shutdown(socket.SHUT_WR)
        except OSError as err:
            self.errors.append(f"connection to {out.peer} broke: {err}")
            return
        out.state = "draining"
        self.watch(out, selectors.EVENT_READ)

    def watch(self, out: Outgoing, events: int) -> None:
        try:
            self.selector.modify(out.sock, events, out)
        except KeyError:
            self.selector.register(out.sock, events, out)

    def accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ, Incoming(sock))

    def on_incoming(self, conn: Incoming) -> None:
        try:
            count = conn.sock.recv_into(self.recv_buffer)
        except BlockingIOError:
            return
        except OSError as err:
            self.errors.append(f"connection from {conn.peer or 'an unnamed peer'} broke: {err}")
            return
        if count == 0:
            self.on_eof(conn)
            return
        if conn.peer is None:
            taken = min(count, HEADER_BYTES - len(conn.header))
            conn.header += self.recv_buffer[:taken]
            count -= taken
            if len(conn.header) < HEADER_BYTES or not self.identify(conn):
                return
        if count:
            series = self.received[conn.peer]
            index = max(0, int((time.monotonic() - self.start) / self.interval_s))
            if index >= len(series):
                series.extend([0] * (index + 1 - len(series)))
            series[index] += count

    def identify(self, conn: Incoming) -> bool:
        try:
            peer, end_epoch_s = conn.header.decode("ascii").split()
            conn.peer_end = float(end_epoch_s) - self.clock_offset
        except ValueError:
            self.errors.append(f"a connection opened with a malformed header {bytes(conn.header)!r}")
            return False
        conn.peer = peer
        self.received.setdefault(peer, [])
        return True

    def on_eof(self, conn: Incoming) -> None:
        self.selector.unregister(conn.sock)
        conn.sock.close()
        early_s = conn.peer_end - time.monotonic()
        if conn.peer is None:
            self.errors.append("a connection closed before naming its sender")
        elif early_s > EARLY_EOF_SLACK_S:
            self.errors.append(f"connection from {conn.peer} closed {early_s:.2f} s before its end")
        else:
            self.finished_peers.add(conn.peer)

    def note_unfinished(self) -> None:
        for out in self.outgoing:
            if out.state in ("open", "draining"):
                self.errors.append(f"connection to {out.peer} still {out.state} {GRACE_S:g} s after the end")
        for peer in sorted(self.expected_peers - self.finished_peers):
            state = "still open" if peer in self.received else "never opened"
            self.errors.append(f"connection from {peer} {state} {GRACE_S:g} s after the end")


def address_arg(text: str) -> str:
    try:
        return "%s:%d" % ipv4_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def peers_arg(text: str) -> list[str]:
    return [address_arg(part) for part in text.split(",") if part.strip()]


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"not positive: {text}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hosts.mesh", description=__doc__.split("\n")[0])
    parser.add_argument("--listen", type=address_arg, required=True, help="IP:PORT to accept peers on")
    parser.add_argument("--peers", type=peers_arg, required=True, help="IP:PORT,... to send to (not this host)")
    parser.add_argument("--duration-s", type=positive_float, required=True)
    parser.add_argument("--interval-s", type=positive_float, default=0.5)
    parser.add_argument("--out", required=True, help="the JSON report")
    parser.add_argument("--start-at", type=float, help="common start, epoch seconds (default: now)")
    parser.add_argument("--congestion", choices=("bbr", "cubic"))
    parser.add_argument("--connect-timeout-s", type=positive_float, default=10.0)
    args = parser.parse_args(argv)
    if not args.peers or args.listen in args.peers:
        parser.error("--peers must name at least one peer and not this host")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start_epoch_s = time.time() if args.start_at is None else args.start_at
    mesh = Mesh(args.listen, args.peers, start_epoch_s, args.duration_s, args.interval_s,
                args.congestion, args.connect_timeout_s)
    try:
        mesh.run()
    finally:
        mesh.close()
    with open(args.out, "w") as out:
        json.dump(mesh.report(), out)
    if mesh.errors:
        print(f"mesh {args.listen}: " + "; ".join(mesh.errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
