"""One sized TCP transfer between two emulated hosts, and its flow completion time.

iperf3 sends for a time; a flow scheduler is judged on flows of a size, by when
their last byte arrived. The receiver accepts one connection, reads to its end and
notes, on the box's monotonic clock (one clock for every namespace of the box),
when each byte count arrived; the sender notes when it began to connect, sends its
bytes, half-closes and waits for the receiver's one-byte acknowledgement, so that
it exits only once every byte was read. The flow completion time is the receiver's
last byte minus the sender's start.

    python -m hosts.transfer recv --listen IP:PORT --out FILE.json [--interval-s 0.5]
        [--timeout-s 600]
    python -m hosts.transfer send --to IP:PORT --bytes N --out FILE.json
        [--congestion bbr|cubic|reno] [--timeout-s 600]

Reports (monotonic seconds), written at the end, also on failure (with ``error``):
    recv: {"bytes": int, "accepted_s": t, "first_byte_s": t | null, "last_byte_s": t | null,
           "interval_s": s, "received": [bytes in interval 0, 1, ...]}  # from accepted_s
    send: {"bytes": int, "started_s": t, "acknowledged_s": t | null}
A process exits 1 with its error on one stderr line.
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import time

from hosts.framing import PeerError, accept, connect, ipv4_address, listen, send_repeated

CHUNK_BYTES = 1 << 20
ACK = b"!"


def recv_cmd(address: str, out: str, interval_s: float, timeout_s: float) -> list[str]:
    """The receiver's command line (``address``: IP:PORT to listen on)."""
    return [sys.executable, "-m", "hosts.transfer", "recv", "--listen", address, "--interval-s", f"{interval_s:g}",
            "--out", out, "--timeout-s", f"{timeout_s:g}"]


def send_cmd(to: str, nbytes: int, out: str, congestion: str, timeout_s: float) -> list[str]:
    """The sender's command line (``to``: IP:PORT)."""
    return [sys.executable, "-m", "hosts.transfer", "send", "--to", to, "--bytes", str(nbytes), "--out", out,
            "--timeout-s", f"{timeout_s:g}", "--congestion", congestion]


def flow_completion_s(sent: dict, received: dict) -> float | None:
    """The receiver's last byte minus the sender's start; None unless every byte arrived."""
    if received.get("error") or sent.get("error") or received.get("bytes") != sent.get("bytes"):
        return None
    return received["last_byte_s"] - sent["started_s"]


def receiver_series(received: dict, start_offset_s: float, started_s: float) -> list[tuple[float, float]]:
    """(run time at each interval's end, Mbit/s) of what arrived, as iperf3's server
    series (``hosts.traffic.receiver_series``); ``start_offset_s`` is the flow's start
    in run time, at the sender's ``started_s``."""
    step = received["interval_s"]
    at = start_offset_s + received["accepted_s"] - started_s
    return [(at + (i + 1) * step, n * 8 / step / 1e6) for i, n in enumerate(received["received"])]


def receive(report: dict, listen_at: tuple[str, int], interval_s: float, timeout_s: float) -> None:
    """Fill ``report`` (the recv report) as the bytes arrive: a failure keeps what came."""
    report.update({"bytes": 0, "accepted_s": None, "first_byte_s": None, "last_byte_s": None,
                   "interval_s": interval_s, "received": []})
    listener = listen(listen_at, 1, timeout_s)
    try:
        sock, _ = accept(listener, timeout_s)
    finally:
        listener.close()
    with sock:
        report["accepted_s"] = accepted = time.monotonic()
        buffer = bytearray(CHUNK_BYTES)
        while True:
            n = sock.recv_into(buffer)
            now = time.monotonic()
            if not n:
                break
            if report["first_byte_s"] is None:
                report["first_byte_s"] = now
            report["last_byte_s"] = now
            report["bytes"] += n
            slot = int((now - accepted) / interval_s)
            report["received"] += [0] * (slot + 1 - len(report["received"]))
            report["received"][slot] += n
        sock.sendall(ACK)


def send(report: dict, to: tuple[str, int], nbytes: int, congestion: str | None, timeout_s: float) -> None:
    """Fill ``report`` (the send report): ``bytes`` once all were handed to TCP."""
    report.update({"bytes": 0, "started_s": time.monotonic(), "acknowledged_s": None})
    with connect(to, timeout_s, congestion=congestion, peer="receiver") as sock:
        send_repeated(sock, nbytes, memoryview(bytes(min(CHUNK_BYTES, nbytes))))
        report["bytes"] = nbytes
        sock.shutdown(socket.SHUT_WR)
        if sock.recv(1) != ACK:
            raise ConnectionError("the receiver closed without acknowledging every byte")
        report["acknowledged_s"] = time.monotonic()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hosts.transfer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="role", required=True)
    recv = sub.add_parser("recv")
    recv.add_argument("--listen", required=True, type=ipv4_address)
    recv.add_argument("--interval-s", type=float, default=0.5)
    send_ = sub.add_parser("send")
    send_.add_argument("--to", required=True, type=ipv4_address)
    send_.add_argument("--bytes", required=True, type=int)
    send_.add_argument("--congestion")
    for role in (recv, send_):
        role.add_argument("--out", required=True)
        role.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args(argv)
    report: dict = {}
    try:
        if args.role == "recv":
            receive(report, args.listen, args.interval_s, args.timeout_s)
        else:
            send(report, args.to, args.bytes, args.congestion, args.timeout_s)
    except (OSError, PeerError) as err:  # refused, reset, timed out, nobody listening
        report["error"] = f"{type(err).__name__}: {err}"
    with open(args.out, "w") as out:
        json.dump(report, out)
    if "error" in report:
        print(f"hosts.transfer {args.role}: {report['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
