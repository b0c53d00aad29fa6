"""experiments.results.load_sweep: one row per cell, summaries flattened, for notebooks;
usable_cells: the cells a figure draws."""
import csv
import gzip
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from experiments import store
from experiments import sweep as sweep_mod
from experiments.errors import SpecError
from experiments.results import flatten, load_sweep, usable_cells
from tests.test_sweep import FakeRunner, write


def test_flatten_joins_nested_fields_with_dots_and_keeps_lists():
    assert flatten({"a": 1, "b": {"c": {"d": True}, "e": [1, {"f": 2}]}, "g": {}}) == {
        "a": 1, "b.c.d": True, "b.e": [1, {"f": 2}]}


def test_one_row_per_cell_with_its_overrides_part_and_flattened_summary(tmp_path):
    path = write(tmp_path, {"seeds": [1, 2], "parts": [
        {"name": "a", "schedulers": ["fs", "grouper"]},
        {"name": "b", "schedulers": ["fs"], "grid": {"topology.host_mbps": [50]}}]})
    out = tmp_path / "out"
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner(fail={"grouper"}), only=["*seed-1*"])
    rows = load_sweep(out)
    assert [(r["cell"], r["part"]) for r in rows] == [
        ("sched-fs_seed-1", "a"), ("sched-grouper_seed-1", "a"), ("sched-fs_seed-2", "a"),
        ("sched-grouper_seed-2", "a"), ("sched-fs_seed-1_topology.host_mbps-50", "b"),
        ("sched-fs_seed-2_topology.host_mbps-50", "b")]
    first = rows[0]
    assert list(first)[:5] == ["cell", "part", "scheduler.name", "seed", "topology.host_mbps"]
    assert (first["scheduler.name"], first["seed"], first["topology.host_mbps"]) == ("fs", 1, 100)  # base's 100
    assert rows[4]["topology.host_mbps"] == 50 and rows[4]["host_mbps_seen"] == 50
    assert first["completed"] is True and first["fidelity.trustworthy"] is True
    assert first["per_model_avg_sct_s.vgg19"] == 1.0 and first["avg_sct_s"] == 11.0
    assert rows[1]["completed"] is False and rows[1]["error"] == "RuntimeError: boom"  # its own summary's
    assert rows[2] == {"cell": "sched-fs_seed-2", "part": "a", "scheduler.name": "fs", "seed": 2,
                       "topology.host_mbps": 100, "scheduler": "fs", "completed": False}  # not run yet
    assert [r["scheduler"] for r in rows] == ["fs", "grouper", "fs", "grouper", "fs", "fs"]  # results.csv's name


def test_a_simulated_sweep_loads_as_a_frame(tmp_path):
    pytest.importorskip("pandas")
    smoke = yaml.safe_load(Path("experiments/specs/grouper-smoke.yaml").read_text())
    path = write(tmp_path, {"backend": "simulated", "schedulers": ["fs", "grouper"], "seeds": [1]}, smoke)
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"))
    frame = load_sweep(tmp_path / "out", as_frame=True)
    assert list(frame["cell"]) == ["sched-fs_seed-1", "sched-grouper_seed-1"]
    assert frame["completed"].all() and (frame["backend"] == "simulated").all()
    assert {"per_model_avg_sct_s.vgg19", "per_model_avg_sct_s.deepspeech2"} <= set(frame.columns)
    by = frame.set_index("scheduler.name")
    assert by.loc["grouper", "avg_sct_s"] < by.loc["fs", "avg_sct_s"]


def test_a_grid_null_loads_as_the_value_the_cell_ran_with(tmp_path):
    smoke = yaml.safe_load(Path("experiments/specs/grouper-smoke.yaml").read_text())  # scheduler.period_s 1.0
    path = write(tmp_path, {"backend": "simulated", "schedulers": ["grouper"], "seeds": [1],
                            "grid": {"scheduler.period_s": [None, 0.5]}}, smoke)
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"))
    assert [row["scheduler.period_s"] for row in load_sweep(tmp_path / "out")] == [2.0, 0.5]  # the kind's 2 s


def test_a_list_an_override_gives_is_a_tuple_in_a_frame_to_group_by():
    pytest.importorskip("pandas")
    frame = load_sweep(Path("measurements/grouper-queues-2026-11-29/sweep"), as_frame=True)
    means = frame.groupby(["emulation.queue_weights", "scheduler"], dropna=False)["avg_sct_s"].mean()
    assert round(means[((64, 32, 16, 8, 4, 2, 1), "grouper")], 2) == 8.27
    assert frame["emulation.queue_weights"].isna().sum() == 14  # strict priority: no weights, as the cells ran


