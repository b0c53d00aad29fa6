"""The DGTP paper's baselines MRTF and OMCoflow (controller.schedulers.coflow_rates):
by hand, to the end in simulate(), as properties over seeded random instances
(every policy within every NIC; work conservation as each rule implies it), in the
GNN coordinator's pure loop, and as scheduler names of a GNN spec."""
import random
from collections import defaultdict
from dataclasses import replace

import pytest

from controller.schedulers.coflow_rates import mrtf_rates, omcoflow_rates
from controller.schedulers.oes import Flow, Machine, TimedFlow, rate_policies, simulate
from experiments.errors import SpecError
from experiments.gnn import spec as gnn_spec
from experiments.gnn.coordinator import RateCoordinator

# As in test_oes: 4 machines, 2 of them at 1/5 rate.
HETERO = [Machine("m0", 1000, 1000), Machine("m1", 1000, 1000), Machine("m2", 200, 200), Machine("m3", 200, 200)]
TOL = 1e-9


def into(task, src, mbit, dst="m0", iteration=0, name=None):
    """A flow of ``mbit`` left from ``src`` into ``task`` on ``dst``: one member of that task's coflow."""
    return Flow(name or f"{src}->{task}", src, dst, iteration, pair=(src, task), remaining_mbit=mbit,
                coflow=(task, iteration))


def timed(flows):
    return [TimedFlow(f, f.remaining_mbit) for f in flows]


# --- MRTF, by hand ----------------------------------------------------------------

def test_mrtf_gives_the_shortest_flow_the_full_port_and_the_others_wait():
    flows = [into("w", "m1", 300, name="long"), into("w", "m1", 100, name="short", iteration=1),
             into("w", "m2", 10, dst="m1", name="other_port")]
    # 10 Mbit behind m2's 200 is 0.05 s, the shortest: it takes m2's egress whole.
    # 100 at 1000 (0.1 s) takes m1 -> m0 whole; 300 (0.3 s) finds both ports full and waits.
    assert mrtf_rates(HETERO, flows) == pytest.approx({"other_port": 200, "short": 1000, "long": 0})


def test_mrtf_orders_by_remaining_time_not_by_bytes():
    fast_big, slow_small = into("w", "m1", 500), into("w", "m2", 150)
    # 500 Mbit at 1000 is 0.5 s; 150 Mbit behind m2's 200 is 0.75 s.
    assert mrtf_rates(HETERO, [slow_small, fast_big]) == pytest.approx({"m1->w": 1000, "m2->w": 0})


def test_mrtf_to_the_end_serves_an_incast_shortest_first():
    flows = [into("w", src, mbit, name=str(mbit)) for src, mbit in (("m1", 300), ("m2", 40), ("m3", 100))]
    # m2 (0.2 s) first at 200, m1 gets the other 800 of m0's ingress meanwhile, m3 (0.5 s) waits:
    # at 0.2 m1 has 140 left (0.14 s) and runs at 1000 to 0.34; m3 then alone at 200: 0.84.
    assert simulate(timed(flows), HETERO, "mrtf") == pytest.approx({"40": 0.2, "300": 0.34, "100": 0.84})


# --- OMCoflow, by hand ------------------------------------------------------------

def test_omcoflow_finishes_a_lone_coflows_flows_together_at_its_bottleneck():
    # Into one task on m0: 900 Mbit through m0's ingress (0.9 s), but 300 behind m2's
    # 200 Mbit/s egress: the bottleneck, 1.5 s. Every flow is paced to end then.
    flows = [into("w", "m1", 500), into("w", "m2", 300), into("w", "m3", 100)]
    assert omcoflow_rates(HETERO, flows) == pytest.approx({"m1->w": 500 / 1.5, "m2->w": 200, "m3->w": 100 / 1.5})
    assert simulate(timed(flows), HETERO, "omcoflow") == pytest.approx({f.flow_id: 1.5 for f in flows})


