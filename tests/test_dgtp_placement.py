"""DGTP placement (paper 000, §V): the problem, the execution DAG and Eq. 27, IFS, ETP."""
import itertools
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.schedulers.placement.dag import (
    cost,
    execution_dag,
    guaranteed_rates,
    path_length,
)
from controller.schedulers.placement.etp import etp
from placement_execution import oes_makespan
from controller.schedulers.placement.ifs import ifs
from controller.schedulers.placement.problem import (
    MOVABLE,
    Machine,
    Problem,
    Task,
    Transfer,
    capacity_penalty,
    check_placement,
    nic_seconds,
    ring_allreduce,
    usage,
)

# --- the hand-worked example ------------------------------------------------------
# A: NIC 100 B/s each way, speed 1, the only GPU. B: NIC 50 B/s, computes twice as fast.
# Stores g0 on A, g1 on B; sampler s0 feeds worker w0 (needs the GPU); PS p0.


def small(a_capacity=None, b_capacity=None) -> Problem:
    machines = [Machine("A", a_capacity or {"cpu": 8, "mem": 16, "gpu": 1}, 100, 100),
                Machine("B", b_capacity or {"cpu": 8, "mem": 16}, 50, 50, speed=2)]
    tasks = [Task("g0", "store", 1, {"cpu": 1, "mem": 4}, home="A"), Task("g1", "store", 2, {"cpu": 1}, home="B"),
             Task("s0", "sampler", 1, {"cpu": 1, "mem": 8}), Task("w0", "worker", 3, {"cpu": 1, "gpu": 1}),
             Task("p0", "ps", 1, {"cpu": 1})]
    transfers = [Transfer("g0", "s0", "sample0", 40), Transfer("g0", "s0", "feature", 60),
                 Transfer("g1", "s0", "feature", 100), Transfer("s0", "w0", "minibatch", 200),
                 Transfer("w0", "p0", "gradient", 50), Transfer("p0", "w0", "parameter", 50, lag=1)]
    return Problem(machines, tasks, transfers)


PS_ON_B = {"g0": "A", "g1": "B", "s0": "A", "w0": "A", "p0": "B"}
PS_ON_A = PS_ON_B | {"p0": "A"}


def test_guaranteed_rates_are_eq_26_over_one_iterations_flows():
    # Flows g1->s0 (B->A), w0->p0 (A->B), p0->w0 (B->A): Δ_out(B) = Δ_in(A) = 2, Δ_out(A) = Δ_in(B) = 1.
    assert guaranteed_rates(small(), PS_ON_B) == pytest.approx(
        {("g1", "s0"): min(100 / 2, 50 / 2), ("w0", "p0"): min(50 / 1, 100 / 1), ("p0", "w0"): min(100 / 2, 50 / 2)})


def test_guaranteed_rates_are_oes_rates_with_every_flow_of_an_iteration_active():
    """Eq. 26 is OES's rule (``oes.oes_rates``), written again over the placement for
    ETP's hot path: the two agree on every placement of the hand-worked problem."""
    from controller.schedulers import oes
    problem = small()
    machines = [oes.Machine(m.name, m.nic_in, m.nic_out) for m in problem.machines.values()]
    movable = [t for t in problem.tasks.values() if t.home is None]
    for hosts in itertools.product(problem.machines, repeat=len(movable)):
        placement = {t.task_id: t.home for t in problem.tasks.values() if t.home} | {
            t.task_id: m for t, m in zip(movable, hosts)}
        rates = guaranteed_rates(problem, placement)
        flows = [oes.Flow(f"{src}>{dst}", placement[src], placement[dst]) for src, dst in rates]
        assert rates == pytest.approx({tuple(fid.split(">")): rate for fid, rate in
                                       oes.oes_rates(machines, flows).items()})


def test_nic_seconds_is_the_busiest_nics_bytes_of_an_iteration():
    # PS on B: A sends w0->p0 50 B at 100 B/s (0.5 s), receives g1->s0 100 + p0->w0 50 (1.5 s);
    # B sends 150 B at 50 B/s (3 s), receives 50 (1 s). Same-machine pairs cost nothing.
    assert nic_seconds(small(), PS_ON_B) == pytest.approx(3.0)
    assert nic_seconds(small(), PS_ON_A) == pytest.approx(100 / 50)
    varying = Problem(small().machines.values(), small().tasks.values(),
                      [Transfer("g1", "s0", "feature", [100, 300]), Transfer("s0", "w0", "minibatch", 1)])
    assert nic_seconds(varying, PS_ON_B) == pytest.approx(200 / 50)  # the mean of 100 and 300 B


