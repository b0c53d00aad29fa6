"""Sweeps that can be found and trusted again: the code's commit in every record, a
resume under other code refused without --force, a shuffled order that keeps the
schedulers of a comparison together, --list, --only, --dry-run, progress with an ETA."""
import csv
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from experiments import store
from experiments import sweep as sweep_mod
from experiments.cli import main
from experiments.errors import SpecError
from tests.test_sweep import BASE, FakeRunner, fake_kinds, write

A, B = "a" * 40, "b" * 40


def code(monkeypatch, commit, dirty=False):
    state = {"git_commit": commit, "git_dirty": dirty if commit else None}
    if commit is None:
        state["git_note"] = "/x: not a git checkout"
    monkeypatch.setattr(store, "git_state", lambda: dict(state))


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_git_state_names_the_commit_and_whether_tracked_files_differ(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.setattr(store, "REPO_ROOT", repo)
    state = store.git_state()
    assert state["git_commit"] is None and state["git_dirty"] is None
    assert state["git_note"].startswith(f"{repo}: not a git checkout")
    git(repo, "init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    git(repo, "add", "code.py")
    git(repo, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (repo / "notes.txt").write_text("untracked files do not make a tree dirty\n")
    assert store.git_state() == {"git_commit": head, "git_dirty": False}
    (repo / "code.py").write_text("x = 2\n")
    assert store.git_state() == {"git_commit": head, "git_dirty": True}


def test_every_run_directory_records_the_code(tmp_path, monkeypatch):
    code(monkeypatch, A, dirty=True)
    run = store.start_run({"name": "r"}, tmp_path / "run")
    environment = json.loads((run / "environment.json").read_text())
    assert (environment["git_commit"], environment["git_dirty"]) == (A, True)
    code(monkeypatch, None)
    environment = store.environment()
    assert environment["git_commit"] is None and "not a git checkout" in environment["git_note"]


def test_a_resume_under_another_commit_is_refused_without_force_and_recorded_with_it(tmp_path, monkeypatch, capsys):
    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), tmp_path / "out"
    code(monkeypatch, A)
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner(fail={"grouper"}))
    record = yaml.safe_load((out / "sweep.yaml").read_text())
    assert (record["git_commit"], record["git_dirty"]) == (A, False) and "resumes" not in record
    code(monkeypatch, B)
    runner = FakeRunner()
    with pytest.raises(SpecError, match=rf"^--out: {out} was started under commit aaaaaaaaaaaa \(clean\), this "
                                        r"checkout is commit bbbbbbbbbbbb \(clean\); pass --force to resume it under "
                                        r"this code, or choose a new --out$"):
        sweep_mod.run_any_sweep(path, out=str(out), run_cell=runner)
    assert runner.calls == [] and yaml.safe_load((out / "sweep.yaml").read_text()) == record
    capsys.readouterr()
    result = sweep_mod.run_any_sweep(path, out=str(out), run_cell=runner, force=True)
    assert runner.calls == ["sched-grouper_seed-1"] and result.failed == []
    warning = capsys.readouterr().err
    assert warning == (f"warning: {out} was started under commit aaaaaaaaaaaa (clean), this checkout is commit "
                       "bbbbbbbbbbbb (clean); resuming under this code (--force)\n")
    record = yaml.safe_load((out / "sweep.yaml").read_text())
    assert record["git_commit"] == A and [(r["git_commit"], r["git_dirty"]) for r in record["resumes"]] == [(B, False)]


@pytest.mark.parametrize("first, now, refused", [
    ((A, False), (A, True), True),  # a dirty tree where the first run's was clean
    ((A, True), (A, True), False),
    ((A, True), (A, False), False),
    ((A, False), (None, None), False),  # unknown: a warning, not a refusal
    ((None, None), (A, False), False),
])
def test_which_changes_of_code_refuse_a_resume(tmp_path, monkeypatch, capsys, first, now, refused):
    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), str(tmp_path / "out")
    code(monkeypatch, *first)
    sweep_mod.run_any_sweep(path, out=out, run_cell=FakeRunner(fail={"grouper"}))
    code(monkeypatch, *now)
    capsys.readouterr()
    if refused:
        with pytest.raises(SpecError, match=r"^--out: .* \(clean\), this checkout is commit a{12} \(dirty\); pass "):
            sweep_mod.run_any_sweep(path, out=out, run_cell=FakeRunner())
        return
    sweep_mod.run_any_sweep(path, out=out, run_cell=FakeRunner())
    err = capsys.readouterr().err
    if None in (first[0], now[0]):
        assert err.startswith(f"warning: cannot tell whether {out} ran under this code: ") and err.count("\n") == 1
    else:
        assert err == ""


