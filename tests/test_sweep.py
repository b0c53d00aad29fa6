import csv
import json
from pathlib import Path

import pytest
import yaml

from experiments import sweep as sweep_mod
from experiments.errors import SpecError

BASE = {"name": "grouper-small", "seed": 0, "scheduler": {"name": "fs", "period_s": 1}, "workload": {"kind": "cojob"},
        "topology": {"kind": "leaf_spine", "host_mbps": 100}}


def write(tmp_path, sweep: dict, base: dict = BASE):
    (tmp_path / "specs").mkdir(exist_ok=True)
    (tmp_path / "specs" / "base.yaml").write_text(yaml.safe_dump(base))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "spec": "specs/base.yaml", **sweep}))
    return path


class FakeRunner:
    """Writes a summary.json as the real runner would; fails the schedulers in ``fail``."""

    def __init__(self, fail=()):
        self.fail, self.calls = set(fail), []

    def __call__(self, spec, out_dir):
        self.calls.append(out_dir.name)
        out_dir.mkdir(parents=True)
        scheduler = spec["scheduler"]["name"]
        if scheduler in self.fail:
            (out_dir / "summary.json").write_text(json.dumps({"completed": False, "error": "RuntimeError: boom"}))
            raise RuntimeError(f"run did not complete; partial results in {out_dir}")
        summary = {"completed": True, "trustworthy": spec["seed"] != 2, "avg_sct_s": 10.0 + spec["seed"],
                   "avg_cojct_s": 40.0, "cpu_idle_share": 0.5, "per_model_avg_sct_s": {"vgg19": 1.0},
                   "fidelity": {"trustworthy": True}, "host_mbps_seen": spec["topology"]["host_mbps"]}
        (out_dir / "summary.json").write_text(json.dumps(summary))
        return out_dir


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_cells_are_every_combination_with_stable_readable_ids(tmp_path):
    sweep = sweep_mod.load(write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1, 2],
                                            "grid": {"topology.host_mbps": [50, 100]}}))
    assert [cell.id for cell in sweep.cells][:4] == [
        "sched-fs_seed-1_topology.host_mbps-50", "sched-grouper_seed-1_topology.host_mbps-50",
        "sched-fs_seed-1_topology.host_mbps-100", "sched-grouper_seed-1_topology.host_mbps-100"]
    assert len(sweep.cells) == 8
    last = sweep.cells[-1].spec
    assert (last["scheduler"], last["seed"], last["topology"]["host_mbps"]) == ({"name": "grouper", "period_s": 1},
                                                                               2, 100)
    assert sweep.base_spec == BASE  # overrides go to copies


def test_overrides_create_missing_sections_and_refuse_to_descend_into_a_value():
    assert sweep_mod.apply_overrides({"a": 1}, {"b.c.d": [1, 2]}) == {"a": 1, "b": {"c": {"d": [1, 2]}}}
    with pytest.raises(SpecError, match=r"^grid\['a.b'\]: cannot set a.b: the base spec's a is 1, not a mapping "
                                        r"or a list$"):
        sweep_mod.apply_overrides({"a": 1}, {"a.b": 2}, {"a.b": "grid['a.b']"})
    # a part of digits indexes a list the base spec has; the base stays as it was
    base = {"flows": [{"name": "low", "queue": 7}, {"name": "high", "queue": 1}]}
    assert sweep_mod.apply_overrides(base, {"flows.1.queue": 3})["flows"] == [{"name": "low", "queue": 7},
                                                                             {"name": "high", "queue": 3}]
    assert base["flows"][1]["queue"] == 1
    with pytest.raises(SpecError, match=r"cannot set flows.2.queue: the base spec's flows is a list of 2 items; "
                                        r"index it 0..1$"):
        sweep_mod.apply_overrides(base, {"flows.2.queue": 3})
    with pytest.raises(SpecError, match=r"cannot set flows.low.queue: .* index it 0..1$"):
        sweep_mod.apply_overrides(base, {"flows.low.queue": 3})
    with pytest.raises(SpecError, match=r"cannot set emulation.queue_weights.0: digits index a list, and the base "
                                        r"spec has no emulation.queue_weights: give it the list to index$"):
        sweep_mod.apply_overrides({"emulation": {}}, {"emulation.queue_weights.0": 3})
    assert sweep_mod.cell_id({}) == "base"
    assert sweep_mod.cell_id({"x.y": "a b/c", "flag": True, "rate": 0.5}) == "x.y-a-b-c_flag-true_rate-0.5"
    assert sweep_mod.cell_id({"period_s": -1, "gain": -0.5, "name": "-x-"}) == "period_s--1_gain--0.5_name-x"


