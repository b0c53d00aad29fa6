"""The paper-scale simulation figures (Grouper §V-C): arrivals, the comm/comp knob,
sweeps in parts, and `trainbed figures grouper-sim` end to end on the smoke sweep."""
import csv
import math
import statistics

import pytest
import yaml

from experiments import sweep as sweep_mod
from experiments.cojob import simulated
from experiments.cojob import workload as cj
from experiments.errors import SpecError

PAPER_SPEC = "experiments/specs/grouper-sim-paper.yaml"
SMOKE_SWEEP = "experiments/sweeps/grouper-sim-figures-smoke.yaml"


def gaps(plans):
    times = [plan.arrival.at_s for plan in plans]
    return [b - a for a, b in zip(times, times[1:])]


def test_weibull_arrivals_are_seeded_bursty_and_keep_their_mean():
    one = dict(models=cj.MODELS, n_jobs=1, stage_iterations=(1,))
    plans = cj.weibull_cojobs(20_000, 100.0, 1.0, 0.5, seed=3, **one)
    assert plans[0].arrival.at_s == 0
    drawn = gaps(plans)
    assert statistics.mean(drawn) == pytest.approx(100.0, rel=0.05)
    assert statistics.stdev(drawn) / statistics.mean(drawn) > 1.8  # shape 0.5: CV sqrt(5) = 2.24
    poisson_like = gaps(cj.weibull_cojobs(20_000, 100.0, 1.0, 1.0, seed=3, **one))
    assert statistics.stdev(poisson_like) / statistics.mean(poisson_like) == pytest.approx(1.0, abs=0.05)
    assert cj.weibull_cojobs(6, 50.0, 1.0, 0.5, seed=4) == cj.weibull_cojobs(6, 50.0, 1.0, 0.5, seed=4)
    assert gaps(cj.weibull_cojobs(6, 50.0, 1.0, 0.5, seed=4)) != gaps(cj.weibull_cojobs(6, 50.0, 1.0, 0.5, seed=5))


def test_the_workload_factor_compresses_every_gap_and_keeps_the_models():
    base = cj.weibull_cojobs(8, 40.0, 1.0, 0.5, seed=9)
    double = cj.weibull_cojobs(8, 40.0, 2.0, 0.5, seed=9)
    assert [p.model for p in base] == [p.model for p in double]
    assert gaps(double) == pytest.approx([g / 2 for g in gaps(base)])
    with pytest.raises(SpecError, match="^shape: must be > 0, got 0"):
        cj.weibull_cojobs(3, 40.0, 1.0, 0, seed=1)


def test_the_comm_comp_ratio_sets_every_models_compute():
    assert cj.at_comm_comp_ratio(cj.MODELS["vgg19"], 1.0) == cj.MODELS["vgg19"]  # the testbed's
    assert cj.at_comm_comp_ratio(cj.MODELS["deepspeech2"], 4.0).compute_s == pytest.approx(2.56 / 4)
    raw = yaml.safe_load(open(PAPER_SPEC))
    raw["workload"].update(comm_comp_ratio=0.5, arrivals={**raw["workload"]["arrivals"], "cojobs": 4})
    run = simulated.resolve(simulated.validate(raw))
    assert [plan.profile.compute_s for plan in run.workload.cojobs] == pytest.approx([5.12] * 4)
    assert {plan.profile.size_mb for plan in run.workload.cojobs} <= {160.0, 230.0, 250.0, 580.0}  # bytes unchanged


def test_the_paper_spec_is_the_papers_cluster_with_every_transfer_across_the_core():
    run = simulated.resolve(simulated.validate(yaml.safe_load(open(PAPER_SPEC))))
    assert len(run.fabric.hosts) == 60 and len(run.workload.cojobs) == 20
    paths = simulated.Paths(run.fabric)
    uplinks = [port for port in paths.bottlenecks if port.startswith("tbl")]
    assert len(uplinks) == 36 and {paths.capacity[p] for p in uplinks} == {10e9 / 8}
    down = sum(link.mbps for link in run.fabric.host_links() if link.b == "tbl1")
    assert down / sum(10_000 for p in uplinks if p.startswith("tbl1>")) == pytest.approx(10 / 6)
    racks = {h.name: h.switch for h in run.fabric.hosts}
    for placement in run.workload.placements.values():
        assert len({racks[h] for h in (*placement.workers, *placement.ps)}) == 4
    assert run.workload.cojobs[0].stage_iterations == (12, 25, 50, 100)


