import csv
import json

import pytest
import yaml

from experiments.cojob import figures
from experiments.cojob.workload import MODELS, Arrival, CojobPlan, JobPlan, LearningCurve
from experiments.errors import SpecError

# One cojob of one job and one stage; its learning curve reaches 90% after 3 iterations.
PLAN = CojobPlan(0, MODELS["deepspeech2"], (10,), (JobPlan(0, 0, 1, LearningCurve(0.8, 1.0)),), Arrival(at_s=0.0))
WORKLOAD = {"source": "test", "placements": {}, "cojobs": [PLAN.to_dict()]}


def stage(sct):
    return [{"cojob": 0, "model": "deepspeech2", "stage": 0, "sct_s": sct}]


def summary(sct, cojct, jct, t90):
    return {"completed": True, "trustworthy": True, "avg_sct_s": sct, "avg_cojct_s": cojct, "avg_jct_s": jct,
            "avg_t90_s": t90, "per_model_avg_sct_s": {"deepspeech2": sct}, "sct_s": stage(sct)}


def events(sct):
    return [{"kind": "cojob_arrival", "t": 0, "cojob": 0, "model": "deepspeech2"},
            {"kind": "stage_start", "t": 0, "cojob": 0, "stage": 0, "jobs": ["c0j0"]},
            {"kind": "iteration_end", "t": 6, "job": "c0j0", "iteration": 9, "stage": 0},
            {"kind": "stage_end", "t": sct, "cojob": 0, "stage": 0},
            {"kind": "job_finished", "t": sct, "job": "c0j0", "cojob": 0},
            {"kind": "cojob_end", "t": sct, "cojob": 0}]


def write_run(run_dir, run_events):
    run_dir.mkdir(parents=True)
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in run_events))
    (run_dir / "workload.json").write_text(json.dumps(WORKLOAD))


# (scheduler, seed, completed, trustworthy, summary); grouper seed 2 has its events,
# which win over its summary's (wrong) numbers.
CELLS = [("fs", 1, True, True, summary(10, 40, 20, 30)), ("fs", 2, True, True, summary(12, 44, 22, 33)),
         ("grouper", 1, True, True, summary(7, 20, 15, 20)), ("grouper", 2, True, True, summary(999, 999, 999, 999)),
         ("baraat", 1, True, True, summary(9, 30, 18, 25)), ("baraat", 2, True, False, summary(1, 1, 1, 1)),
         ("sincronia", 1, False, None, {"completed": False})]


@pytest.fixture
def sweep_dir(tmp_path):
    out = tmp_path / "sweep"
    (out / "cells").mkdir(parents=True)
    (out / "sweep.yaml").write_text(yaml.safe_dump({"name": "s", "grid": {}}))
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["cell", "scheduler", "seed", "completed", "trustworthy", "error", "avg_sct_s"])
        for scheduler, seed, completed, trustworthy, data in CELLS:
            cell = f"sched-{scheduler}_seed-{seed}"
            flag = {True: "true", False: "false", None: ""}
            writer.writerow([cell, scheduler, seed, flag[completed], flag[trustworthy], "", data.get("avg_sct_s", "")])
            if (scheduler, seed) == ("grouper", 2):
                write_run(out / "cells" / cell, events(8))
            else:
                (out / "cells" / cell).mkdir()
            # the cell's verdict is its summary's, which the row copies (as a sweep writes them)
            verdict = {"completed": completed, "trustworthy": trustworthy}
            (out / "cells" / cell / "summary.json").write_text(json.dumps({**data, **verdict}))
    write_run(tmp_path / "solo", events(5))
    return out


def rows(path):
    with open(path, newline="") as f:
        return {(r.get("metric") or r.get("model"), r["scheduler"]): r for r in csv.DictReader(f)}


