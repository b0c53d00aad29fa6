"""The one runner of every workload kind on the fabric (``timetable``, ``cojob``, ``gnn``,
``programs``; co-location runs apart, off the network).

Each kind gives a ``Workload``: it starts its host programs and monitors on the fabric (``start``),
feeds their events to its scheduler until it is done (``run``), stops them
(``stop``), reads counters while the fabric is still up (``collect``), and computes
its metrics afterwards from the run's data files (``analyse``). ``run_workload``
owns everything else, the same for every kind: the run directory, signals, the
CPU monitor, the fabric's bring-up and tear-down, controller outages, and the end
(``finish_run``: ``summary.json`` always, ``completed: false`` and the error after
any fault, nothing left running; then ``report.html`` and the console summary).
"""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Callable, Protocol

from experiments import store
from experiments.errors import one_line
from experiments.platform import spec as emulation_spec
from experiments.platform.capture import Capture
from experiments.platform.cpu import CpuMonitor
from experiments.platform.net import Emulation
from experiments.reports import publish_run
from experiments.results import lookup
from experiments.validation import keep_beside


def interrupt_on_signals() -> dict:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the run, so that its ``finally``
    blocks stop what it started; returns the handlers they replace."""
    def raise_interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    return {s: signal.signal(s, raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}


class RunError(RuntimeError):
    """A run could not complete; its run directory still holds a summary (completed: false)."""


class Workload(Protocol):
    t0: float | None  # time.monotonic() its run times count from; None: the run's start
    def start(self, em: Emulation, events_path: str) -> None: ...
    def run(self) -> None: ...
    def stop(self) -> None: ...  # safe after a start that failed halfway
    def collect(self, em: Emulation) -> list[str]: ...  # the parts it could not read, "file: error" each
    def summary_fields(self) -> dict: ...
    def analyse(self, cpu: CpuMonitor, outages: list[dict]) -> dict: ...


def _start(spec: dict, out: str | None, simulated: bool = False) -> Path:
    """The run directory, its spec written, with the module of a scheduler of your own
    beside it (a placement of your own is recorded as its tasks)."""
    run = store.start_run(spec, out, kind="simulate" if simulated else "run")
    keep_beside(lookup(spec, "scheduler.name"), run)
    return run


def run_workload(spec: dict, out: str | None, make: Callable[[dict, Path], Workload]) -> Path:
    run = _start(spec, out)
    try:
        workload = make(spec, run)
    except BaseException as err:  # noqa: BLE001 - e.g. a trace unreadable at build: the run still gets its summary
        return finish_run(run, {"name": spec["name"], "backend": "emulated", "wall_s": 0.0}, err, dict)
    previous = interrupt_on_signals()
    cpu = CpuMonitor(time.monotonic())
    capture = Capture(spec.get("capture"), run / store.RAW, cpu.t0)  # one time axis for cpu.csv and the queues
    outages: list[dict] = []
    unread: list[str] = []  # the fabric's counters (and a kind's other files) that could not be read
    error: BaseException | None = None
    started = time.monotonic()
    try:
        with Emulation(emulation_spec.fabric_of(spec), run, options=emulation_spec.options_of(spec)) as em:
            events_path = str(em.record.path.parent / f"{em.run_id}.events.sock")
            em.record.add_file(events_path)
            cpu.start()
            failures: list[BaseException] = []

            def step(action: Callable[[], object]) -> None:
                try:
                    action()
                except BaseException as err:  # noqa: BLE001 - every later step still runs
                    failures.append(err)

            step(lambda: (capture.start(em), workload.start(em, events_path), workload.run()))
            # Each step of the end runs whatever an earlier one raised, so nothing is left
            # running and the run's first fault stays its error.
            step(workload.stop)
            step(capture.stop)
            step(lambda: (cpu.stopped.set(), cpu.join()))
            step(lambda: unread.extend(workload.collect(em)))
            step(lambda: outages.extend(em.controller_outages(workload.t0 or started)))
            if failures:
                raise _first_fault(failures)
    except BaseException as err:  # noqa: BLE001 - recorded in summary.json, re-raised as RunError
        error = err
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    cpu.write_csv(run / store.CPU_SAMPLES)
    summary = {"name": spec["name"], "backend": "emulated", **workload.summary_fields(), "wall_s": round(time.monotonic() - started, 1),
               **cpu.summary(), **capture.fields, **({"collect_errors": unread} if unread else {})}
    return finish_run(run, summary, error, lambda: _with_unread(
        _with_capture_cost(workload.analyse(cpu, outages), capture.fields), unread))


def _first_fault(failures: list[BaseException]) -> BaseException:
    """The run's error: its first fault, or a signal's interrupt wherever it came (so a
    sweep stops too); the others as notes on it, in ``traceback.txt``."""
    first = next((f for f in failures if isinstance(f, KeyboardInterrupt)), failures[0])
    for other in failures:
        if other is not first:
            first.add_note(f"then, while stopping: {one_line(other)}")
    return first


def _with_unread(analysis: dict, unread: list[str]) -> dict:
    """A run whose counters could not all be read completed, but its fidelity cannot be
    judged in full: untrustworthy, each unread part a reason (the run's
    ``collect_errors``)."""
    if unread:
        fidelity = analysis.get("fidelity") if isinstance(analysis.get("fidelity"), dict) else {}
        analysis["fidelity"] = {**fidelity, "trustworthy": False, "untrustworthy_reasons": [
            *fidelity.get("untrustworthy_reasons", []), *(f"not collected: {u}" for u in unread)]}
        analysis["trustworthy"] = False
    return analysis


def _with_capture_cost(analysis: dict, fields: dict) -> dict:
    """The capture samplers' CPU cost beside the fidelity verdict it may have moved; a
    packet capture that failed (``capture_errors``: its pcap is missing or cut short)
    makes the run untrustworthy, as the spec asked for what the run does not hold."""
    if fields and isinstance(analysis.get("fidelity"), dict):
        fidelity = {**analysis["fidelity"], **fields}
        failed = fields.get("capture_errors", [])
        if failed:
            fidelity["untrustworthy_reasons"] = [*fidelity.get("untrustworthy_reasons", []),
                                                 *(f"packet capture failed ({e})" for e in failed)]
            fidelity["trustworthy"] = analysis["trustworthy"] = False
        analysis["fidelity"] = fidelity
    return analysis


def simulate_workload(spec: dict, out: str | None, simulate: Callable[[dict, Path], dict]) -> Path:
    """The simulator backend's lifecycle: the same run directory as an emulated run
    (resolved spec, environment, ``summary.json`` always), ``simulate(spec, run)``
    writes the kind's data files and returns its summary fields; the summary says
    ``"backend": "simulated"``."""
    run = _start(spec, out, simulated=True)
    started = time.monotonic()
    fields: dict = {}
    error: BaseException | None = None
    try:
        fields = simulate(spec, run)
    except BaseException as err:  # noqa: BLE001 - recorded in summary.json, re-raised as RunError
        error = err
    summary = {"name": spec["name"], "backend": "simulated", "wall_s": round(time.monotonic() - started, 3)}
    return finish_run(run, summary, error, lambda: fields)


def finish_run(run: Path, summary: dict, error: BaseException | None, analysis) -> Path:
    """The end every runner shares: record the error (and its traceback), add what
    ``analysis()`` can still compute, write ``summary.json``, point ``results/latest``
    at the run, write its ``report.html`` and print its summary, then raise:
    ``KeyboardInterrupt`` after a signal (so a caller such as a sweep stops too),
    ``RunError`` after any other fault."""
    summary["completed"] = error is None
    if error is not None:
        store.record_error(run, summary, error)
    try:
        summary.update(analysis())
    except Exception as err:  # noqa: BLE001 - a partial run may lack what the analysis needs
        summary["analysis_error"] = one_line(err)
        summary["trustworthy"] = False
    if error is not None:
        summary["trustworthy"] = False
    store.write_json(run / store.SUMMARY, summary)
    store.point_latest(run)
    publish_run(run)
    if isinstance(error, KeyboardInterrupt):
        raise KeyboardInterrupt(f"interrupted; partial results in {run}") from error
    if error is not None:
        raise RunError(f"run did not complete ({one_line(error)}); partial results in {run}") from error
    return run
