"""``trainbed`` command line: run emulated experiments, simulate them, sweep, draw figures, list the results, clean
up, co-locate GNN tasks."""
from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
from pathlib import Path

import yaml

from experiments.errors import SpecError, one_line
from experiments.store import CELLS, RESULTS, SWEEP_RECORD, refuse_held_run
from experiments.validation import count_flag, dir_flag, errors_only


def _out_run_dir(value: str) -> str:
    """``--out`` of one run: a directory, and not a sweep's (whose report it would overwrite)."""
    if (Path(dir_flag(value)) / SWEEP_RECORD).exists():
        raise argparse.ArgumentTypeError(f"{value}: holds a sweep ({SWEEP_RECORD}); choose a new directory")
    return value


def _out_new_run_dir(value: str) -> str:
    """``--out`` of a run that starts afresh (run, simulate): refused before the spec's
    work (an ETP search can take minutes) where it holds a run already."""
    try:
        refuse_held_run(_out_run_dir(value))
    except SpecError as err:
        raise argparse.ArgumentTypeError(err.problem) from None
    return value


def _out_file(value: str) -> str:
    """``--out`` naming a file to write: refused before any work where it cannot be written."""
    path = Path(value).absolute()
    try:
        is_dir, parent_is_dir = path.is_dir(), path.parent.is_dir()
    except OSError as err:  # a directory on the way that cannot be read
        raise argparse.ArgumentTypeError(f"{value}: {err.strerror}") from None
    if is_dir:
        raise argparse.ArgumentTypeError(f"{value}: is a directory; name the file to write")
    if not parent_is_dir:
        raise argparse.ArgumentTypeError(f"{value}: {path.parent} is not a directory")
    return value


def _run(args) -> int:
    from experiments.runner import read_spec, run_any_spec
    run_any_spec(read_spec(args.spec), out=args.out)  # its report and summary are published as the run ends
    return 0


def _refuse_unsimulated(raw, kind) -> None:
    """The one refusal of a spec the simulator has no model of (``simulate``,
    ``validate --simulated``), named as ``place`` names it: by the workload's kind."""
    from experiments.kinds import simulator_names
    if isinstance(raw, dict) and kind.simulate is None:
        raise SpecError("workload.kind", f"the simulator runs {' or '.join(simulator_names())} specs; "
                                         f"this is a {kind.name} spec")


def _simulate(args) -> int:
    from experiments.runner import kind_of, read_spec, simulate_any_spec
    raw = read_spec(args.spec)
    _refuse_unsimulated(raw, kind_of(raw))
    simulate_any_spec(raw, out=args.out)  # its summary is printed as the run ends
    return 0


def _validate(args) -> int:
    """Check a spec as ``run`` (or ``simulate``) would, start nothing: one line saying
    what it is, or the one-line error; ``--resolved``: the spec a run would store."""
    from experiments.runner import kind_of, read_spec, validate_any
    raw = read_spec(args.spec)
    kind = kind_of(raw)
    if args.simulated:
        _refuse_unsimulated(raw, kind)
    if args.resolved:  # every step of resolving, an ETP search included
        spec = validate_any(raw, simulated=args.simulated)
        print(yaml.safe_dump(spec, sort_keys=False), end="")
        return 0
    with errors_only():
        validate_any(raw, simulated=args.simulated)
    where = "the simulator" if args.simulated else ("this box" if kind.name == "colocation" else "the emulator")
    print(f"{args.spec}: a valid {kind.name} spec for {where}")
    return 0


