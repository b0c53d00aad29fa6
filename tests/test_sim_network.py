"""FluidNetwork (experiments.sim.network) against hand-checked cases and against the
reference model it replaced (itersim's progressive filling, refilling every flow at
every change: ``allocate_caps`` and ``RefNetwork`` here), which it must equal."""
from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pytest

from experiments.sim import network
from experiments.sim.network import FluidNetwork, bench_network

REL = 1e-9


def close(a: float, b: float, scale: float = 1.0) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=REL * scale)


def one_q(*ports: str, q: int = 0) -> tuple:
    return tuple((p, q) for p in ports)


# --- hand-checkable cases ---------------------------------------------------------------

def test_two_flows_share_a_port_fairly():
    net = FluidNetwork({"x": 100.0})
    net.add("a", one_q("x"), 100)
    net.add("b", one_q("x"), 300)
    assert net.rate("a") == net.rate("b") == 50.0
    assert net.next_end() == 2.0


def test_strict_priority_starves_the_lower_queue():
    net = FluidNetwork({"x": 100.0, "y": 100.0})
    net.add("hi", (("x", 1),), 10)
    net.add("lo", (("x", 2), ("y", 0)), 10)
    net.add("other", (("y", 0),), 10)
    assert net.rate("hi") == 100.0
    assert net.rate("lo") == 0.0
    assert net.rate("other") == 100.0  # y: "lo" holds nothing there
    assert net.advance(net.next_end()) == ["hi", "other"]  # both end at 0.1 s
    assert net.rate("lo") == 100.0


def test_max_min_gives_spare_capacity_away():
    # b is held to 10 by y, so a takes the 90 left on x
    net = FluidNetwork({"x": 100.0, "y": 10.0})
    net.add("a", one_q("x"), 1e3)
    net.add("b", one_q("x", "y"), 1e3)
    assert net.rate("b") == pytest.approx(10.0, rel=REL)
    assert net.rate("a") == pytest.approx(90.0, rel=REL)
    # three on y share 100/3 each; a alone with b on x gets the rest
    net = FluidNetwork({}, default_capacity=100.0)
    net.add("a", one_q("x"), 1)
    for f in "bcd":
        net.add(f, one_q("x", "y") if f == "b" else one_q("y"), 1)
    assert net.rate("b") == net.rate("c") == net.rate("d") == pytest.approx(100 / 3, rel=REL)
    assert net.rate("a") == pytest.approx(200 / 3, rel=REL)


def test_a_flows_share_goes_to_the_others_when_it_ends():
    net = FluidNetwork({"x": 100.0})
    net.add("a", one_q("x"), 100)
    net.add("b", one_q("x"), 300)
    assert net.advance(net.next_end()) == ["a"]
    assert net.now == 2.0 and net.left("b") == pytest.approx(200.0, rel=REL)
    assert net.rate("b") == 100.0 and net.next_end() == pytest.approx(4.0, rel=REL)
    assert net.advance(10.0) == ["b"] and net.now == 10.0 and len(net) == 0
    assert net.next_end() == math.inf


def test_ports_of_different_capacities():
    # host links of 100 into a 150 fabric link: the fabric is the bottleneck (50 each)
    caps = {"h1": 100.0, "h2": 100.0, "h3": 100.0, "fab": 150.0}
    net = FluidNetwork(caps)
    for h in ("h1", "h2", "h3"):
        net.add(h, one_q(h, "fab"), 1e3)
    assert [net.rate(h) for h in ("h1", "h2", "h3")] == pytest.approx([50.0] * 3, rel=REL)
    # one host slower than its share: it keeps 20 and the others split the rest
    net = FluidNetwork({**caps, "h1": 20.0})
    for h in ("h1", "h2", "h3"):
        net.add(h, one_q(h, "fab"), 1e3)
    assert [net.rate(h) for h in ("h1", "h2", "h3")] == pytest.approx([20.0, 65.0, 65.0], rel=REL)


def test_flows_ending_at_one_instant_come_in_add_order():
    net = FluidNetwork({}, default_capacity=100.0)
    net.add("z", one_q("x"), 50)
    net.add("y", one_q("w"), 100)
    net.add("a", one_q("x"), 50)
    # z and a (x: 50 each) and y (w: 100) all end at 1.0
    assert net.advance(net.next_end()) == ["z", "y", "a"]


