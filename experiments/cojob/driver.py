"""The cojob driver: the emulation backend of Grouper's coordinator (``coordinator.py``).

The coordinator decides (stages, kills, arrivals, the scheduler's decisions); the
driver carries its actions out and feeds it what the tasks report. It starts every
job's tasks (``hosts.cojob_task``) in their hosts' namespaces, hears their events on
the management channel (a unix socket of the run, never the emulated data network),
sends them their stages, and turns each decision into one batch of flow policies
(``ControllerClient.apply``): per flow, the switch queue (DSCP) of the receiver's
local priority and the sender NIC queue of the sender's (Fig. 8).

Everything the driver hears and decides goes, in order, to ``events.jsonl`` and
``decisions.jsonl`` of the run directory; metrics are computed from those files.

Port plan (``hosts.cojob_task``): jobs take ports in workload order; a job with W
workers and S PSs (its placement's, so a trace's jobs may differ) has PS p
listening on ``ps_port0 + p`` and worker w sending from ``worker_port0 + w*S + p``
to PS p, where ps_port0 and worker_port0 follow the previous job's last ports from
``PS_PORT_BASE`` and ``WORKER_PORT_BASE``. Both ranges are disjoint, below the
ephemeral range, and never reused within a run, so every flow's 5-tuple is known
before it starts.
"""
from __future__ import annotations

import json
import queue
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.channel import DriverError, EventServer
from experiments.cojob import spec as cojob_spec
from experiments.cojob.coordinator import CojobCoordinator, Decision, FlowKey, Note, RunStage, StartCojob, StopJob
from experiments.workloads import cojob as cojob_mod
from hosts.messages import command

PS_PORT_BASE = 20000
WORKER_PORT_BASE = 2000
EPHEMERAL_START = 32768
# A task's longest wait without progress. Strict priority may starve a job for as long as
# higher stages keep its ports busy (a 120 s bound failed a testbed run), so it is generous.
TASK_TIMEOUT_S = 900.0
STOP_GRACE_S = 15.0
PROCESS_POLL_S = 1.0


@dataclass
class JobState:
    plan: cojob_mod.JobPlan
    tasks: list[str]
    workers: int
    ps: int
    ps_port0: int  # its PSs listen on ps_port0 + p
    worker_port0: int  # worker w talks to PS p from worker_port0 + w * ps + p
    stopped: bool = False


