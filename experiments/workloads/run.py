"""The one runner of every event-driven workload kind (``cojob``, ``gnn``).

A workload is a program that reacts to events, not a timetable. Each kind gives a
``Workload``: it starts its host programs and monitors on the fabric (``start``),
feeds their events to its scheduler until it is done (``run``), stops them
(``stop``), reads counters while the fabric is still up (``collect``), and computes
its metrics afterwards from the run's data files (``analyse``). ``run_workload``
owns everything else, the same for every kind: the run directory, signals, the
CPU monitor, the fabric's bring-up and tear-down, controller outages, and the end
(``finish_run``: ``summary.json`` always, ``completed: false`` and the error after
any fault, nothing left running).
"""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Callable, Protocol

from experiments import store
from experiments.emulation import spec as emulation_spec
from experiments.emulation.net import Emulation
from experiments.emulation.runner import CpuMonitor, finish_run, terminate_on_signals


class Workload(Protocol):
    def start(self, em: Emulation, events_path: str) -> None: ...
    def run(self) -> None: ...
    def stop(self) -> None: ...  # safe after a start that failed halfway
    def collect(self, em: Emulation) -> None: ...
    def summary_fields(self) -> dict: ...
    def analyse(self, cpu: CpuMonitor, outages: list[dict]) -> dict: ...


def run_workload(spec: dict, out: str | None, make: Callable[[dict, Path], Workload]) -> Path:
    run = store.start_run(spec, out)
    workload = make(spec, run)
    previous = terminate_on_signals()
    cpu = CpuMonitor(time.monotonic())
    outages: list[dict] = []
    error: BaseException | None = None
    started = time.monotonic()
    try:
        with Emulation(emulation_spec.fabric_of(spec), run, options=emulation_spec.options_of(spec)) as em:
            events_path = str(em.record.path.parent / f"{em.run_id}.events.sock")
            em.record.add_file(events_path)
            cpu.start()
            try:
                workload.start(em, events_path)
                workload.run()
            finally:
                workload.stop()
                cpu.stopped.set()
                cpu.join()
                workload.collect(em)
                outages = em.controller_outages(started)
    except BaseException as err:  # noqa: BLE001 - recorded in summary.json, re-raised as RunError
        error = err
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    cpu.write_csv(run / "cpu.csv")
    summary = {"name": spec["name"], "scheduler": spec["scheduler"]["name"], "seed": spec["seed"],
               **workload.summary_fields(), "wall_s": round(time.monotonic() - started, 1)}
    return finish_run(run, summary, error, lambda: workload.analyse(cpu, outages))
