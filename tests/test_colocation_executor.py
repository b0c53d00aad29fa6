"""The executor end to end: every policy and baseline over small queues, on CPU."""
import json

import pytest
import torch
import yaml

from experiments.cli import main
from experiments.colocation.runner import estimate_all, run_colocate_file
from experiments.colocation.spec import build_tasks, resolve
from hosts.colocation.executor import Executor, Plan

SUMMARY_KEYS = {"makespan_s", "avg_jct_s", "avg_queuing_s", "memory_violations", "pmc_max_relative_error",
                "median_latency_s", "p90_latency_s", "p99_latency_s", "qos_violation_rate"}
TRAINING = {
    "name": "tiny-train", "kind": "training", "seed": 3, "memory": {"capacity_mib": 64}, "workers": 2,
    "graphs": {"scale": 0.01},
    "queue": {"models": ["GCN", "SAGE", "GAT", "GIN"], "datasets": ["cora", "pubmed", "PROTEINS"],
              "layers": [4, 5], "count": 5, "epochs": 2},
}
INFERENCE = {
    "name": "tiny-infer", "kind": "inference", "seed": 5, "memory": {"capacity_mib": 96}, "workers": 3,
    "graphs": {"scale": 0.01},
    "queue": {"models": ["GCN", "SAGE", "GIN"], "datasets": ["pubmed", "artist"], "count": 8,
              "subgraphs_per_dataset": 3, "subgraph_fraction": [0.3, 0.6], "hidden": 64},
    "arrivals": {"mean_per_tick": 2, "tick_solo_multiple": 1.0},
}


def _write(tmp_path, spec):
    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("spec", [TRAINING, INFERENCE], ids=["training", "inference"])
def test_every_method_runs_the_queue_and_reports_every_metric(tmp_path, spec):
    run = run_colocate_file(_write(tmp_path, spec), device="cpu", out=tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    methods = resolve(dict(spec))["methods"]
    assert set(summary["methods"]) == set(methods)
    assert SUMMARY_KEYS <= set(summary)
    for name in methods:
        metrics = summary["methods"][name]
        assert metrics["failed"] == 0
        assert metrics["makespan_s"] > 0 and metrics["avg_jct_s"] >= metrics["avg_queuing_s"] >= 0
        assert metrics["memory_violations"] == 0  # estimates x threshold hold, the capacity fits
        records = json.loads((run / f"records-{name}.json").read_text())["records"]
        assert len(records) == summary["tasks"]
        assert all(r["end_s"] >= r["start_s"] >= r["arrival_s"] - 1e-6 for r in records)
        if spec["kind"] == "inference":
            assert 0.0 <= metrics["qos_violation_rate"] <= 1.0
            assert metrics["p99_latency_s"] >= metrics["p90_latency_s"] >= metrics["median_latency_s"]
    assert summary["pmc_max_relative_error"] < 0.03
    for name in ("spec.yaml", "environment.json", "tasks.json", "table.md", "table.csv", "plots/methods.png"):
        assert (run / name).exists(), name


def test_groups_respect_workers_and_memory(tmp_path):
    run = run_colocate_file(_write(tmp_path, TRAINING), device="cpu", out=tmp_path / "run")
    tasks = {t["task_id"]: t for t in json.loads((run / "tasks.json").read_text())}
    allocatable = json.loads((run / "summary.json").read_text())["allocatable_bytes"]
    for policy in ("base", "lmcf", "bmc"):
        facts = json.loads((run / f"records-{policy}.json").read_text())["facts"]
        groups = [g for batch in facts["groups"] for g in batch]
        assert sorted(k for g in groups for k in g) == sorted(tasks)
        for group in groups:
            assert len(group) <= TRAINING["workers"]
            assert sum(tasks[k]["need_bytes"] for k in group) <= allocatable


def test_too_low_estimate_is_recorded_as_violation_and_neighbours_finish():
    spec = resolve(dict(TRAINING))
    tasks = build_tasks(spec)
    estimates = estimate_all(tasks, "cpu")
    starved = {k: v // 3 for k, v in estimates.items()}  # budgets far below the real peaks
    executor = Executor(torch.device("cpu"), 64 << 20, workers=2, seed=3)
    records, _ = executor.run("bmc", Plan(tasks, estimates, starved))
    assert all(r.over_budget and r.memory_violation for r in records)
    assert all(r.error is None and r.result is not None for r in records)


def test_unlimited_concurrency_over_capacity_is_recorded():
    spec = resolve(dict(TRAINING))
    tasks = build_tasks(spec)
    estimates = estimate_all(tasks, "cpu")
    smallest_pair = sum(sorted(estimates.values())[:2])
    executor = Executor(torch.device("cpu"), smallest_pair, workers=2, seed=3)
    records, facts = executor.run("mps", Plan(tasks, estimates, estimates))
    assert facts["over_capacity_events"] >= 1
    assert any(r.over_capacity for r in records)
    assert all(r.error is None for r in records)


def test_cli_colocate_writes_run_and_latest(tmp_path, monkeypatch, capsys):
    spec = dict(TRAINING, methods=["default", "lmcf"], primary="lmcf")
    assert main(["colocate", str(_write(tmp_path, spec)), "--device", "cpu"]) == 0
    from experiments.store import results_root
    latest = results_root() / "latest"
    summary = json.loads((latest / "summary.json").read_text())
    assert summary["primary"] == "lmcf"
    assert summary["makespan_s"] == summary["methods"]["lmcf"]["makespan_s"]
    assert "run directory:" in capsys.readouterr().out
