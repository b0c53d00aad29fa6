"""The registry of workload kinds: which kind a spec is, the one-line errors for a
spec that names none, and dispatch to a kind's validate, run and simulate."""
import copy
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from shipped_specs import SIMULATOR_ONLY

from experiments import kinds, runner
from experiments.errors import SpecError
from experiments.kinds import KINDS, kind_of

REPO = Path(__file__).resolve().parent.parent
SPECS = sorted((REPO / "experiments" / "specs").glob("*.yaml"))


def spec(name: str) -> dict:
    return yaml.safe_load((REPO / "experiments" / "specs" / f"{name}.yaml").read_text())


def expected_kind(raw: dict) -> str:
    if raw.get("kind") in ("training", "inference"):
        return "colocation"
    return (raw.get("workload") or {}).get("kind", "timetable")


def test_the_registry_holds_every_kind_with_callables():
    assert set(KINDS) == {"timetable", "cojob", "gnn", "programs", "colocation"}
    for name, kind in KINDS.items():
        assert kind.name == name and callable(kind.validate) and callable(kind.run) and kind.summary
        assert kind.simulate is None or callable(kind.simulate)
        with pytest.raises(dataclasses.FrozenInstanceError):
            kind.name = "other"
    assert kinds.workload_kinds() == ["cojob", "gnn", "programs", "timetable"]


def test_run_and_simulate_help_list_the_kinds_each_takes(capsys):
    from experiments.cli import build_parser
    for command, listed in (("run", set(KINDS)), ("simulate", {n for n, k in KINDS.items() if k.simulate})):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = capsys.readouterr().out.split("spec kinds")[1]
        shown = {line.split()[0] for line in text.splitlines()[1:] if line.strip()}
        assert shown == listed and listed >= {"cojob", "gnn"}
        for name in listed:
            assert KINDS[name].summary in " ".join(text.split())
        assert ("colocation" in text.splitlines()[0]) == ("colocation" in listed)  # the heading names what it lists


def test_version_names_the_package_and_the_commit(capsys):
    from experiments.cli import build_parser
    from experiments.store import git_state
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert re.match(r"trainbed (\d+\.\d+\.\d+|\(not installed\)), ", out), out
    commit = git_state()["git_commit"]
    assert (f"commit {commit[:12]}" if commit else git_state()["git_note"]) in out


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_shipped_spec_has_its_kind_and_validates(path, short_searches):
    raw = yaml.safe_load(path.read_text())
    kind = kind_of(raw)
    assert kind.name == expected_kind(raw)
    if path.stem not in SIMULATOR_ONLY:
        assert runner.validate_any(raw)["name"] == raw["name"]
        return
    with pytest.raises(SpecError, match=r"topology.host_mbps: 10000 Mbit/s cannot be emulated on this box"):
        runner.validate_any(raw)
    assert runner.validate_any(raw, simulated=True)["name"] == raw["name"]


def test_a_spec_without_a_workload_section_is_a_timetable_and_so_is_one_spelled_so():
    raw = spec("priority-demo")
    spelled = dict(raw, workload={"kind": "timetable"})
    assert kind_of(raw) is kind_of(spelled) is KINDS["timetable"]
    assert runner.validate_any(spelled) == runner.validate_any(raw)
    assert kind_of(["not", "a", "mapping"]) is KINDS["timetable"]  # whose validator names the root
    with pytest.raises(SpecError, match=r"^spec: must be a mapping, got a list of 3 items$"):
        runner.validate_any(["not", "a", "mapping"])


def test_colocation_is_recognised_by_its_top_level_kind():
    for name in ("colocate-smoke", "colocate-smoke-inference"):
        raw = spec(name)
        assert runner.is_colocation(raw) and kind_of(raw) is KINDS["colocation"]
    assert not runner.is_colocation(spec("grouper-smoke")) and not runner.is_colocation({"kind": ["training"]})


GNN_SMOKE = "gnn-oes-smoke"


