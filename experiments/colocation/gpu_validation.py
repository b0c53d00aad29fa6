"""The GPU validation in one command: ``make colocate-gpu`` (or ``python -m
experiments.colocation.gpu_validation --device cuda``).

1. the estimator grid at the datasets' real sizes (``validate --grid gpu``);
2. every CoGNN training queue (GCN, SAGE, GAT, GIN, Mix) under all baselines
   and policies, then CoGNN Table V (queues as columns);
3. every GNNSched inference queue at low and high load, and its summary table.

Everything lands in one directory under ``results/`` (``results/latest``).
The paper queues train for 200 epochs and send 100 requests; ``--epochs`` and
``--requests`` shorten them, ``--repeats`` overrides the specs' repeats and
``--queues``, ``--training-methods`` and ``--inference-methods`` pick queues and methods (all recorded in each run's resolved spec). ``--part``
runs one part, for machines that limit a command's time.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.colocation.report import table_v
from experiments.colocation.runner import run_colocate_file
from experiments.colocation.validate import run_validation
from experiments.store import new_run_dir, point_latest

SPECS = Path(__file__).resolve().parent.parent / "specs"
TRAINING_QUEUES = ("gcn", "sage", "gat", "gin", "mix")
INFERENCE_QUEUES = ("gcn", "sage", "gin", "mix")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--part", choices=("all", "validation", "training", "inference"), default="all")
    parser.add_argument("--epochs", type=int, default=20, help="epochs per training task (paper: 200)")
    parser.add_argument("--requests", type=int, default=50, help="requests per inference queue (paper: 100)")
    parser.add_argument("--repeats", type=int, help="repeats per method (default: the spec's)")
    parser.add_argument("--queues", nargs="+", choices=TRAINING_QUEUES, help="queues to run (default: all)")
    parser.add_argument("--training-methods", nargs="+", help="methods of the training queues (default: the spec's)")
    parser.add_argument("--inference-methods", nargs="+", help="methods of the inference queues (default: the spec's)")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    repeats = {} if args.repeats is None else {"repeats": args.repeats}
    queues = args.queues or TRAINING_QUEUES
    training_methods = {} if args.training_methods is None else {"methods": args.training_methods}
    inference_methods = {} if args.inference_methods is None else {"methods": args.inference_methods}
    root = new_run_dir("colocate", f"gpu-validation-{args.part}", args.out)
    if args.part in ("all", "validation"):
        run, _ = run_validation(args.device, "gpu", out=root / "validation")
        print((run / "validation.md").read_text(), flush=True)
    if args.part in ("all", "training"):
        runs = [run_colocate_file(SPECS / f"colocate-train-{q}.yaml", args.device, out=root / f"train-{q}",
                                  overrides={"queue.epochs": args.epochs, **repeats, **training_methods}) for q in queues]
        text = table_v(runs)
        (root / "table-v-training.md").write_text(text)
        print(text, flush=True)
    if args.part in ("all", "inference"):
        for load in ("low", "high"):
            runs = [run_colocate_file(SPECS / f"colocate-infer-{q}-{load}.yaml", args.device,
                                      out=root / f"infer-{q}-{load}", overrides={"queue.count": args.requests, **repeats, **inference_methods})
                    for q in INFERENCE_QUEUES if q in queues]
            text = table_v(runs)
            (root / f"table-inference-{load}.md").write_text(text)
            print(text, flush=True)
    point_latest(root)
    print(f"run directory: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
