"""Worker processes: each running task is alone in its own process.

A ``WorkerPool`` starts workers (on the CPU by forking a fork server that has
imported torch and PyG, so a worker costs a fork and a warm-up, not an import;
on CUDA by spawning, see ``context``). The
parent hands a worker a ``Job`` (the task, its inputs in shared memory, its
budget, its CPU threads) over a pipe; the worker answers with an ``Outcome``
(result, start and end on the system-wide monotonic clock, what its memory
watch saw, an error). Warm workers serve job after job; a ``fresh`` job gets a
worker of its own that exits after it (a cold start, as a new process per task).
What a worker's start cost, step by step, is kept (``Startup``), and what the pool's
close took: on a GPU these, not the tasks, are much of a session's device time.

A task's memory is its own:
- Budget: a job with a budget runs under it. The worker's allocator is capped
  at what it holds plus the budget plus the allocator overhead measured for the
  task's model and size class (``allocator``; on CUDA the per-process memory
  fraction, on the CPU no cap), so the allocator refuses only past that; on
  every device the watch raises ``BudgetExceeded`` once the task's live bytes
  pass the budget. Either way the task stops and its worker serves the next job.
  It is recorded over budget only if the watch saw the budget passed; a refusal
  while its watched bytes were within the budget is ``OUT_OF_MEMORY_WITHIN_BUDGET``:
  not the task's excess but ours (its cap too tight, or on a GPU the device full of
  what the ledger does not count: other workers' caches, contexts; caveats in ``_run``);
  ``refused_by`` says which of the two (``allocator.refused_by``).
- Capacity: every worker adds its task's live bytes to one ``DeviceLedger`` in
  shared memory, so the sum over processes is compared with the allocatable memory.
- A worker that dies (a signal, the kernel's out-of-memory killer) fails its job
  with the exit status and is not reused.

A gated job (PipeSwitch's standby worker, the next group of a pipelined policy)
receives its inputs, prepares (builds the model on the host, caps its allocator),
says ``READY`` and waits for ``GO`` before it computes, so the parent decides when
compute starts. Invariant: a worker holds at most one job.
"""
from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_any

import torch
import torch.multiprocessing  # noqa: F401 - registers the reducers that pass tensors through shared memory

from hosts.colocation.allocator import (Allocator, cap_bytes, device_allocator, limit, refused_by, requested_range,
                                        reserved_growth)
from hosts.colocation.datasets import Graph
from hosts.colocation.memory import BudgetExceeded, DeviceLedger, TaskMemoryWatch
from hosts.colocation.models import build_model
from hosts.colocation.tasks import Task, run_task, warm_up_models

READY, GO, UP = "ready", "go", "up"
OUT_OF_MEMORY = "out of memory"  # refused by the allocator with no budget (past one, the watch stops it first)
OUT_OF_MEMORY_WITHIN_BUDGET = "out of memory within budget"  # refused while the watch saw the budget held
OUT_OF_MEMORY_ERRORS = (OUT_OF_MEMORY, OUT_OF_MEMORY_WITHIN_BUDGET)
HAND_TRIES = 3  # workers found dead at a job's send before ``hand`` gives up: more is a device failing


@dataclass
class Job:
    task: Task
    graph: Graph
    budget_bytes: int | None  # enforced when set
    threads: int  # CPU threads of the task (torch.set_num_threads)
    gated: bool = False
    pipelined: bool = False  # PipeSwitch's layer-by-layer parameter transfer (CUDA only)
    overhead_bytes: int = 0  # allowed to the allocator beyond the budget (see ``allocator``)


@dataclass
class Startup:
    """A worker's start, in seconds on the system-wide monotonic clock: from the
    parent's spawn to the worker's entry (a new interpreter and its imports: torch,
    PyG, this module; a fork on the CPU), then its device's first use (on CUDA the
    context, joining an MPS daemon where one runs), then the models' warm-up (about
    0 for a fresh worker, which pays it in its task)."""
    pid: int
    fresh: bool
    process_s: float
    device_s: float
    warm_up_s: float


