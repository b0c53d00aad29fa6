"""Grouping policies: hand-computed results from the algorithms as printed, and the
safety condition under random queues."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.colocation.policies import (POLICIES, InfeasibleTask, Item, base_fifo, bmc, bqt, group_threshold, lmcf,
                                       sqtf)


def items(needs, qts=None):
    qts = qts or [0.0] * len(needs)
    return [Item(f"k{i}", need, qt) for i, (need, qt) in enumerate(zip(needs, qts))]


def needs_of(groups, queue):
    by_key = {it.key: it.need for it in queue}
    return [[by_key[k] for k in group] for group in groups]


def test_base_packs_in_arrival_order():
    queue = items([5, 1, 4, 2, 3])
    assert needs_of(base_fifo(queue, 6, 2), queue) == [[5, 1], [4, 2], [3]]


def test_lmcf_sorts_by_estimate_then_packs():
    queue = items([5, 1, 4, 2, 3])
    assert needs_of(lmcf(queue, 6, 2), queue) == [[1, 2], [3], [4], [5]]


def test_bmc_pairs_low_and_high_ends():
    # CoGNN Alg. 1: pop left, right, left, ...; a new group when full (nWorker = 2).
    queue = items([3, 1, 6, 2, 5, 4])
    assert needs_of(bmc(queue, 100, 2), queue) == [[1, 6], [2, 5], [3, 4]]


def test_bmc_advances_when_group_reaches_allocatable():
    # gPMC >= MA opens a new group: 2+7 < 10 stays, 3 opens, 3+5 stays.
    queue = items([7, 3, 2, 5])
    assert needs_of(bmc(queue, 10, 3), queue) == [[2, 7], [3, 5]]


def test_group_threshold_formula():
    # gTH = ceil(SP / ceil(SP / MA)): SP = 15, MA = 10 -> ceil(15 / 2) = 8
    assert group_threshold(items([3, 4, 2, 5, 1]), 10) == 8
    assert group_threshold(items([3, 4]), 10) == 7


def test_sqtf_as_printed():
    # GNNSched Alg. 1: ascending QT; a new group once the sum before adding exceeds gTH = 8.
    queue = items([4, 3, 2, 5, 1], qts=[2.0, 1.0, 3.0, 4.0, 5.0])  # by QT: needs 3, 4, 2, 5, 1
    assert needs_of(sqtf(queue, 10, 10), queue) == [[3, 4, 2], [5, 1]]


def test_bqt_as_printed():
    # GNNSched Alg. 2: by QT the needs are 1, 2, 3, 4, 5; SP = 15, MA = 12, gTH = 8.
    # Pops left, right, left, right, left: 1, 5, 2, 4, 3. Sums before adding: 0, 1, 6,
    # 8 (not > 8, so 4 joins: 12 <= MA), then 12 > 8 opens a group for 3.
    queue = items([5, 1, 4, 2, 3], qts=[5.0, 1.0, 4.0, 2.0, 3.0])
    assert needs_of(bqt(queue, 12, 10), queue) == [[1, 5, 2, 4], [3]]


def test_bqt_keeps_safety_where_printed_algorithm_overfills():
    # By QT the needs are 3, 1, 4, 5, 2; popped: 3, 2, 1, 5, 4; gTH = 8, MA = 10.
    # As printed 5 joins (6 is not > 8) and the group needs 11 > MA; here 5 opens a group.
    queue = items([3, 4, 2, 5, 1], qts=[1.0, 3.0, 5.0, 4.0, 2.0])
    groups = needs_of(bqt(queue, 10, 10), queue)
    assert groups == [[3, 2, 1], [5, 4]]
    assert all(sum(g) <= 10 for g in groups)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_task_larger_than_memory_is_refused(name):
    with pytest.raises(InfeasibleTask):
        POLICIES[name](items([3, 11]), 10, 2)


queues = st.lists(st.tuples(st.integers(1, 1000), st.floats(0.0, 100.0, allow_nan=False)), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(queue=queues, allocatable=st.integers(1000, 5000), workers=st.integers(1, 6), name=st.sampled_from(sorted(POLICIES)))
def test_every_policy_keeps_the_safety_condition(queue, allocatable, workers, name):
    q = [Item(f"k{i}", need, qt) for i, (need, qt) in enumerate(queue)]
    groups = POLICIES[name](q, allocatable, workers)
    assert sorted(k for g in groups for k in g) == sorted(it.key for it in q)  # each task exactly once
    need = {it.key: it.need for it in q}
    for group in groups:
        assert 1 <= len(group) <= workers
        assert sum(need[k] for k in group) <= allocatable


@settings(max_examples=100, deadline=None)
@given(queue=queues, workers=st.integers(1, 6), name=st.sampled_from(["base", "lmcf", "bmc"]))
def test_with_ample_memory_groups_are_full(queue, workers, name):
    q = [Item(f"k{i}", need, qt) for i, (need, qt) in enumerate(queue)]
    groups = POLICIES[name](q, 10**9, workers)
    assert [len(g) for g in groups[:-1]] == [workers] * (len(groups) - 1)
    assert len(groups) == math.ceil(len(q) / workers)
