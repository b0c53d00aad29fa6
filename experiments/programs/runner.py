"""``trainbed run`` for the ``programs`` kind: the user's commands on the emulated hosts.

Through ``experiments.platform.run`` like every kind: the fabric comes up, the
spec's static policies are set, then each program starts at its ``start_s`` on each
of its hosts (``sh -c COMMAND`` in the host's namespace, in the checkout, with
``program_env`` and the project's Python first on PATH; stdout and stderr kept in
``raw/programs/<program>/<rank>/``, its ``TRAINBED_OUT``), policy changes are
applied when due, and every ``SAMPLE_S`` the bytes each host sent into and took
from the fabric are read (``raw/host_bytes.csv``).

The run ends when every main program has exited 0; background programs are then
stopped (SIGTERM, SIGKILL after ``STOP_GRACE_S``), which is no failure. A program
that exits non-zero, whatever its role, ends the run: it is recorded by name, host
and exit code with the last line of its stderr, the others are stopped, and the run
raises (``completed: false``). So does the time limit. Nothing is left running: a
process that will not stop on SIGTERM is killed.
"""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from controller.client import CONTROLLER_ENV
from experiments import store
from experiments.errors import one_line
from experiments.platform.cpu import CpuMonitor
from experiments.platform.fidelity import (collect_fabric_counters, delayed_changes, fidelity_fields, host_bytes,
                                          traffic_window)
from experiments.platform.net import Emulation
from experiments.platform.run import run_workload
from experiments.programs import allreduce
from experiments.programs.spec import program_env
from experiments.store import REPO_ROOT
from topologies.units import mbps_of_bytes

SAMPLE_S = 0.5
STOP_GRACE_S = 5.0


class ProgramFailed(RuntimeError):
    """A program exited non-zero; the message names it, its host and exit code."""


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


class Process:
    """One rank of one program: its process, its directory, when it ran and how it ended."""

    def __init__(self, program: dict, rank: int, out_dir: Path):
        self.program, self.rank, self.dir = program, rank, out_dir
        self.host = program["hosts"][rank]
        self.proc: subprocess.Popen | None = None
        self.start_s: float | None = None
        self.end_s: float | None = None
        self.exit_code: int | None = None
        self.stopped = False  # stopped by the run (a background program at the end, or a fault)

    @property
    def name(self) -> str:
        return f"{self.program['name']}[{self.rank}]"

    def record(self) -> dict:
        return {"program": self.program["name"], "rank": self.rank, "host": self.host, "role": self.program["role"],
                "exit_code": self.exit_code, "stopped": self.stopped, "start_s": self.start_s, "end_s": self.end_s,
                "stderr_tail": _last_line(self.dir / "stderr.txt") if self.exit_code not in (0, None) else None}


