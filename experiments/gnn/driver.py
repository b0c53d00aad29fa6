"""The GNN training driver: starts the DGL tasks, hears their flows, runs OES (or a
baseline rate policy).

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
- ``mrtf``, ``omcoflow``: the same, with the rates of the paper's baselines
  (``controller.schedulers.coflow_rates``). A rate below ``WAITING_MBPS`` (0: the
  flow waits) is installed as ``WAITING_MBPS``: a flow policy needs a positive
  rate (and a decided rate rounds to 3 decimals; ``coordinator.installed_mbps``).
- ``default``: no policy at all: TCP shares the links, tasks run when ready (the
  DistDGL baseline's scheduling).

The run ends when every task finished, when worker 0 reported the target validation
accuracy (all tasks are then stopped), or with an error naming the failed task and
its machine. Everything heard goes to ``events.jsonl``, every OES decision (targets,
installed ids, apply time, which events it answered) to ``decisions.jsonl``, and the
read-back of the installed rates to ``rate_readback.jsonl``. The event loop, the task
processes and the close are ``experiments.platform.driver``'s, the policy batches
``experiments.platform.policysync``'s.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from controller.hostnet import tc_show_cmd
from controller.schedulers import oes
from experiments import store
from experiments.gnn import job as job_mod
from experiments.gnn import spec as gnn_spec
from experiments.gnn.coordinator import RateCoordinator, installed_mbps, oes_machines
from experiments.platform.channel import DriverError
from experiments.platform.driver import Driver
from experiments.platform.policysync import PolicySync
from topologies import queues
from topologies.fabric import host_interface

READBACK_EVERY = 10  # decisions between read-backs of the installed rates
ROOT_CAUSE_WAIT_S = 1.0  # after a failure, how long to look for a killed task behind it


class GnnDriver(Driver):
    """DGL tasks on their machines, and OES (or nothing) scheduling their flows. The
    run ends when every task finished (said bye, or exited cleanly or while stopping)."""

    work_name = "training"

    def __init__(self, em, spec: dict, run_dir: Path, events_path: str, progress=print):
        self.progress = progress
        self.workload = spec["workload"]
        self.scheduler = spec["scheduler"]["name"]
        self.fabric = em.fabric
        self.machines = [h.name for h in self.fabric.hosts]
        self.oes_machines = oes_machines(self.fabric)
        self.tasks = dict(self.workload["placement"]["tasks"])
        self.config = job_mod.prepare(self.workload, self.tasks, {h.name: h.ip for h in self.fabric.hosts},
                                      self.machines, spec["seed"], run_dir / "job")
        super().__init__(em, run_dir, events_path, spec["time_limit_s"])
        self.readback_out = open(run_dir / "rate_readback.jsonl", "w")
        policy = gnn_spec.rate_policy(self.scheduler)
        self.oes = None if policy is None else OesRates(em, self.oes_machines, self.decisions_out, self.readback_out,
                                                        policy)
        self.finished: set[str] = set()
        self.stopping = False
        self.target_reached = False  # worker 0 reported the target accuracy (its time is the note's)

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        for task, host in self.tasks.items():
            self.spawn(task, host, [sys.executable, "-m", "hosts.gnn.task", "--config",
                                    str(self.run_dir / "job" / "config.json"), "--task", task,
                                    "--events", self.server.path])
        self.note("tasks_started", tasks=self.tasks)
        self.progress(f"{len(self.tasks)} tasks started on {len(set(self.tasks.values()))} machines "
                      f"({self.scheduler} scheduling)")

    def stop_all(self) -> None:
        self.stopping = True
        self.send_stop(task for task in self.tasks if task not in self.finished)

    def run(self) -> None:
        self.start()
        super().run()

    def done(self) -> bool:
        return len(self.finished) >= len(self.tasks)

    def caught_up(self) -> None:
        """Every event queued so far is handled: one OES decision answers them all."""
        if self.oes is not None and self.oes.pending_triggers and not self.stopping:
            self.oes.decide()

    def task_exited(self, task: str, exit_code: int) -> bool:
        """A clean exit, or any exit once the tasks are being stopped, finishes the task."""
        if task in self.finished:
            return False
        if exit_code == 0 or self.stopping:
            self.finished.add(task)
            return False
        return True

    def failure(self, report: str) -> str:
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
                  if f"task {task} " not in report]
        return super().failure("; ".join(causes + [report]))

    def stop_running(self) -> None:
        if len(self.finished) < len(self.tasks):
            self.stop_all()

    def close(self) -> None:
        """The driver's close, then every installed rate read back once more, before
        the fabric goes."""
        super().close()
        if self.oes is not None and self.oes.policies.installed:
            self.oes.read_back()
        self.readback_out.close()

    # --- events --------------------------------------------------------------------
    def handle(self, message: dict) -> None:
        kind, task = message.get("kind"), message.get("task", "?")
        if kind == "error":
            if self.stopping:
                return  # peers of stopped tasks see their connections close
            raise DriverError(self.failure(f"task {task} on {message.get('host', '?')} failed: "
                                           f"{message.get('error')}"))
        if kind == "bye":
            self.finished.add(task)
        elif kind in ("flow_start", "flow_end") and self.oes is not None:
            self.oes.on_flow_event(message)
        elif kind == "iteration_end" and task == "worker0":
            self._progress_of(message)

    def _progress_of(self, message: dict) -> None:
        accuracy, target = message.get("val_accuracy"), self.workload["target_accuracy"]
        if accuracy is not None:
            self.progress(f"iteration {message['iteration']}: loss {message['loss']:.3f}, "
                          f"validation accuracy {accuracy:.3f}")
        if target is not None and accuracy is not None and accuracy >= target and not self.target_reached:
            self.target_reached = True
            self.note("target_reached", iteration=message["iteration"], val_accuracy=accuracy)
            self.progress(f"target accuracy {target} reached at iteration {message['iteration']}; stopping")
            self.stop_all()


class OesRates:
    """OES (or another rate policy) in the fabric: the emulation backend of
    ``RateCoordinator`` (the active inter-machine flows and their rates), and the
    policies installed for them (``policies``: one per flow 5-tuple, {rate_mbps,
    rate_mechanism}; policy id = host class slot). A policy stays installed when its
    flow ends."""

    def __init__(self, em, machines: list[oes.Machine], decisions_out, readback_out,
                 policy: oes.RatePolicy = oes.oes_rates):
        self.em = em
        self.decisions_out, self.readback_out = decisions_out, readback_out
        self.coordinator = RateCoordinator(machines, policy)
        self.policies = PolicySync(em.client)
        self.decisions = 0
        self.readback_errors: list[float] = []

    def on_flow_event(self, message: dict) -> bool:
        """Take a flow_start or flow_end; True if the set of active network flows changed."""
        return self.coordinator.on_flow_event(message)

    @property
    def pending_triggers(self) -> list[float]:
        return self.coordinator.pending_triggers

    def decide(self) -> None:
        """The policy's rates of the active flows, installed as one batch of changed
        policies (in flow id order); the policies of flows no longer active stay as they are."""
        started = time.monotonic()
        decision = self.coordinator.decide()
        desired = {key: {"rate_mbps": installed_mbps(mbps), "rate_mechanism": "host"}
                   for key, mbps in decision.rates.items()}
        batch = self.policies.sync(desired, remove_unlisted=False)
        if not batch.changes:
            return
        done = time.time()
        self.decisions += 1
        record = {"t": done, "apply_s": round(time.monotonic() - started, 5),
                  "active": [[f.src, f.dst] for f in decision.active],  # enough to recompute every rate
                  "pending": decision.pending,
                  "latency_s": [round(done - t, 5) for t in decision.triggers],
                  "set": [[*key, desired[key]["rate_mbps"], policy_id] for key, policy_id in batch.ids.items()]}
        self.decisions_out.write(store.json_line(record))
        if self.decisions % READBACK_EVERY == 1:
            self.read_back({key[0] for key in batch.ids})

    def read_back(self, hosts: set[str] | None = None) -> None:
        """Compare each host's installed per-flow rate classes with their targets."""
        by_host: dict[str, dict[int, float]] = {}
        for key, fields in self.policies.installed.items():
            src = key[0]
            if hosts is None or src in hosts:
                by_host.setdefault(src, {})[self.policies.ids[key]] = fields["rate_mbps"]
        for host, targets in sorted(by_host.items()):
            cmd = tc_show_cmd(self.em.host(host).pid, "class", host_interface(host))
            installed = queues.host_flow_rates(subprocess.run(cmd, capture_output=True, text=True).stdout)
            rows = []
            for policy_id, target in sorted(targets.items()):
                got = installed.get(policy_id)
                error = 1.0 if got is None else abs(got - target) / target
                self.readback_errors.append(error)
                rows.append([policy_id, target, got, round(error, 6)])
            self.readback_out.write(store.json_line({"t": time.time(), "host": host, "policies": rows}))
