"""A sampler thread of a run: every interval, something of the live fabric read into a
CSV (by commands, or by the thread itself), its CPU time counted: the thread's own and
its commands'. The capture's queue and TCP samplers are two; each says what it reads
(``header``, ``sample``) and what its summary fields are called (``prefix``)."""
from __future__ import annotations

import csv
import os
import select
import subprocess
import threading
import time
from pathlib import Path

from experiments.errors import one_line

COMMAND_TIMEOUT_S = 10.0  # a sampler command that takes longer is stuck: the sampling ends on it


class Sampler(threading.Thread):
    """Rows into ``path`` every ``interval_s``, on the run's time axis (``t0``: the
    time.monotonic() the run's times count from). An error (a port or host gone at
    tear-down) ends the sampling, keeps what was sampled and is reported. A round
    that overruns its interval (the box short of CPU) is followed by the next at once,
    never by the missed ones: a sampler must not take the CPU the run is short of."""

    header: list[str] = []
    prefix = ""  # the summary fields: <prefix>_samples, <prefix>_sampler_cpu_s, ...

    def __init__(self, path: Path, interval_s: float, t0: float):
        super().__init__(name=f"{self.prefix}-sampler", daemon=True)
        self.path, self.interval_s, self.t0 = path, interval_s, t0
        self.stopped = threading.Event()
        self.cpu_s = 0.0
        self.samples = 0
        self.error: str | None = None

    def sample(self, t: float, writer) -> None:
        """One sample's rows at run time ``t``."""
        raise NotImplementedError

    def output(self, cmd: list[str]) -> str:
        """``cmd``'s standard output, its CPU time counted (its own rusage); OSError if it fails."""
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        chunks, fd, timed_out = [], proc.stdout.fileno(), False
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:  # read to EOF by hand: Popen's own timeouts reap the child, and its rusage with it
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                timed_out = True
                break
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        proc.stdout.close()
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting on it again
        self.cpu_s += usage.ru_utime + usage.ru_stime
        if timed_out:
            raise OSError(f"{' '.join(cmd)} took over {COMMAND_TIMEOUT_S:g} s")
        if proc.returncode != 0:
            raise OSError(f"{' '.join(cmd)} exited with {proc.returncode}")
        return b"".join(chunks).decode()

    def run(self) -> None:
        started = time.thread_time()
        try:
            self._sample_until_stopped()
        finally:  # the thread's own work (forking, parsing, netlink reads) competes for the cores too
            self.cpu_s += time.thread_time() - started

    def _sample_until_stopped(self) -> None:
        with open(self.path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(self.header)
            next_at = time.monotonic()
            while not self.stopped.is_set():
                try:
                    self.sample(time.monotonic() - self.t0, writer)
                except Exception as err:  # noqa: BLE001 - e.g. a port or host gone at tear-down: keep what was sampled
                    self.error = one_line(err)
                    return
                self.samples += 1
                next_at = max(next_at + self.interval_s, time.monotonic())
                self.stopped.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> dict:
        """Stop sampling; the summary fields of its cost."""
        self.stopped.set()
        self.join(timeout=COMMAND_TIMEOUT_S + 5)
        if self.is_alive():
            self.error = self.error or f"did not stop within {COMMAND_TIMEOUT_S + 5:g} s"
        span = time.monotonic() - self.t0
        cores = os.cpu_count() or 1
        p = self.prefix
        return {f"{p}_samples": self.samples, f"{p}_sampler_cpu_s": round(self.cpu_s, 3),
                f"{p}_sampler_cpu_share": self.cpu_s / (span * cores) if span > 0 else None,
                **({f"{p}_sampler_error": self.error} if self.error else {})}
