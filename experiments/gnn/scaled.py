"""The DGTP paper's simulation figures (§VI-B, Figs. 10-11) on the job's model, at the
paper's size, from the headline job's profile scaled up.

``scaled_profile(profile, spec)`` makes a profile of a bigger job (``spec``: more
machines, workers and samplers) from a profiled smaller one. Readings, all ours (the
paper simulates from profiles of the real job at that size, which this box cannot
run):

- Task k of a kind in the big job behaves as profiled task k mod n of that kind
  (n: how many the profile has): its compute per iteration, its request rounds, its
  mini-batches, gradients and parameters. The PS is the profiled PS (the big job has
  one, as the paper's).
- A sampler's neighbour and feature requests go to every big store; the request to
  store m is the profiled one to store m mod n_stores, its bytes and the store's
  compute divided by (big stores / profiled stores): a sampler's frontier is the
  same, split over more partitions.
- ``traffic``: the graph's sampling traffic and compute against the profiled graph's
  (papers100M's fanouts and feature length): every volume and compute of sampling
  and computing (request rounds, replies, store and sampler compute, mini-batches,
  worker compute), the evaluation's too (its requests, replies, batch, sampler rounds
  and worker 0's evaluation), times ``traffic``.
- ``batch``: Fig. 10's per-sampler batch factor (the profiled batch times 0.5, 1, 2):
  the training's volumes and compute times ``batch`` as well; the evaluation's not, as
  its batch is the job's ``eval_nodes``, not a per-sampler batch (a reading: until
  2026-11-29 the evaluation's volumes scaled with the batch and its compute did not).
- ``pmr``: the peak-to-mean ratio of the store -> sampler volumes (the paper's: the
  largest pair's volume over the mean pair's, over a run) set by stretching every
  pair's volume about the mean, v' = mean + a (v - mean), a chosen so that the largest
  pair is ``pmr`` x the mean (the total stays). The paper "scales the transmitted
  graph data sizes"; this is one such scaling. It reaches at most the PMR at which
  the smallest pair's volume is 0 (2.79 for the 2026-11-24 profile): beyond,
  ValueError.

``python -m experiments.gnn.scaled OUT [--setting products|papers100m]`` writes
``figure-10.csv``, ``figure-11.csv`` and their plots, each cell as soon as it is done
(a stopped run resumes: the cells in OUT are kept). Settings (``SETTINGS``, §VI-B):
products, 8 machines, 8 stores, 16 workers x 2 samplers, 1 PS; papers100M, 16
machines, 16 stores, 20 workers x 4 samplers, 1 PS, its sampling traffic and compute
``PAPERS100M_TRAFFIC`` x the profiled job's (Table II's fanouts and feature length).
Machines are drawn from the paper's ranges (``paper_spec``; NIC rates scaled, see
``NIC_SCALE``). Per batch factor and per PMR: the steady-state iteration time
(``steady_iteration_s``) of DGTP (ETP's placement, OES), DistDGL's placement under
OES, OMCoflow and MRTF on ETP's placement (the paper gives both baselines DGTP's
placement). ETP judges its candidates by the model's makespan over
``--search-iterations`` (default ``SEARCH_ITERATIONS``; the paper's 20 take twice as
long at the products size); ``--steps`` its steps (default 2,000: few proposals pass
the (1 + gamma) filter). At papers100M's size that verification does not fit this
box: 10,000 steps pass hundreds of candidates, each minutes of the model; there
``--verify-best K`` runs the chain by Eq. 27 alone and has the model judge IFS's
placement and the K - 1 least-cost candidates (``search.least_makespan``), and
``--search-iterations 0`` takes the least-cost candidate unjudged: departures from
Alg. 3, stated with the results. ``--seeds S [S ...]`` runs each cell once per ETP
chain seed (default 1; the CSVs keep a row per seed, the plots their mean ± sd): one
chain of a few thousand steps is a sample. ``--cluster-seed N`` draws the cluster from seed N on
(one OUT per cluster: ``cluster.json`` there records the draw, and a run on another
draw is refused). ``--floors`` writes, per cell in OUT, the busiest NIC's seconds per
iteration of DistDGL's, IFS's and ETP's candidates' placements (``nic_floors``):
whether judging every candidate could have changed the cell.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

import matplotlib
import yaml

from controller.schedulers.placement.etp import etp
from controller.schedulers.placement.problem import nic_seconds
from experiments import store
from experiments.errors import SpecError
from experiments.gnn import placement as placement_mod
from experiments.gnn import search, simulated
from experiments.gnn import spec as gnn_spec
from experiments.gnn.simulated import Profile
from experiments.stats import mean_sd
from experiments.validation import writable_dir
from hosts.gnn import PREFETCH, task_index, task_kind
from topologies.fabric import simulated_rates

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PROFILE = store.REPO_ROOT / "measurements/gnn-model-2026-11-24/gnn-profile/profile.json"
HEADLINE = store.REPO_ROOT / "experiments/specs/gnn-hetero-products-ps.yaml"
POLICIES = (("DGTP (ETP + OES)", "etp", "oes"), ("DistDGL + OES", "distdgl", "oes"),
            ("OMCoflow", "etp", "omcoflow"), ("MRTF", "etp", "mrtf"))
BATCHES = (0.5, 1.0, 2.0)
PMRS = (1.5, 2.0)  # beyond 2.79 the stretch empties the smallest pairs (module docstring)
ITERATIONS = 12  # worker 0's intervals: 11, of which the last PREFETCH are the drain
SEARCH_ITERATIONS = 10  # the makespan ETP judges its candidates by (the paper's 20 take twice as long)
# The paper's NICs are 10, 20 or 50 Gbit/s for its real volumes and GPU compute; the
# profiled job moves far less data per unit of compute (a 20,000-node graph, CPU
# workers), so at Gbit/s it would be compute-bound and no scheduler would matter. Its
# NICs keep the paper's ratios at 2 Mbit/s per paper Gbit/s: 20, 40 or 100 Mbit/s,
# where its transfers dominate its iterations as the paper's did on its testbed.
NIC_SCALE = 2


def pmr(profile: Profile) -> float:
    """The largest (store, sampler) pair's volume over the mean pair's, over the profile."""
    volumes = _pair_volumes(profile)
    return max(volumes.values()) / statistics.fmean(volumes.values())


def _pair_volumes(profile: Profile) -> dict[tuple[str, str], float]:
    volumes: dict[tuple[str, str], float] = defaultdict(float)
    for (sampler, _n, _step), asked in profile.requests.items():
        for graph_store, _request, reply, _s in asked:
            volumes[graph_store, sampler] += reply
    return volumes


def scaled_profile(profile: Profile, spec: dict, batch: float = 1.0, target_pmr: float | None = None,
                   traffic: float = 1.0) -> Profile:
    """A profile of ``spec``'s (bigger) job made from ``profile`` (module docstring)."""
    training, evaluation = batch * traffic, traffic  # the evaluation's batch is eval_nodes'

    def factor(phase: str) -> float:
        return evaluation if simulated.evaluation_phase(phase) else training

    tasks = spec["workload"]["placement"]["tasks"]
    mine = profile.spec["workload"]["placement"]["tasks"]
    count = {kind: sum(task_kind(t) == kind for t in mine) for kind in placement_mod.TASK_KINDS}
    stores = sum(task_kind(t) == "store" for t in tasks)
    split = count["store"] / stores

    def source(task: str) -> str:
        kind = task_kind(task)
        return f"{kind}{task_index(task) % count[kind]}"

    if target_pmr is not None:
        volumes = _pair_volumes(profile)
        mean = statistics.fmean(volumes.values())
        peak = max(volumes.values())
        if peak <= mean:
            raise ValueError("the profile's store -> sampler volumes are all equal: no PMR to stretch")
        stretch = (target_pmr - 1) * mean / (peak - mean)
        if mean + stretch * (min(volumes.values()) - mean) <= 0:
            raise ValueError(f"pmr {target_pmr:g}: the stretch would empty the smallest store -> sampler pair "
                             f"(at most {1 + (peak - mean) / (mean - min(volumes.values())):.2f} here)")
        per_pair = {pair: (mean + stretch * (v - mean)) / v for pair, v in volumes.items()}
    samplers = [t for t in tasks if task_kind(t) == "sampler"]
    requests = {}
    for (sampler, n, step), asked in profile.requests.items():
        by_store = {a[0]: a for a in asked}
        for big in samplers:
            if source(big) != sampler:
                continue
            out = []
            for m in range(stores):
                got = by_store.get(f"store{m % count['store']}")
                if got is None:
                    continue
                scale = factor(step) * split
                stretch = per_pair[got[0], sampler] if target_pmr is not None else 1.0
                out.append((f"store{m}", round(got[1] * scale), round(got[2] * stretch * scale), got[3] * scale))
            requests[big, n, step] = out
    per_worker = spec["workload"]["samplers_per_worker"]
    volumes = {}
    for (src, dst, phase, n), nbytes in profile.bytes.items():
        if phase in ("minibatch", "evalbatch"):
            for big in samplers:
                if source(big) == src:
                    worker = f"worker{placement_mod.sampler_worker(task_index(big), per_worker)}"
                    volumes[big, worker, phase, n] = round(nbytes * factor(phase))
        elif phase in ("gradient", "parameter", "init"):
            for big in tasks:
                kind = task_kind(big)
                if kind == "worker" and source(big) == (src if phase != "parameter" else dst):
                    pair = (big, "ps0") if phase != "parameter" else ("ps0", big)
                    if phase != "init" or big == "worker0":
                        volumes[(*pair, phase, n)] = nbytes
    for (sampler, n, step), asked in requests.items():
        for graph_store, _request, reply, _s in asked:
            volumes[graph_store, sampler, step, n] = reply
    compute = {t: [x * (training if task_kind(t) == "worker" else 1.0)
                   for x in profile.compute_s[source(t)]]
               for t in tasks if task_kind(t) in ("worker", "ps")}
    rounds = {t: [[x * training for x in r] for r in profile.rounds_s[source(t)]] for t in samplers}
    eval_rounds = {t: [None if r is None else [x * evaluation for x in r] for r in profile.eval_rounds_s[source(t)]]
                   for t in samplers if source(t) in profile.eval_rounds_s}
    eval_s = [None if x is None else x * evaluation for x in profile.eval_s]
    return replace(profile, source=f"{profile.source} scaled", spec=spec, compute_s=compute, rounds_s=rounds,
                   eval_rounds_s=eval_rounds, eval_s=eval_s, requests=requests, bytes=volumes)


