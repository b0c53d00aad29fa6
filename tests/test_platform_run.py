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
