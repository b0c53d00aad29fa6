"""The GNN training driver: starts the DGL tasks, hears their flows, runs OES.

It prepares the job (``experiments.gnn.job``), starts every task
(``hosts.gnn.task``) in its machine's namespace, and reads their events from the
management channel. Tasks run themselves (each when its inputs have arrived); the
driver only schedules the network:

- ``oes``: on every change of the set of active inter-machine flows (a
  ``flow_start`` or ``flow_end``), OES's rate of every active flow
  (``controller.schedulers.oes.oes_rates`` over the machines' NIC rates, Alg. 1
  lines 18-21) is installed as one batch of per-flow policies (sender-side htb
  class, matched by the flow's 5-tuple). Events that queued up while a batch was
  being applied are handled together, so one batch answers all of them. A pair's
  flows share one connection, so a flow reported while its pair's previous one is
  on the wire waits behind it: it is pending (Alg. 1's F_pend, ``oes.PairPipeline``)
  and gets its rate when that one ends. A flow's policy stays installed
  when it ends (an idle class costs nothing) and is updated when its pair's next
  flow starts.
- ``default``: no policy at all: TCP shares the links, tasks run when ready (the
  DistDGL baseline's scheduling).

The run ends when every task finished, when worker 0 reported the target validation
accuracy (all tasks are then stopped), or with an error naming the failed task and
its machine. Everything heard goes to ``events.jsonl``, every OES decision (targets,
installed ids, apply time, which events it answered) to ``decisions.jsonl``, and the
read-back of the installed rates to ``rate_readback.jsonl``.
"""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import time
from pathlib import Path

from controller.hostnet import netns_cmd
from controller.schedulers import oes
from experiments.channel import DriverError, EventServer
from experiments.gnn import job as job_mod
from hosts.messages import command
from topologies import queues
from topologies.fabric import host_interface

STOP_GRACE_S = 15.0
PROCESS_POLL_S = 1.0
READBACK_EVERY = 10  # decisions between read-backs of the installed rates
ROOT_CAUSE_WAIT_S = 1.0  # after a failure, how long to look for a killed task behind it


