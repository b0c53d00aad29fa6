"""Grouper's PDA, the baselines, the queue mapping and the fluid evaluator, as plain data."""
from collections import Counter, defaultdict
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.schedulers.baselines import baraat, sincronia
from stage_order_fluid import completion_times, mean_completion, stage_completion_times
from controller.schedulers.grouper import (
    Stage,
    local_priorities,
    order_of,
    pda,
    pda_steps,
    pda_weights,
    primal_dual_steps,
    stage_machines,
    to_queues,
)
from experiments.cojob import bench as cojob_bench
from experiments.cojob.bench import pda_timings

# Fig. 3: two cojobs on one bottleneck link of one unit per time step. The caption
# gives each job's data per stage: job 1 (cojob A) 1 then 2, job 2 (A) 1 and is
# stopped, job 3 (B) 2 then 4, job 4 (B) 2 and is stopped. On one link a stage's
# load is the sum of its jobs' data: A1 = 1+1, A2 = 2, B1 = 2+2, B2 = 4. With these
# loads every number of §II comes out: FS 8, SPTF 7.5, optimum 6.5 (8/6.5 = 1.23x,
# 7.5/6.5 = 1.15x), and the loads are not a choice, the caption fixes them.
# Stage A-k is index k-1 (indices count from 0, as the driver's).
LINK = "tbh1/in"
FIG3_STAGES = [Stage("A1", "A", 0, {LINK: 2}), Stage("A2", "A", 1, {LINK: 2}),
               Stage("B1", "B", 0, {LINK: 4}), Stage("B2", "B", 1, {LINK: 4})]
# The same at the paper's granularity, one unit per job and stage (FS is per flow,
# SPTF ranks jobs); units sharing (cojob, index) are one cojob stage.
FIG3_JOBS = [Stage("A1/J1", "A", 0, {LINK: 1}), Stage("A1/J2", "A", 0, {LINK: 1}),
             Stage("A2/J1", "A", 1, {LINK: 2}),
             Stage("B1/J3", "B", 0, {LINK: 2}), Stage("B1/J4", "B", 0, {LINK: 2}),
             Stage("B2/J3", "B", 1, {LINK: 4})]
JOB_SIZES = {"J1": 3, "J2": 1, "J3": 6, "J4": 2}


def precedence_orders(stages):
    """Every order that keeps each cojob's chain in index order (interleavings)."""
    chains = defaultdict(list)
    for s in sorted(stages, key=lambda s: s.index):
        chains[s.cojob].append(s.stage_id)
    heads = {c: 0 for c in chains}

    def extend(prefix):
        if len(prefix) == len(stages):
            yield list(prefix)
        for c, chain in chains.items():
            if heads[c] < len(chain):
                heads[c] += 1
                yield from extend(prefix + [chain[heads[c] - 1]])
                heads[c] -= 1
    return list(extend([]))


def keeps_precedence(order, stages):
    position = {sid: n for n, sid in enumerate(order)}
    return all(position[a.stage_id] < position[b.stage_id]
               for a in stages for b in stages if a.cojob == b.cojob and a.index < b.index)


def sct(stages, order):
    return {f"{c}{k + 1}": t for (c, k), t in stage_completion_times(stages, completion_times(stages, order)).items()}


def permutation_cost(stages, order):
    """Weighted sum of completion times in the permutation model of Theorem 2's proof
    (concurrent open shop): every port carries the stages one after another in
    ``order``, so a stage completes once the stages up to it have crossed each of its
    ports, and not before the stage ahead of it in its cojob."""
    by_id = {s.stage_id: s for s in stages}
    crossed, done, total = defaultdict(float), {}, 0.0
    for sid in order:
        s = by_id[sid]
        for p, x in s.loads.items():
            crossed[p] += x
        done[s.cojob] = max([crossed[p] for p, x in s.loads.items() if x > 0] + [done.get(s.cojob, 0.0)])
        total += s.weight * done[s.cojob]
    return total


def best_permutation_cost(stages):
    return min(permutation_cost(stages, o) for o in precedence_orders(stages))


def rebased_weights(stages):
    """Eq. 46 read the other way: k = 1 for the first stage given of each cojob."""
    chains = defaultdict(list)
    for s in sorted(stages, key=lambda s: s.index):
        chains[s.cojob].append(s)
    return pda_weights([replace(s, index=k) for chain in chains.values() for k, s in enumerate(chain)])


# --- Fig. 3 -------------------------------------------------------------------

