"""Stand-ins the unit tests share: the controller client a driver applies its
decisions through, a socket that keeps what a host program wrote, netlink
replies built as the kernel frames them, and a co-location worker's capped allocator."""
from __future__ import annotations

import socket
import threading
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from experiments.platform.netlink import NLMSG_HDR, RTATTR
from hosts.colocation.memory import round_up


class FakeClient:
    """``ControllerClient.apply`` that keeps every batch and hands out fresh policy ids."""

    def __init__(self):
        self.batches = []

    def apply(self, changes):
        self.batches.append(changes)
        return list(range(100 + sum(len(b) for b in self.batches[:-1]), 100 + sum(len(b) for b in self.batches)))


class RecordingSocket:
    """A socket whose writes are kept: each write is one sendall, as the program made it."""

    def __init__(self, sock: socket.socket):
        self.sock, self.writes = sock, []

    def sendall(self, data) -> None:
        self.writes.append(bytes(data))
        self.sock.sendall(data)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def netlink_message(kind: int, body: bytes) -> bytes:
    """A netlink message of a kernel's reply (flags NLM_F_MULTI, as a dump's), 4-byte aligned."""
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), kind, 2, 7, 0) + body + bytes(-len(body) % 4)


def netlink_attr(kind: int, payload: bytes) -> bytes:
    """An rtattr, its payload padded to 4 bytes."""
    return RTATTR.pack(RTATTR.size + len(payload), kind) + payload + bytes(-len(payload) % 4)


class RefusingHostAllocator(TorchDispatchMode):
    """A capped allocator under a real task on the CPU, through the worker's own job path:
    it reserves every storage the task's operators create (512-byte rounded, as the
    watch counts them) plus ``scratch_bytes`` of workspace from the first one on, and
    refuses an operator whose outputs would take the reservation past the cap or past
    ``total_bytes`` (the device, all of it this worker's) by raising
    ``torch.OutOfMemoryError`` from it, so the watch, the mode inside it, never sees
    those outputs: a refused request. A tensor rebuilt on a storage it was given
    (``set_``: one the parent sent in shared memory) is no allocation."""

    def __init__(self, scratch_bytes: int, total_bytes: int | None = None):
        super().__init__()
        self.scratch_bytes, self.total_bytes = scratch_bytes, total_bytes
        self.live = self.scratch = self.peak = 0
        self.cap: int | None = None
        self._seen: set[int] = set()
        self._lock = threading.RLock()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {leaf.data_ptr() for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.UntypedStorage)}
        new = {s.data_ptr(): s for leaf in tree_leaves(out) if isinstance(leaf, torch.Tensor)
               for s in [leaf.untyped_storage()] if s.nbytes() and s.data_ptr() not in self._seen | given}
        wanted = sum(round_up(s.nbytes()) for s in new.values())
        requested = wanted + self.scratch_bytes - self.scratch if wanted else 0  # the scratch comes with the first
        limits = [b for b in (self.cap, self.total_bytes) if b is not None]
        if requested and limits and self.reserved_bytes() + requested > min(limits):
            raise torch.OutOfMemoryError(f"Tried to allocate {requested} bytes; {min(limits)} is the limit")
        with self._lock:
            for key, storage in new.items():
                self._seen.add(key)
                weakref.finalize(storage, self._free, key, round_up(storage.nbytes()))
                self.live += round_up(storage.nbytes())
        if wanted:
            self.scratch = self.scratch_bytes
        self.peak = max(self.peak, self.reserved_bytes())
        return out

    def _free(self, key: int, nbytes: int) -> None:
        with self._lock:
            self._seen.discard(key)
            self.live -= nbytes

    def reserved_bytes(self) -> int:
        return self.scratch + self.live

    def peak_reserved_bytes(self) -> int:
        return self.peak

    def reset_peak(self) -> None:
        self.peak = self.reserved_bytes()

    def release_cache(self) -> None:
        self.scratch = 0

    def set_cap(self, cap_bytes: int | None) -> None:
        self.cap = cap_bytes

    def free_bytes(self) -> int | None:
        return None if self.total_bytes is None else self.total_bytes - self.reserved_bytes()


def entered_refusing_allocator(scratch_bytes: int, total_bytes: int | None, device) -> RefusingHostAllocator:  # noqa: ARG001
    """A worker's allocator (``WorkerPool.allocator``, bound with functools.partial):
    entered for the worker's life, so it sees every task's operators, outside their watch."""
    allocator = RefusingHostAllocator(scratch_bytes, total_bytes)
    allocator.__enter__()
    return allocator

