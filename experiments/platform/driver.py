"""The skeleton of every workload kind's driver: task processes, the event loop, the close.

A driver starts its tasks' processes in their hosts' namespaces (``spawn``), hears
their events on the management channel (``experiments.platform.channel``) and answers them
(``handle``) until its kind says it is done; ``close`` stops what is still running.
Each kind keeps its own logic (what an event means, when a task's exit is a
failure, what to stop) in its subclass.
"""
from __future__ import annotations

import queue
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Iterable

from experiments import store
from experiments.platform.channel import DriverError, EventServer
from hosts.messages import command

STOP_GRACE_S = 15.0  # at close, how long stopped tasks get to exit before they are killed
PROCESS_POLL_S = 1.0  # how often the loop looks at the task processes' exit codes


class Driver(ABC):
    """The event loop of a workload's tasks and their processes.

    Invariants: every event heard goes to ``events.jsonl`` in arrival order, with the
    driver's own notes between them, also those still queued at ``close``; the
    kind's decisions go to ``decisions.jsonl``; both are closed by ``close``, which is
    safe after a ``run`` that raised. The loop ends when ``done()`` or with a
    ``DriverError``: the time limit passed (``work_name`` did not finish), or a
    task's process exited in a way its kind calls a failure (named, with its host).
    """

    work_name = "the workload"  # what did not finish within the time limit

    def __init__(self, em, run_dir: Path, events_path: str, time_limit_s: float):
        self.em, self.run_dir, self.time_limit_s = em, run_dir, time_limit_s
        self.server = EventServer(events_path)
        self.events_out = open(run_dir / store.EVENTS, "w")
        self.decisions_out = open(run_dir / store.DECISIONS, "w")
        self.processes: dict[str, subprocess.Popen] = {}  # task id -> its process
        self.hosts: dict[str, str] = {}  # task id -> the host it runs on

    # --- what each kind says -----------------------------------------------------
    @abstractmethod
    def done(self) -> bool:
        """The workload finished: the loop ends."""

    @abstractmethod
    def handle(self, message: dict) -> None:
        """Take one event from a task (already logged); raise ``DriverError`` if the
        workload cannot go on."""

    @abstractmethod
    def task_exited(self, task: str, exit_code: int) -> bool:
        """Take the exit of a task's process (seen at every poll while the loop runs);
        True if it is a failure that ends the run."""

    @abstractmethod
    def stop_running(self) -> None:
        """At close: tell every task that may still run to stop (``send_stop``)."""

    def due(self, now: float) -> float | None:
        """Carry out what the kind timed for ``now`` (``time.monotonic()``) or earlier;
        return when the next timed thing is due (None: nothing timed)."""
        return None

    def caught_up(self) -> None:
        """Called whenever every event heard so far was handled: a kind that answers a
        burst of events once answers it here."""

    def failure(self, report: str) -> str:
        """The message of a task failure's ``DriverError``; a kind may name a root cause."""
        return f"{report}; see tasks.log"

    # --- tasks and logs ------------------------------------------------------------
    def log(self, message: dict) -> None:
        self.events_out.write(store.json_line(message))

    def log_decision(self, record: dict) -> None:
        self.decisions_out.write(store.json_line(record))

    def note(self, kind: str, **fields) -> None:
        """The driver's own event, stamped now, between the tasks' events."""
        self.log({"kind": kind, "t": time.time(), **fields})

    def spawn(self, task: str, host: str, args: list[str]) -> None:
        """Start a task's process in ``host``'s namespace; its output goes to ``tasks.log``."""
        with open(self.run_dir / "tasks.log", "ab") as log:
            self.processes[task] = self.em.popen(host, args, stdout=log, stderr=log)
        self.hosts[task] = host

    def send_stop(self, tasks: Iterable[str]) -> None:
        """Tell each task to stop; one not connected or already gone is left to its exit."""
        for task in tasks:
            try:
                self.server.send(task, command("stop"))
            except DriverError:
                pass

    # --- the loop ------------------------------------------------------------------
    def run(self) -> None:
        """Handle events until ``done()``; between them, what is ``due`` and, every
        ``PROCESS_POLL_S``, the processes' exit codes."""
        t0 = time.monotonic()
        deadline = t0 + self.time_limit_s
        next_poll = t0 + PROCESS_POLL_S
        while not self.done():
            now = time.monotonic()
            next_due = self.due(now)
            if now > deadline:
                raise DriverError(f"time_limit_s: {self.work_name} did not finish within {self.time_limit_s:g} s")
            wake = min(deadline, next_poll, *([] if next_due is None else [next_due]))
            try:
                message = self.server.inbox.get(timeout=max(0.0, wake - time.monotonic()))
            except queue.Empty:
                message = None
            if message is not None:
                self.log(message)
                self.handle(message)
            if self.server.inbox.empty():
                self.caught_up()
            if time.monotonic() >= next_poll:  # not per event: thousands of events, ~100 processes
                self.check_processes()
                next_poll = time.monotonic() + PROCESS_POLL_S

    def check_processes(self) -> None:
        """Raise ``DriverError`` naming the first task (and its host) whose process
        exited in a way its kind calls a failure."""
        for task, proc in self.processes.items():
            code = proc.poll()
            if code is not None and self.task_exited(task, code):
                raise DriverError(self.failure(f"task {task} on {self.hosts[task]} exited with {code}"))

    def close(self) -> None:
        """Stop every task still running; give them ``STOP_GRACE_S`` in all to exit,
        then kill the rest; log the events still queued; close the channel and logs."""
        self.stop_running()
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        while not self.server.inbox.empty():
            self.log(self.server.inbox.get())
        self.server.close()
        self.events_out.close()
        self.decisions_out.close()
