import itertools
import json
import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from experiments.cojob import workload as cj
from experiments.errors import SpecError

TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "grouper-trace.json"
HOSTS = [f"tbh{i}" for i in range(1, 10)]
RACKS = {host: f"tbl{(i - 1) // 3 + 1}" for i, host in enumerate(HOSTS, start=1)}


def test_plans_are_deterministic_per_seed():
    assert cj.plan_cojob(3, "vgg19", seed=7) == cj.plan_cojob(3, "vgg19", seed=7)
    assert cj.plan_cojob(3, "vgg19", seed=7) != cj.plan_cojob(3, "vgg19", seed=8)
    assert cj.poisson_cojobs(5, 30.0, 1.0, seed=2) == cj.poisson_cojobs(5, 30.0, 1.0, seed=2)
    jobs = [job for plan in cj.testbed_cojobs(seed=1) for job in plan.jobs]
    assert cj.place(jobs, HOSTS, RACKS, seed=4) == cj.place(jobs, HOSTS, RACKS, seed=4)
    assert cj.place(jobs, HOSTS, RACKS, seed=4) != cj.place(jobs, HOSTS, RACKS, seed=5)


@pytest.mark.parametrize("seed", range(20))
def test_successive_halving_kills_the_worse_half_each_stage(seed):
    plan = cj.plan_cojob(0, "resnet152", seed=seed)
    assert [len(plan.survivors(k)) for k in range(4)] == [8, 4, 2, 1]
    for k, end in enumerate(list(itertools.accumulate(plan.stage_iterations))[:-1]):  # where stage k ends
        before, after = set(plan.survivors(k)), set(plan.survivors(k + 1))
        assert after < before
        accuracy = {j: plan.jobs[j].curve.accuracy(end) for j in before}
        assert min(accuracy[j] for j in after) >= max(accuracy[j] for j in before - after)
    # kills do not depend on how far the stages were scaled down
    small = cj.plan_cojob(0, "resnet152", seed=seed, stage_iterations=(5, 10, 20, 40))
    assert [small.survivors(k) for k in range(4)] == [plan.survivors(k) for k in range(4)]


def test_remaining_stages_offline_and_online():
    """What the coordinator ranks: offline, a job's load stops after its max_stage; online
    (Grouper's), every live job is assumed to run all remaining stages. Each job on its
    own hosts, so a job's iterations left are its port's bytes over one iteration's."""
    from experiments.cojob.scheduling import remaining_stages
    plan = cj.plan_cojob(0, "alexnet", seed=3, stage_iterations=(5, 10, 20, 40))
    placements = {job.key: cj.JobPlacement((f"w{job.index}",), (f"p{job.index}",)) for job in plan.jobs}
    done = {cj.job_key(0, j): 2 for j in plan.survivors(1)}  # 2 iterations into stage 1

    def iterations_left(offline: bool) -> dict[str, float]:
        stages = remaining_stages(plan, placements, 1.0, 1, done, started_t=0.0, now=1.0, offline=offline)
        assert [s.index for s in stages] == [1, 2, 3] and [s.arrival for s in stages] == [0.0, 1.0, 1.0]
        out = {}
        for key in done:
            port = f"{placements[key].workers[0]}/out"
            one = cj.stage_port_loads(placements[key], cj.partition_bytes(plan.profile.size_mb, 1), 1)[port]
            out[key] = sum(s.loads.get(port, 0) for s in stages) / one
        return out

    assert set(iterations_left(offline=False).values()) == {68}
    assert sorted(iterations_left(offline=True).values()) == [8, 8, 28, 68]


def test_t90_on_a_hand_computed_curve():
    curve = cj.LearningCurve(a_final=0.8, tau=100.0)  # 90% at 100 * ln 10 = 230.26
    assert cj.t90_iteration(curve) == 231
    assert curve.accuracy(230) < 0.72 <= curve.accuracy(231)
    assert cj.t90_iteration(cj.LearningCurve(0.5, 10.0)) == 24


def test_placement_spreads_over_racks_on_distinct_balanced_hosts():
    jobs = [job for plan in cj.testbed_cojobs(seed=0) for job in plan.jobs]
    placements = cj.place(jobs, HOSTS, RACKS, seed=0)
    assert len(placements) == 32
    for p in placements.values():
        tasks = p.workers + p.ps
        assert (len(p.workers), len(p.ps), len(set(tasks))) == (2, 2, 4)
        assert {RACKS[h] for h in tasks} == set(RACKS.values())
    load = Counter(h for p in placements.values() for h in p.workers + p.ps)
    assert set(load) == set(HOSTS) and max(load.values()) - min(load.values()) <= 1