def test_a_grid_null_unsets_the_field_so_the_kind_default_holds():
    """Default against a value: tcp_rto_min_ms null (the kernel's 200 ms) and 40; strict
    priority against weighted queues when the base spec weighs them."""
    base = {"a": {"b": 1, "c": 2}, "flows": [{"name": "low", "queue": 7}]}
    assert sweep_mod.apply_overrides(base, {"a.b": None}) == {"a": {"c": 2}, "flows": [{"name": "low", "queue": 7}]}
    assert sweep_mod.apply_overrides(base, {"x.y": None}) == base  # nothing there to unset, no section made
    assert sweep_mod.apply_overrides(base, {"flows.0.queue": None})["flows"] == [{"name": "low"}]
    with pytest.raises(SpecError, match=r"^flows.0: cannot unset flows.0: null unsets a mapping's field, "
                                        r"not a list's item$"):
        sweep_mod.apply_overrides(base, {"flows.0": None})
    demo = yaml.safe_load((Path(__file__).resolve().parents[1] / "experiments/specs/weighted-demo.yaml").read_text())
    sweep = sweep_mod.parse({"name": "rto", "spec": demo, "parts": [
        {"name": "rto", "grid": {"emulation.tcp_rto_min_ms": [None, 40]}},
        {"name": "queues", "grid": {"emulation.queue_weights": [None]}}]})
    assert [cell.id for cell in sweep.cells] == ["emulation.tcp_rto_min_ms-default", "emulation.tcp_rto_min_ms-40",
                                                 "emulation.queue_weights-default"]
    checked = [sweep_mod.check_cell(cell)["emulation"] for cell in sweep.cells]
    assert [e["tcp_rto_min_ms"] for e in checked] == [None, 40, None]
    assert checked[0]["queue_weights"] == [3, 1, 1, 1, 1, 1, 1] and checked[2]["queue_weights"] is None
    assert "emulation.queue_weights=null" in sweep_mod.list_lines(sweep.cells)[2]


def test_a_grid_key_of_nulls_only_must_name_a_field_the_base_spec_sets():
    """Nulls alone under a field the base spec lacks change no cell's spec: a misspelled key
    would otherwise pass silently. A null beside a value is checked by that value's cell."""
    demo = yaml.safe_load((Path(__file__).resolve().parents[1] / "experiments/specs/weighted-demo.yaml").read_text())
    with pytest.raises(SpecError, match=r"^grid\['emulation.queue_wieghts'\]: every value is null, which unsets the field, "
                                        r"and the base spec does not set emulation.queue_wieghts: the key changes no "
                                        r"cell's spec \(misspelled\?\)$"):
        sweep_mod.parse({"name": "typo", "spec": demo, "grid": {"emulation.queue_wieghts": [None]}})
    with pytest.raises(SpecError, match=r"^parts\[0\].grid\['flows.0.quue'\]: every value is null"):
        sweep_mod.parse({"name": "typo", "spec": demo, "parts": [{"name": "p", "grid": {"flows.0.quue": [None]}}]})
    with pytest.raises(SpecError, match=r"^grid\['flows.9.queue'\]: cannot set flows.9.queue: .*; index it 0..1$"):
        sweep_mod.parse({"name": "past", "spec": demo, "grid": {"flows.9.queue": [None]}})  # the list's length named
    assert sweep_mod._sets(demo, "emulation.queue_weights") and sweep_mod._sets(demo, "flows.0.name")
    assert not sweep_mod._sets(demo, "flows.0.quue") and not sweep_mod._sets(demo, "emulation.x.y")
    sweep = sweep_mod.parse({"name": "ok", "spec": demo, "grid": {"emulation.tcp_rto_min_ms": [None, 40]}})
    assert len(sweep.cells) == 2  # a null beside a value: the default against the value


def test_a_grid_value_may_be_a_list_of_scalars_spelled_in_its_cell_id(tmp_path):
    """Strict priority against two sets of queue weights, in one grid."""
    demo = yaml.safe_load((Path(__file__).resolve().parents[1] / "experiments/specs/priority-demo.yaml").read_text())
    sweep = sweep_mod.parse({"name": "queues", "spec": demo, "grid": {
        "emulation.queue_weights": [None, [64, 32, 16, 8, 4, 2, 1], [2, 1, 1, 1, 1, 1, 1.5]]}})
    assert [cell.id for cell in sweep.cells] == ["emulation.queue_weights-default",
                                                 "emulation.queue_weights-64-32-16-8-4-2-1",
                                                 "emulation.queue_weights-2-1-1-1-1-1-1.5"]
    assert [sweep_mod.check_cell(c)["emulation"]["queue_weights"] for c in sweep.cells] == [
        None, [64, 32, 16, 8, 4, 2, 1], [2, 1, 1, 1, 1, 1, 1.5]]
    assert "emulation.queue_weights=[64, 32, 16, 8, 4, 2, 1]" in sweep_mod.list_lines(sweep.cells)[1]
    shuffled = sweep_mod.parse({"name": "queues", "spec": demo, "order": {"shuffle": 7}, "schedulers": ["fs", "x"],
                                "grid": {"emulation.queue_weights": [None, [64, 32, 16, 8, 4, 2, 1], [2, 1, 1, 1, 1,
                                                                                                     1, 1.5]]}})
    assert sorted(c.id for c in shuffled.cells) == sorted(c.id for c in sweep_mod.parse(
        {"name": "q", "spec": demo, "schedulers": ["fs", "x"], "grid": shuffled.grid}).cells)
    assert [len(g) for g in sweep_mod.groups(shuffled.cells)] == [2, 2, 2]  # a grid point's schedulers together
    repeated = sweep_mod.parse({"name": "q", "spec": demo, "repeats": 2, "schedulers": ["fs", "x"],
                                "grid": {"emulation.queue_weights": [None, [3, 1, 1, 1, 1, 1, 1]]}})
    assert [len(g) for g in sweep_mod.groups(repeated.cells)] == [2, 2, 2, 2]  # a repeat is a comparison of its own
    sweep_mod.run_sweep(repeated, str(tmp_path / "out"), run_cell=lambda spec, out: None, only=("*default_rep-1",))
    assert "&id" not in (tmp_path / "out" / "sweep.yaml").read_text()  # the record spells every list out
    for bad, says in (([[1, [2]]], r"grid\['emulation.queue_weights'\]\[0\]: must be .* a list of them or null, "
                                   r"got a list"),
                      ([[]], r"\[0\]: must be .* got an empty list"),
                      ([[1, 2], [1, 2]], r"\[1\]: repeats")):
        with pytest.raises(SpecError, match=says):
            sweep_mod.parse({"name": "queues", "spec": demo, "grid": {"emulation.queue_weights": bad}})


