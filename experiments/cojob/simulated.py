"""The simulator backend of the cojob kind: Grouper's coordinator over a flow-level network.

The same coordinator as on the emulated fabric (``coordinator.py``: stages, barrier,
kills, arrivals, the scheduler's decisions) is fed simulated events instead of the
host programs' reports; the network is ``experiments.sim.network.FluidNetwork`` and
nothing runs: no processes, no sockets, no clock. What the host programs do
(``hosts.cojob_task``) is modelled here, per job of W workers and S PSs: an
iteration is a push from every worker to every PS; a PS sends its pulls to every
worker once all W pushes of the iteration arrived (the barrier); a worker computes
once all S pulls arrived, then starts its next iteration; a worker done with its
stage's iterations reports it (``worker_done``). The coordinator's ``ready`` comes at
once after an arrival (the emulation waits for every task's hello).

Network (``experiments.sim.paths.Paths``): a flow crosses its sender's host link
(the sender's NIC queue), on a leaf-spine the uplink and downlink of one spine (ECMP
by a stable hash of the flow), and the receiver's host link; every switch hop serves
the flow in its switch queue (its DSCP, the receiver's local priority, Fig. 8); a
same-host transfer crosses nothing and takes no time. Where a flow's NIC queue (its sender's
rank) and its DSCP (its receiver's) put two flows in opposite orders on two ports under
strict priority, the network breaks the cycle by the DSCP (``experiments.sim.network``).
Strict priority across queues and max-min within a queue on every port; the emulation's 2% guarantee per class is
not modelled, so a starved flow gets nothing here. Under ``emulation.queue_weights``
queues 1..7 share every port by weight instead (``experiments.sim.weighted``). Fair
share (FS) leaves every flow in the lowest queue.

Variants separate the workload's structure from the scheduling (``VARIANTS``):
``iterations+compute`` is the testbed workload; ``iterations`` drops the compute
(time 0); ``bulk`` moves each stage's bytes as one transfer per worker-PS pair and
direction, all started with the stage and with no barrier (the fluid model's view);
``bulk+compute`` adds each worker's compute for the stage (iterations x compute
time) after its transfers. In bulk variants the scheduler's count of a job's
finished iterations is worker 0's delivered share of its bytes, in whole iterations.

``trainbed simulate SPEC`` writes a run directory (``simulate_spec``);
``python -m experiments.cojob.simulated SPEC --seeds 1 2 3`` prints the average SCT
per scheduler and variant, with the change against FS.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from experiments import store
from experiments.cojob import metrics as grouper_metrics
from experiments.cojob import spec as cojob_spec
from experiments.cojob import workload as cojob_mod
from experiments.cojob.coordinator import CojobCoordinator, Decision, FlowKey, Note, RunStage, StartCojob, StopJob
from experiments.errors import PluginError, SpecError
from experiments.kinds import read_spec
from experiments.platform.run import simulate_workload
from experiments.reports.markdown import markdown_table
from experiments.sim.network import FluidNetwork
from experiments.sim.paths import Paths
from experiments.stats import mean, percentile
from topologies.fabric import Fabric, simulated_rates
from topologies.queues import LOWEST_QUEUE, SCHEDULER_QUEUES

TABLE_SCHEDULERS = ("fs", "baraat", "sincronia", "sincronia-stage", "grouper")
# A delivered share of a job's bytes within this of a whole iteration counts as it.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Variant:
    name: str
    iterations: bool  # False: one bulk transfer per worker-PS pair and direction per stage
    compute: bool


VARIANTS = {v.name: v for v in (Variant("bulk", False, False), Variant("bulk+compute", False, True),
                                 Variant("iterations", True, False), Variant("iterations+compute", True, True))}


@dataclass
class _Job:
    key: str
    placement: cojob_mod.JobPlacement
    bytes: int  # one push (= one pull)
    compute_s: float  # per iteration
    stage: int = -1
    iterations: int = 0  # of the running stage
    left: list[int] = field(default_factory=list)  # per worker: iterations left in the stage
    pending: list[int] = field(default_factory=list)  # per worker: its flows of this iteration not yet delivered
    pushes: list[int] = field(default_factory=list)  # per PS: pushes of this iteration arrived
    done: int = 0  # iterations worker 0 finished in the job, across its stages (as a task counts them)
    w0_flows: set[int] = field(default_factory=set)  # bulk: worker 0's transfers in flight


@dataclass
class Result:
    """A simulated run: the coordinator's events (the driver's ``events.jsonl`` schema,
    plus worker 0's ``iteration_end``), its decisions, and every flow's duration."""
    events: list[dict]
    decisions: list[dict]
    flow_s: list[float]
    end_s: float


class CojobSimulation:
    def __init__(self, workload: cojob_mod.Workload, scaling: cojob_mod.Scaling, scheduler: str, period_s: float,
                 fabric: Fabric, variant: Variant = VARIANTS["iterations+compute"],
                 queue_weights: Sequence[float] | None = None):
        cojob_spec.scheduler_name(scheduler)  # a SpecError naming the field for an unknown one
        self.coordinator = CojobCoordinator(workload, scaling, scheduler,
                                            progress=None if variant.iterations else self.bulk_progress)
        self.period_s, self.variant = period_s, variant
        self.paths = Paths(fabric)
        self.net = FluidNetwork(self.paths.capacity, weights=None if queue_weights is None else dict(
            zip(SCHEDULER_QUEUES, queue_weights, strict=True)))
        self.now = 0.0
        self.queue: list[tuple[float, int, bool, Callable, tuple]] = []  # (t, sequence, tick?, action, args)
        self.sequence = 0
        self.waiting = 0  # queued events other than scheduler ticks
        self.flows: dict[int, tuple[_Job, str, int, int]] = {}  # id -> (job, phase, worker, PS)
        self.flow_started: dict[int, float] = {}
        self.flow_s: list[float] = []
        self.next_flow = 0
        self.policy: dict[FlowKey, tuple[int, int]] = {}
        self.events: list[dict] = []
        self.decisions: list[dict] = []
        self.scaling = scaling
        self.jobs: dict[str, _Job] = {}  # of every started cojob (placed by then, on a GPU cluster as admitted)

    # --- the clock -----------------------------------------------------------------
    def at(self, t: float, action: Callable, *args, tick: bool = False) -> None:
        heapq.heappush(self.queue, (t, self.sequence, tick, action, args))
        self.sequence += 1
        self.waiting += not tick

    def run(self) -> Result:
        for t, cojob in self.coordinator.timed_arrivals():
            self.at(t, self.arrive, cojob)
        if self.coordinator.periodic:
            self.at(self.period_s, self.tick, tick=True)
        while not self.coordinator.finished:
            if not len(self.net) and not self.waiting:
                raise RuntimeError(f"stalled at {self.now:.3f} s: no flow in flight and nothing due")
            t = min(self.net.next_end(), self.queue[0][0] if self.queue else math.inf)
            self.now = t
            # Every flow the network finished leaves the books before any is delivered:
            # a delivery can end a stage, whose decision requeues the flows still in flight.
            for flow, ended in [(flow, self.flows.pop(flow)) for flow in self.net.advance(t)]:
                self.flow_end(flow, ended)
            while self.queue and self.queue[0][0] <= t:
                _, _, tick, action, args = heapq.heappop(self.queue)
                self.waiting -= not tick
                action(*args)
        return Result(self.events, self.decisions, self.flow_s, self.now)

    def arrive(self, cojob: int) -> None:
        self.carry_out(self.coordinator.arrive(cojob, self.now))

    def tick(self) -> None:
        self.carry_out(self.coordinator.tick(self.now))
        self.at(self.now + self.period_s, self.tick, tick=True)

    # --- the coordinator's actions -----------------------------------------------------
    def carry_out(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, Note):
                self.events.append({"kind": action.kind, "t": self.now, **action.fields})
            elif isinstance(action, StartCojob):
                plan = self.coordinator.cojobs[action.cojob].plan
                for job in plan.jobs:
                    placement = self.coordinator.placements[job.key]
                    iteration = cojob_mod.scaled(plan.profile, self.scaling, len(placement.ps))
                    self.jobs[job.key] = _Job(job.key, placement, iteration.bytes_per_partition,
                                              iteration.compute_s if self.variant.compute else 0.0)
                # After this batch: the emulation's stage 0 waits for the tasks' hello, so
                # its decision sees whatever else this batch started.
                self.at(self.now, self.ready, action.cojob)
            elif isinstance(action, RunStage):
                for key in action.jobs:
                    self.start_stage(self.jobs[key], action.stage, action.iterations)
            elif isinstance(action, StopJob):
                pass  # a job stops at a stage end, with nothing of it in flight
            elif isinstance(action, Decision):
                self.decide(action)

    def ready(self, cojob: int) -> None:
        self.carry_out(self.coordinator.ready(cojob, self.now))

    def decide(self, decision: Decision) -> None:
        self.policy = decision.queues
        for flow, (job, phase, w, p) in self.flows.items():
            self.net.requeue(flow, self.hops(job, phase, w, p))
        self.decisions.append({"t": self.now, "order": list(decision.order), "flows": len(decision.queues)})
        self.events.append({"kind": "decision", "t": self.now, "order": list(decision.order)})

    # --- flows ---------------------------------------------------------------------
    def hops(self, job: _Job, phase: str, w: int, p: int) -> tuple[tuple[str, int], ...]:
        worker, ps = job.placement.workers[w], job.placement.ps[p]
        src, dst = (worker, ps) if phase == cojob_mod.PUSH else (ps, worker)
        key = FlowKey(job.key, w, p, phase)
        queue, host_queue = self.policy.get(key, (LOWEST_QUEUE, LOWEST_QUEUE))
        ports = self.paths.ports(src, dst, key)
        return ((ports[0], host_queue),) + tuple((port, queue) for port in ports[1:])

    def start_flow(self, job: _Job, phase: str, w: int, p: int, nbytes: int) -> int | None:
        """Start a transfer; a same-host one is delivered at once (None)."""
        if job.placement.workers[w] == job.placement.ps[p]:
            self.delivered(job, phase, w, p)
            return None
        flow, self.next_flow = self.next_flow, self.next_flow + 1
        self.flows[flow] = (job, phase, w, p)
        self.flow_started[flow] = self.now
        self.net.add(flow, self.hops(job, phase, w, p), nbytes)
        return flow

    def flow_end(self, flow: int, ended: tuple) -> None:
        job, phase, w, p = ended
        self.flow_s.append(self.now - self.flow_started.pop(flow))
        job.w0_flows.discard(flow)
        self.delivered(job, phase, w, p)

    def delivered(self, job: _Job, phase: str, w: int, p: int) -> None:
        if not self.variant.iterations:
            self.worker_flow_done(job, w)
        elif phase == cojob_mod.PUSH:
            job.pushes[p] += 1
            if job.pushes[p] == len(job.placement.workers):  # the PS's barrier
                job.pushes[p] = 0
                for other in range(len(job.placement.workers)):
                    self.start_flow(job, cojob_mod.PULL, other, p, job.bytes)
        else:
            self.worker_flow_done(job, w)

    def worker_flow_done(self, job: _Job, w: int) -> None:
        job.pending[w] -= 1
        if job.pending[w] == 0:
            iterations = 1 if self.variant.iterations else job.left[w]
            if job.compute_s:
                self.at(self.now + job.compute_s * iterations, self.computed, job, w, iterations)
            else:
                self.computed(job, w, iterations)

    def computed(self, job: _Job, w: int, iterations: int) -> None:
        job.left[w] -= iterations
        if w == 0:
            for _ in range(iterations):
                self.events.append({"kind": "iteration_end", "t": self.now, "job": job.key, "iteration": job.done,
                                    "stage": job.stage})
                job.done += 1
                self.coordinator.iteration_done(job.key)
        if job.left[w]:
            self.start_iteration(job, w)
        else:
            self.carry_out(self.coordinator.worker_done(job.key, w, job.stage, self.now))

    def start_iteration(self, job: _Job, w: int) -> None:
        ps = len(job.placement.ps)
        job.pending[w] = ps
        for p in range(ps):
            self.start_flow(job, cojob_mod.PUSH, w, p, job.bytes)

    def start_stage(self, job: _Job, stage: int, iterations: int) -> None:
        workers, ps = len(job.placement.workers), len(job.placement.ps)
        job.stage, job.iterations, job.left = stage, iterations, [iterations] * workers
        job.pushes = [0] * ps
        if self.variant.iterations:
            job.pending = [0] * workers
            for w in range(workers):
                self.start_iteration(job, w)
            return
        # bulk: each worker's stage as its transfers to and from every PS, all at once
        job.pending = [2 * ps] * workers
        job.w0_flows = set()
        for w in range(workers):
            for p in range(ps):
                for phase in (cojob_mod.PUSH, cojob_mod.PULL):
                    flow = self.start_flow(job, phase, w, p, job.bytes * iterations)
                    if w == 0 and flow is not None:
                        job.w0_flows.add(flow)

    def bulk_progress(self, key: str) -> int:
        """In bulk, worker 0's finished iterations are its delivered share of the stage's
        bytes, in whole iterations (what the scheduler reads at a decision)."""
        job = self.jobs[key]
        if job.stage != self.coordinator.cojobs[self.coordinator.cojob_of[key]].stage:
            return 0  # decided as its stage starts, before its transfers do
        total = job.bytes * job.iterations * 2 * len(job.placement.ps)
        in_flight = sum(self.net.left(f) for f in job.w0_flows)
        return math.floor(job.iterations * (total - in_flight) / total * (1 + _TOLERANCE))


def resolve(spec: dict) -> cojob_spec.CojobRun:
    """A validated spec resolved for the simulator (its fabric may be faster than this box emulates)."""
    with simulated_rates():
        return cojob_spec.resolve(spec)


def build_simulation(spec_or_run: dict | cojob_spec.CojobRun, variant: Variant) -> CojobSimulation:
    """A validated spec's (or a resolved run's) simulation, ready to ``run()``."""
    run = spec_or_run if isinstance(spec_or_run, cojob_spec.CojobRun) else resolve(spec_or_run)
    return CojobSimulation(run.workload, run.scaling, run.spec["scheduler"]["name"],
                           run.spec["scheduler"]["period_s"], run.fabric, variant,
                           run.spec["emulation"].get("queue_weights"))


def model_avg_sct_s(run: cojob_spec.CojobRun) -> float:
    """The average SCT the simulator gives a run's workload and scheduler on its fabric
    (the emulated run's ``model_avg_sct_s``: the same decisions, no TCP, no CPU)."""
    result = build_simulation(run, VARIANTS["iterations+compute"]).run()
    return grouper_metrics.summarise(result.events, run.workload.to_dict())["avg_sct_s"]


def validate(raw) -> dict:
    """A cojob spec validated for the simulator: link rates beyond what this box emulates are allowed."""
    with simulated_rates():
        return cojob_spec.validate(raw, simulated=True)


def simulate_spec(spec: dict, out: str | None = None) -> Path:
    """``trainbed simulate``: a run directory like an emulated run's, ``"backend": "simulated"``."""
    return simulate_workload(spec, out, _simulate_into)


def _simulate_into(spec: dict, run: Path) -> dict:
    simulation = build_simulation(spec, VARIANTS["iterations+compute"])
    workload = simulation.coordinator.workload
    store.write_json(run / grouper_metrics.WORKLOAD_FILE, workload.to_dict())
    result = simulation.run()
    if workload.gpus:  # the placements are the run's own, made as cojobs were admitted
        store.write_json(run / grouper_metrics.WORKLOAD_FILE, {**workload.to_dict(), "placements": {
            key: placement.to_dict() for key, placement in simulation.coordinator.placements.items()}})
    store.write_jsonl(run / store.EVENTS, result.events)
    store.write_jsonl(run / store.DECISIONS, result.decisions)
    net = simulation.net
    unsettled = ({"weighted_unsettled_fillings": net.unsettled_fillings, "weighted_unsettled_max": net.unsettled_max}
                 if spec["emulation"].get("queue_weights") else {})
    return {**grouper_metrics.summarise(result.events, workload.to_dict()), "scheduler": spec["scheduler"]["name"],
            "seed": spec["seed"], "decisions": len(result.decisions), "simulated_s": result.end_s,
            "flows": len(result.flow_s), **flow_quantiles(result.flow_s), **unsettled, "trustworthy": True}


def flow_quantiles(durations) -> dict:
    """Median, 90th percentile and maximum flow duration (the emulation's flow_start to
    flow_end compares with these). Each is some flow's duration, not interpolated: the
    upper median, and the 90th percentile at its rank rounded down."""
    return {"flow_p50_s": percentile(durations, 50, method="higher"),
            "flow_p90_s": percentile(durations, 90, method="lower"), "flow_max_s": max(durations, default=None)}


# --- the model's table: schedulers x variants x seeds of one spec, without run directories ---
def table_rows(path: str | Path, seeds: Sequence[int], schedulers: Sequence[str] = TABLE_SCHEDULERS,
               variants: Sequence[str] = tuple(VARIANTS)) -> list[dict]:
    """Every (seed, variant, scheduler) of the spec at ``path``: averages and decisions."""
    spec = validate(read_spec(path))
    rows = []
    for seed in seeds:
        seeded = {**spec, "seed": seed}
        for variant in variants:
            for scheduler in schedulers:
                simulation = build_simulation({**seeded, "scheduler": {**spec["scheduler"], "name": scheduler}},
                                         VARIANTS[variant])
                result = simulation.run()
                metrics = grouper_metrics.summarise(result.events, simulation.coordinator.workload.to_dict())
                rows.append({"seed": seed, "variant": variant, "scheduler": scheduler,
                             "avg_sct_s": metrics["avg_sct_s"], "avg_cojct_s": metrics["avg_cojct_s"],
                             "avg_jct_s": metrics["avg_jct_s"], "decisions": len(result.decisions),
                             **flow_quantiles(result.flow_s), "stage_sct": metrics["sct_s"]})
    return rows


def summary(rows: Sequence[Mapping]) -> list[dict]:
    """Per (variant, scheduler): means over seeds of the averages, and the SCT change
    against FS of the same variant (when FS was run)."""
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for row in rows:
        groups.setdefault((row["variant"], row["scheduler"]), []).append(row)
    out = []
    for (variant, scheduler), group in groups.items():
        fs = groups.get((variant, "fs"))
        sct = mean(r["avg_sct_s"] for r in group)
        out.append({"variant": variant, "scheduler": scheduler, "seeds": [r["seed"] for r in group],
                    "avg_sct_s": sct, "avg_cojct_s": mean(r["avg_cojct_s"] for r in group),
                    "avg_jct_s": mean(r["avg_jct_s"] for r in group),
                    "sct_vs_fs": None if fs is None else sct / mean(r["avg_sct_s"] for r in fs) - 1})
    return out


def table(summaries: Sequence[Mapping]) -> str:
    return markdown_table(
        ["variant", "scheduler", "avg SCT", "vs FS", "avg CoJCT", "avg JCT"],
        [[s["variant"], s["scheduler"], f"{s['avg_sct_s']:.1f} s",
          "" if s["sct_vs_fs"] is None else f"{100 * s['sct_vs_fs']:+.1f}%", f"{s['avg_cojct_s']:.1f} s",
          f"{s['avg_jct_s']:.1f} s"] for s in summaries])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.cojob.simulated",
                                     description="The simulator's average SCT per scheduler and variant, "
                                                 "with the change against FS.")
    parser.add_argument("spec", help="a cojob spec (workload: {kind: cojob})")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the spec's seed")
    parser.add_argument("--schedulers", nargs="+", default=list(TABLE_SCHEDULERS),
                        help=f"{', '.join(cojob_spec.SCHEDULERS)} or your own module:function "
                             f"(default: {' '.join(TABLE_SCHEDULERS)})")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", help="write every run and the summary here as JSON")
    args = parser.parse_args(argv)
    try:
        spec = validate(read_spec(args.spec))  # a scheduler's module beside the spec is found from here on
        for name in args.schedulers:
            try:
                cojob_spec.scheduler_name(name)
            except SpecError as err:
                raise SpecError("--schedulers", err.problem) from None
        seeds = args.seeds or [spec["seed"]]
        rows = table_rows(args.spec, seeds, args.schedulers, args.variants)
    except (SpecError, PluginError) as err:
        sys.exit(f"simulated: {err}")
    summaries = summary(rows)
    print(f"{args.spec}, seeds {' '.join(map(str, seeds))}: means over seeds")
    print(table(summaries))
    if args.out:
        Path(args.out).write_text(json.dumps({"spec": args.spec, "seeds": seeds, "summary": summaries,
                                              "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
