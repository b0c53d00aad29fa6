"""Bench rows for DGTP's placement search (``make bench``): IFS and ETP on the headline
job (the 2026-11-24 profile of gnn-hetero-products-ps.yaml, the tight machines of
gnn-hetero-products-tight.yaml) and on a synthetic job of the paper's simulation
size (§VI-B: 8 machines, 8 stores, 16 workers x 2 samplers, 1 PS).

The paper-size job (``paper_size_problem``) takes each task kind's per-iteration
time and each transfer kind's bytes from the headline profile's problem (the means
over its iterations; one store -> sampler round stands for all: the model-level
detail does not change the search's cost per step), and machines drawn, seeded, from
the paper's ranges: memory 32-128 GB, 4-16 CPUs, 1-4 GPUs, NICs of 10, 20 or 50
Gbit/s, with the paper's task demands (worker 1 CPU, 3 GB, 1 GPU; sampler 2 CPUs,
7 GB; PS 1 CPU, 5 GB; store memory only). It exists to time the search at that
size, not to stand for a real job.

Rows: IFS's seconds (target < 0.1 s), ETP's 10,000 steps judged by Eq. 27 (target
< 10 s on the headline job, < 3 min at paper size; paper: < 3 min), and on the
headline job the same search with its candidates verified by the model (the
search ``trainbed place`` runs), all in one invocation. The papers100M size (§VI-B:
16 machines, 20 workers x 4 samplers) is timed on ``scaled``'s profile of it, every
profiled phase and iteration kept: 1,000 steps, scaled to 10,000; and the job's
model there (what ETP's verification runs per candidate), under OES and MRTF: wall
seconds per simulated iteration and simulated seconds per wall second.

``--figure9 DIR``: the paper's Fig. 9 (``figure9``), ETP against the search that
costs every proposal by the model's makespan, both for 10,000 steps.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from functools import partial
from pathlib import Path

import matplotlib
import yaml

from controller.schedulers.placement.etp import etp
from controller.schedulers.placement.ifs import ifs
from controller.schedulers.placement.problem import Machine, Problem, Task, Transfer
from experiments.benchrows import row, show
from experiments.gnn import scaled, search, simulated
from experiments.gnn import spec as gnn_spec
from experiments.reports.markdown import markdown_table
from experiments.store import REPO_ROOT, write_csv
from topologies.fabric import simulated_rates
from topologies.units import mbps_to_bytes_per_s

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PROFILE = scaled.PROFILE  # the job profile every GNN bench reads
TIGHT = REPO_ROOT / "experiments/specs/gnn-hetero-products-tight.yaml"
MIXED = REPO_ROOT / "experiments/specs/gnn-hetero-products-mixed.yaml"
STEPS = 10_000
PAPERS100M_STEPS = 1_000  # timed, then scaled to 10,000: the full search takes minutes there
IFS_TARGET_S, HEADLINE_TARGET_S, PAPER_TARGET_S = 0.1, 10.0, 180.0
# The job's model at the papers100M size, DistDGL's placement, timed over this many
# iterations; it should run faster than the training it models (simulated s over wall s)
MODEL_ITERATIONS, MODEL_SCHEDULERS, MODEL_TARGET_RATIO = 2, ("oes", "mrtf"), 1.0
DEMANDS = {"store": {"mem": 4}, "sampler": {"cpu": 2, "mem": 7}, "worker": {"cpu": 1, "mem": 3, "gpu": 1},
           "ps": {"cpu": 1, "mem": 5}}


def headline() -> tuple[dict, Problem]:
    raw = yaml.safe_load(TIGHT.read_text())
    raw["workload"]["placement"] = "distdgl"  # the search's own input; no search at validation
    with simulated_rates():
        spec = gnn_spec.validate(raw)
    return spec, search.problem_from_profile(spec, PROFILE)


def paper_size_problem(base: Problem, machines: int = 8, workers: int = 16, per_worker: int = 2, seed: int = 0
                       ) -> Problem:
    """A synthetic job of the paper's simulation size, its times and bytes from ``base``."""
    rng = random.Random(seed)
    # fmean (an exact sum), not experiments.stats.mean: a plain sum moves last bits of the problem measured
    exec_s = {kind: statistics.fmean(statistics.fmean(t.exec_s) for t in base.tasks.values() if t.kind == kind)
              for kind in ("store", "sampler", "worker", "ps")}
    volume = {}
    for t in base.transfers:
        phase = "round" if t.src.startswith("store") else t.phase
        volume.setdefault(phase, []).append(statistics.fmean(t.bytes))
    volume = {phase: statistics.fmean(v) for phase, v in volume.items()}
    hosts = [f"m{k}" for k in range(machines)]
    gbps = [rng.choice((10, 20, 50)) for _ in hosts]
    fleet = [Machine(h, {"cpu": rng.randint(4, 16), "mem": rng.randint(32, 128), "gpu": rng.randint(1, 4)},
                     mbps_to_bytes_per_s(g * 1000), mbps_to_bytes_per_s(g * 1000)) for h, g in zip(hosts, gbps)]
    samplers = [f"sampler{i}" for i in range(workers * per_worker)]
    tasks = ([Task(f"store{m}", "store", exec_s["store"], DEMANDS["store"], home=h) for m, h in enumerate(hosts)]
             + [Task(s, "sampler", exec_s["sampler"], DEMANDS["sampler"]) for s in samplers]
             + [Task(f"worker{w}", "worker", exec_s["worker"], DEMANDS["worker"]) for w in range(workers)]
             + [Task("ps0", "ps", exec_s["ps"], DEMANDS["ps"])])
    transfers = [Transfer(f"store{m}", s, "feature", volume["round"]) for m in range(machines) for s in samplers]
    transfers += [Transfer(s, f"worker{i // per_worker}", "minibatch", volume["minibatch"])
                  for i, s in enumerate(samplers)]
    for w in range(workers):
        transfers += [Transfer(f"worker{w}", "ps0", "gradient", volume["gradient"]),
                      Transfer("ps0", f"worker{w}", "parameter", volume["parameter"], lag=1)]
    return Problem(fleet, tasks, transfers)