def test_critical_path_by_hand():
    dag = execution_dag(small(), PS_ON_B, 2)
    # Iteration 0: g1 ends at 2/2 = 1; flow g1->s0 100 B at 25 B/s: 5; s0 (after g0 at 1, local): 6;
    # w0: 9; flow w0->p0 50/50: 10; p0 1/2: 10.5; flow p0->w0 (feeds iteration 1) 50/25: 12.5.
    # Iteration 1: flow g1->s0 after its iteration-0 flow (Eq. 12): 5 + 4 = 9; s0: 10;
    # w0 waits for the parameters: 12.5 + 3 = 15.5; flow w0->p0: 16.5; p0: 17.
    # p0's parameters of iteration 1 feed iteration 2, outside the window: no vertex.
    path = dag.critical_path()
    assert path.length == pytest.approx(17)
    assert path.vertices == (("task", "g1", 0), ("flow", "g1", "s0", 0), ("task", "s0", 0), ("task", "w0", 0),
                             ("flow", "w0", "p0", 0), ("task", "p0", 0), ("flow", "p0", "w0", 0),
                             ("task", "w0", 1), ("flow", "w0", "p0", 1), ("task", "p0", 1))
    flows = [v for v in dag.vertices if v[0] == "flow"]
    assert sorted(flows) == sorted([("flow", "g1", "s0", 0), ("flow", "g1", "s0", 1), ("flow", "w0", "p0", 0),
                                    ("flow", "w0", "p0", 1), ("flow", "p0", "w0", 0)])
    weight = dict(zip(dag.vertices, dag.weights))
    assert weight["task", "p0", 1] == pytest.approx(0.5)  # B's speed 2
    assert weight["flow", "g1", "s0", 1] == pytest.approx(4)
    # what the path is made of: the worker's two computations, then the store's transfer
    made_of = path.made_of(dag, small())
    assert made_of == pytest.approx({"worker": 6, "store->sampler": 4, "worker->ps": 2, "ps->worker": 2, "store": 1,
                                     "sampler": 1, "ps": 1})
    assert list(made_of)[:2] == ["worker", "store->sampler"] and sum(made_of.values()) == pytest.approx(17)


def test_colocating_a_pair_removes_its_flow_vertices():
    dag = execution_dag(small(), PS_ON_A, 2)
    assert {v[1:3] for v in dag.vertices if v[0] == "flow"} == {("g1", "s0")}
    # g1->s0 alone now: min(100/1, 50/1) = 50 B/s, 2 s. Iteration 0: 1, 3, s0 4, w0 7, p0 8.
    # Iteration 1: flow max(2, 3) + 2 = 5, s0 6, w0 waits for p0: 8 + 3 = 11, p0 12.
    assert dag.critical_path().length == pytest.approx(12)


def test_per_iteration_values_cycle_over_the_window():
    one = Problem([Machine("A", {}, 1, 1)], [Task("g0", "store", [1, 2], home="A")], [])
    assert execution_dag(one, {"g0": "A"}, 3).critical_path().length == pytest.approx(1 + 2 + 1)


def test_eq_27_prices_capacity_overload():
    tight = small(a_capacity={"cpu": 2, "mem": 10, "gpu": 1})
    # PS on A: A runs g0, s0, w0, p0: cpu 4 of 2 (+100%), mem 12 of 10 (+20%).
    assert capacity_penalty(tight, PS_ON_A) == pytest.approx(1.2)
    c = cost(tight, PS_ON_A, 2)
    assert c.critical_path_s == pytest.approx(12) and c.value == pytest.approx(12 * 2.2)
    assert not c.within_capacity
    # PS on B: A has cpu 3 of 2 (+50%), mem 12 of 10 (+20%).
    assert cost(tight, PS_ON_B, 2).value == pytest.approx(17 * 1.7)
    assert cost(small(), PS_ON_B, 2).value == pytest.approx(17) and cost(small(), PS_ON_B, 2).within_capacity
    # A GPU task on a machine without GPUs: no amount of relaxation hosts it.
    assert capacity_penalty(small(), PS_ON_B | {"w0": "B"}) == float("inf")


def test_oes_makespan_by_hand():
    # PS_ON_B, 2 iterations: every flow is alone on its NICs, so it gets its slower NIC
    # whole, not Eq. 26's share. g0, g1 end at 1; flow g1->s0 #0 100 B at min(100, 50): 3;
    # its #1 (g1 ends again at 2) waits for #0 (Eq. 12): 3 + 2 = 5. s0 #0 3-4, w0 #0 4-7,
    # w0->p0 #0 50 B at 50: 8, p0 #0 8-8.5, p0->w0 #0 at 50: 9.5. s0 #1 5-6; w0 #1 waits
    # for the parameters: 9.5-12.5, w0->p0 #1: 13.5, p0 #1: 14 (the DAG's 17).
    assert oes_makespan(small(), PS_ON_B, 2) == pytest.approx(14, rel=1e-9)


def test_oes_splits_a_shared_nic_and_speeds_up_the_flow_left_alone():
    machines = [Machine("A", {}, 100, 100), Machine("B", {}, 100, 100)]
    tasks = [Task("g0", "store", 1, home="A"), Task("g1", "store", 1, home="B"),
             Task("s0", "sampler", 1), Task("s1", "sampler", 1)]
    problem = Problem(machines, tasks, [Transfer("g0", "s0", "feature", 100), Transfer("g0", "s1", "feature", 300)])
    placement = {"g0": "A", "g1": "B", "s0": "B", "s1": "B"}
    # From 1 both flows leave A (and enter B): 50 B/s each. g0->s0 ends at 1 + 100/50 = 3;
    # g0->s1 has 200 B left and A to itself: 100 B/s, ends at 5; s1 runs 5-6. The DAG
    # keeps Eq. 26's 50 B/s: 1 + 300/50 + 1 = 8.
    assert oes_makespan(problem, placement, 1) == pytest.approx(6, rel=1e-9)
    assert path_length(problem, placement, 1) == pytest.approx(8)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3), st.integers(0, 2), st.integers(0, 1), st.booleans(), st.integers(1, 4),
       st.randoms(use_true_random=False))
