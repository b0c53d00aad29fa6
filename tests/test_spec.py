import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from experiments.errors import SpecError
from experiments.platform import spec as platform_spec
from experiments.timetable import spec as spec_mod
from experiments.validation import read_yaml, shown_path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "experiments" / "specs" / "priority-demo.yaml"


def demo() -> dict:
    return yaml.safe_load(DEMO.read_text())


def test_demo_spec_resolves_with_defaults():
    spec = spec_mod.load(DEMO)
    assert spec["name"] == "priority-demo"
    assert spec["flows"][1] == {"name": "high", "src": "tbh5", "dst": "tbh1", "start_s": 8.0, "duration_s": 8.0,
                                "queue": 1}
    assert spec["policy_changes"][0]["rate_mbps"] == 40.0
    assert spec["fidelity"] == platform_spec.FIDELITY_DEFAULTS
    assert len(platform_spec.fabric_of(spec).hosts) == 6
    # the topology as the fabric was built: every parameter, the builder's defaults filled in
    bare = spec_mod.validate(dict(demo(), topology={"kind": "leaf_spine", "host_mbps": 50}))
    assert bare["topology"] == {"kind": "leaf_spine", "spines": 2, "leaves": 3, "hosts_per_leaf": 2,
                                "host_mbps": 50, "fabric_mbps": 100.0}


def test_queue_weights_resolve_to_the_fabrics_options():
    assert spec_mod.validate(demo())["emulation"]["queue_weights"] is None  # strict priority
    assert platform_spec.options_of(spec_mod.validate(demo())).queue_weights is None
    weighted = spec_mod.validate(dict(demo(), emulation={"queue_weights": [3, 1, 1, 1, 1, 1, 1.5]}))
    assert weighted["emulation"]["queue_weights"] == [3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5]
    assert platform_spec.options_of(weighted).queue_weights == (3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5)
    older = spec_mod.validate(demo())
    del older["emulation"]["queue_weights"]  # a run's spec.yaml from before queue weights
    assert platform_spec.options_of(older).queue_weights is None


@pytest.mark.parametrize("path", sorted((REPO / "experiments" / "specs").glob("*.yaml")), ids=lambda p: p.stem)
def test_a_resolved_spec_validates_to_itself(path):
    """A run's spec.yaml (the spec resolved) runs again as it is: validating a resolved
    spec changes nothing, for every shipped spec (checked for errors only, as a sweep
    checks its cells: an ETP search is left out, tested in test_gnn_place)."""
    from experiments.runner import validate_any
    from experiments.validation import errors_only
    raw, checked = read_yaml(path), 0
    with errors_only():
        for simulated in (False, True):
            try:
                resolved = validate_any(raw, simulated=simulated)
            except SpecError:  # e.g. a simulator-scale spec on the emulator, or a kind without a simulator
                continue
            assert validate_any(copy.deepcopy(resolved), simulated=simulated) == resolved
            checked += 1
    assert checked


def test_the_timetable_is_a_workload_kind_spelled_or_implied():
    from experiments.runner import KINDS, kind_of, validate_any
    spelled = dict(demo(), workload={"kind": "timetable"})
    assert kind_of(spelled) is kind_of(demo()) is KINDS["timetable"]
    assert validate_any(spelled) == validate_any(demo())
    with pytest.raises(SpecError) as err:
        spec_mod.validate(dict(demo(), workload={"kind": "timetable", "flows": 3}))
    assert err.value.field == "workload.flows"


def test_flow_duration_defaults_to_the_rest_of_the_run():
    raw = demo()
    del raw["flows"][0]["duration_s"]
    raw["flows"][0]["start_s"] = 4
    assert spec_mod.validate(raw)["flows"][0]["duration_s"] == 26.0


