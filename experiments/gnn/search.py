"""DGTP's placement search on a GNN job: the placement problem built from a resolved
spec and a profile, IFS then ETP on it (``controller.schedulers.placement``), and the
job's model (``experiments.gnn.simulated``) predicting the chosen placement.

``problem_from_profile(spec, profile)`` reads (every reading stated here):

- Machines: one per host of the spec's fabric, in fabric order. Capacity: the
  resolved ``workload.machines`` (``cpus`` -> cpu, ``memory_gb`` -> mem, ``gpus`` ->
  gpu). NIC rates in and out: the host's link rate (``host_mbps``, its
  ``host_mbps_overrides``), in payload bytes/s: Mbit/s x 1e6 / 8 over the model's wire
  factor (TCP/IP/Ethernet headers at the spec's MTU), so bytes / rate is a transfer's
  time on the wire as the model counts it. Speed: 1 / the host's ``compute_factor``
  (a task's time on it is its time at speed 1 times the factor, as the emulated task
  sleeps; the profiled times are divided by the factor of the host each task was
  profiled on).
- Tasks: ``placement.task_ids``' (stores, samplers, workers, PSs), store m fixed on the
  m-th host; demands: the resolved ``workload.task_resources`` of the task's kind.
  With ``sync: allreduce``, the ring's tasks (``ring_allreduce``, ring in worker
  order) with no compute of their own (the profiled worker compute excludes its sync).
- Iterations: the problem's n = 0 .. L - 1 are the model's (``simulated.replay``):
  iteration n replays profiled iteration n mod P, and where the job's schedule
  evaluates (its ``eval_every``-th and its last iteration, ``is_eval``), the profile's
  evaluations in turn add theirs. (Costs that put the evaluations where the profile
  made them, every 10th, judged a job that evaluates every 5th with half its
  evaluations.) L = max(ETP's window, min(the job's iterations, P)): the window at
  least (past a shorter job's end, as the model would run on), at most the profile's
  length, so the problem grows with the profile, not with the job (a job's later
  iterations replay the same profile; ``nic_seconds`` averages over these L).
- Execution time per iteration: a sampler: the sum of its L + 1 rounds' compute
  (``sampler_rounds_s``), sampler 0 adding its evaluation batch's rounds on
  evaluation iterations; a worker: its ``compute_s``, worker 0 adding its evaluation
  (``eval_s``) on evaluation iterations; a PS: its ``compute_s``; a store: the most,
  over the samplers, of the summed compute of that sampler's requests to it in that
  iteration (evaluation rounds included).
  Reading: a request's profiled compute includes its wait for the store's one sampling
  thread, so it is the latency a sampler saw; summing over all samplers would count
  the waits twice. The paper's store runs once per iteration; this is its run as the
  slowest-served sampler saw it.
- Transfers, bytes per iteration from the profile's ``flows`` (a phase absent in an
  iteration: 0 bytes; the evaluation's phases from the evaluation replayed there):
  store -> sampler, every store to every sampler, phases
  ``sample0`` .. ``sample{L-1}``, ``feature`` and their ``eval-`` rounds (one pair, one
  flow, as ``Pair`` reads the rounds); sampler -> its worker, ``minibatch`` and
  ``evalbatch``; worker -> PS, ``gradient``; PS -> worker, ``parameter`` with lag 1
  (it feeds the worker's next iteration); a ring's ``ring{s}`` chunks: per iteration
  the largest chunk any worker sent at any step (the chunks of a ring are equal but
  for rounding). Left out: the samplers' requests to the stores (a few hundred bytes;
  with the replies they would be a lag-0 cycle, and the paper's store sends once per
  iteration without being asked) and the PS's initial parameters (once per run).
- The profile must be of this job (``Profile.check_job``) and trustworthy, and carry
  every sampler's mini-batch, every worker's gradient to every PS and every PS's
  parameters (a ``profile: true`` run's profile: same-machine transfers too); else a
  one-line ``ProfileError`` (``Profile.parse`` is the one check of trust).

``search(spec, profile, steps, seed)``: IFS then ETP (``etp``'s paper defaults), then
``simulated.predict`` for the chosen placement under the spec's scheduler over the
spec's iterations. ETP's candidates (the placements within capacity that pass the
(1 + gamma) filter) are judged by their simulated makespan (``makespan``): the
job's model runs the candidate for ETP's window of K = 20 iterations (the paper's
"we only simulate 20 iterations") under the spec's scheduler, replaying the job's
first K iterations as ``simulated.replay`` reads them for every candidate (common
random numbers: one candidate differs from another only by its placement). ``verify=False`` judges them by their
Eq. 27 cost instead (``pick: cost``, the ablation of the paper's final step;
``simulated_cost=True`` is Fig. 9's baseline, the search costing every proposal by
the model);
``verify_best=K`` judges only IFS's placement and the K - 1 least-cost candidates,
after the chain (``least_makespan``: a stated departure from Alg. 3 for jobs whose
hundreds of candidates take minutes each to simulate; ``trainbed place --verify-best``).

``ifs_placement(spec, profile)``: IFS alone on the same problem (machines in the
problem's order, unshuffled), the ``ifs`` placement kind.
"""
from __future__ import annotations

