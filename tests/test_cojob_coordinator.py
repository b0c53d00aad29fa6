"""The cojob coordinator's decisions on hand-made workloads: the paper's Sincronia
(one coflow per job and iteration) against the stage-level one."""
import json

import pytest

from experiments.cojob import scheduling
from experiments.cojob import spec as cojob_spec
from experiments.cojob import simulated
from experiments.cojob import workload as cojob_mod
from experiments.cojob.coordinator import CojobCoordinator, Decision
from experiments.errors import SpecError
from experiments.runner import read_spec

SCALING = cojob_mod.Scaling(link_mbps=8, bytes_scale=1.0)


def _workload(*cojobs) -> cojob_mod.Workload:
    """cojobs: (cojob id, size MB, stage iterations, [(worker hosts, PS hosts, max stage) per job])."""
    plans, placements = [], {}
    for cojob_id, size_mb, stages, jobs in cojobs:
        job_plans = tuple(cojob_mod.JobPlan(cojob_id, i, max_stage) for i, (_, _, max_stage) in enumerate(jobs))
        plans.append(cojob_mod.CojobPlan(cojob_id, cojob_mod.ModelProfile(f"m{cojob_id}", size_mb, 0.0),
                                         tuple(stages), job_plans, cojob_mod.Arrival(at_s=0)))
        for job, (workers, ps, _) in zip(job_plans, jobs):
            placements[job.key] = cojob_mod.JobPlacement(tuple(workers), tuple(ps))
    return cojob_mod.Workload(tuple(plans), placements, "test")


def _decisions(actions) -> list[Decision]:
    return [a for a in actions if isinstance(a, Decision)]


def _started(workload, scheduler) -> tuple[CojobCoordinator, list[Decision]]:
    coordinator = CojobCoordinator(workload, SCALING, scheduler)
    decisions = []
    for plan in workload.cojobs:
        coordinator.arrive(plan.cojob_id, 0.0)
        decisions += _decisions(coordinator.ready(plan.cojob_id, 0.0))
    return coordinator, decisions


# A small model (1 MB an iteration) with a long stage (10 iterations: 10 MB a port) and a
# big one (3 MB an iteration) with a short stage (2 iterations: 6 MB), on the same two hosts.
SMALL_LONG_BIG_SHORT = _workload((0, 1.0, (10,), [(["h1"], ["h2"], 1)]), (1, 3.0, (2,), [(["h1"], ["h2"], 1)]))


def test_the_papers_sincronia_ranks_a_jobs_iteration_not_its_stage():
    coordinator, decisions = _started(SMALL_LONG_BIG_SHORT, "sincronia")
    coflows = {c.stage_id: c for c in coordinator.coflows_now()}
    assert coflows["c0j0"].loads == {"h1/out": 1e6, "h2/in": 1e6, "h2/out": 1e6, "h1/in": 1e6}
    assert coflows["c1j0"].loads["h1/out"] == 3e6 and {c.weight for c in coflows.values()} == {1.0}
    last = decisions[-1]
    assert last.order == ("c0j0", "c1j0")  # the smaller iteration first, although its stage is larger
    assert {key.job: pair for key, pair in last.queues.items()} == {"c0j0": (1, 1), "c1j0": (2, 2)}
    # The stage-level variant sees the stages' volumes and puts the smaller stage first.
    _, stage_level = _started(SMALL_LONG_BIG_SHORT, "sincronia-stage")
    assert stage_level[-1].order == ("c1/s0", "c0/s0")
    assert {key.job: pair for key, pair in stage_level[-1].queues.items()} == {"c0j0": (2, 2), "c1j0": (1, 1)}


def test_sincronia_reranks_when_a_stage_end_takes_coflows_away_not_on_its_period():
    # Cojob 0: two jobs on h1 -> h2, the second killed after stage 0; cojob 1: a bigger
    # job on h1 -> h3 ranked between them.
    workload = _workload((0, 1.0, (1, 1), [(["h1"], ["h2"], 2), (["h1"], ["h2"], 1)]),
                         (1, 1.5, (4,), [(["h1"], ["h3"], 1)]))
    coordinator, decisions = _started(workload, "sincronia")
    assert not coordinator.periodic and coordinator.tick(1.0) == []
    assert decisions[-1].order == ("c0j0", "c0j1", "c1j0")
    pushes = {key.job: pair[1] for key, pair in decisions[-1].queues.items() if key.phase == "push"}
    assert pushes == {"c0j0": 1, "c0j1": 2, "c1j0": 3}  # h1's local ranks, as its NIC queues
    coordinator.iteration_done("c0j0")  # the iteration that follows has the same loads: nothing to re-rank
    assert _decisions(coordinator.worker_done("c0j0", 0, 0, 1.0)) == []
    [decision] = _decisions(coordinator.worker_done("c0j1", 0, 0, 1.0))  # stage 0 ends, c0j1 is killed
    assert decision.order == ("c0j0", "c1j0")
    assert {key.job: pair[1] for key, pair in decision.queues.items() if key.phase == "push"} == {"c0j0": 1, "c1j0": 2}


