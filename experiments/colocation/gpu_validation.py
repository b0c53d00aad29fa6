"""The GPU validation in one command: ``make colocate-gpu`` (or ``python -m
experiments.colocation.gpu_validation --device cuda --out DIR``).

1. the estimator grid at the datasets' real sizes (``validate --grid gpu``);
2. every CoGNN training queue (GCN, SAGE, GAT, GIN, Mix) under all baselines
   and policies, then CoGNN Table V (queues as columns) and each metric over
   PipeSwitch's beside Table V's;
3. every GNNSched inference queue at low and high load, and its tables beside
   what GNNSched states of Fig. 5-8.

Everything lands in one directory (``--out``, else a new one under ``results/``;
``results/latest``). Re-run into the same ``--out`` it resumes: the estimator
grid once done is kept, and so is every part of a queue measured already (a
method's repeat), so a campaign longer than a session's device time is finished
by running the command again. A queue's run refuses another spec (other
``--epochs`` etc.) and other code unless ``--force`` (see ``runner``).
The paper queues train for 200 epochs and send 100 requests; ``--epochs`` and
``--requests`` shorten them, ``--repeats`` sets the repeats (3 by default; ``--repeats-now N`` measures no repeat
past the N-th in this call, so a short session gets every queue's first answer;
``--methods-now`` only those methods, so that Default's and MPS-pair's process per
training task, minutes a queue, can wait for a later call),
``--queues``, ``--loads``, ``--training-methods`` and ``--inference-methods`` pick
queues, inference loads and methods and ``--scale`` shrinks the graphs (a CPU check of the command; below 1
the estimator runs its scaled-down ``cpu`` grid), all recorded in each run's resolved spec. ``--part`` runs
one part.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.colocation.report import table_v
from experiments.colocation.runner import run_colocate_file
from experiments.colocation.validate import run_validation
from experiments.errors import SpecError
from experiments.store import SUMMARY, new_run_dir, point_latest
from experiments.validation import choice, count_flag, dir_flag
from hosts.colocation.policies import BASELINE_CONCURRENCY, INFERENCE_POLICIES, TRAINING_POLICIES

SPECS = Path(__file__).resolve().parent.parent / "specs"
TRAINING_QUEUES = ("gcn", "sage", "gat", "gin", "mix")
INFERENCE_QUEUES = ("gcn", "sage", "gin", "mix")
LOADS = ("low", "high")
METHODS = tuple(dict.fromkeys((*BASELINE_CONCURRENCY, *TRAINING_POLICIES, *INFERENCE_POLICIES)))  # base: in both


def _share(text: str) -> float:
    """``--scale``: a share of the real graph, in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _method(text: str) -> str:
    """``--methods-now``: a co-location method of some queue (a queue runs those of its spec)."""
    try:
        return choice("--methods-now", text, METHODS, what="method")
    except SpecError as err:
        raise argparse.ArgumentTypeError(err.problem) from None


def measured(root: Path, names: list[str]) -> list[Path]:
    """The campaign's queues of ``names`` that hold a summary, whichever call measured
    them: a table covers the campaign, not only the queues this call ran."""
    return [root / name for name in names if (root / name / SUMMARY).exists()]


def write_table(path: Path, runs: list[Path]) -> None:
    """``table_v`` of ``runs`` into ``path`` and on the console; none without a run."""
    if runs:
        text = table_v(runs)
        path.write_text(text)
        print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--part", choices=("all", "validation", "training", "inference"), default="all")
    parser.add_argument("--epochs", type=count_flag, default=20, help="epochs per training task (paper: 200)")
    parser.add_argument("--requests", type=count_flag, default=50, help="requests per inference queue (paper: 100)")
    parser.add_argument("--repeats", type=count_flag, default=3, help="repeats per method")
    parser.add_argument("--repeats-now", type=count_flag,
                        help="measure no repeat past the first N in this call (the rest: a later call)")
    parser.add_argument("--methods-now", nargs="+", type=_method,
                        help="measure only these methods in this call (the others' parts: a later call)")
    parser.add_argument("--queues", nargs="+", choices=TRAINING_QUEUES, help="queues to run (default: all)")
    parser.add_argument("--loads", nargs="+", choices=LOADS, default=list(LOADS),
                        help="loads of the inference queues (default: both)")
    parser.add_argument("--training-methods", nargs="+", help="methods of the training queues (default: the spec's)")
    parser.add_argument("--inference-methods", nargs="+", help="methods of the inference queues (default: the spec's)")
    parser.add_argument("--scale", type=_share, help="graphs.scale of every queue (default: the spec's, real sizes)")
    parser.add_argument("--out", type=dir_flag, help="the campaign's directory; re-run into it to resume")
    parser.add_argument("--force", action="store_true", help="resume queues started under other code")
    args = parser.parse_args(argv)
    if args.part == "inference" and args.queues and not set(args.queues) & set(INFERENCE_QUEUES):
        parser.error(f"argument --queues: {' '.join(args.queues)}: no inference queue "
                     f"(inference queues: {', '.join(INFERENCE_QUEUES)})")
    try:
        return _campaign(args)
    except SpecError as err:  # e.g. a method no queue knows: one line, as trainbed prints it
        print(f"gpu_validation: error: {err}", file=sys.stderr)
        return 2


def _campaign(args: argparse.Namespace) -> int:
    common = {"repeats": args.repeats, **({} if args.scale is None else {"graphs.scale": args.scale})}
    queues = args.queues or TRAINING_QUEUES
    training_methods = {} if args.training_methods is None else {"methods": args.training_methods}
    inference_methods = {} if args.inference_methods is None else {"methods": args.inference_methods}
    root = new_run_dir("colocate", f"gpu-validation-{args.part}", args.out)

    def queue(spec: str, out: str, overrides: dict) -> None:
        run_colocate_file(SPECS / f"{spec}.yaml", args.device, out=root / out, overrides={**common, **overrides},
                          resume=True, force=args.force, repeats_now=args.repeats_now, methods_now=args.methods_now)

    if args.part in ("all", "validation"):
        if not (root / "validation" / SUMMARY).exists():  # an interrupted grid runs again whole
            # shrunk graphs (--scale < 1): the estimator's scaled-down grid too
            grid = "cpu" if args.scale is not None and args.scale < 1 else "gpu"
            run_validation(args.device, grid, out=root / "validation")
        print((root / "validation" / "validation.md").read_text(), flush=True)
    if args.part in ("all", "training"):
        for q in queues:
            queue(f"colocate-train-{q}", f"train-{q}", {"queue.epochs": args.epochs, **training_methods})
        write_table(root / "table-v-training.md", measured(root, [f"train-{q}" for q in TRAINING_QUEUES]))
    if args.part in ("all", "inference"):
        for load in LOADS:
            if load not in args.loads:
                continue
            for q in INFERENCE_QUEUES:
                if q in queues:
                    queue(f"colocate-infer-{q}-{load}", f"infer-{q}-{load}",
                          {"queue.count": args.requests, **inference_methods})
            write_table(root / f"table-inference-{load}.md",
                        measured(root, [f"infer-{q}-{load}" for q in INFERENCE_QUEUES]))
    point_latest(root)
    print(f"run directory: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
