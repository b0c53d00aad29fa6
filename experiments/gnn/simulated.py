"""The simulator backend of the gnn kind: one GNN training job as a discrete-event model,
for a placement and a rate policy, fed by a profile of the job.

It does what the task programs do (``hosts.gnn.task``), per iteration n:

- sampler i (of worker i // S) takes a credit: it runs at most ``PREFETCH``
  mini-batches ahead of its worker, which returns one credit per mini-batch it has
  computed on. Then, for each of the L hops and then the features (L + 1 rounds), it
  sends a request to every store the profile shows it asked in that round, one after
  the other, waits for all their replies and computes (the profiled round's compute);
  then it sends the mini-batch to its worker. Worker 0's first sampler does the same
  for the evaluation batch on evaluation iterations (``hosts.gnn.is_eval``).
- a store answers each request after the profiled compute of that request;
- worker w waits for its S mini-batches, computes, returns a credit to each sampler,
  synchronises (PS: its gradient shard to every PS at once, then every PS's
  parameters; ring: 2(W-1) steps, each a chunk to the next worker while it takes one
  from the previous), and worker 0 then waits for the evaluation batch and evaluates;
- PS p waits once for worker 0's initial parameters, then per iteration for every
  worker's gradient, computes, and sends the parameters to every worker at once.

Transfers are every frame the tasks send, with the profiled bytes: requests and
replies of every round, mini-batches, evaluation batches, gradients, parameters,
ring chunks and the initial parameters; credits (a header) cost nothing. A task
pair's frames cross one TCP connection, so they go one at a time, in order. A send
returns once at most ``SEND_BACKLOG_BYTES`` of its connection are undelivered (the
socket's send buffer holds the rest; measured on the fabric, see the constant): a task waits for a large frame, not for a small one. Same-machine
transfers take no time.

Network: ``experiments.sim.network.FluidNetwork`` over the fabric's ports
(``experiments.sim.paths.Paths``: host links, on a leaf-spine the spine links that
can fill), a frame's bytes counted on the wire (TCP/IP/Ethernet headers at the
spec's MTU). Scheduling runs the emulation's own coordinator
(``experiments.gnn.coordinator.RateCoordinator``, OES or a baseline of
``oes.rate_policies``): it hears the same ``flow_start`` (at a send) and ``flow_end``
(at the delivery) the tasks report, for the reported frames (all but requests)
between machines, and after every instant that changed the active flows its
rates are installed on the flows' connections as on the fabric
(``installed_mbps``; a policy outlives its flow). An installed rate is a port of the
connection's own in front of its path (the sender NIC's per-flow htb class, rate =
ceil); beyond it every flow shares every port max-min, unshaped requests included
(htb serves each class below its guaranteed rate in turn, the default classes' 2%
too, so a request is not held behind a shaped transfer that fills the NIC).
``default`` installs nothing: max-min everywhere, what TCP's sharing approaches.
``fair`` installs max-min rates.

Readings and limits, to judge a prediction by:
- compute is replayed as profiled on the emulation's box, CPU contention included:
  iteration n takes profiled iteration n mod P, the k-th evaluation the k-th
  profiled one mod E. A store's profiled compute includes its wait for its one
  sampling thread, so store contention is as in the profiled placement.
- tasks start at 0 together; no TCP dynamics, losses or rate-update latency
  (the emulation's 21-27 ms median in training); a starved flow gets nothing (no 2% guarantee).
- a profile is of one job (``JOB_FIELDS`` and the machine count must match); the
  placement, the topology's rates and the scheduler may differ. A placement that
  puts a pair on two machines that the profiled one kept together needs that pair's
  bytes, which only a ``profile: true`` run reports.

``trainbed simulate SPEC`` (``simulate_spec``) needs ``simulation.profile`` in the
spec; ``predict`` is the model as a function; ``compare(run_dir)`` sets a recorded
emulated run's iteration time beside the model's (``python -m
experiments.gnn.simulated RUN... [--profile PROFILE]`` prints a table of them).
"""
from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments import store
from experiments.errors import SpecError, one_line
from experiments.gnn import metrics
from experiments.gnn import spec as gnn_spec
from experiments.gnn.coordinator import RateCoordinator, installed_mbps, oes_machines
from experiments.platform.run import simulate_workload
from experiments.platform.spec import fabric_of
from experiments.results import load_summary, summary_verdict
from experiments.sim.network import FluidNetwork
from experiments.sim.paths import Paths
from experiments.validation import read_yaml, shown_path
from hosts.gnn import PREFETCH, is_eval, task_kind
from topologies.fabric import simulated_rates
from topologies.units import mbps_to_bytes_per_s