def test_fig3_pda_order_and_average_sct():
    order = pda(FIG3_STAGES)
    assert order == ["A1", "A2", "B1", "B2"]
    assert sct(FIG3_STAGES, order) == pytest.approx({"A1": 2, "A2": 4, "B1": 8, "B2": 12})
    assert mean_completion(FIG3_STAGES, order) == pytest.approx(6.5)
    assert min(mean_completion(FIG3_STAGES, o) for o in precedence_orders(FIG3_STAGES)) == pytest.approx(6.5)
    # On one link the proof's permutation model is the schedule itself.
    assert permutation_cost(FIG3_STAGES, order) / 4 == best_permutation_cost(FIG3_STAGES) / 4 == pytest.approx(6.5)


def test_fig3_fair_share_is_8_per_stage_and_per_flow():
    assert mean_completion(FIG3_STAGES, None) == pytest.approx(8.0)
    # Per-flow FS, as Fig. 3(b): stages complete at 4, 7, 9, 12.
    assert sct(FIG3_JOBS, None) == pytest.approx({"A1": 4, "B1": 7, "A2": 9, "B2": 12})
    assert mean_completion(FIG3_JOBS, None) == pytest.approx(8.0)


def test_fig3_sptf_is_7_5():
    by_job_size = sorted(FIG3_JOBS, key=lambda s: (JOB_SIZES[s.stage_id.split("/")[1]], s.index))
    order = [s.stage_id for s in by_job_size]
    assert sct(FIG3_JOBS, order) == pytest.approx({"A1": 4, "A2": 6, "B1": 8, "B2": 12})
    assert mean_completion(FIG3_JOBS, order) == pytest.approx(7.5)


def test_fig3_pda_order_applied_per_job_keeps_6_5():
    rank = {sid: n for n, sid in enumerate(pda(FIG3_STAGES))}
    order = sorted((s.stage_id for s in FIG3_JOBS), key=lambda u: rank[u.split("/")[0]])
    assert mean_completion(FIG3_JOBS, order) == pytest.approx(6.5)


def test_fig3_pda_weights_follow_eq46_and_every_step_is_tight():
    assert pda_weights(FIG3_STAGES) == {"A1": 1.25, "A2": 1.125, "B1": 1.25, "B2": 1.125}
    steps = pda_steps(FIG3_STAGES)
    assert [s.stage_id for s in steps] == ["B2", "B1", "A2", "A1"]
    assert all(s.tight == s.stage_id and s.weight_left == 0 for s in steps)


def test_pda_places_a_chain_tail_when_the_tightest_stage_has_successors():
    """Restricting line 16 to chain tails would order this s1, s4, s0, s2, s3
    (average 5.48, 2.14x the optimum; 2.35x in the proof's permutation model, past
    Theorem 2's bound, on unit weights, all at time 0): the big stage s1 on p3 is not
    a tail, so a 0.1 stage would be put last there, and s1's weight would go
    negative. PDA lets s1 win line 16 and places its tail s4 last."""
    stages = [Stage("s0", "c2", 0, {"p3": 0.1}), Stage("s1", "c0", 0, {"p1": 2, "p2": 5, "p3": 5}),
              Stage("s2", "c1", 0, {"p3": 0.1}), Stage("s3", "c2", 1, {}), Stage("s4", "c0", 1, {"p0": 2})]
    steps = pda_steps(stages)
    assert (steps[1].stage_id, steps[1].tight) == ("s4", "s1")
    best = min(mean_completion(stages, o) for o in precedence_orders(stages))
    assert mean_completion(stages, pda(stages)) == pytest.approx(best)
    assert permutation_cost(stages, pda(stages)) == pytest.approx(best_permutation_cost(stages))
    tails_only = ["s1", "s4", "s0", "s2", "s3"]
    assert mean_completion(stages, tails_only) > 2 * best
    assert permutation_cost(stages, tails_only) > 2 * best_permutation_cost(stages)


def test_eq46_counts_k_from_the_cojobs_first_stage_online():
    """A cojob at its 4th stage (k = 4) weighs 1 + 1/32 against a new cojob's 1 + 1/4,
    so on one port it goes last although it is the smaller; counting k from the
    first stage given would weigh both 1.25 and put it first."""
    stages = [Stage("A4", "A", 3, {"p": 1.0}), Stage("B1", "B", 0, {"p": 1.1})]
    assert pda_weights(stages) == {"A4": 1.03125, "B1": 1.25}
    assert pda(stages) == ["B1", "A4"]
    assert order_of(primal_dual_steps(stages, rebased_weights(stages))) == ["A4", "B1"]
    with pytest.raises(ValueError):
        pda_weights([Stage("x", "X", -1, {"p": 1.0})])


# --- Fig. 7 and queues ----------------------------------------------------------