@dataclass(frozen=True)
class Setting:
    """One of the paper's simulation settings (§VI-B): its cluster and job sizes, and how
    much the headline job's sampling traffic and compute grow for its graph."""
    name: str
    machines: int
    workers: int
    samplers_per_worker: int
    traffic: float


def input_nodes(fanouts: tuple[int, ...]) -> int:
    """Nodes a seed's sampled subgraph can hold with these per-hop fanouts (DGL's order:
    the last hop's fanout is drawn from the seed first): 1 + f_L + f_L f_(L-1) + ..."""
    total, frontier = 1, 1
    for fanout in reversed(fanouts):
        frontier *= fanout
        total += frontier
    return total


# The paper profiles each dataset in its testbed; this box profiles the products-like
# job only. Our reading for papers100M (Table II: fanouts 12/12/12, 128 features, against
# products' 5/10/15 and 100): a sampler's requests, replies and compute, and the
# mini-batches and workers' compute, grow as its sampled nodes times their feature length,
# 1,885 x 128 / (916 x 100) = 2.63x the products job's (no deduplication in either).
PAPERS100M_TRAFFIC = input_nodes((12, 12, 12)) * 128 / (input_nodes((5, 10, 15)) * 100)
SETTINGS = {"products": Setting("products", 8, 16, 2, 1.0),
            "papers100m": Setting("papers100m", 16, 20, 4, PAPERS100M_TRAFFIC)}