@pytest.mark.parametrize("workload, message", [
    ({"kind": "GNN"}, "workload.kind: unknown workload kind 'GNN' (known: cojob, gnn, programs, timetable)"),
    ({"kind": {"name": "gnn"}}, "workload.kind: must be the name of a workload kind (cojob, gnn, programs, timetable), "
                                "got a mapping"),
    ({"kind": ["gnn"]}, "workload.kind: must be the name of a workload kind (cojob, gnn, programs, timetable), "
                        "got a list of 1 item"),
    ({"kind": None}, "workload.kind: must be the name of a workload kind (cojob, gnn, programs, timetable), got null"),
    ({"kind": "x" * 100_000}, "workload.kind: unknown workload kind 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                              "xxxxxxxxx... (known: cojob, gnn, programs, timetable)"),
    ({"graph": "cora"}, "workload.kind: is required (one of cojob, gnn, programs, timetable)"),
    (["gnn"], "workload: must be a mapping, got a list of 1 item"),
    (None, "workload: must be a mapping, got null"),
    ({"kind": "colocation"}, "workload.kind: 'colocation' is not a workload kind: a co-location spec has a "
                             "top-level kind: training or inference (and no workload section)"),
])
def test_a_workload_that_names_no_kind_is_one_line_naming_the_field(workload, message):
    raw = spec(GNN_SMOKE)
    raw["workload"] = workload
    with pytest.raises(SpecError) as err:
        kind_of(raw)
    assert str(err.value) == message
    with pytest.raises(SpecError) as err:
        runner.validate_any(raw)
    assert str(err.value) == message


def test_a_top_level_kind_that_is_not_colocation_is_named():
    raw = spec("colocate-smoke")
    raw["kind"] = "train"
    with pytest.raises(SpecError, match=r"^kind: must be training or inference \(a co-location spec\), got 'train'; "
                                        r"other kinds are set by workload.kind \(cojob, gnn, programs, timetable\)$"):
        runner.validate_any(raw)
    raw["kind"] = {"a": 1}
    with pytest.raises(SpecError, match=r"^kind: must be training or inference .* got a mapping;"):
        runner.validate_any(raw)


def test_a_kind_validates_only_its_own_workload_kind():
    raw = spec(GNN_SMOKE)
    raw["workload"] = {"kind": "gnn"}
    with pytest.raises(SpecError, match=r"^workload.graph: is required$"):
        runner.validate_any(raw)


def test_run_any_spec_runs_the_validated_spec_with_its_kind(monkeypatch, tmp_path):
    calls = []
    for name in KINDS:
        monkeypatch.setitem(KINDS, name, dataclasses.replace(
            KINDS[name], run=lambda resolved, out, name=name: calls.append((name, resolved, out)) or Path(out)))
    assert runner.run_any_spec(spec("grouper-smoke"), str(tmp_path)) == tmp_path
    assert runner.run_any_spec(spec("priority-demo"), "o") == Path("o")
    name, resolved, out = calls[0]
    assert name == "cojob" and resolved == runner.validate_any(spec("grouper-smoke")) and out == str(tmp_path)
    assert calls[1][0] == "timetable" and calls[1][1]["fidelity"]  # resolved: defaults filled
    with pytest.raises(SpecError, match=r"^workload.kind: unknown workload kind 'nope'"):
        runner.run_any_spec(dict(spec("grouper-smoke"), workload={"kind": "nope"}))
    assert len(calls) == 2


@pytest.mark.parametrize("name", ["programs-ddp", "priority-demo", "colocate-smoke"])
def test_simulating_a_kind_without_a_simulator_is_one_line(name):
    raw = spec(name)
    kind = kind_of(raw)
    available = ", ".join(n for n, k in KINDS.items() if k.simulate is not None) or "none yet"
    with pytest.raises(SpecError) as err:
        runner.simulate_any_spec(raw)
    assert str(err.value) == f"backend: simulated is not available for workload kind '{kind.name}' " \
                             f"(available: {available})"


def test_simulate_any_spec_simulates_the_spec_validated_for_the_simulator(monkeypatch):
    calls = []
    monkeypatch.setitem(KINDS, "gnn", dataclasses.replace(KINDS["gnn"], simulate=lambda s, out: calls.append(s)
                                                          or Path("sim"), validate_simulated=None))
    assert runner.simulate_any_spec(spec(GNN_SMOKE), "x") == Path("sim")
    assert calls == [runner.validate_any(spec(GNN_SMOKE))]  # without validate_simulated: validate
    monkeypatch.setitem(KINDS, "gnn", dataclasses.replace(KINDS["gnn"], validate_simulated=lambda raw: {"sim": 1}))
    assert runner.validate_any(spec(GNN_SMOKE), simulated=True) == {"sim": 1}
    assert runner.simulate_any_spec(spec(GNN_SMOKE), "x") == Path("sim") and calls[-1] == {"sim": 1}
    with pytest.raises(SpecError, match=r"^backend: simulated is not available for workload kind 'timetable' "
                                        r"\(available: cojob, gnn\)$"):
        runner.simulate_any_spec(spec("priority-demo"))


def test_reading_the_registry_imports_no_runner_nor_torch():
    code = ("import sys, experiments.runner, experiments.sweep; "
            "heavy = [m for m in ('torch', 'experiments.platform.net', 'experiments.cojob.runner', "
            "'experiments.gnn.runner', 'experiments.colocation.runner') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


@pytest.mark.parametrize("kind_value, got", [({"a": 1}, "a mapping"), (["cojob"], "a list of 1 item")])
def test_cli_run_of_a_workload_kind_that_is_a_mapping_or_list_is_one_line(tmp_path, capsys, kind_value, got):
    from experiments.cli import main
    raw = copy.deepcopy(spec("grouper-smoke"))
    raw["workload"]["kind"] = kind_value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == "trainbed: error: workload.kind: must be the name of a workload kind " \
                                      f"(cojob, gnn, programs, timetable), got {got}\n"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("raised, shown", [(RuntimeError("the controller did not start"), True),
                                           (NotImplementedError("a kind's missing step"), False),
                                           (RecursionError("maximum recursion depth exceeded"), False)])
def test_a_refused_request_is_one_line_and_a_bug_keeps_its_traceback(monkeypatch, capsys, raised, shown):
    from experiments import cli

    def fail(args):
        raise raised

    monkeypatch.setattr(cli, "_figures", fail)
    if shown:
        assert cli.main(["figures", "dgtp", "somewhere"]) == 2
        assert capsys.readouterr().err == f"trainbed: error: {raised}\n"
    else:
        with pytest.raises(type(raised)):
            cli.main(["figures", "dgtp", "somewhere"])