def test_without_pandas_as_frame_is_one_line(tmp_path, monkeypatch):
    sweep_mod.run_any_sweep(write(tmp_path, {"seeds": [1]}), out=str(tmp_path / "out"), run_cell=FakeRunner())
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"^as_frame: needs pandas, which is not importable here .*; without "
                                          r"as_frame the rows are a list of dicts$"):
        load_sweep(tmp_path / "out", as_frame=True)
    assert len(load_sweep(tmp_path / "out")) == 1


def test_a_directory_without_a_sweep_record_is_one_line(tmp_path):
    with pytest.raises(SpecError, match=r"^DIR: no such sweep record: .*sweep.yaml$"):
        load_sweep(tmp_path)
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(SpecError, match=rf"^DIR: {tmp_path} is a run, not a sweep: load_summary reads it$"):
        load_sweep(tmp_path)
    (tmp_path / "sweep.yaml").write_text("name: x\n")
    with pytest.raises(SpecError, match=r"^DIR: .*sweep.yaml: not a sweep record \(no cells\)$"):
        load_sweep(tmp_path)


def test_a_row_not_run_has_its_scheduler_from_the_base_spec(tmp_path):
    path = write(tmp_path, {"seeds": [1, 2]})  # no schedulers: every cell runs the base spec's
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=FakeRunner(), only=["seed-1"])
    rows = load_sweep(tmp_path / "out")
    assert [(r["cell"], r["completed"], r["scheduler"]) for r in rows] == [("seed-1", True, "fs"),
                                                                         ("seed-2", False, "fs")]


def test_load_summary_is_one_runs_summary_or_one_line(tmp_path):
    from experiments.results import load_summary
    run = Path(__file__).resolve().parents[1] / "measurements/programs-2026-11-24/same-queue"
    assert load_summary(str(run))["trustworthy"] is True
    with pytest.raises(SpecError, match=r": not a run directory: no summary.json$"):
        load_summary(tmp_path)
    (tmp_path / "summary.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match=r"summary.json: not a run's summary \(a JSON mapping\)$"):
        load_summary(tmp_path)
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(SpecError, match=r"summary.json: not JSON"):
        load_summary(tmp_path)


def test_a_run_into_a_directory_holding_a_run_is_one_line(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(SpecError, match=r"^out: .*: already holds a run \(summary.json\); choose a new directory$"):
        store.new_run_dir("run", "x", tmp_path)


def test_runs_started_in_one_second_get_a_directory_each(tmp_path, monkeypatch):
    """The name is claimed by making it (another process may have made it between a
    check and a make)."""
    monkeypatch.setenv("TRAINBED_RESULTS", str(tmp_path))
    monkeypatch.setattr(store.time, "strftime", lambda fmt, t=None: "20261129-010000")
    (tmp_path / "20261129-010000-run-x").mkdir()  # another process's, made a moment ago
    made = [store.new_run_dir("run", "x") for _ in range(2)]
    assert [p.name for p in made] == ["20261129-010000-run-x-2", "20261129-010000-run-x-3"]


def test_a_mixed_sweeps_rows_say_each_cells_backend_run_or_not(tmp_path):
    path = write(tmp_path, {"seeds": [1], "schedulers": ["fs"], "parts": [
        {"name": "testbed"}, {"name": "model", "backend": "simulated"}]})
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=FakeRunner(), only=["*backend-simulated"])
    rows = load_sweep(tmp_path / "out")
    assert [(row["cell"], row["backend"], row["completed"]) for row in rows] == [
        ("sched-fs_seed-1", "emulated", False), ("sched-fs_seed-1_backend-simulated", "simulated", True)]


def test_a_records_cells_run_on_their_own_backend_else_the_sweeps_and_emulated_before_backends():
    from experiments.results import cell_backends, record_backends
    mixed = {"backend": "emulated", "cells": [{"id": "a"}, {"id": "a_backend-simulated", "backend": "simulated"}]}
    assert cell_backends(mixed) == {"a": "emulated", "a_backend-simulated": "simulated"}
    assert record_backends(mixed) == {"emulated", "simulated"}
    assert cell_backends({"cells": [{"id": 3}]}) == {"3": "emulated"}  # a record from before backends
    assert record_backends({"backend": "simulated", "cells": []}) == {"simulated"}
    assert cell_backends("garbled") == {} and record_backends(None) == {"emulated"}
    # cells asked for that the record does not list (a results.csv's): on the sweep's backend
    assert cell_backends(mixed, ["a_backend-simulated", "b"]) == {"a_backend-simulated": "simulated", "b": "emulated"}


GOOD = {"completed": True, "trustworthy": True}


def figure_sweep(tmp_path, cells, record=None) -> Path:
    """A sweep directory of ``cells``: (id, seed, summary or None for none); every row
    says completed and trustworthy, so a verdict can only come from the summary."""
    out = tmp_path / "sweep"
    out.mkdir()
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["cell", "scheduler", "seed", "completed", "trustworthy"])
        for cell, seed, summary in cells:
            writer.writerow([cell, "fs", seed, "true", "true"])
            if summary is not None:
                (out / "cells" / cell).mkdir(parents=True)
                (out / "cells" / cell / "summary.json").write_text(json.dumps(summary))
    return out