@dataclass
class Outcome:
    task_id: str
    worker_pid: int
    ready: float | None = None  # time.monotonic() when the job was prepared (inputs mapped, allocator capped)
    start: float | None = None  # time.monotonic() when compute started
    end: float | None = None
    result: float | None = None
    error: str | None = None
    over_budget: bool = False
    over_capacity: bool = False
    refused_by: str | None = None  # the allocator refused it: "cap" or "device" (``allocator.refused_by``)
    watched_peak_bytes: int | None = None
    reserved_growth_bytes: int | None = None  # the allocator's peak reservation above what it held at the start
    worker_max_rss_bytes: int | None = None


def context(device_type: str = "cpu"):
    """Where workers come from. On the CPU, a fork server that has imported this
    module once, so a forked worker starts with torch and PyG loaded. On CUDA,
    spawn: a process forked from one that has touched the CUDA driver cannot
    initialise CUDA ("initialization error", seen on an H100 with the fork server),
    so each worker imports torch itself; a warm worker does so before the clock, a
    fresh one (a new process per task, as CoGNN's run_default.sh starts) pays it."""
    if device_type == "cuda":
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


@dataclass
class Worker:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    spawned: float  # time.monotonic() just before the process started
    fresh: bool = False
    job: Job | None = None
    ready: bool = False  # a gated job is prepared and waits for GO

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass
class WorkerPool:
    """Worker processes on one device, adding to one ledger. ``env`` is set in each
    worker before it touches the device (an MPS daemon's pipe directory);
    ``allocator`` gives a worker its device's allocator (a module-level function,
    as a worker receives it pickled; tests pass fakes)."""

    device: torch.device
    ledger: DeviceLedger
    env: dict[str, str] = field(default_factory=dict)
    allocator: Callable[[torch.device], Allocator] = device_allocator
    workers: list[Worker] = field(default_factory=list)
    max_rss_bytes: dict[int, int] = field(default_factory=dict)  # worker pid -> its peak resident set
    startups: list[Startup] = field(default_factory=list)  # one per worker that came up, in order
    lost_idle: list[dict] = field(default_factory=list)  # {"pid", "exit_code"} of each warm worker found dead between jobs
    close_s: float = 0.0  # how long ``close`` took (summed, should it run twice)

    def __post_init__(self):
        self._ctx = context(self.device.type)

    def start(self, count: int) -> None:
        """Have at least ``count`` warm workers, each up (device initialised, models warmed).
        They start side by side: a spawned CUDA worker takes seconds to import and warm up."""
        missing = count - sum(not w.fresh for w in self.workers)
        for worker in [self._spawn(fresh=False) for _ in range(missing)]:
            self._expect_up(worker)

    def _spawn(self, fresh: bool) -> Worker:
        """A started worker; a warm one is up only once ``_expect_up`` has read its UP."""
        parent_end, child_end = self._ctx.Pipe()
        spawned = time.monotonic()
        process = self._ctx.Process(target=_serve, args=(child_end, str(self.device), self.ledger, self.env, not fresh,
                                                                self.allocator),
                                    name="colocate-worker", daemon=True)
        process.start()
        child_end.close()
        worker = Worker(process, parent_end, spawned, fresh)
        self.workers.append(worker)
        return worker

    def _expect_up(self, worker: Worker) -> None:
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):  # the worker is gone (a reset when it died mid-send)
            message = None
        if not self._came_up(worker, message):
            self._drop(worker)
            raise RuntimeError(f"a co-location worker failed to start (exit code {worker.process.exitcode})")

    def _came_up(self, worker: Worker, message) -> bool:
        """Whether ``message`` is the worker's UP; if so, its start is kept."""
        if not (isinstance(message, tuple) and message[0] == UP):
            return False
        entered, device_ready, warmed = message[1:]
        self.startups.append(Startup(worker.pid, worker.fresh, entered - worker.spawned, device_ready - entered,
                                     warmed - device_ready))
        return True

    def idle(self, start: bool = True) -> Worker | None:
        """An idle warm worker, started if there is none (None if there is none and not
        ``start``). One that died while idle (the kernel's out-of-memory killer) is dropped."""
        for worker in list(self.workers):
            if worker.job is None and not worker.fresh:
                if worker.process.is_alive():
                    return worker
                self._lose_idle(worker)
        if not start:
            return None
        self.start(sum(not w.fresh for w in self.workers) + 1)
        return self.workers[-1]

    def hand(self, job: Job, worker: Worker | None = None, fresh: bool = False) -> Worker | None:
        """Give ``job`` to ``worker`` (default: an idle warm one, started if none is;
        ``fresh``: a new process that exits after it). A fresh worker's start-up is part
        of its job. A worker found dead at the send (it died after ``idle`` saw it alive)
        is dropped and the job goes to another: where the caller named the worker, only
        to one already idle (None if none is: the caller started none and waits for none)."""
        start = worker is None
        for _ in range(HAND_TRIES):
            if fresh:
                worker = self._spawn(fresh=True)
            worker = worker or self.idle(start)
            if worker is None:
                return None
            assert worker.job is None, "a worker holds one job at a time"
            try:
                worker.conn.send(job)
            except (BrokenPipeError, ConnectionResetError):
                self._lose_idle(worker)
                worker = None
                continue
            worker.job, worker.ready = job, False
            return worker
        raise RuntimeError(f"{HAND_TRIES} co-location workers in a row died before they took a job")

    def go(self, worker: Worker) -> None:
        assert worker.job is not None and worker.job.gated and worker.ready
        worker.conn.send(GO)

    def busy(self) -> list[Worker]:
        return [w for w in self.workers if w.job is not None]

    def wait(self, timeout: float | None = None) -> list[Outcome]:
        """Outcomes of the jobs that ended (within ``timeout`` seconds; None waits
        for the first event). A gated job that became ready is marked, not returned."""
        busy = self.busy()
        if not busy:
            if timeout:
                time.sleep(timeout)
            return []
        waitables = {}
        for worker in busy:
            waitables[worker.conn] = worker
            waitables[worker.process.sentinel] = worker
        outcomes = []
        for handle in wait_any(list(waitables), timeout):
            worker = waitables[handle]
            if worker.job is not None:  # else: both its pipe and its sentinel were ready
                outcome = self._receive(worker)
                if outcome is not None:
                    outcomes.append(outcome)
        return outcomes

    def _receive(self, worker: Worker) -> Outcome | None:
        """The worker's next message: None for UP (a fresh worker started) and READY."""
        job = worker.job
        try:
            if worker.conn.poll():
                message = worker.conn.recv()
                if message == READY:
                    worker.ready = True
                    return None
                if self._came_up(worker, message):
                    return None
                worker.job = None
                self.max_rss_bytes[worker.pid] = message.worker_max_rss_bytes
                if worker.fresh:
                    self._retire(worker)
                return message
        except (EOFError, OSError):  # the worker is gone (a reset when it died mid-send)
            pass
        worker.process.join(timeout=5)
        worker.job = None  # its pipe and its sentinel may both be ready: one outcome, one drop
        self._drop(worker)
        return Outcome(job.task.task_id, worker.pid,
                       error=f"worker process died (exit code {worker.process.exitcode})")

    def _retire(self, worker: Worker) -> None:
        try:
            worker.conn.send(None)
        except OSError:
            pass
        worker.process.join(timeout=10)
        self._drop(worker)

    def _lose_idle(self, worker: Worker) -> None:
        """Drop a worker found dead with no job (no task's record names it), keeping that it was."""
        worker.process.join(timeout=5)
        self.lost_idle.append({"pid": worker.pid, "exit_code": worker.process.exitcode})
        self._drop(worker)

    def _drop(self, worker: Worker) -> None:
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(timeout=5)
        worker.conn.close()
        self.workers.remove(worker)

    def close(self) -> None:
        """Stop every worker: all asked to exit at once (a CUDA worker's teardown takes
        seconds), each killed if it has not exited 10 s after the asking."""
        started = time.monotonic()
        for worker in self.workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for worker in list(self.workers):
            worker.process.join(timeout=max(deadline - time.monotonic(), 0))
            self._drop(worker)
        self.close_s += time.monotonic() - started