@pytest.mark.parametrize("duration, defaulted", [(8.5, False), (0.5, False), (100_000, False), (None, True)])
def test_a_flow_lasts_whole_seconds_as_iperf3_times_it(duration, defaulted):
    """iperf3's -t is whole seconds: 8.5 would run 8, 0.5 would run until stopped."""
    raw = demo()
    if defaulted:
        del raw["flows"][1]["duration_s"]
        raw["flows"][1]["start_s"] = 8.5  # the rest of the run: 21.5 s
    else:
        raw["flows"][1]["duration_s"] = duration
        raw["duration_s"] = 200_000  # the experiment holds the flow; iperf3 does not
    with pytest.raises(SpecError) as err:
        spec_mod.validate(raw)
    assert err.value.field == "flows[1].duration_s"
    assert "whole number of seconds" in str(err.value)
    assert ("duration_s - the flow's start_s" in str(err.value)) == defaulted


def test_a_sized_flow_takes_size_bytes_instead_of_a_duration():
    raw = demo()
    raw["flows"][1] = {"name": "high", "src": "tbh5", "dst": "tbh1", "start_s": 8, "size_bytes": 10_000_000, "queue": 1}
    raw["analysis"] = {"rate_limit": {"flow": "low"}}
    flow = spec_mod.validate(raw)["flows"][1]
    assert flow == {"name": "high", "src": "tbh5", "dst": "tbh1", "start_s": 8.0, "size_bytes": 10_000_000, "queue": 1}
    for change, field in (({"duration_s": 5}, "flows[1].duration_s"), ({"size_bytes": 0}, "flows[1].size_bytes"),
                          ({"size_bytes": 2.5}, "flows[1].size_bytes"), ({"size_bytes": 10**13}, "flows[1].size_bytes")):
        bad = copy.deepcopy(raw)
        bad["flows"][1].update(change)
        with pytest.raises(SpecError) as err:
            spec_mod.validate(bad)
        assert err.value.field == field, err.value
    raw["analysis"] = {"priority": {"high": "high", "low": "low"}}  # the analyses judge flows of a duration
    with pytest.raises(SpecError) as err:
        spec_mod.validate(raw)
    assert err.value.field == "analysis.priority.high" and "size_bytes" in err.value.problem


def test_the_analysis_names_two_flows_and_a_limit_it_can_judge():
    raw = demo()
    raw["analysis"]["priority"]["low"] = "high"
    with pytest.raises(SpecError) as err:
        spec_mod.validate(raw)
    assert err.value.field == "analysis.priority.low"
    raw = demo()
    raw["policy_changes"] = []
    with pytest.raises(SpecError) as err:
        spec_mod.validate(raw)
    assert err.value.field == "analysis.rate_limit.flow" and "never given a rate_mbps" in str(err.value)
    raw["flows"][0]["rate_mbps"] = 40  # limited from the start: judged
    assert spec_mod.validate(raw)["analysis"]["rate_limit"] == {"flow": "low"}


@pytest.mark.parametrize("start", [30, 45.5])
def test_a_flow_starting_at_or_after_the_end_is_named_by_its_start(start):
    raw = demo()
    del raw["flows"][0]["duration_s"]  # its default, the rest of the run, would be <= 0
    raw["flows"][0]["start_s"] = start
    with pytest.raises(SpecError) as err:
        spec_mod.validate(raw)
    assert err.value.field == "flows[0].start_s"
    assert str(err.value) == f"flows[0].start_s: {start:g} s is not before the experiment's duration_s 30"


def _set(raw, path, value):
    node = raw
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    last = keys[-1]
    if value is KeyError:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value