def paper_spec(setting: Setting = SETTINGS["products"], seed: int = 0) -> tuple[dict, int]:
    """The paper's simulation setting, resolved: ``setting.machines`` machines (NICs of
    10, 20 or 50 "Gbit/s" at ``NIC_SCALE`` Mbit/s each; 4-16 CPUs, 32-128 GB, 1-4 GPUs,
    drawn with ``seed``), as many stores, ``setting.workers`` x
    ``setting.samplers_per_worker``, 1 PS, the headline job's graph, model, batch and task
    demands (§VI-A's); DistDGL's placement.

    The papers100M job asks 2 x 80 + 20 + 1 = 181 CPUs of 16 machines that average 160,
    so most draws cannot hold it; the paper does not say how its cluster held it. Ours:
    the first draw from ``seed`` on whose totals cover the demands and on which
    DistDGL's placement fits; returned beside the spec."""
    raw = yaml.safe_load(HEADLINE.read_text())
    hosts = [f"tbh{k + 1}" for k in range(setting.machines)]
    demands = {"store": {"cpus": 0, "memory_gb": 4, "gpus": 0}, "sampler": {"cpus": 2, "memory_gb": 7, "gpus": 0},
               "worker": {"cpus": 1, "memory_gb": 3, "gpus": 1}, "ps": {"cpus": 1, "memory_gb": 5, "gpus": 0}}
    samplers = setting.workers * setting.samplers_per_worker
    need = {r: setting.machines * demands["store"][r] + samplers * demands["sampler"][r]
            + setting.workers * demands["worker"][r] + demands["ps"][r] for r in ("cpus", "memory_gb", "gpus")}
    for drawn in range(seed, seed + 1000):
        rng = random.Random(drawn)
        mbps = {h: NIC_SCALE * rng.choice((10, 20, 50)) for h in hosts}
        machines = {h: {"cpus": rng.randint(4, 16), "memory_gb": rng.randint(32, 128), "gpus": rng.randint(1, 4)}
                    for h in hosts}
        if any(sum(m[r] for m in machines.values()) < need[r] for r in need):
            continue
        raw["topology"] = {"kind": "star", "hosts": setting.machines, "host_mbps": NIC_SCALE * 10,
                           "host_mbps_overrides": mbps}
        raw["workload"].update(workers=setting.workers, samplers_per_worker=setting.samplers_per_worker, ps=1,
                               iterations=ITERATIONS, target_accuracy=None, placement="distdgl",
                               machines=machines, task_resources=demands)
        try:
            with simulated_rates():
                spec = gnn_spec.validate(raw)
        except SpecError as err:
            if err.field != "workload.placement":
                raise
            continue
        return spec, drawn
    raise ValueError(f"{setting.name}: no cluster drawn from seeds {seed}..{seed + 999} holds the job")


