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

A frame (``hosts.framing``): the header (kind, iteration, word = meta length,
length = payload length), a JSON meta object (``arrays``: [name, dtype, shape] in
payload order, plus the sender's scalars), then the arrays' raw bytes. Every wait
is bounded by the connection's timeout.
"""
from __future__ import annotations

import json
import socket
import threading

import numpy as np

from hosts import framing
from hosts.framing import HEADER, Header, PeerError

INTRO = 0
REPORT_LOCAL = False  # set once at start-up by a profiling task


class Link:
    """One TCP connection between two tasks; ``send`` and ``recv`` may run in
    different threads (each direction has its own lock)."""

    def __init__(self, sock: socket.socket, task, peer_task: str, peer_host: str):
        self.sock, self.task = sock, task
        self.peer_task, self.peer_host = peer_task, peer_host
        self.reported = peer_host != task.host or REPORT_LOCAL
        self.local_port, self.peer_port = sock.getsockname()[1], sock.getpeername()[1]
        self._send_lock, self._recv_lock = threading.Lock(), threading.Lock()
        self.received_bytes = 0  # the last frame's, for a reader that reports a request's size

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
            framing.send_frame(self.sock, Header(kind, iteration, len(meta), payload), meta)
            for a in arrays.values():
                if a.nbytes:
                    self.sock.sendall(memoryview(a).cast("B"))
        return total

    def recv(self, expect: int | None = None) -> tuple[int, int, dict, dict]:
        """(kind, iteration, scalars, arrays) of the next frame; reports a flow's end."""
        with self._recv_lock:
            kind, iteration, meta_len, payload_len = framing.recv_header(self.sock)
            if expect is not None and kind != expect:
                raise PeerError(f"{self.peer_task}: expected frame kind {expect}, got {kind}")
            meta_raw = framing.recv_body(self.sock, meta_len)
            payload = framing.recv_body(self.sock, payload_len)
        meta = json.loads(meta_raw)
        self.received_bytes = HEADER.size + meta_len + payload_len
        if meta.get("flow"):
            self.task.emit("flow_end", flow=meta["flow"], bytes=self.received_bytes)
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
    framing.send_frame(sock, Header(INTRO, 0, len(mine), 0), mine)
    kind, _, meta_len, payload_len = framing.recv_header(sock)
    if kind != INTRO or payload_len:
        raise PeerError(f"expected an introduction, got frame kind {kind}")
    return json.loads(framing.recv_body(sock, meta_len))


def connect(task, address: tuple[str, int], peer_task: str, timeout_s: float) -> Link:
    """Connect to ``peer_task`` at ``address``, retrying while it is not listening yet."""
    sock = framing.connect(address, timeout_s, peer=peer_task)
    peer = _intro(sock, task)
    if peer.get("task") != peer_task:
        raise PeerError(f"{address[0]}:{address[1]} is {peer.get('task')!r}, expected {peer_task!r}")
    return Link(sock, task, peer_task, peer["host"])


class Listener:
    """A task's one listening socket; ``accept`` returns introduced links."""

    def __init__(self, address: tuple[str, int], timeout_s: float):
        self.sock = framing.listen(address, 128, timeout_s)
        self.timeout_s = timeout_s

    def accept(self, task) -> Link:
        try:
            sock, _ = framing.accept(self.sock, self.timeout_s)
        except TimeoutError:
            raise PeerError(f"no peer connected within {self.timeout_s:g} s") from None
        peer = _intro(sock, task)
        return Link(sock, task, peer["task"], peer["host"])

    def close(self) -> None:
        self.sock.close()
