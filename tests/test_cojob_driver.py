"""The cojob driver's planning logic without a fabric: port plan, flows, stage loads, decisions."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from fakes import FakeClient

from experiments.cojob import spec as cojob_spec
from experiments.cojob import workload as cojob_mod
from experiments.cojob.coordinator import Decision, FlowKey
from experiments.cojob.driver import EPHEMERAL_START, CojobDriver
from experiments.platform.channel import DriverError
from experiments.platform.policysync import flow_match
from experiments.platform.spec import fabric_of
from experiments.runner import read_spec


@pytest.fixture
def driver(tmp_path):
    def make(scheduler: str) -> CojobDriver:
        raw = read_spec("experiments/specs/grouper-testbed.yaml")
        raw["scheduler"]["name"] = scheduler
        spec = cojob_spec.validate(raw)
        em = SimpleNamespace(fabric=fabric_of(spec), client=FakeClient())
        d = CojobDriver(em, cojob_spec.resolve(spec), tmp_path, str(tmp_path / f"{scheduler}.sock"),
                        progress=lambda line: None)
        return d
    made = []
    yield lambda scheduler: made.append(make(scheduler)) or made[-1]
    for d in made:
        d.server.close()
        d.events_out.close()
        d.decisions_out.close()


def flows_of(d: CojobDriver, job) -> list[dict]:
    """Every network flow of a job (5-tuple and hosts); same-host pairs cross no port."""
    placement = d.workload.placements[job.plan.key]
    return [flow_match(d.flow_tuple(FlowKey(job.plan.key, w, p, phase)))
            for w, w_host in enumerate(placement.workers) for p, p_host in enumerate(placement.ps)
            if w_host != p_host for phase in (cojob_mod.PUSH, cojob_mod.PULL)]


def test_port_plan_gives_every_flow_a_distinct_five_tuple_below_the_ephemeral_range(driver):
    d = driver("grouper")
    keys, ports_by_host = set(), {}
    for job in d.jobs.values():
        for flow in flows_of(d, job):
            key = (flow["src"], flow["dst"], flow["src_port"], flow["dst_port"])
            assert key not in keys and flow["src"] != flow["dst"]
            keys.add(key)
            assert max(flow["src_port"], flow["dst_port"]) < EPHEMERAL_START
            ports_by_host.setdefault(flow["src"], set()).add(flow["src_port"])
    assert len(keys) > 200
    # a push and its pull are the two directions of one connection
    for src, dst, sport, dport in keys:
        assert (dst, src, dport, sport) in keys


def _start(d, cojob_ids):
    """Cojobs arrive and start their stage 0 in the coordinator (no tasks to command)."""
    for cojob_id in cojob_ids:
        d.coordinator.arrive(cojob_id, 0.0)
        d.coordinator.ready(cojob_id, 0.0)


def test_online_assumes_every_live_job_runs_every_stage_offline_knows_the_kills(driver):
    online, offline = driver("grouper"), driver("grouper-offline")
    for d in (online, offline):
        _start(d, [0])
    every_on, running_on = online.coordinator.stages_now(0.0)
    every_off, _ = offline.coordinator.stages_now(0.0)
    assert [s.stage_id for s in running_on] == ["c0/s0"]
    load = {s.stage_id: sum(s.loads.values()) for s in every_on}
    load_off = {s.stage_id: sum(s.loads.values()) for s in every_off}
    assert load["c0/s0"] == load_off["c0/s0"]  # the running stage is the same either way
    assert load_off["c0/s1"] == pytest.approx(load["c0/s1"] / 2, rel=0.3)  # half the jobs survive stage 0
    assert load_off["c0/s3"] < load["c0/s3"] / 4


def test_a_decision_marks_each_flow_with_the_receivers_queue_and_queues_it_by_the_senders(driver):
    d = driver("grouper")
    _start(d, [0, 3])  # deepspeech2 (small) and vgg19 (large) share hosts
    d.carry_out(d.coordinator.tick(0.0))
    [batch] = d.em.client.batches
    order = [line for line in (d.run_dir / "decisions.jsonl").read_text().splitlines()]
    assert len(order) == 1 and '"order":["c0/s0","c3/s0"]' in order[0]  # the small cojob first (Fig. 3)
    queues_used = {(c["set"]["queue"], c["set"]["host_queue"]) for c in batch}
    assert queues_used <= {(q, h) for q in (1, 2) for h in (1, 2)} and (1, 1) in queues_used
    d.carry_out(d.coordinator.tick(0.0))  # nothing changed: nothing sent
    assert len(d.em.client.batches) == 1


def test_a_later_decision_changes_what_changed_and_removes_the_flows_it_no_longer_names(driver):
    d = driver("grouper")
    job = next(iter(d.jobs))
    push, pull = FlowKey(job, 0, 0, "push"), FlowKey(job, 0, 0, "pull")
    given = {key: (1, 1) for key in sorted([push, pull], key=d.flow_tuple, reverse=True)}
    d.apply(Decision(("c0/s0",), given))
    pull_id = d.policies.ids[d.flow_tuple(pull)]
    d.apply(Decision(("c0/s0",), {push: (2, 1)}))
    first, second = d.em.client.batches
    assert [change["set"] for change in first] == [  # in 5-tuple order, not the decision's
        {**flow_match(d.flow_tuple(key)), "queue": 1, "host_queue": 1} for key in reversed(given)]
    assert second == [{"set": {**flow_match(d.flow_tuple(push)), "queue": 2, "host_queue": 1}}, {"remove": pull_id}]
    record = [json.loads(line) for line in (d.run_dir / "decisions.jsonl").read_text().splitlines()][1]
    assert record["set"] == [[*d.flow_tuple(push), 2, 1]] and record["removed"] == [list(d.flow_tuple(pull))]


def test_a_task_exit_fails_the_run_unless_its_job_was_stopped(driver):
    d = driver("grouper")
    job = next(iter(d.jobs.values()))
    host = d.workload.placements[job.plan.key].workers[0]
    d.processes[job.tasks[0]], d.hosts[job.tasks[0]] = SimpleNamespace(poll=lambda: 1), host
    with pytest.raises(DriverError, match=f"^task {job.tasks[0]} on {host} exited with 1; see tasks.log$"):
        d.check_processes()
    job.stopped = True
    d.check_processes()


def test_fair_share_installs_nothing(driver):
    d = driver("fs")
    _start(d, [0, 3])
    assert d.coordinator.tick(0.0) == []
    assert d.em.client.batches == []


def test_poisson_arrivals_resolve_and_need_their_mean_gap():
    raw = read_spec("experiments/specs/grouper-testbed.yaml")

    def arrivals(**fields) -> list[float]:
        raw["workload"]["arrivals"] = {"kind": "poisson", "cojobs": 6, **fields}
        return [p.arrival.at_s for p in cojob_spec.build_workload(cojob_spec.validate(raw)).cojobs]

    base = arrivals(mean_interarrival_s=300)
    assert len(base) == 6 and base[0] == 0 and all(a < b for a, b in zip(base, base[1:]))
    # the same seeded draws: the spec's mean gap stretches them, its workload factor compresses them
    assert arrivals(mean_interarrival_s=600) == pytest.approx([2 * t for t in base])
    assert arrivals(mean_interarrival_s=300, workload_factor=2) == pytest.approx([t / 2 for t in base])
    raw["workload"]["arrivals"] = {"kind": "poisson", "cojobs": 6}
    with pytest.raises(cojob_spec.SpecError, match="^workload.arrivals.mean_interarrival_s: is required"):
        cojob_spec.validate(raw)


def test_a_trace_prefix_keeps_the_first_cojobs_by_arrival_and_their_hosts():
    raw = read_spec("experiments/specs/grouper-trace.yaml")
    scale = raw["workload"].pop("iterations_scale")
    raw["workload"].pop("cojobs")
    full = cojob_spec.build_workload(cojob_spec.validate(raw))  # the trace as it is
    raw["workload"].update(cojobs=3, iterations_scale=scale)
    prefix = cojob_spec.build_workload(cojob_spec.validate(raw))
    earliest = sorted(full.cojobs, key=lambda p: (p.arrival.at_s, p.cojob_id))[:3]
    assert [p.cojob_id for p in prefix.cojobs] == [p.cojob_id for p in earliest]
    assert all(p.stage_iterations == tuple(max(1, round(n * scale)) for n in e.stage_iterations)
               for p, e in zip(prefix.cojobs, earliest))
    assert dict(prefix.placements) == {k: v for k, v in full.placements.items()
                                       if any(k == job.key for p in earliest for job in p.jobs)}
    raw["workload"].pop("trace")
    with pytest.raises(cojob_spec.SpecError, match="^workload.cojobs: only with a trace"):
        cojob_spec.validate(raw)


def test_solo_calibration_keeps_the_cojobs_hosts_and_arrives_at_once():
    raw = read_spec("experiments/specs/grouper-testbed.yaml")
    full = cojob_spec.build_workload(cojob_spec.validate(raw))
    raw["workload"]["only_cojob"] = 3
    solo = cojob_spec.build_workload(cojob_spec.validate(raw))
    [plan] = solo.cojobs
    assert plan.cojob_id == 3 and plan.arrival.at_s == 0
    assert dict(solo.placements) == {k: v for k, v in full.placements.items() if k.startswith("c3j")}
    raw["workload"]["only_cojob"] = 9
    with pytest.raises(cojob_spec.SpecError, match="^workload.only_cojob: no cojob 9"):
        cojob_spec.build_workload(cojob_spec.validate(raw))


class _Process:
    def poll(self):
        return None


# Schedulers that decide on events only, none on a clock: on stage starts and ends, and
# the paper's Sincronia (one coflow per job and iteration) on stage 0 starts and stage ends.
@pytest.mark.parametrize("scheduler", ["grouper-immediate", "sincronia"])
@pytest.mark.parametrize("spec_path", ["experiments/specs/grouper-smoke.yaml", "experiments/specs/grouper-testbed.yaml"])
def test_both_backends_fed_the_same_events_make_the_same_decisions(tmp_path, spec_path, scheduler):
    """The simulator runs the workload; every input its coordinator got is replayed, as
    the host programs would report it, into the emulation's driver: the driver's
    decisions (and so the policies it installs) are the simulator's, in order."""
    from experiments.cojob import simulated
    raw = read_spec(spec_path)
    raw["scheduler"]["name"] = scheduler
    spec = cojob_spec.validate(raw)
    simulation = simulated.build_simulation(spec, simulated.VARIANTS["iterations+compute"])
    inputs, sim_decisions = [], []
    coordinator = simulation.coordinator
    for name in ("arrive", "ready", "iteration_done", "worker_done"):
        def recorded(*args, _name=name, _method=getattr(coordinator, name)):
            inputs.append((_name, args))
            actions = _method(*args)
            sim_decisions.extend(a for a in actions or () if isinstance(a, Decision))
            return actions
        setattr(coordinator, name, recorded)
    simulation.run()

    em = SimpleNamespace(fabric=fabric_of(spec), client=FakeClient(), popen=lambda *a, **k: _Process())
    d = CojobDriver(em, cojob_spec.resolve(spec), tmp_path, str(tmp_path / "d.sock"),
                    progress=lambda line: None)
    d.server.send = lambda task, message: None  # no task is connected
    applied = []
    apply = d.apply
    d.apply = lambda decision: applied.append(decision) or apply(decision)
    try:
        for name, args in inputs:
            if name == "arrive":
                d.carry_out(d.coordinator.arrive(args[0], 0.0))
            elif name == "ready":
                for job in d.coordinator.cojobs[args[0]].plan.jobs:
                    for task in d.jobs[job.key].tasks:
                        d.handle({"kind": "hello", "task": task})
            elif name == "iteration_done":
                d.handle({"kind": "iteration_end", "task": f"{args[0]}/w0", "job": args[0]})
            else:
                job, worker, stage, _now = args
                d.handle({"kind": "stage_done", "task": f"{job}/w{worker}", "job": job, "stage": stage})
        assert d.coordinator.finished
    finally:
        d.server.close()
        d.events_out.close()
        d.decisions_out.close()
    assert len(sim_decisions) > 4 and len(em.client.batches) > 0
    assert [(a.order, a.queues) for a in applied] == [(s.order, s.queues) for s in sim_decisions]