def test_a_resume_with_nothing_to_run_is_not_refused_and_not_recorded(tmp_path, monkeypatch):
    path, out = write(tmp_path, {"seeds": [1]}), tmp_path / "out"
    code(monkeypatch, A)
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner())
    code(monkeypatch, B, dirty=True)
    runner = FakeRunner()
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=runner)
    assert runner.calls == [] and "resumes" not in yaml.safe_load((out / "sweep.yaml").read_text())


def test_cli_refuses_a_resume_under_another_commit_unless_forced(tmp_path, monkeypatch, capsys):
    fake_kinds(monkeypatch, FakeRunner(fail={"grouper"}))
    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), str(tmp_path / "out")
    code(monkeypatch, A)
    assert main(["sweep", str(path), "--out", out]) == 1
    code(monkeypatch, B)
    capsys.readouterr()
    assert main(["sweep", str(path), "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trainbed: error: --out: {out} was started under commit aaaa") and err.count("\n") == 1
    monkeypatch.setattr(sweep_mod, "run_with_runner", FakeRunner())
    assert main(["sweep", str(path), "--out", out, "--force"]) == 0
    assert capsys.readouterr().err.startswith("warning: ")


GRID = {"schedulers": ["fs", "baraat", "grouper"], "seeds": [1, 2, 3], "grid": {"topology.host_mbps": [50, 100]}}


def test_a_shuffled_order_moves_the_groups_of_one_comparison_not_the_cells(tmp_path):
    declared = sweep_mod.load(write(tmp_path, GRID)).cells
    shuffled = sweep_mod.load(write(tmp_path, {**GRID, "order": {"shuffle": 3}})).cells
    assert sorted(c.id for c in shuffled) == sorted(c.id for c in declared)
    assert [c.id for c in shuffled] != [c.id for c in declared]
    for start in range(0, len(shuffled), 3):  # every seed and grid point: its schedulers side by side, in order
        group = shuffled[start:start + 3]
        assert [c.overrides["scheduler.name"] for c in group] == ["fs", "baraat", "grouper"]
        assert len({(c.overrides["seed"], c.overrides["topology.host_mbps"]) for c in group}) == 1
    again = sweep_mod.load(write(tmp_path, {**GRID, "order": {"shuffle": 3}})).cells
    other = sweep_mod.load(write(tmp_path, {**GRID, "order": {"shuffle": 4}})).cells
    assert [c.id for c in again] == [c.id for c in shuffled] != [c.id for c in other]


def test_a_shuffled_sweep_runs_and_records_that_order(tmp_path):
    path = write(tmp_path, {**GRID, "order": {"shuffle": 3}})
    runner = FakeRunner()
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=runner)
    order = [c.id for c in sweep_mod.load(path).cells]
    record = yaml.safe_load((tmp_path / "out" / "sweep.yaml").read_text())
    assert runner.calls == order and [c["id"] for c in record["cells"]] == order
    assert record["order"] == {"shuffle": 3}
    with open(tmp_path / "out" / "results.csv", newline="") as f:
        assert [row["cell"] for row in csv.DictReader(f)] == order


def test_shuffled_parts_keep_their_groups_apart(tmp_path):
    path = write(tmp_path, {"seeds": [1, 2], "order": {"shuffle": 1}, "parts": [
        {"name": "a", "schedulers": ["fs", "grouper"]},
        {"name": "b", "schedulers": ["fs", "grouper"], "grid": {"topology.host_mbps": [50]}}]})
    cells = sweep_mod.load(path).cells
    for first, second in zip(cells[::2], cells[1::2]):
        assert first.part == second.part and first.overrides["seed"] == second.overrides["seed"]