def _place(args) -> int:
    import json

    from experiments.gnn import search
    from experiments.gnn import spec as gnn_spec
    from experiments.gnn.simulated import ProfileError
    from experiments.kinds import kind_of
    from experiments.runner import read_spec
    from topologies.fabric import simulated_rates
    steps = search.DEFAULT_STEPS if args.steps is None else _integer_flag("--steps", args.steps, 0, search.MAX_STEPS)
    seed = _integer_flag("--seed", args.seed, 0)  # a spec's placement seed's bounds
    verify_best = _integer_flag("--verify-best", args.verify_best, 0)
    raw = read_spec(args.spec)
    if not isinstance(raw, dict):
        raise SpecError("spec", "must be a mapping (a gnn spec)")
    kind = kind_of(raw).name
    if kind != "gnn":
        raise SpecError("workload.kind", f"trainbed place searches a gnn job's placement; this is a {kind} spec")
    with simulated_rates(), errors_only():  # its placement is not read: a searched one is not searched here
        spec = gnn_spec.validate(raw)
    cluster = contextlib.nullcontext()  # None: the candidates are judged here, one after another
    if args.cluster:
        from experiments.cluster import connect
        cluster = connect(args.cluster)
    elif args.local is not None:
        from experiments.cluster import local
        cluster = local(args.local, {"simulated"})
    try:
        with cluster as executor:
            mapper = map
            if executor is not None:
                from experiments.gnn.judging import on_cluster
                mapper = on_cluster(executor.client)
            # a path on the command line is the caller's, relative to where it runs (one in a spec: to the checkout)
            found = search.search(spec, Path(args.profile).absolute(), steps, seed, verify_best=verify_best,
                                  progress=lambda line: print(line, file=sys.stderr, flush=True), mapper=mapper)
    except ProfileError as err:
        raise SpecError("--profile", str(err)) from None
    except SpecError:  # one line already (e.g. --cluster: no scheduler answers)
        raise
    except ValueError as err:  # the search's own one-line refusals (an infeasible job)
        raise SpecError(args.spec, str(err)) from None
    for task, host in found["placement"].items():
        print(f"{task}: {host}")
    predicted = found["predicted_iteration_s"]
    print(f"predicted iteration: {'n/a' if predicted is None else f'{predicted:.4f} s'} "
          f"({spec['scheduler']['name']}, {spec['workload']['iterations']} iterations)")
    print(f"search: {found['search_s']:.3f} s ({found['steps']} ETP steps, seed {seed})")
    path = found["critical_path"]
    print(f"Eq. 27's critical path: {path['s_per_iteration']:.4f} s an iteration, of it "
          + ", ".join(f"{kind} {s:.4f}" for kind, s in path["made_of"].items()))
    if args.out:
        Path(args.out).write_text(json.dumps(found, indent=2) + "\n")  # task order kept
        print(args.out)
    return 0


def _integer_flag(flag: str, value: str, least: int, most: int | None = None) -> int:
    """A command-line integer in ``least``..``most``, or a one-line SpecError."""
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < least or (most is not None and number > most):
        bounds = f">= {least}" if most is None else f"in {least}..{most:,}"
        raise SpecError(flag, f"must be an integer {bounds}, got {value!r}")
    return number


def _results(args) -> int:
    from experiments import store
    from experiments.reports.listing import RUN_MARKERS, SWEEP_MARKERS, as_csv, as_text, entries, row
    root = Path(args.dir) if args.dir is not None else store.results_root()
    if args.dir is not None and not root.is_dir():
        raise SpecError("dir", f"{root}: {'not a directory' if root.exists() else 'no such directory'}")
    root = root.resolve()  # "." and results/latest are directories of their own names
    if any((root / marker).exists() for marker in SWEEP_MARKERS) and (root / CELLS).is_dir():
        root = root / CELLS  # a sweep directory itself: its cells
    if args.dir is not None and any((root / marker).exists() for marker in RUN_MARKERS):
        rows = [row(root)[1]]  # one run: its row
    else:
        rows = entries(root)[:args.last] if root.is_dir() else []  # no results/ yet: nothing run here
    if args.csv:
        sys.stdout.write(as_csv(rows))
    else:
        missing = "" if root.exists() else " (no such directory yet)"
        print(as_text(rows) if rows else f"{root}: no run or sweep directory{missing}")
    return 0


def _clean(args) -> int:
    from experiments.platform.records import clean_all
    report = clean_all()
    print(report)
    return 0


def _colocate(args) -> int:
    from experiments.colocation.runner import run_colocate_file
    # An --out holding this spec's run is continued (its measured parts kept), after the
    # same checks as a sweep's resume: the same spec, the same code unless --force.
    run_colocate_file(args.spec, device=args.device, out=args.out, resume=args.out is not None, force=args.force,
                      continue_with=lambda run: f"trainbed colocate {args.spec} --device {args.device} --out {run}")
    return 0


