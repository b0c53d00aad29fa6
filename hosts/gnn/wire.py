"""The GNN tasks' own transport: frames of named numpy arrays over TCP, and flow reports.

Why not DistDGL's RPC: it hides each transfer from a scheduler, and several DistDGL
servers on one box collide (see ``hosts.gnn.dglenv``). Here every transfer between
two tasks on different machines is one frame, reported on the management channel:

- the sender emits ``flow_start`` just before the first byte (``flow`` id
  "<src task>-><dst task>/i<iteration>/<phase>", ``src``/``dst`` hosts and tasks,
  ``bytes`` = the whole frame, ``phase``, ``iteration``, and the connection's
  ``src_port``/``dst_port`` in the flow's direction, so a scheduler can give the
  flow a per-flow policy by its 5-tuple);
- the receiver emits ``flow_end`` once the last byte arrived (same ``flow`` id):
  the transfer's completion at the receiver, without an ACK round trip.

Transfers between tasks on one machine use the same framing over loopback and are
not reported: they cross no network (OES's F(j, n) holds only inter-machine flows).
A profiling run reports them too (``REPORT_LOCAL``): another placement may put
that pair on two machines.
Requests (a sampler asking a store for neighbours or features) are not reported
either: the paper ignores their volume (§III-B), though the fabric still counts them.

A frame: ``HEADER`` (kind, iteration, meta length, payload length), a JSON meta
object (``arrays``: [name, dtype, shape] in payload order, plus the sender's
scalars), then the arrays' raw bytes. Every wait is bounded by the connection's
timeout.
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time

import numpy as np

HEADER = struct.Struct("!BIIQ")  # kind, iteration, meta length, payload length
INTRO = 0
CHUNK = 1 << 20
REPORT_LOCAL = False  # set once at start-up by a profiling task


class PeerError(Exception):
    """A peer closed or broke the protocol; one line."""


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:], min(len(view) - got, CHUNK))
        if n == 0:
            raise PeerError(f"peer closed after {got} of {len(view)} bytes")
        got += n


class Link:
    """One TCP connection between two tasks; ``send`` and ``recv`` may run in
    different threads (each direction has its own lock)."""

    def __init__(self, sock: socket.socket, task, peer_task: str, peer_host: str):
        self.sock, self.task = sock, task
        self.peer_task, self.peer_host = peer_task, peer_host
        self.reported = peer_host != task.host or REPORT_LOCAL
        self.local_port, self.peer_port = sock.getsockname()[1], sock.getpeername()[1]
        self._send_lock, self._recv_lock = threading.Lock(), threading.Lock()

    def send(self, kind: int, iteration: int, arrays: dict | None = None, phase: str | None = None,
             **scalars) -> int:
        """One frame; a remote one with a ``phase`` is a reported flow. Returns its bytes."""
        arrays = {name: np.ascontiguousarray(a) for name, a in (arrays or {}).items()}
        flow = f"{self.task.task_id}->{self.peer_task}/i{iteration}/{phase}" if phase and self.reported else None
        meta = json.dumps({"arrays": [[n, a.dtype.str, list(a.shape)] for n, a in arrays.items()],
                           "flow": flow, **scalars}, separators=(",", ":")).encode()
        payload = sum(a.nbytes for a in arrays.values())
        total = HEADER.size + len(meta) + payload
        with self._send_lock:
            if flow:
                self.task.emit("flow_start", flow=flow, src=self.task.host, dst=self.peer_host,
                               src_task=self.task.task_id, dst_task=self.peer_task, bytes=total, phase=phase,
                               iteration=iteration, src_port=self.local_port, dst_port=self.peer_port)
            self.sock.sendall(HEADER.pack(kind, iteration, len(meta), payload) + meta)
            for a in arrays.values():
                if a.nbytes:
                    self.sock.sendall(memoryview(a).cast("B"))
        return total

    def recv(self, expect: int | None = None) -> tuple[int, int, dict, dict]:
        """(kind, iteration, scalars, arrays) of the next frame; reports a flow's end."""
        with self._recv_lock:
            header = bytearray(HEADER.size)
            _recv_exact(self.sock, memoryview(header))
            kind, iteration, meta_len, payload_len = HEADER.unpack(header)
            if expect is not None and kind != expect:
                raise PeerError(f"{self.peer_task}: expected frame kind {expect}, got {kind}")
            meta_raw = bytearray(meta_len)
            _recv_exact(self.sock, memoryview(meta_raw))
            payload = bytearray(payload_len)
            _recv_exact(self.sock, memoryview(payload))
        meta = json.loads(meta_raw)
        if meta.get("flow"):
            self.task.emit("flow_end", flow=meta["flow"], bytes=HEADER.size + meta_len + payload_len)
        arrays, offset = {}, 0
        for name, dtype, shape in meta.pop("arrays"):
            dt = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            arrays[name] = np.frombuffer(payload, dtype=dt, count=count, offset=offset).reshape(shape)
            offset += count * dt.itemsize
        meta.pop("flow", None)
        return kind, iteration, meta, arrays

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _intro(sock: socket.socket, task) -> dict:
    mine = json.dumps({"task": task.task_id, "host": task.host}).encode()
    sock.sendall(HEADER.pack(INTRO, 0, len(mine), 0) + mine)
    header = bytearray(HEADER.size)
    _recv_exact(sock, memoryview(header))
    kind, _, meta_len, payload_len = HEADER.unpack(header)
    if kind != INTRO or payload_len:
        raise PeerError(f"expected an introduction, got frame kind {kind}")
    theirs = bytearray(meta_len)
    _recv_exact(sock, memoryview(theirs))
    return json.loads(theirs)


def connect(task, address: tuple[str, int], peer_task: str, timeout_s: float, retry_s: float = 0.1) -> Link:
    """Connect to ``peer_task`` at ``address``, retrying while it is not listening yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(address)
            break
        except (ConnectionRefusedError, ConnectionResetError, TimeoutError) as err:
            sock.close()
            if time.monotonic() >= deadline:
                raise PeerError(f"{peer_task} at {address[0]}:{address[1]} not listening within "
                                f"{timeout_s:g} s ({err})") from None
            time.sleep(retry_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    peer = _intro(sock, task)
    if peer.get("task") != peer_task:
        raise PeerError(f"{address[0]}:{address[1]} is {peer.get('task')!r}, expected {peer_task!r}")
    return Link(sock, task, peer_task, peer["host"])


class Listener:
    """A task's one listening socket; ``accept`` returns introduced links."""

    def __init__(self, address: tuple[str, int], timeout_s: float):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(address)
        except OSError as err:
            raise PeerError(f"cannot listen on {address[0]}:{address[1]}: {err}") from None
        self.sock.listen(128)
        self.timeout_s = timeout_s

    def accept(self, task) -> Link:
        self.sock.settimeout(self.timeout_s)
        try:
            sock, _ = self.sock.accept()
        except TimeoutError:
            raise PeerError(f"no peer connected within {self.timeout_s:g} s") from None
        sock.settimeout(self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = _intro(sock, task)
        return Link(sock, task, peer["task"], peer["host"])

    def close(self) -> None:
        self.sock.close()