def test_placement_with_fewer_hosts_than_tasks_reuses_as_little_as_possible():
    hosts = HOSTS[:3]
    placements = cj.place(cj.plan_cojob(0, "vgg19", seed=0).jobs, hosts, RACKS, seed=0)
    for p in placements.values():
        assert set(p.workers + p.ps) == set(hosts)


def test_gpu_servers_placement_puts_workers_on_gpu_hosts_and_pss_on_the_others():
    jobs = [job for plan in cj.testbed_cojobs(seed=0) for job in plan.jobs]
    gpu = [HOSTS[0], HOSTS[3], HOSTS[6]]  # one per rack
    placements = cj.place(jobs, HOSTS, RACKS, seed=0, worker_hosts=gpu)
    workers = Counter(h for p in placements.values() for h in p.workers)
    ps = Counter(h for p in placements.values() for h in p.ps)
    assert set(workers) == set(gpu) and max(workers.values()) - min(workers.values()) <= 1
    assert set(ps) == set(HOSTS) - set(gpu) and max(ps.values()) - min(ps.values()) <= 1
    for p in placements.values():  # a job's two workers on two GPU servers, its PSs on two CPU servers
        assert len(set(p.workers)) == 2 and len(set(p.ps)) == 2
    with pytest.raises(SpecError, match="placement.gpu_hosts: leaves no host"):
        cj.place(jobs, HOSTS, RACKS, worker_hosts=HOSTS)
    with pytest.raises(SpecError, match="placement.gpu_hosts: 'nope'"):
        cj.place(jobs, HOSTS, RACKS, worker_hosts=["nope"])


def alone_comm_s(placement, bytes_per_partition: int, link_mbps: float) -> float:
    """Communication seconds of one iteration of the job alone on a fabric whose only
    bottlenecks are host NICs of ``link_mbps``: push, then pull, each as long as its
    busiest port (the tests' reference for the scaling)."""
    total = 0.0
    for phase in (cj.PUSH, cj.PULL):
        ports: dict[str, int] = {}
        for f in cj.iteration_flows(placement, bytes_per_partition):
            if f.phase == phase and f.src != f.dst:
                for port in (f"{f.src}/out", f"{f.dst}/in"):
                    ports[port] = ports.get(port, 0) + f.bytes
        total += max(ports.values(), default=0) * 8 / (link_mbps * 1e6)
    return total


def test_stage_port_loads_of_a_2_plus_2_job():
    disjoint = cj.JobPlacement(workers=("h1", "h2"), ps=("h3", "h4"))
    assert cj.stage_port_loads(disjoint, 100, iterations=10) == {
        f"h{i}/{d}": 2 * 100 * 10 for i in range(1, 5) for d in ("out", "in")}
    # a worker and a PS share h2: their push and pull stay on the host and load no port
    shared = cj.JobPlacement(workers=("h1", "h2"), ps=("h2", "h3"))
    flows = cj.iteration_flows(shared, 100)
    assert len(flows) == 8 and [f for f in flows if f.src == f.dst] == [
        ("h2", "h2", 100, cj.PUSH), ("h2", "h2", 100, cj.PULL)]
    assert cj.stage_port_loads(shared, 100, iterations=3) == {
        "h1/out": 600, "h2/in": 600, "h3/in": 600, "h2/out": 600, "h3/out": 600, "h1/in": 600}
    assert alone_comm_s(disjoint, 125_000, link_mbps=1.0) == pytest.approx(4.0)


def test_cojob_port_loads_sum_the_jobs_remaining_iterations():
    plan = cj.plan_cojob(0, "deepspeech2", seed=1, n_jobs=2, stage_iterations=(3, 5))
    placements = {job.key: cj.JobPlacement(("h1", "h2"), ("h3", "h4")) for job in plan.jobs}
    remaining = {job.key: sum(plan.stage_iterations[:job.max_stage]) for job in plan.jobs}
    assert sorted(remaining.values()) == [3, 8]
    loads = cj.cojob_port_loads(plan, placements, remaining, bytes_scale=0.001)
    assert loads == {f"h{i}/{d}": 2 * 80_000 * 11 for i in range(1, 5) for d in ("out", "in")}