# The bytes of a connection still undelivered when a send returns, as measured on the
# fabric: the median over 2,583 mini-batch sends of every kept OES run (quartiles
# 1.33-2.41 MB; measurements/model-sendbuffer-2026-11-27). Linux lets the send buffer
# hold that much: BBR autotunes it to 3 windows (capped by tcp_wmem's 4 MB). (It was 320 KB,
# 2 x 10 initial segments, until 2026-11-27: the model then waited for a mini-batch's
# last 0.3 MB where the tasks wait for its last 1.7, and over-predicted placements
# that put mini-batches on slow links by 9-12%.)
SEND_BACKLOG_BYTES = 1_660_000
TCP_IP_HEADERS = 52  # IPv4 20 + TCP 20 + timestamps 12: a segment carries MTU - 52 bytes of data
ETHERNET_HEADER = 14  # counted by htb and the links' rates
PROGRESS_EVERY_S = 10.0


def wire_factor(mtu: int) -> float:
    """Bytes on the wire per payload byte at this MTU (TCP/IP and Ethernet headers)."""
    return 1 + (TCP_IP_HEADERS + ETHERNET_HEADER) / (mtu - TCP_IP_HEADERS)
JOB_FIELDS = ("graph", "fanouts", "batch_size", "workers", "samplers_per_worker", "sync", "ps", "hidden",
              "eval_nodes")  # what decides the job's transfers; a profile is of one such job

Wait = Callable[[Callable[[], None]], None]  # arms a wait: calls its argument once satisfied


def compute_factors(spec: dict) -> dict[str, float]:
    """task -> the compute factor of its host in a resolved spec (1 in a spec resolved
    before there were factors: a profile's)."""
    workload = spec["workload"]
    factors = workload.get("compute_factor", {})
    return {t: factors.get(host, 1.0) for t, host in workload["placement"]["tasks"].items()}


class ProfileError(ValueError):
    """A profile the model cannot use; the message is one line naming the profile."""


@dataclass(frozen=True)
class Profile:
    """A profile as the model reads it (``parse``: from ``metrics.profile``'s dict).

    ``requests``: (sampler, profiled iteration, step) -> the stores asked in store
    order, each (store, request bytes, reply bytes, compute s); ``bytes``: (src task,
    dst task, phase, profiled iteration) -> bytes of every other transfer;
    ``evaluations``: the profiled iterations with an evaluation, in order."""

    source: str
    spec: dict
    iterations: int
    compute_s: dict[str, list[float]]
    rounds_s: dict[str, list[list[float]]]
    eval_rounds_s: dict[str, list]
    eval_s: list
    requests: dict[tuple, list[tuple[str, int, int, float]]]
    bytes: dict[tuple, int]
    evaluations: tuple[int, ...]

    @classmethod
    def parse(cls, raw, source: str) -> Profile:
        """Check a profile and index it; ProfileError for one that is untrustworthy (checked
        first), incomplete or malformed."""
        if not isinstance(raw, dict):
            raise ProfileError(f"{source}: not a profile (a JSON object written by a profile: true run)")
        if raw.get("trustworthy") is None:
            raise ProfileError(f"{source}: does not say whether its run was trustworthy (a profile written "
                               f"before profiles carried the verdict); profile again")
        if raw["trustworthy"] is not True:
            reasons = "; ".join(raw.get("untrustworthy_reasons") or []) or "no reason given"
            raise ProfileError(f"{source}: its run was untrustworthy ({reasons}); profile again")
        for key in ("spec", "iterations", "compute_s", "flows", "requests", "sampler_rounds_s",
                    "sampler_eval_rounds_s", "eval_s"):
            if raw.get(key) is None:
                raise ProfileError(f"{source}: lacks {key} (a profile written before the model read it); "
                                   f"profile again")
        try:
            return cls._index(raw, source)
        except ProfileError:
            raise
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as err:
            raise ProfileError(f"{source}: malformed ({type(err).__name__}: {err})") from None

    @classmethod
    def _index(cls, raw: dict, source: str) -> Profile:
        spec, count = raw["spec"], raw["iterations"]
        workload = spec["workload"]
        if not isinstance(count, int) or count < 1:
            raise ProfileError(f"{source}: holds no iteration (iterations {count!r})")
        rounds = len(workload["fanouts"]) + 1
        tasks = workload["placement"]["tasks"]
        samplers = [t for t in tasks if task_kind(t) == "sampler"]
        for task in samplers:
            series = raw["sampler_rounds_s"].get(task)
            if series is None or len(series) < count or any(r is None or len(r) != rounds for r in series[:count]):
                raise ProfileError(f"{source}: lacks {task}'s compute of each of its {rounds} rounds in an iteration")
        for task in tasks:
            if task_kind(task) in ("worker", "ps") and len(raw["compute_s"].get(task, ())) < count:
                raise ProfileError(f"{source}: lacks {task}'s compute in every profiled iteration")
        evaluations = tuple(n for n, r in enumerate(raw["sampler_eval_rounds_s"].get("sampler0", [])[:count])
                            if r is not None)
        eval_s = raw["eval_s"].get("worker0", [])
        if not evaluations or any(len(raw["sampler_eval_rounds_s"]["sampler0"][n]) != rounds or n >= len(eval_s)
                                  or eval_s[n] is None for n in evaluations):
            raise ProfileError(f"{source}: lacks an evaluation (sampler0's rounds and worker0's compute)")
        requests: dict[tuple, list] = {}
        for r in raw["requests"]:
            if r["request_bytes"] is None or r["reply_bytes"] is None:
                raise ProfileError(f"{source}: lacks the sizes of {r['store']}'s requests (a profile written "
                                   f"before stores reported them); profile again")
            requests.setdefault((r["sampler"], r["iteration"], r["step"]), []).append(
                (r["store"], r["request_bytes"], r["reply_bytes"], r["compute_s"]))
        for asked in requests.values():
            asked.sort(key=lambda a: int(a[0].removeprefix("store")))  # a sampler asks the stores in order
        volumes = {(f["src_task"], f["dst_task"], f["phase"], f["iteration"]): f["bytes"] for f in raw["flows"]}
        return cls(source, spec, count, raw["compute_s"], raw["sampler_rounds_s"], raw["sampler_eval_rounds_s"],
                   eval_s, requests, volumes, evaluations)

    def compute_factors(self) -> dict[str, float]:
        """task -> the compute factor of the host it was profiled on (its times include it)."""
        return compute_factors(self.spec)

    def check_job(self, spec: dict) -> None:
        """ProfileError unless ``spec`` trains the job this profile is of."""
        mine, theirs = spec["workload"], self.spec["workload"]
        for name in JOB_FIELDS:
            if mine[name] != theirs[name]:
                raise ProfileError(f"{self.source}: profiles a job with workload.{name} {theirs[name]!r}, "
                                   f"not {mine[name]!r}")
        stores = [t for t in theirs["placement"]["tasks"] if t.startswith("store")]
        hosts = [t for t in mine["placement"]["tasks"] if t.startswith("store")]
        if len(stores) != len(hosts):
            raise ProfileError(f"{self.source}: profiles a job on {len(stores)} machines, not {len(hosts)}")