def steady_iteration_s(events: list[dict]) -> float:
    """Worker 0's mean iteration time in steady state: its intervals between iteration
    ends, less the last ``PREFETCH`` (the drain: the samplers have sampled every
    remaining mini-batch, the network carries no more sampling). The paper simulates 5
    to 25 epochs, where neither the first iteration nor the drain counts; over the
    model's few iterations the drain would be a fifth of the mean (the products setting
    at 10 iterations: its last two intervals 6.6 and 5.8 s against ~14.2 s before)."""
    ends = sorted((e["iteration"], e["t"]) for e in events if e["kind"] == "iteration_end" and e["task"] == "worker0")
    intervals = [b - a for (_, a), (_, b) in pairwise(ends)][:-PREFETCH]
    if not intervals:
        raise ValueError(f"{len(ends)} iterations: a steady state needs at least {PREFETCH + 2}")
    return statistics.fmean(intervals)


def run_cell(spec: dict, profile: Profile, placement: dict[str, str], scheduler: str,
             iterations: int = ITERATIONS, progress=None) -> float:
    """The model's steady-state iteration time of ``spec``'s job on ``placement``
    (``progress``: as ``GnnSimulation``'s)."""
    trial = search.with_placement(spec, placement)
    return steady_iteration_s(simulated.GnnSimulation(trial, profile, iterations, scheduler, progress).run().events)