def test_figure_11_normalises_to_fs_over_common_seeds(sweep_dir):
    figures.grouper_figures(sweep_dir)
    table = rows(sweep_dir / "figure-11.csv")
    sct = {s: table[("avg_sct_s", s)] for s in ("fs", "grouper", "baraat")}
    assert float(sct["fs"]["mean_s"]) == 11 and float(sct["fs"]["normalised_to_fs"]) == 1
    assert float(sct["grouper"]["normalised_to_fs"]) == pytest.approx(7.5 / 11)
    assert float(sct["baraat"]["normalised_to_fs"]) == pytest.approx(0.9)  # seed 2 untrustworthy: seed 1 only
    assert float(sct["baraat"]["grouper_reduction_pct"]) == pytest.approx(100 * (1 - 7 / 9))
    assert float(sct["baraat"]["paper_normalised_to_fs"]) == pytest.approx(0.69 / 0.775)
    assert float(sct["grouper"]["paper_normalised_to_fs"]) == pytest.approx(0.69)
    assert float(table[("avg_cojct_s", "grouper")]["mean_s"]) == 14  # seed 2 from its events (8)
    assert float(table[("avg_t90_s", "grouper")]["mean_s"]) == 13
    assert float(table[("avg_cojct_s", "baraat")]["paper_normalised_to_fs"]) == pytest.approx(0.56 / 0.629)
    assert figures.paper_normalised(figures.PAPER_FIG11["avg_cojct_s"], "sincronia") is None  # not in the text
    md = (sweep_dir / "figure-11.md").read_text()
    assert "| SCT | Grouper | 2 | 7.5 | 0.682 | 0.690 | n/a | n/a |" in md
    assert "| SCT | Baraat | 1 | 9.0 | 0.900 | 0.890 | 22.2% | 22.5% |" in md
    assert "left out: 2" in md and "sched-baraat_seed-2: untrustworthy" in md
    assert "sched-sincronia_seed-1: not completed" in md


def test_figure_12_per_model_and_figure_10_needs_solo_data(sweep_dir):
    figures.grouper_figures(sweep_dir)
    table = rows(sweep_dir / "figure-12.csv")
    assert float(table[("deepspeech2", "grouper")]["normalised_to_fs"]) == pytest.approx(7.5 / 11)
    assert table[("deepspeech2", "grouper")]["paper_normalised_to_fs"] == ""
    assert "| deepspeech2 | Baraat | 1 | 9.0 | 0.900 | n/a |" in (sweep_dir / "figure-12.md").read_text()
    assert "No solo calibration" in (sweep_dir / "figure-10.md").read_text()
    assert all(r["stages"] == "0" for r in rows(sweep_dir / "figure-10.csv").values())


def test_figure_10_with_a_solo_calibration(sweep_dir):
    written = figures.grouper_figures(sweep_dir, solo_runs=[sweep_dir.parent / "solo"])
    assert [p.name for p in written] == ["solo-sct.csv", "figure-10.csv", "figure-10-cdf.csv", "figure-10.md",
                                         "figure-10.png", "figure-11.csv", "figure-11.md", "figure-11.png",
                                         "figure-12.csv", "figure-12.md", "figure-12.png"]
    assert all(p.stat().st_size > 0 for p in written)
    with open(sweep_dir / "figure-10.csv", newline="") as f:
        table = {r["scheduler"]: r for r in csv.DictReader(f)}
    assert float(table["fs"]["avg_stage_slowdown"]) == pytest.approx(2.2)
    assert float(table["fs"]["p90_stage_slowdown"]) == pytest.approx(2.36)
    assert float(table["grouper"]["avg_stage_slowdown"]) == pytest.approx(1.5)
    assert float(table["fs"]["grouper_reduction_avg_stage_slowdown_pct"]) == pytest.approx(100 * (1 - 3 / 4.4))
    assert table["fs"]["paper_grouper_reduction_avg_stage_slowdown_pct"] == "34.7"
    with open(sweep_dir / "figure-10-cdf.csv", newline="") as f:
        fs_curve = [(float(r["slowdown"]), float(r["cdf"])) for r in csv.DictReader(f) if r["scheduler"] == "fs"]
    assert fs_curve == [(2.0, 0.5), (2.4, 1.0)]