def test_oes_on_one_machine_is_the_critical_path(samplers, workers, ps, ring, iterations, rnd):
    """No flows: OES runs every task as soon as the DAG's edges let it."""
    ring = ring and workers == 2
    problem = job([{}], {}, {kind: {} for kind in MOVABLE}, samplers, workers, 0 if ring else ps, ring)
    tasks = [replace(t, exec_s=[rnd.choice((0, 0.5, 1, 3)) for _ in range(rnd.randint(1, 3))])
             for t in problem.tasks.values()]
    problem = Problem([replace(problem.machines["m0"], speed=rnd.choice((0.5, 1, 2)))], tasks, problem.transfers)
    placement = dict.fromkeys(problem.tasks, "m0")
    assert oes_makespan(problem, placement, iterations) == pytest.approx(
        execution_dag(problem, placement, iterations).critical_path().length, rel=1e-12, abs=1e-12)


# --- IFS --------------------------------------------------------------------------

def job(capacities, store_demand, demand, samplers, workers, ps, ring=False) -> Problem:
    """One store per machine; sampler i feeds worker i mod W; PSs or a ring."""
    machines = [Machine(f"m{k}", cap, 100, 100) for k, cap in enumerate(capacities)]
    tasks = [Task(f"g{k}", "store", 1, store_demand, home=f"m{k}") for k in range(len(capacities))]
    tasks += [Task(f"s{i}", "sampler", 1, demand["sampler"]) for i in range(samplers)]
    tasks += [Task(f"w{i}", "worker", 1, demand["worker"]) for i in range(workers)]
    tasks += [Task(f"p{i}", "ps", 1, demand["ps"]) for i in range(ps)]
    transfers = [Transfer(f"g{k}", f"s{i}", "feature", 10) for k in range(len(capacities)) for i in range(samplers)]
    transfers += [Transfer(f"s{i}", f"w{i % workers}", "minibatch", 20) for i in range(samplers) if workers]
    transfers += [Transfer(f"w{w}", f"p{p}", "gradient", 30) for w in range(workers) for p in range(ps)]
    transfers += [Transfer(f"p{p}", f"w{w}", "parameter", 30, lag=1) for w in range(workers) for p in range(ps)]
    if ring:
        ring_tasks, ring_transfers = ring_allreduce([f"w{i}" for i in range(workers)], 15, 0.01)
        tasks += ring_tasks
        transfers += ring_transfers
    return Problem(machines, tasks, transfers)


def prefix_used(problem: Problem, placement) -> int:
    """How many machines, from the first, hold all samplers, workers and PSs."""
    names = list(problem.machines)
    return max((names.index(placement[t]) + 1 for t in problem.movable), default=0)


def every_placement(problem: Problem):
    """Every placement of the samplers, workers and PSs over the machines (capacities
    not checked), stores at home and ring tasks with their worker."""
    for machines in itertools.product(list(problem.machines), repeat=len(problem.movable)):
        placement = {t: task.home for t, task in problem.tasks.items() if task.kind == "store"}
        placement.update(zip(problem.movable, machines))
        for worker, ring in problem.rings.items():
            placement.update(dict.fromkeys(ring, placement[worker]))
        yield placement


@st.composite
def tiny_jobs(draw):
    machines = draw(st.integers(2, 3))
    capacities = [{"cpu": draw(st.integers(1, 7)), "mem": draw(st.integers(2, 8)), "gpu": draw(st.integers(0, 2))}
                  for _ in range(machines)]
    demand = {kind: {"cpu": draw(st.integers(0, 2)), "mem": draw(st.integers(0, 3)),
                     "gpu": draw(st.integers(0, 1)) if kind == "worker" else 0} for kind in MOVABLE}
    workers = draw(st.integers(0, 2))
    samplers = draw(st.integers(0, 3))
    ring = workers == 2 and draw(st.booleans())
    ps = 0 if ring else draw(st.integers(0, 1))
    return job(capacities, {"cpu": draw(st.integers(0, 1))}, demand, samplers, workers, ps, ring)


@settings(max_examples=80, deadline=None)
@given(tiny_jobs())
def test_ifs_uses_the_fewest_leading_machines_brute_force_can_and_refuses_only_infeasible_jobs(problem):
    best = None
    for placement in every_placement(problem):
        if capacity_penalty(problem, placement) == 0:
            used = prefix_used(problem, placement)
            best = used if best is None else min(best, used)
    if best is None:
        with pytest.raises(ValueError) as error:
            ifs(problem)
        assert "\n" not in str(error.value)
        return
    placement = ifs(problem)
    check_placement(problem, placement)  # stores home, ring tasks with their workers
    assert capacity_penalty(problem, placement) == 0
    assert prefix_used(problem, placement) == best


