"""Which of the workload's factors decides the sign of what queue weights do to
Grouper, on the model (``python measurements/weights-workload-2026-11-30/factors.py``
from the checkout's root; a line of JSON per simulation pair, then the table).

The 60-host spec and the paper's cluster share the fabric (60 hosts, 6 x 6 leaf-spine,
10 Gbit/s) and differ in three things, each toggled here from the paper's cluster:
  placement  gpu_slots (the paper's: packed into free GPUs, FCFS wait)  | spread
  arrivals   weibull, 20 cojobs (bursty)   | testbed, 3 cojobs per model (12; one per
             model at 0, the next of a model after the previous one's stage S-2)
  length     stages x0.025, period 1.5 s, comm:comp 1.0 | stages x0.1 (the 60-host
             spec's 50..400 iterations; weibull gaps scale with them), period 2.0 s,
             the models' own compute (the 60-host spec's job settings)
All eight combinations, seeds 1-3, Grouper on strict priority and on 4:3:2:1:1:1:1
(the weighting that cost Grouper on all three paper seeds): the change of the
average SCT (iterations+compute, as model_avg_sct_s)."""
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.cojob import metrics as gm  # noqa: E402
from experiments.cojob import simulated  # noqa: E402
from experiments.validation import read_yaml  # noqa: E402

PAPER = "experiments/specs/grouper-sim-paper.yaml"
WEIGHTS = [4, 3, 2, 1, 1, 1, 1]
SEEDS = (1, 2, 3)


def spec_for(spread: bool, testbed_arrivals: bool, long_stages: bool, seed: int, weights) -> dict:
    raw = read_yaml(PAPER)
    w = raw["workload"]
    if spread:
        w["placement"] = {"kind": "spread"}
    if testbed_arrivals:
        del w["arrivals"]
        w["cojobs_per_model"] = 3
    if long_stages:
        w["iterations_scale"] = 0.1  # 50..400 iterations; weibull gaps scale with it (the same load)
        del w["comm_comp_ratio"]
        raw["scheduler"]["period_s"] = 2.0
    raw["seed"] = seed
    if weights:
        raw.setdefault("emulation", {})["queue_weights"] = weights
    return raw


def avg_sct(raw: dict) -> float:
    spec = simulated.validate(raw)
    sim = simulated.build_simulation(spec, simulated.VARIANTS["iterations+compute"])
    result = sim.run()
    return gm.summarise(result.events, sim.coordinator.workload.to_dict())["avg_sct_s"]


def main():
    table = {}
    for spread, testbed_arrivals, long_stages in itertools.product((False, True), repeat=3):
        name = "+".join([n for n, on in (("spread", spread), ("testbed-arrivals", testbed_arrivals),
                                         ("x0.1-stages", long_stages)) if on]) or "paper's cluster"
        changes = []
        for seed in SEEDS:
            t0 = time.perf_counter()
            strict = avg_sct(spec_for(spread, testbed_arrivals, long_stages, seed, None))
            weighted = avg_sct(spec_for(spread, testbed_arrivals, long_stages, seed, WEIGHTS))
            change = 100 * (weighted / strict - 1)
            changes.append(change)
            print(json.dumps({"workload": name, "seed": seed, "strict_avg_sct_s": round(strict, 2),
                              "weighted_avg_sct_s": round(weighted, 2), "change_pct": round(change, 2),
                              "wall_s": round(time.perf_counter() - t0, 1)}), flush=True)
        table[name] = changes
    print("\n| placement, arrivals, stages | seed 1 | seed 2 | seed 3 | mean |\n|---|---|---|---|---|")
    for name, changes in table.items():
        print(f"| {name} | " + " | ".join(f"{c:+.1f}%" for c in changes) + f" | {statistics.mean(changes):+.1f}% |")


if __name__ == "__main__":
    main()