class GnnDriver:
    def __init__(self, em, spec: dict, run_dir: Path, events_path: str, progress=print):
        self.em, self.spec, self.run_dir, self.progress = em, spec, run_dir, progress
        self.workload = spec["workload"]
        self.scheduler = spec["scheduler"]["name"]
        self.fabric = em.fabric
        self.machines = [h.name for h in self.fabric.hosts]
        rates = {link.a: link.mbps for link in self.fabric.host_links()}  # the host is end a
        self.oes_machines = [oes.Machine(host, rates[host], rates[host]) for host in self.machines]
        self.tasks = dict(self.workload["placement"]["tasks"])
        self.config = job_mod.prepare(self.workload, self.tasks, {h.name: h.ip for h in self.fabric.hosts},
                                      self.machines, spec["seed"], run_dir / "job")
        self.server = EventServer(events_path)
        self.events_out = open(run_dir / "events.jsonl", "w")
        self.decisions_out = open(run_dir / "decisions.jsonl", "w")
        self.readback_out = open(run_dir / "rate_readback.jsonl", "w")
        self.oes = OesRates(em, self.oes_machines, self.decisions_out, self.readback_out) \
            if self.scheduler == "oes" else None
        self.processes: dict[str, subprocess.Popen] = {}
        self.finished: set[str] = set()
        self.stopping = False
        self.reached_t: float | None = None  # when worker 0 reported the target accuracy

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        for task, host in self.tasks.items():
            with open(self.run_dir / "tasks.log", "ab") as log:
                self.processes[task] = self.em.popen(
                    host, [sys.executable, "-m", "hosts.gnn.task", "--config",
                           str(self.run_dir / "job" / "config.json"), "--task", task, "--events", self.server.path],
                    stdout=log, stderr=log)
        self.note("tasks_started", tasks=self.tasks)
        self.progress(f"{len(self.tasks)} tasks started on {len(set(self.tasks.values()))} machines "
                      f"({self.scheduler} scheduling)")

    def stop_all(self) -> None:
        self.stopping = True
        for task in self.tasks:
            if task not in self.finished:
                try:
                    self.server.send(task, command("stop"))
                except DriverError:
                    pass  # not connected or already gone

    def run(self) -> None:
        self.start()
        deadline = time.monotonic() + self.spec["time_limit_s"]
        next_poll = time.monotonic() + PROCESS_POLL_S
        while len(self.finished) < len(self.tasks):
            now = time.monotonic()
            if now > deadline:
                raise DriverError(f"time_limit_s: training did not finish within {self.spec['time_limit_s']:g} s")
            try:
                message = self.server.inbox.get(timeout=min(PROCESS_POLL_S, max(0.0, deadline - now)))
            except queue.Empty:
                message = None
            changed = False
            while message is not None:  # everything queued now: one decision answers it all
                changed |= self.handle(message)
                try:
                    message = self.server.inbox.get_nowait()
                except queue.Empty:
                    message = None
            if changed and not self.stopping:
                self.oes.decide()
            if time.monotonic() >= next_poll:
                self._check_processes()
                next_poll = time.monotonic() + PROCESS_POLL_S

    def _check_processes(self) -> None:
        for task, proc in self.processes.items():
            code = proc.poll()
            if code is None or task in self.finished:
                continue
            if code == 0 or self.stopping:
                self.finished.add(task)
            else:
                raise DriverError(self._root_cause(f"task {task} on {self.tasks[task]} exited with {code}"))

    def _root_cause(self, first_report: str) -> str:
        """The first failure heard may be a peer's: a task killed by a signal says
        nothing, its peers report the closed connection. Name the killed one first."""
        deadline = time.monotonic() + ROOT_CAUSE_WAIT_S
        while True:
            killed = [(task, -code) for task, proc in self.processes.items()
                      if (code := proc.poll()) is not None and code < 0]
            if killed or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        causes = [f"task {task} on {self.tasks[task]} was killed (signal {signal})" for task, signal in killed
                  if f"task {task} " not in first_report]
        return "; ".join(causes + [first_report]) + "; see tasks.log"

    def close(self) -> None:
        """Stop every task still running, then close the channel and the logs."""
        if len(self.finished) < len(self.tasks):
            self.stop_all()
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        while not self.server.inbox.empty():
            self.log(self.server.inbox.get())
        if self.oes is not None and self.oes.installed:
            self.oes.read_back()  # every installed rate, once more, before the fabric goes
        self.server.close()
        for out in (self.events_out, self.decisions_out, self.readback_out):
            out.close()

    # --- events --------------------------------------------------------------------
    def log(self, message: dict) -> None:
        self.events_out.write(json.dumps(message, separators=(",", ":")) + "\n")

    def note(self, kind: str, **fields) -> None:
        self.log({"kind": kind, "t": time.time(), **fields})

    def handle(self, message: dict) -> bool:
        """Take one event; True if the set of active flows changed."""
        self.log(message)
        kind, task = message.get("kind"), message.get("task", "?")
        if kind == "error":
            if self.stopping:
                return False  # peers of stopped tasks see their connections close
            raise DriverError(self._root_cause(f"task {task} on {message.get('host', '?')} failed: "
                                               f"{message.get('error')}"))
        if kind == "bye":
            self.finished.add(task)
        elif kind in ("flow_start", "flow_end") and self.oes is not None:
            return self.oes.on_flow_event(message)
        elif kind == "iteration_end" and task == "worker0":
            self._progress_of(message)
        return False

    def _progress_of(self, message: dict) -> None:
        accuracy, target = message.get("val_accuracy"), self.workload["target_accuracy"]
        if accuracy is not None:
            self.progress(f"iteration {message['iteration']}: loss {message['loss']:.3f}, "
                          f"validation accuracy {accuracy:.3f}")
        if target is not None and accuracy is not None and accuracy >= target and self.reached_t is None:
            self.reached_t = message["t"]
            self.note("target_reached", iteration=message["iteration"], val_accuracy=accuracy)
            self.progress(f"target accuracy {target} reached at iteration {message['iteration']}; stopping")
            self.stop_all()