@pytest.mark.parametrize("change, message", [
    ({"arrivals": {"kind": "weibull", "cojobs": 3, "mean_interarrival_s": 10}},
     r"workload.arrivals.shape: is required for weibull arrivals"),
    ({"arrivals": {"kind": "poisson", "cojobs": 3, "mean_interarrival_s": 10, "shape": 0.5}},
     r"workload.arrivals.shape: only for weibull arrivals \(a Poisson process has none\)"),
    ({"arrivals": {"kind": "weibull", "cojobs": 3, "mean_interarrival_s": 10, "shape": 0}},
     r"workload.arrivals.shape: must be in \[0.05, 20\], got 0"),
    ({"arrivals": {"kind": "philly"}}, r"workload.arrivals.kind: must be one of testbed, poisson, weibull"),
    ({"comm_comp_ratio": 0}, r"workload.comm_comp_ratio: must be in \(0, 1000\], got 0"),
    ({"comm_comp_ratio": "1"}, r"workload.comm_comp_ratio: must be a number"),
    ({"trace": "../shared/data/grouper-trace.json", "comm_comp_ratio": 2},
     r"workload.comm_comp_ratio: only with models \(a trace gives its own compute times\)"),
])
def test_bad_arrival_and_ratio_fields_are_one_line_errors(change, message):
    raw = yaml.safe_load(open(PAPER_SPEC))
    raw["workload"].update(change)
    with pytest.raises(SpecError, match="^" + message) as err:
        simulated.validate(raw)
    assert "\n" not in str(err.value)


def write_sweep(tmp_path, sweep):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "spec": str((tmp_path / "base.yaml").resolve()), **sweep}))
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({"name": "b", "seed": 0, "scheduler": {"name": "fs"},
                                                        "topology": {"host_mbps": 100}}))
    return path


def test_parts_are_products_of_their_own_with_the_sweeps_defaults(tmp_path):
    sweep = sweep_mod.load(write_sweep(tmp_path, {"seeds": [1, 2], "schedulers": ["fs"], "parts": [
        {"name": "a", "schedulers": ["fs", "grouper"], "grid": {"topology.host_mbps": [50]}},
        {"name": "b", "seeds": [7], "grid": {"scheduler.period_s": [1, 2]}},
        {"name": "c"}]}))
    assert [(c.part, c.id) for c in sweep.cells] == [
        ("a", "sched-fs_seed-1_topology.host_mbps-50"), ("a", "sched-grouper_seed-1_topology.host_mbps-50"),
        ("a", "sched-fs_seed-2_topology.host_mbps-50"), ("a", "sched-grouper_seed-2_topology.host_mbps-50"),
        ("b", "sched-fs_seed-7_scheduler.period_s-1"), ("b", "sched-fs_seed-7_scheduler.period_s-2"),
        ("c", "sched-fs_seed-1"), ("c", "sched-fs_seed-2")]
    assert sweep.grid == {"topology.host_mbps": [50], "scheduler.period_s": [1, 2]}
    record = sweep.resolved()
    assert [p["name"] for p in record["parts"]] == ["a", "b", "c"] and record["cells"][-1]["part"] == "c"


def test_a_sweep_in_parts_writes_a_part_column_and_every_varied_field(tmp_path):
    from tests.test_sweep import FakeRunner
    path = write_sweep(tmp_path, {"seeds": [1], "parts": [{"name": "a", "grid": {"topology.host_mbps": [50]}},
                                                         {"name": "b", "grid": {"scheduler.period_s": [3]}}]})
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=FakeRunner())
    with open(tmp_path / "out" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:6] == ["cell", "part", "scheduler", "seed", "topology.host_mbps", "scheduler.period_s"]
    assert [(r["part"], r["topology.host_mbps"], r["scheduler.period_s"]) for r in rows] == [("a", "50", ""),
                                                                                             ("b", "100", "3")]


