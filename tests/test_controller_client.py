"""controller/client.py against a real Unix socket whose server loses replies: every
call is safe to repeat, and a retry does not fail on what the lost attempt did."""
from __future__ import annotations

import json
import socket
import threading

import pytest

from controller.client import ControllerClient, ControllerError


class LossyController:
    """Answers each connection's requests with the next scripted replies; None
    closes the connection unanswered (the request was applied, its reply lost)."""

    def __init__(self, path: str, script: list[list[dict | None]]):
        self.requests: list[dict] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen()
        self.thread = threading.Thread(target=self._serve, args=(script,), daemon=True)
        self.thread.start()

    def _serve(self, script):
        for replies in script:
            conn, _ = self.server.accept()
            with conn, conn.makefile("rwb") as stream:
                for reply in replies:
                    self.requests.append(json.loads(stream.readline()))
                    if reply is None:
                        break
                    stream.write((json.dumps(reply) + "\n").encode())
                    stream.flush()
        self.server.close()


def test_a_retried_batch_counts_the_removes_its_lost_attempt_made(tmp_path):
    path = str(tmp_path / "controller.sock")
    fake = LossyController(path, [[None], [{"ok": False, "error": "policy.id: no policy with id 3"},
                                           {"ok": False, "error": "policy.id: no policy with id 5"},
                                           {"ok": True, "ids": [7]}]])
    client = ControllerClient(path, retry_s=5)
    changes = [{"remove": 3}, {"set": {"src": "tbh1", "dst": "tbh2", "queue": 1}}, {"remove": 5}]
    assert client.apply(changes) == [3, 7, 5]
    client.close()
    fake.thread.join(5)
    sent = [request["changes"] for request in fake.requests]
    assert sent == [changes, changes, changes[1:], changes[1:2]]  # each gone remove dropped, the set sent again


def test_a_retried_remove_of_the_id_it_removed_is_done_and_an_unknown_id_is_still_an_error(tmp_path):
    path = str(tmp_path / "controller.sock")
    fake = LossyController(path, [[None], [{"ok": False, "error": "policy.id: no policy with id 4"}],
                                  [{"ok": False, "error": "policy.id: no policy with id 9"}]])
    client = ControllerClient(path, retry_s=5)
    client.remove_policy(4)
    client.close()
    with pytest.raises(ControllerError, match=r"^policy.id: no policy with id 9$"):  # a first attempt: not retried
        client.remove_policy(9)
    with pytest.raises(ControllerError, match=r"^apply: controller unreachable"):
        ControllerClient(path, retry_s=0.3).apply([{"remove": 1}])
    fake.thread.join(5)
    assert [r.get("id") for r in fake.requests] == [4, 4, 9]


def test_a_retry_after_an_answered_attempt_does_not_take_an_unknown_id_as_removed(tmp_path):
    """The first attempt was answered ("fabric not ready": nothing done), so the retry's
    "no policy with id 4" is the caller's error, not the work of a lost attempt."""
    path = str(tmp_path / "controller.sock")
    fake = LossyController(path, [[{"ok": False, "error": "fabric not ready: 3/4 switches"},
                                   {"ok": False, "error": "policy.id: no policy with id 4"}]])
    client = ControllerClient(path, retry_s=5)
    with pytest.raises(ControllerError, match=r"^policy.id: no policy with id 4$"):
        client.remove_policy(4)
    client.close()
    fake.thread.join(5)
    assert [r.get("id") for r in fake.requests] == [4, 4]


def test_a_program_finds_its_runs_controller_in_its_environment(monkeypatch):
    from controller.client import CONTROLLER_ENV, ControllerClient, ControllerError
    monkeypatch.setenv(CONTROLLER_ENV, "/run/trainbed/some-run.sock")
    assert ControllerClient.from_env(retry_s=1).path == "/run/trainbed/some-run.sock"
    monkeypatch.delenv(CONTROLLER_ENV)
    with pytest.raises(ControllerError, match=f"^{CONTROLLER_ENV} is not set"):
        ControllerClient.from_env()
