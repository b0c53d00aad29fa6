"""Grouper's figures for ``make bench``: PDA's running time, the simulator's at the
paper's scale, and the simulator against the emulation.

PDA's running time on seeded random instances:

An instance: cojobs of four stages on a 240-machine fabric (480 ports), each stage
loading 2 to 6 random ports. The target is the paper's use: rerun every period,
so ordering 10,000 stages must take well under a second.
"""
from __future__ import annotations

import random
import time

from controller.schedulers.grouper import Stage, pda
from experiments.benchrows import row

MACHINES = 240
STAGES_PER_COJOB = 4
TARGET_10000_S = 1.0


def random_stages(n: int, seed: int = 0) -> list[Stage]:
    """``n`` stages over ``MACHINES`` machines (2 ports each), reproducible by ``seed``."""
    rng = random.Random(seed)
    ports = [f"tbh{m}/{end}" for m in range(1, MACHINES + 1) for end in ("out", "in")]
    stages = []
    for i in range(n):
        cojob, index = divmod(i, STAGES_PER_COJOB)
        loads = {p: rng.uniform(1.0, 100.0) for p in rng.sample(ports, rng.randint(2, 6))}
        stages.append(Stage(f"c{cojob}/s{index}", f"c{cojob}", index, loads))
    return stages


def _pda_seconds(n: int) -> float:
    stages = random_stages(n)
    start = time.perf_counter()
    pda(stages)
    return time.perf_counter() - start


def pda_timings() -> list[dict]:
    """PDA's wall time for 1,000 and 10,000 stages over 480 ports, bench rows."""
    small, large = _pda_seconds(1_000), _pda_seconds(10_000)
    return [row("pda_1000_stages_480_ports_s", small, "s"),
            row("pda_10000_stages_480_ports_s", large, "s", TARGET_10000_S, lower_is_better=True)]


SIM_TARGET_S = 60.0
TRACE_WEIGHTS = [2, 1, 1, 1, 1, 1, 1]  # queue_weights of the weighted trace run
CHURN_WEIGHTS = {1: 2.0, 2: 1.0, 3: 1.0}
TRACE_FULL = "experiments/specs/grouper-trace-full.yaml"
SIM_60 = "experiments/specs/grouper-sim-60.yaml"


def _simulated_s(path: str, scheduler: str, seed: int | None = None,
                 queue_weights: list[float] | None = None) -> tuple[float, dict]:
    """(wall seconds, the run's Grouper metrics and flow count) of one simulation,
    on queues of ``queue_weights`` where given."""
    from experiments.cojob import metrics as grouper_metrics
    from experiments.cojob import simulated
    from experiments.validation import read_yaml
    raw = read_yaml(path)
    if queue_weights:
        raw.setdefault("emulation", {})["queue_weights"] = queue_weights
    spec = simulated.validate(raw)
    spec["scheduler"]["name"] = scheduler
    if seed is not None:
        spec["seed"] = seed
    start = time.perf_counter()
    simulation = simulated.build_simulation(spec, simulated.VARIANTS["iterations+compute"])
    result = simulation.run()
    wall = time.perf_counter() - start
    return wall, {**grouper_metrics.summarise(result.events, simulation.coordinator.workload.to_dict()),
                  "flows": len(result.flow_s)}


CHURN_TRANSFERS = 20_000