def test_sweep_runs_every_cell_and_writes_results(tmp_path, capsys):
    path = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1, 2],
                            "grid": {"topology.host_mbps": [50]}, "report": ["fidelity.trustworthy"]})
    result = sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=FakeRunner(fail={"grouper"}))
    out = tmp_path / "out"
    rows = read_csv(out / "results.csv")
    assert list(rows[0])[:12] == ["cell", "scheduler", "seed", "topology.host_mbps", "completed", "trustworthy",
                                  "error", "cell_s", "avg_sct_s", "avg_cojct_s", "fidelity.trustworthy",
                                  "cpu_idle_share"]
    assert all(float(row["cell_s"]) >= 0 for row in rows)
    assert [(r["cell"], r["completed"], r["trustworthy"], r["avg_sct_s"]) for r in rows] == [
        ("sched-fs_seed-1_topology.host_mbps-50", "true", "true", "11.0"),
        ("sched-grouper_seed-1_topology.host_mbps-50", "false", "", ""),
        ("sched-fs_seed-2_topology.host_mbps-50", "true", "false", "12.0"),
        ("sched-grouper_seed-2_topology.host_mbps-50", "false", "", "")]
    assert rows[0]["topology.host_mbps"] == "50" and rows[0]["host_mbps_seen"] == "50"
    assert rows[1]["error"] == "RuntimeError: run did not complete; partial results in " \
                               f"{out / 'cells' / 'sched-grouper_seed-1_topology.host_mbps-50'}"
    assert "per_model_avg_sct_s" not in rows[0]  # only numeric top-level fields
    assert result.failed == ["sched-grouper_seed-1_topology.host_mbps-50", "sched-grouper_seed-2_topology.host_mbps-50"]
    directory_line, *lines = capsys.readouterr().out.splitlines()
    assert directory_line == f"sweep directory: {out} (4 cells, 4 to run, ETA unknown)"
    assert lines[0] == "[1/4] sched-fs_seed-1_topology.host_mbps-50 ..."  # before the run, which may print
    assert lines[1].startswith("[1/4] sched-fs_seed-1_topology.host_mbps-50: done in ")
    assert lines[1].endswith(" s (fidelity.trustworthy true, trustworthy true); 3 to run, ETA 0 s")
    assert "FAILED in" in lines[3] and "error: RuntimeError: run did not complete" in lines[3]
    assert lines[7].endswith(" s (fidelity.trustworthy n/a, trustworthy n/a, error: RuntimeError: run did not "
                             f"complete; partial results in {out / 'cells' / rows[3]['cell']})")  # the last: no ETA
    resolved = yaml.safe_load((out / "sweep.yaml").read_text())
    assert resolved["spec"] == str(tmp_path / "specs" / "base.yaml") and resolved["base_spec"] == BASE
    assert [c["id"] for c in resolved["cells"]] == [row["cell"] for row in rows]


def test_resume_keeps_completed_cells_and_reruns_the_others_into_fresh_directories(tmp_path, capsys):
    path = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]})
    out = str(tmp_path / "out")
    sweep_mod.run_any_sweep(path, out=out, run_cell=FakeRunner(fail={"grouper"}))
    again = FakeRunner()
    result = sweep_mod.run_any_sweep(path, out=out, run_cell=again)
    assert again.calls == ["sched-grouper_seed-1"]
    assert result.failed == []
    assert (tmp_path / "out" / "failed" / "sched-grouper_seed-1-1" / "summary.json").exists()
    assert "[1/2] sched-fs_seed-1: already done (avg_sct_s 11, trustworthy true)" in capsys.readouterr().out
    assert [r["completed"] for r in read_csv(tmp_path / "out" / "results.csv")] == ["true", "true"]