def test_fig7_global_order_to_local_priorities():
    # Three machines, three stages: S1 between A and B, S2 between A and C, S3 between B and C.
    stages = [Stage("S1", "g1", 0, {"A/out": 1, "B/in": 1}), Stage("S2", "g2", 0, {"A/out": 1, "C/in": 1}),
              Stage("S3", "g3", 0, {"B/out": 1, "C/in": 1})]
    machines = stage_machines(stages)
    local = local_priorities(["S1", "S2", "S3"], machines)
    assert local == {"A": {"S1": 0, "S2": 1}, "B": {"S1": 0, "S3": 1}, "C": {"S2": 0, "S3": 1}}
    # The paper's local priorities <1,2> are exactly the queues (0 is control).
    assert to_queues(local) == {"A": {"S1": 1, "S2": 2}, "B": {"S1": 1, "S3": 2}, "C": {"S2": 1, "S3": 2}}


def test_ranks_past_the_last_queue_share_the_lowest_and_queue_0_is_never_used():
    order = [f"s{i}" for i in range(10)]
    local = local_priorities(order, {sid: ["m"] for sid in reversed(order)})
    assert to_queues(local)["m"] == {f"s{i}": q for i, q in enumerate([1, 2, 3, 4, 5, 6, 7, 7, 7, 7])}
    assert set(to_queues(local, queues=(2, 5))["m"].values()) == {2, 5}
    assert to_queues(local, queues=(2, 5))["m"]["s9"] == 5
    for bad in ((0, 1, 2), (), (1, 1), (8,)):
        with pytest.raises(ValueError):
            to_queues(local, queues=bad)


def test_local_priorities_needs_every_stage_in_the_order():
    with pytest.raises(ValueError):
        local_priorities(["a"], {"a": ["m"], "b": ["m"]})
    with pytest.raises(ValueError):
        local_priorities(["a", "a"], {"a": ["m"]})


# --- baselines and the fluid model ------------------------------------------------

def test_baraat_is_fifo_and_never_breaks_a_chain():
    stages = [Stage("x1", "x", 1, {"p": 1}, arrival=5.0), Stage("x2", "x", 2, {"p": 1}, arrival=0.0),
              Stage("y1", "y", 1, {"p": 1}, arrival=3.0), Stage("z1", "z", 1, {"p": 1}, arrival=3.0)]
    assert baraat(stages) == ["y1", "z1", "x1", "x2"]


def test_sincronia_ranks_by_the_coflows_it_is_given():
    """The paper's Sincronia sees one iteration's coflow: a small model (0.1 per
    iteration) with a long stage (10) goes before a big model's short stage."""
    stages = [Stage("small", "s", 0, {"p": 10}), Stage("big", "b", 0, {"p": 5})]
    assert sincronia(stages) == pda(stages) == ["big", "small"]
    iterations = [replace(stages[0], loads={"p": 0.1}), replace(stages[1], loads={"p": 1})]
    assert sincronia(iterations) == ["small", "big"]


def test_fluid_ports_work_independently_and_respect_arrival_and_precedence():
    stages = [Stage("a", "A", 0, {"p": 2, "q": 1}), Stage("b", "B", 0, {"p": 1}, arrival=0.5),
              Stage("a2", "A", 1, {"q": 1})]
    assert completion_times(stages, ["b", "a", "a2"]) == pytest.approx({"b": 1.5, "a": 3.0, "a2": 4.0})
    # Fair share: p splits between a and b from 0.5 until b is done at 2.5.
    assert completion_times(stages, None) == pytest.approx({"a": 3.0, "b": 2.5, "a2": 4.0})


def test_invalid_stages_are_refused():
    with pytest.raises(ValueError):
        pda([Stage("a", "A", 0, {"p": 1}), Stage("a", "B", 0, {"p": 1})])
    with pytest.raises(ValueError):
        pda([Stage("a", "A", 0, {"p": 1}), Stage("b", "A", 0, {"p": 1})])
    with pytest.raises(ValueError):
        pda([Stage("a", "A", 0, {"p": -1})])


@pytest.mark.parametrize("large_s, ok", [(0.5, True), (1.0, True), (1.5, False)])
def test_bench_rows_time_pda_on_both_sizes_against_a_second_for_the_large_one(monkeypatch, large_s, ok):
    timed = []
    monkeypatch.setattr(cojob_bench, "_pda_seconds", lambda n: timed.append(n) or (0.1 if n == 1_000 else large_s))
    rows = pda_timings()
    assert timed == [1_000, 10_000]
    assert [(r["name"], r["value"], r["target"], r["ok"]) for r in rows] == [
        ("pda_1000_stages_480_ports_s", 0.1, None, None), ("pda_10000_stages_480_ports_s", large_s, 1.0, ok)]


