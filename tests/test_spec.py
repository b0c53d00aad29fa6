import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from experiments.emulation import spec as spec_mod
from experiments.errors import SpecError

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
    assert spec["fidelity"] == spec_mod.FIDELITY_DEFAULTS
    assert len(spec_mod.fabric_of(spec).hosts) == 6


def test_the_timetable_is_a_workload_kind_spelled_or_implied():
    from experiments.runner import WORKLOAD_KINDS, _kind, validate_any
    spelled = dict(demo(), workload={"kind": "timetable"})
    assert _kind(spelled) == _kind(demo()) == "timetable" and "timetable" in WORKLOAD_KINDS
    assert validate_any(spelled) == validate_any(demo())
    with pytest.raises(SpecError) as err:
        spec_mod.validate(dict(demo(), workload={"kind": "timetable", "flows": 3}))
    assert err.value.field == "workload.flows"


def test_flow_duration_defaults_to_the_rest_of_the_run():
    raw = demo()
    del raw["flows"][0]["duration_s"]
    raw["flows"][0]["start_s"] = 4
    assert spec_mod.validate(raw)["flows"][0]["duration_s"] == 26.0


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