def test_a_second_sweep_in_a_directory_a_sweep_is_running_in_is_refused_and_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINBED_STATE", str(tmp_path / "state"))
    path, out = write(tmp_path, {"seeds": [1, 2]}), tmp_path / "out"
    refusals = []

    def second_sweep(spec, cell_dir):  # while the first sweep runs its first cell
        done = FakeRunner()(spec, cell_dir)
        if not refusals:
            with pytest.raises(SpecError, match=r"^--out: another sweep is running in .*out; wait for it to end$"):
                sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner())
            refusals.append(sorted(p.name for p in (out / "cells").iterdir()))
        return done

    result = sweep_mod.run_any_sweep(path, out=str(out), run_cell=second_sweep)
    assert refusals == [["seed-1"]] and result.failed == []
    again = FakeRunner()
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=again)  # the lock went with the first sweep
    assert again.calls == []


def test_a_runner_that_writes_no_summary_is_a_failed_cell(tmp_path):
    path = write(tmp_path, {"seeds": [1]})
    result = sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=lambda spec, out: out)
    assert result.rows[0]["error"] == "the runner wrote no summary.json" and result.failed == ["seed-1"]
    assert result.rows[0]["scheduler"] == "fs"  # the base spec's own


def test_a_directory_of_another_base_spec_is_refused(tmp_path):
    out = str(tmp_path / "out")
    sweep_mod.run_any_sweep(write(tmp_path, {"seeds": [1]}), out=out, run_cell=FakeRunner())
    other = write(tmp_path, {"seeds": [1]}, base={**BASE, "seed": 5})
    with pytest.raises(SpecError, match=r"^--out: .* holds a sweep of a different base spec; choose a new directory$"):
        sweep_mod.run_any_sweep(other, out=out, run_cell=FakeRunner())


@pytest.mark.parametrize("sweep, message", [
    ({"grid": {"topology.host_mbps": []}},
     r"grid\['topology.host_mbps'\]: must be a non-empty list, got an empty list"),
    ({"grid": {"seed": [1]}}, r"grid.seed: is set by `seeds`, not by the grid"),
    ({"grid": {"a..b": [1]}}, r"grid\['a..b'\]: must be a dotted spec field name \(e.g. topology.host_mbps\)"),
    ({"grid": {"x": [{"a": 1}]}}, r"grid.x\[0\]: must be a non-empty string, a finite number, true/false, a list of them or null, "
                                  r"got a mapping"),
    ({"grid": {"x": [1, 1]}}, r"grid.x\[1\]: repeats 1"),
    ({"grid": {"x": ["a b", "a/b"]}}, r"grid.x: cells .* share the id 'x-a-b'; use values that differ"),
    ({"schedulers": ["pkg_a:f", "pkg:a_f"]}, r"schedulers: cells .* share the id 'sched-pkg-a-f'"),
    ({"schedulers": []}, r"schedulers: must be a non-empty list, got an empty list"),
    ({"schedulers": ["gr ouper"]}, r"schedulers\[0\]: must be a scheduler name or module:function, got .gr ouper.$"),
    ({"seeds": [1, "2"]}, r"seeds\[1\]: must be an integer >= 0, got '2'"),
    ({"seeds": [1, True]}, r"seeds\[1\]: must be an integer >= 0, got true"),
    ({"colour": "red"}, r"colour: unknown field \(allowed: backend, description, grid, name, order, parts, repeats, report, "
                         r"schedulers, seeds, spec\)"),
    ({"spec": "specs/missing.yaml"}, r"spec: no such base spec: .*specs/missing.yaml"),
    ({"name": "a b"}, r"name: must be a non-empty word"),
    ({"report": ["ok", 3]}, r"report\[1\]: must be a dotted spec field name"),
    ({"grid": {"scheduler.period_s.x": [1]}}, r"grid\['scheduler.period_s.x'\]: cannot set scheduler.period_s.x: "
                                              r"the base spec's scheduler.period_s is 1, not a mapping"),
])
def test_bad_sweep_files_stop_with_one_line_naming_the_field(tmp_path, sweep, message):
    with pytest.raises(SpecError, match="^" + message) as err:
        sweep_mod.load(write(tmp_path, sweep))
    assert "\n" not in str(err.value)


def test_a_spec_given_as_a_sweep_says_so(tmp_path):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(BASE))
    with pytest.raises(SpecError, match=r"^sweep: this is a spec, not a sweep file \(which names one with spec:\): "
                                        r"run it with trainbed run"):
        sweep_mod.load(tmp_path / "spec.yaml")


def test_an_unknown_field_near_a_known_one_is_named():
    with pytest.raises(SpecError, match=r"^repots: unknown field; did you mean report\? \(allowed: "):
        sweep_mod.parse({"name": "s", "spec": BASE, "repots": ["avg_sct_s"]})


def fake_kinds(monkeypatch, runner):
    """The emulated cells run by ``runner``, their specs (BASE, of no kind) taken as they are."""
    monkeypatch.setattr(sweep_mod, "run_with_runner", runner)
    monkeypatch.setattr(sweep_mod, "check_cell", lambda cell, validate=None: cell.spec)


