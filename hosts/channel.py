"""A host program's end of the management channel (``hosts.messages``) and its exit.

Every task process on an emulated host (cojob workers and PSs, DGL training tasks)
holds one ``Task``: it connects to the run's unix socket, emits events, serves the
driver's commands, and ends the process exactly once, with ``bye`` (exit 0) or one
``error`` line (exit 1).
"""
from __future__ import annotations

import os
import socket
import sys
import threading

from hosts.messages import MessageError, decode, encode, event


class Task:
    """This process's channel to the driver and its exit.

    Threads share the events socket, so writes are serialized. The first of ``fail``
    (error, exit 1) and ``finish`` (bye, exit 0) decides the exit status: it takes
    ``_exit_lock`` for good and ends the process with os._exit (threads blocked in
    recv cannot be joined; the kernel closes every socket), so a later call blocks
    until the process is gone."""

    def __init__(self, events_path: str, host: str, task_id: str, program: str = "task"):
        self.host, self.task_id, self.program = host, task_id, program
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(events_path)
        self._send_lock = threading.Lock()
        self._exit_lock = threading.Lock()

    def emit(self, kind: str, **fields) -> None:
        line = encode(event(kind, self.host, self.task_id, **fields))
        with self._send_lock:
            try:
                self.sock.sendall(line)
            except OSError as err:
                self._log(f"events socket: {err}")
                os._exit(1)

    def fail(self, message: str) -> None:
        message = " ".join(message.split("\n", 1)[0].split()) or "failed"  # one line (DGL errors carry stacks)
        self._exit_lock.acquire()
        self._log(message)
        self.emit("error", error=message)
        os._exit(1)

    def finish(self) -> None:
        self._exit_lock.acquire()
        self.emit("bye")
        os._exit(0)

    def read_commands(self, on_run_stage=None) -> None:
        """Serve the driver's commands until ``stop`` (finish) or the socket closes (fail)."""
        for line in self.sock.makefile("rb"):
            try:
                message = decode(line)
            except MessageError as err:
                self.fail(f"bad command from the driver: {err}")
            if message.get("cmd") == "stop":
                self.finish()
            elif message.get("cmd") == "run_stage" and on_run_stage is not None:
                on_run_stage(message)
        self.fail("events socket closed (driver gone)")

    def _log(self, message: str) -> None:
        print(f"{self.program} {self.task_id}: {message}", file=sys.stderr, flush=True)


def spawn(task: Task, where: str, target, *args) -> threading.Thread:
    """Run ``target`` in a thread; any exception fails the whole task, naming ``where``."""
    def guarded():
        try:
            target(*args)
        except Exception as err:  # noqa: BLE001 - every failure becomes one `error` line
            task.fail(f"{where}: {type(err).__name__}: {err}")
    thread = threading.Thread(target=guarded, name=where, daemon=True)
    thread.start()
    return thread