import copy
import csv
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.schedulers.placement.dag import execution_dag
from controller.schedulers.placement.etp import Candidate, EtpResult, Mapper, etp
from controller.schedulers.placement.ifs import ifs
from controller.schedulers.placement.problem import (
    Machine,
    Problem,
    Task,
    Transfer,
    ring_allreduce,
)
from experiments.gnn import placement as placement_mod
from experiments.gnn import simulated
from experiments.gnn.simulated import Profile, ProfileError
from experiments.platform.spec import fabric_of
from topologies.fabric import simulated_rates
from topologies.units import mbps_to_bytes_per_s

DEFAULT_STEPS = 10_000  # the headline search size
MAX_STEPS = 1_000_000  # a spec's or the command line's most (a search of that size takes minutes)
WINDOW = 20  # iterations ETP costs and simulates per candidate (the paper's)
EVALUATOR = "sampler0"  # the sampler that prepares worker 0's evaluation batch (hosts.gnn.task, the model)
RESOURCE_OF = {"cpus": "cpu", "memory_gb": "mem", "gpus": "gpu"}  # spec's name -> the problem's


def hosts_of(spec: Mapping) -> dict[str, float]:
    """host -> its link's Mbit/s, in fabric order (rates beyond what this box emulates allowed)."""
    with simulated_rates():
        fabric = fabric_of(dict(spec))
    return fabric.host_mbps()


def _profile(profile) -> Profile:
    return profile if isinstance(profile, Profile) else simulated.load_profile(profile)


