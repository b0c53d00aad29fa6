"""The job's model against recorded emulated runs (issue 18: within 15% per placement,
the same ranking). The runs are kept in the checkout, each predicted from the profile
its placement search read (one profile per job, as the search sees it):

- measurements/gnn-model-2026-11-24: the headline job (DistDGL's, the spread, IFS's and
  ETP's placements) and its profiling run;
- measurements/gnn-dgtp-2026-11-24: Table III's cells (DistDGL's and ETP's placements on
  the tight star, default scheduling and OES, 3 seeds);
- measurements/gnn-dgtp-allreduce-2026-11-24: the same with ring all-reduce;
- measurements/gnn-dgtp-mixed-2026-11-24: Fig. 8's mixed testbed (ring all-reduce,
  4 workers);
- measurements/gnn-dgtp-reddit-2026-11-24 and gnn-dgtp-reddit-allreduce-2026-11-24:
  Table III's Reddit-like rows (PS, ring all-reduce);
- measurements/gnn-profiles-2026-11-24: those jobs' profiling runs.

Default scheduling's error is outside the model's reach: TCP loses 1-2% of its packets
on the 20 Mbit/s ports and recovers by timeouts, which the fluid model (max-min, no
losses) does not have (docs/gnn-oes.md, 'The job's model'); that gap is kept as a
strict xfail. The ranking of placements under default scheduling holds since the
model's send backlog is the measured one (measurements/model-sendbuffer-2026-11-27:
with 320 KB the model had DistDGL's and ETP's placements level on the Reddit PS row,
where TCP ran ETP's 10% faster)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments import store
from experiments.gnn import simulated

REPO = Path(__file__).resolve().parents[1]
MEASUREMENTS = REPO / "measurements"
MODEL = MEASUREMENTS / "gnn-model-2026-11-24"
PROFILES = MEASUREMENTS / "gnn-profiles-2026-11-24"
# run directories -> the profile that predicts them
SOURCES = {
    (*MODEL.glob("gnn-run-*"), MODEL / "gnn-profile",
     *(MEASUREMENTS / "gnn-dgtp-2026-11-24/cells").glob("*")): MODEL / "gnn-profile/profile.json",
    (*(MEASUREMENTS / "gnn-dgtp-allreduce-2026-11-24/cells").glob("*"), PROFILES / "tight-allreduce"):
        PROFILES / "tight-allreduce/profile.json",
    (*(MEASUREMENTS / "gnn-dgtp-mixed-2026-11-24/cells").glob("*"), PROFILES / "mixed-allreduce"):
        PROFILES / "mixed-allreduce/profile.json",
    (*(MEASUREMENTS / "gnn-dgtp-reddit-2026-11-24/cells").glob("*"), PROFILES / "reddit-ps"):
        PROFILES / "reddit-ps/profile.json",
    (*(MEASUREMENTS / "gnn-dgtp-reddit-allreduce-2026-11-24/cells").glob("*"), PROFILES / "reddit-allreduce"):
        PROFILES / "reddit-allreduce/profile.json",
}
WITHIN = 0.15  # the bound on |predicted / measured - 1|


def runs() -> dict[Path, Path]:
    """Every kept run -> its profile."""
    return {run: profile for group, profile in SOURCES.items() for run in sorted(group)
            if store.kept(run / "events.jsonl")}


def _scheduler(run: Path) -> str:
    return yaml.safe_load((run / "spec.yaml").read_text())["scheduler"]["name"]


@pytest.fixture(scope="module")
def compared() -> dict[Path, dict]:
    return {run: simulated.compare(run, profile) for run, profile in runs().items()}


def test_the_recorded_runs_are_there():
    assert len(runs()) >= 40


def test_the_model_predicts_each_oes_run_within_15_percent(compared):
    checked = {run: row for run, row in compared.items() if _scheduler(run) == "oes"}
    assert len(checked) >= 20
    assert {row["placement"] for row in checked.values()} >= {"distdgl", "spread", "etp"}
    for run, row in checked.items():
        assert abs(row["error"]) <= WITHIN, (run, row)


@pytest.mark.xfail(strict=True, reason="known gap: under default scheduling TCP loses packets at the slow "
                                       "ports and recovers by timeouts, where the loss-free fluid model predicts "
                                       "its iterations up to 31% short (docs/gnn-oes.md)")
def test_the_model_predicts_default_scheduling_within_15_percent(compared):
    default = {run: row for run, row in compared.items() if _scheduler(run) == "default"}
    assert default
    for run, row in default.items():
        assert abs(row["error"]) <= WITHIN, (run, row)


def _ranked_pairs(compared: dict[Path, dict], scheduler: str) -> int:
    """Within ``scheduler``, a seed and a sweep, the placement the emulation ran clearly
    faster must be the one the model predicts faster; how many pairs were checked."""
    groups: dict[tuple, list[dict]] = {}
    for run, row in compared.items():
        spec = yaml.safe_load((run / "spec.yaml").read_text())
        if spec["scheduler"]["name"] == scheduler:
            groups.setdefault((run.parent, spec["seed"], spec["workload"]["iterations"]), []).append(row)
    pairs = 0
    for rows in groups.values():
        for a in rows:
            for b in rows:
                if a["measured_iteration_s"] < b["measured_iteration_s"] * 0.97:  # a clear difference
                    pairs += 1
                    assert a["predicted_iteration_s"] < b["predicted_iteration_s"], (a, b)
    return pairs


def test_the_model_ranks_the_placements_under_oes_as_the_emulation_does(compared):
    assert _ranked_pairs(compared, "oes") >= 4


def test_the_model_ranks_the_placements_under_default_scheduling_as_the_emulation_does(compared):
    assert _ranked_pairs(compared, "default") >= 4
