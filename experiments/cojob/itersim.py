"""A deterministic flow-level, iteration-level simulator of the cojob workload.

It replays exactly what an emulated run of a cojob spec replays (the cojobs, jobs,
placements, arrivals, kills, model sizes, compute times and iteration counts of
``experiments.cojob.spec.build_workload``, scaled as the driver scales them) and
decides exactly as the driver does (``experiments.cojob.scheduling``: the same
remaining stages, orders, local priorities and queues 1..7, per flow the receiver's
queue in the switch and the sender's on its NIC, Fig. 8), but the network is a model
and nothing runs: no processes, no sockets, no clock.

Network: each host has one egress port (``<host>/out``) and one ingress port
(``<host>/in``) at the host link rate; the fabric between them is non-blocking, as in
``controller.schedulers.fluid``. A flow crosses its sender's egress and its
receiver's ingress; a same-host flow crosses neither and takes no time. On each port
flows are served by strict priority of their queue there (the sender's NIC queue on
egress, the switch queue, i.e. the receiver's, on ingress) and flows of one queue
share max-min fairly, by progressive filling over both ports of every flow
(``allocate``). Fair share (FS) is every flow in the lowest queue, as the driver
leaves it. The emulation's queues also guarantee each class 2% of the link; the
model does not, so a starved flow here gets nothing.

Workload, per job of W workers and S PSs (``hosts.cojob_task``): an iteration is a
push from every worker to every PS; a PS sends its pulls to every worker once all W
pushes of the iteration arrived (the barrier); a worker computes once all S pulls
arrived, then starts its next iteration. A stage ends when every worker of every
surviving job finished its iterations; then the worse half is killed, arrivals
waiting on that stage start, and the next stage starts at once. Schedulers run as in
the driver: periodic ones every ``period_s`` and when a stage 0 starts,
``grouper-immediate`` on every stage start and end, ``fs`` never; a decision
applies at once.

Variants separate the workload's structure from the scheduling (``VARIANTS``):
``iterations+compute`` is the testbed workload; ``iterations`` drops the compute
(time 0); ``bulk`` moves each stage's bytes as one transfer per worker-PS pair and
direction, all started with the stage and with no barrier (the fluid model's view);
``bulk+compute`` adds each worker's compute for the stage (iterations x compute
time) after its transfers. In bulk variants the scheduler's count of a job's
finished iterations is worker 0's delivered share of its bytes, in whole iterations.

CLI: ``python -m experiments.cojob.itersim SPEC --seeds 1 2 3 [--out FILE]`` prints
average SCT per scheduler and variant, with the change against FS.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from experiments.cojob import scheduling
from experiments.cojob import spec as cojob_spec
from experiments.errors import SpecError
from experiments.validation import read_yaml
from experiments.workloads import cojob as cojob_mod
from topologies.queues import LOWEST_QUEUE

# A port counts as full, and a flow as delivered, within this share of the link
# rate or of the flow's bytes: float residue must not leave a 1e-17 s event behind.
_TOLERANCE = 1e-9
SCHEDULERS = ("fs", "baraat", "sincronia", "grouper")

Hops = tuple[tuple[str, int], ...]  # (port, queue) of each port a flow crosses


@dataclass(frozen=True)
class Variant:
    name: str
    iterations: bool  # False: one bulk transfer per worker-PS pair and direction per stage
    compute: bool


VARIANTS = {v.name: v for v in (Variant("bulk", False, False), Variant("bulk+compute", False, True),
                                 Variant("iterations", True, False), Variant("iterations+compute", True, True))}


def allocate(hops: Sequence[Hops], capacity: float) -> list[float]:
    """Each flow's rate: strict priority by queue on every port (lower queue first),
    max-min fair within a queue, by progressive filling. A flow rises only while, on
    each of its ports, no flow of a higher-priority queue there is still rising; all
    rising flows rise together until a port is full, which freezes every flow on it.
    With one order behind every queue (as a decision's local ranks are) no two flows
    block each other, so each round freezes at least one flow."""
    rate = [0.0] * len(hops)
    queue_at = [dict(h) for h in hops]
    users: dict[str, list[int]] = {}
    for i, h in enumerate(hops):
        for port, _ in h:
            users.setdefault(port, []).append(i)
    residual = dict.fromkeys(users, capacity)
    rising = set(range(len(hops)))
    while rising:
        best = {port: min(queue_at[i][port] for i in flows if i in rising)
                for port, flows in users.items() if any(i in rising for i in flows)}
        eligible = [i for i in sorted(rising) if all(queue_at[i][p] == best[p] for p in queue_at[i])]
        if not eligible:
            raise RuntimeError("flows block each other: their queues follow no single order")
        count = Counter(p for i in eligible for p in queue_at[i])
        step = min(residual[p] / n for p, n in count.items())
        for i in eligible:
            rate[i] += step
        for p, n in count.items():
            residual[p] -= step * n
            if residual[p] <= _TOLERANCE * capacity:
                residual[p] = 0.0
                rising.difference_update(users[p])
    return rate


class Network:
    """Flows in progress over host ports of ``capacity`` bytes/s; rates by ``allocate``,
    recomputed only after a flow or a queue changed."""

    def __init__(self, capacity: float):
        self.capacity = capacity
        self.left: dict[int, float] = {}
        self.size: dict[int, float] = {}
        self.hops: dict[int, Hops] = {}
        self.rate: dict[int, float] = {}
        self.stale = False

    def add(self, flow: int, hops: Hops, nbytes: float) -> None:
        self.left[flow] = self.size[flow] = float(nbytes)
        self.hops[flow] = hops
        self.stale = True

    def requeue(self, flow: int, hops: Hops) -> None:
        if self.hops[flow] != hops:
            self.hops[flow] = hops
            self.stale = True

    def rates(self) -> dict[int, float]:
        if self.stale:
            flows = list(self.hops)
            self.rate = dict(zip(flows, allocate([self.hops[f] for f in flows], self.capacity)))
            self.stale = False
        return self.rate

    def time_to_next_end(self) -> float:
        return min((self.left[f] / r for f, r in self.rates().items() if r > 0), default=math.inf)

    def advance(self, dt: float) -> list[int]:
        """Move every flow on by ``dt`` seconds; the flows delivered, in the order added."""
        ended = []
        for f, r in self.rates().items():
            self.left[f] -= r * dt
            if self.left[f] <= _TOLERANCE * self.size[f]:
                ended.append(f)
        for f in ended:
            del self.left[f], self.size[f], self.hops[f], self.rate[f]
        self.stale = self.stale or bool(ended)  # what an ended flow held goes to the others
        return ended


@dataclass
class _Job:
    plan: cojob_mod.JobPlan
    placement: cojob_mod.JobPlacement
    bytes: int  # one push (= one pull)
    compute_s: float  # per iteration
    left: list[int] = field(default_factory=list)  # per worker: iterations left in the stage
    pending: list[int] = field(default_factory=list)  # per worker: its flows of this iteration not yet delivered
    pushes: list[int] = field(default_factory=list)  # per PS: pushes of this iteration arrived
    done: int = 0  # iterations worker 0 finished in the stage (what the driver counts)
    w0_flows: set[int] = field(default_factory=set)  # bulk: worker 0's transfers in flight

    @property
    def key(self) -> str:
        return self.plan.key


@dataclass
class _Cojob:
    plan: cojob_mod.CojobPlan
    jobs: list[_Job]
    arrived_t: float | None = None
    stage: int | None = None
    stage_started_t: float = 0.0
    alive: list[_Job] = field(default_factory=list)
    workers_done: int = 0
    ended: bool = False


@dataclass
class Result:
    scheduler: str
    variant: str
    sct_s: dict[tuple[int, int], float]  # (cojob, stage) -> SCT
    cojct_s: dict[int, float]
    jct_s: dict[str, float]
    models: dict[int, str]
    decisions: int
    flow_s: list[float] = field(default_factory=list)  # every network flow's duration, in the order they ended

    @property
    def avg_sct_s(self) -> float:
        return _mean(self.sct_s.values())

    def to_dict(self) -> dict:
        return {"scheduler": self.scheduler, "variant": self.variant, "avg_sct_s": self.avg_sct_s,
                "avg_cojct_s": _mean(self.cojct_s.values()), "avg_jct_s": _mean(self.jct_s.values()),
                "decisions": self.decisions, **_quantiles(self.flow_s),
                "stage_sct": [{"cojob": c, "model": self.models[c], "stage": k, "sct_s": s}
                              for (c, k), s in sorted(self.sct_s.items())]}


def _quantiles(durations: Sequence[float]) -> dict:
    """Median, 90th percentile and maximum flow duration (the emulation's flow_start to
    flow_end compares with these)."""
    ordered = sorted(durations)
    if not ordered:
        return {"flow_p50_s": None, "flow_p90_s": None, "flow_max_s": None}
    return {"flow_p50_s": ordered[len(ordered) // 2], "flow_p90_s": ordered[int(0.9 * (len(ordered) - 1))],
            "flow_max_s": ordered[-1]}


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


class _Simulation:
    def __init__(self, workload: cojob_mod.Workload, scaling: cojob_mod.Scaling, scheduler: str, period_s: float,
                 variant: Variant):
        self.workload, self.scaling, self.scheduler, self.period_s = workload, scaling, scheduler, period_s
        self.variant = variant
        self.net = Network(scaling.link_mbps * 1e6 / 8)
        self.now = 0.0
        self.events: list[tuple[float, int, bool, Callable, tuple]] = []  # (t, sequence, tick?, action, args)
        self.sequence = 0
        self.waiting = 0  # heap events other than scheduler ticks
        self.flows: dict[int, tuple[_Job, str, int, int]] = {}  # id -> (job, phase, worker, PS)
        self.flow_started: dict[int, float] = {}
        self.flow_s: list[float] = []
        self.next_flow = 0
        self.policy: dict[tuple[str, int, int, str], tuple[int, int]] = {}  # (job, w, p, phase) -> queues
        self.decisions = 0
        self.cojobs = []
        for plan in workload.cojobs:
            jobs = []
            for job in plan.jobs:
                placement = workload.placements[job.key]
                iteration = cojob_mod.scaled(plan.profile, scaling, len(placement.ps))
                jobs.append(_Job(job, placement, iteration.bytes_per_partition,
                                 iteration.compute_s if variant.compute else 0.0))
            self.cojobs.append(_Cojob(plan, jobs))
        self.by_id = {c.plan.cojob_id: c for c in self.cojobs}
        self.sct: dict[tuple[int, int], float] = {}
        self.cojct: dict[int, float] = {}
        self.jct: dict[str, float] = {}

    # --- events ------------------------------------------------------------------
    def at(self, t: float, action: Callable, *args, tick: bool = False) -> None:
        heapq.heappush(self.events, (t, self.sequence, tick, action, args))
        self.sequence += 1
        self.waiting += not tick

    def run(self) -> Result:
        for c in self.cojobs:
            if c.plan.arrival.at_s is not None:
                self.at(self.scaling.arrival_s(c.plan.arrival.at_s), self.start_cojob, c)
        if self.scheduler in scheduling.PERIODIC:
            self.at(self.period_s, self.tick, tick=True)
        while not all(c.ended for c in self.cojobs):
            if not self.net.left and not self.waiting:
                raise RuntimeError(f"stalled at {self.now:.3f} s: no flow in flight and nothing due")
            t = min(self.now + self.net.time_to_next_end(), self.events[0][0] if self.events else math.inf)
            ended = self.net.advance(t - self.now)
            self.now = t
            for flow in ended:
                self.flow_end(flow)
            while self.events and self.events[0][0] <= t:
                _, _, tick, action, args = heapq.heappop(self.events)
                self.waiting -= not tick
                action(*args)
        return Result(self.scheduler, self.variant.name, self.sct, self.cojct, self.jct,
                      {c.plan.cojob_id: c.plan.model for c in self.cojobs}, self.decisions, self.flow_s)

    def tick(self) -> None:
        self.reschedule()
        self.at(self.now + self.period_s, self.tick, tick=True)

    # --- flows ---------------------------------------------------------------------
    def hops(self, job: _Job, phase: str, w: int, p: int) -> Hops:
        worker, ps = job.placement.workers[w], job.placement.ps[p]
        src, dst = (worker, ps) if phase == cojob_mod.PUSH else (ps, worker)
        queue, host_queue = self.policy.get((job.key, w, p, phase), (LOWEST_QUEUE, LOWEST_QUEUE))
        return (f"{src}/out", host_queue), (f"{dst}/in", queue)

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

    def flow_end(self, flow: int) -> None:
        job, phase, w, p = self.flows.pop(flow)
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
            job.done += iterations
        if job.left[w]:
            self.start_iteration(job, w)
        else:
            self.worker_done(job)

    def start_iteration(self, job: _Job, w: int) -> None:
        ps = len(job.placement.ps)
        job.pending[w] = ps
        for p in range(ps):
            self.start_flow(job, cojob_mod.PUSH, w, p, job.bytes)

    def start_bulk(self, job: _Job) -> None:
        """Each worker's stage as its transfers to and from every PS, all at once."""
        workers, ps = len(job.placement.workers), len(job.placement.ps)
        job.pending = [2 * ps] * workers
        job.w0_flows = set()
        for w in range(workers):
            nbytes = job.bytes * job.left[w]
            for p in range(ps):
                for phase in (cojob_mod.PUSH, cojob_mod.PULL):
                    flow = self.start_flow(job, phase, w, p, nbytes)
                    if w == 0 and flow is not None:
                        job.w0_flows.add(flow)

    def iterations_done(self, job: _Job, stage_iterations: int) -> int:
        """Worker 0's finished iterations, as the driver counts them; in bulk, its
        delivered share of the stage's bytes in whole iterations."""
        if self.variant.iterations:
            return job.done
        total = job.bytes * stage_iterations * 2 * len(job.placement.ps)
        in_flight = sum(self.net.left[f] for f in job.w0_flows)
        return math.floor(stage_iterations * (total - in_flight) / total * (1 + _TOLERANCE))

    # --- cojobs and stages ---------------------------------------------------------
    def start_cojob(self, c: _Cojob) -> None:
        c.arrived_t, c.alive = self.now, list(c.jobs)
        self.start_stage(c, 0)

    def start_stage(self, c: _Cojob, stage: int) -> None:
        c.stage, c.stage_started_t, c.workers_done = stage, self.now, 0
        n = c.plan.stage_iterations[stage]
        for job in c.alive:
            workers = len(job.placement.workers)
            job.left, job.done = [n] * workers, 0
            job.pushes = [0] * len(job.placement.ps)
            if self.variant.iterations:
                job.pending = [0] * workers
                for w in range(workers):
                    self.start_iteration(job, w)
            else:
                self.start_bulk(job)
        if self.scheduler == "grouper-immediate" or stage == 0:
            self.reschedule()

    def worker_done(self, job: _Job) -> None:
        c = self.by_id[job.plan.cojob_id]
        c.workers_done += 1
        if c.workers_done == sum(len(j.placement.workers) for j in c.alive):
            self.end_stage(c)

    def end_stage(self, c: _Cojob) -> None:
        stage, cojob_id = c.stage, c.plan.cojob_id
        self.sct[(cojob_id, stage)] = self.now - c.stage_started_t
        last = stage == len(c.plan.stage_iterations) - 1
        for job in c.alive:
            if last or not job.plan.runs(stage + 1):
                self.jct[job.key] = self.now - c.arrived_t
        c.alive = [job for job in c.alive if not last and job.plan.runs(stage + 1)]
        if last:
            c.ended, c.stage = True, None
            self.cojct[cojob_id] = self.now - c.arrived_t
        else:
            self.start_stage(c, stage + 1)
        # After the next stage started: in the emulation a new cojob's stage 0 starts
        # only once its tasks said hello, so its decision sees this cojob's next stage.
        for other in self.cojobs:
            if other.arrived_t is None and other.plan.arrival.after == (cojob_id, stage):
                self.start_cojob(other)
        if self.scheduler == "grouper-immediate":
            self.reschedule()

    # --- decisions -------------------------------------------------------------------
    def reschedule(self) -> None:
        """The driver's decision: the order of the running stages, their queues, and the
        queues of every flow of their live jobs; other flows fall back to the lowest queue."""
        if self.scheduler == "fs":
            return
        offline = self.scheduler == "grouper-offline"
        every, running = [], []
        for c in self.cojobs:
            if c.stage is None:
                continue
            n = c.plan.stage_iterations[c.stage]
            stages = scheduling.remaining_stages(c.plan, self.workload.placements, self.scaling.bytes_scale, c.stage,
                                                 {job.key: self.iterations_done(job, n) for job in c.alive},
                                                 c.stage_started_t, self.now, offline)
            every += stages
            running += [s for s in stages if s.index == c.stage]
        order = scheduling.order(self.scheduler, every, running)
        if not order:
            return
        queues = scheduling.stage_queues(order, running)
        policy = {}
        for c in self.cojobs:
            if c.stage is None:
                continue
            stage_id = f"c{c.plan.cojob_id}/s{c.stage}"
            for job in c.alive:
                for w, worker in enumerate(job.placement.workers):
                    for p, ps in enumerate(job.placement.ps):
                        if worker == ps:
                            continue  # a same-host pair crosses no port
                        for phase, src, dst in ((cojob_mod.PUSH, worker, ps), (cojob_mod.PULL, ps, worker)):
                            pair = scheduling.flow_queues(queues, stage_id, src, dst)
                            if pair is not None:
                                policy[(job.key, w, p, phase)] = pair
        self.policy = policy
        for flow, (job, phase, w, p) in self.flows.items():
            self.net.requeue(flow, self.hops(job, phase, w, p))
        self.decisions += 1


def simulate(workload: cojob_mod.Workload, scaling: cojob_mod.Scaling, scheduler: str, period_s: float = 2.0,
             variant: Variant = VARIANTS["iterations+compute"]) -> Result:
    """Run ``workload`` to the end under ``scheduler`` (a driver scheduler name)."""
    if scheduler not in cojob_spec.SCHEDULERS:
        raise SpecError("scheduler", f"unknown scheduler {scheduler!r} (known: {', '.join(cojob_spec.SCHEDULERS)})")
    return _Simulation(workload, scaling, scheduler, period_s, variant).run()


def spec_inputs(spec: dict) -> tuple[cojob_mod.Workload, cojob_mod.Scaling]:
    """A validated cojob spec's workload and scaling, as the runner and driver build them."""
    return cojob_spec.build_workload(spec), cojob_spec.build_scaling(spec)


def run_spec(path: str | Path, seeds: Sequence[int], schedulers: Sequence[str] = SCHEDULERS,
             variants: Sequence[str] = tuple(VARIANTS)) -> list[dict]:
    """Every (seed, variant, scheduler) of the spec at ``path``, as ``Result.to_dict`` rows."""
    spec = cojob_spec.validate(read_yaml(path))
    rows = []
    for seed in seeds:
        workload, scaling = spec_inputs({**spec, "seed": seed})
        for variant in variants:
            for scheduler in schedulers:
                result = simulate(workload, scaling, scheduler, spec["scheduler"]["period_s"], VARIANTS[variant])
                rows.append({"seed": seed, **result.to_dict()})
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
        sct = _mean(r["avg_sct_s"] for r in group)
        out.append({"variant": variant, "scheduler": scheduler, "seeds": [r["seed"] for r in group],
                    "avg_sct_s": sct, "avg_cojct_s": _mean(r["avg_cojct_s"] for r in group),
                    "avg_jct_s": _mean(r["avg_jct_s"] for r in group),
                    "sct_vs_fs": None if fs is None else sct / _mean(r["avg_sct_s"] for r in fs) - 1})
    return out


def table(summaries: Sequence[Mapping]) -> str:
    lines = ["| variant | scheduler | avg SCT | vs FS | avg CoJCT | avg JCT |", "|---|---|---|---|---|---|"]
    for s in summaries:
        vs = "" if s["sct_vs_fs"] is None else f"{100 * s['sct_vs_fs']:+.1f}%"
        lines.append(f"| {s['variant']} | {s['scheduler']} | {s['avg_sct_s']:.1f} s | {vs} "
                     f"| {s['avg_cojct_s']:.1f} s | {s['avg_jct_s']:.1f} s |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.cojob.itersim", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help="a cojob spec (workload: {kind: cojob})")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the spec's seed")
    parser.add_argument("--schedulers", nargs="+", default=list(SCHEDULERS), choices=cojob_spec.SCHEDULERS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", help="write every run and the summary here as JSON")
    args = parser.parse_args(argv)
    try:
        seeds = args.seeds or [cojob_spec.validate(read_yaml(args.spec))["seed"]]
        rows = run_spec(args.spec, seeds, args.schedulers, args.variants)
    except SpecError as err:
        sys.exit(f"itersim: {err}")
    summaries = summary(rows)
    print(f"{args.spec}, seeds {' '.join(map(str, seeds))}: means over seeds")
    print(table(summaries))
    if args.out:
        Path(args.out).write_text(json.dumps({"spec": args.spec, "seeds": seeds, "summary": summaries,
                                              "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
