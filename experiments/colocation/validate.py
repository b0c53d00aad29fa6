"""Estimator validation over a grid: ``python -m experiments.colocation.validate --device cpu|cuda``.

Four models x several graphs x training/inference, each task alone, estimated
against measured peak (CPU: the profiler's allocation events; CUDA:
``max_memory_allocated``). Writes ``validation.json`` and ``validation.md`` into a
run directory and prints the table.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.colocation.metrics import error_summary
from experiments.colocation.runner import describe_device, resolve_device
from experiments.reports.markdown import markdown_table
from experiments.store import SUMMARY, new_run_dir, point_latest, write_environment, write_json
from experiments.validation import dir_flag
from hosts.colocation.allocator import MIB
from hosts.colocation.datasets import dataset_shape, subgraph_shape
from hosts.colocation.models import MODELS
from hosts.colocation.tasks import INFERENCE, TRAINING, Task
from hosts.colocation.validation import validate_estimator

# GPU: real dataset sizes (CoGNN Table IV, GNNSched Table 4). CPU: the same datasets scaled down.
GRIDS = {
    "gpu": {"train": ["cora", "pubmed", "artist", "amazon0601", "OVCAR-8H"], "train_scale": 1.0,
            "layers": [4, 10], "infer": ["pubmed", "artist", "amazon0601", "reddit"], "fraction": 0.03},
    "cpu": {"train": ["cora", "pubmed", "artist", "PROTEINS"], "train_scale": 0.05,
            "layers": [4, 8], "infer": ["pubmed", "artist", "amazon0601"], "fraction": 0.01},
}


def grid_tasks(grid: str) -> list[Task]:
    g = GRIDS[grid]
    tasks = []
    for model in MODELS:
        for dataset in g["train"]:
            for layers in g["layers"]:
                shape = dataset_shape(dataset, g["train_scale"])
                tasks.append(Task(f"v{len(tasks):03d}", TRAINING, model, shape, layers, 64, 1.0, epochs=2))
        for dataset in g["infer"]:
            shape = subgraph_shape(dataset_shape(dataset), 1, g["fraction"])
            tasks.append(Task(f"v{len(tasks):03d}", INFERENCE, model, shape, 8, 256, 1.0))
    return tasks


def run_validation(device: str, grid: str, out: str | Path | None = None) -> tuple[Path, list[dict]]:
    dev = resolve_device(device)
    run = new_run_dir("colocate", f"validate-{grid}", out)
    env = write_environment(run, describe_device(dev))
    rows = validate_estimator(grid_tasks(grid), dev)
    summary = {"device": env["device"], "grid": grid, "cases": len(rows),
               **error_summary([r["relative_error"] for r in rows])}
    write_json(run / "validation.json", {"summary": summary, "rows": rows})
    (run / "validation.md").write_text(markdown(rows, summary))
    write_json(run / SUMMARY, summary)  # last: a grid with a summary is complete
    point_latest(run)
    return run, rows


def markdown(rows: list[dict], summary: dict) -> str:
    table = markdown_table(("kind", "model", "dataset", "nodes", "edges", "layers", "estimated (MiB)", "measured (MiB)",
                            "error"),
                           [(r["kind"], r["model"], r["dataset"], r["nodes"], r["edges"], r["layers"],
                             f"{r['estimated_bytes'] / MIB:.1f}", f"{r['measured_bytes'] / MIB:.1f}",
                             f"{100 * r['relative_error']:.2f}%") for r in rows])
    lines = [f"# PMC estimator vs measured peak on {summary['device']['name']}", "", table]
    lines += ["", f"Max relative error {100 * summary['pmc_max_relative_error']:.2f}%, "
                  f"mean {100 * summary['pmc_mean_relative_error']:.2f}% over {summary['cases']} tasks.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--grid", choices=sorted(GRIDS), help="default: gpu on cuda, cpu on cpu")
    parser.add_argument("--out", type=dir_flag)
    args = parser.parse_args(argv)
    run, _ = run_validation(args.device, args.grid or ("gpu" if args.device == "cuda" else "cpu"), args.out)
    print((run / "validation.md").read_text())
    print(f"run directory: {run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