COLUMNS = {"10": "batch_factor", "11": "pmr"}


def figures(out: Path, setting: Setting = SETTINGS["products"], steps: int = 2000, seeds=(1,),
            iterations: int = ITERATIONS, batches=BATCHES, pmrs=PMRS, search_iterations: int = SEARCH_ITERATIONS,
            verify_best: int = 0, cluster_seed: int = 0) -> list[Path]:
    """Figs. 10-11's cells on the cluster ``paper_spec(setting, cluster_seed)`` draws,
    one per ETP chain seed in ``seeds`` (a chain of a few thousand steps is a sample:
    the seeds show how far a cell moves with it), each written to ``out`` as soon as it
    is done; cells already there for this setting (an earlier, stopped run) are kept,
    not run again (one ``out`` per cluster)."""
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds: one or more ETP seeds, each once, got {' '.join(map(str, seeds))}")
    if verify_best and not search_iterations:
        raise ValueError("verify_best: needs search_iterations >= 1 (the model judges the candidates)")
    out.mkdir(parents=True, exist_ok=True)
    base = simulated.load_profile(PROFILE)
    spec, drawn = cluster(out, setting, cluster_seed, iterations, search_iterations)
    print(f"{setting.name}: {setting.machines} machines (cluster drawn with seed {drawn}), {setting.workers} "
          f"workers x {setting.samplers_per_worker} samplers, traffic x {setting.traffic:.2f} the profiled", flush=True)
    rows = read(out, setting)
    for figure, values in (("10", batches), ("11", pmrs)):
        for value in values:
            profile = None
            for seed in seeds:
                kept = [r for r in rows if _cell(r) == (figure, value, seed)]
                for row in kept:  # a cell kept must be the one these arguments would run
                    for field, now in (("etp_steps", steps), ("search_iterations", search_iterations),
                                       ("iterations", iterations)):
                        if str(row.get(field)) != str(now):
                            raise ValueError(f"{field}: {out} holds Fig. {figure} {value:g} (ETP seed {seed}) with "
                                             f"{field} {row.get(field)}, this run asks {now}: use another directory")
                if {r["design"] for r in kept} >= {label for label, _, _ in POLICIES}:
                    print(f"Fig. {figure} {value} (ETP seed {seed}): in {out} already", flush=True)
                    continue
                profile = profile or cell_profile(base, spec, setting, figure, value)
                rows = [r for r in rows if _cell(r) != (figure, value, seed)] + \
                    _run_cell(spec, profile, setting, figure, value, steps, seed, iterations,
                              search_iterations, verify_best)
                write(out, rows, setting)
    for line in spread(rows):
        print(line, flush=True)
    return write(out, rows, setting)


def _cell(row: dict) -> tuple[str, float, int]:
    return row["figure"], row[COLUMNS[row["figure"]]], row["etp_seed"]


def _run_cell(spec: dict, profile: Profile, setting: Setting, figure: str, value: float, steps: int, seed: int,
              iterations: int, search_iterations: int, verify_best: int) -> list[dict]:
    """One cell's rows: ETP's chain from ``seed``, then every design of ``POLICIES``."""
    name = f"Fig. {figure} {value} (ETP seed {seed})"
    started = time.perf_counter()
    searched = search.etp_placement(spec, profile, steps, seed, verify=search_iterations > 0,
                                    verify_best=verify_best, progress=_print,
                                    window=search_iterations or search.WINDOW)
    found = searched.result
    placements = {"etp": searched.placement, "distdgl": spec["workload"]["placement"]["tasks"]}
    if verify_best:
        verified, judged = min(verify_best, len(found.candidates)), \
            f"IFS's and the {verify_best - 1} least-cost judged by the model"
    elif search_iterations:
        verified, judged = len(found.candidates), "judged by the model"
    else:
        verified, judged = 0, "the least-cost one taken"
    print(f"{name}: ETP {steps} steps, {len(found.candidates)} candidates, {judged} "
          f"({time.perf_counter() - started:.0f} s)", flush=True)
    cell = []
    for label, where, scheduler in POLICIES:
        iteration_s = run_cell(spec, profile, placements[where], scheduler, iterations,
                               lambda line: _print(f"{name}: {label} {line}"))
        cell.append({"setting": setting.name, "figure": figure, COLUMNS[figure]: value, "design": label,
                     "iteration_s": round(iteration_s, 4), "iterations": iterations, "etp_steps": steps,
                     "etp_seed": seed, "search_iterations": search_iterations, "candidates": len(found.candidates),
                     "verified": verified})
        print(f"{name}: {label} {iteration_s:.3f} s per iteration ({time.perf_counter() - started:.0f} s)",
              flush=True)
    return cell


