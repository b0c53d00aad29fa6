"""``trainbed figures dgtp``: Table III and Figs. 6-7 from the kept Table III sweep
(measurements/gnn-dgtp-2026-11-24), recomputed here from its cells' data; and Fig. 9
(search time), measured afresh at a few steps."""
from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

from experiments import store
from experiments.cli import main
from experiments.errors import SpecError
from experiments.gnn import figures

SWEEP = Path(__file__).resolve().parents[1] / "measurements/gnn-dgtp-2026-11-24"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dgtp") / "sweep"
    shutil.copytree(SWEEP, out, ignore=shutil.ignore_patterns("table-3*", "figure-*"))
    figures.dgtp_figures(out)
    return out


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_table_3_is_the_cells_means_and_the_gain_pairs_seeds(drawn):
    cells, left_out = figures.load_cells(drawn)
    rows = {(r["placement"], r["scheduler"]): r for r in _rows(drawn / "table-3.csv")}
    assert set(rows) == {("distdgl", "default"), ("distdgl", "oes"), ("etp", "default"), ("etp", "oes")}
    for key, row in rows.items():
        mine = [c.summary["time_to_accuracy_s"] for c in cells if c.key == key]
        assert int(row["seeds"]) == len(mine) and float(row["time_to_accuracy_s"]) == pytest.approx(
            statistics.fmean(mine))
    gains = {r["comparison"]: r for r in _rows(drawn / "table-3-gains.csv")}
    dgtp = gains["DGTP (ETP + OES) vs DistDGL + FIFO"]
    better = {c.seed: c.summary["time_to_accuracy_s"] for c in cells if c.key == ("etp", "oes")}
    base = {c.seed: c.summary["time_to_accuracy_s"] for c in cells if c.key == ("distdgl", "default")}
    seeds = sorted(set(better) & set(base))
    assert int(dgtp["seeds"]) == len(seeds) >= 3
    assert float(dgtp["time_to_accuracy_reduction"]) == pytest.approx(
        1 - statistics.fmean(better[s] for s in seeds) / statistics.fmean(base[s] for s in seeds))
    assert float(dgtp["paper"]) == 0.28  # PS, ogbn-products
    assert "| DistDGL + FIFO |" in (drawn / "table-3.md").read_text()
    # the same counted from worker 0's first iteration end: these summaries predate the
    # split, so it comes from each cell's events (the last hello to that end is start-up)
    for cell in cells:
        events = store.read_jsonl(cell.run_dir / "events.jsonl")
        first_end = min(e["t"] for e in events if e["kind"] == "iteration_end" and e["task"] == "worker0")
        up = max(e["t"] for e in events if e["kind"] == "hello")
        assert cell.summary["first_iteration_s"] == pytest.approx(first_end - up, abs=1e-3)
        assert cell.summary["time_to_accuracy_after_first_iteration_s"] == pytest.approx(
            cell.summary["time_to_accuracy_s"] - cell.summary["first_iteration_s"], abs=2e-3)
    after = {c.seed: c.summary["time_to_accuracy_after_first_iteration_s"] for c in cells if c.key == ("etp", "oes")}
    after_base = {c.seed: c.summary["time_to_accuracy_after_first_iteration_s"] for c in cells
                  if c.key == ("distdgl", "default")}
    assert float(dgtp["after_first_iteration_reduction"]) == pytest.approx(
        1 - statistics.fmean(after[s] for s in seeds) / statistics.fmean(after_base[s] for s in seeds))
    assert float(rows[("etp", "oes")]["after_first_iteration_s"]) == pytest.approx(
        statistics.fmean(after.values()))


def test_a_summary_that_splits_the_time_to_accuracy_is_read_not_recomputed(tmp_path):
    out = tmp_path / "sweep"
    shutil.copytree(SWEEP, out, ignore=shutil.ignore_patterns("table-3*", "figure-*"))
    path = out / "cells" / "sched-oes_seed-1" / "summary.json"
    summary = store.read_json(path)
    path.write_text(json.dumps({**summary, "first_iteration_s": 1.0,
                                "time_to_accuracy_after_first_iteration_s": summary["time_to_accuracy_s"] - 1.0}))
    cell = next(c for c in figures.load_cells(out)[0] if c.run_dir.name == "sched-oes_seed-1")
    assert cell.summary["first_iteration_s"] == 1.0


