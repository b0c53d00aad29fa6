"""The sweep command over a co-location spec: CoGNN Fig. 12's workers sweep, on the CPU."""
import csv
import json

import pytest
import yaml

from experiments.errors import SpecError
from experiments.reports.sweep import sweep_summary
from experiments.sweep import load, run_sweep

TINY = {
    "name": "tiny-sweep", "kind": "training", "seed": 3, "memory": {"capacity_mib": 64}, "workers": 2,
    "methods": ["default", "bmc"], "graphs": {"scale": 0.01},
    "queue": {"models": ["GCN", "GIN"], "datasets": ["cora", "PROTEINS"], "layers": [2, 3], "count": 3, "epochs": 1},
}


def _sweep(tmp_path, **fields):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny", "spec": "tiny.yaml", **fields}))
    return path


REPORT = ["makespan_s", "avg_jct_s", "memory_violations", "methods.bmc.makespan_s", "methods.default.makespan_s"]


def test_a_workers_sweep_runs_every_cell_and_tabulates_the_reported_fields(tmp_path):
    sweep = load(_sweep(tmp_path, grid={"workers": [2, 3]}, report=REPORT))
    result = run_sweep(sweep, tmp_path / "out")
    assert result.failed == []
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert [row["workers"] for row in rows] == ["2", "3"]
    assert sweep_summary(tmp_path / "out").splitlines()[0] == (
        "sweep tiny: 2 cells, 2 completed (co-location runs are not judged)")
    for row in rows:
        cell = tmp_path / "out" / "cells" / row["cell"]
        summary = json.loads((cell / "summary.json").read_text())
        assert row["completed"] == "true" and summary["completed"] is True
        assert summary["workers"] == int(row["workers"])
        assert float(row["makespan_s"]) == pytest.approx(summary["makespan_s"])
        assert float(row["avg_jct_s"]) == pytest.approx(summary["avg_jct_s"])
        assert float(row["memory_violations"]) == summary["memory_violations"]
        for method in ("bmc", "default"):
            assert float(row[f"methods.{method}.makespan_s"]) == pytest.approx(summary["methods"][method]["makespan_s"])


def test_schedulers_on_a_co_location_spec_get_a_one_line_error(tmp_path):
    with pytest.raises(SpecError) as err:
        load(_sweep(tmp_path, schedulers=["fs"]))
    assert err.value.field == "schedulers" and "\n" not in str(err.value)


def test_the_shipped_workers_sweep_loads():
    sweep = load("experiments/sweeps/colocate-workers.yaml")
    assert sorted({cell.spec["workers"] for cell in sweep.cells}) == [2, 3] and len(sweep.cells) == 4


def test_a_resumed_sweep_continues_an_interrupted_colocation_cell_in_place(tmp_path, monkeypatch):
    """Its measured methods are kept (as trainbed colocate --out keeps them): only
    what it had not measured runs, in the same directory, none set aside."""
    from hosts.colocation.executor import Executor
    calls, real_run = [], Executor.run

    def run(self, method, plan):
        calls.append(method)
        if len(calls) == 2:
            raise RuntimeError("device time ran out")
        return real_run(self, method, plan)

    monkeypatch.setattr(Executor, "run", run)
    sweep = load(_sweep(tmp_path))
    assert run_sweep(sweep, tmp_path / "out").failed == [sweep.cells[0].id]
    cell = tmp_path / "out" / "cells" / sweep.cells[0].id
    assert (cell / "records-default.json").exists() and calls == ["default", "bmc"]
    result = run_sweep(sweep, tmp_path / "out")
    assert result.failed == [] and calls == ["default", "bmc", "bmc"]  # default was not measured again
    assert not (tmp_path / "out" / "failed").exists()
    assert json.loads((cell / "summary.json").read_text())["completed"] is True


def test_a_report_field_of_a_method_no_cell_runs_is_refused(tmp_path):
    with pytest.raises(SpecError, match=r"^report\[1\]: 'sqtf' is not a method any cell runs \(they run "):
        load(_sweep(tmp_path, report=["makespan_s", "methods.sqtf.p99_latency_s"]))
