"""The allocator cap (hosts/colocation/allocator.py) against a fake caching allocator, on the CPU,
and where a GPU is, against CUDA's own in the worker's path.

The fake behaves as CUDA's caching allocator does where the cap is concerned:
requests rounded to 512 bytes; up to 1 MiB served from 2 MiB segments, 1-10 MiB
from 20 MiB segments, larger ones from a segment of their own size rounded to
2 MiB; a freed block stays cached in its segment (merged with free neighbours)
and is reused best-fit, split if larger; a new segment that would take the
reservation past the cap is refused after the cache is released. A task is a
trace of allocations and frees; some are tensors its watch sees, some are
library scratch it does not (workspaces, temporary storage of kernels).
"""
import math
import random

import pytest
import torch
from fake_allocator import RefusingHostAllocator, cuda_size_text

from hosts.colocation.allocator import (
    cap_bytes,
    cap_fraction,
    class_key,
    device_allocator,
    limit,
    overhead_by_class,
    refused_by,
    requested_range,
    reserved_growth,
    reserved_overhead,
    size_class,
)
from hosts.colocation.datasets import GraphShape, synthesize
from hosts.colocation.memory import DeviceLedger
from hosts.colocation.tasks import TRAINING, Task, warm_up_models
from hosts.colocation.workers import OUT_OF_MEMORY, OUT_OF_MEMORY_WITHIN_BUDGET, Job, _run

MIB = 1 << 20
SMALL, LARGE = "small", "large"


class FakeOutOfMemory(RuntimeError):
    pass