def test_figure_6_is_worker_0s_evaluations_and_figure_7_every_hosts_bytes(drawn):
    curve = _rows(drawn / "figure-6.csv")
    assert {(r["placement"], r["scheduler"]) for r in curve} == {
        ("distdgl", "default"), ("distdgl", "oes"), ("etp", "default"), ("etp", "oes")}
    assert all(0 <= float(r["val_accuracy"]) <= 1 for r in curve)
    load = _rows(drawn / "figure-7.csv")
    assert {r["host"] for r in load} == {"tbh1", "tbh2", "tbh3", "tbh4"}
    # Fig. 7 spreads every reported byte over its transfer: the bins add up to twice the
    # bytes (counted at both ends) of the cell it draws.
    cell = next(c for c in figures.load_cells(drawn)[0] if c.key == ("distdgl", "default")
                and c.seed == int(load[0]["seed"]))
    with_bytes = sum(float(r["mbps"]) * 1e6 / 8 * figures.BIN_S for r in load
                     if (r["placement"], r["scheduler"]) == cell.key)
    reported = sum(int(r["bytes"]) for r in store.read_csv(cell.run_dir / "flows.csv") if r["duration_s"])
    assert with_bytes == pytest.approx(2 * reported, rel=1e-3)
    kept = _rows(SWEEP / "figure-7.csv")  # as drawn when the sweep was recorded
    assert [(r["host"], r["t_s"]) for r in load] == [(r["host"], r["t_s"]) for r in kept]
    assert [float(r["mbps"]) for r in load] == pytest.approx([float(r["mbps"]) for r in kept], abs=2e-3)
    for name in ("figure-6.png", "figure-7.png"):
        assert (drawn / name).stat().st_size > 10_000


def test_cli_and_a_directory_without_results(tmp_path, drawn, capsys):
    assert main(["figures", "dgtp", str(drawn)]) == 0
    assert "table-3.md" in capsys.readouterr().out
    with pytest.raises(SpecError, match=r"^dir: .*results.csv: no such file"):
        figures.dgtp_figures(tmp_path)


def test_a_sweep_of_distdgl_alone_gives_oes_alone_and_one_with_no_usable_cell_says_so(tmp_path):
    """A sweep without the searched placement's cells still tables what it ran (OES alone);
    the comparisons it lacks are empty, not an error. None usable: a one-line error."""
    out = tmp_path / "sweep"
    shutil.copytree(SWEEP, out, ignore=shutil.ignore_patterns("table-3*", "figure-*"))
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    kept = [r for r in rows if r["part"] == "distdgl"]
    assert 0 < len(kept) < len(rows)
    store.write_csv(out / "results.csv", kept, list(rows[0]))
    figures.table3_across([out], tmp_path / "all")
    row, = _rows(tmp_path / "all" / "table-3-all.csv")
    assert row["dgtp_reduction"] == row["placement_reduction"] == "" and int(row["seeds"]) == 0
    full = {r["comparison"]: r for r in _rows(SWEEP / "table-3-gains.csv")}
    assert float(row["oes_reduction"]) == pytest.approx(
        float(full["OES alone: DistDGL + OES vs DistDGL + FIFO"]["time_to_accuracy_reduction"]))
    for r in kept:  # every cell stopped short
        path = out / "cells" / r["cell"] / "summary.json"
        path.write_text(json.dumps(dict(json.loads(path.read_text()), completed=False)))
    with pytest.raises(SpecError, match=r"^dir: .*: has no completed, trustworthy cell to draw \(6 left out: sched-"):
        figures.dgtp_figures(out)


def test_a_sweep_with_two_cells_for_one_placement_policy_and_seed_is_refused(tmp_path):
    """A grid over something else (here a copied cell, as a sweep over the graph would
    give) would average unlike cells in Table III and overwrite one in a gain."""
    out = tmp_path / "sweep"
    shutil.copytree(SWEEP, out, ignore=shutil.ignore_patterns("table-3*", "figure-*"))
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    twin = dict(rows[0], cell=rows[0]["cell"] + "_graph-reddit")
    shutil.copytree(out / "cells" / rows[0]["cell"], out / "cells" / twin["cell"])
    store.write_csv(out / "results.csv", rows + [twin], list(rows[0]))
    with pytest.raises(SpecError, match=rf"^dir: .*: cells {rows[0]['cell']} and {twin['cell']} are both "
                                        r"etp \+ default, seed 1: the sweep varies something else"):
        figures.dgtp_figures(out)


def test_a_mixed_testbed_sweep_is_figure_8_with_the_papers_48_percent(tmp_path):
    out = tmp_path / "sweep"
    shutil.copytree(SWEEP, out, ignore=shutil.ignore_patterns("table-3*", "figure-*"))
    for spec_path in out.glob("cells/*/spec.yaml"):
        spec = yaml.safe_load(spec_path.read_text())
        spec["workload"]["compute_factor"] = {"tbh3": 2.0}
        spec_path.write_text(yaml.safe_dump(spec))
    names = {p.name for p in figures.dgtp_figures(out)}
    assert {"figure-8-table.csv", "figure-8-table-gains.csv", "figure-8-table.md", "figure-8.csv",
            "figure-8.png", "figure-7.csv"} <= names and not names & {"table-3.csv", "figure-6.csv"}
    gains = {r["comparison"]: r for r in _rows(out / "figure-8-table-gains.csv")}
    assert float(gains["DGTP (ETP + OES) vs DistDGL + FIFO"]["paper"]) == 0.48
    assert (out / "figure-8-table.md").read_text().startswith("# Fig. 8 (mixed testbed)")


