"""The cojob coordinator's decisions on hand-made workloads: the paper's Sincronia
(one coflow per job and iteration) against the stage-level one."""
import pytest

from experiments.cojob import scheduling
from experiments.cojob import simulated
from experiments.cojob import workload as cojob_mod
from experiments.cojob.coordinator import CojobCoordinator, Decision
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
    coordinator = CojobCoordinator(workload, SCALING, scheduler, 2.0)
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


def test_at_every_iteration_end_the_order_in_force_is_what_a_re_rank_would_give():
    """The paper's Sincronia re-ranks as iterations end; the coordinator re-ranks only
    where coflows come and go (stage 0 starts, stage ends), and on the smoke spec a
    fresh BSSI ranking at each of its iteration ends equals the order in force."""
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