BAD = [
    ("name", KeyError, "name: is required"),
    ("name", "two words", "name: must be a non-empty word"),
    ("speed", 3, "speed: unknown field"),
    ("topology.kind", "torus", "topology.kind: unknown 'torus'"),
    ("topology.host_mbps", 100000, "topology.host_mbps: 100000 Mbit/s cannot be emulated"),
    ("topology.hosts_per_leaf", 0, "topology.hosts_per_leaf: must be an integer >= 1"),
    ("duration_s", -1, "duration_s: must be > 0"),
    ("tcp_congestion", "vegas", "tcp_congestion: must be one of cubic, bbr, reno"),
    ("flows", [], "flows: must be a non-empty list"),
    ("flows.0.dst", "tbh42", "flows[0].dst: 'tbh42' is not a host of the topology (tbh1..tbh6)"),
    ("flows.1.name", "low", "flows[1].name: duplicate flow name 'low'"),
    ("flows.1.queue", 0, "flows[1].queue: must be a scheduler queue 1..7"),
    ("flows.1.duration_s", 50, "flows[1].duration_s: flow ends at 58 s, after the experiment's duration_s 30"),
    ("flows.0.rate_mbps", "fast", "flows[0].rate_mbps: must be a number"),
    ("flows.0.colour", "red", "flows[0].colour: unknown field"),
    ("policy_changes.0.flow", "nope", "policy_changes[0].flow: 'nope' is not a flow"),
    ("policy_changes.0.rate_mechanism", "tbf", "policy_changes[0].rate_mechanism: must be one of host, meter"),
    ("analysis.priority.high", "ghost", "analysis.priority.high: 'ghost' is not a flow"),
    ("fidelity.min_cpu_idle", "x", "fidelity.min_cpu_idle: must be a number"),
    ("emulation.tcp_rto_min_ms", 0, "emulation.tcp_rto_min_ms: must be"),
    ("emulation.mtu", 9001, "emulation.mtu: must be"),
    ("emulation.mtu", "jumbo", "emulation.mtu: must be an integer"),
    ("emulation.ovs_instances", "per-switch", 'emulation.ovs_instances: must be an integer >= 1 or "per_switch"'),
    ("emulation.ovs_instances", 0, "emulation.ovs_instances: must be >= 1, got 0"),
    ("emulation.switch_buffer_bytes", 9000, "emulation.switch_buffer_bytes: must be in [18000, 4000000], got 9000"),
    ("emulation.switch_buffer_bytes", 1.5e5, "emulation.switch_buffer_bytes: must be an integer"),
    ("emulation.queue_weights", [2, 1], "emulation.queue_weights: must be a list of 7 weights"),
    ("emulation.switch_drop", "tail", "emulation.switch_drop: must be one of packet, batch"),
    ("flows.0.rate_mbps", 400, "flows[0].rate_mbps: 400 Mbit/s is above tbh3's link (100 Mbit/s): the limit could "
                               "never bind"),
    ("policy_changes.0.rate_mbps", 100.5, "policy_changes[0].rate_mbps: 100.5 Mbit/s is above tbh3's link"),
    ("emulation.queue_weights", [1, 1, 1, -1, 1, 1, 1], "emulation.queue_weights: every weight must be a finite "
                                                       "number > 0"),
]


@pytest.mark.parametrize("path, value, message", BAD, ids=[b[0] for b in BAD])
def test_bad_specs_get_one_line_errors_naming_the_field(path, value, message):
    raw = demo()
    _set(raw, path, copy.deepcopy(value))
    with pytest.raises(SpecError) as err:
        spec_mod.validate(raw)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_cli_prints_one_line_and_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    raw = demo()
    raw["flows"][0]["src"] = "tbh0"
    bad.write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, "-m", "experiments.cli", "run", str(bad), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr == "trainbed: error: flows[0].src: 'tbh0' is not a host of the topology (tbh1..tbh6)\n"
    assert not (tmp_path / "o").exists()  # nothing was started or created