@pytest.mark.parametrize("order, message", [
    (3, r"order: must be a mapping, got 3"),
    ({"random": 1}, r"order.random: unknown field \(allowed: shuffle\)"),
    ({}, r"order.shuffle: is required"),
    ({"shuffle": -1}, r"order.shuffle: must be >= 0, got -1"),
    ({"shuffle": "x"}, r"order.shuffle: must be an integer >= 0, got 'x'"),
])
def test_a_bad_order_is_one_line_naming_the_field(tmp_path, order, message):
    with pytest.raises(SpecError, match=f"^{message}$"):
        sweep_mod.load(write(tmp_path, {"seeds": [1], "order": order}))


def test_list_prints_each_cell_and_its_overrides_and_runs_nothing(tmp_path, capsys):
    path = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1], "grid": {"topology.host_mbps": [50]}})
    assert main(["sweep", str(path), "--list", "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "sched-fs_seed-1_topology.host_mbps-50       scheduler.name=fs seed=1 topology.host_mbps=50",
        "sched-grouper_seed-1_topology.host_mbps-50  scheduler.name=grouper seed=1 topology.host_mbps=50"]
    assert main(["sweep", str(path), "--list", "--only", "*grouper*"]) == 0
    assert capsys.readouterr().out == "sched-grouper_seed-1_topology.host_mbps-50  scheduler.name=grouper seed=1 " \
                                      "topology.host_mbps=50\n"
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()


def test_only_runs_the_matching_cells_and_keeps_the_others_rows(tmp_path, capsys):
    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1, 2]}), tmp_path / "out"
    runner = FakeRunner()
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=runner, only=["*seed-1"])
    assert runner.calls == ["sched-fs_seed-1", "sched-grouper_seed-1"]
    assert capsys.readouterr().out.startswith(f"sweep directory: {out} (4 cells, 2 chosen by --only, 2 to run, ")
    result = sweep_mod.run_any_sweep(path, out=str(out), run_cell=runner, only=["sched-grouper_*", "nothing"])
    assert runner.calls[2:] == ["sched-grouper_seed-2"] and [r["cell"] for r in result.rows] == [
        "sched-grouper_seed-1", "sched-grouper_seed-2"]
    with open(out / "results.csv", newline="") as f:
        assert [row["cell"] for row in csv.DictReader(f)] == ["sched-fs_seed-1", "sched-grouper_seed-1",
                                                              "sched-grouper_seed-2"]


def test_only_matching_no_cell_is_one_line_and_makes_no_directory(tmp_path, capsys):
    path = write(tmp_path, {"seeds": [1, 2]})
    assert main(["sweep", str(path), "--only", "sched-*", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == ("trainbed: error: --only: no cell id matches 'sched-*' (its 2 ids: trainbed "
                                       "sweep FILE --list)\n")
    assert not (tmp_path / "out").exists()


def test_the_eta_comes_from_the_cells_run_so_far_else_from_the_earlier_results(tmp_path, capsys):
    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), tmp_path / "out"
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner(fail={"grouper"}))
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["cell_s"] = "600"
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    capsys.readouterr()
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner())
    header, kept, _, ran = capsys.readouterr().out.splitlines()[:4]  # then the sweep's own summary
    assert header == f"sweep directory: {out} (2 cells, 1 to run, ETA 10 min)"
    assert kept.endswith("already done (avg_sct_s 11, trustworthy true); 1 to run, ETA 10 min")
    assert ran.endswith("(avg_sct_s 11, trustworthy true)")  # the last cell: nothing left
    with open(out / "results.csv", newline="") as f:
        assert next(csv.DictReader(f))["cell_s"] == "600.0"  # a kept cell keeps its duration