def test_advance_past_several_ends_orders_by_end_time():
    def build():
        net = FluidNetwork({}, default_capacity=10.0)
        for i, (ports, size) in enumerate([("ab", 30), ("a", 5), ("bc", 70), ("c", 20), ("ac", 1)]):
            net.add(f"f{i}", one_q(*ports), size)
        return net
    stepped, jumped = build(), build()
    order = []
    while stepped.next_end() <= 20.0:
        order += stepped.advance(stepped.next_end())
    stepped.advance(20.0)
    assert jumped.advance(20.0) == order and len(order) >= 3
    assert jumped.now == stepped.now == 20.0
    for f in ("f0", "f1", "f2", "f3", "f4"):
        assert (f in jumped) == (f in stepped)
        if f in jumped:
            assert jumped.left(f) == pytest.approx(stepped.left(f), rel=REL)


def test_requeue_and_remove():
    net = FluidNetwork({}, default_capacity=100.0)
    net.add("a", (("x", 1),), 100)
    net.add("b", (("x", 1),), 100)
    net.advance(0.5)  # 25 bytes each
    net.requeue("a", (("x", 1),))  # unchanged: no-op
    assert net.rate("a") == 50.0 and net.left("a") == pytest.approx(75.0)
    net.requeue("a", (("x", 0),))  # a now goes first
    assert net.left("a") == pytest.approx(75.0) and net.rate("a") == 100.0 and net.rate("b") == 0.0
    net.requeue("a", (("y", 0),))  # another port altogether
    assert net.rate("a") == net.rate("b") == 100.0
    assert net.next_end() == pytest.approx(1.25)
    assert net.remove("b") == pytest.approx(75.0)
    assert "b" not in net and len(net) == 1
    assert net.advance(10.0) == ["a"] and net.now == 10.0
    with pytest.raises(KeyError):
        net.remove("b")


def test_lefts_and_rates_of_many_flows_are_each_ones():
    rng = random.Random(3)
    net = FluidNetwork({}, default_capacity=100.0)
    for k in range(40):
        net.add(k, one_q(*rng.sample("pqrstu", rng.randint(1, 3))), rng.randint(1, 500))
    net.advance(net.next_end() / 2)
    net.advance(net.next_end())
    flows = [k for k in range(40) if k in net][::-1]
    assert net.lefts(flows).tolist() == [net.left(k) for k in flows]
    assert net.rates(flows).tolist() == [net.rate(k) for k in flows]
    assert net.lefts([]).tolist() == [] and net.rates([]).tolist() == []


def test_a_rate_limit_port_moves_with_set_capacity():
    # a limit port of its own in front of a shared port: a per-flow rate limit
    net = FluidNetwork({"x": 100.0})
    net.set_capacity("limit-a", 20.0)  # before the port is used: taken when it is
    net.add("a", one_q("limit-a", "x"), 100)
    net.add("b", one_q("x"), 100)
    assert net.rate("a") == 20.0 and net.rate("b") == 80.0
    net.advance(1.0)  # a: 20 bytes, b: 80
    net.set_capacity("limit-a", 60.0)
    assert net.rate("a") == net.rate("b") == 50.0 and net.left("a") == pytest.approx(80.0)
    assert net.advance(net.next_end()) == ["b"] and net.now == pytest.approx(1.4)
    assert net.rate("a") == 60.0
    with pytest.raises(ValueError):
        net.set_capacity("limit-a", 0.0)


def test_bad_input():
    net = FluidNetwork({"x": 1.0})
    with pytest.raises(KeyError, match="h1/out"):
        net.add("a", (("h1/out", 0),), 1)
    assert len(net) == 0
    net.add("a", (("x", 0),), 1)
    with pytest.raises(KeyError, match="nope"):
        net.requeue("a", (("nope", 0),))
    assert net.rate("a") == 1.0  # still in flight, untouched
    with pytest.raises(ValueError):
        net.add("a", (("x", 0),), 1)  # already in flight
    with pytest.raises(ValueError):
        net.add("b", (), 1)
    with pytest.raises(ValueError):
        net.add("b", (("x", 0), ("x", 1)), 1)
    with pytest.raises(ValueError):
        net.add("b", (("x", 0),), 0)
    with pytest.raises(ValueError, match="64 bits"):
        net.add("b", (("x", 2 ** 63),), 1)
    net.add("b", (("x", 2 ** 63 - 1),), 1)  # the refused add left nothing behind: b is filled
    assert net.rate("b") == 0.0 and net.rate("a") == 1.0  # behind a's queue 0
    net.remove("b")
    net.advance(0.5)
    with pytest.raises(ValueError):
        net.advance(0.25)
    with pytest.raises(ValueError):
        FluidNetwork({"x": 0.0})