def load_profile(path) -> Profile:
    """``profile.json`` at ``path`` (relative to the checkout), parsed."""
    shown = shown_path(path)
    try:
        full = Path(path) if Path(path).is_absolute() else store.REPO_ROOT / path
        raw = json.loads(full.read_text())
    except (OSError, ValueError) as err:  # ValueError: bad JSON or a NUL in the name
        raise ProfileError(f"{shown}: cannot read a profile ({type(err).__name__}: {err})".splitlines()[0]) from None
    return Profile.parse(raw, shown)


def replay(profile: Profile, eval_every: int, job_iterations: int, iterations: int) -> list[tuple[int, int | None]]:
    """Per iteration n < ``iterations`` of a job of ``job_iterations`` that evaluates every
    ``eval_every``-th and its last (``is_eval``): the profiled iteration it replays
    (n mod P) and, where worker 0 evaluates at n, the profiled iteration whose
    evaluation stands for it (the k-th evaluation: the profile's k-th mod E), else
    None. The one reading of a profile's iterations for the model and ETP's costs."""
    replayed, k = [], 0
    for n in range(iterations):
        evaluated = None
        if is_eval(n, eval_every, job_iterations):
            evaluated = profile.evaluations[k % len(profile.evaluations)]
            k += 1
        replayed.append((n % profile.iterations, evaluated))
    return replayed


def evaluation_phase(phase: str) -> bool:
    """Whether a transfer of ``phase`` carries worker 0's evaluation (its rounds, its batch)."""
    return phase == "evalbatch" or phase.startswith("eval-")


# --- the model ---------------------------------------------------------------------
@dataclass(eq=False)
class _Frame:
    """One frame on a connection: ``tag`` is a reported frame's phase or a request's step."""

    src: str
    dst: str
    tag: str
    iteration: int
    nbytes: int
    reported: bool
    released: Callable[[], None] | None  # the sender's, until its send returns
    reply: tuple[int, float] | None = None  # a request's: the store's reply bytes and compute
    flow: int | None = None  # its network flow while on the wire
    due: float = math.inf  # while its sender waits: when the send returns at the current rates


@dataclass
class Result:
    """A simulated run: events in the emulation's ``events.jsonl`` schema (hello,
    flow_start/flow_end of reported transfers between machines, iteration_end of every
    worker), the rate decisions that changed an installed rate, the simulated end."""

    events: list[dict]
    decisions: list[dict]
    end_s: float
    frames: int = 0  # every frame, same-machine ones included