def problem_from_profile(spec: Mapping, profile: Profile | str | Path) -> Problem:
    """The placement problem of ``spec``'s job (a resolved gnn spec; its placement is not
    read) with times and bytes from ``profile`` (a ``Profile`` or a profile.json path);
    see the module docstring for every reading. ProfileError (one line) for a profile
    that is untrustworthy, of another job or lacking a transfer."""
    profile = _profile(profile)
    workload = spec["workload"]
    hosts = hosts_of(spec)
    workers, per_worker, ps = workload["workers"], workload["samplers_per_worker"], workload["ps"]
    ids = placement_mod.task_ids(len(hosts), workers, per_worker, ps)
    view = {"workload": {**workload, "placement": {"tasks": {t: None for t in ids}}}}
    profile.check_job(view)
    source = profile.source
    replayed = simulated.replay(profile, workload["eval_every"], workload["iterations"],
                                max(WINDOW, min(workload["iterations"], profile.iterations)))
    wire = simulated.wire_factor(spec["emulation"]["mtu"])
    factor = workload.get("compute_factor", {})
    machines = [Machine(host, {RESOURCE_OF[r]: v for r, v in workload["machines"][host].items()},
                        mbps_to_bytes_per_s(mbps) / wire, mbps_to_bytes_per_s(mbps) / wire,
                        speed=1.0 / factor.get(host, 1.0))
                for host, mbps in hosts.items()]
    profiled = profile.compute_factors()  # the profiled times include their hosts' factors: taken out

    def series(src: str, dst: str, phase: str, required: bool = False) -> list[float]:
        evaluation = simulated.evaluation_phase(phase)
        got = [profile.bytes.get((src, dst, phase, e if evaluation else p)) for p, e in replayed]
        if required and all(b is None for b in got):
            raise ProfileError(f"{source}: has no {src}->{dst} {phase} (a profile: true run's profile carries "
                               f"every transfer, same-machine ones too)")
        return [float(b or 0) for b in got]

    host_list = list(hosts)
    demand = {kind: {RESOURCE_OF[r]: v for r, v in workload["task_resources"][kind].items()}
              for kind in placement_mod.TASK_KINDS}
    stores = [t for t in ids if t.startswith("store")]
    samplers = [t for t in ids if t.startswith("sampler")]
    worker_ids = [t for t in ids if t.startswith("worker")]
    ps_ids = [t for t in ids if t.startswith("ps")]
    # (store, sampler, profiled iteration, evaluation round?) -> the summed compute of the requests
    asked_s: dict[tuple[str, str, int, bool], float] = {}
    for (sampler, iteration, step), asked in profile.requests.items():
        for store, _, _, compute_s in asked:
            key = (store, sampler, iteration, simulated.evaluation_phase(step))
            asked_s[key] = asked_s.get(key, 0.0) + compute_s
    tasks: list[Task] = []
    for m, store in enumerate(stores):
        served = [max((asked_s.get((store, s, p, False), 0.0)
                       + (asked_s.get((store, s, e, True), 0.0) if s == EVALUATOR and e is not None else 0.0)
                       for s in samplers), default=0.0) for p, e in replayed]
        tasks.append(Task(store, "store", [t / profiled[store] for t in served], demand["store"], home=host_list[m]))
    for sampler in samplers:
        rounds = profile.rounds_s[sampler]
        tasks.append(Task(sampler, "sampler", [
            (sum(rounds[p]) + (sum(profile.eval_rounds_s[sampler][e]) if sampler == EVALUATOR and e is not None
                               else 0.0)) / profiled[sampler] for p, e in replayed], demand["sampler"]))
    for worker in worker_ids:
        tasks.append(Task(worker, "worker", [
            (profile.compute_s[worker][p] + (profile.eval_s[e] if worker == "worker0" and e is not None else 0.0))
            / profiled[worker] for p, e in replayed], demand["worker"]))
    for ps in ps_ids:
        tasks.append(Task(ps, "ps", [profile.compute_s[ps][p] / profiled[ps] for p, _ in replayed], demand["ps"]))
    hops = len(workload["fanouts"])
    rounds = [f"sample{h}" for h in range(hops)] + ["feature"]
    transfers: list[Transfer] = []
    # Only the evaluator samples and sends the evaluation batch (as the job and the model
    # run it); a scaled profile's copies of it on other samplers are no traffic.
    for store in stores:
        for sampler in samplers:
            for phase in rounds + ([f"eval-{r}" for r in rounds] if sampler == EVALUATOR else []):
                transfers.append(Transfer(store, sampler, phase, series(store, sampler, phase)))
    for k, sampler in enumerate(samplers):
        worker = f"worker{placement_mod.sampler_worker(k, per_worker)}"
        transfers.append(Transfer(sampler, worker, "minibatch", series(sampler, worker, "minibatch", True)))
        if sampler == EVALUATOR:
            transfers.append(Transfer(sampler, worker, "evalbatch", series(sampler, worker, "evalbatch")))
    for worker in worker_ids:
        for p in ps_ids:
            transfers.append(Transfer(worker, p, "gradient", series(worker, p, "gradient", True)))
            transfers.append(Transfer(p, worker, "parameter", series(p, worker, "parameter", True), lag=1))
    if not ps_ids and len(worker_ids) > 1:
        steps = range(2 * (len(worker_ids) - 1))
        chunks = {(w, s): series(w, worker_ids[(k + 1) % len(worker_ids)], f"ring{s}", True)
                  for k, w in enumerate(worker_ids) for s in steps}
        chunk = [max(c[n] for c in chunks.values()) for n in range(len(replayed))]
        ring_tasks, ring_transfers = ring_allreduce(worker_ids, chunk)
        tasks += ring_tasks
        transfers += ring_transfers
    return Problem(machines, tasks, transfers)


