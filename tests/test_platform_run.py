"""The run lifecycle's promise when a workload cannot even be built: the run directory
still holds ``summary.json`` (completed: false, the error), and the caller gets RunError;
and the controller supervisor's restarts, on its state alone."""
from __future__ import annotations

import json
import threading
import time

import pytest

from controller.client import ControllerError
from experiments import summary_fields
from experiments.errors import SpecError
from experiments.platform import net as net_mod
from experiments.platform.cpu import CpuMonitor
from experiments.platform.run import RunError, run_workload


def test_a_workload_that_fails_to_build_still_leaves_a_summary(tmp_path):
    def make(spec, run):
        raise SpecError("workload.trace", "is not UTF-8 text")

    with pytest.raises(RunError, match="workload.trace") as raised:
        run_workload({"name": "broken"}, str(tmp_path / "run"), make)
    run = tmp_path / "run"
    assert str(run) in str(raised.value)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] is False and summary["trustworthy"] is False
    assert "workload.trace" in summary["error"]
    assert summary_fields.undeclared(summary, "cojob", "emulated") == []
    assert (run / "spec.yaml").exists() and (run / "traceback.txt").exists()


def test_a_failed_packet_capture_makes_the_run_untrustworthy():
    from experiments.platform.run import _with_capture_cost
    analysis = {"trustworthy": True, "fidelity": {"untrustworthy_reasons": [], "trustworthy": True}}
    marked = _with_capture_cost(analysis, {"capture_errors": ["tbh1: tcpdump exited with 1"]})
    assert marked["trustworthy"] is False and marked["fidelity"]["trustworthy"] is False
    assert marked["fidelity"]["untrustworthy_reasons"] == ["packet capture failed (tbh1: tcpdump exited with 1)"]
    kept = _with_capture_cost({"trustworthy": True, "fidelity": {"trustworthy": True}}, {"queue_sampler_cpu_s": 0.1})
    assert kept["trustworthy"] is True and kept["fidelity"]["queue_sampler_cpu_s"] == 0.1


class FakeFabric:
    """Stands in for the Emulation: what run_workload asks of a fabric, nothing started;
    the controller died once, so a workload's analysis shows whether the outage step ran."""

    OUTAGES = [{"start_s": 1.0, "end_s": 2.5, "restarts": 1, "exit_code": -9}]

    def __init__(self, fabric, run, options=None):
        from types import SimpleNamespace
        self.run_id = "tb0"
        self.record = SimpleNamespace(path=run / "record.json", add_file=lambda path: None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def controller_outages(self, t0):
        return [dict(outage) for outage in self.OUTAGES]


class FailingWorkload:
    """Its run fails, then its stop and its counters fail too."""

    t0 = None

    def __init__(self):
        self.calls = []
        self.outages = None  # what analyse was given

    def start(self, em, events_path):
        self.calls.append("start")

    def run(self):
        raise RuntimeError("the driver lost worker 0")

    def stop(self):
        self.calls.append("stop")
        raise OSError("kill: no such process")

    def collect(self, em):
        self.calls.append("collect")
        raise RuntimeError("counters unreadable: tc failed")

    def summary_fields(self):
        return {}

    def analyse(self, cpu, outages):
        self.outages = outages
        return {}


def test_a_runs_first_fault_is_its_error_and_every_step_of_the_end_still_runs(tmp_path, monkeypatch):
    import threading

    from experiments.platform import run as run_mod
    monkeypatch.setattr(run_mod, "Emulation", FakeFabric)
    monkeypatch.setattr(run_mod.emulation_spec, "fabric_of", lambda spec: None)
    monkeypatch.setattr(run_mod.emulation_spec, "options_of", lambda spec: {})
    workload = FailingWorkload()
    with pytest.raises(RunError, match="the driver lost worker 0"):
        run_workload({"name": "faulty"}, str(tmp_path / "run"), lambda spec, run: workload)
    assert workload.calls == ["start", "stop", "collect"]
    assert workload.outages == FakeFabric.OUTAGES  # the outage step ran after collect raised
    # the CPU monitor was stopped although stop raised (a count of threads would see any other test's end)
    assert not [t for t in threading.enumerate() if isinstance(t, CpuMonitor)]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] is False and "the driver lost worker 0" in summary["error"]
    trace = (tmp_path / "run" / "traceback.txt").read_text()
    assert "then, while stopping: OSError: kill: no such process" in trace
    assert "then, while stopping: RuntimeError: counters unreadable: tc failed" in trace