def test_a_priority_cycle_is_broken_by_each_flows_last_hop_queue():
    # each flow is ahead of the other on one port: by their last hops, 1 goes first
    hops = [(("x", 0), ("y", 1)), (("x", 1), ("y", 0))]
    net = FluidNetwork({}, default_capacity=1.0)
    for i, h in enumerate(hops):
        net.add(i, h, 1)
    assert (net.rate(0), net.rate(1)) == (0.0, 1.0)
    # a third flow on x alone, in queue 1: still a cycle, flow 1 still first
    net.add(2, (("x", 1),), 1)
    assert (net.rate(0), net.rate(1), net.rate(2)) == (0.0, 1.0, 0.0)
    net.requeue(1, (("x", 1), ("y", 1)))  # one order again: x serves flow 0 first
    assert (net.rate(0), net.rate(1), net.rate(2)) == (1.0, 0.0, 0.0)


def test_components_refill_alone():
    """A change on one component leaves another's rates as they were."""
    net = FluidNetwork({}, default_capacity=90.0)
    for i in range(3):
        net.add(("left", i), one_q("a", "b"), 1e6)
        net.add(("right", i), one_q("c", "d"), 1e6)
    assert net.rate(("right", 0)) == 30.0
    net.add(("left", 3), one_q("b"), 1e6)
    assert net.rate(("left", 0)) == pytest.approx(22.5)
    assert net.rate(("right", 0)) == 30.0
    net.add("bridge", one_q("a", "d"), 1e6)  # now one component
    assert net.rate(("right", 0)) == pytest.approx(22.5)


def test_a_split_component_refills_alone():
    """A bridge flow leaving splits a component in two: each then refills alone, and
    a pair losing its last flow while still linked otherwise changes nothing."""
    # c and d are 5e-10 over a's capacity: filled with a-b (one component) they
    # would freeze in a's round, at 30 exactly; alone they fill at their own level
    caps = {"a": 90.0, "b": 90.0, "c": 90.0 * (1 + 5e-10), "d": 90.0 * (1 + 5e-10)}
    alone = FluidNetwork(caps)
    for i in range(3):
        alone.add(i, one_q("c", "d"), 1e6)
    right = alone.rate(0)
    assert right > 30.0
    net = FluidNetwork(caps)
    for i in range(3):
        net.add(("left", i), one_q("a", "b"), 1e6)
        net.add(("right", i), one_q("c", "d"), 1e6)
    net.add("bridge", one_q("a", "d"), 1e6)
    assert net.rate(("right", 0)) == pytest.approx(22.5)
    net.remove("bridge")
    assert net.rate(("left", 0)) == 30.0 and net.rate(("right", 0)) == right
    net.add(("left", 3), one_q("b"), 1e6)
    assert net.rate(("left", 0)) == pytest.approx(22.5)
    assert net.rate(("right", 0)) == right
    # a ring a-b-c-d-a: a-d losing its flow leaves one component, rates as the reference
    net = FluidNetwork({}, default_capacity=90.0)
    hops = [one_q("a", "b"), one_q("b", "c"), one_q("c", "d"), one_q("a", "d"), one_q("a", "d"), one_q("a")]
    for i, h in enumerate(hops):
        net.add(i, h, 1e6)
    net.remove(3)
    net.remove(4)
    want = allocate_caps([h for i, h in enumerate(hops) if i not in (3, 4)], defaultdict(lambda: 90.0))
    assert [net.rate(i) for i in (0, 1, 2, 5)] == pytest.approx(want, rel=REL)