class OesRates:
    """OES in the fabric: the active inter-machine flows, the rate each got, and the
    policies installed for them (one per flow 5-tuple; policy id = host class slot)."""

    def __init__(self, em, machines: list[oes.Machine], decisions_out, readback_out):
        self.em, self.machines = em, machines
        self.decisions_out, self.readback_out = decisions_out, readback_out
        self.pipeline = oes.PairPipeline()  # F_act and F_pend of Alg. 1
        self.started: dict[str, dict] = {}  # flow id -> its flow_start event, while active or pending
        self.ended_early: set[str] = set()  # flow_end heard before its flow_start
        self.local: set[str] = set()  # same-machine transfers in flight (profiling runs report them)
        self.installed: dict[tuple, tuple[int, float]] = {}  # 5-tuple -> (policy id, Mbit/s)
        self.pending_triggers: list[float] = []  # event times the next decision answers
        self.decisions = 0
        self.readback_errors: list[float] = []

    def on_flow_event(self, message: dict) -> bool:
        """Take a flow_start or flow_end; True if the set of active network flows changed.

        Per-pair pipelining (Alg. 1 lines 8-17): a task pair's transfers share one
        connection, so a transfer reported while its pair's previous one is still on
        the wire really waits behind it; it is pending (no rate, not counted in Δ)
        until that one ends. One receiver reports a pair's ends in order, and a flow
        whose end overtook its start is dropped on arrival of the start."""
        flow_id = message["flow"]
        if message["kind"] == "flow_start":
            if message["src"] == message["dst"]:
                self.local.add(flow_id)
                return False
            if flow_id in self.ended_early:
                self.ended_early.discard(flow_id)
                return False
            self.started[flow_id] = message
            flow = oes.Flow(flow_id, message["src"], message["dst"], message["iteration"],
                            pair=(message["src_task"], message["dst_task"]))
            if not self.pipeline.start(flow):
                return False
        elif flow_id in self.local:
            self.local.discard(flow_id)
            return False
        elif flow_id not in self.started:
            self.ended_early.add(flow_id)
            return False
        else:
            start = self.started.pop(flow_id)
            flow = oes.Flow(flow_id, start["src"], start["dst"], start["iteration"],
                            pair=(start["src_task"], start["dst_task"]))
            if flow_id not in {f.flow_id for f in self.pipeline.active}:
                raise DriverError(f"flow {flow_id} ended while pending behind its pair's previous flow")
            self.pipeline.end(flow)
        self.pending_triggers.append(message["t"])
        return True

    def decide(self) -> None:
        """OES rates of the active flows, installed as one batch of changed policies."""
        started = time.monotonic()
        flows = self.pipeline.active
        rates = oes.oes_rates(self.machines, flows)
        changes, keys = [], []
        for fid, mbps in sorted(rates.items()):
            f = self.started[fid]
            key = (f["src"], f["dst"], "tcp", f["src_port"], f["dst_port"])
            mbps = round(mbps, 3)
            if self.installed.get(key, (None, None))[1] != mbps:
                changes.append({"set": {"src": key[0], "dst": key[1], "proto": "tcp", "src_port": key[3],
                                        "dst_port": key[4], "rate_mbps": mbps, "rate_mechanism": "host"}})
                keys.append((key, mbps))
        triggers, self.pending_triggers = self.pending_triggers, []
        if not changes:
            return
        ids = self.em.client.apply(changes)
        done = time.time()
        for (key, mbps), policy_id in zip(keys, ids):
            self.installed[key] = (policy_id, mbps)
        self.decisions += 1
        record = {"t": done, "apply_s": round(time.monotonic() - started, 5),
                  "active": [[f.src, f.dst] for f in flows],  # enough to recompute every rate
                  "pending": len(self.pipeline.pending),
                  "latency_s": [round(done - t, 5) for t in triggers],
                  "set": [[*key, mbps, policy_id] for (key, mbps), policy_id in zip(keys, ids)]}
        self.decisions_out.write(json.dumps(record, separators=(",", ":")) + "\n")
        if self.decisions % READBACK_EVERY == 1:
            self.read_back({key[0] for key, _ in keys})

    def read_back(self, hosts: set[str] | None = None) -> None:
        """Compare each host's installed per-flow rate classes with their targets."""
        by_host: dict[str, dict[int, float]] = {}
        for (src, *_), (policy_id, mbps) in self.installed.items():
            if hosts is None or src in hosts:
                by_host.setdefault(src, {})[policy_id] = mbps
        for host, targets in sorted(by_host.items()):
            cmd = netns_cmd(self.em.host(host).pid, ["tc", "class", "show", "dev", host_interface(host)])
            installed = queues.host_flow_rates(subprocess.run(cmd, capture_output=True, text=True).stdout)
            rows = []
            for policy_id, target in sorted(targets.items()):
                got = installed.get(policy_id)
                error = 1.0 if got is None else abs(got - target) / target
                self.readback_errors.append(error)
                rows.append([policy_id, target, got, round(error, 6)])
            self.readback_out.write(json.dumps({"t": time.time(), "host": host, "policies": rows}) + "\n")