def test_cli_sweep(tmp_path, monkeypatch, capsys):
    from experiments.cli import main
    fake_kinds(monkeypatch, FakeRunner(fail={"grouper"}))
    path = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]})
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert f"sweep directory: {tmp_path / 'out'}" in out and "1 of 2 cells did not complete" in out
    (tmp_path / "bad.yaml").write_text("name: [")
    assert main(["sweep", str(tmp_path / "bad.yaml")]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"trainbed: error: sweep: {tmp_path / 'bad.yaml'} is not valid YAML at line 1: "
                     "expected the node content, but found '<stream end>'")


def test_a_sweep_with_an_invalid_cell_runs_none_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """Every cell to run is checked by its kind first: a scheduler or grid key that
    some cell's kind refuses stops the sweep in one line, each bad cell named, before
    a directory is made (was: every cell ran into FAILED)."""
    from experiments.cli import main
    smoke = yaml.safe_load(open("experiments/specs/grouper-smoke.yaml"))
    ran = FakeRunner()
    monkeypatch.setattr(sweep_mod, "run_with_runner", ran)
    path = write(tmp_path, {"schedulers": ["fs", "grouper", "nope"], "seeds": [1]}, smoke)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sched-nope_seed-1: INVALID: SpecError: scheduler.name: ")
    assert "\ntrainbed: error: sweep: 1 of 3 cells to run have an invalid spec (above), so none ran; the first, " \
           "sched-nope_seed-1: SpecError: scheduler.name: " in err
    assert ran.calls == [] and not (tmp_path / "out").exists()
    monkeypatch.setattr("experiments.cluster.local", lambda *args: pytest.fail("a cluster started"))
    assert main(["sweep", str(path), "--local", "2", "--out", str(tmp_path / "out")]) == 2
    assert "so none ran; the first, sched-nope_seed-1: " in capsys.readouterr().err
    (tmp_path / "g").mkdir()
    grid = write(tmp_path / "g", {"schedulers": ["fs"], "seeds": [1], "grid": {"workload.bogus": [1, 2]}}, smoke)
    with pytest.raises(SpecError, match=r"^sweep: 2 of 2 cells to run have an invalid spec \(above\), so none ran; "
                                        r"the first, sched-fs_seed-1_workload.bogus-1: SpecError: workload.bogus: "
                                        r"unknown field \(allowed: "):
        sweep_mod.run_any_sweep(grid, out=str(tmp_path / "out"))
    assert capsys.readouterr().err.count("INVALID: SpecError: workload.bogus: unknown field (allowed: ") == 2
    assert ran.calls == [] and not (tmp_path / "out").exists()
    # the valid cells run once the bad one is left out; "" is the current directory, as "."
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    for _ in range(2):  # the second: a resume, with nothing to run
        assert main(["sweep", str(path), "--out", "", "--only", "sched-[fg]*"]) == 0
        assert sorted(ran.calls) == ["sched-fs_seed-1", "sched-grouper_seed-1"]
    assert (tmp_path / "here" / "cells" / "sched-fs_seed-1" / "summary.json").exists()
    # a run's directory is not a sweep's: refused before anything is checked or written
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text("{}")
    for dry in ([], ["--dry-run"]):
        assert main(["sweep", str(path), "--out", str(tmp_path / "run"), *dry]) == 2
        assert capsys.readouterr().err.endswith(f"error: --out: {tmp_path / 'run'} holds a run (summary.json), "
                                                f"not a sweep; choose a new directory\n")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["summary.json"]


@pytest.mark.parametrize("spec, message", [
    ("x" * 100_000, r"spec: cannot read .*xxx\.\.\.xxx+ \(\d+ characters\): File name too long"),
    ("a\0b.yaml", r"spec: no such base spec: '.*/a\\x00b.yaml'"),
    ("a\nb.yaml", r"spec: no such base spec: '.*/a\\nb.yaml'"),
    ("specs", r"spec: .*/specs is a directory, not a base spec"),
    (".", r"spec: .* is a directory, not a base spec"),
    ("", r"spec: must be a path to the base spec \(string\), got ''"),
    (["specs/base.yaml"], r"spec: must be a path to the base spec, or the base spec itself \(a mapping\), "
                          r"got a list of 1 item"),
])
def test_a_base_spec_path_that_is_no_spec_is_one_line(tmp_path, spec, message):
    with pytest.raises(SpecError, match="^" + message + "$") as err:
        sweep_mod.load(write(tmp_path, {"spec": spec}))
    assert "\n" not in str(err.value) and len(str(err.value)) < 400


def test_cli_sweep_of_a_very_long_spec_path_is_one_line(tmp_path, capsys):
    from experiments.cli import main
    path = write(tmp_path, {"spec": "x" * 100_000})
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainbed: error: spec: cannot read ") and err.endswith(": File name too long\n")
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
    assert main(["sweep", str(tmp_path / "specs")]) == 2
    assert capsys.readouterr().err == f"trainbed: error: sweep: {tmp_path / 'specs'} is a directory, not a sweep file\n"