def test_ifs_puts_samplers_with_their_workers_where_the_counts_allow():
    # The capacities force 2 samplers and 1 worker per machine; the counts leave open which.
    exact = {"cpu": 3, "gpu": 1}
    problem = job([exact, exact], {}, {"sampler": {"cpu": 1}, "worker": {"cpu": 1, "gpu": 1}, "ps": {}}, 4, 2, 0)
    placement = ifs(problem)
    assert all(placement[f"s{i}"] == placement[f"w{i % 2}"] for i in range(4))
    assert placement["w0"] != placement["w1"]  # one GPU each


@pytest.mark.parametrize("capacities, store, demand, match", [
    ([{"cpu": 4}], {}, {"cpu": 5}, "sampler: no machine has room for one"),
    ([{"cpu": 4}, {"cpu": 4}], {}, {"cpu": 3}, "no placement fits 3 sampler, 0 worker, 0 ps"),
    ([{"cpu": 1}], {"cpu": 2}, {"cpu": 0}, "machine m0: its store g0 demands cpu 2"),
])
def test_ifs_rejects_infeasible_jobs_in_one_line(capacities, store, demand, match):
    problem = job(capacities, store, {"sampler": demand, "worker": {}, "ps": {}}, 3, 0, 0)
    with pytest.raises(ValueError, match=match) as error:
        ifs(problem)
    assert "\n" not in str(error.value)


def test_ifs_machine_order_can_be_shuffled_by_seed():
    roomy = {"cpu": 8}
    problem = job([roomy] * 4, {}, {"sampler": {"cpu": 1}, "worker": {}, "ps": {}}, 2, 0, 0)
    assert {ifs(problem)[s] for s in ("s0", "s1")} == {"m0"}
    assert ifs(problem, seed=3) == ifs(problem, seed=3)
    assert {ifs(problem, seed=s)["s0"] for s in range(8)} != {"m0"}


# --- ETP --------------------------------------------------------------------------

def hetero() -> Problem:
    """Three GPU machines at 100 B/s and one without GPUs at 1000 B/s, listed last, so
    IFS packs the PS onto a slow machine; every worker's gradients go to the PS."""
    machines = [Machine(f"slow{k}", {"cpu": 4, "mem": 32, "gpu": 1}, 100, 100) for k in range(3)]
    machines.append(Machine("fast", {"cpu": 4, "mem": 32}, 1000, 1000))
    tasks = [Task(f"g{k}", "store", 0.1, {"cpu": 1}, home=m.name) for k, m in enumerate(machines)]
    tasks += [Task(f"s{i}", "sampler", 0.2, {"cpu": 1, "mem": 4}) for i in range(3)]
    tasks += [Task(f"w{i}", "worker", 0.5, {"cpu": 1, "gpu": 1}) for i in range(3)]
    tasks.append(Task("p0", "ps", 0.1, {"cpu": 1}))
    transfers = [Transfer(f"g{k}", f"s{i}", "feature", 20) for k in range(4) for i in range(3)]
    transfers += [Transfer(f"s{i}", f"w{i}", "minibatch", 100) for i in range(3)]
    transfers += [Transfer(f"w{i}", "p0", "gradient", 300) for i in range(3)]
    transfers += [Transfer("p0", f"w{i}", "parameter", 300, lag=1) for i in range(3)]
    return Problem(machines, tasks, transfers)


