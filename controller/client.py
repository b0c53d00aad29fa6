"""Client of the controller's management socket: what schedulers and the runner call."""
from __future__ import annotations

import json
import socket
import time


class ControllerError(RuntimeError):
    pass


class ControllerClient:
    def __init__(self, path: str, timeout: float = 30.0):
        self.path = path
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.stream = None

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock, self.stream = sock, sock.makefile("rwb")

    def call(self, op: str, **fields) -> dict:
        if self.sock is None:
            self._connect()
        self.stream.write((json.dumps({"op": op, **fields}) + "\n").encode())
        self.stream.flush()
        line = self.stream.readline()
        if not line:
            raise ControllerError(f"controller closed the connection during {op}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ControllerError(reply.get("error", "unknown error"))
        return reply

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the socket answers and every switch has its forwarding rules."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                status = self.call("status")
                if status["switches_ready"] == status["switches_expected"]:
                    return
                last = f"{status['switches_ready']}/{status['switches_expected']} switches"
            except (OSError, ControllerError) as err:
                last = str(err)
                self.close()
            time.sleep(0.2)
        raise ControllerError(f"controller not ready after {timeout:.0f} s: {last}")

    def set_policy(self, **policy) -> int:
        return self.call("set_policy", policy=policy)["id"]

    def remove_policy(self, policy_id: int) -> None:
        self.call("remove_policy", id=policy_id)

    def policies(self) -> list[dict]:
        return self.call("list_policies")["policies"]

    def close(self) -> None:
        if self.sock is not None:
            self.stream.close()
            self.sock.close()
        self.sock = self.stream = None
