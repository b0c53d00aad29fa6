"""``trainbed`` command line: run emulated experiments and sweeps, draw figures, clean up, co-locate GNN tasks."""
from __future__ import annotations

import argparse
import sys

from experiments.errors import SpecError


def _run(args) -> int:
    from experiments.runner import run_spec_file
    run = run_spec_file(args.spec, out=args.out)
    print(f"run directory: {run}")
    return 0


def _clean(args) -> int:
    from experiments.emulation.records import clean_all
    report = clean_all()
    print(report)
    return 0


def _colocate(args) -> int:
    from experiments.colocation.runner import run_colocate_file
    run = run_colocate_file(args.spec, device=args.device, out=args.out)
    print(f"run directory: {run}")
    return 0


def _sweep(args) -> int:
    from experiments.sweep import run_sweep_file
    result = run_sweep_file(args.sweep, out=args.out)
    if result.failed:
        print(f"{len(result.failed)} of {len(result.rows)} cells did not complete: {', '.join(result.failed)} "
              f"(run again with --out {result.directory} to retry only those)")
        return 1
    return 0


def _figures(args) -> int:
    from experiments.figures import grouper_figures
    for path in grouper_figures(args.dir, solo_runs=args.solo):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainbed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an emulated-network experiment spec")
    run.add_argument("spec")
    run.add_argument("--out", help="run directory (default: results/<stamp>-<spec>)")
    run.set_defaults(func=_run)
    clean = sub.add_parser("clean", help="remove what crashed runs left, from the project's own records")
    clean.set_defaults(func=_clean)
    colo = sub.add_parser("colocate", help="run a GPU co-location spec (CoGNN / GNNSched)")
    colo.add_argument("spec")
    colo.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    colo.add_argument("--out", help="run directory (default: results/<stamp>-colocate-<spec>)")
    colo.set_defaults(func=_colocate)
    sweep = sub.add_parser("sweep", help="run a spec over schedulers x seeds x a grid, resumably")
    sweep.add_argument("sweep", help="sweep file (YAML)")
    sweep.add_argument("--out", help="sweep directory, resumed when it exists (default: results/<stamp>-sweep-<name>)")
    sweep.set_defaults(func=_sweep)
    figures = sub.add_parser("figures", help="a paper's figures (tables, CSV, plots) from a sweep directory")
    figures.add_argument("paper", choices=("grouper",))
    figures.add_argument("dir", help="sweep directory (holds results.csv)")
    figures.add_argument("--solo", action="extend", nargs="+", default=[], metavar="RUN_DIR",
                         help="a run of cojobs alone (events.jsonl, workload.json) for stage slowdown; repeatable")
    figures.set_defaults(func=_figures)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SpecError, FileExistsError, FileNotFoundError, RuntimeError) as err:
        print(f"trainbed: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(f"trainbed: stopped: {err or 'interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
