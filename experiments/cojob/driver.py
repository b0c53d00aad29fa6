"""The cojob driver: Grouper's coordinator on the emulated fabric.

It starts every job's tasks (``hosts.cojob_task``) in their hosts' namespaces,
learns job and flow state from their events on the management channel (a unix
socket of the run, never the emulated data network), paces the cojobs through
their stages (a stage ends when every surviving job of the cojob finished it; then
the worse half is killed, by the plan's learning curves), starts cojobs as they
arrive, and runs the scheduler: on its period and when a cojob starts
(``grouper``, ``grouper-offline``, ``baraat``, ``sincronia``), on every stage start
and end (``grouper-immediate``), or never (``fs``: every flow in one queue). A
decision becomes one batch of flow policies
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
from dataclasses import dataclass, field
from pathlib import Path

from controller.schedulers.grouper import Stage
from experiments.channel import DriverError, EventServer
from experiments.cojob import scheduling
from experiments.cojob import spec as cojob_spec
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
    iterations_done: int = 0  # by worker 0, in the current stage
    stopped: bool = False


@dataclass
class CojobState:
    plan: cojob_mod.CojobPlan
    jobs: dict[str, JobState]
    arrived_t: float | None = None
    stage: int | None = None
    stage_started_t: float = 0.0
    alive: set[str] = field(default_factory=set)
    hello: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)  # workers done with the current stage
    ended: bool = False


class CojobDriver:
    def __init__(self, em, spec: dict, workload: cojob_mod.Workload, run_dir: Path, events_path: str,
                 progress=print):
        self.em, self.spec, self.workload, self.run_dir = em, spec, workload, run_dir
        self.scheduler = spec["scheduler"]["name"]
        self.period_s = spec["scheduler"]["period_s"]
        self.progress = progress
        self.scaling = cojob_spec.build_scaling(spec)
        self.server = EventServer(events_path)
        self.events_out = open(run_dir / "events.jsonl", "w")
        self.decisions_out = open(run_dir / "decisions.jsonl", "w")
        self.cojobs: dict[int, CojobState] = {}
        # Each job's placement says how many workers and PSs it has (a trace's jobs differ);
        # its ports are the next free ones of the port plan.
        jobs_total = ps_next = worker_next = 0
        for plan in workload.cojobs:
            jobs = {}
            for job in plan.jobs:
                placement = workload.placements[job.key]
                workers, ps = len(placement.workers), len(placement.ps)
                jobs[job.key] = JobState(job, [f"{job.key}/w{i}" for i in range(workers)]
                                         + [f"{job.key}/p{i}" for i in range(ps)], workers, ps,
                                         PS_PORT_BASE + ps_next, WORKER_PORT_BASE + worker_next)
                jobs_total, ps_next, worker_next = jobs_total + 1, ps_next + ps, worker_next + workers * ps
            self.cojobs[plan.cojob_id] = CojobState(plan, jobs)
        if WORKER_PORT_BASE + worker_next > PS_PORT_BASE or PS_PORT_BASE + ps_next > EPHEMERAL_START:
            raise DriverError(f"workload: {jobs_total} jobs do not fit the port plan")
        self.task_of_job = {task: key for c in self.cojobs.values()
                            for key, job in c.jobs.items() for task in job.tasks}
        self.installed: dict[tuple, tuple[int, int]] = {}  # flow key -> (queue, host_queue)
        self.policy_ids: dict[tuple, int] = {}
        self.processes: dict[str, object] = {}  # task id -> its process

    # --- ports and flows -----------------------------------------------------------
    def ps_port(self, job: JobState, p: int) -> int:
        return job.ps_port0 + p

    def worker_base(self, job: JobState, w: int) -> int:
        return job.worker_port0 + w * job.ps

    def flows_of(self, job: JobState) -> list[dict]:
        """Every network flow of a job (5-tuple and hosts); same-host pairs cross no port."""
        placement = self.workload.placements[job.plan.key]
        flows = []
        for w, w_host in enumerate(placement.workers):
            for p, p_host in enumerate(placement.ps):
                if w_host == p_host:
                    continue
                src_port, dst_port = self.worker_base(job, w) + p, self.ps_port(job, p)
                flows.append({"src": w_host, "dst": p_host, "proto": "tcp", "src_port": src_port,
                              "dst_port": dst_port})
                flows.append({"src": p_host, "dst": w_host, "proto": "tcp", "src_port": dst_port,
                              "dst_port": src_port})
        return flows

    # --- logging -------------------------------------------------------------------
    def log(self, message: dict) -> None:
        self.events_out.write(json.dumps(message, separators=(",", ":")) + "\n")

    def note(self, kind: str, **fields) -> dict:
        message = {"kind": kind, "t": time.time(), **fields}
        self.log(message)
        return message

    # --- lifecycle -----------------------------------------------------------------
    def start_cojob(self, c: CojobState) -> None:
        c.arrived_t = time.time()
        self.note("cojob_arrival", cojob=c.plan.cojob_id, model=c.plan.model)
        self.progress(f"cojob {c.plan.cojob_id} ({c.plan.model}) arrives")
        for job in c.jobs.values():
            iteration = cojob_mod.scaled(c.plan.profile, self.scaling, job.ps)
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
        c.alive = set(c.jobs)

    def _spawn(self, task: str, host: str, args: list[str]) -> None:
        with open(self.run_dir / "tasks.log", "ab") as log:
            self.processes[task] = self.em.popen(host, args, stdout=log, stderr=log)

    def start_stage(self, c: CojobState, stage: int) -> None:
        c.stage, c.stage_started_t, c.done = stage, time.time(), set()
        self.note("stage_start", cojob=c.plan.cojob_id, stage=stage, jobs=sorted(c.alive))
        for key in sorted(c.alive):
            c.jobs[key].iterations_done = 0
            for task in c.jobs[key].tasks[:c.jobs[key].workers]:
                self.server.send(task, command("run_stage", stage=stage, iterations=c.plan.stage_iterations[stage]))
        if self.scheduler == "grouper-immediate" or stage == 0:
            self.reschedule()  # a new cojob's flows would otherwise wait up to a period unmarked

    def end_stage(self, c: CojobState) -> None:
        stage = c.stage
        self.note("stage_end", cojob=c.plan.cojob_id, stage=stage)
        self.progress(f"cojob {c.plan.cojob_id} stage {stage} done in {time.time() - c.stage_started_t:.1f} s")
        last = stage == len(c.plan.stage_iterations) - 1
        for key in sorted(c.alive):
            if last:
                self.note("job_finished", job=key, cojob=c.plan.cojob_id)
                self.stop_job(c.jobs[key])
            elif not c.jobs[key].plan.runs(stage + 1):
                self.note("job_killed", job=key, cojob=c.plan.cojob_id, after_stage=stage)
                self.stop_job(c.jobs[key])
        c.alive = {key for key in c.alive if not c.jobs[key].stopped}
        for other in self.cojobs.values():
            if other.arrived_t is None and other.plan.arrival.after == (c.plan.cojob_id, stage):
                self.start_cojob(other)
        if last:
            c.ended, c.stage = True, None
            self.note("cojob_end", cojob=c.plan.cojob_id)
            self.progress(f"cojob {c.plan.cojob_id} ends")
        else:
            self.start_stage(c, stage + 1)
        if self.scheduler == "grouper-immediate":
            self.reschedule()

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
            if job_key is not None and self._job(job_key).stopped:
                return  # peers of a stopped job see its connections close
            raise DriverError(f"task {task} on {message.get('host', '?')} failed: {message.get('error')}")
        if job_key is None:
            return
        c = self.cojobs[int(job_key[1:job_key.index("j")])]
        if kind == "hello":
            c.hello.add(task)
            if c.stage is None and not c.ended and len(c.hello) == sum(len(j.tasks) for j in c.jobs.values()):
                self.start_stage(c, 0)
        elif kind == "iteration_end" and task.endswith("/w0"):
            c.jobs[job_key].iterations_done += 1
        elif kind == "stage_done" and message.get("stage") == c.stage:
            c.done.add(task)
            if len(c.done) == sum(c.jobs[key].workers for key in c.alive):
                self.end_stage(c)

    def _job(self, key: str) -> JobState:
        return self.cojobs[int(key[1:key.index("j")])].jobs[key]

    # --- scheduling ----------------------------------------------------------------
    def stages_now(self) -> tuple[list[Stage], list[Stage]]:
        """(every remaining stage of every active cojob, the running ones), loads in bytes."""
        offline = self.scheduler == "grouper-offline"
        every, running = [], []
        for c in self.cojobs.values():
            if c.stage is None:
                continue
            stages = scheduling.remaining_stages(c.plan, self.workload.placements, self.scaling.bytes_scale, c.stage,
                                                 {key: c.jobs[key].iterations_done for key in c.alive},
                                                 c.stage_started_t, time.time(), offline)
            every += stages
            running += [stage for stage in stages if stage.index == c.stage]
        return every, running

    def order(self) -> tuple[list[str], list[Stage]]:
        every, running = self.stages_now()
        return scheduling.order(self.scheduler, every, running), running

    def reschedule(self) -> None:
        """One decision: the order, its queues, and the changed flow policies as one batch."""
        if self.scheduler == "fs":
            return  # fair share: every flow stays unmarked in the lowest queue
        started = time.monotonic()
        order, stages = self.order()
        if not order:
            return
        queues = scheduling.stage_queues(order, stages)
        desired: dict[tuple, tuple[int, int]] = {}
        for c in self.cojobs.values():
            if c.stage is None:
                continue
            stage_id = f"c{c.plan.cojob_id}/s{c.stage}"
            for key in c.alive:
                for flow in self.flows_of(c.jobs[key]):
                    pair = scheduling.flow_queues(queues, stage_id, flow["src"], flow["dst"])
                    if pair is not None:
                        desired[_key(flow)] = pair
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
        timed = sorted((self.scaling.arrival_s(c.plan.arrival.at_s), c.plan.cojob_id)
                       for c in self.cojobs.values() if c.plan.arrival.at_s is not None)
        next_tick = t0 + self.period_s
        next_poll = t0
        while not all(c.ended for c in self.cojobs.values()):
            now = time.monotonic()
            while timed and t0 + timed[0][0] <= now:
                self.start_cojob(self.cojobs[timed.pop(0)[1]])
            if now >= next_tick:
                if self.scheduler in scheduling.PERIODIC:
                    self.reschedule()
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
            if code not in (None, 0) and not self._job(self.task_of_job[task]).stopped:
                raise DriverError(f"task {task} exited with {code}; see tasks.log")

    def close(self) -> None:
        """Stop every task still running, then close the channel and the logs."""
        for c in self.cojobs.values():
            for job in c.jobs.values():
                if not job.stopped and c.arrived_t is not None:
                    self.stop_job(job)
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