def test_omcoflow_serves_the_smallest_bottleneck_first_and_paces_the_next_on_what_is_left():
    big = into("a", "m1", 600)  # alone 0.6 s
    small = into("b", "m2", 100)  # alone 0.5 s (m2's egress): first
    assert omcoflow_rates(HETERO, [big, small]) == pytest.approx({"m2->b": 200, "m1->a": 800})
    # At 0.5 s b is done and a has 200 left, now at 1000: 0.7 s.
    assert simulate(timed([big, small]), HETERO, "omcoflow") == pytest.approx({"m2->b": 0.5, "m1->a": 0.7})


def test_omcoflow_a_coflow_behind_a_full_port_waits_whole():
    c = [into("c", "m3", 20, dst="m1")]  # 0.1 s behind m3's egress: first, it fills m3's egress
    a = [into("a", "m1", 100), into("a", "m2", 10)]  # 0.11 s through m0's ingress: second, fills it
    b = [into("b", "m3", 50), into("b", "m2", 1)]  # 0.25 s behind m3: last, and m0 is full
    rates = omcoflow_rates(HETERO, b + a + c)
    assert rates == pytest.approx({"m3->c": 200, "m1->a": 1000 * 100 / 110, "m2->a": 1000 * 10 / 110,
                                   "m3->b": 0, "m2->b": 0})


def test_omcoflow_without_a_coflow_key_groups_by_receiving_machine_and_iteration():
    flows = [Flow("x", "m1", "m0", remaining_mbit=100), Flow("y", "m2", "m0", remaining_mbit=100),
             Flow("z", "m3", "m0", iteration=1, remaining_mbit=100)]
    # x and y are one coflow (0.5 s behind m2), z another (0.5 s behind m3), x+y first by order.
    assert omcoflow_rates(HETERO, flows) == pytest.approx({"x": 200, "y": 200, "z": 200})


@pytest.mark.parametrize("rates_of", [mrtf_rates, omcoflow_rates])
def test_baselines_need_a_remaining_volume_and_refuse_what_oes_refuses(rates_of):
    with pytest.raises(ValueError, match="needs remaining_mbit > 0, got None"):
        rates_of(HETERO, [Flow("f", "m0", "m1")])
    with pytest.raises(ValueError, match="needs remaining_mbit > 0, got 0"):
        rates_of(HETERO, [Flow("f", "m0", "m1", remaining_mbit=0)])
    with pytest.raises(ValueError, match="one machine"):
        rates_of(HETERO, [Flow("local", "m1", "m1", remaining_mbit=1)])
    assert rates_of(HETERO, []) == {}


# --- properties over seeded random instances ---------------------------------------

def random_instance(rng: random.Random):
    machines = [Machine(f"m{i}", rng.choice([20.0, 100.0, rng.uniform(1, 1000)]),
                        rng.choice([20.0, 100.0, rng.uniform(1, 1000)])) for i in range(rng.randint(2, 6))]
    flows = []
    for k in range(rng.randint(1, 14)):
        src, dst = rng.sample(range(len(machines)), 2)
        task, iteration = f"t{dst}.{rng.randint(0, 1)}", rng.randint(0, 1)  # one or two receiving tasks a machine
        flows.append(Flow(f"f{k}", f"m{src}", f"m{dst}", iteration,
                          remaining_mbit=rng.choice([rng.uniform(0.01, 1000), 1.0]), coflow=(task, iteration)))
    return machines, flows


INSTANCES = [random_instance(random.Random(seed)) for seed in range(400)]


def port_use(flows, rates):
    """port -> (Mbit/s used, flows on it)."""
    used, users = defaultdict(float), defaultdict(list)
    for f in flows:
        for port in (("out", f.src), ("in", f.dst)):
            used[port] += rates[f.flow_id]
            users[port].append(f)
    return used, users


def capacity(machines):
    return {("in", m.name): m.ingress_mbps for m in machines} | {("out", m.name): m.egress_mbps for m in machines}