def _timed(call) -> tuple[float, object]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def rows() -> list[dict]:
    spec, problem = headline()
    profile = simulated.load_profile(PROFILE)
    paper = paper_size_problem(problem)
    out = []
    ifs_s = min(_timed(lambda: ifs(problem))[0] for _ in range(5))
    out.append(row("dgtp_ifs_headline_s", ifs_s, "s", IFS_TARGET_S, lower_is_better=True))
    paper_ifs_s = min(_timed(lambda: ifs(paper))[0] for _ in range(3))
    out.append(row("dgtp_ifs_paper_size_s", paper_ifs_s, "s", IFS_TARGET_S, lower_is_better=True))
    etp_s, _ = _timed(lambda: etp(problem, STEPS, 1))
    out.append(row("dgtp_etp_10000_steps_headline_s", etp_s, "s", HEADLINE_TARGET_S, lower_is_better=True))
    verified_s, found = _timed(lambda: search.etp_placement(spec, profile, STEPS, 1))
    out.append(row("dgtp_etp_10000_steps_verified_headline_s", verified_s, "s"))
    out.append(row("dgtp_etp_candidates_simulated_headline", len(found.result.candidates), "count"))
    paper_s, _ = _timed(lambda: etp(paper, STEPS, 1))
    out.append(row("dgtp_etp_10000_steps_paper_size_s", paper_s, "s", PAPER_TARGET_S, lower_is_better=True))
    out.append(row("dgtp_etp_paper_size_over_headline", paper_s / etp_s, "ratio"))
    setting = scaled.SETTINGS["papers100m"]
    big_spec, _ = scaled.paper_spec(setting)
    big_profile = scaled.scaled_profile(profile, big_spec, traffic=setting.traffic)
    big = search.problem_from_profile(big_spec, big_profile)
    big_s, _ = _timed(lambda: etp(big, PAPERS100M_STEPS, 1))
    out.append(row(f"dgtp_etp_10000_steps_papers100m_from_{PAPERS100M_STEPS}_s", big_s * STEPS / PAPERS100M_STEPS,
                   "s", PAPER_TARGET_S, lower_is_better=True))
    for scheduler in MODEL_SCHEDULERS:
        model_s, result = _timed(simulated.GnnSimulation(big_spec, big_profile, MODEL_ITERATIONS, scheduler).run)
        out.append(row(f"gnn_model_papers100m_{scheduler}_wall_s_per_iteration", model_s / MODEL_ITERATIONS, "s"))
        out.append(row(f"gnn_model_papers100m_{scheduler}_simulated_over_wall", result.end_s / model_s, "ratio",
                       MODEL_TARGET_RATIO))
    return out


