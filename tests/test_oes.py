"""OES (DGTP Alg. 1): rates, the per-pair pipeline, and Theorem 1 in fluid simulation."""
from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.schedulers.oes import (
    Flow,
    Machine,
    PairPipeline,
    TimedFlow,
    chain_lower_bound,
    max_degree,
    max_min_fair_rates,
    oes_rates,
    rate_policies,
    reads_remaining,
    simulate,
)

# The paper's heterogeneous testbed in miniature: 4 machines, 2 of them at 1/5 rate.
HETERO = [Machine("m0", 1000, 1000), Machine("m1", 1000, 1000), Machine("m2", 200, 200), Machine("m3", 200, 200)]
TOL = 1e-9


# --- rates, by hand --------------------------------------------------------------

def test_incast_splits_the_receiver_evenly():
    machines = [Machine(n, 1000, 1000) for n in "ABCD"]
    flows = [Flow(f"{s}D", s, "D") for s in "ABC"]
    assert oes_rates(machines, flows) == pytest.approx({"AD": 1000 / 3, "BD": 1000 / 3, "CD": 1000 / 3})


def test_heterogeneous_nics_oes_takes_the_min_of_both_ends_and_leaves_the_rest():
    flows = [Flow("0-2", "m0", "m2"), Flow("1-2", "m1", "m2"), Flow("0-1", "m0", "m1"), Flow("3-0", "m3", "m0")]
    # Δ_out(m0) = 2, Δ_in(m2) = 2, every other end carries one flow.
    # 0-2: min(200/2, 1000/2); 1-2: min(200/2, 1000/1); 0-1: min(1000/1, 1000/2); 3-0: min(1000/1, 200/1).
    assert oes_rates(HETERO, flows) == pytest.approx({"0-2": 100, "1-2": 100, "0-1": 500, "3-0": 200})
    # Max-min fair gives m0's unused egress to 0-1: OES is not work-conserving.
    assert max_min_fair_rates(HETERO, flows) == pytest.approx({"0-2": 100, "1-2": 100, "0-1": 900, "3-0": 200})


@pytest.mark.parametrize("rates", [oes_rates, max_min_fair_rates])
def test_intra_machine_flows_unknown_machines_and_duplicates_are_refused(rates):
    with pytest.raises(ValueError, match="one machine"):
        rates(HETERO, [Flow("local", "m1", "m1")])
    with pytest.raises(ValueError, match="unknown machine"):
        rates(HETERO, [Flow("x", "m1", "m9")])
    with pytest.raises(ValueError, match="twice"):
        rates(HETERO, [Flow("x", "m0", "m1"), Flow("x", "m1", "m0")])
    with pytest.raises(ValueError, match="> 0"):
        Machine("dead", 0, 100)


# --- rates, properties -----------------------------------------------------------

RATE = st.sampled_from([10.0, 200.0, 1000.0]) | st.floats(1.0, 10_000.0)


@st.composite
def machines_and_flows(draw, max_flows=12):
    n = draw(st.integers(2, 6))
    machines = [Machine(f"m{i}", draw(RATE), draw(RATE)) for i in range(n)]
    ends = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] != e[1])
    pairs = draw(st.lists(ends, min_size=1, max_size=max_flows))
    return machines, [Flow(f"f{k}", f"m{a}", f"m{b}") for k, (a, b) in enumerate(pairs)]


def nic_loads(flows, rates):
    into, out = defaultdict(float), defaultdict(float)
    for f in flows:
        into[f.dst] += rates[f.flow_id]
        out[f.src] += rates[f.flow_id]
    return into, out


@settings(max_examples=300, deadline=None)
@given(machines_and_flows(), st.sampled_from([oes_rates, max_min_fair_rates]))
def test_no_nic_over_its_rate_and_every_flow_moves(instance, rates_of):
    machines, flows = instance
    rates = rates_of(machines, flows)
    assert set(rates) == {f.flow_id for f in flows}
    assert all(r > 0 for r in rates.values())
    into, out = nic_loads(flows, rates)
    for m in machines:
        assert into[m.name] <= m.ingress_mbps * (1 + TOL)
        assert out[m.name] <= m.egress_mbps * (1 + TOL)


@settings(max_examples=300, deadline=None)
@given(machines_and_flows())
def test_max_min_fair_every_flow_has_a_saturated_nic_where_it_is_largest(instance):
    machines, flows = instance
    rates = max_min_fair_rates(machines, flows)
    into, out = nic_loads(flows, rates)
    cap = {("in", m.name): m.ingress_mbps for m in machines} | {("out", m.name): m.egress_mbps for m in machines}
    load = {("in", n): x for n, x in into.items()} | {("out", n): x for n, x in out.items()}
    for f in flows:
        def bottleneck(nic, f=f):
            sharers = [g for g in flows if nic in (("in", g.dst), ("out", g.src))]
            return (load[nic] >= cap[nic] * (1 - 1e-7)
                    and rates[f.flow_id] >= max(rates[g.flow_id] for g in sharers) * (1 - 1e-7))
        assert bottleneck(("in", f.dst)) or bottleneck(("out", f.src))


