"""A co-location worker's capped allocator on the CPU, for the tests of the cap
logic (its own module: the other fakes' tests need no torch)."""
from __future__ import annotations

import threading
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from hosts.colocation.memory import round_up


def cuda_size_text(nbytes: int) -> str:
    """A size as CUDA's caching allocator names it in a refusal: whole bytes up to
    1 KiB, above that two decimals of the largest unit it reaches (KiB, MiB, GiB)."""
    if nbytes <= 1 << 10:
        return f"{nbytes} bytes"
    for unit, shift in (("KiB", 10), ("MiB", 20)):
        if nbytes <= 1 << (shift + 10):
            return f"{nbytes / (1 << shift):.2f} {unit}"
    return f"{nbytes / (1 << 30):.2f} GiB"


class RefusingHostAllocator(TorchDispatchMode):
    """A capped allocator under a real task on the CPU, through the worker's own job path:
    it reserves every storage the task's operators create (512-byte rounded, as the
    watch counts them) plus ``scratch_bytes`` of workspace from the first one on, and
    refuses an operator whose outputs would take the reservation past the cap or past
    ``total_bytes`` (the device, all of it this worker's) by raising
    ``torch.OutOfMemoryError`` from it (naming the request's size as CUDA does, rounded, unless
    not ``names_size``), so the watch, the mode inside it, never sees those outputs: a
    refused request. A tensor rebuilt on a storage it was given
    (``set_``: one the parent sent in shared memory) is no allocation."""

    def __init__(self, scratch_bytes: int, total_bytes: int | None = None, names_size: bool = True):
        super().__init__()
        self.scratch_bytes, self.total_bytes, self.names_size = scratch_bytes, total_bytes, names_size
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
            size = f"Tried to allocate {cuda_size_text(requested)}; " if self.names_size else ""
            raise torch.OutOfMemoryError(f"{size}{min(limits)} is the limit")
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