def test_durations_and_eta_text(tmp_path):
    (tmp_path / "results.csv").write_text("cell,wall_s,cell_s\na,5,30\nb,7,\nc,,\n")
    from experiments.results import durations
    assert durations(tmp_path) == {"a": 30.0, "b": 7.0} and durations(tmp_path / "none") == {}
    a, b, c, d = (sweep_mod.Cell(name, {}, {}) for name in "abcd")
    emulated = dict.fromkeys(["a", "b", "x"], "emulated")
    assert sweep_mod._eta([a, b, c], [], {}, {}) == "ETA unknown"
    assert sweep_mod._eta([a, b, c], [("emulated", 20.0), ("emulated", 30.0)], {"a": 1.0}, emulated) == "ETA 75 s"
    assert sweep_mod._eta([a, b, c, d], [], {"x": 1800.0}, emulated) == "ETA 2.0 h"
    # before any cell ran, each cell at its own earlier seconds, one the earlier run lacks at their mean
    assert sweep_mod._eta([a, b, c], [], {"a": 30.0, "b": 90.0}, emulated) == "ETA 3 min"
    assert sweep_mod._eta([a, b], [], {"a": 30.0, "b": 90.0}, emulated, slots={"emulated": 2}) == "ETA 60 s"
    assert sweep_mod._estimate([], [], {}, {}) == "0 s"


def test_a_mixed_sweep_estimates_each_backend_from_its_own_cells():
    """A simulated cell's seconds say nothing of an emulated one's: a cell is estimated
    from the cells of its backend (ran, or in the earlier run, where it ran on the same
    backend), else not at all; each backend at its own slots, the backends one after the
    other here, at the same time on a cluster."""
    model = [sweep_mod.Cell(f"m{n}", {}, {}, backend="simulated") for n in range(2)]
    testbed = [sweep_mod.Cell(f"t{n}", {}, {}, backend="emulated") for n in range(2)]
    backend_of = {cell.id: cell.backend for cell in model + testbed}
    assert sweep_mod._eta(testbed, [], {"m0": 1.0}, backend_of) == "ETA unknown"
    assert sweep_mod._eta(model[1:] + testbed, [], {"m0": 1.0, "t0": 300.0}, backend_of) == "ETA 10 min"
    assert sweep_mod._eta(testbed, [("simulated", 1.0), ("emulated", 120.0)], {}, backend_of) == "ETA 4 min"
    # a cell that ran on the other backend in the earlier run: its seconds are not this cell's
    assert sweep_mod._eta(testbed[:1], [], {"t0": 1.0}, {"t0": "simulated"}) == "ETA unknown"
    # one fabric slot and eight for the simulator: the emulated cells decide, on a cluster
    both = model + testbed
    slots = {"emulated": 1, "simulated": 8}
    earlier = {"m0": 80.0, "m1": 80.0, "t0": 300.0, "t1": 300.0}
    assert sweep_mod._eta(both, [], earlier, backend_of, slots) == "ETA 10 min"  # 20 s + 600 s, in turn
    assert sweep_mod._eta(both, [], earlier, backend_of, slots, together=True) == "ETA 10 min"  # 600 s at once
    assert sweep_mod._estimate(model, [], earlier, backend_of, slots, together=True) == "20 s"


def test_dry_run_checks_every_cell_and_writes_nothing(tmp_path, capsys):
    smoke = yaml.safe_load(Path("experiments/specs/grouper-smoke.yaml").read_text())
    path = write(tmp_path, {"backend": "simulated", "schedulers": ["fs", "grouper"], "seeds": [1],
                            "grid": {"workload.jobs": [2, 0]}}, smoke)
    assert main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[1/4] sched-fs_seed-1_workload.jobs-2: would run (simulated)"
    assert out[2].startswith("[3/4] sched-fs_seed-1_workload.jobs-0: INVALID: SpecError: workload.jobs: ")
    assert out[4] == ("2 of 4 cells would run, 2 invalid, 0 already done; estimated time unknown (no earlier run of "
                      "this sweep, in --out DIR, the results store or measurements/, timed a cell of each backend it "
                      "runs)")
    assert out[5] == "2 cells have an invalid spec: sched-fs_seed-1_workload.jobs-0, sched-grouper_seed-1_workload.jobs-0"
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()