@pytest.mark.parametrize("name", sorted(rate_policies()))
def test_reads_remaining_says_which_policies_read_the_remaining_volume(name):
    # a caller skips the volume estimate for the policies that say they do not read it:
    # their rates must not move with it, and the others must refuse to run without it
    policy = rate_policies()[name]
    flows = [Flow("a", "m0", "m2"), Flow("b", "m1", "m2"), Flow("c", "m0", "m3")]
    if reads_remaining(policy):
        with pytest.raises(ValueError, match="remaining_mbit"):
            policy(HETERO, flows)
    else:
        sized = [Flow(f.flow_id, f.src, f.dst, remaining_mbit=v) for f, v in zip(flows, (1.0, 50.0, 7.0))]
        assert policy(HETERO, flows) == policy(HETERO, sized)


# --- the pipeline ----------------------------------------------------------------

def test_pipeline_by_hand():
    p = PairPipeline()
    a0, a1, a2 = (Flow(f"a{n}", "m0", "m1", iteration=n, pair=("g0", "s1")) for n in range(3))
    b0 = Flow("b0", "m0", "m1", iteration=0, pair=("g0", "s2"))  # same machines, another task pair
    assert p.start(a0) is True
    assert p.start(a1) is False and p.start(a2) is False  # F_pend behind a0
    assert p.start(b0) is True  # pairs are independent
    assert p.is_active(a0) and not p.is_active(a1)
    assert p.end(b0) == []
    assert p.end(a0) == [a1]  # one iteration at a time
    assert p.is_active(a1) and not p.is_active(a0)
    assert {f.flow_id for f in p.active} == {"a1"} and [f.flow_id for f in p.pending] == ["a2"]
    assert p.end(a1) == [a2]
    assert p.end(a2) == [] and p.active == [] and p.pending == []
    with pytest.raises(ValueError, match="not active"):
        p.end(a2)
    with pytest.raises(ValueError, match="iteration 1 after 2"):
        p.start(Flow("late", "m0", "m1", iteration=1, pair=("g0", "s1")))


def test_machine_pair_key_releases_a_whole_iteration_together():
    p = PairPipeline()
    x0, y0, x1, y1 = (Flow(f"{c}{n}", "m0", "m1", iteration=n) for n in (0, 1) for c in "xy")
    assert [p.start(f) for f in (x0, y0, x1, y1)] == [True, True, False, False]
    assert p.end(x0) == []  # y0 of iteration 0 is still on the wire
    assert p.end(y0) == [x1, y1]


@st.composite
def pipeline_script(draw):
    """Per pair, flows in iteration order (several per iteration for machine pairs),
    admitted in a random interleaving, and a random choice of which active flow ends."""
    flows = []
    for pair in range(draw(st.integers(1, 3))):
        iterations = sorted(draw(st.lists(st.integers(0, 4), min_size=1, max_size=6)))
        flows += [Flow(f"p{pair}/{k}", "m0", "m1", iteration=n, pair=pair) for k, n in enumerate(iterations)]
    turns = draw(st.permutations([f.pair for f in flows]))  # which pair admits its next flow
    queues = {pair: [f for f in flows if f.pair == pair] for pair in set(turns)}  # in iteration order
    arrivals = [queues[pair].pop(0) for pair in turns]
    choices = draw(st.lists(st.integers(0, 100), min_size=2 * len(flows), max_size=2 * len(flows)))
    return arrivals, choices


@settings(max_examples=300, deadline=None)
@given(pipeline_script())
def test_pipeline_one_iteration_per_pair_on_the_wire_and_everything_gets_out(script):
    arrivals, choices = script
    p = PairPipeline()
    finished, pending_arrivals = [], list(arrivals)
    first = {}  # pair -> the order of its first flow: ``active`` lists the pairs so
    for choice in choices:
        if pending_arrivals and (choice % 2 or not p.active):
            first.setdefault(pending_arrivals[0].pair, len(first))
            p.start(pending_arrivals.pop(0))
        elif p.active:
            f = p.active[choice % len(p.active)]
            p.end(f)
            finished.append(f)
        for pair in {f.pair for f in arrivals}:
            running = {f.iteration for f in p.active if f.pair == pair}
            waiting = [f.iteration for f in p.pending if f.pair == pair]
            assert len(running) <= 1
            assert all(n > i for n in waiting for i in running)
            assert not waiting or running  # nobody waits without a reason
        ranks = [first[f.pair] for f in p.active]
        assert ranks == sorted(ranks) and p.pending_count == len(p.pending)
    for f in pending_arrivals:
        p.start(f)
    while p.active:
        finished.append(p.active[0])
        p.end(p.active[0])
    assert p.pending == [] and sorted(f.flow_id for f in finished) == sorted(f.flow_id for f in arrivals)