def figure9(out: Path, steps: int = STEPS, seed: int = 1, testbeds: dict | None = None) -> Path:
    """Fig. 9: ETP's search time (Eq. 27's critical path, candidates verified by the
    model) beside the same search costing every proposal by the model's makespan, on
    each testbed (name -> a gnn spec), ``steps`` steps each; data first
    (``figure-9.csv``), then ``figure-9.md`` and ``figure-9.png``, rewritten after each
    testbed (the simulated-cost search takes tens of minutes)."""
    profile = simulated.load_profile(PROFILE)
    rows_out = []
    for name, spec_path in (testbeds or {"heterogeneous NICs": TIGHT, "mixed NICs and compute": MIXED}).items():
        raw = yaml.safe_load(Path(spec_path).read_text())
        raw["workload"]["placement"] = "distdgl"
        with simulated_rates():
            spec = gnn_spec.validate(raw)
        simulate = search.makespan(spec, profile)
        for method, by_simulation in (("ETP (critical path)", False), ("simulated makespan as cost", True)):
            took, found = _timed(partial(search.etp_placement, spec, profile, steps, seed,
                                         simulated_cost=by_simulation))
            rows_out.append({"testbed": name, "method": method, "steps": steps, "search_s": round(took, 3),
                             "makespan_s": round(simulate(found.placement), 3),
                             "candidates": len(found.result.candidates)})
            print(f"{name}: {method}: {took:.1f} s, makespan {rows_out[-1]['makespan_s']} s", flush=True)
        write_figure9(out, rows_out, steps, seed)
    return out / "figure-9.md"


def write_figure9(out: Path, rows_out: list[dict], steps: int, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "figure-9.csv", rows_out, list(rows_out[0]))
    lines = ["# Fig. 9: search time (DGTP paper §VI-A, 'Search time')", "",
             f"{steps} steps, seed {seed}, on the 2026-11-24 profile; makespan: the model's, {search.WINDOW} "
             "iterations under OES, of the placement each search chose.", "",
             markdown_table(["testbed", "search", "seconds", "chosen placement's makespan (s)"],
                            [[r["testbed"], r["method"], r["search_s"], r["makespan_s"]] for r in rows_out])]
    (out / "figure-9.md").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    names = list(dict.fromkeys(r["testbed"] for r in rows_out))
    for k, method in enumerate(dict.fromkeys(r["method"] for r in rows_out)):
        ax.bar([i + 0.4 * k for i in range(len(names))],
               [next((r["search_s"] for r in rows_out if r["testbed"] == n and r["method"] == method), 0)
                for n in names], width=0.4, label=method)
    ax.set_xticks([i + 0.2 for i in range(len(names))], names)
    ax.set(ylabel="search time (s)", yscale="log", title=f"Fig. 9: search time, {steps} steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "figure-9.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.gnn.searchbench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--figure9", metavar="DIR", help="measure Fig. 9 into DIR instead of the bench rows")
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps: must be >= 1, got {args.steps}")
    if args.figure9:
        print(figure9(Path(args.figure9), args.steps))
    else:
        show(rows())


if __name__ == "__main__":
    main()