class FakeCachingAllocator:
    def __init__(self):
        self.segments: list[dict] = []  # {"pool", "size", "blocks": [[offset, size, live], ...]}
        self.cap: int | None = None
        self.peak = 0

    # -- the Allocator protocol ----------------------------------------------------------------
    def reserved_bytes(self) -> int:
        return sum(seg["size"] for seg in self.segments)

    def peak_reserved_bytes(self) -> int:
        return self.peak

    def reset_peak(self) -> None:
        self.peak = self.reserved_bytes()

    def free_bytes(self) -> int | None:
        return None  # no device behind it

    def release_cache(self) -> None:
        self.segments = [seg for seg in self.segments if any(live for _, _, live in seg["blocks"])]

    def set_cap(self, cap_bytes: int | None) -> None:
        self.cap = cap_bytes

    # -- allocation ----------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> tuple[dict, int]:
        size = -(-nbytes // 512) * 512
        pool = SMALL if size <= MIB else LARGE
        fits = [(block[1], seg, block) for seg in self.segments if seg["pool"] == pool
                for block in seg["blocks"] if not block[2] and block[1] >= size]
        if not fits:
            segment = 2 * MIB if pool == SMALL else 20 * MIB if size < 10 * MIB else -(-size // (2 * MIB)) * 2 * MIB
            if self.cap is not None and self.reserved_bytes() + segment > self.cap:
                self.release_cache()
                if self.reserved_bytes() + segment > self.cap:
                    raise FakeOutOfMemory(f"{nbytes} bytes past the cap {self.cap}")
            seg = {"pool": pool, "size": segment, "blocks": [[0, segment, False]]}
            self.segments.append(seg)
            self.peak = max(self.peak, self.reserved_bytes())
            fits = [(segment, seg, seg["blocks"][0])]
        _, seg, block = min(fits, key=lambda fit: fit[0])
        if block[1] > size:
            index = seg["blocks"].index(block)
            seg["blocks"].insert(index + 1, [block[0] + size, block[1] - size, False])
            block[1] = size
        block[2] = True
        return seg, block[0]

    def free(self, handle: tuple[dict, int]) -> None:
        seg, offset = handle
        blocks = seg["blocks"]
        index = next(i for i, b in enumerate(blocks) if b[0] == offset)
        blocks[index][2] = False
        for i in (index + 1, index):  # merge with the free neighbour after, then before
            if 0 < i < len(blocks) and not blocks[i - 1][2] and not blocks[i][2]:
                blocks[i - 1][1] += blocks[i][1]
                del blocks[i]


def run_trace(allocator: FakeCachingAllocator, trace: list[tuple]) -> int:
    """Play ("alloc", name, bytes, watched) and ("free", name); return the watched peak."""
    handles, sizes = {}, {}
    live = peak = 0
    for op in trace:
        if op[0] == "alloc":
            _, name, nbytes, watched = op
            handles[name] = allocator.malloc(nbytes)
            sizes[name] = -(-nbytes // 512) * 512 if watched else 0
            live += sizes[name]
            peak = max(peak, live)
        else:
            allocator.free(handles.pop(op[1]))
            live -= sizes.pop(op[1])
    return peak


def warm_worker() -> FakeCachingAllocator:
    """A worker after its warm-up: a cuBLAS-like workspace lives in a 20 MiB segment."""
    allocator = FakeCachingAllocator()
    allocator.malloc(8 * MIB + 16 * 1024)
    return allocator


def profile(trace: list[tuple]) -> tuple[int, int]:
    """The profiling pass: (watched peak, overhead) of the task alone on a warm worker."""
    allocator = warm_worker()
    held = limit(allocator, None, 0)
    peak = run_trace(allocator, trace)
    return peak, reserved_overhead(reserved_growth(allocator, held), peak)


def run_capped(trace: list[tuple], budget: int, overhead: int) -> None:
    allocator = warm_worker()
    limit(allocator, budget, overhead)
    run_trace(allocator, trace)


def random_trace(seed: int) -> list[tuple]:
    """A task: tensors of every size class and scratch that lives for one step."""
    rng = random.Random(seed)
    trace, alive = [], []
    for step in range(rng.randint(20, 60)):
        size = rng.choice([rng.randint(1, MIB), rng.randint(MIB, 10 * MIB), rng.randint(10 * MIB, 400 * MIB)])
        trace.append(("alloc", f"t{step}", size, True))
        alive.append(f"t{step}")
        if rng.random() < 0.4:
            trace += [("alloc", f"s{step}", rng.randint(MIB, 64 * MIB), False), ("free", f"s{step}")]
        while alive and rng.random() < 0.45:
            trace.append(("free", alive.pop(rng.randrange(len(alive)))))
    return trace + [("free", name) for name in alive]


def test_a_task_whose_tensors_stay_within_its_estimate_is_never_refused():
    refused_without_overhead = 0
    for seed in range(60):
        trace = random_trace(seed)
        estimate, overhead = profile(trace)  # the estimator is exact: the estimate is the watched peak
        budget = math.ceil(estimate * 1.15)
        run_capped(trace, budget, overhead)  # raises FakeOutOfMemory if refused
        try:
            run_capped(trace, budget, 0)
        except FakeOutOfMemory:
            refused_without_overhead += 1
    assert refused_without_overhead >= 10  # the overhead is what lets these through, not the 15%


def test_the_fixed_256_mib_slack_refused_a_task_within_its_estimate():
    """What GIN did on the H100: scratch beside large live tensors outgrows any fixed slack."""
    trace = [("alloc", "x", 600 * MIB, True), ("alloc", "h", 500 * MIB, True),
             ("alloc", "scratch", 700 * MIB, False), ("free", "scratch"), ("free", "x"), ("free", "h")]
    estimate, overhead = profile(trace)
    budget = math.ceil(estimate * 1.15)
    assert overhead == 700 * MIB
    with pytest.raises(FakeOutOfMemory):
        run_capped(trace, budget, 256 * MIB)
    run_capped(trace, budget, overhead)


def test_a_task_past_its_budget_and_overhead_is_refused():
    trace = random_trace(3)
    estimate, overhead = profile(trace)
    greedy = trace[:1] + [("alloc", "runaway", 2 * (estimate + overhead), True)] + trace[1:]
    with pytest.raises(FakeOutOfMemory):
        run_capped(greedy, math.ceil(estimate * 1.15), overhead)


def test_the_cap_counts_what_the_worker_holds_and_a_task_without_budget_has_none():
    allocator = warm_worker()
    allocator.malloc(300 * MIB)
    allocator.free(allocator.malloc(50 * MIB))  # cached: released before the cap is set
    held = limit(allocator, 100 * MIB, 7 * MIB)
    assert held == 20 * MIB + 300 * MIB
    assert allocator.cap == cap_bytes(held, 100 * MIB, 7 * MIB) == held + 107 * MIB
    assert limit(allocator, None, 7 * MIB) == held and allocator.cap is None


def test_overhead_is_the_largest_per_model_and_size_class():
    measured = [("GIN", 700 * MIB, 30 * MIB), ("GIN", 900 * MIB, 90 * MIB), ("GIN", 1100 * MIB, 5 * MIB),
                ("GCN", 700 * MIB, 1 * MIB), ("GCN", 100, 0)]
    assert overhead_by_class(measured) == {"GIN 512-1024 MiB": 90 * MIB, "GIN 1024-2048 MiB": 5 * MIB,
                                           "GCN 512-1024 MiB": 1 * MIB, "GCN 0-1 MiB": 0}
    assert size_class(64 * MIB) == "32-64 MiB" and size_class(64 * MIB + 1) == "64-128 MiB"
    assert class_key("SAGE", 3 * MIB) == "SAGE 2-4 MiB"


def test_a_refusal_within_budget_is_told_from_a_task_past_its_budget():
    """The worker's job path on the CPU under a capped fake allocator: what the watch saw
    decides. Refused while its live bytes were within budget: the cap was too tight,
    recorded as such and not over budget; past its budget: stopped and over budget."""
    cpu = torch.device("cpu")
    shape = GraphShape("syn", 2_000, 20_000, 32, 7, 1.0, 0)
    graph = synthesize(shape, seed=5)
    task = Task("t", TRAINING, "GCN", shape, 3, 32, 1.0, epochs=1)
    ledger = DeviceLedger(capacity_bytes=1 << 40)

    def run(budget, overhead, allocator):
        with allocator:
            outcome = _run(Job(task, graph, budget, 1, overhead_bytes=overhead), None, cpu, ledger, allocator)
        assert allocator.cap is None  # lifted when the task ended: the next job prepares without it
        return outcome

    warm_up_models(cpu)
    profiled = run(None, 0, RefusingHostAllocator(scratch_bytes=8 * MIB))
    assert profiled.error is None, profiled.error
    peak = profiled.watched_peak_bytes
    overhead = reserved_overhead(profiled.reserved_growth_bytes, peak)
    assert overhead == 8 * MIB  # the scratch: the fake counts the tensors as the watch does

    budget = math.ceil(peak * 1.15)
    too_tight = run(budget, 0, RefusingHostAllocator(scratch_bytes=8 * MIB))  # the cap leaves out the scratch
    assert too_tight.error == OUT_OF_MEMORY_WITHIN_BUDGET and not too_tight.over_budget, too_tight
    assert too_tight.refused_by == "cap"  # its request was past what the cap left
    # a refusal that names no size: the cap's where the device had the cap's room free, else unknown
    unsized = run(budget, 0, RefusingHostAllocator(scratch_bytes=8 * MIB, total_bytes=1 << 40, names_size=False))
    assert unsized.error == OUT_OF_MEMORY_WITHIN_BUDGET and unsized.refused_by == "cap", unsized
    unsized_full = run(budget, overhead, RefusingHostAllocator(scratch_bytes=8 * MIB, total_bytes=peak,
                                                               names_size=False))
    assert unsized_full.error == OUT_OF_MEMORY_WITHIN_BUDGET and unsized_full.refused_by is None, unsized_full
    full = run(budget, overhead, RefusingHostAllocator(scratch_bytes=8 * MIB, total_bytes=peak))
    assert full.error == OUT_OF_MEMORY_WITHIN_BUDGET and full.refused_by == "device", full
    assert too_tight.watched_peak_bytes <= budget and too_tight.result is None
    assert run(budget, overhead, RefusingHostAllocator(scratch_bytes=8 * MIB)).error is None

    stopped = run(peak // 2, overhead + peak, RefusingHostAllocator(scratch_bytes=8 * MIB))  # the watch first
    assert stopped.over_budget and stopped.error.startswith("stopped over budget"), stopped

    # The caveat: with the cap exact, the refused request is the one that would pass the
    # budget; the watch never saw it, so it too is recorded within budget.
    refused_at_budget = run(peak // 2, overhead, RefusingHostAllocator(scratch_bytes=8 * MIB))
    assert refused_at_budget.error == OUT_OF_MEMORY_WITHIN_BUDGET and not refused_at_budget.over_budget
    assert refused_at_budget.watched_peak_bytes <= peak // 2

    no_budget = run(None, 0, RefusingHostAllocator(scratch_bytes=8 * MIB, total_bytes=peak))  # the device is full
    assert no_budget.error == OUT_OF_MEMORY and not no_budget.over_budget and no_budget.refused_by == "device"


def test_a_refusal_is_the_caps_where_the_request_was_past_what_the_cap_left():
    """CUDA's allocator checks the cap before it asks the device: a request past the
    cap's room is the cap's refusal, one within it the device's; without the size, or
    where its rounding straddles the room, the cap's only where the device had at
    least the cap's room free (read only then)."""
    cap, reserved = 100 * MIB, 90 * MIB  # 10 MiB of room

    def free(nbytes):
        return lambda: nbytes

    def unread():
        raise AssertionError("the device's free memory is read only where the size does not decide")

    assert refused_by(cap, reserved, unread, (20 * MIB, 20 * MIB)) == "cap"  # past both: the cap first
    assert refused_by(cap, reserved, unread, (8 * MIB, 8 * MIB)) == "device"
    assert refused_by(cap, reserved, unread, (10 * MIB, 10 * MIB)) == "device"  # exactly the room fits the cap
    assert refused_by(cap, reserved, free(30 * MIB), (9 * MIB, 11 * MIB)) == "cap"  # straddles: as without a size
    assert refused_by(cap, reserved, free(5 * MIB), (9 * MIB, 11 * MIB)) is None
    assert refused_by(cap, reserved, free(30 * MIB), None) == "cap"
    assert refused_by(cap, reserved, free(10 * MIB), None) == "cap"
    assert refused_by(cap, reserved, free(5 * MIB), None) is None  # either could have
    assert refused_by(cap, reserved, free(None), None) is None
    assert refused_by(None, reserved, unread, None) == "device"  # no cap to refuse
    assert refused_by(cap, cap, unread, None) == "cap"  # nothing left under the cap: whatever was asked


def test_a_refusals_size_is_read_as_the_bounds_its_rounding_leaves():
    message = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.11 GiB of which "
               "3.19 MiB is free. Including non-PyTorch memory, this process has 1.50 GiB memory in use.")
    low, high = requested_range(message)
    assert low <= 20 * MIB <= high and high - low == MIB // 100 + 1  # +-0.005 MiB, outward to whole bytes
    low, high = requested_range("Tried to allocate 1.50 GiB.")
    assert low <= 3 << 29 <= high and (3 << 29) - low > 5 * MIB  # two decimals of a GiB: ~5 MiB either way
    assert requested_range("Tried to allocate 512 bytes.") == (512, 512)  # whole bytes are exact
    assert requested_range("Tried to allocate 2.50 KiB.") == (2554, 2566)  # 0.005 KiB either way, outward to whole bytes
    sizes = [1, 1024, 1025, 1536, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 20 * MIB + 12_345, (1 << 30) + 1, 3 << 29]
    for size in sizes:  # written as CUDA writes it (its units' thresholds, two decimals), read back around it
        low, high = requested_range(f"Tried to allocate {cuda_size_text(size)}. GPU 0 has 1.20 GiB free")
        assert low <= size <= high, (size, cuda_size_text(size), low, high)
    assert requested_range("out of memory") is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_a_task_within_its_budget_runs_and_one_past_it_is_stopped_and_recorded():
    """The tests above on CUDA's caching allocator, through the worker's own job path
    (cap, watch, outcome); the overhead profiled as the executor does, the task alone
    with no budget on a warm worker."""
    device = torch.device("cuda")
    allocator = device_allocator(device)
    shape = GraphShape("syn", 4_000, 40_000, 64, 10, 1.0, 0)
    graph = synthesize(shape, seed=11)
    task = Task("t", TRAINING, "GCN", shape, 4, 64, 1.0, epochs=2)
    ledger = DeviceLedger(capacity_bytes=allocator.total_bytes)

    def run(budget: int | None, overhead: int = 0):
        job = Job(task, graph, budget, torch.get_num_threads(), overhead_bytes=overhead)
        return _run(job, None, device, ledger, allocator)

    warm_up_models(device)
    try:
        profiled = run(None)
        assert profiled.error is None, profiled.error
        peak = profiled.watched_peak_bytes
        overhead = reserved_overhead(profiled.reserved_growth_bytes, peak)
        budget = math.ceil(peak * 1.15)
        within = run(budget, overhead)
        assert within.error is None and not within.over_budget and within.result > 0, within
        assert within.watched_peak_bytes <= budget
        past = run(peak // 2, overhead)
        # the watch stops it (over budget), or the allocator refuses the request that would
        # have passed the budget before the watch counts it (recorded within budget)
        assert past.result is None, past
        assert (past.over_budget and str(past.error).startswith("stopped over budget")) or (
            not past.over_budget and past.error == OUT_OF_MEMORY_WITHIN_BUDGET), past
        held = limit(allocator, budget, overhead)
        with pytest.raises(torch.OutOfMemoryError) as refusal:  # past budget and overhead: the allocator refuses
            torch.empty(2 * (budget + overhead), dtype=torch.uint8, device=device)
        # its message names the request (2 MiB-rounded), past what the cap left: the cap refused
        asked = requested_range(str(refusal.value))
        assert asked is not None and asked[0] - 4 * MIB <= 2 * (budget + overhead) <= asked[1] + 4 * MIB, \
            str(refusal.value)
        assert refused_by(cap_bytes(held, budget, overhead), allocator.reserved_bytes(), allocator.free_bytes,
                          asked) == "cap"
    finally:
        limit(allocator, None, 0)


def test_cap_fraction_gives_back_the_cap_as_pytorch_truncates_it():
    """PyTorch keeps size_t(fraction * total): the plain quotient loses a byte for
    some caps (about 3% of them on these totals); the fraction passed must not."""
    rng = random.Random(7)
    plain_short = 0
    for total in (85_045_379_072, 150_754_820_096, 16_945_512_448):  # H100, H200, a 16 GiB card
        for cap in [1, total, total - 1] + [rng.randrange(1, total) for _ in range(20_000)]:
            assert int(cap_fraction(cap, total) * total) == cap, (cap, total)
            plain_short += int(cap / total * total) < cap
    assert plain_short > 0  # the case the nudge exists for does occur
    assert cap_fraction(2 * 150_754_820_096, 150_754_820_096) == 1.0  # PyTorch refuses a fraction above 1