class GnnSimulation:
    """One job on the spec's fabric and placement under ``scheduler`` (default: the
    spec's), over ``iterations`` (default: the spec's). ``progress``, if given, gets a
    line on worker 0's iterations at most every ``PROGRESS_EVERY_S`` of wall time (a
    papers100M-sized job takes about 40 s an iteration; a short run prints nothing)."""

    def __init__(self, spec: dict, profile: Profile, iterations: int | None = None, scheduler: str | None = None,
                 progress: Callable[[str], None] | None = None):
        profile.check_job(spec)
        self.progress, self.shown = progress, time.monotonic()
        workload = spec["workload"]
        self.profile = profile
        self.tasks = dict(workload["placement"]["tasks"])
        # A profiled compute time, taken on its task's profiled host, on the host here.
        here, there = compute_factors(spec), profile.compute_factors()
        self.stretch = {t: here[t] / there[t] for t in self.tasks}
        self.iterations = workload["iterations"] if iterations is None else iterations
        self.workers, self.per_worker = workload["workers"], workload["samplers_per_worker"]
        self.ps = [t for t in self.tasks if t.startswith("ps")]
        self.hops = len(workload["fanouts"])
        scheduler = spec["scheduler"]["name"] if scheduler is None else scheduler
        policy = gnn_spec.rate_policy(scheduler)  # ValueError for a name no policy has
        with simulated_rates():
            fabric = fabric_of(spec)
        self.paths = Paths(fabric)
        self.net = FluidNetwork(self.paths.capacity)
        self.wire = wire_factor(spec["emulation"]["mtu"])
        self.coordinator = None if policy is None else RateCoordinator(oes_machines(fabric), policy)
        # per iteration: the profiled iteration it replays, and the one whose evaluation it replays
        self.replayed = replay(profile, workload["eval_every"], workload["iterations"], self.iterations)
        self.evaluation = {n: e for n, (_, e) in enumerate(self.replayed) if e is not None}  # where worker 0 evaluates
        self.now = 0.0
        self.queue: list[tuple[float, int, Callable]] = []
        self.sequence = 0
        self.live = 0  # task processes not finished
        self.inbox: dict[str, Counter] = {t: Counter() for t in self.tasks}
        self.receivers: dict[str, list[tuple[list, Callable]]] = {t: [] for t in self.tasks}
        self.credits = {t: PREFETCH for t in self.tasks if t.startswith("sampler")}
        self.credit_waiter: dict[str, Callable] = {}
        self.channels: dict[tuple[str, str], deque[_Frame]] = {}
        self.connection: dict[tuple[str, str], int] = {}  # its number: the simulated 5-tuple's source port
        self.by_key: dict[tuple, tuple[str, str]] = {}  # 5-tuple -> connection
        self.installed: dict[tuple[str, str], float | None] = {}  # connection -> Mbit/s installed (None: none yet)
        self.decided: dict[tuple, float] = {}  # 5-tuple -> the latest Mbit/s decided for it, before rounding
        self.settled_backlogs: list[float] | None = None  # ``return_sends``'s, while still true
        self.on_wire: dict[int, _Frame] = {}  # network flow id -> its frame
        self.flows = 0  # network flows started: the next one's id
        self.blocked: list[_Frame] = []  # frames whose senders wait for the send to return
        self.result = Result([], [], 0.0)

    # --- the clock ---------------------------------------------------------------
    def at(self, t: float, action: Callable, *args) -> None:
        heapq.heappush(self.queue, (t, self.sequence, lambda: action(*args)))
        self.sequence += 1

    def run(self) -> Result:
        for task, host in self.tasks.items():
            self.result.events.append({"kind": "hello", "t": 0.0, "host": host, "task": task,
                                       "role": task_kind(task), "job": "gnn"})
        for k in range(self.workers * self.per_worker):
            self.spawn(self.sampler(k))
        for w in range(self.workers):
            self.spawn(self.worker(w))
        for ps in self.ps:
            self.spawn(self.parameter_server(ps))
        while True:
            self.settle()
            if not self.live:
                break
            t = min(self.net.next_end(), self.queue[0][0] if self.queue else math.inf, self.next_return())
            if math.isinf(t):
                raise RuntimeError(f"stalled at {self.now:.3f} s: {self.live} tasks wait and nothing is due")
            arrived = self.net.advance(t)
            self.now = t
            for flow in arrived:
                self.delivered(self.on_wire.pop(flow))
        self.result.end_s = self.now
        return self.result

    def settle(self) -> None:
        """Everything due now, until nothing more is; then one rate decision for all of it."""
        returned = True  # no send examined yet at this instant
        while True:
            ran = False
            while self.queue and self.queue[0][0] <= self.now:
                heapq.heappop(self.queue)[2]()
                ran = True
            if not (ran or returned):
                break  # nothing happened since ``return_sends`` found none to return: it would find none again
            returned = self.return_sends()
        if self.coordinator is not None and self.coordinator.pending_triggers:
            self.decide()

    # --- task processes: generators that yield waits -------------------------------
    def spawn(self, process: Iterator[Wait]) -> None:
        self.live += 1
        self.at(self.now, self.resume, process)

    def resume(self, process: Iterator[Wait]) -> None:
        try:
            wait = next(process)
        except StopIteration:
            self.live -= 1
            return
        wait(lambda: self.at(self.now, self.resume, process))

    def sleep(self, seconds: float) -> Wait:
        return lambda done: self.at(self.now + seconds, done)

    def receive(self, task: str, keys: list[tuple]) -> Wait:
        """Until every frame of ``keys`` ((sender, tag, iteration)) has reached ``task``."""
        def arm(done):
            self.receivers[task].append((keys, done))
            self.match(task)
        return arm

    def match(self, task: str) -> None:
        inbox, waiting = self.inbox[task], []
        for keys, done in self.receivers[task]:
            if all(inbox[k] for k in keys):
                inbox.subtract(keys)
                done()
            else:
                waiting.append((keys, done))
        self.receivers[task] = waiting

    @staticmethod
    def together(*waits: Wait) -> Wait:
        """Until every one of ``waits`` is satisfied (threads joined)."""
        def arm(done):
            left = [len(waits)]

            def one():
                left[0] -= 1
                if not left[0]:
                    done()
            for wait in waits:
                wait(one)
            if not waits:
                done()
        return arm

    def take_credit(self, sampler: str) -> Wait:
        def arm(done):
            if self.credits[sampler]:
                self.credits[sampler] -= 1
                done()
            else:
                self.credit_waiter[sampler] = done
        return arm

    def give_credit(self, sampler: str) -> None:
        waiter = self.credit_waiter.pop(sampler, None)
        if waiter is not None:
            waiter()
        else:
            self.credits[sampler] += 1

    # --- the tasks (hosts.gnn.task) ----------------------------------------------------
    def sampler(self, k: int) -> Iterator[Wait]:
        name, worker = f"sampler{k}", f"worker{k // self.per_worker}"
        for n in range(self.iterations):
            yield self.take_credit(name)
            p = self.replayed[n][0]
            yield from self.sample(name, n, p, self.profile.rounds_s[name][p], "")
            yield self.send(name, worker, "minibatch", n, self.volume(name, worker, "minibatch", p))
            if k == 0 and n in self.evaluation:  # worker 0's first sampler prepares the evaluation batch
                e = self.evaluation[n]
                yield from self.sample(name, n, e, self.profile.eval_rounds_s[name][e], "eval-")
                yield self.send(name, worker, "evalbatch", n, self.volume(name, worker, "evalbatch", e))

    def sample(self, name: str, n: int, p: int, rounds: list[float], purpose: str) -> Iterator[Wait]:
        """L hops, then the features: requests to the stores asked, their replies, compute."""
        steps = [f"{purpose}sample{h}" for h in range(self.hops)] + [f"{purpose}feature"]
        for step, compute_s in zip(steps, rounds):
            asked = self.profile.requests.get((name, p, step), [])
            for store_task, request, reply, store_s in asked:  # one after the other
                yield self.send(name, store_task, step, n, request, reply=(reply, store_s * self.stretch[store_task]))
            yield self.receive(name, [(a[0], step, n) for a in asked])
            yield self.sleep(compute_s * self.stretch[name])

    def worker(self, w: int) -> Iterator[Wait]:
        name = f"worker{w}"
        samplers = [f"sampler{k}" for k in range(w * self.per_worker, (w + 1) * self.per_worker)]
        if w == 0:
            for ps in self.ps:
                yield self.send(name, ps, "init", 0, self.volume(name, ps, "init", 0))
        for n in range(self.iterations):
            p = self.replayed[n][0]
            waited = self.now
            yield self.receive(name, [(s, "minibatch", n) for s in samplers])
            started = self.now
            yield self.sleep(self.profile.compute_s[name][p] * self.stretch[name])
            computed = self.now
            for s in samplers:
                self.give_credit(s)
            if self.ps:
                yield self.together(*[self.send(name, ps, "gradient", n, self.volume(name, ps, "gradient", p))
                                      for ps in self.ps])
                yield self.receive(name, [(ps, "parameter", n) for ps in self.ps])
            elif self.workers > 1:
                after, before = f"worker{(w + 1) % self.workers}", f"worker{(w - 1) % self.workers}"
                for step in range(2 * (self.workers - 1)):
                    phase = f"ring{step}"
                    yield self.together(self.send(name, after, phase, n, self.volume(name, after, phase, p)),
                                        self.receive(name, [(before, phase, n)]))
            synced = self.now
            if w == 0 and n in self.evaluation:
                yield self.receive(name, [(samplers[0], "evalbatch", n)])
                yield self.sleep(self.profile.eval_s[self.evaluation[n]] * self.stretch[name])
            self.result.events.append({"kind": "iteration_end", "t": self.now, "host": self.tasks[name],
                                       "task": name, "iteration": n, "loss": None, "val_accuracy": None,
                                       "compute_s": computed - started, "sync_s": synced - computed,
                                       "wait_s": started - waited})
            if w == 0 and self.progress is not None and time.monotonic() - self.shown >= PROGRESS_EVERY_S:
                self.shown = time.monotonic()
                self.progress(f"iteration {n + 1} of {self.iterations} ends at {self.now:.1f} s simulated")

    def parameter_server(self, name: str) -> Iterator[Wait]:
        workers = [f"worker{w}" for w in range(self.workers)]
        yield self.receive(name, [("worker0", "init", 0)])
        for n in range(self.iterations):
            p = self.replayed[n][0]
            yield self.receive(name, [(w, "gradient", n) for w in workers])
            yield self.sleep(self.profile.compute_s[name][p] * self.stretch[name])
            yield self.together(*[self.send(name, w, "parameter", n, self.volume(name, w, "parameter", p))
                                  for w in workers])

    def volume(self, src: str, dst: str, phase: str, p: int) -> int:
        if self.tasks[src] == self.tasks[dst]:
            return 0  # crosses no network: its size does not matter
        try:
            return self.profile.bytes[src, dst, phase, p]
        except KeyError:
            raise ProfileError(f"{self.profile.source}: has no {src}->{dst} {phase} of profiled iteration {p} "
                               f"(same-machine transfers are in a profile: true run's profile only)") from None

    # --- frames and the network ------------------------------------------------------
    def send(self, src: str, dst: str, tag: str, n: int, nbytes: int, reply: tuple | None = None) -> Wait:
        """Until the send returns: at once on one machine, else once the connection holds at
        most ``SEND_BACKLOG_BYTES`` undelivered. A request (``reply``) is not reported."""
        def arm(done):
            frame = _Frame(src, dst, tag, n, nbytes, reply is None, done, reply)
            self.result.frames += 1
            if self.tasks[src] == self.tasks[dst]:
                frame.released = None
                done()
                self.arrive(frame)
                return
            if frame.reported:
                self.report("flow_start", frame)
            channel = self.channels.setdefault((src, dst), deque())
            channel.append(frame)
            if len(channel) == 1:
                self.put_on_wire(frame)
            self.blocked.append(frame)
        return arm

    def put_on_wire(self, frame: _Frame) -> None:
        connection = (frame.src, frame.dst)
        ports = self.paths.ports(self.tasks[frame.src], self.tasks[frame.dst], connection)
        if self.coordinator is not None and frame.reported:
            ports = (self.limit_port(connection), *ports)
        hops = tuple((port, 0) for port in ports)  # one queue: the gnn kind sets no priorities
        frame.flow, self.flows = self.flows, self.flows + 1
        self.on_wire[frame.flow] = frame
        self.net.add(frame.flow, hops, frame.nbytes * self.wire)

    def limit_port(self, connection: tuple[str, str]) -> str:
        port = f"{connection[0]}>{connection[1]}/rate"
        if connection not in self.installed:  # no policy yet: its NIC's rate (a decision comes this instant)
            self.installed[connection] = None
            self.net.set_capacity(port, self.paths.capacity[f"{self.tasks[connection[0]]}/out"])
        return port

    def delivered(self, frame: _Frame) -> None:
        channel = self.channels[frame.src, frame.dst]
        channel.popleft()
        if frame.reported:
            self.report("flow_end", frame)
        if channel:
            self.put_on_wire(channel[0])
        if frame.released is not None:
            self.blocked.remove(frame)
            self.send_returned(frame)
        self.arrive(frame)

    def arrive(self, frame: _Frame) -> None:
        if frame.reply is not None:  # a store serves the request, then replies
            reply_bytes, compute_s = frame.reply
            self.at(self.now + compute_s, lambda: self.send(frame.dst, frame.src, frame.tag, frame.iteration,
                                                           reply_bytes)(lambda: None))
            return
        self.inbox[frame.dst][frame.src, frame.tag, frame.iteration] += 1
        self.match(frame.dst)

    def send_returned(self, frame: _Frame) -> None:
        done, frame.released = frame.released, None
        done()

    def backlogs(self) -> list[float]:
        """Per blocked frame, in ``blocked``'s order: the bytes of its connection not yet
        delivered, up to and including it (its connection's head on the wire, then the
        frames queued behind it, whole)."""
        heads = [self.channels[f.src, f.dst][0] for f in self.blocked]
        upto = (self.net.lefts([h.flow for h in heads]) / self.wire).tolist()
        for i, (frame, head) in enumerate(zip(self.blocked, heads)):
            if frame is not head:
                for queued in itertools.islice(self.channels[frame.src, frame.dst], 1, None):
                    upto[i] += queued.nbytes
                    if queued is frame:
                        break
        return upto

    def return_sends(self) -> bool:
        """Return every send whose connection's backlog is within ``SEND_BACKLOG_BYTES``, or whose
        due time came; True if any did."""
        backlogs = self.backlogs()
        returned = [f for f, backlog in zip(self.blocked, backlogs)
                    if f.due <= self.now or backlog <= SEND_BACKLOG_BYTES * (1 + 1e-9)]
        for frame in returned:
            self.blocked.remove(frame)
            self.send_returned(frame)
        # None returned: nothing moved, and until the clock does (``settle``'s rate
        # decision changes rates, not bytes left) ``next_return`` may reuse them.
        self.settled_backlogs = None if returned else backlogs
        return bool(returned)

    def next_return(self) -> float:
        """When the next blocked send returns at the current rates (its connection's head
        on the wire drains to ``SEND_BACKLOG_BYTES``; later than the head's end: decided then).
        Called right after ``settle``, whose last ``return_sends`` returned nothing."""
        backlogs, self.settled_backlogs = self.settled_backlogs, None
        if not self.blocked:
            return math.inf
        heads = [self.channels[f.src, f.dst][0].flow for f in self.blocked]
        excess = (np.array(self.backlogs() if backlogs is None else backlogs) - SEND_BACKLOG_BYTES) * self.wire
        rates = self.net.rates(heads)
        with np.errstate(divide="ignore", invalid="ignore"):
            due = np.maximum(self.now + excess / rates, self.now)
        due = np.where((excess <= self.net.lefts(heads)) & (rates > 0), due, math.inf)
        for frame, t in zip(self.blocked, due.tolist()):
            frame.due = t
        return float(due.min())

    # --- the rate coordinator ----------------------------------------------------------
    def report(self, kind: str, frame: _Frame) -> None:
        """A flow event as the tasks report it (``hosts.gnn.wire``), to the events and the coordinator."""
        connection = (frame.src, frame.dst)
        if connection not in self.connection:
            self.connection[connection] = len(self.connection) + 1
            self.by_key[self.key(connection)] = connection
        flow = f"{frame.src}->{frame.dst}/i{frame.iteration}/{frame.tag}"
        if kind == "flow_start":
            event = {"kind": kind, "t": self.now, "host": self.tasks[frame.src], "task": frame.src, "flow": flow,
                     "src": self.tasks[frame.src], "dst": self.tasks[frame.dst], "src_task": frame.src,
                     "dst_task": frame.dst, "bytes": frame.nbytes, "phase": frame.tag, "iteration": frame.iteration,
                     "src_port": self.connection[connection], "dst_port": 0}
        else:
            event = {"kind": kind, "t": self.now, "host": self.tasks[frame.dst], "task": frame.dst, "flow": flow,
                     "bytes": frame.nbytes}
        self.result.events.append(event)
        if self.coordinator is not None:
            self.coordinator.on_flow_event(event)

    def key(self, connection: tuple[str, str]) -> tuple:
        return (self.tasks[connection[0]], self.tasks[connection[1]], "tcp", self.connection[connection], 0)

    def decide(self) -> None:
        decision = self.coordinator.decide()
        changed = []
        for key, mbps in decision.rates.items():
            if self.decided.get(key) == mbps:
                continue  # as decided before: installed already
            self.decided[key] = mbps
            connection, mbps = self.by_key[key], installed_mbps(mbps)
            if self.installed.get(connection) != mbps:
                self.installed[connection] = mbps
                self.net.set_capacity(self.limit_port(connection), mbps_to_bytes_per_s(mbps))
                changed.append([*key, mbps, self.connection[connection]])
        if changed:
            self.result.decisions.append({"t": self.now, "active": [(f.src, f.dst) for f in decision.active],
                                          "pending": decision.pending, "set": changed})