def test_missing_and_malformed_files_are_named(tmp_path):
    with pytest.raises(SpecError, match="^spec: no such file"):
        spec_mod.load(tmp_path / "none.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match=r"^spec: .*broken.yaml is not valid YAML at line \d"):
        spec_mod.load(broken)
    # the parser's reason, and where the construct it was in began
    broken.write_text("name: x\nflows: {a: 1\nb: 2}\n")
    with pytest.raises(SpecError, match=r"is not valid YAML at line 3: expected ',' or '}', but got ':' "
                                        r"\(while parsing a flow mapping at line 2\)$"):
        spec_mod.load(broken)
    # a key given twice is refused (PyYAML alone keeps the last), at any depth; a merge may be overridden
    broken.write_text("name: x\nseed: 1\nname: y\n")
    with pytest.raises(SpecError, match=r"is not valid YAML at line 3: name is given twice \(first at line 1\)$"):
        spec_mod.load(broken)
    broken.write_text("flows:\n  - src: tbh1\n    src: tbh2\n")
    with pytest.raises(SpecError, match=r"at line 3: src is given twice \(first at line 2\)$"):
        spec_mod.load(broken)
    broken.write_text("name: x\nflows: [{src: tbh1, dst: tbh2, src: tbh3}]\n")  # one line, as the shipped specs
    with pytest.raises(SpecError, match=r"at line 2: src is given twice \(first at line 2\)$"):
        spec_mod.load(broken)
    merged = tmp_path / "merged.yaml"
    merged.write_text("a: &x {b: 1, c: 2}\nd:\n  <<: *x\n  b: 3\n")
    assert read_yaml(merged) == {"a": {"b": 1, "c": 2}, "d": {"b": 3, "c": 2}}


def _read_error(path) -> str:
    with pytest.raises(SpecError) as err:
        read_yaml(path)
    message = str(err.value)
    assert "\n" not in message and len(message) < 400, message
    return message


def test_read_yaml_names_each_way_a_file_cannot_be_read(tmp_path, monkeypatch):
    assert _read_error(tmp_path) == f"spec: {tmp_path} is a directory, not a file"
    huge = _read_error(tmp_path / ("x" * 100_000))
    assert huge.startswith(f"spec: cannot read {tmp_path}/xxx") and huge.endswith(" characters): File name too long")
    for odd in ("a\x00b", "a\nb"):
        assert _read_error(tmp_path / odd) == f"spec: no such file: {str(tmp_path / odd)!r}"
    assert _read_error(tmp_path / "none" / "x.yaml") == f"spec: no such file: {tmp_path / 'none' / 'x.yaml'}"
    (tmp_path / "file").write_text("a: 1\n")
    assert _read_error(tmp_path / "file" / "x.yaml").startswith("spec: no such file: ")
    os.mkfifo(tmp_path / "fifo")
    assert _read_error(tmp_path / "fifo") == f"spec: {tmp_path / 'fifo'} is not a regular file"
    (tmp_path / "latin1.yaml").write_bytes("name: caf\u00e9\n".encode("latin-1"))
    assert _read_error(tmp_path / "latin1.yaml") == f"spec: {tmp_path / 'latin1.yaml'} is not utf-8 text (at position 9)"
    (tmp_path / "control.yaml").write_bytes(b"name: a\x01b\n")
    assert _read_error(tmp_path / "control.yaml") == \
        f"spec: {tmp_path / 'control.yaml'} holds a control character (at position 7)"
    (tmp_path / "deep.yaml").write_text("[" * 20_000 + "]" * 20_000)
    assert _read_error(tmp_path / "deep.yaml") == f"spec: {tmp_path / 'deep.yaml'} is nested too deeply"
    (tmp_path / "locked.yaml").write_text("name: x\n")
    (tmp_path / "locked.yaml").chmod(0)

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))
    monkeypatch.setattr(Path, "read_bytes", denied)  # root reads any file: refuse as a user's read would be
    assert _read_error(tmp_path / "locked.yaml") == f"spec: cannot read {tmp_path / 'locked.yaml'}: Permission denied"


def test_read_yaml_names_its_field_and_what_the_file_is(tmp_path):
    with pytest.raises(SpecError, match=r"^sweep: no such sweep file: .*none.yaml$"):
        read_yaml(tmp_path / "none.yaml", "sweep", "sweep file")
    (tmp_path / "ok.yaml").write_text("a: [1, 2]\n")
    assert read_yaml(tmp_path / "ok.yaml") == {"a": [1, 2]} and read_yaml(str(tmp_path / "ok.yaml")) == {"a": [1, 2]}


