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
- ``batch``: every sampling volume and compute (request rounds, replies, store and
  sampler compute, mini-batches, worker compute) times ``batch``; Fig. 10's
  per-sampler batch sizes are the profiled one times 0.5, 1, 2.
- ``pmr``: the peak-to-mean ratio of the store -> sampler volumes (the paper's: the
  largest pair's volume over the mean pair's, over a run) set by stretching every
  pair's volume about the mean, v' = mean + a (v - mean), a chosen so that the largest
  pair is ``pmr`` x the mean (the total stays). The paper "scales the transmitted
  graph data sizes"; this is one such scaling. It reaches at most the PMR at which
  the smallest pair's volume is 0 (2.79 for the 2026-11-24 profile): beyond,
  ValueError.

``python -m experiments.gnn.scaled OUT`` writes ``figure-10.csv``, ``figure-11.csv``,
their tables and plots: on the paper's products setting (8 machines with NICs of 10,
20 or 50 Gbit/s and resources drawn from the paper's ranges, 8 stores, 16 workers x 2
samplers, 1 PS; the NIC rates scaled, see ``NIC_SCALE``), the mean iteration time of DGTP (ETP's placement, OES), DistDGL's
placement under OES, OMCoflow and MRTF on ETP's placement (the paper gives both
baselines DGTP's placement), per batch factor and per PMR. ETP judges its
candidates by the model's makespan over ``ITERATIONS`` iterations (the paper's 20
take twice as long at this size); ``--steps`` its steps (default 2,000: at this size
a step costs ~15 ms and few proposals pass the (1 + gamma) filter).
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import matplotlib
import yaml

from controller.schedulers.placement.etp import etp
from experiments.gnn import placement as placement_mod
from experiments.gnn import search, simulated
from experiments.gnn import spec as gnn_spec
from experiments.gnn.figures import write_csv
from experiments.gnn.simulated import Profile
from topologies.fabric import simulated_rates

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "measurements/gnn-model-2026-11-24/gnn-profile/profile.json"
HEADLINE = REPO / "experiments/specs/gnn-hetero-products-ps.yaml"
POLICIES = (("DGTP (ETP + OES)", "etp", "oes"), ("DistDGL + OES", "distdgl", "oes"),
            ("OMCoflow", "etp", "omcoflow"), ("MRTF", "etp", "mrtf"))
BATCHES = (0.5, 1.0, 2.0)
PMRS = (1.5, 2.0)  # beyond 2.79 the stretch empties the smallest pairs (module docstring)
ITERATIONS = 10
# The paper's NICs are 10, 20 or 50 Gbit/s for its real volumes and GPU compute; the
# profiled job moves far less data per unit of compute (a 20,000-node graph, CPU
# workers), so at Gbit/s it would be compute-bound and no scheduler would matter. Its
# NICs keep the paper's ratios at 2 Mbit/s per paper Gbit/s: 20, 40 or 100 Mbit/s,
# where its transfers dominate its iterations as the paper's did on its testbed.
NIC_SCALE = 2


def _index(task: str) -> int:
    return int(task[len(placement_mod.task_kind(task)):])


def pmr(profile: Profile) -> float:
    """The largest (store, sampler) pair's volume over the mean pair's, over the profile."""
    volumes = _pair_volumes(profile)
    return max(volumes.values()) / statistics.fmean(volumes.values())


def _pair_volumes(profile: Profile) -> dict[tuple[str, str], float]:
    volumes: dict[tuple[str, str], float] = defaultdict(float)
    for (sampler, _n, _step), asked in profile.requests.items():
        for store, _request, reply, _s in asked:
            volumes[store, sampler] += reply
    return volumes


def scaled_profile(profile: Profile, spec: dict, batch: float = 1.0, target_pmr: float | None = None) -> Profile:
    """A profile of ``spec``'s (bigger) job made from ``profile`` (module docstring)."""
    tasks = spec["workload"]["placement"]["tasks"]
    mine = profile.spec["workload"]["placement"]["tasks"]
    count = {kind: sum(placement_mod.task_kind(t) == kind for t in mine) for kind in placement_mod.TASK_KINDS}
    stores = sum(placement_mod.task_kind(t) == "store" for t in tasks)
    split = count["store"] / stores

    def source(task: str) -> str:
        kind = placement_mod.task_kind(task)
        return f"{kind}{_index(task) % count[kind]}"

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
    samplers = [t for t in tasks if placement_mod.task_kind(t) == "sampler"]
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
                factor = (per_pair[got[0], sampler] if target_pmr is not None else 1.0) * batch * split
                out.append((f"store{m}", round(got[1] * batch * split), round(got[2] * factor), got[3] * batch * split))
            requests[big, n, step] = out
    per_worker = spec["workload"]["samplers_per_worker"]
    volumes = {}
    for (src, dst, phase, n), nbytes in profile.bytes.items():
        if phase in ("minibatch", "evalbatch"):
            for big in samplers:
                if source(big) == src:
                    worker = f"worker{placement_mod.sampler_worker(_index(big), per_worker)}"
                    volumes[big, worker, phase, n] = round(nbytes * batch)
        elif phase in ("gradient", "parameter", "init"):
            for big in tasks:
                kind = placement_mod.task_kind(big)
                if kind == "worker" and source(big) == (src if phase != "parameter" else dst):
                    pair = (big, "ps0") if phase != "parameter" else ("ps0", big)
                    if phase != "init" or big == "worker0":
                        volumes[(*pair, phase, n)] = nbytes
    for (sampler, n, step), asked in requests.items():
        for store, _request, reply, _s in asked:
            volumes[store, sampler, step, n] = reply
    compute = {t: [x * (batch if placement_mod.task_kind(t) == "worker" else 1.0) for x in profile.compute_s[source(t)]]
               for t in tasks if placement_mod.task_kind(t) in ("worker", "ps")}
    rounds = {t: [[x * batch for x in r] for r in profile.rounds_s[source(t)]] for t in samplers}
    return replace(profile, source=f"{profile.source} scaled", spec=spec, compute_s=compute, rounds_s=rounds,
                   requests=requests, bytes=volumes)


