"""experiments.platform.driver's loop, process poll and close, with a toy kind, fake
processes and the real management channel (a unix socket in the test's directory)."""
from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest

from experiments.platform import driver as driver_mod
from experiments.platform.channel import DriverError
from experiments.platform.driver import Driver
from hosts.messages import decode, encode, event


class FakeProcess:
    """A task's process: exits with ``code`` when told (``exit``), or never; ``kill`` ends it."""

    def __init__(self):
        self.code: int | None = None
        self.killed = False

    def poll(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        if self.code is None:
            time.sleep(timeout or 0)
            raise subprocess.TimeoutExpired("task", timeout)
        return self.code

    def kill(self) -> None:
        self.killed, self.code = True, -9


class FakeEmulation:
    def __init__(self):
        self.started: list[tuple[str, list[str], str]] = []  # host, args, where its output goes

    def popen(self, host: str, args: list[str], stdout, stderr) -> FakeProcess:
        assert stdout is stderr
        self.started.append((host, args, stdout.name))
        return FakeProcess()


class ToyDriver(Driver):
    """Done once it saw a "bye"; a task's non-zero exit fails it unless it was stopped."""

    work_name = "the toy work"

    def __init__(self, run_dir, time_limit_s: float = 5.0):
        super().__init__(FakeEmulation(), run_dir, str(run_dir / "events.sock"), time_limit_s)
        self.handled: list[str] = []
        self.caught_up_after: list[int] = []  # events handled at each caught_up
        self.stopped: list[str] = []

    def done(self) -> bool:
        return "bye" in self.handled

    def handle(self, message: dict) -> None:
        self.handled.append(message["kind"])
        if message["kind"] == "hello":
            self.note("greeted", task=message["task"])

    def caught_up(self) -> None:
        self.caught_up_after.append(len(self.handled))

    def task_exited(self, task: str, exit_code: int) -> bool:
        return exit_code != 0 and task not in self.stopped

    def stop_running(self) -> None:
        self.stopped += list(self.processes)
        self.send_stop(self.processes)


@pytest.fixture
def toy(tmp_path):
    made = []
    yield lambda **kw: made.append(ToyDriver(tmp_path, **kw)) or made[-1]
    for d in made:
        if not d.events_out.closed:
            d.close()


def _events(d: Driver) -> list[dict]:
    return [json.loads(line) for line in (d.run_dir / "events.jsonl").read_text().splitlines()]


def test_a_burst_of_events_is_handled_and_logged_in_order_then_answered_once(toy):
    d = toy()
    for kind in ("hello", "compute", "bye"):
        d.server.inbox.put(event(kind, "h1", "t1"))
    d.run()
    assert d.handled == ["hello", "compute", "bye"]
    assert d.caught_up_after == [3]  # not between the events of the burst
    d.close()
    assert [(e["kind"], e["task"]) for e in _events(d)] == [("hello", "t1"), ("greeted", "t1"), ("compute", "t1"),
                                                            ("bye", "t1")]


def test_the_loop_wakes_for_what_is_due_without_events(toy, monkeypatch):
    monkeypatch.setattr(driver_mod, "PROCESS_POLL_S", 30.0)  # a wake-up only at the process poll is unmistakable
    d = toy()
    fired: list[float] = []
    next_at = [time.monotonic() + 0.05]

    def due(now):
        if now >= next_at[0]:
            fired.append(now)
            next_at[0] = now + 0.05
        if len(fired) == 2:
            d.handled.append("bye")
        return next_at[0]
    d.due = due
    started = time.monotonic()
    d.run()
    assert len(fired) == 2 and time.monotonic() - started < 10  # well before the first process poll


def test_the_time_limit_ends_the_loop_with_an_error_saying_what_did_not_finish(toy):
    d = toy(time_limit_s=0.2)
    with pytest.raises(DriverError, match=r"^time_limit_s: the toy work did not finish within 0.2 s$"):
        d.run()


def test_a_failed_task_process_is_named_with_its_host_and_a_clean_exit_is_not(toy, monkeypatch):
    monkeypatch.setattr(driver_mod, "PROCESS_POLL_S", 0.02)
    d = toy(time_limit_s=2.0)
    d.spawn("t1", "h1", ["task", "--one"])
    d.spawn("t2", "h2", ["task", "--two"])
    assert d.em.started == [("h1", ["task", "--one"], str(d.run_dir / "tasks.log")),
                            ("h2", ["task", "--two"], str(d.run_dir / "tasks.log"))]
    d.processes["t1"].code = 0
    d.processes["t2"].code = 3
    with pytest.raises(DriverError, match=r"^task t2 on h2 exited with 3; see tasks.log$"):
        d.run()
    d.stopped.append("t2")  # a stopped task's exit is no failure
    d.check_processes()


def test_a_kinds_failure_message_is_used_for_a_failed_process(toy):
    d = toy()
    d.failure = lambda report: f"task t0 was killed first; {report}"
    d.spawn("t1", "h1", ["task"])
    d.processes["t1"].code = 1
    with pytest.raises(DriverError, match=r"^task t0 was killed first; task t1 on h1 exited with 1$"):
        d.check_processes()


def test_close_stops_the_tasks_kills_what_stays_and_logs_what_is_still_queued(toy, monkeypatch):
    monkeypatch.setattr(driver_mod, "STOP_GRACE_S", 0.1)
    d = toy()
    d.spawn("t1", "h1", ["task"])
    d.spawn("t2", "h2", ["task"])
    d.processes["t1"].code = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as task:  # t2 is connected, t1 is not
        task.connect(d.server.path)
        task.sendall(encode(event("hello", "h2", "t2")))
        deadline = time.monotonic() + 5
        while d.server.inbox.empty() and time.monotonic() < deadline:  # its hello is heard
            time.sleep(0.01)
        d.server.inbox.put(event("bye", "h1", "t1"))
        d.close()
        assert decode(task.makefile("rb").readline()) == {"cmd": "stop"}
    assert d.stopped == ["t1", "t2"]
    assert not d.processes["t1"].killed and d.processes["t2"].killed
    assert [e["kind"] for e in _events(d)] == ["hello", "bye"]  # heard, never handled, still logged
    assert d.handled == [] and d.events_out.closed and d.decisions_out.closed
    assert not (d.run_dir / "events.sock").exists()


def test_an_event_naming_no_task_is_a_bad_message_and_the_reader_goes_on(toy):
    """A hello without its task used to kill the connection's reader (a KeyError),
    losing every later event of that task."""
    d = toy()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as task:
        task.connect(d.server.path)
        task.sendall(b'{"kind": "hello", "host": "h2"}\n' + encode(event("hello", "h2", "t2")))
        heard = [d.server.inbox.get(timeout=5), d.server.inbox.get(timeout=5)]
    assert heard[0]["kind"] == "error" and heard[0]["error"] == "bad message: task: an event names the task that sent it"
    assert heard[1]["kind"] == "hello" and heard[1]["task"] == "t2" and "t2" in d.server.conns
    d.close()