def test_at_every_iteration_end_the_order_in_force_is_what_a_re_rank_of_the_live_jobs_would_give():
    """The paper's Sincronia re-ranks as iterations end; the coordinator re-ranks only
    where the set of live jobs changes (stage 0 starts, stage ends), and on the smoke
    spec a fresh BSSI ranking of the live jobs at each of its iteration ends equals the
    order in force: no change of that set goes without its decision. (Every live job is
    ranked, also one computing: the reading docs/grouper.md states.)"""
    spec = simulated.validate(read_spec("experiments/specs/grouper-smoke.yaml"))
    spec["scheduler"]["name"] = "sincronia"
    simulation = simulated.build_simulation(spec, simulated.VARIANTS["iterations+compute"])
    coordinator = simulation.coordinator
    in_force, checked = [], []
    decide = simulation.decide
    simulation.decide = lambda decision: in_force.append(decision.order) or decide(decision)
    iteration_done = coordinator.iteration_done

    def rerank_and_compare(job):
        iteration_done(job)
        coflows = coordinator.coflows_now()
        checked.append(tuple(scheduling.order("sincronia", coflows, coflows)) == in_force[-1])
    coordinator.iteration_done = rerank_and_compare
    result = simulation.run()
    assert len(checked) == 24 and all(checked)
    stage_ends = sum(e["kind"] == "stage_end" for e in result.events)
    assert len(in_force) == 2 + stage_ends - 1  # two stage 0 starts, every stage end but the last with nothing left


def test_both_sincronias_simulate_the_smoke_spec_and_rank_what_they_see():
    spec = simulated.validate(read_spec("experiments/specs/grouper-smoke.yaml"))
    orders = {}
    for scheduler in ("sincronia", "sincronia-stage"):
        simulation = simulated.build_simulation({**spec, "scheduler": {**spec["scheduler"], "name": scheduler}},
                                                simulated.VARIANTS["iterations+compute"])
        result = simulation.run()
        assert sum(e["kind"] == "stage_end" for e in result.events) == 4
        orders[scheduler] = {sid for d in result.decisions for sid in d["order"]}
    assert orders["sincronia"] == {"c0j0", "c0j1", "c1j0", "c1j1"}
    assert orders["sincronia-stage"] == {"c0/s0", "c0/s1", "c1/s0", "c1/s1"}


@pytest.mark.parametrize("scheduler", ["sincronia", "sincronia-stage"])
def test_a_job_without_load_is_no_coflow_and_no_stage(scheduler):
    workload = _workload((0, 1.0, (2,), [(["h1"], ["h1"], 1)]), (1, 1.0, (2,), [(["h1"], ["h2"], 1)]))
    _, decisions = _started(workload, scheduler)
    assert {key.job for key in decisions[-1].queues} == {"c1j0"}
    assert len(decisions[-1].order) == 1


# --- a GPU cluster: cojobs wait for GPUs, placed as admitted -------------------------------

def _gpu_workload(gpus_per_host: int, workers: int = 1, n_cojobs: int = 2) -> cojob_mod.Workload:
    """``n_cojobs`` cojobs of 2 jobs x 2 stages (job 1 killed after stage 0), ``workers``
    workers and one PS a job, all arriving at 0, on hosts h1..h3 in two racks."""
    plans = tuple(cojob_mod.CojobPlan(c, cojob_mod.ModelProfile(f"m{c}", 1.0, 0.0), (1, 1),
                                      (cojob_mod.JobPlan(c, 0, 2), cojob_mod.JobPlan(c, 1, 1)),
                                      cojob_mod.Arrival(at_s=0)) for c in range(n_cojobs))
    racks = {"h1": "s1", "h2": "s1", "h3": "s2"}
    return cojob_mod.Workload(plans, {}, "test",
                              cojob_mod.GpuCluster(tuple(racks), racks, gpus_per_host, workers, 1, seed=0))


