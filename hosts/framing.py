"""Length-framed TCP between host programs (``hosts.cojob_task``, ``hosts.gnn.wire``).

A frame is a 17-byte header, then a body the header sizes:

    kind: u8 | iteration: u32 | word: u32 | length: u64      (network byte order)

``kind`` and ``word`` are the program's: the cojob tasks put the stage in ``word``
and the body's size in ``length``; the GNN tasks put the size of a JSON meta object
in ``word`` and that of the raw arrays after it in ``length``. This module owns the
layout, exact reads and the sockets, not what a body means.

Invariants:

- A header is always exactly ``HEADER.size`` bytes; writes are the callers' (a
  frame's header and small body go in one ``sendall``, a bulk body after it), so
  the write boundaries, and with TCP_NODELAY the segments, are the programs' own.
- A read returns only whole headers and whole bodies. A peer that closes before a
  header's first byte raises ``PeerClosed`` (done, where the protocol expects no
  more); one that closes anywhere later, or announces a body over the receiver's
  limit (checked before allocating), broke the frame (``PeerError``).
- Every wait is bounded by the socket's timeout (``TimeoutError``), except the wait
  for a header's first byte when the caller says the peer paces its frames; a
  connect, retries included, by its ``timeout_s``.
- Connected sockets have TCP_NODELAY and the caller's timeout; a socket bound to a
  chosen port (a listener, a planned source port) has SO_REUSEADDR; congestion
  control is set per socket only when asked. No buffer sizes are set: the kernel's
  defaults (and autotuning) apply.
"""
from __future__ import annotations

import socket
import struct
import time
from typing import NamedTuple

HEADER = struct.Struct("!BIIQ")  # kind, iteration, word, length
READ_CHUNK = 1 << 20  # bytes per recv call: few syscalls per frame, bounded work per call
MAX_BODY_BYTES = 1 << 30  # far above any body the programs send (MBs); past it a header is garbage
CONNECT_RETRY_S = 0.1


class PeerError(Exception):
    """A peer broke a frame or the protocol, or a connection could not be made; one line."""


class PeerClosed(PeerError):
    """The peer closed the connection between frames (before a header's first byte):
    done, where the protocol expects no more frames from it."""


class Header(NamedTuple):
    kind: int
    iteration: int
    word: int
    length: int


def pack_header(header: Header) -> bytes:
    return HEADER.pack(*header)


def unpack_header(data: bytes | bytearray | memoryview) -> Header:
    return Header(*HEADER.unpack(data))


def recv_exact_into(sock: socket.socket, view: memoryview, got: int = 0) -> None:
    """Fill ``view`` from byte ``got`` on (the bytes before it are already in)."""
    while got < len(view):
        n = sock.recv_into(view[got:], min(len(view) - got, READ_CHUNK))
        if n == 0:
            raise PeerError(f"peer closed after {got} of {len(view)} bytes")
        got += n


def recv_header(sock: socket.socket, paced: bool = False) -> Header:
    """The next header. ``paced``: the peer sends when it is told to (by a driver), so
    the first byte may take any time; the rest of the header is still bounded."""
    header = bytearray(HEADER.size)
    if paced:
        timeout = sock.gettimeout()
        sock.settimeout(None)
        try:
            first = sock.recv_into(header, 1)
        finally:
            sock.settimeout(timeout)
    else:
        first = sock.recv_into(header)
    if first == 0:
        raise PeerClosed("peer closed between frames")
    recv_exact_into(sock, memoryview(header), first)
    return unpack_header(header)


def recv_body(sock: socket.socket, nbytes: int, limit: int = MAX_BODY_BYTES) -> bytearray:
    """``nbytes`` bytes, refused before anything is allocated if over ``limit``."""
    if nbytes > limit:
        raise PeerError(f"frame announces {nbytes} bytes, over the limit of {limit}")
    body = bytearray(nbytes)
    recv_exact_into(sock, memoryview(body))
    return body


def recv_discard(sock: socket.socket, nbytes: int, scratch: memoryview) -> None:
    """Receive ``nbytes`` into ``scratch`` chunk by chunk, overwriting it: a bulk body
    whose content nobody reads, in constant memory."""
    remaining = nbytes
    while remaining:
        n = sock.recv_into(scratch[:min(remaining, len(scratch))])
        if n == 0:
            raise PeerError(f"peer closed after {nbytes - remaining} of {nbytes} bytes")
        remaining -= n


def send_frame(sock: socket.socket, header: Header, small_body: bytes = b"") -> None:
    """The header and a small body in one write (one segment where they fit)."""
    sock.sendall(pack_header(header) + small_body)


def send_repeated(sock: socket.socket, nbytes: int, chunk: memoryview) -> None:
    """A bulk body of ``nbytes``: ``chunk`` sent repeatedly, the last time cut short."""
    remaining = nbytes
    while remaining:
        part = chunk[:min(remaining, len(chunk))]
        sock.sendall(part)
        remaining -= len(part)


def ipv4_address(text: str) -> tuple[str, int]:
    """``IPv4:PORT`` as (ip, port); a ValueError naming the text otherwise (the
    fabric's address plan is IPv4 and its sockets AF_INET)."""
    host, sep, port = text.strip().rpartition(":")
    try:
        socket.inet_aton(host)
    except OSError:
        sep = ""
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not IPv4:PORT: {text!r}")
    return host, int(port)


def tcp_socket(congestion: str | None = None) -> socket.socket:
    """A TCP socket with the given congestion control (a listener's connections inherit
    it); per socket, because a namespace's default may only be what the kernel allows."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if congestion:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion.encode())
        except OSError:
            sock.close()
            raise
    return sock


def _connected(sock: socket.socket, timeout_s: float) -> socket.socket:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a header must not wait for an ACK
    sock.settimeout(timeout_s)
    return sock


def connect(address: tuple[str, int], timeout_s: float, *, source_port: int | None = None,
            congestion: str | None = None, peer: str = "peer", retry_s: float = CONNECT_RETRY_S) -> socket.socket:
    """Connect to ``address`` (from ``source_port`` if given), retrying while nothing
    listens there yet; ``peer`` names it in the error after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        sock = tcp_socket(congestion)
        if source_port is not None:
            # The port is planned: a connection of the same plan may still be in TIME_WAIT.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("", source_port))
            except OSError as err:
                sock.close()
                raise PeerError(f"cannot bind source port {source_port}: {err}") from None
        sock.settimeout(max(deadline - time.monotonic(), retry_s))
        try:
            sock.connect(address)
            return _connected(sock, timeout_s)
        except (ConnectionRefusedError, ConnectionResetError, TimeoutError) as err:
            sock.close()
            if time.monotonic() >= deadline:
                raise PeerError(f"{peer} at {address[0]}:{address[1]} not listening within "
                                f"{timeout_s:g} s ({err})") from None
            time.sleep(retry_s)


def listen(address: tuple[str, int], backlog: int, timeout_s: float,
           congestion: str | None = None) -> socket.socket:
    """A listening socket whose ``accept`` waits at most ``timeout_s``."""
    sock = tcp_socket(congestion)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        raise PeerError(f"cannot listen on {address[0]}:{address[1]}: {err}") from None
    sock.listen(backlog)
    sock.settimeout(timeout_s)
    return sock


def accept(listener: socket.socket, timeout_s: float) -> tuple[socket.socket, tuple[str, int]]:
    """The next connection (TimeoutError after the listener's timeout)."""
    sock, address = listener.accept()
    return _connected(sock, timeout_s), address