@pytest.mark.parametrize("name", sorted(rate_policies()))
def test_no_policy_exceeds_a_nic_in_or_out(name):
    for machines, flows in INSTANCES:
        rates = rate_policies()[name](machines, flows)
        assert set(rates) == {f.flow_id for f in flows}
        assert all(r >= 0 for r in rates.values())
        used, _ = port_use(flows, rates)
        cap = capacity(machines)
        assert all(used[port] <= cap[port] * (1 + TOL) for port in used)


def full(port, used, cap):
    return used[port] >= cap[port] * (1 - 1e-7)


def test_mrtf_is_work_conserving_every_flow_has_a_full_port():
    for machines, flows in INSTANCES:
        used, _ = port_use(flows, mrtf_rates(machines, flows))
        cap = capacity(machines)
        assert all(full(("out", f.src), used, cap) or full(("in", f.dst), used, cap) for f in flows)


def test_omcoflow_paces_each_coflow_and_no_coflow_could_go_faster_whole():
    for machines, flows in INSTANCES:
        rates = omcoflow_rates(machines, flows)
        used, _ = port_use(flows, rates)
        cap = capacity(machines)
        coflows = defaultdict(list)
        for f in flows:
            coflows[f.coflow_key].append(f)
        for members in coflows.values():
            # One finish time per coflow: rate / remaining is the same for all its flows.
            paces = [rates[f.flow_id] / f.remaining_mbit for f in members]
            assert max(paces) - min(paces) <= 1e-9 * max(paces, default=0)
            # Work conservation of coflows: one of its ports has nothing left.
            assert any(full(port, used, cap) for f in members for port in (("out", f.src), ("in", f.dst)))


@pytest.mark.parametrize("name", ["mrtf", "omcoflow"])
def test_simulate_takes_the_baselines_to_the_end_within_the_nics(name):
    for machines, flows in INSTANCES[:100]:
        # One iteration: a machine pair's flows need not arrive in iteration order here.
        sized = [TimedFlow(replace(f, iteration=0), f.remaining_mbit, release_s=k * 0.01) for k, f in enumerate(flows)]
        done = simulate(sized, machines, name)
        # No flow ends before it could alone, at its slower NIC.
        cap = capacity(machines)
        for t in sized:
            alone = t.size_mbit / min(cap[("out", t.flow.src)], cap[("in", t.flow.dst)])
            assert done[t.flow.flow_id] >= t.release_s + alone * (1 - 1e-9)
        # Nor does a NIC carry more than its rate: what is released through it from any
        # release time on takes at least its volume over the NIC's rate to finish.
        for port in cap:
            through = [t for t in sized if port in (("out", t.flow.src), ("in", t.flow.dst))]
            for since in {t.release_s for t in through}:
                later = [t for t in through if t.release_s >= since]
                volume = sum(t.size_mbit for t in later)
                assert max(done[t.flow.flow_id] for t in later) >= since + volume / cap[port] * (1 - 1e-9)


# --- in the GNN coordinator --------------------------------------------------------

def start(flow, t, mbit, src="tbh2", dst_task="sampler0", iteration=0, src_port=40000, dst="tbh1"):
    return {"kind": "flow_start", "t": t, "flow": flow, "src": src, "dst": dst, "src_task": f"store@{src}",
            "dst_task": dst_task, "iteration": iteration, "bytes": mbit * 1e6 / 8, "src_port": src_port,
            "dst_port": 21000}