def _kinds(actions) -> list[str]:
    return [a.kind if hasattr(a, "kind") else type(a).__name__ for a in actions]


def test_a_cojob_waits_for_gpus_and_is_placed_when_a_killed_job_frees_them():
    coordinator = CojobCoordinator(_gpu_workload(gpus_per_host=1), SCALING, "fs")
    assert _kinds(coordinator.arrive(0, 0.0)) == ["cojob_arrival", "cojob_admitted", "StartCojob"]
    assert _kinds(coordinator.arrive(1, 0.5)) == ["cojob_arrival"]  # 2 of 3 GPUs taken, it needs 2
    assert set(coordinator.placements) == {"c0j0", "c0j1"}
    coordinator.ready(0, 1.0)
    coordinator.worker_done("c0j0", 0, 0, 2.0)
    actions = coordinator.worker_done("c0j1", 0, 0, 3.0)  # stage 0 ends: c0j1 killed, its GPU freed
    admitted = [a for a in actions if getattr(a, "kind", None) == "cojob_admitted"]
    assert len(admitted) == 1 and admitted[0].fields["cojob"] == 1 and admitted[0].fields["waited_s"] == 2.5
    workers = [coordinator.placements[key].workers[0] for key in ("c0j0", "c1j0", "c1j1")]
    assert len(set(workers)) == 3  # one GPU a host: never two workers on one
    assert coordinator.placements["c1j0"].workers[0] == coordinator.placements["c0j1"].workers[0] or \
        coordinator.placements["c1j1"].workers[0] == coordinator.placements["c0j1"].workers[0]


def test_gpu_slots_pack_workers_first_fit_and_keep_ps_off_their_workers_hosts():
    workload = _gpu_workload(gpus_per_host=2)
    slots = cojob_mod.GpuSlots(workload.gpus)
    placements = slots.place(workload.cojobs[0])
    first = slots.order[0]
    assert [placements[k].workers for k in ("c0j0", "c0j1")] == [(first,), (first,)]  # both on one server
    assert all(p.ps[0] != first for p in placements.values())
    assert sum(slots.free.values()) == 4 and not slots.fits(cojob_mod.CojobPlan(
        9, cojob_mod.ModelProfile("big", 1.0, 0.0), (1,) * 4, tuple(cojob_mod.JobPlan(9, j, 4) for j in range(8)),
        cojob_mod.Arrival(at_s=0)))
    for placement in placements.values():
        slots.release(placement)
    assert slots.free == dict.fromkeys(("h1", "h2", "h3"), 2) and set(slots.ps_load.values()) == {0}


def test_a_cojob_larger_than_the_cluster_is_refused_naming_the_field():
    with pytest.raises(SpecError, match="workload.placement.gpus_per_host.*needs 4 GPUs.*has 3"):
        _gpu_workload(gpus_per_host=1, workers=2)