def test_a_sweep_directory_whose_record_is_not_a_sweep_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.yaml").write_text("- a list\n")
    with pytest.raises(SpecError, match=r"^--out: .*sweep.yaml is not a sweep record \(a mapping\); choose a new "):
        sweep_mod.run_any_sweep(write(tmp_path, {"seeds": [1]}), out=str(out), run_cell=FakeRunner())
    (out / "sweep.yaml").write_text("name: [\n")
    with pytest.raises(SpecError, match=r"^--out: .*sweep.yaml is not valid YAML at line 2: expected the node content, but found '<stream end>'$"):
        sweep_mod.run_any_sweep(write(tmp_path, {"seeds": [1]}), out=str(out), run_cell=FakeRunner())


def test_a_simulated_sweep_runs_every_cell_on_the_simulator(tmp_path, capsys):
    smoke = yaml.safe_load(open("experiments/specs/grouper-smoke.yaml"))
    path = write(tmp_path, {"backend": "simulated", "schedulers": ["fs", "grouper"], "seeds": [1, 2]}, smoke)
    result = sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"))
    printed = capsys.readouterr().out  # a cell's progress line, not its run's console summary
    assert printed.count(": done in ") == 4 and "trustworthy: yes (simulated" not in printed
    assert (tmp_path / "out" / "cells" / "sched-fs_seed-1" / "report.html").exists()
    assert result.failed == [] and len(result.rows) == 4
    by_cell = {row["cell"]: row for row in result.rows}
    for seed in (1, 2):  # the smoke workload is one where Grouper must beat fair share
        assert float(by_cell[f"sched-grouper_seed-{seed}"]["avg_sct_s"]) < float(by_cell[f"sched-fs_seed-{seed}"]["avg_sct_s"])
    summary = json.loads((tmp_path / "out" / "cells" / "sched-grouper_seed-1" / "summary.json").read_text())
    assert summary["backend"] == "simulated" and summary["seed"] == 1
    assert yaml.safe_load((tmp_path / "out" / "sweep.yaml").read_text())["backend"] == "simulated"


def test_a_script_sweeps_a_dict_its_base_spec_inline_or_a_path_from_the_current_directory(tmp_path, monkeypatch):
    smoke = yaml.safe_load(open("experiments/specs/grouper-smoke.yaml"))
    sweep = {"name": "scripted", "spec": smoke, "backend": "simulated", "schedulers": ["fs", "grouper"], "seeds": [1]}
    result = sweep_mod.run_any_sweep(sweep, out=str(tmp_path / "inline"))
    assert result.failed == [] and [row["cell"] for row in result.rows] == ["sched-fs_seed-1", "sched-grouper_seed-1"]
    record = yaml.safe_load((tmp_path / "inline" / "sweep.yaml").read_text())
    assert record["spec"] is None and record["base_spec"] == smoke and sweep["spec"] is smoke
    # resumed from the same dict: nothing runs again; another base spec is refused
    again = FakeRunner()
    assert sweep_mod.run_any_sweep(sweep, out=str(tmp_path / "inline"), run_cell=again).failed == []
    assert again.calls == []
    with pytest.raises(SpecError, match="base spec"):
        sweep_mod.run_any_sweep({**sweep, "spec": {**smoke, "seed": 99}}, out=str(tmp_path / "inline"), run_cell=again)
    # a path (a str or a Path) is read from the current directory
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(smoke))
    for path in ("base.yaml", Path("base.yaml")):
        assert sweep_mod.parse({**sweep, "spec": path}).spec_path == tmp_path / "base.yaml"
    # a value sweep.yaml could not keep is refused before anything is made
    with pytest.raises(SpecError, match=r"^spec: the base spec holds a value YAML cannot keep"):
        sweep_mod.run_any_sweep({**sweep, "spec": {**smoke, "seed": object()}}, out=str(tmp_path / "bad"))
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("backend, base, message", [
    ("fast", None, r"^backend: must be one of emulated, simulated, got 'fast'$"),
    ("simulated", "experiments/specs/programs-ddp.yaml",
     r"^backend: simulated is not available for workload kind 'programs' \(available: cojob, gnn\)$"),
])
def test_a_backend_the_spec_cannot_have_is_one_line(tmp_path, backend, base, message):
    spec = yaml.safe_load(open(base)) if base else BASE
    with pytest.raises(SpecError, match=message):
        sweep_mod.load(write(tmp_path, {"backend": backend}, spec))