@pytest.mark.parametrize("model", sorted(cj.MODELS))
def test_scaling_keeps_the_testbed_comm_to_compute_ratio(model):
    profile = cj.MODELS[model]
    placement = cj.JobPlacement(("h1", "h2"), ("h3", "h4"))
    reference = alone_comm_s(placement, cj.partition_bytes(profile.size_mb, 2), 1000.0) / profile.compute_s
    scaling = cj.Scaling(link_mbps=100.0, bytes_scale=0.02, iterations_scale=0.01)
    it = cj.scaled(profile, scaling)
    assert alone_comm_s(placement, it.bytes_per_partition, 100.0) / it.compute_s == pytest.approx(reference)
    assert reference == pytest.approx(profile.size_mb / 160.0)
    assert cj.scaled_stages(cj.TESTBED_STAGES, scaling.iterations_scale) == (5, 10, 20, 40)
    assert scaling.arrival_s(100.0) == pytest.approx(100.0 * 0.2 * 0.01)


def test_testbed_arrivals_follow_the_previous_cojob_of_the_model():
    plans = cj.testbed_cojobs(cojobs_per_model=2, seed=0)
    assert [p.model for p in plans] == list(cj.MODELS) * 2
    assert all(p.arrival == cj.Arrival(at_s=0.0) for p in plans[:4])
    assert [p.arrival.after for p in plans[4:]] == [(0, 2), (1, 2), (2, 2), (3, 2)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_poisson_gaps_are_exponential_with_the_mean_over_the_workload_factor(seed):
    one = dict(models=cj.MODELS, n_jobs=1, stage_iterations=(1,))  # small plans: only the arrivals matter
    times = [p.arrival.at_s for p in cj.poisson_cojobs(20_000, 100.0, 2.0, seed=seed, **one)]
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean = statistics.mean(gaps)
    assert mean == pytest.approx(50.0, rel=0.05)
    # An exponential's coefficient of variation is 1 (constant gaps: 0; uniform: 0.58) and
    # 1 - 1/e of its draws fall below its mean, which a CV-1 mixture of two need not.
    assert statistics.stdev(gaps) / mean == pytest.approx(1.0, abs=0.05)
    assert sum(g < mean for g in gaps) / len(gaps) == pytest.approx(1 - math.exp(-1), abs=0.02)


def test_poisson_workload_factor_compresses_the_gaps():
    base = cj.poisson_cojobs(6, 40.0, 1.0, seed=9)
    double = cj.poisson_cojobs(6, 40.0, 2.0, seed=9)
    assert base[0].arrival.at_s == 0.0
    assert [p.model for p in base] == [p.model for p in double]
    assert [2 * p.arrival.at_s for p in double] == pytest.approx([p.arrival.at_s for p in base])


def test_workload_round_trips_through_json():
    workload = cj.placed(cj.testbed_cojobs(2, seed=5), HOSTS, RACKS, "testbed", seed=5)
    assert cj.Workload.from_dict(json.loads(json.dumps(workload.to_dict()))) == workload
    scaling = cj.Scaling(100.0, 0.02, 0.01)
    assert cj.Scaling.from_dict(json.loads(json.dumps(scaling.to_dict()))) == scaling


def test_bad_plans_raise_spec_errors():
    with pytest.raises(SpecError, match="n_jobs"):
        cj.plan_cojob(0, "vgg19", seed=0, n_jobs=6)
    with pytest.raises(SpecError, match="model"):
        cj.plan_cojob(0, "gpt2", seed=0)
    plans = cj.testbed_cojobs(2, seed=0)[4:]
    with pytest.raises(SpecError, match=r"cojobs\[4\].arrival.after"):
        cj.placed(plans, HOSTS, RACKS, "testbed")


@pytest.mark.skipif(not TRACE.exists(), reason=f"the shared trace {TRACE} is absent")
def test_the_shared_trace_loads():
    workload = cj.load_trace(TRACE)
    assert len(workload.cojobs) == 40 and len(workload.placements) == 320
    assert Counter(p.model for p in workload.cojobs) == {
        "alexnet": 9, "deepspeech2": 13, "resnet152": 7, "vgg19": 11}
    assert {p.model: p.profile.size_mb for p in workload.cojobs} == {
        "alexnet": 280.0, "deepspeech2": 160.0, "resnet152": 240.0, "vgg19": 600.0}
    for plan in workload.cojobs:
        assert plan.stage_iterations == (20, 20, 40, 400)
        assert [len(plan.survivors(k)) for k in range(4)] == [8, 4, 2, 1]
        assert plan.profile.compute_s == 0.0
    assert workload.cojobs[-1].arrival.at_s == pytest.approx(577.9113749601966)
    assert workload.placements["c1j0"] == cj.JobPlacement(
        ("tbh9", "tbh10", "tbh1", "tbh2", "tbh3", "tbh4"), ("tbh5", "tbh6", "tbh7", "tbh8", "tbh9", "tbh10"))
    assert cj.Workload.from_dict(json.loads(json.dumps(workload.to_dict()))) == workload
    with pytest.raises(SpecError, match="hosts: the trace uses 10 hosts, the fabric has 9"):
        cj.load_trace(TRACE, hosts=HOSTS)


def _mini_trace() -> dict:
    job = {"job_index": 0, "workers": [0, 1], "ps": [2, 3], "max_stage": 2,
           "stage_end_iterations_cumulative": [2, 6], "flow_size_MB": 80.0, "compute_time_per_iter_s": 0.0}
    other = dict(job, job_index=1, max_stage=1, workers=[1, 2], ps=[3, 0])
    return {"network": {"hosts": 4}, "cojobs": [
        {"cojob_id": 0, "arrival_s": 0, "model": "DeepSpeech2", "model_size_MB": 160.0, "jobs": [job, other]}]}


def _mutated(mutate):
    trace = _mini_trace()
    mutate(trace)
    return trace


@pytest.mark.parametrize("mutate, field", [
    (lambda t: t.pop("network"), "network"),
    (lambda t: t["network"].update(hosts="ten"), "network.hosts"),
    (lambda t: t.update(cojobs={}), "cojobs"),
    (lambda t: t["cojobs"][0].pop("model_size_MB"), "cojobs[0].model_size_MB"),
    (lambda t: t["cojobs"][0].update(arrival_s=-1), "cojobs[0].arrival_s"),
    (lambda t: t["cojobs"].append(t["cojobs"][0]), "cojobs[1].cojob_id"),
    (lambda t: t["cojobs"][0]["jobs"][1].update(workers=[1, 7]), "cojobs[0].jobs[1].workers[1]"),
    (lambda t: t["cojobs"][0]["jobs"][1].update(ps=[3, 3]), "cojobs[0].jobs[1].ps"),
    (lambda t: t["cojobs"][0]["jobs"][0].update(max_stage=3), "cojobs[0].jobs[0].max_stage"),
    (lambda t: t["cojobs"][0]["jobs"][1].update(flow_size_MB=160.0), "cojobs[0].jobs[1].flow_size_MB"),
    (lambda t: t["cojobs"][0]["jobs"][1].update(stage_end_iterations_cumulative=[2, 7]),
     "cojobs[0].jobs[1].stage_end_iterations_cumulative"),
    (lambda t: t["cojobs"][0]["jobs"][0].update(stage_end_iterations_cumulative=[6, 2]),
     "cojobs[0].jobs[0].stage_end_iterations_cumulative"),
    (lambda t: t["cojobs"][0]["jobs"][1].update(job_index=5), "cojobs[0].jobs[1].job_index"),
    (lambda t: t["cojobs"][0]["jobs"].__setitem__(0, []), "cojobs[0].jobs[0]"),
])
def test_malformed_traces_name_the_field(tmp_path, mutate, field):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_mutated(mutate)))
    with pytest.raises(SpecError) as err:
        cj.load_trace(path)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_a_mini_trace_loads_and_unreadable_files_are_spec_errors(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_mini_trace()))
    workload = cj.load_trace(path, hosts=["a", "b", "c", "d", "e"])
    (plan,) = workload.cojobs
    assert (plan.model, plan.stage_iterations, plan.survivors(1)) == ("deepspeech2", (2, 4), (0,))
    assert workload.placements["c0j1"] == cj.JobPlacement(("b", "c"), ("d", "a"))
    path.write_text("{not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        cj.load_trace(path)
    with pytest.raises(SpecError, match="no such trace file"):
        cj.load_trace(tmp_path / "absent.json")