def test_shown_paths_stay_short_and_on_one_line():
    assert shown_path("/a/b.yaml") == "/a/b.yaml"
    assert shown_path("/a/b\nc") == "'/a/b\\nc'"
    long = shown_path("/" + "y" * 5000)
    assert len(long) < 220 and long.endswith("y (5001 characters)")


@pytest.mark.parametrize("args", [["run", "DIR"], ["run", "DIR/" + "y" * 5000], ["run", "DIR/none.yaml"]])
def test_cli_run_of_a_path_that_is_no_spec_is_one_line(tmp_path, capsys, args):
    from experiments.cli import main
    assert main([arg.replace("DIR", str(tmp_path)) for arg in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainbed: error: spec: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("args, problem", [
    (["run", "SPEC", "--out", "FILE"], "FILE: is a file, not a directory"),
    (["simulate", "SPEC", "--out", "FILE/run"], "FILE/run: FILE is a file, not a directory"),
    (["sweep", "SPEC", "--out", "FILE"], "FILE: is a file, not a directory"),
    (["place", "SPEC", "--profile", "p.json", "--out", "DIR"], "DIR: is a directory; name the file to write"),
    (["place", "SPEC", "--profile", "p.json", "--out", "FILE/x.json"], "FILE/x.json: FILE is not a directory"),
])
def test_cli_out_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, args, problem):
    from experiments.cli import main
    (tmp_path / "file").write_text("")
    names = {"FILE": str(tmp_path / "file"), "DIR": str(tmp_path), "SPEC": "experiments/specs/priority-demo.yaml"}
    with pytest.raises(SystemExit) as exit_:
        main([names.get(a, a) if a in names else a.replace("FILE", names["FILE"]) for a in args])
    err = capsys.readouterr().err
    problem = problem.replace("FILE", names["FILE"]).replace("DIR", names["DIR"])
    assert exit_.value.code == 2 and err.splitlines()[-1].endswith(f"argument --out: {problem}"), err


def test_cli_run_out_into_a_sweep_directory_is_refused(tmp_path, capsys):
    from experiments.cli import main
    (tmp_path / "sweep.yaml").write_text("name: s\n")
    with pytest.raises(SystemExit):
        main(["simulate", "experiments/specs/grouper-sim-paper-smoke.yaml", "--out", str(tmp_path)])
    assert capsys.readouterr().err.splitlines()[-1].endswith("holds a sweep (sweep.yaml); choose a new directory")


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_cli_run_out_holding_a_run_is_refused_before_the_spec_is_read(tmp_path, capsys, monkeypatch, command):
    from experiments import runner
    from experiments.cli import main
    (tmp_path / "summary.json").write_text("{}")
    monkeypatch.setattr(runner, "read_spec", lambda path: pytest.fail("the spec was read"))
    with pytest.raises(SystemExit) as exit_:
        main([command, "experiments/specs/grouper-sim-paper-smoke.yaml", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"argument --out: {tmp_path}: already holds a run (summary.json); choose a new directory")


def test_a_directory_named_as_a_file_is_called_one(tmp_path):
    from experiments.validation import existing_file
    with pytest.raises(SpecError, match=r"^workload.trace: a directory, not a file: "):
        existing_file("workload.trace", str(tmp_path), base=tmp_path)
    with pytest.raises(SpecError, match=r"^workload.trace: no such file: "):
        existing_file("workload.trace", "none.csv", base=tmp_path)


@pytest.mark.parametrize("args, problem", [
    (["place", "experiments/specs/priority-demo.yaml", "--profile", "p.json"],
     "workload.kind: trainbed place searches a gnn job's placement; this is a timetable spec"),
    (["colocate", "experiments/specs/gnn-oes-smoke.yaml"], "kind: is a co-location spec's (training or inference)"),
    (["simulate", "EMPTY"], "spec: must be a mapping, got null"),
    (["run", "experiments/sweeps/grouper-smoke.yaml"],
     "spec: this is a sweep file (its spec: names a base spec): run it with trainbed sweep (--dry-run checks it)"),
    (["simulate", "experiments/specs/priority-demo.yaml"],
     "workload.kind: the simulator runs cojob or gnn specs; this is a timetable spec"),
])
def test_cli_a_spec_of_the_wrong_kind_is_named_so(tmp_path, capsys, args, problem):
    from experiments.cli import main
    (tmp_path / "empty.yaml").write_text("")
    assert main([a.replace("EMPTY", str(tmp_path / "empty.yaml")) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trainbed: error: {problem}") and err.count("\n") == 1, err


def test_trainbed_validate_checks_a_spec_as_run_or_simulate_would_and_starts_nothing(tmp_path, capsys):
    from experiments.cli import main
    specs = REPO / "experiments" / "specs"
    assert main(["validate", str(DEMO)]) == 0
    assert capsys.readouterr().out == f"{DEMO}: a valid timetable spec for the emulator\n"
    paper = specs / "grouper-sim-paper-smoke.yaml"
    assert main(["validate", str(paper), "--simulated"]) == 0
    assert capsys.readouterr().out.endswith("a valid cojob spec for the simulator\n")
    # the emulator refuses what only the simulator runs, and the simulator a kind it has no model of
    assert main(["validate", str(paper)]) == 2
    assert capsys.readouterr().err.startswith("trainbed: error: topology.host_mbps: 10000 Mbit/s")
    assert main(["validate", str(DEMO), "--simulated"]) == 2
    assert capsys.readouterr().err == (
        "trainbed: error: workload.kind: the simulator runs cojob or gnn specs; this is a timetable spec\n")
    raw = demo()
    raw["flows"][0]["dst"] = "tbh42"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(raw))
    assert main(["validate", str(tmp_path / "bad.yaml")]) == 2
    assert capsys.readouterr().err == ("trainbed: error: flows[0].dst: 'tbh42' is not a host of the topology "
                                       "(tbh1..tbh6)\n")
    # a mistyped `workload` makes the spec a timetable: the misspelling is named, not `seed`
    gnn = (specs / "gnn-oes-smoke.yaml").read_text()
    assert gnn.index("\nseed:") < gnn.index("\nworkload:")
    (tmp_path / "typo.yaml").write_text(gnn.replace("\nworkload:", "\nworkload_:"))
    assert main(["validate", str(tmp_path / "typo.yaml")]) == 2
    assert capsys.readouterr().err.startswith("trainbed: error: workload_: unknown field; did you mean workload? ")
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({"name": "s", "spec": str(DEMO), "seeds": [1]}))
    assert main(["validate", str(tmp_path / "sweep.yaml")]) == 2
    assert "sweep file" in capsys.readouterr().err
    # --resolved: the spec a run stores, which validates to itself
    assert main(["validate", str(DEMO), "--resolved"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved == spec_mod.load(DEMO) and resolved["flows"][1]["start_s"] == 8.0


def test_a_spec_names_a_file_beside_it_by_its_own_relative_path(tmp_path):
    """A spec kept with its own profile names it as it lies; a name with no file beside
    the spec is the checkout's, as the shipped specs' measurements/... are."""
    import shutil

    from experiments.runner import read_spec, validate_any
    raw = read_yaml(REPO / "experiments/specs/gnn-hetero-products-model.yaml")
    shipped = REPO / raw["simulation"]["profile"]
    shutil.copy(shipped, tmp_path / "profile.json")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({**raw, "simulation": {"profile": "profile.json"}}))
    mine = read_spec(tmp_path / "job.yaml")
    assert mine["simulation"]["profile"] == str(tmp_path / "profile.json")
    assert validate_any(mine, simulated=True)["simulation"]["profile"] == str(tmp_path / "profile.json")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(raw))  # measurements/...: not beside it
    assert read_spec(tmp_path / "job.yaml")["simulation"]["profile"] == raw["simulation"]["profile"]
    assert validate_any(read_spec(tmp_path / "job.yaml"), simulated=True)["simulation"]["profile"] == str(shipped)
