"""Task grouping policies: pure functions from a queue to an ordered list of groups.

Training (CoGNN §III-D): Base (FIFO), LMCF (lowest memory consumption first), BMC
(balanced memory consumption, Alg. 1). Inference (GNNSched §3.4): SQTF (shortest
QoS target first, Alg. 1) and BQT (balanced QoS target, Alg. 2) with the group
threshold gTH = ceil(SP / ceil(SP / MA)).

A task's ``need`` is its estimated peak times the safety threshold. Every policy
keeps the safety condition: a group's needs sum to at most the allocatable
memory MA and a group holds at most ``workers`` tasks. BMC as printed already
does; SQTF and BQT as printed only compare the running sum with gTH *before*
adding a task, so one task may push a group past MA. Here they also open a new
group when the next task would break the condition; where it would not, the
result equals the printed algorithm.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    key: str
    need: int  # bytes: estimated peak x safety threshold
    qt: float = 0.0  # QoS target (inference): 2 x solo run time


class InfeasibleTask(ValueError):
    """A task needs more than the allocatable memory on its own."""


Groups = list[list[str]]


def check_feasible(items: list[Item], allocatable: int) -> None:
    for item in items:
        if item.need > allocatable:
            raise InfeasibleTask(
                f"task {item.key}: needs {item.need} bytes (estimate x threshold), "
                f"more than the {allocatable} allocatable")


def _greedy(order: list[Item], allocatable: int, workers: int) -> Groups:
    """Pack in the given order; open a new group when the next task would break safety."""
    groups: Groups = []
    used = 0
    for item in order:
        if not groups or used + item.need > allocatable or len(groups[-1]) == workers:
            groups.append([])
            used = 0
        groups[-1].append(item.key)
        used += item.need
    return groups


def base_fifo(items: list[Item], allocatable: int, workers: int) -> Groups:
    """Base: in arrival order, greedily as many tasks per group as fit."""
    check_feasible(items, allocatable)
    return _greedy(list(items), allocatable, workers)


def lmcf(items: list[Item], allocatable: int, workers: int) -> Groups:
    """LMCF: ascending estimated peak, then packed like Base."""
    check_feasible(items, allocatable)
    return _greedy(sorted(items, key=lambda it: it.need), allocatable, workers)


def bmc(items: list[Item], allocatable: int, workers: int) -> Groups:
    """BMC, CoGNN Alg. 1: pop alternately from the low and high ends of the
    ascending deque; advance when the group sum reaches MA or the group is full."""
    check_feasible(items, allocatable)
    queue = deque(sorted(items, key=lambda it: it.need))
    groups: Groups = []
    group_need, element_count = 0, workers
    for i in range(len(queue)):
        item = queue.pop() if i % 2 == 1 else queue.popleft()
        group_need += item.need
        if group_need >= allocatable or element_count == workers:
            groups.append([])
            group_need, element_count = item.need, 0
        groups[-1].append(item.key)
        element_count += 1
    return groups


def group_threshold(items: list[Item], allocatable: int) -> int:
    """gTH = ceil(SP / ceil(SP / MA)): spreads the batch evenly over the fewest groups."""
    total = sum(item.need for item in items)
    return math.ceil(total / math.ceil(total / allocatable)) if total > 0 else 0


def sqtf(items: list[Item], allocatable: int, workers: int) -> Groups:
    """SQTF, GNNSched Alg. 1: ascending QT, a new group once the sum exceeds gTH."""
    check_feasible(items, allocatable)
    order = deque(sorted(items, key=lambda it: it.qt))
    return _threshold_groups([order.popleft() for _ in range(len(order))], items, allocatable, workers)


def bqt(items: list[Item], allocatable: int, workers: int) -> Groups:
    """BQT, GNNSched Alg. 2: SQTF's order and threshold, popping alternately
    from the short-QT and long-QT ends."""
    check_feasible(items, allocatable)
    queue = deque(sorted(items, key=lambda it: it.qt))
    order = [queue.pop() if i % 2 == 1 else queue.popleft() for i in range(len(queue))]
    return _threshold_groups(order, items, allocatable, workers)


def _threshold_groups(order: list[Item], items: list[Item], allocatable: int, workers: int) -> Groups:
    threshold = group_threshold(items, allocatable)
    groups: Groups = []
    group_need = 0
    for item in order:
        unsafe = bool(groups) and (group_need + item.need > allocatable or len(groups[-1]) == workers)
        if not groups or group_need > threshold or unsafe:
            groups.append([])
            group_need = 0
        groups[-1].append(item.key)
        group_need += item.need
    return groups


POLICIES = {"base": base_fifo, "lmcf": lmcf, "bmc": bmc, "sqtf": sqtf, "bqt": bqt}
TRAINING_POLICIES = ("base", "lmcf", "bmc")
INFERENCE_POLICIES = ("base", "sqtf", "bqt")

# Baselines use no estimate: how many tasks may run at once. Default and
# PipeSwitch: one at a time (CoGNN §V-A); MPS-pair: CoGNN's MPS runs, two at a
# time with a barrier; MPS-Base: at most four; MPS (GNNSched's MPS-Aggr): a whole
# batch (None: as many as a batch holds). How each runs: executor.
MPS_BASE_CONCURRENCY = 4  # GNNSched §4.1: "MPS-Base 的最大并发数量为 4"
BASELINE_CONCURRENCY = {"default": 1, "pipeswitch": 1, "mps-pair": 2, "mps-base": MPS_BASE_CONCURRENCY, "mps": None}


def mps_base(items: list[Item], allocatable: int, workers: int) -> Groups:  # noqa: ARG001 - blind to memory
    """GNNSched's MPS-Base: a batch in arrival order, in static groups of at most
    four (§4.1-4.2: "最大并发数量为 4", "静态分组"), no estimate and no budget. Read
    as groups with a barrier between them, as GNNSched's own groups: "static
    grouping" names groups, not a window that refills as a task ends."""
    return [[item.key for item in items[i:i + MPS_BASE_CONCURRENCY]]
            for i in range(0, len(items), MPS_BASE_CONCURRENCY)]


def mps_aggr(items: list[Item], allocatable: int, workers: int) -> Groups:  # noqa: ARG001 - blind to memory
    """GNNSched's MPS-Aggr (``mps``): every task of a batch at once (§4.1:
    "并发执行同一批次的所有任务"), no estimate, no budget, nothing capped."""
    return [[item.key for item in items]]


# Baselines that run GNNSched's batches as groups, as the policies do, but blind to memory.
BATCH_BASELINES = {"mps-base": mps_base, "mps": mps_aggr}