def cluster(out: Path, setting: Setting, cluster_seed: int, iterations: int = ITERATIONS,
            search_iterations: int = SEARCH_ITERATIONS) -> tuple[dict, int]:
    """``paper_spec(setting, cluster_seed)``, the draw recorded in ``out/cluster.json``
    (setting -> drawn seed): the cells of one directory are of one cluster, so a draw
    other than the one recorded is refused in one line. Its job runs at least as many
    iterations as its longest simulation (cells of ``iterations``, candidates judged
    over ``search_iterations``): a shorter job's last iteration evaluates (is_eval),
    which inside a longer simulation would be an evaluation the job does not make
    there. ETP's costs (a window of the paper's 20) may run past the job's end, as the
    model would run on (``search.problem_from_profile``)."""
    spec, drawn = paper_spec(setting, cluster_seed)
    spec["workload"]["iterations"] = max(spec["workload"]["iterations"], iterations, search_iterations)
    path = out / "cluster.json"
    recorded = store.read_json(path) if path.exists() else {}
    if recorded.get(setting.name, drawn) != drawn:
        raise ValueError(f"--cluster-seed: {out} holds the {setting.name} cluster drawn with seed "
                         f"{recorded[setting.name]}, seed {cluster_seed} draws {drawn}: use another directory")
    store.write_json(path, {**recorded, setting.name: drawn})
    return spec, drawn


def cell_profile(base: Profile, spec: dict, setting: Setting, figure: str, value: float) -> Profile:
    """The profile of one cell: Fig. 10's batch factor or Fig. 11's PMR ``value``."""
    if figure == "10":
        return scaled_profile(base, spec, batch=value, traffic=setting.traffic)
    return scaled_profile(base, spec, traffic=setting.traffic, target_pmr=value)


def nic_floors(out: Path, setting: Setting, cluster_seed: int = 0) -> Path:
    """``floors.csv`` in ``out``: for each cell of its figure CSVs, the busiest NIC's
    seconds per iteration (``nic_seconds`` over the problem's iterations: fewer than
    the profile's, so an estimate of the bound no policy's mean iteration beats) of
    DistDGL's placement, of IFS's, and the least of
    any of ETP's candidates (the chain re-run by Eq. 27 alone for the cell's steps and
    seed: the same candidates as the cell's). It says whether judging every
    candidate by the model, as Alg. 3 does, could have changed a cell that judged only
    a few (``--verify-best``)."""
    done = read(out, setting)
    cells = {_cell(r): int(r["etp_steps"]) for r in done}
    if not cells:
        raise ValueError(f"out: {out} holds no {setting.name} cells (figure-10.csv, figure-11.csv): "
                         f"run them first, without --floors")
    base = simulated.load_profile(PROFILE)
    # the cells' job (one directory's cells share their iterations: ``figures`` refuses others)
    spec, _ = cluster(out, setting, cluster_seed, int(done[0]["iterations"]), int(done[0]["search_iterations"]))
    distdgl = spec["workload"]["placement"]["tasks"]
    rows, problems = [], {}
    for (figure, value, seed), steps in sorted(cells.items()):
        if (figure, value) not in problems:  # one problem per cell, whatever its seeds
            problems[figure, value] = search.problem_from_profile(spec, cell_profile(base, spec, setting, figure,
                                                                                     value))
        problem = problems[figure, value]
        found = etp(problem, steps, seed)
        floors = [nic_seconds(problem, c.placement) for c in found.candidates]
        theirs = problem.with_rings(distdgl)
        rows.append({"setting": setting.name, "figure": figure, "value": value, "etp_steps": steps, "etp_seed": seed,
                     "distdgl_nic_s": round(nic_seconds(problem, theirs), 2),
                     "ifs_nic_s": round(floors[0], 2), "candidates_least_nic_s": round(min(floors), 2),
                     "candidates": len(floors)})
        print(f"Fig. {figure} {value} (ETP seed {seed}): busiest NIC per iteration: DistDGL's "
              f"{rows[-1]['distdgl_nic_s']} s, IFS's {rows[-1]['ifs_nic_s']} s, least of {len(floors)} candidates "
              f"{rows[-1]['candidates_least_nic_s']} s", flush=True)
    path = out / "floors.csv"
    others = [r for r in store.read_csv(path) if r.get("setting") != setting.name] if path.exists() else []
    store.write_csv(path, others + rows, list(rows[0]))  # another setting's floors in ``out`` kept
    return path


