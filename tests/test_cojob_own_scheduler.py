"""A cojob scheduler of the researcher's own, named ``module:function`` in a spec: checked at
validation, run by the one coordinator (so by the simulator and the emulation's driver
alike), its answers checked, its failures a run's one-line error."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from emulation_checks import assert_nothing_left, cpu_was_taken, netns_inodes

from experiments.cojob import metrics as grouper_metrics
from experiments.cojob import simulated
from experiments import sweep as sweep_mod
from experiments.cojob import spec as cojob_spec
from experiments.errors import SpecError
from experiments.platform.run import RunError
from experiments.platform.spec import fabric_of
from experiments.runner import read_spec
from experiments.validation import own_function

REPO = Path(__file__).resolve().parent.parent
SMOKE = "experiments/specs/grouper-smoke.yaml"
SCHEDULERS = "tests.cojob_schedulers"  # the researchers' schedulers the tests name


def _spec(name: str, seed: int = 1) -> dict:
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = name
    raw["seed"] = seed
    return simulated.validate(raw)


def _simulated(name: str, seed: int = 1) -> simulated.Result:
    return simulated.build_simulation(_spec(name, seed), simulated.VARIANTS["iterations+compute"]).run()


@pytest.mark.parametrize("seed", [1, 2])
def test_an_own_scheduler_that_calls_pda_decides_exactly_as_grouper_does(seed):
    """Same stages in, at the same moments (its period and every stage 0 start), same
    decisions and the same run: the plug-in sees what the built-in sees."""
    calls = importlib.import_module(SCHEDULERS).CALLS  # as the spec's import finds it
    calls.clear()
    own, builtin = _simulated(f"{SCHEDULERS}:pda_again", seed), _simulated("grouper", seed)
    assert len(calls) == len(builtin.decisions) > 3
    assert all(every >= running > 0 for every, running in calls)
    assert own.decisions == builtin.decisions
    assert own.events == builtin.events and own.end_s == builtin.end_s


def test_an_own_order_is_what_the_queues_follow_and_it_changes_the_result():
    """Largest first puts the big model's stage above the small one's: the small model's
    stages take longer than under Grouper (smallest first), the run's order says so."""
    workload = simulated.resolve(_spec("grouper")).workload.to_dict()
    own, builtin = _simulated(f"{SCHEDULERS}:largest_first"), _simulated("grouper")
    small = {name: grouper_metrics.summarise(result.events, workload)["per_model_avg_sct_s"]["deepspeech2"]
             for name, result in (("own", own), ("grouper", builtin))}
    assert small["own"] > 1.1 * small["grouper"]
    both = next(d["order"] for d in own.decisions if len(d["order"]) == 2)
    assert both == ["c1/s0", "c0/s0"]  # vgg19 (cojob 1) above deepspeech2 (cojob 0)


def test_an_own_scheduler_that_ranks_nothing_leaves_every_flow_in_the_lowest_queue():
    """As fair share: its decisions mark no flow, the stages end as under fs (its period's
    ticks only round the clock)."""
    own, fs = _simulated(f"{SCHEDULERS}:nothing"), _simulated("fs")
    assert own.decisions and all(d["order"] == [] and d["flows"] == 0 for d in own.decisions)
    assert [{**e, "t": pytest.approx(e["t"])} for e in own.events if e["kind"] != "decision"] == fs.events


def test_a_running_stage_left_out_of_the_order_has_its_flows_in_the_lowest_queue():
    result = _simulated(f"{SCHEDULERS}:first_only")
    both = next(d for d in result.decisions if len(d["order"]) == 1 and d["t"] > 0)
    assert both["order"] == ["c0/s0"] and both["flows"] == 16  # c0's 16 flows marked, c1's left in the lowest
    assert result.events[-1]["kind"] == "cojob_end"


def test_an_empty_order_after_a_ranked_one_takes_the_marks_away():
    calls = importlib.import_module(SCHEDULERS).CALLS
    calls.clear()
    decisions = _simulated(f"{SCHEDULERS}:pda_once").decisions
    assert decisions[0]["flows"] > 0 and decisions[0]["order"]
    assert len(decisions) > 3 and all(d == {**d, "order": [], "flows": 0} for d in decisions[1:])


def test_what_an_own_scheduler_does_to_its_stages_does_not_reach_the_coordinators():
    own, builtin = _simulated(f"{SCHEDULERS}:pda_emptying_loads"), _simulated("grouper")
    assert own.decisions == builtin.decisions and own.events == builtin.events


