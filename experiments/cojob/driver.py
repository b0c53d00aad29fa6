"""The cojob driver: the emulation backend of Grouper's coordinator (``coordinator.py``).

The coordinator decides (stages, kills, arrivals, the scheduler's decisions); the
driver carries its actions out and feeds it what the tasks report. It starts every
job's tasks (``hosts.cojob_task``) in their hosts' namespaces, hears their events on
the management channel (a unix socket of the run, never the emulated data network),
sends them their stages, and turns each decision into one batch of flow policies
(``ControllerClient.apply``): per flow, the switch queue (DSCP) of the receiver's
local priority and the sender NIC queue of the sender's (Fig. 8).

Everything the driver hears and decides goes, in order, to ``events.jsonl`` and
``decisions.jsonl`` of the run directory; metrics are computed from those files. The
event loop, the task processes and the close are ``experiments.platform.driver``'s,
the policy batches ``experiments.platform.policysync``'s.

Port plan (``hosts.cojob_task``): jobs take ports in workload order; a job with W
workers and S PSs (its placement's, so a trace's jobs may differ) has PS p
listening on ``ps_port0 + p`` and worker w sending from ``worker_port0 + w*S + p``
to PS p, where ps_port0 and worker_port0 follow the previous job's last ports from
``PS_PORT_BASE`` and ``WORKER_PORT_BASE``. Both ranges are disjoint, below the
ephemeral range, and never reused within a run, so every flow's 5-tuple is known
before it starts.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.cojob import spec as cojob_spec
from experiments.cojob import workload as cojob_mod
from experiments.cojob.coordinator import CojobCoordinator, Decision, FlowKey, Note, RunStage, StartCojob, StopJob
from experiments.platform.channel import DriverError
from experiments.platform.driver import Driver
from experiments.platform.policysync import PolicySync
from hosts.messages import command

PS_PORT_BASE = 20000
WORKER_PORT_BASE = 2000
EPHEMERAL_START = 32768
# A task's longest wait without progress. Strict priority may starve a job for as long as
# higher stages keep its ports busy (a 120 s bound failed a testbed run), so it is generous.
TASK_TIMEOUT_S = 900.0


@dataclass
class JobState:
    plan: cojob_mod.JobPlan
    tasks: list[str]
    workers: int
    ps: int
    ps_port0: int  # its PSs listen on ps_port0 + p
    worker_port0: int  # worker w talks to PS p from worker_port0 + w * ps + p
    stopped: bool = False


class CojobDriver(Driver):
    """The emulation backend of ``CojobCoordinator``: its actions become task processes,
    commands on the management channel and flow policies; the tasks' events become
    its inputs. The run ends when the coordinator says every cojob ended."""

    def __init__(self, em, run: cojob_spec.CojobRun, run_dir: Path, events_path: str, progress=print):
        spec, workload = run.spec, run.workload
        self.spec, self.workload, self.scaling = spec, workload, run.scaling
        self.scheduler = spec["scheduler"]["name"]
        self.period_s = spec["scheduler"]["period_s"]
        self.progress = progress
        self.coordinator = CojobCoordinator(workload, self.scaling, self.scheduler)
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
        super().__init__(em, run_dir, events_path, spec["time_limit_s"])
        self.policies = PolicySync(em.client)  # flow 5-tuple -> {queue, host_queue}
        self.started_t: dict[int, float] = {}  # cojob -> its running stage's start, for progress lines
        self.run_t0 = 0.0  # time.monotonic() when the loop started: timed arrivals count from it
        self.timed: list[tuple[float, int]] = []  # (s from run_t0, cojob id) of the arrivals still to come
        self.next_tick = 0.0  # time.monotonic() of the scheduler's next period

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

    # --- the coordinator's actions -------------------------------------------------
    def carry_out(self, actions: list) -> None:
        # A new cojob's start-up (its tasks' processes: seconds) goes after the batch's
        # other actions, so a stage end that brings an arrival does not hold up the
        # continuing cojob's next stage (nothing of the batch waits for those tasks: the
        # new cojob's stage 0 starts when they say hello).
        for action in sorted(actions, key=lambda a: isinstance(a, StartCojob)):
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
                self.spawn(f"{job.plan.key}/p{p}", host, common + ["--role", "ps", "--index", str(p),
                                                                   "--host", host, "--listen", ps_addrs[-1]])
            for w, host in enumerate(placement.workers):
                self.spawn(f"{job.plan.key}/w{w}", host, common + [
                    "--role", "worker", "--index", str(w), "--host", host, "--compute-s", f"{iteration.compute_s:.6f}",
                    "--ps-addrs", ",".join(ps_addrs), "--worker-port-base", str(self.worker_base(job, w))])

    def stop_job(self, job: JobState) -> None:
        job.stopped = True
        self.send_stop(job.tasks)  # a stopped job's tasks may exit first

    # --- events --------------------------------------------------------------------
    def handle(self, message: dict) -> None:
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
        """One decision as one batch of the changed flow policies (in 5-tuple order),
        then the removals of the flows it no longer names."""
        started = time.monotonic()
        pairs = {self.flow_tuple(key): pair for key, pair in decision.queues.items()}  # (queue, host_queue)
        batch = self.policies.sync({key: {"queue": queue, "host_queue": host_queue}
                                    for key, (queue, host_queue) in sorted(pairs.items())})
        order = list(decision.order)
        record = {"t": time.time(), "scheduler": self.scheduler, "order": order,
                  "apply_s": round(time.monotonic() - started, 4),
                  "set": [[*key, *pairs[key]] for key in batch.ids], "removed": [list(key) for key in batch.removed]}
        self.log_decision(record)
        self.decisions_out.flush()
        self.note("decision", scheduler=self.scheduler, order=order, changed=len(batch.changes))

    # --- the loop ------------------------------------------------------------------
    def run(self) -> None:
        self.run_t0 = time.monotonic()
        self.timed = self.coordinator.timed_arrivals()
        self.next_tick = self.run_t0 + self.period_s
        super().run()

    def done(self) -> bool:
        return self.coordinator.finished

    def due(self, now: float) -> float:
        """The arrivals due by ``now``, then the scheduler's period if it came."""
        arrivals: list = []
        while self.timed and self.run_t0 + self.timed[0][0] <= now:
            arrivals += self.coordinator.arrive(self.timed.pop(0)[1], time.time())
        # Every arrival due now is noted before any of their tasks start (each cojob's
        # start-up takes seconds): a cojob's SCT counts from its arrival (Eq. 2), not
        # from when the cojob before it had its tasks up.
        self.carry_out(sorted(arrivals, key=lambda action: not isinstance(action, Note)))
        if now >= self.next_tick:
            self.carry_out(self.coordinator.tick(time.time()))
            self.next_tick = now + self.period_s
        return min([self.next_tick] + ([self.run_t0 + self.timed[0][0]] if self.timed else []))

    def task_exited(self, task: str, exit_code: int) -> bool:
        """A failure unless it exited cleanly or its job was stopped."""
        return exit_code != 0 and not self.jobs[self.task_of_job[task]].stopped

    def stop_running(self) -> None:
        """Stop every job of an arrived cojob that is not stopped yet."""
        for c in self.coordinator.cojobs.values():
            for job in c.plan.jobs:
                if not self.jobs[job.key].stopped and c.arrived_t is not None:
                    self.stop_job(self.jobs[job.key])
