"""Runs a task queue on one device under a policy (groups) or a baseline (slots).

Policies: the tasks that have arrived form a batch; the policy splits it into
groups; groups run one after another (temporal sharing) while a helper thread
prepares the next group's inputs; the tasks of a group run at once (spatial
sharing), one worker thread per task, each on its own CUDA stream on a GPU.
Baselines use no estimate: a task starts when it has arrived and a slot is free
(Default: 1 slot, MPS-Base: 4, MPS: unlimited).

Each task runs under its own memory watch (``TaskMemoryWatch``). Its budget is
what the policy reserved for it (estimate x safety threshold); going over is
recorded as a violation and the task carries on. All watches also add up on
the device's allocatable memory: tasks running while the sum exceeds it are
recorded as over capacity (on a GPU they would page or fail). A real
out-of-memory error ends only the task that hit it. The watch errs high, never
low (see ``memory``), so a recorded violation is never missed.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import torch

from hosts.colocation.datasets import Graph, GraphShape, synthesize
from hosts.colocation.memory import SharedDevice, TaskMemoryWatch
from hosts.colocation.policies import BASELINE_CONCURRENCY, POLICIES, Item
from hosts.colocation.tasks import Task, run_task


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
    measured_peak_bytes: int | None = None  # the task alone, unwatched (see Plan)
    watched_peak_bytes: int | None = None  # what its watch saw while co-located
    over_budget: bool = False
    over_capacity: bool = False
    error: str | None = None
    result: float | None = None

    @property
    def memory_violation(self) -> bool:
        return self.over_budget or self.over_capacity or self.error == "out of memory"


@dataclass
class Plan:
    """What the executor needs to know about the queue, computed once per run."""

    tasks: list[Task]
    estimate_bytes: dict[str, int]
    need_bytes: dict[str, int]
    qt_s: dict[str, float] = field(default_factory=dict)
    measured_peak_bytes: dict[str, int] = field(default_factory=dict)


class PreparedInputs:
    """Host-side inputs of the tasks, built on demand and shared by equal shapes."""

    def __init__(self, seed: int):
        self.seed = seed
        self._graphs: dict[GraphShape, Graph] = {}
        self._lock = threading.Lock()

    def get(self, shape: GraphShape) -> Graph:
        with self._lock:
            if shape not in self._graphs:
                self._graphs[shape] = synthesize(shape, self.seed)
            return self._graphs[shape]


class Executor:
    def __init__(self, device: torch.device, allocatable_bytes: int, workers: int, seed: int):
        self.device = device
        self.allocatable_bytes = allocatable_bytes
        self.workers = workers
        self.seed = seed

    def run(self, method: str, plan: Plan) -> tuple[list[TaskRecord], dict]:
        """Run the whole queue under ``method``; return per-task records and run facts."""
        tasks = {t.task_id: t for t in plan.tasks}
        grouped = method in POLICIES
        records = {
            t.task_id: TaskRecord(
                task_id=t.task_id, method=method, arrival_s=t.arrival_s,
                estimate_bytes=plan.estimate_bytes[t.task_id], need_bytes=plan.need_bytes[t.task_id],
                budget_bytes=plan.need_bytes[t.task_id] if grouped else None, qt_s=plan.qt_s.get(t.task_id),
                measured_peak_bytes=plan.measured_peak_bytes.get(t.task_id))
            for t in plan.tasks
        }
        self._shared = SharedDevice(self.allocatable_bytes)
        self._streams: list = []  # idle CUDA streams, reused: each new stream gets its own cuBLAS workspace
        self._inputs = PreparedInputs(self.seed)
        self._t0 = time.perf_counter()
        if grouped:
            groups = self._run_groups(POLICIES[method], tasks, plan, records)
        else:
            groups = []
            self._run_slots(BASELINE_CONCURRENCY[method], tasks, records)
        for task_id in self._shared.over_capacity_tasks:
            records[task_id].over_capacity = True
        facts = {"groups": groups, "device_peak_bytes": self._shared.peak_bytes,
                 "over_capacity_events": self._shared.over_capacity_events}
        return [records[t.task_id] for t in plan.tasks], facts

    def _now(self) -> float:
        return time.perf_counter() - self._t0

    # -- policies: batches of groups ---------------------------------------------------
    def _run_groups(self, policy, tasks, plan: Plan, records) -> list[list[list[str]]]:
        pending = sorted(tasks.values(), key=lambda t: t.arrival_s)
        batches: list[list[list[str]]] = []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare") as preparer:
            while pending:
                now = self._now()
                if pending[0].arrival_s > now:
                    time.sleep(pending[0].arrival_s - now)
                    continue
                arrived = [t for t in pending if t.arrival_s <= now]
                pending = [t for t in pending if t.arrival_s > now]
                items = [Item(t.task_id, plan.need_bytes[t.task_id], plan.qt_s.get(t.task_id, 0.0)) for t in arrived]
                groups = policy(items, self.allocatable_bytes, self.workers)
                batches.append(groups)
                prepared = preparer.submit(self._prepare, [tasks[k] for k in groups[0]])
                for index, group in enumerate(groups):
                    prepared.result()
                    if index + 1 < len(groups):
                        prepared = preparer.submit(self._prepare, [tasks[k] for k in groups[index + 1]])
                    for key in group:
                        records[key].batch, records[key].group = len(batches) - 1, index
                    self._run_group([tasks[k] for k in group], records)
        return batches

    def _prepare(self, group: list[Task]) -> None:
        for task in group:
            self._inputs.get(task.graph)

    def _run_group(self, group: list[Task], records) -> None:
        with ThreadPoolExecutor(max_workers=len(group), thread_name_prefix="worker") as pool:
            futures = [pool.submit(self._work, task, records[task.task_id]) for task in group]
            for future in futures:
                future.result()

    # -- baselines: slots ------------------------------------------------------------------
    def _run_slots(self, limit: int | None, tasks, records) -> None:
        queue = sorted(tasks.values(), key=lambda t: t.arrival_s)
        running: set[Future] = set()
        with ThreadPoolExecutor(max_workers=limit or max(1, len(queue)), thread_name_prefix="slot") as pool:
            while queue or running:
                now = self._now()
                while queue and queue[0].arrival_s <= now and (limit is None or len(running) < limit):
                    task = queue.pop(0)
                    running.add(pool.submit(self._work, task, records[task.task_id]))
                # Wake for the next arrival only if it has not arrived yet (else for a free slot).
                timeout = queue[0].arrival_s - now if queue and queue[0].arrival_s > now else None
                if running:
                    done, _ = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
                    for future in done:
                        future.result()
                    running -= done
                elif timeout:
                    time.sleep(timeout)

    # -- one worker ---------------------------------------------------------------------------
    def _take_stream(self):
        try:
            return self._streams.pop()  # list.pop/append are atomic under the GIL
        except IndexError:
            return torch.cuda.Stream(device=self.device)

    def _work(self, task: Task, record: TaskRecord) -> None:
        record.start_s = self._now()
        graph = self._inputs.get(task.graph)
        watch = TaskMemoryWatch(record.budget_bytes, self._shared, self.device.type)
        self._shared.enter(task.task_id)
        try:
            if self.device.type == "cuda":
                stream = self._take_stream()
                try:
                    with torch.cuda.stream(stream), watch:
                        record.result = run_task(task, graph, self.device)
                    stream.synchronize()
                finally:
                    self._streams.append(stream)
            else:
                with watch:
                    record.result = run_task(task, graph, self.device)
        except torch.OutOfMemoryError:
            record.error = "out of memory"
        finally:
            self._shared.leave(task.task_id)
            record.end_s = self._now()
            record.watched_peak_bytes = watch.record.peak_bytes
            record.over_budget = watch.record.exceeded_at_bytes is not None