def _print(line: str) -> None:
    print(f"  {line}", flush=True)


def read(out: Path, setting: Setting) -> list[dict]:
    """The rows of ``setting`` already in ``out``'s figure CSVs."""
    rows = []
    for figure, column in COLUMNS.items():
        path = out / f"figure-{figure}.csv"
        if path.exists():
            # rows written before 2026-11-30 have no etp_seed: their chains all ran seed 1
            rows += [{**r, column: float(r[column]), "iteration_s": float(r["iteration_s"]),
                      "etp_seed": int(r.get("etp_seed") or 1)}
                     for r in store.read_csv(path) if r.get("setting") == setting.name]
    return rows


def write(out: Path, rows: list[dict], setting: Setting = SETTINGS["products"]) -> list[Path]:
    """``figure-10.csv`` / ``figure-11.csv`` (``setting``'s rows, one per design and ETP
    seed, replacing its earlier ones; another setting's kept) and their plots of
    ``setting``'s rows: per design, the mean over the seeds, ± their sd where more than one."""
    paths = []
    for figure, column in COLUMNS.items():
        mine = sorted((r for r in rows if r["figure"] == figure), key=lambda r: (r[column], r["etp_seed"]))
        path = out / f"figure-{figure}.csv"
        others = [r for r in store.read_csv(path) if r.get("setting") != setting.name] if path.exists() else []
        store.write_csv(path, others + mine, ["setting", "figure", column, "design", "iteration_s", "iterations",
                                              "etp_steps", "etp_seed", "search_iterations", "candidates",
                                              "verified"])
        paths.append(path)
        values = sorted({r[column] for r in mine})
        if not values:
            continue
        per_cell = {v: len({r["etp_seed"] for r in mine if r[column] == v}) for v in values}  # chains a cell ran
        seeds = max(per_cell.values())
        uneven = len(set(per_cell.values())) > 1
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for k, (label, _, _) in enumerate(POLICIES):
            got = {v: [r["iteration_s"] for r in mine if r["design"] == label and r[column] == v] for v in values}
            shown = [(i, v) for i, v in enumerate(values) if got[v]]
            spreads = [mean_sd(got[v]) for _, v in shown]
            ax.bar([i + 0.2 * k for i, _ in shown], [m for m, _ in spreads], width=0.2,
                   yerr=[sd or 0.0 for _, sd in spreads] if seeds > 1 else None, capsize=2, label=label)
        ax.set_xticks([i + 0.3 for i in range(len(values))],
                      [f"{v:g}" + (f"\n{per_cell[v]} seed{'s' if per_cell[v] > 1 else ''}" if uneven else "")
                       for v in values])
        spread = (" each cell's seeds" if uneven else f" {seeds} ETP seeds") if seeds > 1 else ""
        ax.set(xlabel="per-sampler batch, x the profiled" if figure == "10" else "peak-to-mean ratio",
               ylabel="s per iteration (model)",
               title=f"Fig. {figure} on the model, {setting.name}" + (f", mean ± sd of{spread}"
                                                                    if seeds > 1 else " setting"))
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"figure-{figure}.png", dpi=120)
        plt.close(fig)
        paths.append(out / f"figure-{figure}.png")
    return paths


