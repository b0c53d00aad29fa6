"""The per-worker allocator cap: a task's budget plus what its allocator was measured to need beside its tensors.

A task's budget (estimate x threshold) holds its live tensors, as the watch sees
them. A caching allocator (CUDA's) reserves more than that from the device:
whole segments (2 MiB for small requests, 20 MiB for 1-10 MiB ones), blocks
cached after a free that a larger request cannot reuse, and what libraries
allocate outside any tensor (cuBLAS workspaces). The cap on what a worker's
allocator may reserve for a task is therefore

    cap = held + budget + overhead

``held``: what the worker's allocator still reserves when the task starts, its
cache emptied (persistent workspaces); ``overhead``: the growth of the reserved
bytes beyond the task's watched peak, measured with the task alone in a warm
worker of the same kind during the run's profiling pass (``reserved_overhead``),
the largest over the tasks of the same model and size class
(``overhead_by_class``). A task whose live tensors stay within its budget then
reserves no more than its profiled run did, so the allocator never refuses it;
one that goes past its budget is stopped by the watch (and, past budget +
overhead, refused by the allocator), and recorded.

A refusal says which limit refused (``refused_by``): the cap, where the request
was larger than what the cap left, else the device (full of what other workers
reserve). The CPU's allocator keeps no cache beside the tensors and has
no per-process cap (``HostAllocator``): overhead 0, the watch alone holds a task
to its budget. Tests drive the same functions with fake caching allocators, the
workers' too (``WorkerPool.allocator``).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Protocol

import torch

MIB = 1 << 20


class Allocator(Protocol):
    """What the cap logic needs of a device allocator."""

    def reserved_bytes(self) -> int: ...

    def peak_reserved_bytes(self) -> int: ...

    def reset_peak(self) -> None: ...

    def release_cache(self) -> None: ...

    def set_cap(self, cap_bytes: int | None) -> None: ...

    def free_bytes(self) -> int | None:
        """What the device has free now, whoever holds the rest (None: unknown)."""


class CudaAllocator:
    """PyTorch's CUDA caching allocator of one device; its cap is the per-process memory fraction."""

    def __init__(self, device: torch.device):
        self.device = device
        self.total_bytes = torch.cuda.get_device_properties(device).total_memory

    def reserved_bytes(self) -> int:
        return torch.cuda.memory_reserved(self.device)

    def peak_reserved_bytes(self) -> int:
        return torch.cuda.max_memory_reserved(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def release_cache(self) -> None:
        torch.cuda.empty_cache()

    def set_cap(self, cap_bytes: int | None) -> None:
        fraction = 1.0 if cap_bytes is None else cap_fraction(cap_bytes, self.total_bytes)
        torch.cuda.set_per_process_memory_fraction(fraction, self.device)

    def free_bytes(self) -> int | None:
        return torch.cuda.mem_get_info(self.device)[0]


class HostAllocator:
    """The CPU's: memory goes back as tensors die, nothing is reserved beside them, and no cap exists."""

    def reserved_bytes(self) -> int:
        return 0

    def peak_reserved_bytes(self) -> int:
        return 0

    def reset_peak(self) -> None:
        pass

    def release_cache(self) -> None:
        pass

    def set_cap(self, cap_bytes: int | None) -> None:
        pass

    def free_bytes(self) -> int | None:
        return None


def device_allocator(device: torch.device) -> Allocator:
    return CudaAllocator(device) if device.type == "cuda" else HostAllocator()


def cap_fraction(cap_bytes: int, total_bytes: int) -> float:
    """The fraction of the device to pass PyTorch for a cap of ``cap_bytes``.
    PyTorch keeps ``size_t(fraction * total)``, truncated: ``cap / total`` can
    come back one byte short, so the quotient is nudged up by one ulp, which
    stays below the next byte for any cap under 2**52."""
    return min(1.0, math.nextafter(cap_bytes / total_bytes, math.inf))


def cap_bytes(held_bytes: int, budget_bytes: int, overhead_bytes: int) -> int:
    return held_bytes + budget_bytes + overhead_bytes


def limit(allocator: Allocator, budget_bytes: int | None, overhead_bytes: int) -> int:
    """Before a task: empty the cache (the cap is the task's, not what earlier
    tasks left cached), cap the allocator (no cap without a budget) and start
    its peak afresh. Returns the bytes held at the start."""
    allocator.release_cache()
    held = allocator.reserved_bytes()
    allocator.set_cap(None if budget_bytes is None else cap_bytes(held, budget_bytes, overhead_bytes))
    allocator.reset_peak()
    return held


def refused_by(cap: int | None, reserved: int, free: Callable[[], int | None],
               requested: tuple[int, int] | None) -> str | None:
    """Which limit refused a request, from readings just after the refusal. CUDA's
    caching allocator checks the cap before it asks the device for a segment, so the
    cap refused a request larger than what the cap left (``cap - reserved``: its
    cache is released before it gives up), the device one that fit the cap.
    ``requested``: the request's size as bounds (``requested_range``: the message
    rounds it). Without it, or where the bounds straddle what the cap left: the cap
    where the device had at least that much free (``free()``, read only then: any
    request past the device's free was past the cap too), else unknown (None). No
    cap: the device. Other workers allocate and free meanwhile, so it is a reading
    of that moment."""
    if cap is None:
        return "device"
    room = cap - reserved
    if room <= 0:  # the cap had nothing left: any request was past it
        return "cap"
    if requested is not None:
        low, high = requested
        if low > room:
            return "cap"
        if high <= room:
            return "device"
    available = free()
    return "cap" if available is not None and available >= room else None


_SIZE = re.compile(r"Tried to allocate (\d+)(?:\.(\d+))? (bytes|KiB|MiB|GiB)")
_UNIT = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def requested_range(message: str) -> tuple[int, int] | None:
    """The bounds of the segment size a refusal names (CUDA's "Tried to allocate
    1.50 GiB": rounded to two decimals of its unit, so up to half a hundredth of a
    GiB, ~5 MiB, either way); None where it names none."""
    found = _SIZE.search(message)
    if found is None:
        return None
    whole, decimals, unit = found.groups()
    scale = _UNIT[unit]
    value = float(f"{whole}.{decimals or 0}") * scale
    slack = 0.0 if decimals is None else 0.5 * 10 ** -len(decimals) * scale
    return max(0, math.floor(value - slack)), math.ceil(value + slack)


def reserved_growth(allocator: Allocator, held_bytes: int) -> int:
    """After a task: how far its allocator's reservation grew above what was held at its start."""
    return max(0, allocator.peak_reserved_bytes() - held_bytes)


def reserved_overhead(growth_bytes: int, watched_peak_bytes: int) -> int:
    """What the allocator reserved beyond the task's live tensors at their peak."""
    return max(0, growth_bytes - watched_peak_bytes)


def size_class(estimate_bytes: int) -> str:
    """Power-of-two classes of the estimated peak, e.g. '64-128 MiB'."""
    upper = 1 << max(int(estimate_bytes - 1).bit_length(), 20)
    return f"{upper // 2 // MIB}-{upper // MIB} MiB"


def overhead_by_class(measured: list[tuple[str, int, int]]) -> dict[str, int]:
    """(model, estimate bytes, measured overhead) of the profiled tasks -> the
    largest overhead per '<model> <size class>'."""
    classes: dict[str, int] = {}
    for model, estimate, overhead in measured:
        key = class_key(model, estimate)
        classes[key] = max(classes.get(key, 0), overhead)
    return classes


def class_key(model: str, estimate_bytes: int) -> str:
    return f"{model} {size_class(estimate_bytes)}"