def predict(spec: dict, profile: Profile, iterations: int | None = None, scheduler: str | None = None) -> float | None:
    """The model's mean iteration time (worker 0's iteration ends, after the first, as
    ``metrics.training`` measures an emulated run); None under two iterations."""
    result = GnnSimulation(spec, profile, iterations, scheduler).run()
    return metrics.training(result.events, None)["iteration_s_mean"]


# --- the simulator backend -------------------------------------------------------------
def validate(raw) -> dict:
    """A gnn spec for the simulator: link rates beyond what this box emulates allowed,
    ``simulation.profile`` required, and its profile usable for this job."""
    with simulated_rates():
        spec = gnn_spec.validate(raw)
    if "simulation" not in spec:
        raise SpecError("simulation.profile", "is required to simulate a gnn spec: the profile.json of a "
                                              "profile: true run of the job")
    try:
        load_profile(spec["simulation"]["profile"]).check_job(spec)
    except ProfileError as err:
        raise SpecError("simulation.profile", str(err)) from None
    return spec


def simulate_spec(spec: dict, out: str | None = None) -> Path:
    """``trainbed simulate``: a run directory like an emulated run's, ``"backend": "simulated"``."""
    return simulate_workload(spec, out, _simulate_into)


def _simulate_into(spec: dict, run: Path) -> dict:
    profile = load_profile(spec["simulation"]["profile"])
    result = GnnSimulation(spec, profile, progress=lambda line: print(line, file=sys.stderr, flush=True)).run()
    store.write_jsonl(run / store.EVENTS, result.events)
    store.write_jsonl(run / store.DECISIONS, result.decisions)
    transfers = metrics.flows(result.events, result.decisions)
    metrics.write_flows(run / store.FLOWS, transfers)
    train = metrics.training(result.events, None)
    return {**{k: train[k] for k in ("iterations", "iteration_s_mean", "iteration_s_median", "communication_share",
                                     "training_s")},
            "scheduler": spec["scheduler"]["name"], "seed": spec["seed"], "sync": spec["workload"]["sync"],
            "placement": spec["workload"]["placement"]["kind"], "task_placement": spec["workload"]["placement"]["tasks"],
            "profile": profile.source, "profile_iterations": profile.iterations,
            "reported_transfer_bytes": sum(f["bytes"] for f in transfers), "transfers": len(transfers),
            "frames": result.frames, "decisions": len(result.decisions), "simulated_s": result.end_s,
            "trustworthy": True}