def _sweep(args) -> int:
    from experiments.sweep import cells_to_run, dry_run, list_lines, load, refuse_invalid, run_sweep, select
    sweep = load(args.sweep)
    if args.list:
        for line in list_lines(select(sweep, args.only)):
            print(line)
        return 0
    if args.dry_run:
        invalid = dry_run(sweep, args.out, args.only, args.force)
        if invalid:
            print(f"{len(invalid)} cell{'s have' if len(invalid) != 1 else ' has'} an invalid spec: "
                  f"{', '.join(invalid)}")
        return 1 if invalid else 0
    executor = contextlib.nullcontext()  # None: the cells run here, one after another
    to_run = []
    if args.cluster or args.local is not None:  # the cells checked before a cluster is reached or started
        to_run = cells_to_run(sweep, Path(args.out) if args.out is not None else None, args.only)
        refuse_invalid(to_run)
    if args.cluster:
        from experiments.cluster import connect
        executor = connect(args.cluster)
    elif args.local is not None:
        from experiments.cluster import local
        # slots for the backends of the cells that will run: no fabric slot held for --only simulated cells
        executor = local(args.local, {cell.backend for cell in to_run} or sweep.backends)
    with executor as running:
        result = run_sweep(sweep, args.out, only=args.only, force=args.force, executor=running)
    if result.failed:
        print(f"{len(result.failed)} of {len(result.rows)} cells did not complete: {', '.join(result.failed)} "
              f"(run again with --out {result.directory} to retry only those)")
        return 1
    return 0


def _worker(args) -> int:
    from experiments.cluster import worker_command
    command = worker_command(args.address, args.fabric, args.cpus)
    os.execv(command[0], command)


def _figures(args) -> int:
    if args.paper != "dgtp" and len(args.dir) > 1:
        raise SpecError("dir", f"{args.paper} takes one sweep directory")
    out = Path(args.out) if args.out is not None else None
    sweeps = [Path(d).resolve() for d in args.dir]
    names = [sweep.name for sweep in sweeps]  # with several dgtp sweeps and --out: each one's folder in it
    if out is not None:  # --out leaves the sweeps as they are: it may not be one of them, nor hold one's figures
        targets = [out] + ([out / name for name in names] if len(args.dir) > 1 else [])
        if any(t.resolve() in sweeps for t in targets):
            raise SpecError("--out", f"{out}: would write into a sweep directory; leave --out out to draw into "
                                     f"the sweep, or choose another directory")
    if args.paper == "dgtp":
        from experiments.gnn.figures import dgtp_figures, table3_across
        if args.solo:
            raise SpecError("--solo", "dgtp takes no solo runs")
        if len(args.dir) > 1 and out is None:
            raise SpecError("--out", "is required with several sweep directories: where Table III across them goes")
        if out is None:
            paths = dgtp_figures(args.dir[0])
        elif len(args.dir) == 1:
            paths = dgtp_figures(args.dir[0], out) + table3_across(args.dir, out)
        else:  # each sweep's figures in a folder of its name, Table III across them beside
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise SpecError("dir", f"two sweep directories named {twice[0]}: their figures would share "
                                       f"{out / twice[0]}")
            paths = [p for d, n in zip(args.dir, names) for p in dgtp_figures(d, out / n)]
            paths += table3_across(args.dir, out)
    elif args.paper == "grouper-sim":
        from experiments.cojob.simfigures import grouper_sim_figures
        if args.solo:
            raise SpecError("--solo", "grouper-sim takes its solo runs from the sweep (its cells of one cojob alone)")
        paths = grouper_sim_figures(args.dir[0], out)
    else:
        from experiments.cojob.figures import grouper_figures
        paths = grouper_figures(args.dir[0], solo_runs=args.solo, out_dir=out)
    for path in paths:
        print(path)
    if out is not None:  # the sweeps are left as they were: their reports too
        return 0
    from experiments.reports import write_sweep_report
    written = 0
    for directory in args.dir:  # the sweep's report shows the figures now beside it
        try:
            write_sweep_report(directory)
        except Exception as err:  # noqa: BLE001 - the figures are written: said, not lost
            print(f"trainbed: {directory}: sweep report not written: {one_line(err)}", file=sys.stderr)
            continue
        written += 1
        print(Path(directory) / "report.html")
    return 0 if written == len(args.dir) else 1


def _kinds_listing(simulated: bool = False) -> str:
    """The spec kinds a command takes, a line each (``trainbed run --help``)."""
    from experiments.kinds import KINDS
    lines = [f"  {k.name:<11} {k.summary}" for k in KINDS.values() if k.simulate or not simulated]
    where = "workload.kind" if simulated else "workload.kind, or a top-level kind for colocation"
    return f"spec kinds ({where}; docs/specs.md):\n" + "\n".join(lines)