def simulator_timings() -> list[dict]:
    """The simulator backend at the paper's scale: the authors' full trace (40 cojobs)
    under FS and Grouper, and under Grouper on weighted queues, 12 cojobs on a 60-host
    6x6 fabric at 10 Gbit/s, and its fluid network alone (``bench_network``, strict
    and weighted)."""
    from experiments.sim.network import bench_network
    # load the compiled fillings (a cold cache compiles them) untimed
    bench_network(flows=60, ports=6, transfers=10, queues=3)
    bench_network(flows=60, ports=6, transfers=10, queues=3, weights=CHURN_WEIGHTS)
    rows = []
    trace_s = {}
    for scheduler in ("fs", "grouper"):
        wall, summary = _simulated_s(TRACE_FULL, scheduler)
        trace_s[scheduler] = wall
        rows += [row(f"sim_trace40_{scheduler}_s", wall, "s", SIM_TARGET_S, lower_is_better=True),
                 row(f"sim_trace40_{scheduler}_flows", summary["flows"], "flows"),
                 row(f"sim_trace40_{scheduler}_avg_sct_s", summary["avg_sct_s"], "s")]
    # Weighted queues (2 : 1 from Grouper's first queue to the rest): the filling iterates
    # where strict priority's is one pass (experiments/sim/weighted.py), so no target of
    # its own: the ratio is what to watch
    wall, summary = _simulated_s(TRACE_FULL, "grouper", queue_weights=TRACE_WEIGHTS)
    rows += [row("sim_trace40_grouper_weighted_s", wall, "s"),
             row("sim_trace40_grouper_weighted_over_strict", wall / trace_s["grouper"], "x"),
             row("sim_trace40_grouper_weighted_avg_sct_s", summary["avg_sct_s"], "s")]
    wall, summary = _simulated_s(SIM_60, "grouper")
    rows += [row("sim_60hosts_12cojobs_grouper_s", wall, "s", SIM_TARGET_S, lower_is_better=True),
             row("sim_60hosts_12cojobs_grouper_flows", summary["flows"], "flows")]
    # The fluid network alone, a synthetic churn at the trace's size (2,400 flows, 20 ports):
    # microseconds per delivered transfer, one queue, three strict-priority queues and
    # three weighted ones.
    churn_us = {}
    for queues in (1, 3):
        churn_us[queues] = 1e6 * bench_network(transfers=CHURN_TRANSFERS, queues=queues)
        rows.append(row(f"sim_network_churn_{queues}q_us", churn_us[queues], "us"))
    weighted = 1e6 * bench_network(transfers=CHURN_TRANSFERS, queues=3, weights=CHURN_WEIGHTS)
    rows += [row("sim_network_churn_3q_weighted_us", weighted, "us"),
             row("sim_network_churn_3q_weighted_over_strict", weighted / churn_us[3], "x")]
    return rows


TESTBED = "experiments/specs/grouper-testbed.yaml"
SMOKE = "experiments/specs/grouper-smoke.yaml"
# The sweeps of the testbed's emulated cells, seeds 1-3 (measurements/grouper-2026-11-23b/README.md).
TESTBED_EMULATED = ("measurements/grouper-2026-11-23b/tb-fix",
                    "measurements/grouper-2026-11-23b/tb-fix-seed2",
                    "measurements/grouper-2026-11-23b/tb-fix-seed3")
# Those cells' scheduler as named today: their "sincronia" ranked cojob stages.
TESTBED_EMULATED_AS = {"fs": "fs", "baraat": "baraat", "sincronia": "sincronia-stage", "grouper": "grouper"}


def simulated_vs_emulated(workdir, emulate_smoke: bool = True) -> list[dict]:
    """Simulated over emulated average stage duration per scheduler: the testbed
    against its recorded emulated cells (seeds 1-3, mean of the per-seed ratios), the
    smoke spec (seed 1) emulated here beside its simulation. Stage durations, not
    SCTs: the recorded cells' ``avg_sct_s`` predates SCT counting from the cojob's
    arrival (it is a stage's duration), and an emulated SCT would also count the
    tasks' start-up, which the simulator does not model."""
    from pathlib import Path

    from experiments import store
    from experiments.results import load_summary
    from experiments.stats import mean

    rows = []
    emulated: dict[tuple[str, int], float] = {}
    for sweep in TESTBED_EMULATED:
        for cell in store.read_csv(Path(sweep) / store.RESULTS):
            if cell["completed"] == "true":
                emulated[(cell["scheduler"], int(cell["seed"]))] = float(cell["avg_sct_s"])
    for recorded, scheduler in TESTBED_EMULATED_AS.items():
        ratios = [_simulated_s(TESTBED, scheduler, seed)[1]["avg_stage_duration_s"] / emulated[(recorded, seed)]
                  for seed in (1, 2, 3) if (recorded, seed) in emulated]
        rows.append(row(f"sim_over_emulated_testbed_{scheduler}", mean(ratios), "ratio"))
    if emulate_smoke:
        from experiments.runner import run_any_spec
        from experiments.validation import read_yaml
        for scheduler in ("fs", "grouper"):
            raw = read_yaml(SMOKE)
            raw.update(name=f"bench-smoke-{scheduler}", scheduler={**raw["scheduler"], "name": scheduler})
            run = run_any_spec(raw, out=str(Path(workdir) / raw["name"]))
            measured = load_summary(run)["avg_stage_duration_s"]
            rows.append(row(f"sim_over_emulated_smoke_{scheduler}",
                            _simulated_s(SMOKE, scheduler, raw["seed"])[1]["avg_stage_duration_s"] / measured,
                            "ratio"))
    return rows