@pytest.mark.parametrize("placement, message", [
    ({"kind": "gpu_servers"}, "workload.placement.gpu_hosts: is required"),
    ({"kind": "gpu_servers", "gpu_hosts": ["tbh99"]}, r"workload.placement.gpu_hosts\[0\]: 'tbh99' is not a host"),
    ({"kind": "gpu_servers", "gpu_hosts": ["tbh1", "tbh1"]}, r"workload.placement.gpu_hosts\[1\]: duplicate host"),
    ({"kind": "gpu_servers", "gpu_hosts": [f"tbh{i}" for i in range(1, 10)]}, "workload.placement.gpu_hosts: leaves no"),
    ({"kind": "spread", "gpu_hosts": ["tbh1"]}, "workload.placement.gpu_hosts: only for gpu_servers"),
    ("packed", "workload.placement: must be spread or a mapping"),
])
def test_bad_placements_are_one_line_errors_naming_the_field(placement, message):
    raw = read_spec("experiments/specs/grouper-testbed.yaml")
    raw["workload"]["placement"] = placement
    with pytest.raises(cojob_spec.SpecError, match="^" + message):
        cojob_spec.validate(raw)


def test_a_new_cojobs_start_up_waits_for_the_batchs_other_actions(driver):
    """A stage end that brings another cojob's arrival: the continuing cojob's next
    stage and the decision go out before the new cojob's processes are started."""
    from experiments.cojob.coordinator import Note, RunStage, StartCojob
    d = driver("grouper")
    done = []
    d.note = lambda kind, **fields: done.append(kind)
    d.start_cojob = lambda cojob: done.append(f"start cojob {cojob}")
    d.server.send = lambda task, message: done.append(message["cmd"])
    d.apply = lambda decision: done.append("decision")
    job = d.workload.cojobs[0].jobs[0].key
    d.started_t[0] = 0.0  # its stage 0 ran
    d.carry_out([Note("stage_end", {"cojob": 0, "stage": 0}), Note("cojob_arrival", {"cojob": 1, "model": "x"}),
                 StartCojob(1), Note("stage_start", {"cojob": 0, "stage": 1}), RunStage(0, 1, (job,), 3),
                 Decision(("c0/s1",), {})])
    assert done[:3] == ["stage_end", "cojob_arrival", "stage_start"] and done[-2:] == ["decision", "start cojob 1"]
    assert set(done[3:-2]) == {"run_stage"}