def test_bench_stages_are_reproducible_and_lie_on_480_ports():
    stages = cojob_bench.random_stages(200)
    assert stages == cojob_bench.random_stages(200) != cojob_bench.random_stages(200, seed=1)
    assert 2 * cojob_bench.MACHINES == 480 and {p for s in stages for p in s.loads} <= {
        f"tbh{m}/{end}" for m in range(1, 241) for end in ("out", "in")}


# --- properties on random instances --------------------------------------------------

PORTS = ("tbh1/out", "tbh1/in", "tbh2/out", "tbh2/in")
LOADS = st.one_of(st.just(0.0), st.sampled_from([0.1, 1.0, 2.0, 5.0]), st.floats(0.01, 10.0))


@st.composite
def instances(draw, max_stages: int, weighted: bool):
    cojobs = draw(st.lists(st.sampled_from("ABC"), min_size=1, max_size=max_stages))
    seen = Counter()
    stages = []
    for n, cojob in enumerate(cojobs):
        loads = draw(st.dictionaries(st.sampled_from(PORTS), LOADS, max_size=len(PORTS)))
        weight = draw(st.sampled_from([0.5, 1.0, 3.0])) if weighted else 1.0
        arrival = draw(st.sampled_from([0.0, 1.0, 4.0]))
        stages.append(Stage(f"s{n}", cojob, 3 * seen[cojob], loads, weight, arrival))
        seen[cojob] += 1
    return stages


@st.composite
def part_way_instances(draw, max_stages: int):
    """Unit weights, all at time 0 (Theorem 2's setting); each cojob's chain starts at
    stage 0, 1 or 2, numbered as the driver numbers the remaining stages."""
    cojobs = draw(st.lists(st.sampled_from("ABC"), min_size=1, max_size=max_stages))
    first = {c: draw(st.sampled_from([0, 1, 2])) for c in "ABC"}
    seen = Counter()
    stages = []
    for n, cojob in enumerate(cojobs):
        loads = draw(st.dictionaries(st.sampled_from(PORTS), LOADS, max_size=len(PORTS)))
        stages.append(Stage(f"s{n}", cojob, first[cojob] + seen[cojob], loads))
        seen[cojob] += 1
    return stages


@settings(max_examples=150, deadline=None, database=None)
@given(instances(max_stages=12, weighted=True))
def test_every_order_lists_each_stage_once_and_keeps_precedence(stages):
    ids = sorted(s.stage_id for s in stages)
    for order in (pda(stages), baraat(stages), sincronia(stages)):
        assert sorted(order) == ids
        assert keeps_precedence(order, stages)


@settings(max_examples=150, deadline=None, database=None)
@given(instances(max_stages=12, weighted=True))
def test_pda_weights_never_go_negative_and_duals_stay_feasible(stages):
    """Each stage's weight minus the duals charged to it (rho * its load on the
    step's port, while unplaced) is what is left when it is placed: >= 0 (Eq. 18)."""
    steps = pda_steps(stages)
    loads = {s.stage_id: s.loads for s in stages}
    left = dict(pda_weights(stages))
    for step in steps:
        assert step.rho >= 0 and step.weight_left >= 0 and step.min_weight >= 0
        for sid in left:
            left[sid] -= step.rho * loads[sid].get(step.port, 0.0) if step.port else 0.0
        assert left.pop(step.stage_id) == pytest.approx(step.weight_left, abs=1e-9)
        assert all(w >= -1e-9 for w in left.values())
        if step.tight is not None:
            assert step.tight == step.stage_id or step.tight in left


@settings(max_examples=150, deadline=None, database=None)
@given(instances(max_stages=5, weighted=False))
def test_pda_is_within_2x_of_the_best_order(stages):
    stages = [Stage(s.stage_id, s.cojob, s.index, s.loads) for s in stages]   # all at time 0, as in §III
    best = min(mean_completion(stages, o) for o in precedence_orders(stages))
    assert mean_completion(stages, pda(stages)) <= 2 * best + 1e-9


@settings(max_examples=150, deadline=None, database=None)
@given(part_way_instances(max_stages=6))
def test_pda_is_within_2x_of_the_best_permutation_under_either_reading_of_k(stages):
    """Theorem 2 against the brute-force best precedence-keeping permutation, in the
    proof's own load model; the proof holds for either numbering of k (alpha >= 0 and
    rising along the chain is all it uses), so both readings are held to it."""
    best = best_permutation_cost(stages)
    assert permutation_cost(stages, pda(stages)) <= 2 * best + 1e-9
    rebased = order_of(primal_dual_steps(stages, rebased_weights(stages)))
    assert permutation_cost(stages, rebased) <= 2 * best + 1e-9