# --- simulation and Theorem 1 ----------------------------------------------------

def test_simulation_by_hand_pipeline_and_sharing():
    machines = [Machine(n, 100, 100) for n in "ABC"]
    ab0, ab1 = (Flow(f"ab{n}", "A", "B", iteration=n) for n in (0, 1))
    cb0 = Flow("cb0", "C", "B")
    flows = [TimedFlow(ab0, 100), TimedFlow(ab1, 100), TimedFlow(cb0, 100)]
    # ab0 and cb0 share B's 100 Mbit/s until 2 s; ab1 waits for ab0, then runs alone.
    for policy in ("oes", "fair"):
        assert simulate(flows, machines, policy) == pytest.approx({"ab0": 2, "cb0": 2, "ab1": 3})
    assert max_degree(f.flow for f in flows) == 2
    assert chain_lower_bound(flows, machines) == pytest.approx(2)  # ab0 then ab1, 1 s each


def test_simulation_by_hand_heterogeneous_oes_leaves_egress_unused():
    to_slow, to_fast = Flow("to_slow", "m0", "m2"), Flow("to_fast", "m0", "m1")
    flows = [TimedFlow(to_slow, 500), TimedFlow(to_fast, 1000)]
    # OES: to_slow min(200, 1000/2) = 200, to_fast min(1000, 1000/2) = 500 -> 2 s; then
    # to_slow has 100 Mbit left at 200 -> 2.5 s. Fair: to_fast gets 800 -> 1.25 s.
    assert simulate(flows, HETERO, "oes") == pytest.approx({"to_fast": 2.0, "to_slow": 2.5})
    assert simulate(flows, HETERO, "fair") == pytest.approx({"to_fast": 1.25, "to_slow": 2.5})


def test_simulation_release_times_and_refusals():
    machines = [Machine(n, 100, 100) for n in "AB"]
    late = [TimedFlow(Flow("f", "A", "B"), 100, release_s=5.0)]
    assert simulate(late, machines) == pytest.approx({"f": 6.0})
    with pytest.raises(ValueError, match="iteration 0 after 1"):
        simulate([TimedFlow(Flow("a1", "A", "B", iteration=1), 1, 0.0),
                  TimedFlow(Flow("a0", "A", "B", iteration=0), 1, 1.0)], machines)
    with pytest.raises(ValueError, match="one machine"):
        simulate([TimedFlow(Flow("local", "A", "A"), 1)], machines)
    with pytest.raises(ValueError, match="policy"):
        simulate(late, machines, policy="fifo")


@st.composite
def training_like_instance(draw):
    """Machines with heterogeneous NICs and flows of several iterations. Task pairs
    (one flow per pair and iteration), or machine pairs (several per iteration).
    Releases are non-decreasing in iteration per pair, as in training."""
    n = draw(st.integers(2, 5))
    machines = [Machine(f"m{i}", draw(RATE), draw(RATE)) for i in range(n)]
    by_task_pair = draw(st.booleans())
    ends = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] != e[1])
    flows = []
    for k in range(draw(st.integers(1, 5))):
        a, b = draw(ends)
        for it in draw(st.lists(st.integers(0, 4), min_size=1, max_size=4, unique=by_task_pair)):
            flows.append(Flow(f"f{len(flows)}", f"m{a}", f"m{b}", iteration=it, pair=k if by_task_pair else None))
    by_key = defaultdict(list)
    for f in flows:
        by_key[f.pipeline_key].append(f)
    timed = []
    for same_key in by_key.values():
        releases = sorted(draw(st.lists(st.floats(0, 20), min_size=len(same_key), max_size=len(same_key))))
        for f, release in zip(sorted(same_key, key=lambda f: f.iteration), releases):
            timed.append(TimedFlow(f, draw(st.floats(1, 1000)), release))
    return machines, timed


@settings(max_examples=200, deadline=None)
@given(training_like_instance())
def test_theorem1_oes_makespan_within_degree_times_the_chain_bound(instance):
    machines, flows = instance
    bound = chain_lower_bound(flows, machines)
    degree = max_degree(t.flow for t in flows)
    t_oes = max(simulate(flows, machines, "oes").values())
    t_fair = max(simulate(flows, machines, "fair").values())
    assert bound <= t_oes * (1 + TOL) and bound <= t_fair * (1 + TOL)  # a lower bound for both
    assert t_oes <= degree * bound * (1 + TOL)


def test_with_remaining_is_replace():
    f = Flow("a", "m0", "m1", iteration=2, pair=("g0", "s1"), coflow=("s1", 2))
    copy = f.with_remaining(3.5)
    assert copy == replace(f, remaining_mbit=3.5) and hash(copy) == hash(replace(f, remaining_mbit=3.5))
    assert f.remaining_mbit is None and copy.pipeline_key == ("g0", "s1") and copy.coflow_key == ("s1", 2)
    with pytest.raises(AttributeError):
        copy.remaining_mbit = 1.0  # still frozen
