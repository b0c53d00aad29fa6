"""DGTP's placement search on a GNN job: the placement problem built from a resolved
spec and a profile, IFS then ETP on it (``controller.schedulers.placement``), and the
job's model (``experiments.gnn.simulated``) predicting the chosen placement.

``problem_from_profile(spec, profile)`` reads (every reading stated here):

- Machines: one per host of the spec's fabric, in fabric order. Capacity: the
  resolved ``workload.machines`` (``cpus`` -> cpu, ``memory_gb`` -> mem, ``gpus`` ->
  gpu). NIC rates in and out: the host's link rate (``host_mbps``, its
  ``host_mbps_overrides``), in payload bytes/s: Mbit/s x 1e6 / 8 over the model's wire
  factor (TCP/IP/Ethernet headers at the spec's MTU), so bytes / rate is a transfer's
  time on the wire as the model counts it. Speed: 1 for every host (the spec has no
  per-host compute factor yet).
- Tasks: ``placement.task_ids``' (stores, samplers, workers, PSs), store m fixed on the
  m-th host; demands: the resolved ``workload.task_resources`` of the task's kind.
  With ``sync: allreduce``, the ring's tasks (``ring_allreduce``, ring in worker
  order) with no compute of their own (the profiled worker compute excludes its sync).
- Execution time per profiled iteration n (replayed in order, n mod P):
  a sampler: the sum of its L + 1 rounds' compute (``sampler_rounds_s``), sampler 0
  adding its evaluation batch's rounds on evaluation iterations; a worker: its
  ``compute_s``, worker 0 adding its evaluation (``eval_s``) on evaluation iterations;
  a PS: its ``compute_s``; a store: the most, over the samplers, of the summed compute
  of that sampler's requests to it in that iteration (evaluation rounds included).
  Reading: a request's profiled compute includes its wait for the store's one sampling
  thread, so it is the latency a sampler saw; summing over all samplers would count
  the waits twice. The paper's store runs once per iteration; this is its run as the
  slowest-served sampler saw it.
- Transfers, bytes per profiled iteration from the profile's ``flows`` (a phase absent
  in an iteration: 0 bytes): store -> sampler, every store to every sampler, phases
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

``search(spec, profile, steps, seed)``: IFS then ETP (``etp``'s paper defaults, the
candidates judged by their Eq. 27 cost; the issue's simulated-makespan pick is not
wired in here), then ``simulated.predict`` for the chosen placement under the spec's
scheduler over the spec's iterations.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.schedulers.placement.etp import etp
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

DEFAULT_STEPS = 10_000  # the headline search size
RESOURCE_OF = {"cpus": "cpu", "memory_gb": "mem", "gpus": "gpu"}  # spec's name -> the problem's


def hosts_of(spec: Mapping) -> dict[str, float]:
    """host -> its link's Mbit/s, in fabric order (rates beyond what this box emulates allowed)."""
    with simulated_rates():
        fabric = fabric_of(dict(spec))
    rates = {link.a: link.mbps for link in fabric.host_links()}
    return {h.name: rates[h.name] for h in fabric.hosts}


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
    count, source = profile.iterations, profile.source
    wire = simulated.wire_factor(spec["emulation"]["mtu"])
    machines = [Machine(host, {RESOURCE_OF[r]: v for r, v in workload["machines"][host].items()},
                        mbps * 1e6 / 8 / wire, mbps * 1e6 / 8 / wire) for host, mbps in hosts.items()]

    def series(src: str, dst: str, phase: str, required: bool = False) -> list[float]:
        got = [profile.bytes.get((src, dst, phase, n)) for n in range(count)]
        if required and all(b is None for b in got):
            raise ProfileError(f"{source}: has no {src}->{dst} {phase} (a profile: true run's profile carries "
                               f"every transfer, same-machine ones too)")
        return [float(b or 0) for b in got]

    evaluations = set(profile.evaluations)
    eval_of = {n: k for k, n in enumerate(profile.evaluations)}
    host_list = list(hosts)
    demand = {kind: {RESOURCE_OF[r]: v for r, v in workload["task_resources"][kind].items()}
              for kind in placement_mod.TASK_KINDS}
    stores = [t for t in ids if t.startswith("store")]
    samplers = [t for t in ids if t.startswith("sampler")]
    worker_ids = [t for t in ids if t.startswith("worker")]
    ps_ids = [t for t in ids if t.startswith("ps")]
    tasks: list[Task] = []
    for m, store in enumerate(stores):
        served = []
        for n in range(count):
            per_sampler: dict[str, float] = {}
            for (sampler, iteration, _), asked in profile.requests.items():
                if iteration == n:
                    per_sampler[sampler] = per_sampler.get(sampler, 0.0) + sum(a[3] for a in asked if a[0] == store)
            served.append(max(per_sampler.values(), default=0.0))
        tasks.append(Task(store, "store", served, demand["store"], home=host_list[m]))
    for sampler in samplers:
        rounds = profile.rounds_s[sampler]
        tasks.append(Task(sampler, "sampler", [
            sum(rounds[n]) + (sum(profile.eval_rounds_s[sampler][n]) if sampler == "sampler0" and n in evaluations
                              else 0.0) for n in range(count)], demand["sampler"]))
    for worker in worker_ids:
        tasks.append(Task(worker, "worker", [
            profile.compute_s[worker][n] + (profile.eval_s[n] if worker == "worker0" and n in eval_of else 0.0)
            for n in range(count)], demand["worker"]))
    for p in ps_ids:
        tasks.append(Task(p, "ps", profile.compute_s[p][:count], demand["ps"]))
    hops = len(workload["fanouts"])
    rounds = [f"sample{h}" for h in range(hops)] + ["feature"]
    transfers: list[Transfer] = []
    for store in stores:
        for sampler in samplers:
            for phase in rounds + [f"eval-{r}" for r in rounds]:
                transfers.append(Transfer(store, sampler, phase, series(store, sampler, phase)))
    for k, sampler in enumerate(samplers):
        worker = f"worker{placement_mod.sampler_worker(k, per_worker)}"
        transfers.append(Transfer(sampler, worker, "minibatch", series(sampler, worker, "minibatch", True)))
        transfers.append(Transfer(sampler, worker, "evalbatch", series(sampler, worker, "evalbatch")))
    for worker in worker_ids:
        for p in ps_ids:
            transfers.append(Transfer(worker, p, "gradient", series(worker, p, "gradient", True)))
            transfers.append(Transfer(p, worker, "parameter", series(p, worker, "parameter", True), lag=1))
    if not ps_ids and len(worker_ids) > 1:
        steps = range(2 * (len(worker_ids) - 1))
        chunks = {(w, s): series(w, worker_ids[(k + 1) % len(worker_ids)], f"ring{s}", True)
                  for k, w in enumerate(worker_ids) for s in steps}
        chunk = [max(c[n] for c in chunks.values()) for n in range(count)]
        ring_tasks, ring_transfers = ring_allreduce(worker_ids, chunk)
        tasks += ring_tasks
        transfers += ring_transfers
    return Problem(machines, tasks, transfers)