@dataclass(frozen=True)
class Search:
    """The chosen task -> host map (stores included, ``task_ids`` order), ETP's cost of
    it and its simulated makespan (None when not verified), the search's seconds (IFS,
    ETP and the simulations, the problem's build excluded), its steps, ETP's result
    (candidates and step trace), and the model's makespan by step for the candidates it
    judged (IFS's: step -1; every candidate step when every candidate was judged, the
    step that first found it under ``verify_best``; none when judged by cost), and the
    placement problem it searched."""

    placement: dict[str, str]
    cost: float
    makespan: float | None
    search_s: float
    steps: int
    result: EtpResult
    judged: Mapping[int, float]
    problem: Problem = field(compare=False)  # what was searched, not what was found


def makespan(spec: Mapping, profile: Profile, iterations: int = WINDOW):
    """placement -> the model's makespan of ``iterations`` iterations of ``spec``'s job
    under its scheduler with that placement (every task; ring tasks ignored)."""
    ids = _ids(spec)

    def simulate(placement: Mapping[str, str]) -> float:
        trial = with_placement(spec, {t: placement[t] for t in ids})
        return simulated.GnnSimulation(trial, profile, iterations).run().end_s
    return simulate


def _ids(spec: Mapping) -> list[str]:
    workload = spec["workload"]
    return placement_mod.task_ids(len(hosts_of(spec)), workload["workers"], workload["samplers_per_worker"],
                                  workload["ps"])


_found: dict[str, Search] = {}  # a search's key -> its result: a spec resolved here runs it once per process