class UnreadCounters(FailingWorkload):
    """It ran to its end; one counter file could not be read."""

    def run(self):
        self.calls.append("run")

    def stop(self):
        self.calls.append("stop")

    def collect(self, em):
        self.calls.append("collect")
        return ["port_counters.json: tc -s class show failed"]

    def analyse(self, cpu, outages):
        return {"trustworthy": True, "controller_outages": outages,
                "fidelity": {"trustworthy": True, "untrustworthy_reasons": []}}


def test_a_run_whose_counters_could_not_all_be_read_completed_but_is_not_trusted(tmp_path, monkeypatch):
    """The same for every kind (the timetable kept such a run, the others failed it)."""
    from experiments.platform import run as run_mod
    monkeypatch.setattr(run_mod, "Emulation", FakeFabric)
    monkeypatch.setattr(run_mod.emulation_spec, "fabric_of", lambda spec: None)
    monkeypatch.setattr(run_mod.emulation_spec, "options_of", lambda spec: {})
    run_workload({"name": "unread"}, str(tmp_path / "run"), lambda spec, run: UnreadCounters())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] is True and summary["trustworthy"] is False
    assert summary["controller_outages"] == FakeFabric.OUTAGES  # recorded, not only survived
    assert summary["collect_errors"] == ["port_counters.json: tc -s class show failed"]
    assert summary["fidelity"]["untrustworthy_reasons"] == ["not collected: port_counters.json: tc -s class show failed"]


def test_the_supervisor_replaces_a_restarted_controller_that_never_gets_ready_ending_it_first(monkeypatch):
    """The controller was killed; the one started in its place is up but not ready within
    the wait (a switch never installed): it is ended before another starts (was: a second
    controller beside it), and the outage ends once the next one is ready."""
    class Process:
        def __init__(self, returncode):
            self.returncode = returncode

        def poll(self):
            return self.returncode

        def terminate(self):
            self.returncode = -15

        def wait(self, timeout=None):
            return self.returncode

    answers = iter([ControllerError("controller not ready after 30 s: 3/4 switches"), None])

    class Probe:
        def __init__(self, _path):
            pass

        def wait_ready(self, timeout):
            answer = next(answers)
            if answer is not None:
                raise answer

        def close(self):
            pass

    em = net_mod.Emulation.__new__(net_mod.Emulation)  # the supervisor's state alone, no fabric
    em._stopping, em.outages, em.socket_path, em.controller = threading.Event(), [], "unused", Process(-9)
    started = []

    def start_controller():
        assert all(p.poll() is not None for p in started), "a controller started while another runs"
        em.controller = Process(None)  # up
        started.append(em.controller)
    em._start_controller = start_controller
    monkeypatch.setattr(net_mod, "ControllerClient", Probe)
    monkeypatch.setattr(net_mod, "SUPERVISE_INTERVAL_S", 0.01)
    supervisor = threading.Thread(target=em._supervise)
    supervisor.start()
    try:
        for _ in range(500):
            if em.outages and em.outages[0]["end"] is not None:
                break
            time.sleep(0.01)
    finally:
        em._stopping.set()
        supervisor.join(5)
    [outage] = em.outages
    assert [p.returncode for p in started] == [-15, None]  # the first ended, the second up and ready
    assert outage["restarts"] == 2 and outage["exit_code"] == -9
    assert outage["end"] is not None and "3/4 switches" in outage["error"]