class CojobDriver:
    """The emulation backend of ``CojobCoordinator``: its actions become task processes,
    commands on the management channel and flow policies; the tasks' events become
    its inputs."""

    def __init__(self, em, spec: dict, workload: cojob_mod.Workload, run_dir: Path, events_path: str,
                 progress=print):
        self.em, self.spec, self.workload, self.run_dir = em, spec, workload, run_dir
        self.scheduler = spec["scheduler"]["name"]
        self.period_s = spec["scheduler"]["period_s"]
        self.progress = progress
        self.scaling = cojob_spec.build_scaling(spec)
        self.coordinator = CojobCoordinator(workload, self.scaling, self.scheduler, self.period_s)
        self.server = EventServer(events_path)
        self.events_out = open(run_dir / "events.jsonl", "w")
        self.decisions_out = open(run_dir / "decisions.jsonl", "w")
        self.jobs: dict[str, JobState] = {}
        self.hello: dict[int, set[str]] = {plan.cojob_id: set() for plan in workload.cojobs}
        # Each job's placement says how many workers and PSs it has (a trace's jobs differ);
        # its ports are the next free ones of the port plan.
        ps_next = worker_next = 0
        for plan in workload.cojobs:
            for job in plan.jobs:
                placement = workload.placements[job.key]
                workers, ps = len(placement.workers), len(placement.ps)
                self.jobs[job.key] = JobState(job, [f"{job.key}/w{i}" for i in range(workers)]
                                              + [f"{job.key}/p{i}" for i in range(ps)], workers, ps,
                                              PS_PORT_BASE + ps_next, WORKER_PORT_BASE + worker_next)
                ps_next, worker_next = ps_next + ps, worker_next + workers * ps
        if WORKER_PORT_BASE + worker_next > PS_PORT_BASE or PS_PORT_BASE + ps_next > EPHEMERAL_START:
            raise DriverError(f"workload: {len(self.jobs)} jobs do not fit the port plan")
        self.task_of_job = {task: key for key, job in self.jobs.items() for task in job.tasks}
        self.installed: dict[tuple, tuple[int, int]] = {}  # flow 5-tuple -> (queue, host_queue)
        self.policy_ids: dict[tuple, int] = {}
        self.processes: dict[str, object] = {}  # task id -> its process
        self.started_t: dict[int, float] = {}  # cojob -> its running stage's start, for progress lines

    # --- ports and flows -----------------------------------------------------------
    def ps_port(self, job: JobState, p: int) -> int:
        return job.ps_port0 + p

    def worker_base(self, job: JobState, w: int) -> int:
        return job.worker_port0 + w * job.ps

    def flow_tuple(self, key: FlowKey) -> tuple:
        """The 5-tuple of a coordinator's flow: a push goes from the worker's port to the PS's."""
        job = self.jobs[key.job]
        placement = self.workload.placements[key.job]
        worker = (placement.workers[key.worker], self.worker_base(job, key.worker) + key.ps)
        ps = (placement.ps[key.ps], self.ps_port(job, key.ps))
        (src, sport), (dst, dport) = (worker, ps) if key.phase == cojob_mod.PUSH else (ps, worker)
        return (src, dst, "tcp", sport, dport)

    def flows_of(self, job: JobState) -> list[dict]:
        """Every network flow of a job (5-tuple and hosts); same-host pairs cross no port."""
        placement = self.workload.placements[job.plan.key]
        return [_flow(self.flow_tuple(FlowKey(job.plan.key, w, p, phase)))
                for w, w_host in enumerate(placement.workers) for p, p_host in enumerate(placement.ps)
                if w_host != p_host for phase in (cojob_mod.PUSH, cojob_mod.PULL)]

    # --- logging -------------------------------------------------------------------
    def log(self, message: dict) -> None:
        self.events_out.write(json.dumps(message, separators=(",", ":")) + "\n")

    def note(self, kind: str, **fields) -> dict:
        message = {"kind": kind, "t": time.time(), **fields}
        self.log(message)
        return message

    # --- the coordinator's actions -------------------------------------------------
    def carry_out(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, Note):
                self.note(action.kind, **action.fields)
                self._progress(action)
            elif isinstance(action, StartCojob):
                self.start_cojob(action.cojob)
            elif isinstance(action, RunStage):
                self.started_t[action.cojob] = time.time()
                for key in action.jobs:
                    for task in self.jobs[key].tasks[:self.jobs[key].workers]:
                        self.server.send(task, command("run_stage", stage=action.stage,
                                                       iterations=action.iterations))
            elif isinstance(action, StopJob):
                self.stop_job(self.jobs[action.job])
            elif isinstance(action, Decision):
                self.apply(action)

    def _progress(self, note: Note) -> None:
        f = note.fields
        if note.kind == "cojob_arrival":
            self.progress(f"cojob {f['cojob']} ({f['model']}) arrives")
        elif note.kind == "stage_end":
            self.progress(f"cojob {f['cojob']} stage {f['stage']} done in "
                          f"{time.time() - self.started_t[f['cojob']]:.1f} s")
        elif note.kind == "cojob_end":
            self.progress(f"cojob {f['cojob']} ends")

    def start_cojob(self, cojob: int) -> None:
        plan = self.coordinator.cojobs[cojob].plan
        for job_plan in plan.jobs:
            job = self.jobs[job_plan.key]
            iteration = cojob_mod.scaled(plan.profile, self.scaling, job.ps)
            placement = self.workload.placements[job.plan.key]
            common = [sys.executable, "-m", "hosts.cojob_task", "--job", job.plan.key, "--events", self.server.path,
                      "--bytes", str(iteration.bytes_per_partition), "--workers", str(job.workers),
                      "--timeout-s", str(TASK_TIMEOUT_S), "--congestion", self.spec["tcp_congestion"]]
            ps_addrs = []
            for p, host in enumerate(placement.ps):
                ip = self.em.fabric.host(host).ip
                ps_addrs.append(f"{ip}:{self.ps_port(job, p)}")
                self._spawn(f"{job.plan.key}/p{p}", host, common + ["--role", "ps", "--index", str(p),
                                                                    "--host", host, "--listen", ps_addrs[-1]])
            for w, host in enumerate(placement.workers):
                self._spawn(f"{job.plan.key}/w{w}", host, common + [
                    "--role", "worker", "--index", str(w), "--host", host, "--compute-s", f"{iteration.compute_s:.6f}",
                    "--ps-addrs", ",".join(ps_addrs), "--worker-port-base", str(self.worker_base(job, w))])

    def _spawn(self, task: str, host: str, args: list[str]) -> None:
        with open(self.run_dir / "tasks.log", "ab") as log:
            self.processes[task] = self.em.popen(host, args, stdout=log, stderr=log)

    def stop_job(self, job: JobState) -> None:
        job.stopped = True
        for task in job.tasks:
            try:
                self.server.send(task, command("stop"))
            except DriverError:
                pass  # already gone: a stopped job's tasks may exit first

    # --- events --------------------------------------------------------------------
    def handle(self, message: dict) -> None:
        self.log(message)
        kind, task = message.get("kind"), message.get("task", "")
        job_key = self.task_of_job.get(task)
        if kind == "error":
            if job_key is not None and self.jobs[job_key].stopped:
                return  # peers of a stopped job see its connections close
            raise DriverError(f"task {task} on {message.get('host', '?')} failed: {message.get('error')}")
        if job_key is None:
            return
        cojob = self.coordinator.cojob_of[job_key]
        if kind == "hello":
            self.hello[cojob].add(task)
            plan = self.coordinator.cojobs[cojob].plan
            if len(self.hello[cojob]) == sum(len(self.jobs[job.key].tasks) for job in plan.jobs):
                self.carry_out(self.coordinator.ready(cojob, time.time()))
        elif kind == "iteration_end" and task.endswith("/w0"):
            self.coordinator.iteration_done(job_key)
        elif kind == "stage_done":
            worker = int(task.rsplit("/w", 1)[1])
            self.carry_out(self.coordinator.worker_done(job_key, worker, message.get("stage"), time.time()))

    # --- scheduling ----------------------------------------------------------------
    def apply(self, decision: Decision) -> None:
        """One decision as one batch of the changed flow policies."""
        started = time.monotonic()
        desired = {self.flow_tuple(key): pair for key, pair in decision.queues.items()}
        changes, keys = [], []
        for key, (queue_, host_queue) in sorted(desired.items()):
            if self.installed.get(key) != (queue_, host_queue):
                changes.append({"set": {**_flow(key), "queue": queue_, "host_queue": host_queue}})
                keys.append(key)
        gone = sorted(set(self.installed) - set(desired))
        for key in gone:
            changes.append({"remove": self.policy_ids[key]})
        if changes:
            ids = self.em.client.apply(changes)
            for key, policy_id in zip(keys, ids):
                self.installed[key], self.policy_ids[key] = desired[key], policy_id
            for key in gone:
                del self.installed[key], self.policy_ids[key]
        order = list(decision.order)
        record = {"t": time.time(), "scheduler": self.scheduler, "order": order,
                  "apply_s": round(time.monotonic() - started, 4),
                  "set": [[*key, *desired[key]] for key in keys], "removed": [list(key) for key in gone]}
        self.decisions_out.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.decisions_out.flush()
        self.note("decision", scheduler=self.scheduler, order=order, changed=len(changes))

    # --- the loop ------------------------------------------------------------------
    def run(self) -> None:
        t0 = time.monotonic()
        deadline = t0 + self.spec["time_limit_s"]
        timed = self.coordinator.timed_arrivals()
        next_tick = t0 + self.period_s
        next_poll = t0
        while not self.coordinator.finished:
            now = time.monotonic()
            while timed and t0 + timed[0][0] <= now:
                self.carry_out(self.coordinator.arrive(timed.pop(0)[1], time.time()))
            if now >= next_tick:
                self.carry_out(self.coordinator.tick(time.time()))
                next_tick = now + self.period_s
            if now > deadline:
                raise DriverError(f"time_limit_s: the workload did not finish within {self.spec['time_limit_s']:g} s")
            wake = min([next_tick, deadline] + ([t0 + timed[0][0]] if timed else []))
            try:
                message = self.server.inbox.get(timeout=max(0.0, wake - time.monotonic()))
            except queue.Empty:
                continue
            self.handle(message)
            if time.monotonic() >= next_poll:  # not per event: thousands of events, ~100 processes
                self._failed_processes()
                next_poll = time.monotonic() + PROCESS_POLL_S

    def _failed_processes(self) -> None:
        for task, proc in self.processes.items():
            code = proc.poll()
            if code not in (None, 0) and not self.jobs[self.task_of_job[task]].stopped:
                raise DriverError(f"task {task} exited with {code}; see tasks.log")

    def close(self) -> None:
        """Stop every task still running, then close the channel and the logs."""
        for cojob, c in self.coordinator.cojobs.items():
            for job in c.plan.jobs:
                if not self.jobs[job.key].stopped and c.arrived_t is not None:
                    self.stop_job(self.jobs[job.key])
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - the emulation's tear-down kills what is left
                pass
        while not self.server.inbox.empty():
            self.log(self.server.inbox.get())
        self.server.close()
        self.events_out.close()
        self.decisions_out.close()


def _key(flow: dict) -> tuple:
    return (flow["src"], flow["dst"], flow["proto"], flow["src_port"], flow["dst_port"])


def _flow(key: tuple) -> dict:
    return dict(zip(("src", "dst", "proto", "src_port", "dst_port"), key))