def test_bad_inputs_are_one_line_errors(tmp_path, sweep_dir):
    with pytest.raises(SpecError, match=r"^dir: .*results.csv: no such file"):
        figures.grouper_figures(tmp_path / "nothing")
    with pytest.raises(SpecError, match=r"^--solo: .*: no events.jsonl"):
        figures.grouper_figures(sweep_dir, solo_runs=[tmp_path / "nothing"])


def test_cli_figures(sweep_dir, tmp_path, capsys):
    from experiments.cli import main
    assert main(["figures", "grouper", str(sweep_dir), "--out", str(tmp_path / "drawn")]) == 0
    printed = capsys.readouterr().out.split()
    assert str(tmp_path / "drawn" / "figure-11.md") in printed and "report.html" not in " ".join(printed)
    assert not list(sweep_dir.glob("figure-*"))  # --out leaves the sweep as it was
    assert main(["figures", "grouper", str(sweep_dir), "--out", str(sweep_dir)]) == 2  # --out is not the sweep
    assert "would write into a sweep directory" in capsys.readouterr().err and not list(sweep_dir.glob("figure-*"))
    assert main(["figures", "grouper", str(sweep_dir)]) == 0
    assert str(sweep_dir / "figure-11.md") in capsys.readouterr().out
    assert (sweep_dir / "figure-11.csv").read_bytes() == (tmp_path / "drawn" / "figure-11.csv").read_bytes()


def test_a_sweep_with_no_usable_cell_or_of_another_kind_is_refused(sweep_dir):
    table = sweep_dir / "results.csv"
    header = table.read_text().splitlines()[0]
    table.write_text(header + "\n")
    with pytest.raises(SpecError, match="no completed, trustworthy cell to draw \\(0 left out\\)"):
        figures.grouper_figures(sweep_dir)
    assert not (sweep_dir / "figure-11.csv").exists()
    (sweep_dir / "sweep.yaml").write_text(yaml.safe_dump({"base_spec": {"workload": {"kind": "gnn"}}}))
    with pytest.raises(SpecError, match="a sweep of gnn cells; trainbed figures grouper reads cojob sweeps"):
        figures.grouper_figures(sweep_dir)


def test_a_solo_calibration_of_several_cojobs_or_another_setting_is_refused(sweep_dir, tmp_path):
    """A solo SCT of another cluster or scale would divide the cells' SCTs into
    slowdowns of nothing (the 9-host solo sweep once sat beside the 24-host cells)."""
    two = tmp_path / "two"
    write_run(two, [*events(5), {"kind": "cojob_arrival", "t": 1, "cojob": 1, "model": "deepspeech2"}])
    with pytest.raises(SpecError, match=r"^--solo: .*two: 2 cojobs ran, not one alone$"):
        figures.grouper_figures(sweep_dir, solo_runs=[two])
    cell = sweep_dir / "cells" / "sched-fs_seed-1"
    setting = {"topology": {"kind": "star", "hosts": 9, "host_mbps": 100},
               "workload": {"kind": "cojob", "bytes_scale": 0.02, "only_cojob": None, "placement": "gpu_servers"}}
    (cell / "spec.yaml").write_text(yaml.safe_dump(setting))
    solo = tmp_path / "solo"
    (solo / "spec.yaml").write_text(yaml.safe_dump({**setting, "workload": {
        **setting["workload"], "only_cojob": 0, "placement": "spread"}}))  # what a solo run may change
    figures.grouper_figures(sweep_dir, solo_runs=[solo])
    (solo / "spec.yaml").write_text(yaml.safe_dump({**setting, "topology": {**setting["topology"], "host_mbps": 40},
                                                    "workload": {**setting["workload"], "bytes_scale": 0.01}}))
    with pytest.raises(SpecError, match=r"^--solo: .*solo: its topology differs from the sweep's cells in host_mbps: "):
        figures.grouper_figures(sweep_dir, solo_runs=[solo])