class ProgramsWorkload:
    def __init__(self, spec: dict, run: Path):
        self.spec, self.raw = spec, run / store.RAW
        self.t0: float | None = None
        self.t0_epoch: float | None = None
        self.em: Emulation | None = None
        self.processes = [Process(program, rank, self.raw / "programs" / program["name"] / str(rank))
                          for program in spec["workload"]["programs"] for rank in range(len(program["hosts"]))]
        self.policy_ids: dict[str, list[int]] = {}
        self.changes: list[dict] = []
        self.samples: list[tuple[float, dict]] = []

    # --- the run ---------------------------------------------------------------------
    def start(self, em: Emulation, events_path: str) -> None:
        self.em = em
        for policy in self.spec["workload"]["policies"]:
            self._set(policy, {k: v for k, v in policy.items() if k not in ("name", "flows")})

    def _set(self, policy: dict, fields: dict) -> None:
        """Give the policy's flows ``fields`` (none: remove their policies), in one batch.
        Setting a flow that has a policy changes its rules in place (the controller keys
        policies by flow), so no packet of it passes unmarked during a change."""
        if fields:
            self.policy_ids[policy["name"]] = self.em.client.apply(
                [{"set": {**match, **fields}} for match in policy["flows"]])
        else:
            self.em.client.apply([{"remove": pid} for pid in self.policy_ids.pop(policy["name"], [])])

    def _launch(self, process: Process) -> None:
        process.dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
               "PYTHONPATH": str(REPO_ROOT), CONTROLLER_ENV: self.em.client.path,
               **program_env(self.spec, process.program, process.rank, str(process.dir))}
        with open(process.dir / "stdout.txt", "wb") as out, open(process.dir / "stderr.txt", "wb") as err:
            process.proc = self.em.popen(process.host, ["sh", "-c", process.program["command"]], stdout=out,
                                         stderr=err, env=env, cwd=REPO_ROOT)
        process.start_s = time.monotonic() - self.t0

    def run(self) -> None:
        spec = self.spec
        by_name = {p["name"]: p for p in spec["workload"]["policies"]}
        # (due time, starts before changes at the same time, what); sorted on the first two only
        due = [(p.program["start_s"], 0, p) for p in self.processes]
        due += [(c["at_s"], 1, c) for c in spec["workload"]["policy_changes"]]
        due.sort(key=lambda e: (e[0], e[1]))
        self.t0, self.t0_epoch = time.monotonic(), time.time()
        deadline = self.t0 + spec["time_limit_s"]
        next_sample = self.t0
        while True:
            now = time.monotonic()
            while due and due[0][0] <= now - self.t0:
                _, kind, entry = due.pop(0)
                if kind == 0:
                    self._launch(entry)
                else:
                    self._set(by_name[entry["policy"]], {} if entry["remove"] else
                              {k: entry[k] for k in entry if k not in ("at_s", "policy", "remove")})
                    self.changes.append({"policy": entry["policy"], "at_s": entry["at_s"],
                                         "applied_s": time.monotonic() - self.t0})
            if now >= next_sample:
                self.samples.append((now - self.t0, host_bytes(self.em)))
                next_sample += SAMPLE_S
            self._reap()
            failed = [p for p in self.processes if p.exit_code not in (None, 0) and not p.stopped]
            if failed:
                first = failed[0]
                said = _last_line(first.dir / "stderr.txt")
                raise ProgramFailed(f"program {first.name} on {first.host} exited {first.exit_code}"
                                    + (f": {said}" if said else ""))
            mains = [p for p in self.processes if p.program["role"] == "main"]
            if not due and all(p.exit_code == 0 for p in mains):
                break
            if now >= deadline:
                running = [p.name for p in self.processes if p.proc is not None and p.exit_code is None]
                raise TimeoutError(f"time_limit_s {spec['time_limit_s']:g} s reached with "
                                   f"{', '.join(running) or 'programs still to start'} running")
            time.sleep(min(0.1, max(0.0, next_sample - time.monotonic())))
        self.samples.append((time.monotonic() - self.t0, host_bytes(self.em)))

    def _reap(self) -> None:
        for p in self.processes:
            if p.proc is not None and p.exit_code is None and p.proc.poll() is not None:
                p.exit_code, p.end_s = p.proc.returncode, time.monotonic() - self.t0

    def stop(self) -> None:
        """Every process still running: SIGTERM to its process group, SIGKILL after the grace."""
        running = [p for p in self.processes if p.proc is not None and p.proc.poll() is None]
        for p in running:
            p.stopped = True
            _signal_group(p.proc, signal.SIGTERM)
        grace_end = time.monotonic() + STOP_GRACE_S
        for p in running:
            try:
                p.proc.wait(timeout=max(0.1, grace_end - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(p.proc, signal.SIGKILL)
                p.proc.wait()
        if self.t0 is not None:
            self._reap()

    def collect(self, em: Emulation) -> list[str]:
        errors = collect_fabric_counters(em, self.raw)
        try:
            store.write_json(self.raw / "policies.json", em.client.policies())
        except Exception as err:  # noqa: BLE001 - a missing part must not lose the others
            errors.append(f"policies.json: {one_line(err)}")
        self._write_host_bytes()
        return errors

    def _write_host_bytes(self) -> None:
        with open(self.raw / "host_bytes.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["time_s", "host", "sent_bytes", "received_bytes"])
            for t, counters in self.samples:
                for host, (sent, received) in sorted(counters.items()):
                    writer.writerow([f"{t:.3f}", host, sent, received])

    # --- the summary -----------------------------------------------------------------
    def summary_fields(self) -> dict:
        return {"t0_epoch_s": self.t0_epoch, "programs": [p.record() for p in self.processes]}

    def analyse(self, cpu: CpuMonitor, outages: list[dict]) -> dict:
        spec = self.spec
        _, reasons = delayed_changes(self.changes, "policy")
        failed = [p.record() for p in self.processes if p.exit_code not in (None, 0) and not p.stopped]
        reasons += [f"program {r['program']}[{r['rank']}] on {r['host']} exited {r['exit_code']}" for r in failed]
        summary = {"failed_programs": failed, "policy_changes": self.changes,
                   "host_mbps": mean_host_mbps(self.samples)}
        if "allreduce" in spec["workload"]["analysis"]:
            try:
                summary.update(self._allreduce(spec["workload"]["analysis"]["allreduce"]))
            except ValueError as err:  # the program wrote no usable iterations.csv: say so, keep the rest
                summary["allreduce_error"] = one_line(err)
                reasons.append(f"all-reduce analysis: {one_line(err)}")
        return {**summary, **fidelity_fields(cpu, spec["fidelity"], outages, self.raw, reasons,
                                             cpu_window=traffic_window(self.samples, self.t0_epoch))}

    def _allreduce(self, part: dict) -> dict:
        """Rank 0's iterations of the all-reduce program against the ring's ideal, with
        and without the competing program running."""
        program = next(p for p in self.spec["workload"]["programs"] if p["name"] == part["program"])
        rank0 = next(p for p in self.processes if p.program is program and p.rank == 0)
        rows = allreduce.read_iterations(rank0.dir / "iterations.csv")
        windows = [(self.t0_epoch + p.start_s, self.t0_epoch + (p.end_s if p.end_s is not None else p.start_s))
                   for p in self.processes if p.program["name"] == part.get("competing") and p.start_s is not None]
        nic = self.em.fabric.host_mbps()
        link_mbps = min(nic[h] for h in program["hosts"])
        return allreduce.analyse_iterations(rows, link_mbps, len(program["hosts"]), windows)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the shell and what it started: mnexec -d made it a session leader
    except ProcessLookupError:
        pass


def mean_host_mbps(samples: list[tuple[float, dict]]) -> dict:
    """Per host, the mean Mbit/s it sent and received over the run."""
    if len(samples) < 2:
        return {}
    (t_a, first), (t_b, last) = samples[0], samples[-1]
    span = t_b - t_a
    if span <= 0:
        return {}
    return {host: {"sent": mbps_of_bytes(last[host][0] - first[host][0], span),
                   "received": mbps_of_bytes(last[host][1] - first[host][1], span)} for host in first}


def run_programs_spec(spec: dict, out: str | None = None) -> Path:
    return run_workload(spec, out, ProgramsWorkload)