def test_a_sweep_mixes_emulated_and_simulated_parts(tmp_path, monkeypatch):
    """Each part runs on its own backend: here the emulated runner is a fake, the
    simulated cells run on the real simulator."""
    smoke = yaml.safe_load(open("experiments/specs/grouper-smoke.yaml"))
    emulated = FakeRunner()
    monkeypatch.setattr(sweep_mod, "run_with_runner", emulated)
    path = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1], "parts": [
        {"name": "testbed", "grid": {"topology.host_mbps": [50]}},
        {"name": "model", "backend": "simulated", "grid": {"topology.host_mbps": [60]}}]}, smoke)
    sweep = sweep_mod.load(path)
    assert sweep.backends == {"emulated", "simulated"}
    result = sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"))
    assert result.failed == []
    assert sorted(emulated.calls) == ["sched-fs_seed-1_topology.host_mbps-50",
                                      "sched-grouper_seed-1_topology.host_mbps-50"]
    rows = {row["cell"]: row for row in read_csv(tmp_path / "out" / "results.csv")}
    assert {cell: row["backend"] for cell, row in rows.items()} == {
        "sched-fs_seed-1_topology.host_mbps-50": "emulated", "sched-grouper_seed-1_topology.host_mbps-50": "emulated",
        "sched-fs_seed-1_topology.host_mbps-60": "simulated", "sched-grouper_seed-1_topology.host_mbps-60": "simulated"}
    summary = json.loads((tmp_path / "out/cells/sched-grouper_seed-1_topology.host_mbps-60/summary.json").read_text())
    assert summary["backend"] == "simulated"
    record = yaml.safe_load((tmp_path / "out" / "sweep.yaml").read_text())
    assert record["parts"][1]["backend"] == "simulated" and "backend" not in record["parts"][0]
    assert [cell.get("backend") for cell in record["cells"]] == [None, None, "simulated", "simulated"]


def test_a_resume_may_add_cells_but_not_drop_finished_ones(tmp_path):
    """Dropped cells would leave results.csv and sweep.yaml while their directories
    stay: refused, naming one. Added seeds run beside the kept cells."""
    out = tmp_path / "out"
    sweep_mod.run_any_sweep(write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), out=str(out),
                            run_cell=FakeRunner())
    runner = FakeRunner()
    result = sweep_mod.run_any_sweep(write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1, 2]}),
                                     out=str(out), run_cell=runner)
    assert runner.calls == ["sched-fs_seed-2", "sched-grouper_seed-2"] and len(result.rows) == 4
    with pytest.raises(SpecError, match=r"^--out: .* holds cells this sweep does not have \(sched-grouper_seed-1 "
                                        r"and 1 more\): a resume may add cells, not drop them"):
        sweep_mod.run_any_sweep(write(tmp_path, {"schedulers": ["fs"], "seeds": [1, 2]}), out=str(out),
                                run_cell=FakeRunner())
    assert len(read_csv(out / "results.csv")) == 4


def test_a_sweep_leads_with_its_kinds_headline_not_another_kinds(tmp_path, capsys):
    """A timetable sweep's progress lines and table lead with the demo's share of the
    high flow, and carry no cojob column (avg_sct_s) it could never fill."""
    demo = yaml.safe_load((Path(__file__).resolve().parents[1] / "experiments/specs/priority-demo.yaml").read_text())

    def run_cell(spec, out_dir):
        out_dir.mkdir(parents=True)
        (out_dir / "summary.json").write_text(json.dumps({"completed": True, "trustworthy": True,
                                                          "high_share_while_both": 0.98}))
        return out_dir

    path = write(tmp_path, {"grid": {"topology.host_mbps": [50, 100]}}, base=demo)
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=run_cell)
    assert "(high_share_while_both 0.98, trustworthy true)" in capsys.readouterr().out
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert "high_share_while_both" in rows[0] and "rate_limit_achieved_mbps" in rows[0]
    assert "avg_sct_s" not in rows[0] and "avg_cojct_s" not in rows[0]


def test_repeats_run_each_cell_again_with_its_spec_unchanged(tmp_path):
    """A kind without a seed (programs, timetable) measures its spread by repeats."""
    sweep = sweep_mod.load(write(tmp_path, {"schedulers": ["fs", "grouper"], "repeats": 2}))
    assert [cell.id for cell in sweep.cells] == ["sched-fs_rep-1", "sched-grouper_rep-1",
                                                "sched-fs_rep-2", "sched-grouper_rep-2"]
    assert sweep.cells[0].spec == sweep.cells[2].spec and sweep.resolved()["repeats"] == 2
    sweep_mod.run_any_sweep(write(tmp_path, {"schedulers": ["fs"], "seeds": [1], "repeats": 2}),
                            out=str(tmp_path / "out"), run_cell=FakeRunner())
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert [(r["cell"], r["repeat"]) for r in rows] == [("sched-fs_seed-1_rep-1", "1"), ("sched-fs_seed-1_rep-2", "2")]
    assert "repeats" not in sweep_mod.load(write(tmp_path, {"seeds": [1]})).resolved()  # 1: as before
    for bad in (0, 101, 1.5, True):
        with pytest.raises(SpecError, match=r"^repeats: must be"):
            sweep_mod.load(write(tmp_path, {"repeats": bad}))


def test_a_report_field_below_a_name_no_summary_has_is_warned_of_once(tmp_path, capsys):
    """Below a name the run gives (a model's) no field is checked before the run: the
    first completed cell's summary tells."""
    path = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1],
                            "report": ["avg_sct_s", "per_model_avg_sct_s.vgg1", "fidelity.trustworthy"]})
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=FakeRunner())
    warnings = [line for line in capsys.readouterr().out.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "sweep: warning: report field(s) per_model_avg_sct_s.vgg1 not in sched-fs_seed-1's summary.json (its fields: "
        "avg_cojct_s,")