@pytest.mark.parametrize("name, says", [
    ("sptf", "must be one of fs, baraat, sincronia, sincronia-stage, grouper, grouper-immediate, grouper-offline "
             "or a scheduler of your own as module:function, got 'sptf'"),
    (f"{SCHEDULERS}:absent", f"{SCHEDULERS}:absent: cannot import it (AttributeError"),
    ("no_such_module_here:f", "cannot import it (ModuleNotFoundError"),
    (f"{SCHEDULERS}:NOT_A_FUNCTION", "is not a function (every: list[Stage], running: list[Stage]) -> [stage id, ...]"),
    (f"{SCHEDULERS}:one_argument", "takes (running), not (every: list[Stage], running: list[Stage])"),
    ({"module": "m"}, "must be one of fs, baraat"),
    (["grouper"], "must be one of fs, baraat"),
])
def test_a_scheduler_name_it_cannot_run_is_refused_in_one_line(name, says):
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = name
    for validate in (cojob_spec.validate, simulated.validate):
        with pytest.raises(SpecError, match=r"^scheduler\.name: ") as err:
            validate(raw)
        assert says in str(err.value) and "\n" not in str(err.value), err.value


@pytest.mark.parametrize("source, says", [
    ("def f(every, running)\n", "cannot import it (SyntaxError: "),
    ("raise RuntimeError('no licence\\nsecond line')\n", "cannot import it (RuntimeError: no licence)"),
    ("x = 1 / 0\n", "cannot import it (ZeroDivisionError: division by zero)"),
])
def test_a_module_that_fails_at_import_is_refused_in_one_line(tmp_path, monkeypatch, source, says):
    (tmp_path / "broken_sched.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = "broken_sched:f"
    with pytest.raises(SpecError, match=r"^scheduler\.name: broken_sched:f: ") as err:
        cojob_spec.validate(raw)
    assert says in str(err.value) and "\n" not in str(err.value), err.value


def test_the_trainbed_command_finds_a_scheduler_where_it_runs_and_the_run_keeps_it(tmp_path):
    """The console script puts no directory on the path (python -m puts the current one):
    the module in the directory it runs in, the spec elsewhere. The run directory keeps a
    copy beside its spec.yaml, which validates again from anywhere."""
    (tmp_path / "mysched.py").write_text(
        "def busiest_port_first(every, running):\n"
        "    return [s.stage_id for s in sorted(running, key=lambda s: max(s.loads.values()))]\n")
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = "mysched:busiest_port_first"
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "own.yaml").write_text(yaml.safe_dump(raw))
    trainbed = Path(sys.executable).parent / "trainbed"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(trainbed), "simulate", "specs/own.yaml", "--out", "run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] and summary["scheduler"] == "mysched:busiest_port_first"
    assert (tmp_path / "run" / "mysched.py").read_text() == (tmp_path / "mysched.py").read_text()
    proc = subprocess.run([str(trainbed), "validate", str(tmp_path / "run" / "spec.yaml"), "--simulated"],
                          cwd=tmp_path / "specs", env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_run_keeps_a_copy_of_its_schedulers_package_and_validates_again_from_it(tmp_path, monkeypatch):
    """A package of your own (mypkg.sched:f) beside its spec: the run directory keeps the
    package, its caches left out, and the run's spec.yaml finds it there."""
    from experiments.kinds import read_spec as read_spec_file
    from experiments.runner import simulate_any_spec
    package = tmp_path / "kept" / "ownpkg_sched"
    (package / "orders").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "orders" / "__init__.py").write_text(
        "from ownpkg_sched.orders.rule import first\n")
    (package / "orders" / "rule.py").write_text("def first(every, running):\n    return []\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "stale.pyc").write_bytes(b"x")
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = "ownpkg_sched.orders:first"
    (tmp_path / "kept" / "own.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(sys, "path", list(sys.path))  # what the read adds goes with the test
    run = simulate_any_spec(simulated.validate(read_spec_file(tmp_path / "kept" / "own.yaml")), str(tmp_path / "run"))
    assert json.loads((run / "summary.json").read_text())["completed"]
    kept = sorted(str(f.relative_to(run / "ownpkg_sched")) for f in (run / "ownpkg_sched").rglob("*") if f.is_file())
    assert kept == ["__init__.py", "orders/__init__.py", "orders/rule.py"]
    assert simulated.validate(read_spec_file(run / "spec.yaml"))["scheduler"]["name"] == "ownpkg_sched.orders:first"


def _own_package(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("def first(every, running):\n    return []\n")
    importlib.invalidate_caches()
    importlib.import_module(name)


def test_a_package_in_the_checkout_or_installed_is_not_copied_into_a_run(tmp_path, monkeypatch):
    import subprocess

    from experiments import validation
    monkeypatch.setattr(sys, "path", [str(tmp_path / "checkout"), *sys.path])
    _own_package(tmp_path / "checkout", "inside_pkg")
    _own_package(tmp_path / "checkout", "untracked_pkg")
    git = ["git", "-C", str(tmp_path / "checkout"), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "inside_pkg/__init__.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    monkeypatch.setattr(validation, "REPO_ROOT", tmp_path / "checkout")  # the run's commit holds inside_pkg
    (tmp_path / "run").mkdir()
    validation.keep_beside("inside_pkg:first", tmp_path / "run")
    assert list((tmp_path / "run").iterdir()) == []
    validation.keep_beside("untracked_pkg:first", tmp_path / "run")  # in the checkout, in no commit
    assert (tmp_path / "run" / "untracked_pkg" / "__init__.py").is_file()
    # tracked, then edited: the commit no longer holds what runs
    (tmp_path / "checkout" / "inside_pkg" / "__init__.py").write_text("def first(every, running):\n    return [1]\n")
    validation.keep_beside("inside_pkg:first", tmp_path / "edited")
    assert "return [1]" in (tmp_path / "edited" / "inside_pkg" / "__init__.py").read_text()
    subprocess.run([*git, "checkout", "-q", "--", "inside_pkg/__init__.py"], check=True)
    monkeypatch.setattr(validation, "REPO_ROOT", tmp_path / "elsewhere")
    validation.keep_beside("inside_pkg:first", tmp_path / "run")
    assert (tmp_path / "run" / "inside_pkg" / "__init__.py").is_file()
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # an installed environment
    validation.keep_beside("inside_pkg:first", tmp_path / "run2")
    assert not (tmp_path / "run2").exists()


def test_a_package_that_cannot_be_copied_is_a_warning_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    from experiments import validation
    monkeypatch.setattr(sys, "path", [str(tmp_path / "own"), *sys.path])
    _own_package(tmp_path / "own", "linked_pkg")
    (tmp_path / "own" / "linked_pkg" / ".#lock").symlink_to(tmp_path / "nowhere")  # an editor's dangling lock
    (tmp_path / "own" / "linked_pkg" / "data").symlink_to(tmp_path)  # a link back up: kept as a link, not walked
    (tmp_path / "run").mkdir()
    validation.keep_beside("linked_pkg:first", tmp_path / "run")
    kept = tmp_path / "run" / "linked_pkg"
    assert (kept / "__init__.py").is_file() and (kept / "data").is_symlink() and (kept / ".#lock").is_symlink()
    validation.keep_beside("linked_pkg:first", tmp_path / "run")  # a second time: the run has one already
    assert capsys.readouterr().err == (f"run: warning: linked_pkg:first's module {tmp_path / 'own' / 'linked_pkg'} "
                                       "is not copied into the run directory (FileExistsError: the run directory "
                                       "has a linked_pkg of its own)\n")


def test_a_scheduler_module_kept_beside_its_spec_or_sweep_is_found_there(tmp_path, monkeypatch):
    """As a spec's profile or trace beside it: wherever the command runs."""
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "beside_sched.py").write_text("def first(every, running):\n    return []\n")
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = "beside_sched:first"
    (tmp_path / "kept" / "own.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # what the read adds goes with the test
    with pytest.raises(SpecError, match="beside_sched:first: cannot import it"):
        cojob_spec.validate(raw)  # not from where the command runs
    from experiments.kinds import read_spec as read_spec_file
    assert cojob_spec.validate(read_spec_file(tmp_path / "kept" / "own.yaml"))["scheduler"]["name"] == \
        "beside_sched:first"
    (tmp_path / "kept2").mkdir()
    (tmp_path / "kept2" / "beside_sched2.py").write_text("def first(every, running):\n    return []\n")
    (tmp_path / "kept2" / "sweep.yaml").write_text(yaml.safe_dump(
        {"name": "own", "spec": str(REPO / SMOKE), "backend": "simulated", "schedulers": ["beside_sched2:first"]}))
    assert [cell.spec["scheduler"]["name"] for cell in sweep_mod.load(tmp_path / "kept2" / "sweep.yaml").cells] \
        == ["beside_sched2:first"]


def test_two_modules_of_one_name_beside_two_specs_are_refused_not_confused(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))  # the modules imported here go with the test
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = "twin_sched:first"
    from experiments.kinds import read_spec as read_spec_file
    for folder, answer in (("a", "[]"), ("b", "[running[0].stage_id]")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "twin_sched.py").write_text(f"def first(every, running):\n    return {answer}\n")
        (tmp_path / folder / "own.yaml").write_text(yaml.safe_dump(raw))
    cojob_spec.validate(read_spec_file(tmp_path / "a" / "own.yaml"))
    with pytest.raises(SpecError, match=r"^scheduler\.name: twin_sched:first: another module twin_sched is loaded "
                                        r"already, from .*/a/twin_sched.py, not this one from .*/b/twin_sched.py"):
        read_spec_file(tmp_path / "b" / "own.yaml")


def test_two_packages_of_one_name_that_differ_past_their_init_are_refused(tmp_path, monkeypatch):
    """The same __init__.py, another submodule: other code all the same."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = "twin_pkg.rank:first"
    from experiments.kinds import read_spec as read_spec_file
    for folder, answer in (("a", "[]"), ("b", "[running[0].stage_id]"), ("c", "[]")):
        (tmp_path / folder / "twin_pkg").mkdir(parents=True)
        (tmp_path / folder / "twin_pkg" / "__init__.py").write_text("")
        (tmp_path / folder / "twin_pkg" / "rank.py").write_text(f"def first(every, running):\n    return {answer}\n")
        (tmp_path / folder / "own.yaml").write_text(yaml.safe_dump(raw))
    cojob_spec.validate(read_spec_file(tmp_path / "a" / "own.yaml"))
    read_spec_file(tmp_path / "c" / "own.yaml")  # a copy of the same package (a run's): the same code
    with pytest.raises(SpecError, match=r"another module twin_pkg is loaded already, from .*/a/twin_pkg/__init__.py"):
        read_spec_file(tmp_path / "b" / "own.yaml")


@pytest.mark.parametrize("name, says", [
    ("a" * 300 + ":f", "cannot import it (ModuleNotFoundError"),  # a file name too long to look for beside it
    ("exits_sched:f", "cannot import it (SystemExit: 2)"),
])
def test_odd_modules_are_one_line_too(tmp_path, monkeypatch, name, says):
    (tmp_path / "exits_sched.py").write_text("import sys\nsys.exit(2)\n")
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = name
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(sys, "path", list(sys.path))
    from experiments.kinds import read_spec as read_spec_file
    with pytest.raises(SpecError, match=r"^scheduler\.name: ") as err:
        cojob_spec.validate(read_spec_file(tmp_path / "own.yaml"))
    assert says in str(err.value) and "\n" not in str(err.value), err.value


def test_a_sweeps_scheduler_with_fields_is_refused_with_where_to_set_them(tmp_path):
    raw = {"name": "own", "spec": str(REPO / SMOKE), "backend": "simulated",
           "schedulers": ["fs", {"name": "grouper", "period_s": 1}]}
    with pytest.raises(SpecError, match=r"^schedulers\[1\]: must be a scheduler name or module:function, got a "
                                        r"mapping; set a scheduler's other fields with grid: "):
        sweep_mod.parse(raw)


@pytest.mark.parametrize("function, says", [
    ("fails", "raised KeyError: 'no such port'"),
    ("unknown_stage", "returned unknown stage id 'c9/s9' (given: c0/s0, c0/s1"),
    ("twice", "returned a stage id twice"),
    ("not_a_list", "must return a list of stage ids, got a mapping"),
])
def test_an_own_scheduler_that_fails_or_answers_wrong_ends_the_run_with_its_name(tmp_path, function, says):
    """The run directory stays usable: summary.json says what the scheduler did."""
    name = f"{SCHEDULERS}:{function}"
    with pytest.raises(RunError, match="run did not complete"):
        simulated.simulate_spec(_spec(name), str(tmp_path / "run"))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] is False and summary["error"].startswith(f"PluginError: scheduler {name} ")
    assert says in summary["error"], summary["error"]


def test_the_models_table_takes_an_own_scheduler_beside_the_built_in_ones(capsys):
    simulated.main([SMOKE, "--seeds", "1", "--schedulers", "grouper", f"{SCHEDULERS}:pda_again", "--variants", "bulk"])
    lines = capsys.readouterr().out.splitlines()
    own, builtin = (next(line for line in lines if f"| bulk | {name} |" in line)
                    for name in (f"{SCHEDULERS}:pda_again", "grouper"))
    assert own.split("|")[3:] == builtin.split("|")[3:]  # same SCT, vs FS, CoJCT and JCT
    with pytest.raises(SystemExit, match="^simulated: --schedulers: nope:absent: cannot import it"):
        simulated.main([SMOKE, "--schedulers", "nope:absent"])



def test_a_sweep_compares_an_own_scheduler_with_the_built_in_ones(tmp_path):
    raw = {"name": "own", "spec": str(REPO / SMOKE), "backend": "simulated", "seeds": [1],
           "schedulers": ["grouper", f"{SCHEDULERS}:largest_first"]}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    result = sweep_mod.run_any_sweep(tmp_path / "sweep.yaml", out=str(tmp_path / "out"))
    assert result.failed == []
    assert [(row["cell"], row["scheduler"]) for row in result.rows] == [
        ("sched-grouper_seed-1", "grouper"),
        ("sched-tests.cojob-schedulers-largest-first_seed-1", f"{SCHEDULERS}:largest_first")]
    raw["schedulers"] = ["grouper", "no.such:thing"]
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match="no.such:thing: cannot import it"):
        sweep_mod.run_any_sweep(tmp_path / "sweep.yaml", out=str(tmp_path / "out2"))
    assert not (tmp_path / "out2").exists()

@pytest.mark.root
def test_an_own_scheduler_runs_on_the_fabric_and_its_order_is_on_the_wire(tmp_path, private_state):
    """``trainbed run`` with largest-first: the driver calls it, its decisions put the big
    model's flows in the higher queues, and the packets carry the marks it decided."""
    namespaces = netns_inodes()
    raw = read_spec(SMOKE)
    raw["scheduler"]["name"] = f"{SCHEDULERS}:largest_first"
    spec_path = tmp_path / "own.yaml"
    spec_path.write_text(yaml.safe_dump(raw))
    fabric = fabric_of(cojob_spec.validate(raw))
    for attempt in range(2):  # again only when the run says the box took its CPU
        run = tmp_path / f"run{attempt}"
        proc = subprocess.run([sys.executable, "-m", "experiments.cli", "run", str(spec_path), "--out", str(run)],
                              cwd=REPO, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        summary = json.loads((run / "summary.json").read_text())
        # What no shortage of CPU excuses: the run completed, the own scheduler decided
        # (its order by bytes left, whatever the timing), and nothing was left running.
        assert summary["completed"] and summary["scheduler"] == raw["scheduler"]["name"]
        assert summary["stages_completed"] == 4 and summary["decisions"] >= 3
        decisions = [json.loads(line) for line in (run / "decisions.jsonl").read_text().splitlines()]
        assert any(d["order"][:2] == ["c1/s0", "c0/s0"] for d in decisions), [d["order"] for d in decisions]
        assert_nothing_left(fabric, private_state, run, namespaces)
        if not cpu_was_taken(summary):
            break
    else:
        pytest.skip(f"the emulation cannot be judged on this box now: {cpu_was_taken(summary)}")
    # a run's sample is 180-970 packets, as the box's timing decides how many a capture
    # window catches (CI met 189 and 180; tests/test_grouper_emulated.py pools three runs)
    assert summary["conformance"]["sampled_packets"] > 100
    assert summary["conformance"]["dscp_match_share"] >= 0.95


def test_an_own_module_edited_between_two_validations_in_one_process_is_imported_again(tmp_path, monkeypatch):
    """A notebook that edits its scheduler and runs again runs the edit; an unedited
    module is not imported again (its state, as CALLS, stays)."""
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "edited_sched.py"
    module.write_text("def order(every, running):\n    return []\n")
    first = own_function("edited_sched:order", "(every, running)", 2)
    assert own_function("edited_sched:order", "(every, running)", 2) is first  # unchanged: the same function
    module.write_text("def order(every, running):\n    return sorted(running)  # edited\n")
    os.utime(module, ns=(module.stat().st_atime_ns, module.stat().st_mtime_ns + 2_000_000_000))
    edited = own_function("edited_sched:order", "(every, running)", 2)
    assert edited is not first and edited([], [2, 1]) == [1, 2]