def test_an_emptied_group_reused_is_a_new_group():
    """A group whose last flow leaves is kept for the next flow over the same hops:
    that flow then sees exactly what a network that never had the group shows."""
    for queues in ((0, 0), (1, 0)):  # one queue; priorities on x
        hops = (("x", queues[0]), ("y", 0))
        net = FluidNetwork({}, default_capacity=100.0)
        net.add("a", hops, 100)
        net.add("b", (("x", 0),), 300)
        net.add("c", one_q("y", "z"), 50)
        g = net._sig[hops]
        assert net.advance(net.next_end()) == ["c"]
        net.remove("a")
        assert hops in net._sig  # kept, idle: no rate, moves nothing
        net.advance(net.now + 0.5)
        assert net._rate[g] == 0.0 and net._sent[g] == 0.0
        net.add("d", hops, 70)
        assert net._sig[hops] == g
        fresh = FluidNetwork({}, default_capacity=100.0)
        fresh.add("b", (("x", 0),), net.left("b"))
        fresh.add("d", hops, 70)
        assert (net.rate("b"), net.rate("d")) == (fresh.rate("b"), fresh.rate("d"))
        assert net.left("d") == 70.0
        assert net.next_end() - net.now == pytest.approx(fresh.next_end(), rel=1e-12)


def test_rates_stay_exact_as_priorities_come_and_go():
    """One-queue and priority components side by side, priorities then gone: every
    step equals the reference filling."""
    cap = 100.0
    net = FluidNetwork({}, default_capacity=cap)
    flows: dict = {}

    def check():
        names = list(flows)
        want = allocate_caps([flows[f] for f in names], defaultdict(lambda: cap))
        assert [net.rate(f) for f in names] == pytest.approx(want, rel=REL, abs=REL * cap)

    steps = [("add", "u", one_q("a", "b")), ("add", "v", one_q("b", "c")), ("add", "w", one_q("c")),
             ("add", "p", (("x", 0), ("y", 1))), ("add", "q", (("x", 1), ("y", 1))), ("add", "r", (("y", 0),)),
             ("add", "s", (("x", 2), ("a", 0))),  # links the two: one priority component
             ("remove", "p"), ("remove", "s"), ("requeue", "q", (("x", 0), ("y", 0))), ("remove", "r"),
             ("add", "t", (("y", 0), ("c", 0))), ("requeue", "q", (("x", 0), ("y", 2))),
             ("requeue", "q", (("x", 0), ("y", 0))), ("remove", "u")]
    for op, f, *hops in steps:
        if op == "add":
            flows[f] = hops[0]
            net.add(f, hops[0], 1e6)
        elif op == "requeue":
            flows[f] = hops[0]
            net.requeue(f, hops[0])
        else:
            del flows[f]
            net.remove(f)
        check()


def test_ports_within_tolerance_of_full_freeze_in_the_same_round():
    # x fills at level 1; y is then 5e-10 of its capacity short of full, which counts
    # as full (as in itersim.allocate), so b stops at exactly 1 too (w links them)
    for queue_b in (0, 1):
        net = FluidNetwork({"x": 1.0, "y": 1.0 + 5e-10, "z": 1.0, "w": 10.0})
        net.add("a", (("x", 0), ("w", 0)), 1)
        net.add("b", (("y", queue_b), ("w", 0)), 1)
        net.add("c", (("y", queue_b + 1), ("z", 0)), 1)  # starved on y
        assert net.rate("a") == 1.0 and net.rate("b") == 1.0 and net.rate("c") == 0.0
    assert allocate_caps([(("x", 0),), (("y", 0),)], defaultdict(lambda: 1.0)) == [1.0, 1.0]


def test_long_lived_group_keeps_precision():
    """In one group a huge flow keeps going while a large one and then tiny ones
    pass: the group's bytes moved grow far past the tiny sizes, yet a tiny flow's
    bytes left stay exact (the group is rebased before it joins). Its end time is
    only as exact as absolute times of ~2e6 s allow (as in itersim)."""
    cap = 1000.0
    net = FluidNetwork({"x": cap})
    net.add("huge", one_q("x"), 1e15)
    net.add("large", one_q("x"), 1e9)
    assert net.advance(net.next_end()) == ["large"]
    tiny = 1e-3
    for k in range(1, 101):
        net.add(k, one_q("x"), tiny * k)
        assert net.left(k) == pytest.approx(tiny * k, rel=REL)
        assert net.advance(net.next_end()) == [k]
    assert net.left("huge") == pytest.approx(1e15 - 1e9, rel=1e-12)


# --- random instances against the reference filling ---------------------------------------------