def _key(spec: Mapping, profile: str | Path, *settings) -> str:
    """A search of a profile file, as ``_found`` keeps it: the file (and its stamp: a
    rewritten profile is another search), the settings and the job."""
    job = {k: spec[k] for k in ("topology", "scheduler", "emulation")}
    workload = {k: v for k, v in spec["workload"].items() if k != "placement"}
    path = Path(profile).resolve()
    stamp = (path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else None
    return json.dumps([str(path), stamp, *settings, job, workload], sort_keys=True, default=str)


def etp_placement(spec: Mapping, profile: Profile | str | Path, steps: int, seed: int, verify: bool = True,
                  simulated_cost: bool = False, verify_best: int = 0,
                  progress: Callable[[str], None] | None = None, window: int = WINDOW,
                  mapper: Mapper = map) -> Search:
    """IFS then ``steps`` steps of ETP, seeded, on ``spec``'s job, candidates judged by
    simulated makespan (``verify``) or by cost; ``simulated_cost``: every proposal's
    cost is its simulated makespan instead of its critical path (Fig. 9's baseline
    search). ``verify_best`` K >= 1: the chain runs by cost alone, then the model judges
    IFS's placement and the K - 1 least-cost candidates (``least_makespan``; for jobs
    whose candidates are too many to simulate each). ``progress`` gets a line per
    candidate judged; ``window``: the iterations the model judges a candidate over;
    ``mapper``: how the candidates are judged, after the chain (``map``: one after
    another here; ``judging.on_cluster``: in parallel, the same result).
    ValueError (one line) for bad steps, seed or verify_best or an
    infeasible job, ProfileError for the profile. Deterministic, so a search of a
    profile file is remembered (the run that resolved its spec writes its trace)."""
    if isinstance(verify_best, bool) or not isinstance(verify_best, int) or verify_best < 0:
        raise ValueError(f"verify_best must be an integer >= 0, got {verify_best!r}")
    if verify_best and not verify:
        raise ValueError("verify_best: needs the candidates judged by the model (verify)")
    key = None
    if not isinstance(profile, Profile):
        key = _key(spec, profile, steps, seed, verify, simulated_cost, verify_best, window)
        if key in _found:
            return _found[key]
    profile = _profile(profile)
    problem = problem_from_profile(spec, profile)
    started = time.perf_counter()
    simulate = makespan(spec, profile, window)
    judge = mapper if progress is None else announced(mapper, progress, started, window)
    # With the makespan as the cost, a candidate's cost (within capacity) is its
    # makespan: judging it again would simulate it twice.
    every = verify and not verify_best and not simulated_cost
    result = etp(problem, steps, seed, iterations=WINDOW, makespan=simulate if every else None,
                 path=simulate if simulated_cost else None, mapper=judge)
    chosen, span, cost = result.placement, (result.makespan if verify else None), result.cost
    judged = ({-1: result.candidates[0].makespan, **{s.step: s.makespan for s in result.trace if s.candidate}}
              if verify and not verify_best else {})
    if verify_best:
        best, span, judged = least_makespan(result.candidates, simulate, verify_best, judge)
        chosen, cost = best.placement, best.cost
    took = time.perf_counter() - started
    found = Search({t: chosen[t] for t in _ids(spec)}, cost, span, took, steps, result, judged, problem)
    if key is not None:
        _found[key] = found
    return found


def least_makespan(candidates: Sequence[Candidate], makespan, k: int,
                   mapper: Mapper = map) -> tuple[Candidate, float, dict[int, float]]:
    """Of ETP's ``candidates`` (in the order found, IFS's first), IFS's and the ``k`` - 1
    of least Eq. 27 cost (earliest found on equal cost), judged in that order (by
    ``mapper(makespan, placements)``, as ``etp``'s): the one
    of least ``makespan`` (the first judged on ties), that makespan, and every judged
    one's makespan by the step that found it. Alg. 3 simulates every candidate as it is
    found; at papers100M's size that is hundreds of model runs of minutes each, so this
    judges the few the cost ranks best, after the chain (a departure from Alg. 3,
    stated where used)."""
    if k < 1:
        raise ValueError(f"verify_best must be >= 1, got {k!r}")
    chosen = [candidates[0], *sorted(candidates[1:], key=lambda c: c.cost)[:k - 1]]
    judged = [(span, n, c) for n, (span, c) in enumerate(zip(mapper(makespan, [c.placement for c in chosen]),
                                                              chosen, strict=True))]
    span, _, best = min(judged, key=lambda x: (x[0], x[1]))
    return best, span, {c.step: s for s, _, c in judged}


def announced(mapper: Mapper, progress: Callable[[str], None], started: float, window: int) -> Mapper:
    """``mapper`` that reports each candidate as its makespan (of ``window`` iterations)
    comes back (minutes each on big jobs)."""
    def judge(makespan, placements):
        for k, span in enumerate(mapper(makespan, placements), 1):
            progress(f"ETP candidate {k} of {len(placements)}: makespan {span:.2f} s over {window} iterations "
                     f"(search at {time.perf_counter() - started:.0f} s)")
            yield span
    return judge


def ifs_placement(spec: Mapping, profile: Profile | str | Path) -> dict[str, str]:
    """IFS's placement of ``spec``'s job (every task, ``task_ids`` order)."""
    found = ifs(problem_from_profile(spec, profile))
    return {t: found[t] for t in _ids(spec)}


def write_trace(path: Path, found: Search) -> None:
    """ETP's step trace as CSV: step, task, from, to, cost, accepted, candidate,
    makespan (the model's, empty where the step's placement was not judged by it);
    IFS's placement is step -1."""
    with open(path, "w", newline="") as out:
        rows = csv.writer(out)
        rows.writerow(["step", "task", "from", "to", "cost", "accepted", "candidate", "makespan"])
        rows.writerow([-1, "", "", "", found.result.candidates[0].cost, True, True, found.judged.get(-1, "")])
        for s in found.result.trace:
            rows.writerow([s.step, s.task, s.src, "" if s.dst is None else s.dst, "" if s.cost is None else s.cost,
                           s.accepted, s.candidate, found.judged.get(s.step, "") if s.candidate else ""])


def searched(spec: Mapping, section: Mapping) -> Search:
    """The search an ``etp`` placement section names (``profile``, ``steps``, ``seed``,
    ``pick``, ``verify_best``): the one call for the spec that resolves it and the run
    that writes its trace, so that the two are one search."""
    return etp_placement(spec, section["profile"], section["steps"], section["seed"],
                         verify=section.get("pick", "makespan") == "makespan",
                         verify_best=section.get("verify_best", 0))


def remembered(spec: Mapping, section: Mapping) -> Search | None:
    """The search ``searched(spec, section)`` ran in this process, or None: a spec
    resolved elsewhere (a run's spec.yaml) is not searched again for its trace."""
    return _found.get(_key(spec, section["profile"], section["steps"], section["seed"],
                           section.get("pick", "makespan") == "makespan", False, section.get("verify_best", 0),
                           WINDOW))


def with_placement(spec: Mapping, tasks: Mapping[str, str], kind: str = "etp") -> dict:
    """A copy of a resolved spec whose workload runs ``tasks`` (task -> host)."""
    out = copy.deepcopy(dict(spec))
    out["workload"]["placement"] = {"kind": kind, "tasks": dict(tasks)}
    return out


def search(spec: Mapping, profile: Profile | str | Path, steps: int = DEFAULT_STEPS, seed: int = 0,
           verify_best: int = 0, progress: Callable[[str], None] | None = None, mapper: Mapper = map) -> dict:
    """``trainbed place``'s result: ``{"placement", "predicted_iteration_s", "search_s", "steps",
    "makespan_s", "candidates", "critical_path"}`` (``candidates``: every one ETP found,
    judged or not; ``critical_path``: ``critical_path``'s of the chosen placement);
    ``mapper`` as ``etp_placement``'s."""
    profile = _profile(profile)
    found = etp_placement(spec, profile, steps, seed, verify_best=verify_best, progress=progress, mapper=mapper)
    predicted = simulated.predict(with_placement(spec, found.placement), profile)
    return {"placement": found.placement, "predicted_iteration_s": predicted, "search_s": found.search_s,
            "steps": found.steps, "makespan_s": found.makespan, "candidates": len(found.result.candidates),
            "critical_path": critical_path(found.problem, found.placement)}


def critical_path(problem: Problem, placement: Mapping[str, str], window: int = WINDOW) -> dict:
    """Eq. 27's critical path of ``placement`` (the job's tasks; a ring's tasks go with
    their workers) over ETP's window, per iteration: its length (``s_per_iteration``)
    and what it is made of (``made_of``: seconds by task kind's compute or transfer
    between kinds, largest first), the cost ETP walked by."""
    dag = execution_dag(problem, problem.with_rings(placement), window)
    path = dag.critical_path()
    return {"s_per_iteration": path.length / window,
            "made_of": {kind: s / window for kind, s in path.made_of(dag, problem).items()}}
