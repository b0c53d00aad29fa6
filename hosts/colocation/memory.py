"""Measured memory: exact peaks for validating the estimator, and a per-task watch.

``measure_peak`` is the reference. On CUDA it is the caching allocator's own
counter (``max_memory_allocated``, 512-byte blocks). On CPU it replays the
profiler's allocation events (every allocation and free of the CPU allocator,
in order) with the same 512-byte rounding. The profiler only observes, so
autograd behaves as in a normal run.

``TaskMemoryWatch`` follows one task while it shares the device with others
(the profiler cannot: it sees one thread, and two cannot run at once). It is a
dispatch mode, thread-local and carried into autograd's worker threads, that
counts the bytes of every storage the task's operators create until that
storage dies; the finaliser holds only a key and a size. Any dispatch mode
perturbs autograd a little: the Python wrappers it creates raise use counts, so
a gradient that reaches a tensor from two consumers is added out of place
instead of in place. The watch then sees one gradient-sized buffer more than an
unwatched run allocates (measured here: SAGE and GIN training +4-7%, all else
exact). It therefore errs high, never low; estimator errors are measured with
``measure_peak`` instead.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

ALIGNMENT = 512


def round_up(nbytes: int) -> int:
    """Bytes the device allocator hands out for a request of ``nbytes``."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT if nbytes > 0 else 0


def measure_peak(fn: Callable[[], object], device: torch.device) -> int:
    """Peak bytes allocated while ``fn`` runs, above what was allocated before."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    return _cpu_profiled_peak(fn)


def _cpu_profiled_peak(fn: Callable[[], object]) -> int:
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events: list[tuple[int, int]] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            size = node.extra_fields.alloc_size
            events.append((node.start_time_ns, round_up(size) if size > 0 else -round_up(-size)))
        stack.extend(node.children)
    events.sort()
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


@dataclass
class WatchRecord:
    """What a task's watch saw: its peak live bytes and whether it broke its budget."""

    peak_bytes: int = 0
    budget_bytes: int | None = None
    exceeded_at_bytes: int | None = None  # live bytes when the budget first broke


class SharedDevice:
    """Live bytes of all watched tasks together, against the allocatable memory.
    Tasks running while the sum is over it are noted as over capacity."""

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self.live_bytes = 0
        self.peak_bytes = 0
        self.over_capacity_events = 0
        self.over_capacity_tasks: set[str] = set()
        self._active: set[str] = set()
        self._lock = threading.Lock()

    def enter(self, task_id: str) -> None:
        with self._lock:
            self._active.add(task_id)

    def leave(self, task_id: str) -> None:
        with self._lock:
            self._active.discard(task_id)

    def change(self, delta: int) -> None:
        with self._lock:
            was_over = self.live_bytes > self.capacity_bytes
            self.live_bytes += delta
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            if self.live_bytes > self.capacity_bytes:
                self.over_capacity_tasks |= self._active
                if not was_over:
                    self.over_capacity_events += 1


class TaskMemoryWatch(TorchDispatchMode):
    """Counts one task's live storage bytes (512-byte rounded) and notes when they
    first exceed its budget. Enter it in the task's own thread."""

    def __init__(self, budget_bytes: int | None, shared: SharedDevice | None = None, device_type: str = "cpu"):
        super().__init__()
        self.record = WatchRecord(budget_bytes=budget_bytes)
        self._device_type = device_type  # on a GPU, host-side tensors are not device memory
        self._shared = shared
        self._live = 0
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor) and leaf.device.type == self._device_type:
                self._track(leaf.untyped_storage())
        return out

    def _track(self, storage: torch.UntypedStorage) -> None:
        key = storage.data_ptr()
        nbytes = round_up(storage.nbytes())
        if nbytes == 0:
            return
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
        # The finaliser holds only the key and size, never the storage.
        weakref.finalize(storage, self._release, key, nbytes)
        self._change(nbytes)

    def _release(self, key: int, nbytes: int) -> None:
        with self._lock:
            self._seen.discard(key)
        self._change(-nbytes)

    def _change(self, delta: int) -> None:
        with self._lock:
            self._live += delta
            if self._live > self.record.peak_bytes:
                self.record.peak_bytes = self._live
            budget = self.record.budget_bytes
            if budget is not None and self._live > budget and self.record.exceeded_at_bytes is None:
                self.record.exceeded_at_bytes = self._live
        if self._shared is not None:
            self._shared.change(delta)