@pytest.mark.parametrize("field, problem", [
    ("avg_sct", "'avg_sct' is not among the fields of a cojob (emulated) summary (did you mean avg_sct_s?)"),
    ("fidelity.trustworth", "'trustworth' is not among fidelity's fields (did you mean trustworthy?)"),
    ("simulated_s", "'simulated_s' is written only by cojob runs on the simulated backend"),
])
def test_a_report_field_no_cell_writes_is_refused_before_anything_runs(tmp_path, field, problem):
    path = write(tmp_path, {"schedulers": ["fs"], "seeds": [1], "report": ["avg_sct_s", field]})
    with pytest.raises(SpecError) as caught:
        sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=FakeRunner())
    assert str(caught.value).startswith(f"report[1]: {problem}")
    assert str(caught.value).endswith("; every field: docs/summary-fields.md")
    assert not (tmp_path / "out").exists()


def test_a_report_field_one_backend_writes_is_taken_where_a_part_runs_there(tmp_path):
    """``simulated_s`` only a simulated cojob writes: a sweep with a simulated part may report it."""
    sweep = sweep_mod.load(write(tmp_path, {"seeds": [1], "report": ["simulated_s", "fidelity.trustworthy"], "parts": [
        {"name": "testbed", "schedulers": ["fs"]}, {"name": "model", "seeds": [2], "schedulers": ["fs"], "backend": "simulated"}]}))
    assert sweep.report == ["simulated_s", "fidelity.trustworthy"]


def test_one_configuration_runs_on_both_backends_the_off_backend_cell_named_so(tmp_path):
    """The testbed beside its model: parts of the same schedulers and seeds on both
    backends; the simulated cells' ids end with ``_backend-simulated``, the emulated
    keep theirs (a sweep's earlier ids stay); parts of one backend still may not share."""
    sweep = sweep_mod.load(write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1], "parts": [
        {"name": "testbed"}, {"name": "model", "backend": "simulated"}, {"name": "more", "seeds": [2]}]}))
    assert [(cell.id, cell.part, cell.backend) for cell in sweep.cells] == [
        ("sched-fs_seed-1", "testbed", "emulated"), ("sched-grouper_seed-1", "testbed", "emulated"),
        ("sched-fs_seed-1_backend-simulated", "model", "simulated"),
        ("sched-grouper_seed-1_backend-simulated", "model", "simulated"),
        ("sched-fs_seed-2", "more", "emulated"), ("sched-grouper_seed-2", "more", "emulated")]
    simulated = sweep_mod.load(write(tmp_path, {"backend": "simulated", "schedulers": ["fs"], "seeds": [1], "parts": [
        {"name": "model"}, {"name": "testbed", "backend": "emulated"}]}))
    assert [cell.id for cell in simulated.cells] == ["sched-fs_seed-1", "sched-fs_seed-1_backend-emulated"]
    with pytest.raises(SpecError, match=r"^parts\[2\]: its cell 'sched-fs_seed-1_backend-simulated' is also a cell "
                                        r"of part 'model'$"):
        sweep_mod.load(write(tmp_path, {"schedulers": ["fs"], "seeds": [1], "parts": [
            {"name": "testbed"}, {"name": "model", "backend": "simulated"}, {"name": "again", "backend": "simulated"}]}))


def test_a_progress_line_shows_a_field_of_many_values_by_their_count():
    assert [sweep_mod._shown(v) for v in ([{"sct_s": 1.0}] * 3, [1.0], {}, 7.600000000000003, None)] == [
        "[3 items]", "[1 item]", "[0 items]", "7.6", "n/a"]


def test_an_invalid_cell_says_where_the_sweep_set_the_field_and_what_was_meant(tmp_path, capsys):
    smoke = yaml.safe_load(Path("experiments/specs/grouper-smoke.yaml").read_text())
    path = write(tmp_path, {"backend": "simulated", "schedulers": ["fs", "gruoper"], "seeds": [1],
                            "grid": {"topology.host_mpbs": [50]}}, smoke)
    assert sweep_mod.dry_run(sweep_mod.load(path), None) == ["sched-fs_seed-1_topology.host_mpbs-50",
                                                             "sched-gruoper_seed-1_topology.host_mpbs-50"]
    first = capsys.readouterr().out.splitlines()[0]
    assert "topology.host_mpbs: unknown field for leaf_spine (allowed: " in first
    assert first.endswith("; did you mean host_mbps? (set by the sweep's grid['topology.host_mpbs'])")
    path = write(tmp_path, {"backend": "simulated", "schedulers": ["fs", "gruoper"], "seeds": [1]}, smoke)
    with pytest.raises(SpecError, match=r"the first, sched-gruoper_seed-1: SpecError: scheduler.name: must be one of "
                                        r".*got 'gruoper'; did you mean grouper\? \(set by the sweep's schedulers\)$"):
        sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"))
