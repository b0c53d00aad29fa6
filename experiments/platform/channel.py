"""The driver's end of the management channel (``hosts.messages``): the run's unix
socket that host programs connect to, and the driver's one error type.

Events from every task land in one queue (``inbox``) in arrival order; commands go
to a task by its id once it said hello. The socket is root-only (0600), like the
controller's.
"""
from __future__ import annotations

import os
import queue
import socket
import threading
import time
from pathlib import Path

from hosts.messages import MessageError, decode, encode


class DriverError(RuntimeError):
    """The workload could not go on (a task failed, the time limit passed)."""


class EventServer:
    """The run's management socket: tasks connect, say hello, send events, get commands."""

    def __init__(self, path: str):
        self.path = path
        self.inbox: queue.Queue = queue.Queue()
        self.conns: dict[str, socket.socket] = {}
        self.lock = threading.Lock()
        Path(path).unlink(missing_ok=True)
        old_umask = os.umask(0o177)  # root only, like the controller's socket
        try:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(path)
        finally:
            os.umask(old_umask)
        self.sock.listen(256)
        threading.Thread(target=self._accept, daemon=True, name="events-accept").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._read, args=(conn,), daemon=True, name="events-read").start()

    def _read(self, conn: socket.socket) -> None:
        try:
            self._read_lines(conn)
        except OSError:
            pass  # a task that dies resets its connection; its exit code tells the driver

    def _read_lines(self, conn: socket.socket) -> None:
        with conn.makefile("rb") as stream:
            for line in stream:
                try:
                    message = decode(line)
                except MessageError as err:
                    self.inbox.put({"kind": "error", "t": time.time(), "task": "?", "error": f"bad message: {err}"})
                    continue
                if message.get("kind") == "hello":
                    with self.lock:
                        self.conns[message["task"]] = conn
                self.inbox.put(message)

    def send(self, task: str, message: dict) -> None:
        with self.lock:
            conn = self.conns.get(task)
        if conn is None:
            raise DriverError(f"task {task}: not connected")
        try:
            conn.sendall(encode(message))
        except OSError as err:
            raise DriverError(f"task {task}: command lost ({err})") from None

    def close(self) -> None:
        self.sock.close()
        with self.lock:
            for conn in self.conns.values():
                conn.close()
        Path(self.path).unlink(missing_ok=True)