def test_the_coordinator_hands_mrtf_the_remaining_volume_and_omcoflow_the_receiving_task():
    machines = [Machine("tbh1", 100, 100), Machine("tbh2", 100, 100), Machine("tbh3", 100, 100)]
    mrtf = RateCoordinator(machines, mrtf_rates)
    mrtf.on_flow_event(start("a", 0.0, mbit=100))  # 100 Mbit
    assert list(mrtf.decide().rates.values()) == [100]
    mrtf.on_flow_event(start("b", 0.5, mbit=80, src="tbh3"))  # a has 50 Mbit left: it keeps the port
    assert mrtf.decide().rates == {("tbh2", "tbh1", "tcp", 40000, 21000): 100, ("tbh3", "tbh1", "tcp", 40000, 21000): 0}
    omc = RateCoordinator(machines, omcoflow_rates)
    omc.on_flow_event(start("a", 0.0, mbit=60))
    omc.on_flow_event(start("b", 0.0, mbit=20, src="tbh3"))
    assert sorted(omc.decide().rates.values()) == pytest.approx([25, 75])  # one coflow into sampler0
    omc.on_flow_event(start("c", 0.0, mbit=10, src="tbh3", dst_task="sampler1", src_port=40001))
    # sampler1's coflow (0.1 s) goes first and fills tbh1's ingress: sampler0's waits.
    assert sorted(omc.decide().rates.values()) == pytest.approx([0, 0, 100])


@pytest.mark.parametrize("name", sorted(rate_policies()))
def test_the_coordinators_rates_load_no_host_nic_past_its_rate(name):
    """Per 5-tuple, as installed, over random starts and ends: connections that share a
    5-tuple add up, and the baselines' remaining volumes shrink with the time sent."""
    for seed in range(60):
        rng = random.Random(seed)
        machines = [Machine(f"tbh{i}", rng.choice([20.0, 100.0, rng.uniform(1, 1000)]),
                            rng.choice([20.0, 100.0, rng.uniform(1, 1000)])) for i in range(1, rng.randint(3, 6))]
        cap = capacity(machines)
        coordinator = RateCoordinator(machines, rate_policies()[name])
        t, active = 0.0, []
        for k in range(rng.randint(1, 16)):
            t += rng.uniform(0, 0.5)
            if active and rng.random() < 0.3:
                coordinator.on_flow_event({"kind": "flow_end", "t": t, "flow": rng.choice(active).flow_id})
            else:
                src, dst = rng.sample([m.name for m in machines], 2)
                coordinator.on_flow_event(start(f"f{k}", t, rng.uniform(0.01, 500), src=src, dst=dst,
                                                dst_task=f"task{rng.randint(0, 1)}@{dst}",
                                                src_port=rng.choice([40000, 40001])))
            decision = coordinator.decide()
            active = decision.active
            used = defaultdict(float)
            for (src, dst, *_), mbps in decision.rates.items():
                used["out", src] += mbps
                used["in", dst] += mbps
            assert all(used[port] <= cap[port] * (1 + TOL) for port in used), (seed, k, dict(used))


def test_a_connection_carrying_two_active_transfers_gets_the_sum_of_their_rates():
    machines = [Machine("tbh1", 100, 100), Machine("tbh2", 100, 100)]
    mrtf = RateCoordinator(machines, mrtf_rates)
    mrtf.on_flow_event(start("minibatch", 0.0, mbit=80))
    mrtf.on_flow_event(start("evalbatch", 0.0, mbit=10))  # same pair, iteration, 5-tuple
    decision = mrtf.decide()
    assert len(decision.active) == 2  # MRTF: evalbatch 100, minibatch 0
    assert decision.rates == {("tbh2", "tbh1", "tcp", 40000, 21000): pytest.approx(100)}


# --- as GNN scheduler names -------------------------------------------------------

@pytest.mark.parametrize("name", ["oes", "default", "omcoflow", "mrtf", "fair"])
def test_the_rate_policy_names_validate_in_a_gnn_spec(name):
    raw = {"name": "gnn-test", "topology": {"kind": "star", "hosts": 4, "host_mbps": 100},
           "workload": {"kind": "gnn", "graph": {"shape": "ogbn-products", "nodes": 1000}},
           "scheduler": {"name": name}}
    assert gnn_spec.validate(raw)["scheduler"] == {"name": name}
    assert name == "default" or name in rate_policies()
    raw["scheduler"]["name"] = "sincronia"
    with pytest.raises(SpecError, match=r"scheduler\.name.*omcoflow.*mrtf"):
        gnn_spec.validate(raw)