@settings(max_examples=60, deadline=None)
@given(tiny_jobs(), st.integers(1, 4), st.randoms(use_true_random=False))
def test_the_fast_path_length_is_the_dags_critical_path(problem, iterations, rnd):
    """``path_length`` (what ETP calls) against the DAG built and walked, on random
    placements (capacities ignored: Eq. 27 prices those) with uneven speeds and rates."""
    machines = [Machine(m.name, m.capacity, rnd.choice((50, 100)), rnd.choice((50, 100)), speed=rnd.choice((0.5, 1, 2)))
                for m in problem.machines.values()]
    problem = Problem(machines, list(problem.tasks.values()), list(problem.transfers))
    names = list(problem.machines)
    placement = {t: (task.home if task.home else rnd.choice(names)) for t, task in problem.tasks.items()}
    for t, task in problem.tasks.items():
        if task.worker is not None:
            placement[t] = placement[task.worker]
    assert path_length(problem, placement, iterations) == pytest.approx(
        execution_dag(problem, placement, iterations).critical_path().length, rel=1e-12, abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(tiny_jobs(), st.integers(1, 4), st.randoms(use_true_random=False))
def test_oes_never_takes_longer_than_the_critical_path_theorem_3(problem, iterations, rnd):
    """Theorem 3 on random placements with uneven speeds, NIC rates, execution times and
    bytes (some iterations send none): under OES no flow ever gets less than Eq. 26's
    rate (Lemma 1). Nor more than its slower NIC alone, which is at most Eq. 26's rate
    with every NIC as many times faster as there are pairs: that DAG is a lower bound."""
    machines = [Machine(m.name, m.capacity, rnd.choice((50, 100)), rnd.choice((50, 100)), speed=rnd.choice((0.5, 1, 2)))
                for m in problem.machines.values()]
    tasks = [replace(t, exec_s=[rnd.choice((0, 0.5, 1, 3)) for _ in range(rnd.randint(1, 3))])
             for t in problem.tasks.values()]
    transfers = [replace(t, bytes=[rnd.choice((0, 10, 40, 200)) for _ in range(rnd.randint(1, 3))])
                 if any(t.bytes) else t for t in problem.transfers]
    problem = Problem(machines, tasks, transfers)
    names = list(problem.machines)
    placement = {t: (task.home if task.home else rnd.choice(names)) for t, task in problem.tasks.items()}
    for t, task in problem.tasks.items():
        if task.worker is not None:
            placement[t] = placement[task.worker]
    makespan = oes_makespan(problem, placement, iterations)
    assert makespan <= path_length(problem, placement, iterations) * (1 + 1e-9)
    faster = max(1, len(problem.pairs))
    unbounded = Problem([replace(m, nic_in=m.nic_in * faster, nic_out=m.nic_out * faster) for m in machines],
                        tasks, transfers)
    assert makespan >= path_length(unbounded, placement, iterations) * (1 - 1e-9)


def test_etp_moves_the_ps_to_the_fast_nic_is_never_worse_than_ifs_and_keeps_capacities():
    problem = hetero()
    start = ifs(problem)
    assert start["p0"] != "fast"
    start_cost = cost(problem, start, 5).value
    result = etp(problem, steps=300, seed=7, iterations=5)
    assert result.placement["p0"] == "fast"
    assert result.cost < start_cost and result.cost == pytest.approx(cost(problem, result.placement, 5).value)
    assert capacity_penalty(problem, result.placement) == 0
    assert result.candidates[0].step == -1 and result.candidates[0].placement == start
    assert result.makespan == min(c.makespan for c in result.candidates)
    assert len(result.trace) == 300 and [s.step for s in result.trace] == list(range(300))
    placement, overloaded = dict(start), 0
    for s in result.trace:
        if s.accepted:
            placement[s.task] = s.dst
            overloaded += capacity_penalty(problem, placement) > 0
    assert overloaded  # Eq. 28 (mu = 100%) lets the chain through placements it never returns


def test_etp_is_deterministic_per_seed():
    problem = hetero()
    first = etp(problem, steps=150, seed=11, iterations=4)
    again = etp(problem, steps=150, seed=11, iterations=4)
    assert first == again
    assert etp(problem, steps=150, seed=12, iterations=4).trace != first.trace


def test_etp_trace_follows_eq_28_and_the_filter():
    problem = hetero()
    result = etp(problem, steps=200, seed=3, iterations=4, mu=0.0)
    # mu = 0: Eq. 28 is the original capacity, so every accepted placement is a
    # candidate when it is within (1 + gamma) of the least cost so far.
    placement = ifs(problem)
    least = cost(problem, placement, 4).value
    for s in result.trace:
        if s.accepted:
            placement[s.task] = s.dst
            assert capacity_penalty(problem, placement) == 0
            assert s.candidate == (s.cost <= 1.1 * least)
            least = min(least, s.cost) if s.candidate else least
        else:
            assert not s.candidate and s.makespan is None
    accepted = [s for s in result.trace if s.accepted]
    assert accepted and any(not s.candidate for s in accepted) and any(s.candidate for s in accepted)
    assert any(s.dst is None or not s.accepted for s in result.trace)  # some moves were refused


def test_etp_picks_by_the_callers_makespan_once_per_placement_within_capacity():
    problem = hetero()
    calls = []

    def makespan(placement):  # a "simulator" that prefers the PS on slow1
        calls.append(placement)
        return 1.0 if placement["p0"] == "slow1" else 2.0

    result = etp(problem, steps=300, seed=5, iterations=4, makespan=makespan)
    keys = [tuple(sorted(p.items())) for p in calls]
    assert len(keys) == len(set(keys)) == len(result.candidates)
    assert all(capacity_penalty(problem, p) == 0 for p in calls)
    assert result.makespan == min(c.makespan for c in result.candidates)
    assert any(c.placement["p0"] != "slow1" for c in result.candidates)
    assert result.placement["p0"] == "slow1"  # the makespan decides, not the cost
    assert result.cost > min(c.cost for c in result.candidates)


def test_etp_judges_every_candidate_after_the_chain_through_the_callers_mapper():
    """One ``mapper`` call with every candidate, in the order found (IFS's first): the
    candidates, the trace and the pick are those of a plain ``map``; the makespans a
    mapper gives back are checked as a makespan's, and must be one per candidate."""
    problem = hetero()
    calls = []

    def makespan(placement):
        return 1.0 if placement["p0"] == "slow1" else 2.0 + len(placement["p0"])

    def mapper(judge, placements):
        calls.append(list(placements))
        return [judge(p) for p in reversed(placements)][::-1]  # judged in another order, given back in order
    mapped = etp(problem, steps=300, seed=5, iterations=4, makespan=makespan, mapper=mapper)
    plain = etp(problem, steps=300, seed=5, iterations=4, makespan=makespan)
    assert len(plain.candidates) >= 3 and mapped == plain
    assert len(calls) == 1 and calls[0] == [c.placement for c in plain.candidates]
    at = {s.step: s for s in mapped.trace}
    assert all(at[c.step].makespan == c.makespan == makespan(c.placement) for c in mapped.candidates[1:])
    assert {s.makespan for s in mapped.trace if s.candidate} <= {c.makespan for c in mapped.candidates}
    with pytest.raises(ValueError, match=r"^mapper returned 1 makespans for \d+ candidates$"):
        etp(problem, steps=300, seed=5, iterations=4, makespan=makespan, mapper=lambda judge, ps: [1.0])
    with pytest.raises(ValueError, match=r"^makespan returned -1 for a placement; expected seconds >= 0$"):
        etp(problem, steps=300, seed=5, iterations=4, makespan=makespan,
            mapper=lambda judge, ps: [-1 for _ in ps])
    assert etp(problem, steps=300, seed=5, iterations=4, mapper=mapper) == etp(problem, 300, 5, iterations=4)
    assert len(calls) == 1  # without a makespan the cost stands for it: nothing to judge


def test_etp_with_the_callers_path_as_its_cost_keeps_the_capacity_penalty():
    """Fig. 9's baseline search: a placement's cost is the caller's seconds (a simulated
    makespan) times 1 + Eq. 27's capacity penalty, taken once per placement."""
    problem = hetero()
    calls = []

    def seconds(placement):  # prefers the PS on slow1, as the makespan test's "simulator"
        calls.append(tuple(sorted(placement.items())))
        return 1.0 if placement["p0"] == "slow1" else 2.0

    result = etp(problem, steps=300, seed=5, iterations=4, path=seconds)
    assert len(calls) == len(set(calls))
    assert result.placement["p0"] == "slow1" and result.cost == 1.0
    over = [s for s in result.trace if s.cost is not None and s.cost not in (1.0, 2.0)]
    assert over and all(s.cost > 1.0 and not s.candidate for s in over)  # penalised, never a candidate
    with pytest.raises(ValueError, match=r"^path returned -1 for a placement; expected seconds >= 0$"):
        etp(problem, steps=1, seed=0, path=lambda _: -1)


def test_etp_moves_a_worker_with_its_ring_tasks():
    roomy = {"cpu": 8, "mem": 8, "gpu": 2}
    problem = job([roomy, roomy, roomy], {}, {"sampler": {"cpu": 1}, "worker": {"gpu": 1}, "ps": {}}, 3, 3, 0,
                  ring=True)
    assert len(problem.rings["w0"]) == 2 * (3 - 1)
    result = etp(problem, steps=120, seed=1, iterations=3)
    moved = [s for s in result.trace if s.accepted and s.task.startswith("w")]
    assert moved  # the trace's placements were costed, so check_placement held for each
    for c in result.candidates:
        check_placement(problem, c.placement)


def enumerable_job(seed: int) -> Problem:
    """A tiny job drawn from ``seed``: 2-3 machines of uneven speeds and NIC rates with
    capacities often tight (some without a GPU), 1-3 samplers, 1-2 workers and one PS
    or a ring of the two workers; drawn again until some placement fits."""
    rnd = random.Random(seed)
    while True:
        capacities = [{"cpu": rnd.randint(2, 5), "mem": rnd.randint(2, 8), "gpu": rnd.randint(0, 2)}
                      for _ in range(rnd.randint(2, 3))]
        demand = {kind: {"cpu": rnd.randint(0, 2), "mem": rnd.randint(0, 3), "gpu": int(kind == "worker")}
                  for kind in MOVABLE}
        workers = rnd.randint(1, 2)
        ring = workers == 2 and rnd.random() < 0.5
        problem = job(capacities, {"cpu": rnd.randint(0, 1)}, demand, rnd.randint(1, 3), workers, 0 if ring else 1,
                      ring)
        machines = [replace(m, nic_in=rnd.choice((20, 50, 100)), nic_out=rnd.choice((20, 50, 100)),
                            speed=rnd.choice((0.5, 1, 2))) for m in problem.machines.values()]
        problem = Problem(machines, list(problem.tasks.values()), problem.transfers)
        if any(capacity_penalty(problem, p) == 0 for p in every_placement(problem)):
            return problem


@pytest.mark.parametrize("seed", range(20))
def test_etp_finds_the_optimum_of_tiny_instances_that_can_be_enumerated(seed):
    """Alg. 3 against brute force. F: the placements within the original capacities
    (stores home, ring tasks with their worker); C*: their least Eq. 27 cost; S: those
    of F costing at most (1 + gamma) C*. The chain walks on the cost alone (the makespan
    only judges candidates), so with steps enough to visit S (2000: about twice what
    instances like these need), what holds is:
    (a) the result and every candidate are in F (the filter takes placements within
        capacity only, IFS's included);
    (b) a candidate costs C*, and every placement of S is a candidate: min_cost is the
        least cost of F the chain has accepted, never below C*, so a placement of S
        passes the filter whenever the chain accepts it; once one of cost C* has,
        min_cost is C*, so every candidate found later is in S. Candidates found
        earlier need not be (IFS's always is one);
    (c) the result is the candidate of least makespan, earliest on ties. With the
        default makespan (the cost itself) that is an optimum of Eq. 27. With OES's
        makespan it is at most the least over S and can be less (a candidate found
        before the optimum may run faster); nor is it the least over F, which ETP never
        compares, so the enumerated bound asserted is the one over S."""
    problem = enumerable_job(seed)
    iterations, gamma, steps = 2, 0.1, 2000

    def key(placement):
        return tuple(placement[t] for t in problem.movable)

    within = {key(p): p for p in every_placement(problem) if capacity_penalty(problem, p) == 0}
    costs = {k: cost(problem, p, iterations).value for k, p in within.items()}
    optimum = min(costs.values())
    near = {k for k, c in costs.items() if c <= (1 + gamma) * optimum}
    by_cost = etp(problem, steps, seed, iterations=iterations, gamma=gamma)
    result = etp(problem, steps, seed, iterations=iterations, gamma=gamma,
                 makespan=lambda p: oes_makespan(problem, p, iterations))
    found = [key(c.placement) for c in result.candidates]
    assert found == [key(c.placement) for c in by_cost.candidates]  # one chain, whatever judges candidates
    # (a)
    for picked in (by_cost, result):
        check_placement(problem, picked.placement)
        assert capacity_penalty(problem, picked.placement) == 0
    assert set(found) <= set(within)
    assert [c.cost for c in result.candidates] == [costs[k] for k in found]
    # (b)
    assert min(c.cost for c in result.candidates) == optimum
    assert near <= set(found)
    first = min(c.step for c in result.candidates if c.cost == optimum)
    assert {key(c.placement) for c in result.candidates if c.step > first} <= near
    # (c)
    assert by_cost.cost == by_cost.makespan == optimum and costs[key(by_cost.placement)] == optimum
    spans = [oes_makespan(problem, within[k], iterations) for k in found]
    assert [c.makespan for c in result.candidates] == spans
    assert result.makespan == min(spans) and key(result.placement) == found[spans.index(min(spans))]
    assert result.makespan <= min(oes_makespan(problem, within[k], iterations) for k in near)


def test_ring_allreduce_structure():
    tasks, transfers = ring_allreduce(["a", "b", "c"], 10)
    assert [t.task_id for t in tasks if t.worker == "b"] == [f"b/ring{s}" for s in range(4)]
    chunks = {(t.src, t.dst) for t in transfers if t.phase.startswith("ring") and t.phase[4:].isdigit()}
    # Step 0 from the upstream worker itself, later steps from its previous step.
    assert ("a", "b/ring0") in chunks and ("a/ring2", "b/ring3") in chunks and ("c/ring0", "a/ring1") in chunks
    assert Transfer("b/ring3", "b", "ring-apply", 0, lag=1) in transfers
    assert ring_allreduce(["solo"], 10) == ([], [])


# --- one-line errors --------------------------------------------------------------

def _problem_with(**change):
    base = {"machines": [Machine("A", {"cpu": 4}, 1, 1)],
            "tasks": [Task("g0", "store", 1, home="A"), Task("s0", "sampler", 1, {"cpu": 1}), Task("w0", "worker", 1)],
            "transfers": [Transfer("g0", "s0", "feature", 1), Transfer("s0", "w0", "minibatch", 1)]}
    return Problem(**(base | change))


BAD = [
    (lambda: Machine("", {}, 1, 1), "machine name must be a non-empty string"),
    (lambda: Machine("A", {"cpu": -1}, 1, 1), r"machine A: capacity\.cpu must be >= 0"),
    (lambda: Machine("A", {"disk": 1}, 1, 1), "machine A: capacity: unknown resource kind 'disk'"),
    (lambda: Machine("A", [], 1, 1), "machine A: capacity must be a mapping"),
    (lambda: Machine("A", {}, 0, 1), "machine A: nic_in must be > 0"),
    (lambda: Machine("A", {}, 1, float("nan")), "machine A: nic_out must be a finite number"),
    (lambda: Machine("A", {}, 1, 1, speed=0), "machine A: speed must be > 0"),
    (lambda: Task("t", "trainer", 1), "task t: kind must be one of"),
    (lambda: Task("t", "sampler", -1), "task t: exec_s must be >= 0"),
    (lambda: Task("t", "sampler", []), "task t: exec_s must be a number >= 0 or a non-empty sequence"),
    (lambda: Task("t", "sampler", [1, True]), r"task t: exec_s\[1\] must be a finite number"),
    (lambda: Task("t", "sampler", 1, {"mem": "8"}), r"task t: demand\.mem must be a finite number"),
    (lambda: Task("t", "store", 1), "task t: home names a store's machine"),
    (lambda: Task("t", "sampler", 1, home="A"), "task t: home names a store's machine"),
    (lambda: Task("t", "allreduce", 1), "task t: worker names an allreduce task's worker"),
    (lambda: Task("t", "allreduce", 1, {"cpu": 1}, worker="w"), "task t: demand must be 0"),
    (lambda: Transfer("a", "a", "p", 1), "transfer a->a/p: src and dst are the same task"),
    (lambda: Transfer("a", "b", "", 1), "transfer a->b: phase must be a non-empty string"),
    (lambda: Transfer("a", "b", "p", -1), "transfer a->b/p: bytes must be >= 0"),
    (lambda: Transfer("a", "b", "p", 1, lag=-1), "transfer a->b/p: lag must be an integer >= 0"),
    (lambda: _problem_with(machines=[]), "machines: none given"),
    (lambda: _problem_with(machines=[Machine("A", {}, 1, 1)] * 2), "machines: A given twice"),
    (lambda: _problem_with(machines=[Machine("A", {}, 1, 1), Machine("B", {}, 1, 1)]),
     "machine B: holds no store"),
    (lambda: _problem_with(tasks=[Task("g0", "store", 1, home="A"), Task("g1", "store", 1, home="A")],
                           transfers=[]), "task g1: machine A already holds store g0"),
    (lambda: _problem_with(tasks=[Task("g0", "store", 1, home="Z")], transfers=[]), "task g0: home Z is not a machine"),
    (lambda: _problem_with(tasks=[Task("g0", "store", 1, home="A")] * 2), "tasks: g0 given twice"),
    (lambda: _problem_with(tasks=[Task("g0", "store", 1, home="A"), Task("r", "allreduce", 1, worker="w9")],
                           transfers=[]), "task r: worker w9 is not a worker task"),
    (lambda: _problem_with(tasks=[Task("g0", "store", 1, home="A"), Task("s0", "sampler", 1, {"cpu": 1}),
                                  Task("s1", "sampler", 1, {"cpu": 2})], transfers=[]),
     "task s1: demand differs from s0's"),
    (lambda: _problem_with(transfers=[Transfer("g0", "s9", "feature", 1)]),
     "transfer g0->s9/feature: s9 is not a task"),
    (lambda: _problem_with(transfers=[Transfer("g0", "s0", "feature", 1)] * 2),
     "transfer g0->s0/feature: given twice"),
    (lambda: _problem_with(transfers=[Transfer("g0", "s0", "feature", 1), Transfer("g0", "s0", "sample0", 1, lag=1)]),
     "transfer g0->s0/sample0: lag 1 differs from lag 0"),
    (lambda: _problem_with(transfers=[Transfer("s0", "w0", "minibatch", 1), Transfer("w0", "s0", "credit", 0)]),
     r"transfers: lag-0 transfers form a cycle \(tasks on or after it: s0, w0\)"),
]


@pytest.mark.parametrize("build, match", BAD)
def test_bad_input_is_a_one_line_error_naming_the_field(build, match):
    with pytest.raises(ValueError, match=match) as error:
        build()
    assert "\n" not in str(error.value)


GOOD = {"g0": "A", "g1": "B", "s0": "A", "w0": "A", "p0": "B"}
BAD_CALLS = [
    (lambda p: check_placement(p, ["A"]), "placement must be a mapping"),
    (lambda p: check_placement(p, {k: v for k, v in GOOD.items() if k != "p0"}), "placement: task p0 is not placed"),
    (lambda p: check_placement(p, GOOD | {"x": "A"}), "placement: x is not a task"),
    (lambda p: check_placement(p, GOOD | {"s0": "C"}), r"placement\.s0: 'C' is not a machine"),
    (lambda p: check_placement(p, GOOD | {"g0": "B"}), r"placement\.g0: a store stays on its home A, not B"),
    (lambda p: execution_dag(p, GOOD, 0), "iterations must be an integer >= 1"),
    (lambda p: oes_makespan(p, GOOD, True), "iterations must be an integer >= 1"),
    (lambda p: oes_makespan(p, GOOD | {"g0": "B"}, 1), r"placement\.g0: a store stays on its home A"),
    (lambda p: etp(p, steps=-1, seed=0), "steps must be an integer >= 0"),
    (lambda p: etp(p, steps=1, seed="x"), "seed must be an integer"),
    (lambda p: etp(p, steps=1, seed=0, beta=0), "beta must be a finite number > 0"),
    (lambda p: etp(p, steps=1, seed=0, gamma=-0.1), "gamma must be a finite number >= 0"),
    (lambda p: etp(p, steps=1, seed=0, mu=float("inf")), "mu must be a finite number >= 0"),
    (lambda p: etp(p, steps=1, seed=0, makespan=3), "makespan must be a callable"),
    (lambda p: etp(p, steps=1, seed=0, makespan=lambda _: -1), "makespan returned -1"),
]


@pytest.mark.parametrize("call, match", BAD_CALLS)
def test_bad_calls_are_one_line_errors(call, match):
    with pytest.raises(ValueError, match=match) as error:
        call(small())
    assert "\n" not in str(error.value)


def test_ring_task_off_its_worker_is_refused():
    problem = job([{"gpu": 2}], {}, {"sampler": {}, "worker": {}, "ps": {}}, 0, 2, 0, ring=True)
    placement = ifs(problem)
    other = Machine("m1", {}, 1, 1)
    problem = Problem([*problem.machines.values(), other], [*problem.tasks.values(),
                      Task("g1", "store", 1, home="m1")], problem.transfers)
    with pytest.raises(ValueError, match=r"placement\.w0/ring0: an allreduce task runs with its worker w0 on m0, "
                                         r"not m1"):
        check_placement(problem, placement | {"g1": "m1", "w0/ring0": "m1"})


def test_usage_counts_every_task_on_its_machine():
    assert usage(small(), PS_ON_B) == {"A": {"cpu": 3, "mem": 12, "gpu": 1}, "B": {"cpu": 2, "mem": 0, "gpu": 0}}