class _Version(argparse.Action):
    """``--version``: the package's version and the checkout's commit, as a run records
    them (looked up only when asked)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and the commit, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib import metadata
        from experiments.store import git_state
        try:
            version = metadata.version("trainbed")
        except metadata.PackageNotFoundError:
            version = "(not installed)"
        git = git_state()
        commit = (f"commit {git['git_commit'][:12]}{', with uncommitted changes' if git['git_dirty'] else ''}"
                  if git["git_commit"] else git["git_note"])
        print(f"trainbed {version}, {commit}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainbed", description=__doc__)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a spec: an experiment on the emulated network, or a co-location queue",
                         epilog=_kinds_listing(), formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("spec", help="spec file (YAML)")
    run.add_argument("--out", type=_out_new_run_dir, help="run directory (default: results/<stamp>-run-<spec>)")
    run.set_defaults(func=_run)
    simulate = sub.add_parser("simulate", help="run a spec's workload and scheduler on the flow-level simulator",
                              epilog=_kinds_listing(simulated=True),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    simulate.add_argument("spec", help="spec file (YAML)")
    simulate.add_argument("--out", type=_out_new_run_dir,
                          help="run directory (default: results/<stamp>-simulate-<spec>)")
    simulate.set_defaults(func=_simulate)
    check = sub.add_parser("validate", help="check a spec as run (or simulate) would, starting nothing",
                           epilog=_kinds_listing(), formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("spec", help="spec file (YAML)")
    check.add_argument("--simulated", action="store_true", help="check it for the simulator (trainbed simulate)")
    check.add_argument("--resolved", action="store_true",
                       help="print the spec as a run stores it (defaults filled; a searched placement searched)")
    check.set_defaults(func=_validate)
    place = sub.add_parser("place", help="search a GNN job's task placement (IFS, then ETP) on a profile, "
                                         "and predict its iteration time with the job's model")
    place.add_argument("spec", help="a gnn spec (its placement is not read)")
    place.add_argument("--profile", required=True, help="the profile.json that a run of the job with `profile: true` wrote")
    place.add_argument("--steps", help="ETP steps, 0..1,000,000 (default: 10000)")
    place.add_argument("--seed", default="0", help="ETP's seed, >= 0 (default: 0)")
    place.add_argument("--verify-best", default="0", metavar="K",
                       help="judge only IFS's placement and the K - 1 least-cost candidates by the model, after the "
                            "chain (default 0: every candidate, Alg. 3; for jobs with hundreds of "
                            "candidates that take minutes each)")
    place.add_argument("--out", type=_out_file, help="write the placement, predicted iteration time and search time as JSON")
    judged = place.add_mutually_exclusive_group()
    judged.add_argument("--cluster", metavar="ADDRESS",
                        help="judge the candidates in parallel on the Dask scheduler's `cpu` workers at ADDRESS "
                             "(the same result as here)")
    judged.add_argument("--local", type=count_flag, metavar="N",
                        help="judge the candidates N at a time on this machine, through a local Dask cluster")
    place.set_defaults(func=_place)
    results = sub.add_parser("results", help="the results store at a glance: its runs and sweeps, newest first")
    results.add_argument("dir", nargs="?", help="a directory of run and sweep directories (default: the results "
                                                "store, results/ or $TRAINBED_RESULTS)")
    results.add_argument("--last", type=count_flag, metavar="N", help="only the N newest")
    results.add_argument("--csv", action="store_true", help="as CSV (directory, type, kind, backend, cells, "
                                                             "completed, trustworthy, headline)")
    results.set_defaults(func=_results)
    clean = sub.add_parser("clean", help="remove what crashed runs left, from the project's own records")
    clean.set_defaults(func=_clean)
    colo = sub.add_parser("colocate", help="run a co-location spec (CoGNN / GNNSched) on the CPU or a GPU")
    colo.add_argument("spec", help="spec file (YAML)")
    colo.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                      help="where the tasks run (default cpu; cuda: the GPU, refused where none is attached)")
    colo.add_argument("--out", type=_out_run_dir, help="run directory (default: results/<stamp>-colocate-<spec>); "
                                                        "one holding this spec's run is continued, its measured "
                                                        "parts kept")
    colo.add_argument("--force", action="store_true",
                      help="continue a run directory started under another commit (or a clean tree, now dirty)")
    colo.set_defaults(func=_colocate)
    sweep = sub.add_parser("sweep", help="run a spec over schedulers x seeds x a grid, resumably")
    sweep.add_argument("sweep", help="sweep file (YAML)")
    sweep.add_argument("--out", type=dir_flag, help="sweep directory, resumed when it exists (default: results/<stamp>-sweep-<name>)")
    sweep.add_argument("--only", action="append", default=[], metavar="PATTERN",
                       help="only the cells whose id matches this shell pattern (fnmatch); repeatable")
    shown = sweep.add_mutually_exclusive_group()
    shown.add_argument("--list", action="store_true", help="print each cell's id and overrides; run nothing")
    shown.add_argument("--dry-run", action="store_true",
                       help="check every cell's spec, print what would run and the estimated time; run nothing")
    sweep.add_argument("--force", action="store_true",
                       help="resume a sweep directory started under another commit (or a clean tree, now dirty)")
    where = sweep.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="ADDRESS",
                       help="run the cells on the Dask scheduler at ADDRESS (e.g. tcp://10.0.0.1:8786)")
    where.add_argument("--local", type=count_flag, metavar="N",
                       help="run the simulated cells N at a time on this machine, through a local Dask cluster "
                            "(emulated cells one at a time: one fabric per machine)")
    sweep.set_defaults(func=_sweep)
    worker = sub.add_parser("worker", help="serve sweep cells to a Dask scheduler (trainbed sweep --cluster)")
    worker.add_argument("address", help="the Dask scheduler's address (e.g. tcp://10.0.0.1:8786)")
    worker.add_argument("--fabric", action="store_true",
                        help="this machine's fabric slot: run emulated cells, one at a time (as root)")
    worker.add_argument("--cpus", type=int, metavar="K",
                        help="run K simulated cells at once (default: the usable CPUs; 0 with --fabric)")
    worker.set_defaults(func=_worker)
    figures = sub.add_parser("figures", help="a paper's figures (tables, CSV, plots) from a sweep directory")
    figures.add_argument("paper", choices=("grouper", "grouper-sim", "dgtp"),
                         help="grouper: the testbed's Figs. 10-12; grouper-sim: the simulations' Figs. 14-18; "
                              "dgtp: DGTP's Table III and Figs. 6-8")
    figures.add_argument("dir", nargs="+", help=f"sweep directory (holds {RESULTS}); dgtp: one or more")
    figures.add_argument("--out", type=dir_flag, metavar="DIR",
                         help="write the figures here, leaving the sweep directories as they are (default: into the "
                              "sweep directory, its report rewritten to show them); dgtp: with it, Table III across "
                              "the sweeps too (table-3-all.{csv,md}), each sweep's figures in DIR/<its name> when "
                              "several (then required)")
    figures.add_argument("--solo", action="extend", nargs="+", default=[], metavar="RUN_DIR",
                         help="a run of cojobs alone (events.jsonl, workload.json) for stage slowdown; repeatable")
    figures.set_defaults(func=_figures)
    for name, command in sub.choices.items():  # each command's --help opens with what it does
        command.description = command.description or next((a.help for a in sub._choices_actions if a.dest == name), None)
    return parser


# What a command may raise for bad input or a refused request, shown as one line
# (``trainbed: error: <field>: <problem>``) with exit status 2; anything else is a
# bug and keeps its traceback. A new subcommand raises SpecError for bad input.
USER_ERRORS = (SpecError, FileExistsError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
               RuntimeError)
BUGS = (RecursionError, NotImplementedError)  # RuntimeErrors that are never the user's: their tracebacks stay


def error_line(err: BaseException) -> str:
    """An error as the one line the command line prints (a SpecError is one line:
    ``field: problem``; of any other, its first line)."""
    lines = str(err).splitlines()
    return f"trainbed: error: {lines[0] if lines else type(err).__name__}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except USER_ERRORS as err:
        if isinstance(err, BUGS):
            raise
        print(error_line(err), file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(f"trainbed: stopped: {err or 'interrupted'}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _reader_gone():  # a pipe of the command's own (a co-location worker's): its error
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that the exit's flush cannot fail
        return 141  # as a shell reports a command ended by SIGPIPE


def _reader_gone() -> bool:
    """Whether stdout is a pipe whose reader went away (``--list | head``)."""
    poller = select.poll()
    poller.register(sys.stdout.fileno(), select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


if __name__ == "__main__":
    sys.exit(main())
