"""Grouper's coordinator as a pure object: events in, decisions out.

One copy of the cojob kind's scheduling logic, driven by either backend: the
emulation's driver (``driver.py``) feeds it what the host programs report over the
management channel; the simulator (``simulated.py``) feeds it simulated events.
It never reads a clock, starts a process or touches a socket: every call takes
``now`` (seconds, in the caller's clock) and returns a list of actions, which the
backend carries out in order.

What it knows and does:
- A cojob arrives (``arrive``: at a timed arrival, or when the stage it waits on
  ends); its tasks start (``StartCojob``); once they are ready (``ready``: every task
  said hello in the emulation, at once in the simulator) its stage 0 starts.
- On a GPU cluster (``workload.gpus``) an arrived cojob first waits for GPUs, first
  come first served: it is admitted (``cojob_admitted``) and its jobs placed
  (``placements``) once its stage 0's workers fit in the free GPUs, which stopped jobs
  give back. Its SCTs still count from its arrival.
- A stage ends when every worker of every surviving job reported it done
  (``worker_done``); then the worse half is killed by the plan's learning curves
  (offline knowledge the plan holds; an online scheduler never reads it before the
  kill), waiting arrivals start, and the next stage starts at once.
- The scheduler runs on its period (``tick``) and when a stage 0 starts
  (``grouper``, ``grouper-offline``, ``sincronia-stage``, a researcher's own
  ``module:function``), on every stage start
  (``baraat``: FIFO places a stage when it starts; and when a cojob ends, freeing
  its ranks), on every stage
  start and end (``grouper-immediate``), when a stage 0 starts and on every stage end
  (``sincronia``: where its coflows come and go, ``scheduling.PER_ITERATION``), or
  never (``fs``: every flow in the lowest queue).
  A decision is the scheduler's order of the running stages (``sincronia``: of the
  live jobs' current iterations, one coflow per job, named by the job) and, per flow
  of every live job, ``(switch queue, sender NIC queue)`` (Fig. 8) keyed by
  ``FlowKey(job, worker, ps, phase)``; flows not named fall back to the lowest queue.
- Progress the online schedulers read: worker 0's finished iterations per live job
  in the running stage (``iteration_done``), or what ``progress(job)`` says where a
  backend counts them another way.

Actions, in the order a backend must carry them out: ``Note`` (an event for
``events.jsonl``, the driver's schema), ``StartCojob``, ``RunStage``, ``StopJob``,
``Decision``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from controller.schedulers.grouper import Stage
from experiments.cojob import scheduling
from experiments.cojob import workload as cojob_mod


class FlowKey(NamedTuple):
    job: str
    worker: int
    ps: int
    phase: str  # cojob_mod.PUSH (worker -> PS) or cojob_mod.PULL (PS -> worker)


@dataclass(frozen=True)
class Note:
    kind: str
    fields: dict


@dataclass(frozen=True)
class StartCojob:
    cojob: int


@dataclass(frozen=True)
class RunStage:
    cojob: int
    stage: int
    jobs: tuple[str, ...]
    iterations: int


@dataclass(frozen=True)
class StopJob:
    job: str


@dataclass(frozen=True)
class Decision:
    order: tuple[str, ...]
    queues: dict[FlowKey, tuple[int, int]]  # (switch queue, sender NIC queue)


Action = Note | StartCojob | RunStage | StopJob | Decision


@dataclass
class CojobState:
    plan: cojob_mod.CojobPlan
    arrived_t: float | None = None
    stage: int | None = None
    stage_started_t: float = 0.0
    alive: list[str] = field(default_factory=list)  # job keys, in plan order
    done: set[tuple[str, int]] = field(default_factory=set)  # (job, worker) done with the running stage
    ended: bool = False


class CojobCoordinator:
    def __init__(self, workload: cojob_mod.Workload, scaling: cojob_mod.Scaling, scheduler: str,
                 progress: Callable[[str], int] | None = None):
        self.workload, self.scaling, self.scheduler = workload, scaling, scheduler
        self.progress = progress
        self.cojobs = {plan.cojob_id: CojobState(plan) for plan in workload.cojobs}
        self.cojob_of = {job.key: plan.cojob_id for plan in workload.cojobs for job in plan.jobs}
        self.iterations_done: dict[str, int] = {}  # live job -> worker 0's iterations in the running stage
        self.stopped: set[str] = set()
        # Where every job's tasks run: the workload's, or filled in as cojobs are admitted.
        self.placements: dict[str, cojob_mod.JobPlacement] = dict(workload.placements)
        self.slots = cojob_mod.GpuSlots(workload.gpus) if workload.gpus else None
        self.waiting: list[int] = []  # arrived cojobs waiting for GPUs, in arrival order

    @property
    def periodic(self) -> bool:
        return scheduling.periodic(self.scheduler)

    @property
    def per_iteration(self) -> bool:
        return self.scheduler in scheduling.PER_ITERATION

    @property
    def finished(self) -> bool:
        return all(c.ended for c in self.cojobs.values())

    def timed_arrivals(self) -> list[tuple[float, int]]:
        """(seconds from the run's start, cojob id) of every cojob arriving at a time, in order."""
        return sorted((self.scaling.arrival_s(c.plan.arrival.at_s), c.plan.cojob_id)
                      for c in self.cojobs.values() if c.plan.arrival.at_s is not None)

    def workers(self, job: str) -> int:
        return len(self.placements[job].workers)

    # --- events in ---------------------------------------------------------------------
    def arrive(self, cojob: int, now: float) -> list[Action]:
        c = self.cojobs[cojob]
        c.arrived_t, c.alive = now, [job.key for job in c.plan.jobs]
        arrival = Note("cojob_arrival", {"cojob": cojob, "model": c.plan.model})
        if self.slots is None:
            return [arrival, StartCojob(cojob)]
        self.waiting.append(cojob)
        return [arrival, *self._admit(now)]

    def _admit(self, now: float) -> list[Action]:
        """Start waiting cojobs, oldest first, while the oldest fits (no overtaking)."""
        actions: list[Action] = []
        while self.waiting and self.slots.fits(self.cojobs[self.waiting[0]].plan):
            c = self.cojobs[self.waiting.pop(0)]
            placements = self.slots.place(c.plan)
            self.placements.update(placements)
            actions += [Note("cojob_admitted", {"cojob": c.plan.cojob_id, "waited_s": now - c.arrived_t,
                                                "hosts": sorted({h for p in placements.values() for h in p.workers})}),
                        StartCojob(c.plan.cojob_id)]
        return actions

    def ready(self, cojob: int, now: float) -> list[Action]:
        """The cojob's tasks are up: its stage 0 starts."""
        c = self.cojobs[cojob]
        if c.stage is not None or c.ended:
            return []
        return self._start_stage(c, 0, now)

    def iteration_done(self, job: str) -> None:
        """Worker 0 of ``job`` finished an iteration of the running stage."""
        if job in self.iterations_done:
            self.iterations_done[job] += 1

    def worker_done(self, job: str, worker: int, stage: int, now: float) -> list[Action]:
        """Worker ``worker`` of ``job`` finished ``stage``; a report for another stage is stale."""
        c = self.cojobs[self.cojob_of[job]]
        if stage != c.stage or job not in c.alive:
            return []
        c.done.add((job, worker))
        if len(c.done) < sum(self.workers(key) for key in c.alive):
            return []
        return self._end_stage(c, now)

    def tick(self, now: float) -> list[Action]:
        """The scheduler's period elapsed."""
        return self._reschedule(now) if self.periodic else []

    # --- stages ------------------------------------------------------------------------
    def _start_stage(self, c: CojobState, stage: int, now: float) -> list[Action]:
        c.stage, c.stage_started_t, c.done = stage, now, set()
        for key in c.alive:
            self.iterations_done[key] = 0
        actions: list[Action] = [
            Note("stage_start", {"cojob": c.plan.cojob_id, "stage": stage, "jobs": sorted(c.alive)}),
            RunStage(c.plan.cojob_id, stage, tuple(c.alive), c.plan.stage_iterations[stage])]
        if self.scheduler in scheduling.ON_STAGE_START or stage == 0:
            actions += self._reschedule(now)  # a new cojob's flows would otherwise wait up to a period unmarked
        return actions

    def _end_stage(self, c: CojobState, now: float) -> list[Action]:
        stage, cojob = c.stage, c.plan.cojob_id
        actions: list[Action] = [Note("stage_end", {"cojob": cojob, "stage": stage})]
        last = stage == len(c.plan.stage_iterations) - 1
        jobs = {job.key: job for job in c.plan.jobs}
        for key in sorted(c.alive):
            if last:
                actions.append(Note("job_finished", {"job": key, "cojob": cojob}))
            elif not jobs[key].runs(stage + 1):
                actions.append(Note("job_killed", {"job": key, "cojob": cojob, "after_stage": stage}))
            else:
                continue
            actions.append(StopJob(key))
            self.stopped.add(key)
            self.iterations_done.pop(key, None)
            if self.slots:
                self.slots.release(self.placements[key])
        c.alive = [key for key in c.alive if key not in self.stopped]
        for other in self.cojobs.values():
            if other.arrived_t is None and other.plan.arrival.after == (cojob, stage):
                actions += self.arrive(other.plan.cojob_id, now)
        if self.slots:
            actions += self._admit(now)  # the stopped jobs' GPUs are free
        if last:
            c.ended, c.stage = True, None
            actions.append(Note("cojob_end", {"cojob": cojob}))
        else:
            actions += self._start_stage(c, stage + 1, now)
        on_end = self.scheduler == "grouper-immediate" or self.per_iteration
        next_stage_rescheduled = not last and self.scheduler in scheduling.ON_STAGE_START  # after every change above
        if not next_stage_rescheduled and (on_end or (last and self.scheduler in scheduling.ON_STAGE_START)):
            # sincronia: the killed and finished jobs' coflows are gone; baraat: an ended
            # cojob's ranks are free, the stages lumped in the lowest queue may move up
            actions += self._reschedule(now)
        return actions

    # --- decisions ---------------------------------------------------------------------
    def stages_now(self, now: float) -> tuple[list[Stage], list[Stage]]:
        """(every remaining stage of every active cojob, the running ones), loads in bytes."""
        offline = self.scheduler == "grouper-offline"
        every, running = [], []
        for c in self.cojobs.values():
            if c.stage is None:
                continue
            stages = scheduling.remaining_stages(c.plan, self.placements, self.scaling.bytes_scale, c.stage,
                                                 {key: self.progress(key) if self.progress else
                                                  self.iterations_done[key] for key in c.alive},
                                                 c.stage_started_t, now, offline)
            every += stages
            running += [s for s in stages if s.index == c.stage]
        return every, running

    def coflows_now(self) -> list[Stage]:
        """Each live job's current iteration as one coflow (``sincronia``), loads in bytes."""
        return [coflow for c in self.cojobs.values() if c.stage is not None
                for coflow in scheduling.iteration_coflows(c.plan, self.placements,
                                                           self.scaling.bytes_scale, c.alive)]

    def _reschedule(self, now: float) -> list[Action]:
        if self.scheduler == "fs":
            return []  # fair share: every flow stays unmarked in the lowest queue
        if self.per_iteration:
            every = running = self.coflows_now()
        else:
            every, running = self.stages_now(now)
        if not running:
            return []
        # An empty order (an own scheduler ranking nothing) is a decision too: it takes
        # away the marks an earlier one set.
        order = scheduling.order(self.scheduler, every, running)
        queues = scheduling.stage_queues(order, running)
        decided: dict[FlowKey, tuple[int, int]] = {}
        for c in self.cojobs.values():
            if c.stage is None:
                continue
            stage_id = f"c{c.plan.cojob_id}/s{c.stage}"
            for key in c.alive:
                ranked_id = key if self.per_iteration else stage_id  # what the order ranks the job's flows as
                placement = self.placements[key]
                for w, worker in enumerate(placement.workers):
                    for p, ps in enumerate(placement.ps):
                        if worker == ps:
                            continue  # a same-host pair crosses no port
                        for phase, src, dst in ((cojob_mod.PUSH, worker, ps), (cojob_mod.PULL, ps, worker)):
                            pair = scheduling.flow_queues(queues, ranked_id, src, dst)
                            if pair is not None:
                                decided[FlowKey(key, w, p, phase)] = pair
        return [Decision(tuple(order), decided)]