def spread(rows: list[dict]) -> list[str]:
    """One line per cell and design over ETP's seeds: mean ± sd (n) and the range."""
    by = defaultdict(list)
    for r in rows:
        by[(r["figure"], r[COLUMNS[r["figure"]]], r["design"])].append(r["iteration_s"])
    lines = []
    for (figure, value, design), got in sorted(by.items()):
        mean, sd = mean_sd(got)
        shown = f" ± {sd:.3f}" if sd is not None else ""
        lines.append(f"Fig. {figure} {value}: {design} {mean:.3f}{shown} s per iteration over "
                     f"{len(got)} ETP seed{'s' if len(got) > 1 else ''} ({min(got):.3f}-{max(got):.3f})")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.gnn.scaled", description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="products")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], metavar="S",
                        help="ETP chain seeds: each cell runs once per seed (default 1)")
    parser.add_argument("--iterations", type=int, default=ITERATIONS,
                        help=f"model iterations per cell (default {ITERATIONS})")
    parser.add_argument("--search-iterations", type=int, default=SEARCH_ITERATIONS,
                        help=f"model iterations per ETP candidate (default {SEARCH_ITERATIONS}; 0: ETP picks its "
                             "least-cost candidate, none simulated)")
    parser.add_argument("--verify-best", type=int, default=0, metavar="K",
                        help="run ETP's chain by cost alone, then judge IFS's and the K - 1 least-cost candidates by "
                             "the model (default 0: every candidate, Alg. 3)")
    parser.add_argument("--batches", type=float, nargs="*", default=BATCHES,
                        help="Fig. 10's batch factors (none: no Fig. 10 cells)")
    parser.add_argument("--pmrs", type=float, nargs="*", default=PMRS,
                        help="Fig. 11's peak-to-mean ratios (none: no Fig. 11 cells)")
    parser.add_argument("--floors", action="store_true",
                        help="write floors.csv for the cells in OUT (each cell's busiest-NIC bound per placement, "
                             "ETP re-run for the cell's own steps) instead of running cells")
    parser.add_argument("--cluster-seed", type=int, default=0,
                        help="draw the cluster from this seed on (default 0; the first draw that holds the job)")
    args = parser.parse_args(argv)
    for flag, value, least in (("--steps", args.steps, 0), ("--iterations", args.iterations, 4),
                               ("--search-iterations", args.search_iterations, 0),
                               ("--verify-best", args.verify_best, 0), ("--cluster-seed", args.cluster_seed, 0),
                               ("--seeds", min(args.seeds), 0)):
        if value < least:
            parser.exit(2, f"scaled: error: {flag}: must be >= {least}, got {value}"
                           f"{' (a steady state needs 4 iterations)' if flag == '--iterations' else ''}\n")
    for flag, values in (("--batches", args.batches), ("--pmrs", args.pmrs)):
        if any(not v > 0 for v in values):
            parser.exit(2, f"scaled: error: {flag}: must be > 0, got {' '.join(map(str, values))}\n")
    try:
        out = writable_dir("out", args.out)
    except SpecError as err:
        parser.exit(2, f"scaled: error: {err}\n")
    try:
        if args.floors:
            print(nic_floors(out, SETTINGS[args.setting], cluster_seed=args.cluster_seed))
            return
        for path in figures(out, SETTINGS[args.setting], args.steps, seeds=args.seeds, iterations=args.iterations,
                            batches=args.batches, pmrs=args.pmrs, search_iterations=args.search_iterations,
                            verify_best=args.verify_best, cluster_seed=args.cluster_seed):
            print(path)
    except ValueError as err:
        parser.exit(2, f"scaled: error: {err}\n")


if __name__ == "__main__":
    main()