def test_table_3_across_sweeps_is_one_row_per_sweep_with_its_gains_and_the_papers(tmp_path, drawn, capsys):
    ring = tmp_path / "ring"
    shutil.copytree(SWEEP.parent / "gnn-dgtp-allreduce-2026-11-24", ring,
                    ignore=shutil.ignore_patterns("table-3*", "figure-*"))
    out = tmp_path / "all"
    assert main(["figures", "dgtp", str(drawn), str(ring), "--out", str(out)]) == 0
    assert "table-3-all.md" in capsys.readouterr().out
    rows = _rows(out / "table-3-all.csv")
    assert [(r["sync"], r["graph"], float(r["paper"])) for r in rows] == [
        ("ps", "ogbn-products", 0.28), ("allreduce", "ogbn-products", 0.26)]
    assert not list(ring.glob("table-3*")) and not (ring / "report.html").exists()  # the sweeps left as they were
    for row, sweep in zip(rows, (drawn, ring)):  # each row is its sweep's own gains table, drawn into OUT/<name>
        assert (out / sweep.name / "figure-6.png").exists()
        gains = {r["comparison"]: r for r in _rows(out / sweep.name / "table-3-gains.csv")}
        assert float(row["dgtp_reduction"]) == pytest.approx(
            float(gains["DGTP (ETP + OES) vs DistDGL + FIFO"]["time_to_accuracy_reduction"]))
        assert float(row["placement_reduction"]) == pytest.approx(
            float(gains["placement alone: ETP vs DistDGL, both FIFO"]["time_to_accuracy_reduction"]))
        assert float(row["oes_reduction"]) == pytest.approx(
            float(gains["OES alone: DistDGL + OES vs DistDGL + FIFO"]["time_to_accuracy_reduction"]))
    assert "| ps | ogbn-products | heterogeneous NICs |" in (out / "table-3-all.md").read_text()
    assert [r["boxes"] for r in rows] == ["12 unrecorded", "12 unrecorded"]  # 3 seeds x 4 compared, before boot ids
    assert main(["figures", "dgtp", str(drawn), str(ring)]) == 2  # several sweeps need --out
    assert "--out" in capsys.readouterr().err
    twin = tmp_path / "twin" / ring.name
    shutil.copytree(ring, twin)
    assert main(["figures", "dgtp", str(ring), str(twin), "--out", str(tmp_path / "twins")]) == 2
    assert "two sweep directories named ring" in capsys.readouterr().err
    one = tmp_path / "one"  # one sweep: its figures and Table III across it, straight into OUT
    assert main(["figures", "dgtp", str(ring), "--out", str(one)]) == 0
    assert {"table-3.csv", "table-3-gains.csv", "figure-6.png", "table-3-all.csv"} <= {p.name for p in one.iterdir()}
    assert not list(ring.glob("table-3*")) and not list(ring.glob("figure-*"))
    assert main(["figures", "grouper", str(drawn), str(ring)]) == 2


def test_a_rows_boxes_are_those_of_its_compared_cells(drawn, tmp_path):
    """The boxes of Table III's DGTP and DistDGL + FIFO cells, from their environment.json."""
    cells, _ = figures.load_cells(drawn)
    copies = []
    for n, cell in enumerate(cells):
        run_dir = tmp_path / cell.run_dir.name
        run_dir.mkdir()
        boot = "aaaaaaaa-1" if n % 2 else "bbbbbbbb-2"
        if n != 0:
            (run_dir / "environment.json").write_text(f'{{"machine": "vm", "boot_id": "{boot}"}}')
        copies.append(figures.Cell(cell.placement, cell.scheduler, cell.seed, cell.summary, run_dir))
    assert figures.boxes(copies) == "2 + 1 unrecorded"
    assert figures.boxes(copies[1::2]) == "1"


def test_figure_9_times_both_searches_and_writes_data_then_table_and_plot(tmp_path):
    """``python -m experiments.gnn.searchbench --figure9 DIR`` at 3 steps on one testbed:
    a row per search (time, candidates, the model's makespan of the placement it chose),
    the CSV first, then the table and the plot."""
    from experiments.gnn import searchbench
    table = searchbench.figure9(tmp_path, steps=3, testbeds={"tight": searchbench.TIGHT})
    rows = _rows(tmp_path / "figure-9.csv")
    assert [(r["testbed"], r["method"], r["steps"]) for r in rows] == [
        ("tight", "ETP (critical path)", "3"), ("tight", "simulated makespan as cost", "3")]
    assert all(float(r["search_s"]) > 0 and float(r["makespan_s"]) > 0 and int(r["candidates"]) >= 1 for r in rows)
    assert table == tmp_path / "figure-9.md" and "| tight | ETP (critical path) |" in table.read_text()
    assert (tmp_path / "figure-9.png").stat().st_size > 0
