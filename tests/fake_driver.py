"""The run's driver as host programs see it, for tests of task processes without a
fabric: a unix socket server that logs every event in arrival order and sends commands."""
from __future__ import annotations

import socket
import threading

from hosts.messages import command, decode, encode


class FakeDriver:
    """The run's driver as tasks see it. ``events`` is every event in arrival order."""

    def __init__(self, path: str):
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(64)
        self.events: list[dict] = []
        self.conns: dict[str, socket.socket] = {}
        self.changed = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        for line in conn.makefile("rb"):
            message = decode(line)
            with self.changed:
                if message["kind"] == "hello":
                    self.conns[message["task"]] = conn
                self.events.append(message)
                self.changed.notify_all()

    def send(self, task: str, cmd: str, **fields):
        self.conns[task].sendall(encode(command(cmd, **fields)))

    def wait_for(self, predicate, timeout_s: float = 10.0) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.events), timeout_s), \
                f"timed out; last events: {self.events[-5:]}"

    def count(self, kind: str, task: str | None = None) -> int:
        return sum(e["kind"] == kind and (task is None or e["task"] == task) for e in self.events)

    def die(self):
        """What the tasks see when the driver process dies: every connection closes."""
        self.server.close()
        for conn in list(self.conns.values()):
            conn.shutdown(socket.SHUT_RDWR)

    def of(self, kind: str) -> list[dict]:
        with self.changed:
            return [e for e in self.events if e["kind"] == kind]
