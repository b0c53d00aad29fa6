"""Client of the controller's management socket: what schedulers and the runner call.

The controller may be restarted mid-run (the runner supervises it and it recovers
its state from disk), so a call that finds the socket closed, or the fabric not
ready yet, reconnects and retries until ``retry_s`` has passed, then fails with a
one-line ``ControllerError``. Every call is safe to repeat: a set of the same flow
keeps its id, and a retried remove of a policy that the lost attempt already
removed counts as done.
"""
from __future__ import annotations

import json
import os
import socket
import time

RETRY_INTERVAL_S = 0.2
# The run's controller socket, in every process a programs run starts on a host: the
# user's own scheduler sets policies through it as the project's drivers do.
CONTROLLER_ENV = "TRAINBED_CONTROLLER"
NO_POLICY = "policy.id: no policy with id "  # the controller's answer to a remove of an unknown id


class ControllerError(RuntimeError):
    pass


def _removed_before(problem: str, lost: bool) -> int | None:
    """The policy id a retried call found already gone: an earlier attempt whose request
    reached the controller and whose reply was ``lost`` removed it. None where none was
    lost (an unknown id is the caller's error)."""
    if not lost or not problem.startswith(NO_POLICY):
        return None
    try:
        return int(problem[len(NO_POLICY):])
    except ValueError:
        return None


class ControllerClient:
    def __init__(self, path: str, timeout: float = 30.0, retry_s: float = 30.0):
        self.path = path
        self.timeout = timeout
        self.retry_s = retry_s
        self.sock: socket.socket | None = None
        self.stream = None
        self.sent = False  # whether the current attempt's request was written whole

    @classmethod
    def from_env(cls, **kwargs) -> "ControllerClient":
        """The client of the run this process was started in (``CONTROLLER_ENV``)."""
        path = os.environ.get(CONTROLLER_ENV)
        if not path:
            raise ControllerError(f"{CONTROLLER_ENV} is not set: a programs run sets it in the processes it starts")
        return cls(path, **kwargs)

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock, self.stream = sock, sock.makefile("rwb")

    def _exchange(self, request: dict) -> dict:
        if self.sock is None:
            self._connect()
        self.stream.write((json.dumps(request) + "\n").encode())
        self.stream.flush()
        self.sent = True  # from here on a failure may have lost the reply of a request carried out
        line = self.stream.readline()
        if not line:
            raise ConnectionError("controller closed the connection")
        return json.loads(line)

    def call(self, op: str, retry_s: float | None = None, **fields) -> dict:
        deadline = time.monotonic() + (self.retry_s if retry_s is None else retry_s)
        attempts = 0
        changes = fields.get("changes") if op == "apply" and isinstance(fields.get("changes"), list) else []
        done: set[int] = set()  # the batch's removes that an attempt which lost its reply made
        lost = False  # an attempt's request reached the controller and its reply did not come back
        while True:
            attempts += 1
            self.sent = False
            try:
                reply = self._exchange({"op": op, **fields})
            except (OSError, ValueError) as err:  # refused, reset, closed, timed out, torn reply
                self.close()
                lost = lost or self.sent
                problem = f"controller unreachable ({err})"
            else:
                if reply.get("ok"):
                    if done:  # each change's id in its place, the removes already made included
                        ids = iter(reply["ids"])
                        reply["ids"] = [changes[i]["remove"] if i in done else next(ids) for i in range(len(changes))]
                    return reply
                problem = reply.get("error", "unknown error")
                gone = _removed_before(problem, lost)
                if gone is not None and op == "remove_policy" and fields.get("id") == gone:
                    return {"ok": True}
                if gone is not None and op == "apply":
                    index = next((i for i, change in enumerate(changes)
                                  if i not in done and isinstance(change, dict) and change.get("remove") == gone), None)
                    if index is not None:  # a set of the same flow keeps its id: the rest is sent again
                        done.add(index)
                        fields["changes"] = [change for i, change in enumerate(changes) if i not in done]
                        continue
                if not problem.startswith("fabric not ready"):
                    raise ControllerError(problem)
            if time.monotonic() >= deadline:
                raise ControllerError(f"{op}: {problem}; gave up after {attempts} attempt(s)")
            time.sleep(RETRY_INTERVAL_S)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the socket answers and every switch has its forwarding rules."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                status = self.call("status", retry_s=0)
                if status["switches_ready"] == status["switches_expected"]:
                    return
                last = f"{status['switches_ready']}/{status['switches_expected']} switches"
            except ControllerError as err:
                last = str(err)
            time.sleep(RETRY_INTERVAL_S)
        raise ControllerError(f"controller not ready after {timeout:.0f} s: {last}")

    def set_policy(self, **policy) -> int:
        return self.call("set_policy", policy=policy)["id"]

    def remove_policy(self, policy_id: int) -> None:
        self.call("remove_policy", id=policy_id)

    def apply(self, changes: list[dict]) -> list[int]:
        """One batch: [{"set": {policy fields}} | {"remove": id}, ...] -> the id of each."""
        return self.call("apply", changes=changes)["ids"]

    def policies(self) -> list[dict]:
        return self.call("list_policies")["policies"]

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.stream.close()
            except OSError:
                pass  # a broken pipe on flush: the connection is gone either way
            self.sock.close()
        self.sock = self.stream = None