@dataclass(frozen=True)
class Search:
    """The chosen task -> host map (stores included, ``task_ids`` order), ETP's cost of
    it, the search's seconds (IFS and ETP, the problem's build excluded), its steps."""

    placement: dict[str, str]
    cost: float
    search_s: float
    steps: int


def etp_placement(spec: Mapping, profile: Profile | str | Path, steps: int, seed: int) -> Search:
    """IFS then ``steps`` steps of ETP, seeded, on ``spec``'s job; ValueError (one line)
    for bad steps or seed or an infeasible job, ProfileError for the profile."""
    problem = problem_from_profile(spec, profile)
    started = time.perf_counter()
    result = etp(problem, steps, seed)
    took = time.perf_counter() - started
    workload = spec["workload"]
    ids = placement_mod.task_ids(len(problem.machines), workload["workers"], workload["samplers_per_worker"],
                                 workload["ps"])
    return Search({t: result.placement[t] for t in ids}, result.cost, took, steps)


def with_placement(spec: Mapping, tasks: Mapping[str, str], kind: str = "etp") -> dict:
    """A copy of a resolved spec whose workload runs ``tasks`` (task -> host)."""
    out = copy.deepcopy(dict(spec))
    out["workload"]["placement"] = {"kind": kind, "tasks": dict(tasks)}
    return out


def search(spec: Mapping, profile: Profile | str | Path, steps: int = DEFAULT_STEPS, seed: int = 0) -> dict:
    """``trainbed place``'s result: ``{"placement", "predicted_iteration_s", "search_s", "steps"}``."""
    profile = _profile(profile)
    found = etp_placement(spec, profile, steps, seed)
    predicted = simulated.predict(with_placement(spec, found.placement), profile)
    return {"placement": found.placement, "predicted_iteration_s": predicted, "search_s": found.search_s,
            "steps": found.steps}
