"""The management channel between host programs and the run's driver: one schema.

Host programs (cojob tasks, DGL tasks) run in emulated hosts' namespaces but
talk to the driver over a unix socket of the run (``/run/trainbed/<run id>.events.sock``),
never over the emulated data network: the namespaces share the machine's file
system, not its routes. Each message is one JSON object on one line.

Host -> driver (events; every event carries ``kind``, ``t`` = time.time() when it
happened, ``host`` and ``task``, the sender's task id, e.g. "c0j3/w1"):
- ``hello``: a task is up; ``role`` ("worker", "ps", ...), ``job``, ``pid``.
- ``flow_start`` / ``flow_end``: one transfer on the data network; ``flow`` (unique
  id), ``src``, ``dst`` (hosts), ``bytes``, ``phase`` ("push", "pull", ...),
  ``iteration``, ``src_port`` and ``dst_port`` (the TCP connection's, in the flow's
  direction: what a per-flow policy matches). Cojob tasks add ``job`` and ``stage``;
  GNN tasks add ``src_task`` and ``dst_task`` on the start, and report the end from
  the receiver, with ``flow`` and ``bytes`` only (``hosts.gnn.wire``).
- ``iteration_end``: a worker finished an iteration; ``iteration``; cojob workers add
  ``job`` and ``stage``, GNN workers ``loss``, ``val_accuracy`` or null, ``compute_s``,
  ``sync_s``, ``wait_s``.
- ``compute``: a task's execution in one iteration; ``iteration``, ``seconds``. GNN
  tasks add what a model of the job needs: a graph store reports each request it
  served (``peer``, ``step`` = the reply's phase, ``request_bytes``, ``reply_bytes``),
  a sampler its compute after each round of replies (``rounds``: L hops, then the
  features; ``eval_rounds`` for the evaluation batch), worker 0 its evaluation
  (``eval_s``, on evaluation iterations).
- ``stage_done``: a worker ran every iteration of the stage it was given; ``job``, ``stage``.
- ``error``: a task failed; ``error`` is one line. The task exits non-zero after it.
- ``bye``: a task is stopping normally.

Driver -> host (commands; ``cmd``):
- ``run_stage``: ``stage``, ``iterations``: run that many iterations, then report ``stage_done``.
- ``stop``: finish (a killed job or the end of the run); the task sends ``bye`` and exits 0.

The driver writes every event it receives, and its own decisions, to the run's
``events.jsonl`` (one message per line, in arrival order) so that metrics are
computed afterwards from data, not from the live run.
"""
from __future__ import annotations

import json
import time

EVENTS = ("hello", "flow_start", "flow_end", "iteration_end", "stage_done", "compute", "error", "bye")
COMMANDS = ("run_stage", "stop")


class MessageError(ValueError):
    """A line on the management channel is not a message of this schema."""


def event(kind: str, host: str, task: str, **fields) -> dict:
    if kind not in EVENTS:
        raise MessageError(f"kind: unknown event {kind!r}")
    return {"kind": kind, "t": time.time(), "host": host, "task": task, **fields}


def command(cmd: str, **fields) -> dict:
    if cmd not in COMMANDS:
        raise MessageError(f"cmd: unknown command {cmd!r}")
    return {"cmd": cmd, **fields}


def encode(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes | str) -> dict:
    try:
        message = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise MessageError(f"not JSON: {err}") from None
    if not isinstance(message, dict) or not ({"kind", "cmd"} & message.keys()):
        raise MessageError("a message is an object with `kind` (event) or `cmd` (command)")
    if "kind" in message and message["kind"] not in EVENTS:
        raise MessageError(f"kind: unknown event {message['kind']!r}")
    if "kind" in message and not (isinstance(message.get("task"), str) and message["task"]):
        raise MessageError("task: an event names the task that sent it")  # the driver keys its tasks by it
    if "cmd" in message and message["cmd"] not in COMMANDS:
        raise MessageError(f"cmd: unknown command {message['cmd']!r}")
    return message