@pytest.mark.parametrize("sweep, message", [
    ({"parts": []}, r"parts: must be a non-empty list, got an empty list"),
    ({"parts": [{"grid": {"seed": [1]}}]}, r"parts\[0\].name: is required"),
    ({"parts": [{"name": "a", "colour": 1}]}, r"parts\[0\].colour: unknown field \(allowed: backend, grid, "
                                              r"name, schedulers, seeds\)"),
    ({"parts": [{"name": "a", "backend": "model"}]}, r"parts\[0\].backend: must be one of emulated, simulated, "
                                                     r"got 'model'"),
    ({"parts": [{"name": "a"}, {"name": "a", "seeds": [3]}]}, r"parts\[1\].name: repeats 'a'"),
    ({"parts": [{"name": "a"}, {"name": "b"}]}, r"parts\[1\]: its cell 'base' is also a cell of part 'a'"),
    ({"grid": {"x": [1]}, "parts": [{"name": "a"}]}, r"grid: a sweep with parts has none: give each part its own"),
    ({"parts": [{"name": "a", "grid": {"seed": [1]}}]}, r"parts\[0\].grid.seed: is set by `seeds`"),
    ({"parts": [{"name": "a", "seeds": [-1]}]}, r"parts\[0\].seeds\[0\]: must be >= 0, got -1"),
])
def test_bad_parts_are_one_line_errors_naming_the_field(tmp_path, sweep, message):
    with pytest.raises(SpecError, match="^" + message) as err:
        sweep_mod.load(write_sweep(tmp_path, sweep))
    assert "\n" not in str(err.value)


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_smoke_sweep_and_figures_run_end_to_end(tmp_path, capsys):
    from experiments.cli import main
    out = tmp_path / "sweep"
    assert main(["sweep", SMOKE_SWEEP, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["figures", "grouper-sim", str(out)]) == 0
    names = {line.rsplit("/", 1)[-1] for line in capsys.readouterr().out.split()}
    assert names == {f"figure-{n}.{ext}" for n in range(14, 19) for ext in ("csv", "md", "png")} | {
        "figure-17-cdf.csv", "report.html"}
    assert (out / "report.html").read_text().count('alt="figure-1') == 5  # the sweep's report shows them
    normalised = ["metric", "scheduler", "seeds", "mean_s", "normalised_to_fs", "grouper_reduction_pct"]
    fig14, fig15 = read(out / "figure-14.csv"), read(out / "figure-15.csv")
    assert list(fig14[0]) == ["workload_factor", *normalised]
    assert list(fig15[0]) == ["comm_comp_ratio", *normalised]
    assert list(read(out / "figure-18.csv")[0]) == ["workload_factor", *normalised, "grouper_over_offline_pct"]
    # the base point (1.0x, ratio 1.0, the base period) is the workload part's cells, in every figure
    assert sorted({float(r["workload_factor"]) for r in fig14}) == [0.5, 1.0, 2.0]
    assert sorted({float(r["comm_comp_ratio"]) for r in fig15}) == [0.5, 1.0, 2.0]
    for row in fig14 + fig15:
        assert row["seeds"] == "2" and row["metric"] in ("avg_sct_s", "avg_jct_s")
        assert math.isfinite(float(row["mean_s"])) and math.isfinite(float(row["normalised_to_fs"]))
        assert (row["scheduler"] == "fs") == (float(row["normalised_to_fs"]) == 1.0)
    fig16 = read(out / "figure-16.csv")
    assert list(fig16[0]) == ["period_s", "paper_period_min", "metric", "scheduler", "seeds", "mean_s",
                              "normalised_to_fs", "over_immediate_pct"]
    assert sorted({float(r["paper_period_min"]) for r in fig16 if r["scheduler"] == "grouper"}) == [1.0, 10.0, 100.0]
    assert {r["scheduler"] for r in fig16 if not r["period_s"]} == {"grouper-immediate", "fs"}
    fig17 = read(out / "figure-17.csv")
    assert [r["scheduler"] for r in fig17] == ["grouper", "grouper-offline"]
    assert all(int(r["stages"]) == 16 and float(r["avg_stage_slowdown"]) > 0.5 for r in fig17)
    assert list(read(out / "figure-17-cdf.csv")[0]) == ["scheduler", "slowdown", "cdf"]
    assert "24.1%" in (out / "figure-15.md").read_text() and "+12.0%" in (out / "figure-17.md").read_text()
    assert "14.2%" in (out / "figure-18.md").read_text()
    assert (out / "figure-14.png").stat().st_size > 10_000
    kept = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert main(["figures", "grouper-sim", str(out), "--out", str(tmp_path / "drawn")]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == kept  # the sweep left as it was
    assert (tmp_path / "drawn" / "figure-14.csv").read_bytes() == kept["figure-14.csv"]
    assert not (tmp_path / "drawn" / "report.html").exists()


def test_figures_of_a_directory_without_a_sweep_are_one_line(tmp_path, capsys):
    from experiments.cli import main
    assert main(["figures", "grouper-sim", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("trainbed: error: dir: ")
    assert main(["figures", "grouper-sim", str(tmp_path), "--solo", str(tmp_path)]) == 2
    assert "--solo: grouper-sim takes its solo runs from the sweep" in capsys.readouterr().err


def test_each_figures_command_draws_only_its_own_backends_cells(tmp_path, capsys):
    """grouper-sim reads simulated cells, grouper emulated ones: the other backend's are
    left out by the sweep record (was: five empty figures of an emulated sweep), so a
    sweep of the other backend alone is refused; a sweep run in part says how many
    cells of its file have not run."""
    import shutil

    from experiments.cli import main
    from experiments.cojob import simfigures
    testbed, model = tmp_path / "testbed", tmp_path / "model"
    shutil.copytree("measurements/grouper-2026-11-24/testbed", testbed)
    shutil.copytree("measurements/grouper-sim-2026-11-24", model)
    for figures, directory, other in (("grouper-sim", testbed, "emulated"), ("grouper", model, "simulated")):
        assert main(["figures", figures, str(directory)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"trainbed: error: dir: {directory}: has no completed, trustworthy cell to draw (")
        assert f": run on the {other} backend (these figures draw " in err and err.count("\n") == 1
    # this kept sweep ran one part for one seed (its README): 30 rows of the file's 228 cells
    rows, before = read(model / "results.csv"), simfigures.load(model)
    assert len(before.cells) == len(rows) == 30 and before.not_run == 198
    with open(model / "results.csv", "w", newline="") as f:  # as if stopped one cell earlier
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows[:-1])
    sweep = simfigures.load(model)
    assert sweep.not_run == 199 and len(sweep.cells) == 29
    assert "; not run: 199 of the sweep file." in simfigures._header(14, "t", sweep, 3)[2]


def test_figures_of_a_sweep_none_of_whose_cells_a_figure_reads_are_refused(tmp_path, capsys):
    """A simulated sweep over another field (the link rate) has no cell at a point
    Figs. 14-18 read: one line saying so, no five empty figures."""
    from experiments.cli import main
    from experiments.sweep import run_any_sweep
    out = tmp_path / "sweep"
    run_any_sweep({"name": "rates", "spec": "experiments/specs/grouper-smoke.yaml", "backend": "simulated",
                   "schedulers": ["fs", "grouper"], "seeds": [1], "grid": {"topology.host_mbps": [50, 100]}},
                  out=str(out))
    capsys.readouterr()
    assert main(["figures", "grouper-sim", str(out), "--out", str(tmp_path / "figures")]) == 2
    assert capsys.readouterr().err == (f"trainbed: error: dir: {out}: none of its 4 cells is one Figs. 14-18 read (a "
                                       "scheduler of theirs at the base spec's point, one figure's field varied): "
                                       "experiments/sweeps/grouper-sim-figures.yaml makes them\n")
    assert not (tmp_path / "figures").exists()
