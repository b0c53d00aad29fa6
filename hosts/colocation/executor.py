"""Runs a task queue on one device under a policy (groups) or a baseline.

Every task runs in a worker process of its own (``workers``): its memory is
its process's, a budget is enforced, and a crash ends only that task.

Policies: the tasks that arrived together form a batch (GNNSched §3.1 takes "同一批次"
from the queue's head, its artifact splits requests by arrival time: here one
arrival tick; training: the whole queue, all at 0); a batch that arrives while
earlier ones wait runs after them, never merged with them. The policy splits a
batch into groups; groups run one after another (temporal sharing); the tasks
of a group run at once (spatial sharing), one warm worker each. A task's budget is what
the policy reserved for it (estimate x safety threshold): a task that goes over
is stopped and recorded as a violation. Its worker's allocator may reserve the
budget plus the overhead profiled for its model and size class (``allocator``).
Groups pipeline as in GNNSched (§3.3, Fig. 3; ``pipeline_groups``): workers are
resident, twice as many as a group needs, and while a group runs the next one
is prepared on the idle ones (gated jobs: inputs mapped, model built on the
host, allocator capped), so it starts on GO when the group ends; during a
batch's last group the next batch, once it has arrived, is prepared as the
policy would group it first. Without pipelining a group is handed out when the
previous one ends.

Baselines use no estimate and no budget (``policies.BASELINE_CONCURRENCY``: how many run at once):
- default: one task at a time, each training task in a new process (the
  artifact launches a process per task), so its cold start is part of the
  makespan; inference requests go to a warm worker (a serving process);
- pipeswitch: one task at a time on warm workers; while one computes, a standby
  worker takes the next task's inputs and (on CUDA) its model into pinned memory,
  then copies the parameters layer by layer as the first layers compute. On the
  CPU there are no transfers: the same schedule, without the overlap;
- mps-pair: CoGNN's MPS runs, tasks in arrival order in pairs (new processes for
  training tasks), the next pair after both finish;
- mps-base and mps (GNNSched's MPS-Aggr): GNNSched's batches as groups, as the
  policies run them but blind to memory and unpipelined: mps-base in static
  groups of four in arrival order, mps a whole batch at once; warm workers.
The MPS baselines start a real MPS daemon on CUDA when the device allows it
(``mps``); the run's facts say whether one ran.

All tasks' live bytes add up in one ``DeviceLedger`` against the allocatable
memory: tasks running while the sum exceeds it are recorded as over capacity
(on a GPU they would page or fail). The watch errs high, never low (see
``memory``), so a recorded violation is never missed. On the CPU each task gets
cores / (tasks the method may run at once) threads, the CPU's analogue of
sharing the GPU's SMs.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from hosts.colocation import mps
from hosts.colocation.allocator import Allocator, device_allocator, reserved_overhead
from hosts.colocation.datasets import Graph, GraphShape, synthesize
from hosts.colocation.memory import DeviceLedger
from hosts.colocation.policies import BASELINE_CONCURRENCY, BATCH_BASELINES, POLICIES, Item
from hosts.colocation.tasks import Task, profile_key, profiled
from hosts.colocation.utilization import UtilizationSampler
from hosts.colocation.workers import OUT_OF_MEMORY_ERRORS, Job, Outcome, Startup, Worker, WorkerPool, context

# A new process per training task, as the CoGNN artifact's scripts launch them;
# inference requests go to a warm server process (GNNSched).
COLD_START = ("default", "mps-pair")
MPS_BASELINES = ("mps", "mps-base", "mps-pair")
WARM_START_LIMIT = 8  # warm workers at most before the clock; a larger MPS batch starts the rest when it runs


@dataclass
class TaskRecord:
    task_id: str
    method: str
    arrival_s: float
    estimate_bytes: int
    need_bytes: int
    budget_bytes: int | None
    qt_s: float | None
    start_s: float | None = None
    end_s: float | None = None
    batch: int | None = None
    group: int | None = None
    worker_pid: int | None = None
    measured_peak_bytes: int | None = None  # the task alone, unwatched (see Plan)
    watched_peak_bytes: int | None = None  # what its watch saw while co-located
    cap_overhead_bytes: int | None = None  # allowed to its allocator beyond the budget
    reserved_growth_bytes: int | None = None  # what its worker's allocator reserved for it at most
    ready_s: float | None = None  # its worker had it prepared (inputs mapped, allocator capped)
    over_budget: bool = False
    over_capacity: bool = False
    refused_by: str | None = None  # the allocator refused it: "cap" or "device" (``allocator.refused_by``)
    error: str | None = None
    result: float | None = None

    @property
    def memory_violation(self) -> bool:
        return self.over_budget or self.over_capacity or self.error in OUT_OF_MEMORY_ERRORS


@dataclass
class Plan:
    """What the executor needs to know about the queue, computed once per run."""

    tasks: list[Task]
    estimate_bytes: dict[str, int]
    need_bytes: dict[str, int]
    qt_s: dict[str, float] = field(default_factory=dict)
    measured_peak_bytes: dict[str, int] = field(default_factory=dict)
    overhead_bytes: dict[str, int] = field(default_factory=dict)  # the allocator's, per task (see ``allocator``)


class PreparedInputs:
    """Host-side inputs of the tasks, built on demand, shared by equal shapes and
    placed in shared memory, so workers map them instead of copying."""

    def __init__(self, seed: int):
        self.seed = seed
        self._graphs: dict[GraphShape, Graph] = {}
        self._lock = threading.Lock()

    def get(self, shape: GraphShape) -> Graph:
        with self._lock:
            if shape not in self._graphs:
                graph = synthesize(shape, self.seed)
                for tensor in (graph.x, graph.edge_index, graph.y):
                    tensor.share_memory_()
                self._graphs[shape] = graph
            return self._graphs[shape]


class Executor:
    def __init__(self, device: torch.device, allocatable_bytes: int, workers: int, inputs: PreparedInputs,
                 pipeline_groups: bool = True, allocator: Callable[[torch.device], Allocator] = device_allocator):
        self.device = device
        self.allocator = allocator  # each worker's (``WorkerPool.allocator``)
        self.allocatable_bytes = allocatable_bytes
        self.workers = workers
        self.pipeline_groups = pipeline_groups
        self._ledger = DeviceLedger(allocatable_bytes, context(device.type))
        self._inputs = inputs
        self._cores = len(os.sched_getaffinity(0))

    def run(self, method: str, plan: Plan) -> tuple[list[TaskRecord], dict]:
        """Run the whole queue under ``method``; return per-task records and run facts."""
        tasks = {t.task_id: t for t in plan.tasks}
        grouped = method in POLICIES
        records = {
            t.task_id: TaskRecord(
                task_id=t.task_id, method=method, arrival_s=t.arrival_s,
                estimate_bytes=plan.estimate_bytes[t.task_id], need_bytes=plan.need_bytes[t.task_id],
                budget_bytes=plan.need_bytes[t.task_id] if grouped else None, qt_s=plan.qt_s.get(t.task_id),
                measured_peak_bytes=plan.measured_peak_bytes.get(t.task_id),
                cap_overhead_bytes=plan.overhead_bytes.get(t.task_id, 0) if grouped else None)
            for t in plan.tasks
        }
        for task in plan.tasks:  # host-side inputs are ready before the clock starts, for every method alike
            self._inputs.get(task.graph)
        largest_batch = max(Counter(t.arrival_s for t in plan.tasks).values())  # a batch: one arrival time
        concurrency = self.workers if grouped else BASELINE_CONCURRENCY[method] or largest_batch
        threads = max(1, self._cores // concurrency)
        with tempfile.TemporaryDirectory(prefix="trainbed-mps-") as scratch:
            daemon_started = time.monotonic()
            daemon, probe = self._mps_daemon(Path(scratch)) if method in MPS_BASELINES else (None, [])
            daemon_start_s = time.monotonic() - daemon_started
            pool = WorkerPool(self.device, self._ledger, daemon.env if isinstance(daemon, mps.MpsDaemon) else {},
                              self.allocator)
            utilization = UtilizationSampler(self.device)
            try:
                # Warm workers start before the clock; beyond WARM_START_LIMIT more start when needed.
                cold = method in COLD_START and all(task.training for task in plan.tasks)
                pipelined = grouped and self.pipeline_groups
                pool.start(0 if cold else 2 if method == "pipeswitch" else 2 * concurrency if pipelined
                           else min(concurrency, WARM_START_LIMIT))
                run = _MethodRun(pool, self._ledger, tasks, records, threads, self._inputs)
                utilization.start()
                groups = []
                if grouped or method in BATCH_BASELINES:
                    groups = run.groups(POLICIES.get(method) or BATCH_BASELINES[method], plan,
                                        self.allocatable_bytes, self.workers, pipelined)
                elif method == "pipeswitch":
                    run.pipeswitch()
                elif method == "mps-pair":
                    run.pairs(fresh=cold)
                else:
                    run.serial(fresh=cold)
            finally:
                utilization.stop()
                pool.close()
                daemon_stopped = time.monotonic()
                stop_error = daemon.stop() if isinstance(daemon, mps.MpsDaemon) else None
                daemon_stop_s = time.monotonic() - daemon_stopped
        facts = {"groups": groups, "pipelined_groups": pipelined, "device_peak_bytes": self._ledger.peak_bytes,
                 "over_capacity_events": self._ledger.crossings, "threads_per_task": threads,
                 "device_utilization": utilization.mean,
                 "worker_processes": len({r.worker_pid for r in records.values() if r.worker_pid}),
                 "worker_max_rss_bytes": max(pool.max_rss_bytes.values(), default=None),
                 # what the part spent besides its tasks (device time on a GPU)
                 "worker_startups": [asdict(startup) for startup in pool.startups], "worker_close_s": pool.close_s,
                 "workers_lost_idle": pool.lost_idle}
        if method in MPS_BASELINES:
            facts["mps_daemon"] = "ran" if isinstance(daemon, mps.MpsDaemon) else f"not started: {daemon}"
            # the start includes a probe worker's, whose own start is kept apart
            facts["mps_daemon_start_s"], facts["mps_daemon_stop_s"] = daemon_start_s, daemon_stop_s
            facts["mps_probe_startups"] = [asdict(startup) for startup in probe]
            if stop_error:
                facts["mps_daemon"] += f"; {stop_error}"
        return [records[t.task_id] for t in plan.tasks], facts

    def allocator_overheads(self, tasks: list[Task]) -> dict[str, int]:
        """The profiling pass's part in a worker: each distinct task alone on a warm
        worker, watched as in a run (training for at most two epochs, as in
        ``measure_peak``), and what its allocator reserved beyond the watched peak."""
        pool = WorkerPool(self.device, self._ledger, allocator=self.allocator)
        measured: dict[tuple, int] = {}
        overheads = {}
        try:
            pool.start(1)
            for task in tasks:
                key = profile_key(task)
                if key not in measured:
                    pool.hand(Job(profiled(task), self._inputs.get(task.graph), None, self._cores))
                    outcomes = []
                    while not outcomes:
                        outcomes = pool.wait()
                    (outcome,) = outcomes
                    if outcome.error is not None:
                        raise RuntimeError(f"task {task.task_id} failed alone in a worker: {outcome.error}")
                    measured[key] = reserved_overhead(outcome.reserved_growth_bytes, outcome.watched_peak_bytes)
                overheads[task.task_id] = measured[key]
        finally:
            pool.close()
        return overheads

    def _mps_daemon(self, directory: Path) -> tuple[mps.MpsDaemon | str, list[Startup]]:
        """A daemon a worker could join, or why there is none (the schedule then
        runs as plain processes); and the start of the worker that tried."""
        daemon = mps.start(directory, self.device.type)
        if isinstance(daemon, str):
            return daemon, []
        probe = WorkerPool(self.device, self._ledger, daemon.env, self.allocator)
        try:
            probe.start(1)
        except RuntimeError as err:
            daemon.stop()
            return f"started, but a worker could not use it ({err})", probe.startups
        finally:
            probe.close()
        return daemon, probe.startups


class _MethodRun:
    """One method's pass over the queue: hands jobs to the pool and records outcomes."""

    def __init__(self, pool: WorkerPool, ledger: DeviceLedger, tasks: dict[str, Task],
                 records: dict[str, TaskRecord], threads: int, inputs: PreparedInputs):
        self.pool, self.tasks, self.records, self.threads, self.inputs = pool, tasks, records, threads, inputs
        self.queue = sorted(tasks.values(), key=lambda t: t.arrival_s)
        self.finished: set[str] = set()
        self.standby: dict[str, Worker] = {}  # task -> the worker holding it prepared (a gated job)
        self.go_when_ready: set[str] = set()  # standbys whose group runs: GO once they are prepared
        ledger.reset()
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def job(self, task: Task, **options) -> Job:
        record = self.records[task.task_id]
        return Job(task, self.inputs.get(task.graph), record.budget_bytes, self.threads,
                   overhead_bytes=record.cap_overhead_bytes or 0, **options)

    def record(self, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            record = self.records[outcome.task_id]
            record.worker_pid = outcome.worker_pid
            record.ready_s = outcome.ready - self.t0 if outcome.ready is not None else None
            record.start_s = outcome.start - self.t0 if outcome.start is not None else None
            record.end_s = outcome.end - self.t0 if outcome.end is not None else self.now()
            record.result, record.error = outcome.result, outcome.error
            record.over_budget, record.over_capacity = outcome.over_budget, outcome.over_capacity
            record.refused_by = outcome.refused_by
            record.watched_peak_bytes = outcome.watched_peak_bytes
            record.reserved_growth_bytes = outcome.reserved_growth_bytes
            self.finished.add(outcome.task_id)
            self.standby.pop(outcome.task_id, None)  # a standby that died while prepared
            self.go_when_ready.discard(outcome.task_id)

    def drain(self) -> None:
        while self.pool.busy():
            self.record(self.pool.wait())

    def arrived(self, limit: int) -> list[Task]:
        """Pop at most ``limit`` tasks that have arrived; wait for the next arrival if none has."""
        self.wait_for_head()
        count = min(limit, sum(t.arrival_s <= self.now() for t in self.queue))
        taken, self.queue = self.queue[:count], self.queue[count:]
        return taken

    def batch(self) -> list[Task]:
        """Pop the next batch, the tasks that arrived with the queue's head; wait for it."""
        self.wait_for_head()
        size = self.batch_size()
        taken, self.queue = self.queue[:size], self.queue[size:]
        return taken

    def batch_size(self) -> int:
        """How many tasks at the queue's head arrived together (the queue is in arrival order)."""
        return next((i for i, t in enumerate(self.queue) if t.arrival_s != self.queue[0].arrival_s), len(self.queue))

    def wait_for_head(self) -> None:
        while (delay := self.queue[0].arrival_s - self.now()) > 0:  # one reading: a second could be past it
            time.sleep(delay)

    # -- policies: batches of groups -----------------------------------------------------
    def groups(self, policy, plan: Plan, allocatable: int, workers: int, pipelined: bool) -> list[list[list[str]]]:
        def split(tasks: list[Task]) -> list[list[str]]:
            items = [Item(t.task_id, plan.need_bytes[t.task_id], plan.qt_s.get(t.task_id, 0.0)) for t in tasks]
            return policy(items, allocatable, workers)

        def next_batch_first_group() -> list[str]:
            arrived = bool(self.queue) and self.queue[0].arrival_s <= self.now()
            return split(self.queue[:self.batch_size()])[0] if arrived else []

        batches: list[list[list[str]]] = []
        while self.queue:
            groups = split(self.batch())
            batches.append(groups)
            for index, group in enumerate(groups):
                for key in group:
                    self.records[key].batch, self.records[key].group = len(batches) - 1, index
            for index, group in enumerate(groups):
                if pipelined:
                    last = index + 1 == len(groups)
                    self.run_group(group, next_batch_first_group if last else lambda g=groups[index + 1]: g)
                else:
                    for key in group:
                        self.pool.hand(self.job(self.tasks[key]))
                    self.drain()
        return batches

    def run_group(self, group: list[str], following) -> None:
        """Start ``group`` (its prepared tasks on GO, the others handed out now) and,
        until it ends, keep the group ``following()`` names prepared on idle workers."""
        running = set(group) - self.finished
        for key in running:
            if key in self.standby:
                self.go_when_ready.add(key)
            else:
                self.pool.hand(self.job(self.tasks[key]))
        self.release_ready()
        while running:
            self.prepare(following())
            # wake at the next arrival too: it may join what ``following()`` names
            upcoming = next((t.arrival_s for t in self.queue if t.arrival_s > self.now()), None)
            self.record(self.pool.wait(None if upcoming is None else max(0.0, upcoming - self.now())))
            running -= self.finished
            self.release_ready()

    def prepare(self, keys: list[str]) -> None:
        """Hand each task not yet prepared to an idle warm worker as a gated job; none is started for it."""
        for key in keys:
            if key in self.standby or key in self.finished:
                continue
            worker = self.pool.idle(start=False)
            if worker is not None:
                worker = self.pool.hand(self.job(self.tasks[key], gated=True), worker)
            if worker is None:
                return
            self.standby[key] = worker

    def release_ready(self) -> None:
        for key in [k for k in self.go_when_ready if self.standby[k].ready]:
            self.pool.go(self.standby.pop(key))
            self.go_when_ready.discard(key)

    # -- baselines ---------------------------------------------------------------------------
    def serial(self, fresh: bool) -> None:
        """FIFO, one task at a time: the next starts once it has arrived and the last has ended."""
        while self.queue:
            self.pool.hand(self.job(self.arrived(limit=1)[0]), fresh=fresh)
            self.drain()

    def pairs(self, fresh: bool) -> None:
        """Pairs in arrival order; a barrier between pairs."""
        while self.queue:
            for task in self.arrived(limit=2):
                self.pool.hand(self.job(task), fresh=fresh)
            self.drain()

    def pipeswitch(self) -> None:
        """Strictly one task computing; the next one waits prepared on a standby worker."""
        pipelined = self.pool.device.type == "cuda"
        active = standby = None
        while self.queue or self.pool.busy():
            if standby is None and self.queue and self.queue[0].arrival_s <= self.now():
                standby = self.pool.hand(self.job(self.queue.pop(0), gated=True, pipelined=pipelined))
            if active is None and standby is not None and standby.ready:
                self.pool.go(standby)
                active, standby = standby, None
                continue
            waiting_arrival = standby is None and self.queue and self.queue[0].arrival_s > self.now()
            outcomes = self.pool.wait(max(0.0, self.queue[0].arrival_s - self.now()) if waiting_arrival else None)
            self.record(outcomes)
            if active is not None and active.job is None:
                active = None
            if standby is not None and standby.job is None:  # it died while preparing
                standby = None