# -- in the worker process ---------------------------------------------------------------------

def _serve(conn, device_name: str, ledger: DeviceLedger, env: dict[str, str], warm: bool,
           allocator_of: Callable[[torch.device], Allocator]) -> None:
    # A Ctrl-C, or a budget's SIGINT to the process group, is the parent's to answer:
    # it stops its workers (``close``); a worker would only die mid-task with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    entered = time.monotonic()
    os.environ.update(env)
    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # a no-op on the current device: the context comes with the first call
        torch.cuda.synchronize(device)  # so that its cost is timed here, not in the warm-up or a fresh task
    device_ready = time.monotonic()
    if warm:  # a fresh worker pays its models' first use in its task, as a new process does
        warm_up_models(device)
    allocator = allocator_of(device)
    conn.send((UP, entered, device_ready, time.monotonic()))
    while True:
        job = conn.recv()
        if job is None:
            return
        outcome = _run(job, conn, device, ledger, allocator)
        if outcome is None:  # retired while it waited for GO
            return
        conn.send(outcome)


def _error_text(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _run(job: Job, conn, device: torch.device, ledger: DeviceLedger, allocator: Allocator) -> Outcome | None:
    """The job's outcome; None when the parent retired the worker before a gated job's GO."""
    task = job.task
    outcome = Outcome(task.task_id, os.getpid())
    torch.set_num_threads(job.threads)
    model = None
    try:
        if job.gated:  # a standby prepares on the host what needs no device memory: the model
            model = build_model(task.config)
            if job.pipelined and device.type == "cuda":  # PipeSwitch's transfer reads it from pinned memory
                for tensor in [*model.parameters(), *model.buffers()]:
                    tensor.data = tensor.data.pin_memory()
        held = limit(allocator, job.budget_bytes, job.overhead_bytes)
    except Exception as err:  # noqa: BLE001 - the task's record (was: the worker's death, its cause lost)
        outcome.error = _error_text(err)
        outcome.start = outcome.end = time.monotonic()
        outcome.worker_max_rss_bytes = _max_rss_bytes()
        return outcome
    outcome.ready = time.monotonic()
    if job.gated:
        conn.send(READY)
        message = conn.recv()
        if message is None:
            return None
        if message != GO:
            raise RuntimeError(f"a gated job expects GO, got {message!r}")
    watch = TaskMemoryWatch(job.budget_bytes, ledger, device.type, enforce=True)
    over_at_start, crossings = ledger.snapshot()
    outcome.start = time.monotonic()
    refused = False
    try:
        with watch:
            outcome.result = run_task(task, job.graph, device, model=model, pipelined=job.pipelined)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except BudgetExceeded:
        outcome.error = f"stopped over budget at {watch.record.exceeded_at_bytes} bytes"
    except torch.OutOfMemoryError as err:
        refused = True
        outcome.refused_by = _refused_by(err, job, held, allocator)
    except Exception as err:  # noqa: BLE001 - a task's failure is its record, the worker serves on
        outcome.error = _error_text(err)
    outcome.end = time.monotonic()
    watch.settle()
    _, crossings_after = ledger.snapshot()
    outcome.over_capacity = over_at_start or crossings_after > crossings
    outcome.over_budget = watch.record.exceeded_at_bytes is not None
    if refused:
        # The watch counts an allocation once it has succeeded, so a task refused on the
        # very request that would have passed its budget is recorded within budget too;
        # its watched peak (what was live before that request) shows how near it came. The
        # watch stops a task at its first operator past the budget, so with a budget set a
        # refusal is nearly always this one; ``refused_by`` says whether the cap or the
        # device (full of what the ledger does not count) refused.
        within = job.budget_bytes is not None and not outcome.over_budget
        outcome.error = OUT_OF_MEMORY_WITHIN_BUDGET if within else OUT_OF_MEMORY
    outcome.watched_peak_bytes = watch.record.peak_bytes
    outcome.reserved_growth_bytes = reserved_growth(allocator, held)
    allocator.set_cap(None)  # the cap is the task's: the next job prepares (a model built on the host) without it
    outcome.worker_max_rss_bytes = _max_rss_bytes()
    return outcome


def _refused_by(err: torch.OutOfMemoryError, job: Job, held: int, allocator: Allocator) -> str | None:
    """Which limit refused, read while the refused task's tensors are still live (the
    traceback holds them); None where the readings fail: the task's record, not the worker's end."""
    try:
        cap = None if job.budget_bytes is None else cap_bytes(held, job.budget_bytes, job.overhead_bytes)
        return refused_by(cap, allocator.reserved_bytes(), allocator.free_bytes, requested_range(str(err)))
    except Exception:  # noqa: BLE001 - a diagnosis, never worth the worker
        return None


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
