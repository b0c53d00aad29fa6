"""A sampler thread of a run: every interval, something of the live fabric read into a
CSV by the thread itself (netlink: no process forked), its CPU time counted. The
capture's queue and TCP samplers are two; each says what it reads (``header``,
``sample``) and what its summary fields are called (``prefix``)."""
from __future__ import annotations

import csv
import os
import threading
import time
from pathlib import Path

from experiments.errors import one_line

READ_TIMEOUT_S = 10.0  # a sampler's read that takes longer is stuck: the sampling ends on it


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

    def close(self) -> None:
        """Release what the sampler holds open (its sockets): at ``stop``, or when the
        capture fails to start after building it."""

    def run(self) -> None:
        started = time.thread_time()
        try:
            self._sample_until_stopped()
        finally:  # the thread's own work (netlink reads, parsing, writing) competes for the cores too
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
        self.join(timeout=READ_TIMEOUT_S + 5)
        if self.is_alive():
            self.error = self.error or f"did not stop within {READ_TIMEOUT_S + 5:g} s"
        span = time.monotonic() - self.t0
        cores = os.cpu_count() or 1
        p = self.prefix
        return {f"{p}_samples": self.samples, f"{p}_sampler_cpu_s": round(self.cpu_s, 3),
                f"{p}_sampler_cpu_share": self.cpu_s / (span * cores) if span > 0 else None,
                **({f"{p}_sampler_error": self.error} if self.error else {})}