def test_a_gpu_slots_spec_that_cannot_place_its_cojobs_is_refused_at_validation():
    raw = read_spec("experiments/specs/grouper-sim-paper-smoke.yaml")
    raw["workload"]["placement"] = {"kind": "gpu_slots", "gpus_per_host": 1}
    spec = simulated.validate(raw)
    hosts, jobs = len(simulated.resolve(spec).workload.gpus.hosts), spec["workload"]["jobs"]  # 1 GPU a host
    too_many_workers = {**raw, "workload": {**raw["workload"], "workers": hosts // jobs + 1}}
    with pytest.raises(SpecError, match=r"^workload.placement.gpus_per_host: a cojob needs \d+ GPUs at its stage 0; "
                                        rf"the cluster has {hosts}$"):
        simulated.validate(too_many_workers)
    too_many_ps = {**raw, "workload": {**raw["workload"], "ps": hosts}}
    with pytest.raises(SpecError, match=rf"^workload.ps: at most {hosts - 1} PSs"):
        simulated.validate(too_many_ps)


def test_gpu_slots_is_simulator_only_and_its_runs_record_their_placements(tmp_path):
    raw = read_spec("experiments/specs/grouper-sim-paper-smoke.yaml")
    raw["workload"]["placement"] = {"kind": "gpu_slots", "gpus_per_host": 1}
    raw["topology"].update(host_mbps=100, fabric_mbps=100)  # emulatable rates: the placement is what is refused
    with pytest.raises(SpecError, match="workload.placement.kind: gpu_slots runs only on the simulator"):
        cojob_spec.validate(raw)
    spec = simulated.validate(raw)
    run = simulated.simulate_spec(spec, str(tmp_path / "run"))
    placements = json.loads((run / "workload.json").read_text())["placements"]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    admitted = [e for e in events if e["kind"] == "cojob_admitted"]
    assert len(admitted) == len({e["cojob"] for e in admitted})  # once each
    assert {e["cojob"] for e in admitted} == {e["cojob"] for e in events if e["kind"] == "cojob_arrival"}
    assert any(e["waited_s"] > 0 for e in admitted)  # 1 GPU a host: the smoke cluster makes cojobs queue
    assert set(placements) == {e["job"] for e in events if e["kind"] in ("job_killed", "job_finished")}
    # At no time do the live jobs' workers hold more GPUs than a host has.
    live, held = set(), {}
    for event in events:
        if event["kind"] == "cojob_admitted":
            live |= {key for key in placements if key.startswith(f"c{event['cojob']}j")}
        elif event["kind"] in ("job_killed", "job_finished"):
            live.discard(event["job"])
        held = {}
        for key in live:
            for host in placements[key]["workers"]:
                held[host] = held.get(host, 0) + 1
        assert max(held.values(), default=0) <= 1


def test_baraat_places_a_later_stage_when_it_starts_not_on_a_period():
    """Baraat's FIFO gives a stage its place as it starts: cojob 0's second stage,
    starting after cojob 1's first, goes behind it at once (it held its first
    stage's place until the next period before 2026-11-28); when cojob 1 ends, the
    queues are packed again."""
    workload = _workload((0, 1.0, (1, 1), [(["h1"], ["h2"], 2)]), (1, 1.0, (4,), [(["h1"], ["h2"], 1)]))
    coordinator = CojobCoordinator(workload, SCALING, "baraat")
    coordinator.arrive(0, 0.0)
    assert _decisions(coordinator.ready(0, 0.0))[-1].order == ("c0/s0",)
    coordinator.arrive(1, 0.5)
    assert _decisions(coordinator.ready(1, 0.5))[-1].order == ("c0/s0", "c1/s0")
    assert not coordinator.periodic and coordinator.tick(1.0) == []
    [decision] = _decisions(coordinator.worker_done("c0j0", 0, 0, 1.0))  # cojob 0's stage 1 starts
    assert decision.order == ("c1/s0", "c0/s1")
    assert {key.job: pair for key, pair in decision.queues.items()} == {"c1j0": (1, 1), "c0j0": (2, 2)}
    # cojob 1 ends: cojob 0's stage moves up to queue 1
    [decision] = _decisions(coordinator.worker_done("c1j0", 0, 0, 2.0))
    assert decision.order == ("c0/s1",) and {key.job: pair for key, pair in decision.queues.items()} == {"c0j0": (1, 1)}


@pytest.mark.parametrize("scheduler", scheduling.ON_STAGE_START)
def test_a_stage_end_decides_once(scheduler):
    """A stage that ends and starts the next is one decision, not the same one twice
    (the next stage's start re-ranks after every change of the end); the last stage's
    end re-ranks once too."""
    workload = _workload((0, 1.0, (1, 1, 1), [(["h1"], ["h2"], 3)]), (1, 3.0, (5,), [(["h1"], ["h3"], 1)]))
    coordinator, _ = _started(workload, scheduler)
    for stage, now in ((0, 1.0), (1, 2.0), (2, 3.0)):
        coordinator.iteration_done("c0j0")
        decisions = _decisions(coordinator.worker_done("c0j0", 0, stage, now))
        assert len(decisions) == 1, (stage, decisions)


def test_a_run_that_cannot_end_within_its_time_limit_is_refused_before_it_starts():
    """The defaults (stages of 500..4000 iterations) at 100 Mbit/s: the surviving job
    alone computes 7,500 iterations of 0.256 s, past the default 1800 s."""
    raw = {"name": "x", "topology": {"kind": "leaf_spine", "host_mbps": 100}, "workload": {"kind": "cojob"},
           "scheduler": {"name": "fs"}}
    with pytest.raises(SpecError) as err:
        cojob_spec.validate(raw)
    assert err.value.field == "time_limit_s" and "7500 iterations of at least 0.256 s, 1920 s" in err.value.problem
    assert cojob_spec.validate({**raw, "time_limit_s": 2000})["time_limit_s"] == 2000
    assert cojob_spec.validate(raw, simulated=True)  # the simulator has no wall-clock limit to miss