# --- the model against recorded emulated runs ----------------------------------------
def run_profile(run_dir) -> Profile:
    """An emulated run's own profile: its ``profile.json``, else one made from its
    events over its iterations, with its summary's verdict."""
    run = Path(run_dir)
    if (run / metrics.PROFILE_FILE).exists():
        return load_profile(run / metrics.PROFILE_FILE)
    trusted, reasons = summary_verdict(load_summary(run))
    verdict = {"trustworthy": trusted, "untrustworthy_reasons": reasons}
    events = store.read_jsonl(run / store.EVENTS)
    spec = read_yaml(run / store.SPEC, store.SPEC, "run spec")
    iterations = metrics.training(events, None)["iterations"]
    return Profile.parse(metrics.profile(events, iterations, spec, verdict), f"{shown_path(run)} (its events)")


def compare(run_dir, profile=None) -> dict:
    """An emulated run's mean iteration time beside the model's for its spec (placement,
    fabric, scheduler) over as many iterations: from ``profile`` (a profile.json path, e.g.
    of the profiling run, for a placement it never ran), else from the run's own."""
    run = Path(run_dir)
    spec = read_yaml(run / store.SPEC, store.SPEC, "run spec")
    events = store.read_jsonl(run / store.EVENTS)
    measured = metrics.training(events, None)
    used = load_profile(profile) if profile is not None else run_profile(run)
    predicted = predict(spec, used, measured["iterations"])
    return {"run": shown_path(run), "placement": spec["workload"]["placement"]["kind"],
            "scheduler": spec["scheduler"]["name"], "iterations": measured["iterations"], "profile": used.source,
            "measured_iteration_s": measured["iteration_s_mean"], "predicted_iteration_s": predicted,
            "error": None if not (predicted and measured["iteration_s_mean"])
            else predicted / measured["iteration_s_mean"] - 1}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.gnn.simulated",
                                     description="Recorded emulated GNN runs: measured mean iteration time beside "
                                                 "the job's model's (compare).")
    parser.add_argument("runs", nargs="+", help="emulated gnn run directories")
    parser.add_argument("--profile", help="predict from this profile.json (default: each run's own)")
    args = parser.parse_args(argv)
    print("| run | placement | scheduler | iterations | measured s | predicted s | error |\n|---|---|---|---|---|---|---|")
    failed = False
    for run in args.runs:
        try:
            row = compare(run, None if args.profile is None else Path(args.profile).absolute())
        except (OSError, ValueError) as err:  # ValueError: a ProfileError, or a garbled file (store's SpecError)
            print(f"| {shown_path(run)} | {one_line(err)} | | | | | |")
            failed = True
            continue
        error = "" if row["error"] is None else f"{100 * row['error']:+.1f}%"
        print(f"| {row['run']} | {row['placement']} | {row['scheduler']} | {row['iterations']} "
              f"| {row['measured_iteration_s']} | {row['predicted_iteration_s']} | {error} |")
    return 1 if failed else 0  # a row that could not be compared says why in the table


if __name__ == "__main__":
    sys.exit(main())