def test_dry_run_of_a_directory_keeps_its_done_cells_and_estimates_from_them(tmp_path, capsys):
    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), tmp_path / "out"
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner(fail={"grouper"}))
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    capsys.readouterr()
    assert sweep_mod.dry_run(sweep_mod.load(path), out, validate=lambda spec: spec) == []
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["[1/2] sched-fs_seed-1: already done", "[2/2] sched-grouper_seed-1: would run (emulated)"]
    assert lines[2] == (f"1 of 2 cells would run, 1 already done; estimated 0 s (each cell as long as in {out}'s "
                        f"results.csv, 1 cell, a cell it lacks at the mean of those of its backend)")
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_dry_run_of_an_emulated_sweep_bounds_the_time_by_the_time_limits(tmp_path, capsys):
    path = write(tmp_path, {"schedulers": ["fs"], "seeds": [1, 2]})
    sweep_mod.dry_run(sweep_mod.load(path), None, validate=lambda spec: {**spec, "time_limit_s": 300})
    assert capsys.readouterr().out.splitlines()[-1].endswith("; at most 10 min by the cells' time_limit_s, plus "
                                                             "each bring-up")


def test_dry_run_refuses_what_the_run_would(tmp_path, monkeypatch):
    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), tmp_path / "out"
    code(monkeypatch, A)
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner(fail={"grouper"}))
    code(monkeypatch, B)
    with pytest.raises(SpecError, match=r"^--out: .* pass --force"):
        sweep_mod.dry_run(sweep_mod.load(path), out, validate=lambda spec: spec)
    assert sweep_mod.dry_run(sweep_mod.load(path), out, force=True, validate=lambda spec: spec) == []
    other = write(tmp_path, {"seeds": [1]}, base={**BASE, "seed": 5})
    with pytest.raises(SpecError, match=r"^--out: .* holds a sweep of a different base spec"):
        sweep_mod.dry_run(sweep_mod.load(other), out)


def test_each_cell_records_its_box_and_a_sweep_over_boxes_says_so(tmp_path, capsys):
    """A cell's row names the box that ran it (host name and boot id, from its
    environment.json) with the box's loop time; a sweep whose cells ran on two boxes
    says so in its summary and report."""
    def runner(spec, out_dir):
        run = store.start_run(spec, out_dir)
        (run / "summary.json").write_text(json.dumps({"completed": True, "trustworthy": True, "avg_sct_s": 1.0}))
        return run

    path, out = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1]}), tmp_path / "out"
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=runner)
    here = store.environment()
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [row["box"] for row in rows] == [store.box(here)] * 2
    assert store.box(here) == f"{here['machine']}/{here['boot_id'][:8]}"
    assert all(float(row["box_cpu_loop_ms"]) > 0 for row in rows)
    assert "more than one box" not in capsys.readouterr().out
    other = out / "cells" / "sched-grouper_seed-1" / "environment.json"
    other.write_text(json.dumps({**json.loads(other.read_text()), "boot_id": "0123456789abcdef", "cpu_loop_ms": 30.0}))
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=runner)  # both done: the rows are read again
    printed = capsys.readouterr().out
    assert (f"  cells ran on more than one box: {store.box(here)} (1 cell, CPU loop "
            f"{float(rows[0]['box_cpu_loop_ms']):.1f} ms), {here['machine']}/01234567 (1 cell, CPU loop 30.0 ms); "
            "compare cells across boxes with care\n") in printed
    assert "cells ran on more than one box" in (out / "report.html").read_text()
    assert store.box({"machine": "vm"}) is None


