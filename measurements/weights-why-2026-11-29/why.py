"""Why queue weights cost Grouper on some workloads and not others, on the model
(``python measurements/weights-why-2026-11-29/why.py [NAME ...]`` from the checkout's root).

Each workload is simulated under Grouper on strict priority and on two weightings.
Per stage: its SCT on each, and under strict priority its time-averaged rank in
Grouper's global order while it was active (0: the highest). The change in the sum
of SCTs is split by that rank; and how often Grouper's order ranks a stage above one
active beside it that ends sooner under strict priority (an inversion against
shortest-first, where weights, nearer fair sharing, can win back time)."""
import collections
import json
import sys
import time

from experiments.cojob import metrics as gm
from experiments.cojob import simulated
from experiments.validation import read_yaml

WEIGHTS = {"strict": None, "2:1:1:1:1:1:1": [2, 1, 1, 1, 1, 1, 1], "64:32:..:1": [64, 32, 16, 8, 4, 2, 1],
           "4:3:2:1:1:1:1": [4, 3, 2, 1, 1, 1, 1]}
WORKLOADS = {  # name: (spec, seed or None: the spec's)
    "smoke": ("experiments/specs/grouper-smoke.yaml", None),
    "paper-1": ("experiments/specs/grouper-sim-paper.yaml", 1),
    "paper-2": ("experiments/specs/grouper-sim-paper.yaml", 2),
    "paper-3": ("experiments/specs/grouper-sim-paper.yaml", 3),
    "trace-full": ("experiments/specs/grouper-trace-full.yaml", None),
    "sim-60": ("experiments/specs/grouper-sim-60.yaml", None),
    **{f"sim-60-{seed}": ("experiments/specs/grouper-sim-60.yaml", seed) for seed in (2, 3, 4, 5)},
}


def simulate(path, seed, weights):
    raw = read_yaml(path)
    raw.setdefault("emulation", {})["queue_weights"] = weights
    if seed is not None:
        raw["seed"] = seed
    spec = simulated.validate(raw)
    spec["scheduler"]["name"] = "grouper"
    sim = simulated.build_simulation(spec, simulated.VARIANTS["iterations+compute"])
    res = sim.run()
    summary = gm.summarise(res.events, sim.coordinator.workload.to_dict())
    return res, summary


def stage_table(res, summary):
    """stage id -> {sct, start, end, rank (time-averaged global rank while active), concurrent}"""
    starts = {f"c{e['cojob']}/s{e['stage']}": e["t"] for e in res.events if e["kind"] == "stage_start"}
    ends = {f"c{e['cojob']}/s{e['stage']}": e["t"] for e in res.events if e["kind"] == "stage_end"}
    sct = {f"c{r['cojob']}/s{r['stage']}": r["sct_s"] for r in summary["sct_s"]}
    decisions = sorted(res.decisions, key=lambda d: d["t"])
    rank_time = collections.defaultdict(float)
    active_time = collections.defaultdict(float)
    for d, nxt in zip(decisions, decisions[1:] + [{"t": res.end_s}]):
        span = nxt["t"] - d["t"]
        for r, sid in enumerate(d["order"]):
            rank_time[sid] += r * span
            active_time[sid] += span
    return {sid: {"sct": sct[sid], "start": starts[sid], "end": ends[sid],
                  "rank": rank_time[sid] / active_time[sid] if active_time[sid] else 0.0}
            for sid in sct if sid in starts and sid in ends}


def inversions(table, res):
    """Share of pairs (a ranked above b at a decision, both active) where a's strict
    duration left at that time exceeds b's: Grouper's order against shortest-remaining-first."""
    bad = total = 0
    for d in res.decisions[::max(1, len(res.decisions) // 400)]:
        order = [s for s in d["order"] if s in table]
        left = {s: table[s]["end"] - d["t"] for s in order}
        for i, a in enumerate(order):
            for b in order[i + 1:]:
                total += 1
                bad += left[a] > left[b]
    return bad / total if total else None


def main(names):
    for name in names:
        path, seed = WORKLOADS[name]
        runs = {}
        for label, weights in WEIGHTS.items():
            t0 = time.perf_counter()
            res, summary = simulate(path, seed, weights)
            runs[label] = (res, summary, stage_table(res, summary), time.perf_counter() - t0)
        res0, s0, strict, _ = runs["strict"]
        mean_concurrency = sum(len(d["order"]) * (n["t"] - d["t"]) for d, n in
                               zip(res0.decisions, res0.decisions[1:])) / max(res0.decisions[-1]["t"], 1e-9)
        line = {"workload": name, "stages": len(strict), "avg_sct_strict": round(s0["avg_sct_s"], 2),
                "mean_active_stages": round(mean_concurrency, 2), "inversions": round(inversions(strict, res0), 3)}
        for label in WEIGHTS:
            if label == "strict":
                continue
            _, s, table, wall = runs[label]
            common = [sid for sid in strict if sid in table]
            by_rank = collections.defaultdict(float)
            count = collections.Counter()
            for sid in common:
                band = "top" if strict[sid]["rank"] < 0.5 else "2-3" if strict[sid]["rank"] < 2.5 else "4+"
                by_rank[band] += table[sid]["sct"] - strict[sid]["sct"]
                count[band] += 1
            n = len(common)
            line[label] = {"avg_sct": round(s["avg_sct_s"], 2),
                           "change": f"{100 * (s['avg_sct_s'] / s0['avg_sct_s'] - 1):+.1f}%",
                           # each band's share of the change in the average SCT (s over all stages)
                           "by_strict_rank_s": {b: round(by_rank[b] / n, 2) for b in ("top", "2-3", "4+")},
                           "stages_by_rank": {b: count[b] for b in ("top", "2-3", "4+")},
                           "wall_s": round(wall, 1)}
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(WORKLOADS))