def paper_products_spec(seed: int = 0) -> dict:
    """The paper's products simulation setting, resolved: 8 machines (NICs of 10, 20 or
    50 "Gbit/s" at ``NIC_SCALE`` Mbit/s each; 4-16 CPUs, 32-128 GB, 1-4 GPUs, drawn with
    ``seed``), 16 workers x 2 samplers, 1 PS, the headline job's graph, model and batch;
    DistDGL's placement."""
    rng = random.Random(seed)
    raw = yaml.safe_load(HEADLINE.read_text())
    hosts = [f"tbh{k + 1}" for k in range(8)]
    mbps = {h: NIC_SCALE * rng.choice((10, 20, 50)) for h in hosts}
    raw["topology"] = {"kind": "star", "hosts": 8, "host_mbps": NIC_SCALE * 10, "host_mbps_overrides": mbps}
    raw["workload"].update(workers=16, samplers_per_worker=2, ps=1, iterations=ITERATIONS, target_accuracy=None,
                           placement="distdgl",
                           machines={h: {"cpus": rng.randint(4, 16), "memory_gb": rng.randint(32, 128),
                                         "gpus": rng.randint(1, 4)} for h in hosts},
                           task_resources={"store": {"cpus": 0, "memory_gb": 4, "gpus": 0},
                                           "sampler": {"cpus": 2, "memory_gb": 7, "gpus": 0},
                                           "worker": {"cpus": 1, "memory_gb": 3, "gpus": 1},
                                           "ps": {"cpus": 1, "memory_gb": 5, "gpus": 0}})
    with simulated_rates():
        return gnn_spec.validate(raw)


def run_cell(spec: dict, profile: Profile, placement: dict[str, str], scheduler: str) -> float:
    return simulated.predict(search.with_placement(spec, placement), profile, ITERATIONS, scheduler)


def figures(out: Path, steps: int = 2000, seed: int = 1) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    base = simulated.load_profile(PROFILE)
    spec = paper_products_spec()
    rows = []
    for figure, values in (("10", BATCHES), ("11", PMRS)):
        for value in values:
            profile = (scaled_profile(base, spec, batch=value) if figure == "10"
                       else scaled_profile(base, spec, target_pmr=value))
            started = time.perf_counter()
            found = etp(search.problem_from_profile(spec, profile), steps, seed,
                        makespan=search.makespan(spec, profile, ITERATIONS))
            placements = {"etp": {t: found.placement[t] for t in spec["workload"]["placement"]["tasks"]},
                          "distdgl": spec["workload"]["placement"]["tasks"]}
            for label, where, scheduler in POLICIES:
                iteration_s = run_cell(spec, profile, placements[where], scheduler)
                rows.append({"figure": figure, "batch_factor" if figure == "10" else "pmr": value,
                             "design": label, "iteration_s": round(iteration_s, 4)})
                print(f"Fig. {figure} {value}: {label} {iteration_s:.3f} s per iteration "
                      f"({time.perf_counter() - started:.0f} s)", flush=True)
    return write(out, rows)


def write(out: Path, rows: list[dict]) -> list[Path]:
    """``figure-10.csv`` / ``figure-11.csv`` and their plots from the measured rows."""
    paths = []
    for figure, column in (("10", "batch_factor"), ("11", "pmr")):
        mine = [r for r in rows if r["figure"] == figure]
        path = out / f"figure-{figure}.csv"
        write_csv(path, mine, ["figure", column, "design", "iteration_s"])
        fig, ax = plt.subplots(figsize=(6, 3.6))
        values = list(dict.fromkeys(r[column] for r in mine))
        for k, (label, _, _) in enumerate(POLICIES):
            ax.bar([i + 0.2 * k for i in range(len(values))],
                   [next(r["iteration_s"] for r in mine if r[column] == v and r["design"] == label) for v in values],
                   width=0.2, label=label)
        ax.set_xticks([i + 0.3 for i in range(len(values))], [f"{v:g}" for v in values])
        ax.set(xlabel="per-sampler batch, x the profiled" if figure == "10" else "peak-to-mean ratio",
               ylabel="s per iteration (model)", title=f"Fig. {figure} on the model, products setting")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"figure-{figure}.png", dpi=120)
        plt.close(fig)
        paths += [path, out / f"figure-{figure}.png"]
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.gnn.scaled", description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args(argv)
    for path in figures(Path(args.out), args.steps):
        print(path)


if __name__ == "__main__":
    main()