def test_usable_cells_are_those_whose_summary_says_completed_and_trustworthy(tmp_path):
    out = figure_sweep(tmp_path, [
        ("kept", "3", None), ("unseeded", "", GOOD), ("failed", "1", {"completed": False, "error": "RunError: boom"}),
        ("doubtful", "1", {"completed": True, "trustworthy": False,
                           "fidelity": {"untrustworthy_reasons": ["CPU idle 0.01 < 0.05", "loss 2%"]}}),
        ("unjudged", "1", {"completed": True}), ("missing", "1", None), ("model", "1", GOOD), ("short", "2", GOOD)])
    kept = out / "cells" / "kept"
    kept.mkdir(parents=True)
    (kept / "summary.json.gz").write_bytes(gzip.compress(json.dumps({**GOOD, "x": 7}).encode()))  # measurements/'s
    record = {"backend": "emulated", "cells": [{"id": "model", "backend": "simulated"}]}
    cells, left_out = usable_cells(out, record, "emulated",
                                   needs=lambda c: "too short" if c.row["cell"] == "short" else None)
    assert [(c.row["cell"], c.seed, c.run_dir) for c in cells] == [("kept", 3, kept),
                                                                    ("unseeded", None, out / "cells" / "unseeded")]
    assert cells[0].summary["x"] == 7
    assert left_out == ["failed: not completed (RunError: boom)",
                        "doubtful: untrustworthy (CPU idle 0.01 < 0.05; loss 2%)", "unjudged: untrustworthy",
                        "missing: no summary.json",
                        "model: run on the simulated backend (these figures draw emulated cells)", "short: too short"]
    assert len(usable_cells(out)[0]) == 4  # no backend asked: both backends' cells


@pytest.mark.parametrize("seed", ["-1", "1.5", "x", "\u00b2"])
def test_a_seed_no_spec_runs_is_refused_naming_the_cell(tmp_path, seed):
    out = figure_sweep(tmp_path, [("c", seed, GOOD)])
    with pytest.raises(SpecError, match=f"^{re.escape(str(out / 'results.csv'))}: c: seed must be an integer >= 0, "
                                        f"got {re.escape(repr(seed))}$"):
        usable_cells(out)


def test_a_sweep_no_figure_can_draw_is_refused_in_one_line(tmp_path):
    with pytest.raises(SpecError, match=r"^dir: .*results.csv: no such file"):
        usable_cells(tmp_path)
    out = figure_sweep(tmp_path, [("c", "1", None), ("d", "1", {"completed": False})])
    with pytest.raises(SpecError, match=rf"^dir: {re.escape(str(out))}: has no completed, trustworthy cell to draw "
                                        r"\(2 left out: c: no summary.json\)$"):
        usable_cells(out)
    with pytest.raises(SpecError, match=r"results.csv: has no column 'placement'$"):
        usable_cells(out, columns=("placement",))
    (out / "cells" / "c").mkdir()
    (out / "cells" / "c" / "summary.json").write_text("{garbled")  # refused, not left out: a figure reads every cell
    with pytest.raises(SpecError, match=r"cells/c/summary.json: not JSON"):
        usable_cells(out)


def test_a_run_environment_is_read_strictly_for_one_run_and_forgivingly_for_a_table(tmp_path):
    assert store.read_environment(tmp_path) == {}  # a cell that failed before writing one
    (tmp_path / "environment.json.gz").write_bytes(gzip.compress(b'{"machine": "box"}'))  # kept in measurements/
    assert store.read_environment(tmp_path) == {"machine": "box"}
    for garbled, problem in (("{", "not JSON"), ("[1]", "not a mapping (list)")):
        (tmp_path / "environment.json.gz").unlink(missing_ok=True)
        (tmp_path / "environment.json").write_text(garbled)
        with pytest.raises(SpecError, match=re.escape(problem)) as err:
            store.read_environment(tmp_path)
        assert str(tmp_path / "environment.json") in str(err.value)
        assert store.read_environment(tmp_path, garbled_ok=True) == {}