def test_before_any_cell_the_estimate_comes_from_the_newest_earlier_run_of_the_same_sweep(tmp_path, capsys):
    """Each cell at its seconds in the newest earlier run (in the results store, by when
    its record says it started) of a sweep of this name holding completed cells of its
    backend; a failed cell's seconds, runs of other sweeps and of the other backend are
    not counted; a cell the earlier run lacks at its cells' mean."""
    path = write(tmp_path, {"schedulers": ["fs", "grouper"], "seeds": [1, 2]})
    store_root = tmp_path / "results"
    # "old" written last (its results.csv the newest file) but started first, by its record
    for name, sweep_name, rows, age, started in (
            ("old", "s", [("sched-fs_seed-1", "true", 6000)], 0, "2026-11-28T10:00:00Z"),
            ("other", "t", [("sched-fs_seed-1", "true", 9000)], 0, "2026-11-29T23:00:00Z"),
            ("new", "s", [("sched-fs_seed-1", "true", 60), ("sched-grouper_seed-1", "true", 180),
                          ("sched-fs_seed-2", "false", 9000)], 100, "2026-11-29T10:00:00Z"),
            ("simulated", "s", [("sched-fs_seed-1", "true", 1)], 300, "2026-11-29T12:00:00Z")):
        run = store_root / name
        run.mkdir(parents=True)
        backend = "simulated" if name == "simulated" else "emulated"
        (run / "sweep.yaml").write_text(f"name: {sweep_name}\nbackend: {backend}\ncells: []\ntime_utc: '{started}'\n")
        (run / "results.csv").write_text("cell,completed,cell_s\n" + "".join(f"{c},{ok},{s}\n" for c, ok, s in rows))
        os.utime(run / "results.csv", (time.time() - age, time.time() - age))
    assert sweep_mod.dry_run(sweep_mod.load(path), None, validate=lambda spec: spec) == []
    # fs 1: 60, grouper 1: 180, the two seed-2 cells at the mean of the completed cells (120): 480 s
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"4 of 4 cells would run, 0 already done; estimated 8 min (each cell as long as in {store_root / 'new'}'s "
        f"results.csv, 2 cells, a cell it lacks at the mean of those of its backend)")
    sweep_mod.run_any_sweep(path, out=str(tmp_path / "out"), run_cell=FakeRunner(), only=["*seed-1"])
    assert capsys.readouterr().out.splitlines()[0] == (
        f"sweep directory: {tmp_path / 'out'} (4 cells, 2 chosen by --only, 2 to run, ETA 4 min by "
        f"{store_root / 'new'}, an earlier run)")


def test_a_directory_whose_cells_ran_on_the_other_backend_is_refused(tmp_path):
    """A sweep's backend changed between runs into one directory: its simulated cells
    are not the emulated cells done (nor the other way round)."""
    smoke = yaml.safe_load(Path("experiments/specs/grouper-smoke.yaml").read_text())
    path, out = write(tmp_path, {"backend": "simulated", "schedulers": ["fs"], "seeds": [1]}, smoke), tmp_path / "out"
    sweep_mod.run_any_sweep(path, out=str(out))
    emulated = write(tmp_path, {"backend": "emulated", "schedulers": ["fs"], "seeds": [1]}, smoke)
    for attempt in (lambda: sweep_mod.dry_run(sweep_mod.load(emulated), out),
                    lambda: sweep_mod.run_any_sweep(emulated, out=str(out), run_cell=FakeRunner())):
        with pytest.raises(SpecError, match=rf"^--out: {out}'s cell sched-fs_seed-1 ran on the simulated backend, "
                                            r"this sweep runs it emulated; choose a new directory$"):
            attempt()


def test_a_sweep_resumed_under_another_name_says_so(tmp_path, capsys):
    path, out = write(tmp_path, {"schedulers": ["fs"], "seeds": [1]}), tmp_path / "out"
    sweep_mod.run_any_sweep(path, out=str(out), run_cell=FakeRunner())
    renamed = sweep_mod.parse({**yaml.safe_load(path.read_text()), "name": "renamed"}, path)
    capsys.readouterr()
    sweep_mod.run_sweep(renamed, out, run_cell=FakeRunner())
    assert f"warning: {out} holds the sweep 's'; it is recorded as 'renamed' now" in capsys.readouterr().err
    assert yaml.safe_load((out / "sweep.yaml").read_text())["name"] == "renamed"
