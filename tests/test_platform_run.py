"""The run lifecycle's promise when a workload cannot even be built: the run directory
still holds ``summary.json`` (completed: false, the error), and the caller gets RunError."""
from __future__ import annotations

import json

import pytest

from experiments.errors import SpecError
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
    assert (run / "spec.yaml").exists() and (run / "traceback.txt").exists()


def test_a_failed_packet_capture_makes_the_run_untrustworthy():
    from experiments.platform.run import _with_capture_cost
    analysis = {"trustworthy": True, "fidelity": {"untrustworthy_reasons": [], "trustworthy": True}}
    marked = _with_capture_cost(analysis, {"capture_errors": ["tbh1: tcpdump exited with 1"]})
    assert marked["trustworthy"] is False and marked["fidelity"]["trustworthy"] is False
    assert marked["fidelity"]["untrustworthy_reasons"] == ["packet capture failed (tbh1: tcpdump exited with 1)"]
    kept = _with_capture_cost({"trustworthy": True, "fidelity": {"trustworthy": True}}, {"queue_sampler_cpu_s": 0.1})
    assert kept["trustworthy"] is True and kept["fidelity"]["queue_sampler_cpu_s"] == 0.1