def ranked_hops(rng: random.Random, ports: list[str], offsets: dict, max_hops: int = 3) -> tuple:
    """Hops over 1..max_hops random ports; every port maps one per-flow rank to its
    queue by its own monotone map, so the queues follow a single order."""
    chosen = rng.sample(ports, rng.randint(1, min(max_hops, len(ports))))
    rank = rng.randrange(10)
    return tuple((p, (rank + offsets[p][0]) // offsets[p][1]) for p in chosen)


def random_instance(seed: int) -> list[tuple]:
    rng = random.Random(seed)
    ports = [f"p{i}" for i in range(rng.randint(1, 8))]
    offsets = {p: (rng.randrange(3), rng.choice([1, 2, 3, 10])) for p in ports}
    pool = [ranked_hops(rng, ports, offsets) for _ in range(rng.randint(1, 8))]
    # repeats of a pool entry share a group; fresh ones are mostly alone
    return [rng.choice(pool) if rng.random() < 0.6 else ranked_hops(rng, ports, offsets)
            for _ in range(rng.randint(1, 40))]


@pytest.mark.parametrize("seed", range(200))
def test_rates_equal_the_reference_filling(seed):
    hops = random_instance(seed)
    cap = 125.0
    want = allocate_caps(hops, defaultdict(lambda: cap))
    net = FluidNetwork({}, default_capacity=cap)
    for i, h in enumerate(hops):
        net.add(i, h, 1.0 + i)
    got = [net.rate(i) for i in range(len(hops))]
    assert all(close(g, w, cap) for g, w in zip(got, want)), (hops, got, want)
    assert sum(got) > 0


def allocate_caps(hops: list[tuple], capacity: dict[str, float]) -> list[float]:
    """The reference filling (itersim's ``allocate``) with a capacity per port: every
    round, every flow that is best-queued on all its ports rises until a port fills."""
    rate = [0.0] * len(hops)
    queue_at = [dict(h) for h in hops]
    users: dict[str, list[int]] = {}
    for i, h in enumerate(hops):
        for port, _ in h:
            users.setdefault(port, []).append(i)
    residual = {p: capacity[p] for p in users}
    rising = set(range(len(hops)))
    while rising:
        best = {port: min(queue_at[i][port] for i in flows if i in rising)
                for port, flows in users.items() if any(i in rising for i in flows)}
        eligible = [i for i in sorted(rising) if all(queue_at[i][p] == best[p] for p in queue_at[i])]
        assert eligible, "the reference takes queues that follow one order"
        count = Counter(p for i in eligible for p in queue_at[i])
        step = min(residual[p] / n for p, n in count.items())
        for i in eligible:
            rate[i] += step
        for p, n in count.items():
            residual[p] -= step * n
            if residual[p] <= 1e-9 * capacity[p]:
                residual[p] = 0.0
                rising.difference_update(users[p])
    return rate


@pytest.mark.parametrize("seed", range(50))
def test_rates_with_port_capacities(seed):
    hops = random_instance(1000 + seed)
    rng = random.Random(seed)
    caps = {p: rng.choice([10.0, 40.0, 100.0, 1000.0]) for h in hops for p, _ in h}
    want = allocate_caps(hops, caps)
    net = FluidNetwork(caps)
    for i, h in enumerate(hops):
        net.add(i, h, 1.0)
    got = [net.rate(i) for i in range(len(hops))]
    assert all(close(g, w, 1000.0) for g, w in zip(got, want)), (hops, caps, got, want)


# --- a random event sequence beside the reference network -----------------------------------

class RefNetwork:
    """The reference network (itersim's ``Network``): flows in flight, every rate
    refilled by ``allocate_caps`` after any change."""

    def __init__(self, capacity: float):
        self.capacity = defaultdict(lambda: capacity)
        self.left: dict = {}
        self.size: dict = {}
        self.hops: dict = {}
        self.rate: dict = {}
        self.stale = False

    def add(self, flow, hops, nbytes) -> None:
        self.left[flow] = self.size[flow] = float(nbytes)
        self.hops[flow] = hops
        self.stale = True

    def requeue(self, flow, hops) -> None:
        if self.hops[flow] != hops:
            self.hops[flow] = hops
            self.stale = True

    def remove(self, flow) -> float:
        del self.size[flow], self.hops[flow]
        self.rate.pop(flow, None)
        self.stale = True
        return self.left.pop(flow)

    def rates(self) -> dict:
        if self.stale:
            flows = list(self.hops)
            self.rate = dict(zip(flows, allocate_caps([self.hops[f] for f in flows], self.capacity)))
            self.stale = False
        return self.rate

    def time_to_next_end(self) -> float:
        return min((self.left[f] / r for f, r in self.rates().items() if r > 0), default=math.inf)

    def advance(self, dt: float) -> list:
        ended = []
        for f, r in self.rates().items():
            self.left[f] -= r * dt
            if self.left[f] <= 1e-9 * self.size[f]:
                ended.append(f)
        for f in ended:
            self.remove(f)
        return ended


@pytest.mark.parametrize("idle", [0, 2, network._IDLE])
@pytest.mark.parametrize("seed", range(6))
def test_event_sequence_equals_the_reference_network(seed, idle, monkeypatch):
    # idle: how many emptied groups are kept for reuse (0: none, 2: most are forgotten)
    monkeypatch.setattr(network, "_IDLE", idle)
    rng = random.Random(seed)
    cap = 100.0
    ports = [f"h{i}/{d}" for i in range(5) for d in ("out", "in")] + ["island"]
    offsets = {p: (rng.randrange(3), rng.choice([1, 2, 4])) for p in ports}
    pool = [ranked_hops(rng, ports[:-1], offsets) for _ in range(6)]
    ref, net = RefNetwork(cap), FluidNetwork({}, default_capacity=cap)
    next_id, delivered = 0, 0
    for step in range(400):
        op = rng.random()
        if op < 0.3 or not ref.left:
            # a burst at one instant; twins (same hops and size) end together
            hops = rng.choice(pool) if rng.random() < 0.5 else ranked_hops(rng, ports[:-1], offsets)
            if rng.random() < 0.1:
                hops = (("island", 0),)
            size = rng.choice([10.0, 50.0, rng.uniform(1, 200)])
            for _ in range(rng.choice([1, 1, 2, 3])):
                ref.add(next_id, hops, size)
                net.add(next_id, hops, size)
                next_id += 1
        elif op < 0.4:
            flow = rng.choice(list(ref.left))
            hops = rng.choice(pool) if rng.random() < 0.5 else ranked_hops(rng, ports[:-1], offsets)
            ref.requeue(flow, hops)
            net.requeue(flow, hops)
        elif op < 0.45:
            flow = rng.choice(list(ref.left))
            assert close(net.remove(flow), ref.remove(flow), 200.0)
        elif op < 0.55:
            dt = ref.time_to_next_end()
            if math.isfinite(dt):
                dt *= rng.random()
                assert net.advance(net.now + dt) == ref.advance(dt)
        else:
            dt = ref.time_to_next_end()
            t = net.next_end()
            if not math.isfinite(dt):
                assert t == math.inf
                continue
            assert close(t, net.now + dt, t)
            want = ref.advance(dt)
            got = net.advance(t)
            assert got == want, (step, got, want)
            delivered += len(got)
        rates = ref.rates()
        assert len(net) == len(rates)
        for f, r in rates.items():
            assert close(net.rate(f), r, cap)
            assert close(net.left(f), ref.left[f], 200.0)
    assert delivered > 100


# --- sanity ---------------------------------------------------------------------------------

@pytest.mark.parametrize("queues, weights", [(1, None), (3, None), (3, {1: 2.0, 2: 1.0, 3: 1.0})])
def test_bench_runs(queues, weights):
    per = bench_network(flows=60, ports=6, transfers=300, seed=3, queues=queues, weights=weights)
    assert 0 < per < 1.0


def test_the_compiled_fillings_heap_orders_as_heapq_and_grows():
    """``_push``/``_pop`` (the priority filling's heap of (level, port)) pop what
    heapq pops for the same tuples, ties on the level broken by the port, from a
    capacity far below what is pushed (the arrays grow)."""
    import heapq

    import numpy as np

    rng = random.Random(5)
    hv, hp, size = np.empty(1), np.empty(1, np.int64), 0
    ref = []
    popped, want = [], []
    for _ in range(3000):
        if ref and rng.random() < 0.4:
            popped.append((float(hv[0]), int(hp[0])))
            size = network._pop(hv, hp, size)
            want.append(heapq.heappop(ref))
        else:
            item = (float(rng.randrange(20)), rng.randrange(50))  # many equal levels
            hv, hp, size = network._push(hv, hp, size, *item)
            heapq.heappush(ref, item)
    while ref:
        popped.append((float(hv[0]), int(hp[0])))
        size = network._pop(hv, hp, size)
        want.append(heapq.heappop(ref))
    assert size == 0 and len(hv) > 1000
    assert popped == want
