"""Malformed specs and sweeps end in one-line SpecErrors that start with a field path,
never in another exception: every shipped spec (experiments/specs/*.yaml) and sweep
(experiments/sweeps/*.yaml), mutated at random at any depth, is either accepted or
refused that way. A mutation replaces a value by one of a wrong type, deletes a field
or item, adds an unknown field (of an odd name too), swaps a list for a mapping or a
mapping for a list, puts a huge string (100,000 characters) at a scalar, or gives a
scalar another type. Validation only: nothing is run. Plus the helpers of
``experiments.validation`` and the cases that used to escape as TypeErrors."""
import contextlib
import copy
import functools
import json
import os
import re
import shutil
import traceback
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_specs import SIMULATOR_ONLY

from controller.policy import FlowPolicy, PolicyError
from controller.policy import validate as validate_policy
from experiments import sweep as sweep_mod
from experiments import validation as v
from experiments.cojob.spec import build_workload
from experiments.colocation.spec import validate as validate_colocation
from experiments.errors import SpecError
from experiments.platform import spec as platform_spec
from experiments.runner import KINDS, kind_of, validate_any
from experiments.timetable import spec as emulation
from topologies import fabric as fabric_mod
from topologies.fabric import leaf_spine

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"
SPECS = sorted((EXPERIMENTS / "specs").glob("*.yaml"))
SWEEPS = sorted((EXPERIMENTS / "sweeps").glob("*.yaml"))
# a searched placement's full search per accepted mutation would take minutes
pytestmark = pytest.mark.usefixtures("short_searches")
RAW = {path.stem: yaml.safe_load(path.read_text()) for path in SPECS}
SWEEP_RAW = {path.stem: yaml.safe_load(path.read_text()) for path in SWEEPS}
# A field path: a name, then .field, [index] or ['odd key'] steps; `spec` is the root itself.
FIELD_PATH = re.compile(r"^([\w-]+|\[.+?\])(\.[\w-]+|\[.+?\])*$", re.DOTALL)
EXAMPLES = 200  # per file: about 30 files in under half a minute on two idle cores
MAX_CELLS = 24  # a sweep's cells whose specs are validated too

HUGE = "x" * 100_000
HUGE_LINES = "a: b\n- c\n" * 12_000  # 108,000 characters on 24,000 lines
# Values and field names are picked from these by index (so that a failing case's
# report shows the index, not 100,000 characters), or else drawn.
WRONG_VALUES = [{"x": 1}, {}, [1, 2], [], ["cora"], [[]], [{}], {"a": {"b": [1]}}, "text", "", " ", "tbh99", "tbh0",
                "GCN", "cojob", "a\nb", "\x00", True, False, None, 1.5, -3, 0, -0.0, float("nan"), float("inf"),
                -float("inf"), 10**12, 10**400, HUGE, HUGE_LINES]
DRAWN_VALUES = st.one_of(st.integers(min_value=-10**6, max_value=10**6), st.floats(allow_nan=True, allow_infinity=True),
                         st.text(max_size=8))
UNKNOWN_KEYS = ["a: b\nc", "x y", "", HUGE, True, None, 1.5, 0, -1, "kind", "workload"]
DRAWN_KEYS = st.one_of(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), st.text(max_size=6))
OPERATIONS = ("replace", "delete", "add", "swap", "huge", "retype")


def paths(node, prefix=()) -> list[tuple]:
    """Every place in a parsed spec: the root, each mapping field and list item."""
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += paths(child, prefix + (key,))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += paths(child, prefix + (i,))
    return found


def node_at(raw, path: tuple):
    for key in path:
        raw = raw[key]
    return raw


def swapped(node, choice: int):
    """A list as a mapping, a mapping as a list (of its values, keys or one-field mappings)."""
    if isinstance(node, list):
        return [{i: item for i, item in enumerate(node)}, {str(i): item for i, item in enumerate(node)},
                {"items": node}][choice % 3]
    return [list(node.values()), list(node), [{key: value} for key, value in node.items()], [node]][choice % 4]


def retyped(value) -> list:
    """The same value as other types: ``"5"`` for 5, ``5`` for ``"5"``, ``[v]``, ``{v: v}``..."""
    others = [str(value), [value], {"value": value}, None]
    if isinstance(value, bool):
        others += [int(value), "yes" if value else "no", "true"]
    elif isinstance(value, (int, float)):
        others += [-value, value * 10**6, not value, f"{value} s", float(value) if abs(value) < 10**300 else "1e400"]
        if isinstance(value, float) and value == value and abs(value) != float("inf"):
            others += [int(value), round(value, 1) + 0.5]
    elif isinstance(value, str):
        others += [value.upper(), f" {value}", f"{value}\n", value * 3, 1, 1.0, True, value.split("-")]
    else:
        others += [0, "null", "~", False]
    return others


def huge(value) -> list:
    text = str(value) or "x"
    return [HUGE, HUGE_LINES, (text * (100_000 // len(text) + 1))[:100_000], "9" * 100_000]


def pick(draw, options: list, drawn=None):
    """One of ``options`` by its index, or (for the last few indices) a ``drawn`` value."""
    i = draw(st.integers(0, len(options) - 1 + (3 if drawn is not None else 0)))
    return copy.deepcopy(options[i]) if i < len(options) else draw(drawn)


def mutated(draw, raw):
    """``raw`` with 1-3 mutations. Drawn values are copied: later mutations edit them."""
    raw = copy.deepcopy(raw)
    for _ in range(draw(st.integers(1, 3))):
        operation = draw(st.sampled_from(OPERATIONS))
        everywhere = paths(raw)
        candidates = {
            "delete": [p for p in everywhere if p],
            "add": [p for p in everywhere if isinstance(node_at(raw, p), (dict, list))],
            "swap": [p for p in everywhere if isinstance(node_at(raw, p), (dict, list))],
            "huge": [p for p in everywhere if not isinstance(node_at(raw, p), (dict, list))],
            "retype": [p for p in everywhere if not isinstance(node_at(raw, p), (dict, list))],
        }.get(operation) or everywhere
        path = draw(st.sampled_from(candidates))
        node = node_at(raw, path)
        if operation == "delete" and path:
            del node_at(raw, path[:-1])[path[-1]]
            continue
        if operation == "add" and isinstance(node, dict):
            node[pick(draw, UNKNOWN_KEYS, DRAWN_KEYS)] = pick(draw, WRONG_VALUES, DRAWN_VALUES)
            continue
        if operation == "add" and isinstance(node, list):
            node.insert(draw(st.integers(0, len(node))), pick(draw, WRONG_VALUES, DRAWN_VALUES))
            continue
        if operation == "swap" and isinstance(node, (dict, list)):
            new = swapped(node, draw(st.integers(0, 11)))
        elif operation == "huge":
            new = pick(draw, huge(node))
        elif operation == "retype":
            new = pick(draw, retyped(node))
        else:
            new = pick(draw, WRONG_VALUES, DRAWN_VALUES)
        new = copy.deepcopy(new)
        if path:
            node_at(raw, path[:-1])[path[-1]] = new
        else:
            raw = new
    return raw


def assert_accepted_or_one_line_error(validate, raw) -> None:
    problem = None
    try:
        validate(raw)
    except SpecError as err:
        message = str(err)
        assert "\n" not in message, message[:500]
        assert message.startswith(f"{err.field}: ") and err.problem, message[:500]
        assert FIELD_PATH.match(err.field), message[:500]
    except Exception as err:  # noqa: BLE001 - reported short: its message may hold a 100,000-character value
        frame = [f for f in traceback.extract_tb(err.__traceback__) if str(REPO) in f.filename][-1]
        problem = (f"{type(err).__name__} instead of a SpecError, at {Path(frame.filename).relative_to(REPO)}:"
                   f"{frame.lineno}: {str(err)[:300]}")
    if problem:  # outside the handler: no chained traceback repeating the long message
        raise AssertionError(problem)


def check_spec(raw, simulated: bool = False) -> None:
    """What a run checks before it starts anything: the spec, then the fabric or the
    workload built from it. (Not a co-location queue's tasks: nothing bounds their
    count, so a mutant could take hours to build them.) ``simulated``: as the
    simulator checks it, with its link rates and, where the kind has a simulator, its
    own validation."""
    with fabric_mod.simulated_rates() if simulated else contextlib.nullcontext():
        spec = validate_any(raw, simulated=simulated and kind_of(raw).simulate is not None)
        name = kind_of(raw).name
        if name == "timetable":
            platform_spec.fabric_of(spec)
        elif name == "cojob":
            build_workload(spec)


@functools.cache
def checker(name: str):
    """How a shipped spec's mutants are checked: as for an emulated run, or as the
    simulator checks a spec written for it."""
    if name not in SIMULATOR_ONLY:
        return check_spec
    return functools.partial(check_spec, simulated=True)


def check_sweep(path: Path, raw) -> None:
    """A sweep as ``trainbed sweep`` loads it, then the spec of each of its first cells,
    or of each part's first cell in a sweep with parts (every part's grid, without
    building a paper-scale workload two dozen times per example), with the simulator's
    link rates in a ``backend: simulated`` sweep."""
    sweep = sweep_mod.parse(raw, path)
    firsts: dict = {}
    for cell in sweep.cells:
        firsts.setdefault(cell.part, cell)
    for cell in list(firsts.values()) if sweep.parts else sweep.cells[:MAX_CELLS]:
        check_spec(cell.spec, simulated=sweep.backend == "simulated")


MUTATION_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", sorted(RAW))
@MUTATION_SETTINGS
@given(data=st.data())
def test_mutated_specs_fail_only_with_one_line_spec_errors(name, data):
    raw = mutated(data.draw, RAW[name])
    assert_accepted_or_one_line_error(checker(name), raw)


@pytest.mark.parametrize("name", sorted(SWEEP_RAW))
@MUTATION_SETTINGS
@given(data=st.data())
def test_mutated_sweeps_fail_only_with_one_line_spec_errors(name, data):
    path = EXPERIMENTS / "sweeps" / f"{name}.yaml"
    raw = mutated(data.draw, SWEEP_RAW[name])
    assert_accepted_or_one_line_error(lambda sweep: check_sweep(path, sweep), raw)


@pytest.mark.parametrize("name", sorted(RAW))
def test_shipped_specs_are_accepted(name):
    checker(name)(copy.deepcopy(RAW[name]))


@pytest.mark.parametrize("name", sorted(SWEEP_RAW))
def test_shipped_sweeps_are_accepted(name):
    check_sweep(EXPERIMENTS / "sweeps" / f"{name}.yaml", copy.deepcopy(SWEEP_RAW[name]))


def test_every_file_and_kind_is_mutated():
    assert len(SPECS) >= 20 and len(SWEEPS) >= 6
    assert {kind_of(raw).name for raw in RAW.values()} == set(KINDS)
    assert "priority-demo" in RAW and "grouper-testbed" in SWEEP_RAW


def test_mutations_swap_containers_and_retype_scalars():
    assert swapped([1, 2], 0) == {0: 1, 1: 2} and swapped([1, 2], 1) == {"0": 1, "1": 2}
    assert swapped({"a": 1, "b": [2]}, 0) == [1, [2]] and swapped({"a": 1}, 2) == [{"a": 1}]
    assert "5" in retyped(5) and 5.0 in retyped(5) and 1 in retyped("tbh1") and "true" in retyped(True)
    assert all(len(text) >= 100_000 for text in huge("tbh1"))
    assert paths({"a": [{"b": 1}]}) == [(), ("a",), ("a", 0), ("a", 0, "b")]


def _error(validate, raw) -> str:
    with pytest.raises(SpecError) as err:
        validate(raw)
    return str(err.value)


def test_flow_src_that_is_a_mapping_is_named():
    raw = copy.deepcopy(RAW["priority-demo"])
    raw["flows"][0]["src"] = {"host": "tbh3"}
    assert _error(emulation.validate, raw) == "flows[0].src: must be a host name (string), got a mapping"


def test_policy_changes_that_is_a_number_is_named():
    raw = copy.deepcopy(RAW["priority-demo"])
    raw["policy_changes"] = 20.5
    assert _error(emulation.validate, raw) == "policy_changes: must be a list, got 20.5"


@pytest.mark.parametrize("entry, got", [(["cora"], "a list of 1 item"), ({"name": "cora"}, "a mapping")])
def test_queue_dataset_that_is_a_list_or_mapping_is_named(entry, got):
    raw = copy.deepcopy(RAW["colocate-smoke"])
    raw["queue"]["datasets"][2] = entry
    assert _error(validate_colocation, raw) == f"queue.datasets[2]: must be a dataset name (string), got {got}"


def test_policy_fields_are_checked_by_the_controller_and_named_by_the_spec():
    raw = copy.deepcopy(RAW["priority-demo"])
    raw["flows"][1]["queue"] = "high"
    assert _error(emulation.validate, raw).startswith("flows[1].queue: must be a scheduler queue 1..7")
    raw = copy.deepcopy(RAW["priority-demo"])
    raw["policy_changes"][0] = {"at_s": 20, "flow": "low", "rate_mechanism": "meter"}
    assert _error(emulation.validate, raw) == \
        "policy_changes[0]: sets neither queue, host_queue nor rate_mbps (use remove to drop a policy)"


def test_controller_validator_names_wrong_types():
    fabric = leaf_spine(1, 2, 1)
    for policy, message in [(FlowPolicy({"a": 1}, "tbh2", queue=1), "policy.src: must be a host name (string)"),
                            (FlowPolicy("tbh1", "tbh2", queue=2.0), "policy.queue: must be a scheduler queue"),
                            (FlowPolicy("tbh1", "tbh2", rate_mbps=float("nan")), "policy.rate_mbps: must be a number")]:
        with pytest.raises(PolicyError, match=f"^{re.escape(message)}"):
            validate_policy(policy, fabric)
    with pytest.raises(PolicyError, match="^policy: must be a mapping"):
        FlowPolicy.from_dict(["tbh1", "tbh2"])


def test_paths_of_nested_fields():
    assert v.at(v.ROOT, "flows") == "flows"
    assert v.at(v.at("flows", 1), "dst") == "flows[1].dst"
    assert v.at("flows[1]", "odd\nkey") == "flows[1]['odd\\nkey']"
    assert [where for where, _ in v.items("queue.datasets", ["a", "b", "c"])][2] == "queue.datasets[2]"
    assert str(v.mapping("flows[0]", {"src": 1}, allowed={"src"}, required=("src",))) == "{'src': 1}"
    with pytest.raises(SpecError, match=r"^spec: must be a mapping, got a list of 2 items$"):
        v.mapping(v.ROOT, [1, 2])
    with pytest.raises(SpecError, match=r"^flows\[0\]\.colour: unknown field \(allowed: dst, src\)$"):
        v.mapping("flows[0]", {"colour": 1}, allowed={"src", "dst"})
    with pytest.raises(SpecError, match=r"^flows\[0\]\.dst: is required$"):
        v.mapping("flows[0]", {"src": 1}, required=("src", "dst"))


@pytest.mark.parametrize("check, value, message", [
    (lambda value: v.number("x", value, minimum=0, strict=True), True, "x: must be a number > 0, got true"),
    (lambda value: v.number("x", value, minimum=0, strict=True), 0, "x: must be > 0, got 0"),
    (lambda value: v.number("x", value, minimum=0, maximum=1, strict=True), 2, "x: must be in (0, 1], got 2"),
    (lambda value: v.number("x", value), float("nan"), "x: must be a number, got nan"),
    (lambda value: v.integer("x", value, minimum=1), False, "x: must be an integer >= 1, got false"),
    (lambda value: v.integer("x", value, minimum=1), 4.0, "x: must be an integer >= 1, got 4.0"),
    (lambda value: v.integer("x", value, maximum=7), 8, "x: must be <= 7, got 8"),
    (lambda value: v.boolean("x", value), 1, "x: must be true or false, got 1"),
    (lambda value: v.string("x", value, what="a host name"), None, "x: must be a host name (string), got null"),
    (lambda value: v.word("x", value), "a b", "x: must be a non-empty word of letters, digits, - and _, got 'a b'"),
    (lambda value: v.sequence("x", value, non_empty=True), [], "x: must be a non-empty list, got an empty list"),
    (lambda value: v.choice("x", value, ("bbr", "cubic")), "vegas", "x: must be one of bbr, cubic, got 'vegas'"),
    (lambda value: v.choice("x", value, (1, 2)), True, "x: must be one of 1, 2, got true"),
    (lambda value: v.choice("x", value, ("GCN",), what="model"), "MLP", "x: unknown model 'MLP' (known: GCN)"),
    (lambda value: v.inclusive_range("x", value, v.integer), [6, 4], "x: must have low <= high, got [6, 4]"),
    (lambda value: v.inclusive_range("x", value, v.integer), [1, "a"], "x[1]: must be an integer, got 'a'"),
])
def test_helpers_name_the_expected_type_and_the_value_got(check, value, message):
    with pytest.raises(SpecError) as err:
        check(value)
    assert str(err.value) == message


def test_helpers_return_typed_values():
    assert v.number("x", 3) == 3.0 and isinstance(v.number("x", 3), float)
    assert v.integer("x", 3, minimum=1, maximum=7) == 3
    assert v.mapping("x", None, optional=True) == {} and v.sequence("x", None, optional=True) == []
    assert v.inclusive_range("x", [1, 2], v.integer) == [1, 2]


def test_lower_layer_errors_are_relocated_to_the_spec_path():
    assert str(v.relocate(PolicyError("policy.queue: bad"), "policy", "flows[1]")) == "flows[1].queue: bad"
    assert str(v.relocate(PolicyError("policy: bad"), "policy", "flows[1]")) == "flows[1]: bad"
    assert str(v.relocate(ValueError("hosts: bad"), "topology", "topology")) == "topology.hosts: bad"
    assert str(v.relocate(ValueError("topology.kind: bad"), "topology", "topology")) == "topology.kind: bad"
    assert str(v.relocate(ValueError("host_mbps_overrides.tbh4: bad"), "topology", "topology")) == \
        "topology.host_mbps_overrides.tbh4: bad"


def test_odd_field_names_keep_errors_on_one_line():
    raw = copy.deepcopy(RAW["priority-demo"])
    raw["topology"]["a: b\nc"] = 1
    message = _error(emulation.validate, raw)
    assert message.startswith("topology: unknown field 'a: b\\nc' for leaf_spine") and "\n" not in message
    with pytest.raises(PolicyError, match=r"^policy: unknown field 'x y' \(allowed"):
        FlowPolicy.from_dict({"src": "tbh1", "dst": "tbh2", "x y": 1})


# --- checks a run used to make only after validation (a sweep's --dry-run said "would run") ---

def _cojob_error(raw) -> SpecError:
    from experiments.cojob import spec as cojob_spec
    with pytest.raises(SpecError) as err:
        cojob_spec.validate(raw)
    assert "\n" not in str(err.value)
    return err.value


@pytest.mark.parametrize("name, arrivals, cojobs", [
    ("grouper-testbed", None, 4),  # testbed arrivals: a cojob per model and generation
    ("grouper-testbed", {"kind": "poisson", "cojobs": 6, "mean_interarrival_s": 300}, 6),
])
def test_only_cojob_beyond_the_workload_is_refused_at_validation(name, arrivals, cojobs):
    from experiments.cojob import spec as cojob_spec
    raw = copy.deepcopy(RAW[name])
    if arrivals:
        raw["workload"]["arrivals"] = arrivals
    raw["workload"]["only_cojob"] = cojobs - 1  # the last one: accepted, and the run builds it
    [plan] = build_workload(cojob_spec.validate(copy.deepcopy(raw))).cojobs
    assert plan.cojob_id == cojobs - 1
    raw["workload"]["only_cojob"] = cojobs
    err = _cojob_error(raw)
    assert err.field == "workload.only_cojob" and err.problem == f"no cojob {cojobs} (have 0..{cojobs - 1})"


def test_a_model_named_twice_is_refused_where_it_is_named():
    raw = copy.deepcopy(RAW["grouper-testbed"])
    raw["workload"]["models"] = ["vgg19", "alexnet", "vgg19"]
    err = _cojob_error(raw)
    assert (err.field, err.problem) == ("workload.models[2]", "duplicate model 'vgg19'")


def test_a_sweep_dry_run_finds_a_cell_whose_only_cojob_is_not_in_the_workload(capsys):
    sweep = sweep_mod.parse({"name": "solo", "spec": "../specs/grouper-testbed.yaml", "schedulers": ["fs"],
                             "grid": {"workload.only_cojob": [3, 4]}}, EXPERIMENTS / "sweeps" / "solo.yaml")
    invalid = sweep_mod.dry_run(sweep, None)
    assert invalid == [cell.id for cell in sweep.cells if cell.overrides["workload.only_cojob"] == 4]
    assert "INVALID: SpecError: workload.only_cojob: no cojob 4 (have 0..3)" in capsys.readouterr().out


def _trace_spec(tmp_path, trace, name="trace.json") -> dict:
    path = tmp_path / name
    path.write_bytes(trace if isinstance(trace, bytes) else json.dumps(trace).encode())
    raw = copy.deepcopy(RAW["grouper-trace"])
    raw["workload"]["trace"] = str(path)
    raw["workload"].pop("cojobs")
    raw["topology"]["hosts"] = 4
    return raw


def _mini_trace(arrival_s=0) -> dict:
    job = {"job_index": 0, "workers": [0, 1], "ps": [2, 3], "max_stage": 2,
           "stage_end_iterations_cumulative": [2, 6], "flow_size_MB": 80.0, "compute_time_per_iter_s": 0.0}
    return {"network": {"hosts": 4}, "cojobs": [
        {"cojob_id": 7, "arrival_s": arrival_s, "model": "DeepSpeech2", "model_size_MB": 160.0,
         "jobs": [job, dict(job, job_index=1, max_stage=1, workers=[1, 2], ps=[3, 0])]}]}


def test_a_traces_contents_and_only_cojob_are_checked_at_validation(tmp_path):
    from experiments.cojob import spec as cojob_spec
    raw = _trace_spec(tmp_path, _mini_trace())
    assert cojob_spec.validate(copy.deepcopy(raw))["workload"]["trace"] == str(tmp_path / "trace.json")
    for name, value in (("models", ["vgg19"]), ("jobs", 2), ("stage_iterations", [1, 2]), ("cojobs_per_model", 2),
                        ("arrivals", {"kind": "poisson"})):  # the trace's own: refused, not ignored
        err = _cojob_error({**raw, "workload": {**raw["workload"], name: value}})
        assert (err.field, err.problem) == (f"workload.{name}", "not with a trace (it gives its own cojobs, jobs, "
                                                                "stages and arrivals)")
    raw["workload"]["only_cojob"] = 0  # the trace's one cojob is 7
    err = _cojob_error(copy.deepcopy(raw))
    assert (err.field, err.problem) == ("workload.only_cojob", "no cojob 0 (have 7)")
    raw["workload"]["only_cojob"] = 7
    cojob_spec.validate(copy.deepcopy(raw))
    raw["topology"]["hosts"] = 3  # fewer hosts than the trace's
    err = _cojob_error(copy.deepcopy(raw))
    assert (err.field, err.problem) == ("workload.trace", "the trace uses 4 hosts, the fabric has 3")
    bad = _mini_trace()
    bad["cojobs"][0]["jobs"][1]["ps"] = [3, 3]
    err = _cojob_error(_trace_spec(tmp_path, bad, "bad.json"))
    assert err.field == "workload.trace"
    assert err.problem.startswith("the trace's cojobs[0].jobs[1].ps lists a host twice")


def test_a_rewritten_trace_is_read_again(tmp_path):
    from experiments.cojob import spec as cojob_spec
    raw = _trace_spec(tmp_path, _mini_trace())
    cojob_spec.validate(copy.deepcopy(raw))
    cojob_spec.validate(copy.deepcopy(raw))  # from the cache
    (tmp_path / "trace.json").write_text(json.dumps(_mini_trace(arrival_s=-12.5)))  # another size
    err = _cojob_error(copy.deepcopy(raw))
    assert (err.field, err.problem) == ("workload.trace",
                                        "the trace's cojobs[0].arrival_s must be >= 0, got -12.5")


@pytest.mark.parametrize("content, problem", [
    (b"\xff\xfe{}", "is not UTF-8 text (at byte 0)"),
    (b"{not json", "is not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "is nested too deeply"),
    (b"[1, 2]", "the trace must be a mapping, got a list of 2 items"),
])
def test_an_unreadable_trace_is_named_by_the_spec_field(tmp_path, content, problem):
    from experiments.cojob import workload as cojob_mod
    raw = _trace_spec(tmp_path, content)
    err = _cojob_error(raw)
    assert err.field == "workload.trace" and problem in err.problem
    with pytest.raises(SpecError) as direct:  # as a run reads it
        cojob_mod.load_trace(tmp_path / "trace.json")
    assert direct.value.field == ("trace" if content.startswith(b"[1") else "workload.trace")


def test_an_unreadable_trace_file_is_a_spec_error(tmp_path):
    from experiments.cojob import workload as cojob_mod
    with pytest.raises(SpecError) as err:
        cojob_mod.load_trace(tmp_path)  # a directory
    assert err.value.field == "workload.trace" and err.value.problem.startswith(f"cannot read {tmp_path}")
    with pytest.raises(SpecError) as err:
        cojob_mod.load_trace(tmp_path / "absent.json")
    assert (err.value.field, err.value.problem) == ("workload.trace", f"no such trace file: {tmp_path / 'absent.json'}")


@pytest.mark.parametrize("mutate, field, problem", [
    (lambda t: t["cojobs"][0].update(arrival_s=10**400), "cojobs[0].arrival_s", "must be a number >= 0, got 1000"),
    (lambda t: t["cojobs"][0].update(cojob_id=True), "cojobs[0].cojob_id", "must be an integer >= 0, got true"),
    (lambda t: t["cojobs"][0].update(model=""), "cojobs[0].model", "must be a model name (string), got ''"),
    (lambda t: t["cojobs"][0]["jobs"][0].pop("ps"), "cojobs[0].jobs[0].ps", "is required"),
    (lambda t: t["cojobs"][0]["jobs"][0].update(workers=[]), "cojobs[0].jobs[0].workers",
     "must be a non-empty list, got an empty list"),
    (lambda t: t.update(network=[4]), "network", "must be a mapping, got a list of 1 item"),
])
def test_trace_fields_are_read_by_the_shared_helpers(tmp_path, mutate, field, problem):
    from experiments.cojob import workload as cojob_mod
    trace = _mini_trace()
    mutate(trace)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    with pytest.raises(SpecError) as err:
        cojob_mod.load_trace(path)
    assert err.value.field == field and err.value.problem.startswith(problem)


@pytest.mark.parametrize("policy, field", [
    ({"proto": "tcp", "dst_port": 80.5}, "workload.policies[1].dst_port"),
    ({"proto": "tcp", "src_port": 443.0}, "workload.policies[1].src_port"),
    ({"proto": "udp", "dst_ports": [20100.5, 20101]}, "workload.policies[1].dst_ports[0]"),
])
def test_a_fractional_port_is_refused_not_truncated(policy, field):
    from experiments.programs import spec as programs_spec
    raw = copy.deepcopy(RAW["programs-ddp"])
    raw["workload"]["policies"][1].update(policy)
    err = _error(programs_spec.validate, raw)
    assert err.startswith(f"{field}: must be an integer in [1, 65535], got ")
    raw["workload"]["policies"][1].update({key: 80 if key.endswith("port") else [20100, 20101] for key in policy
                                           if key != "proto"})
    ports = [flow.get("dst_port", flow.get("src_port"))
             for flow in programs_spec.validate(raw)["workload"]["policies"][1]["flows"]]
    assert all(type(port) is int for port in ports)


def test_host_names_are_checked_by_one_helper():
    hosts = ["tbh1", "tbh2", "tbh3"]
    assert v.host_name("x", "tbh2", hosts) == "tbh2"
    with pytest.raises(SpecError) as err:
        v.host_name("flows[0].dst", "tbh9", hosts)
    assert str(err.value) == "flows[0].dst: 'tbh9' is not a host of the topology (tbh1..tbh3)"
    with pytest.raises(SpecError) as err:
        v.host_name("x", 3, hosts)
    assert str(err.value) == "x: must be a host name (string), got 3"
    with pytest.raises(SpecError) as err:
        v.host_name("x", HUGE, hosts)
    assert len(str(err.value)) < 200  # a pasted value is shown shortened


def _set_at(raw: dict, path: tuple, value) -> dict:
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return raw


@pytest.mark.parametrize("name, path, value, field", [
    ("priority-demo", ("flows", 0, "src"), "tbh99", "flows[0].src"),
    ("programs-ddp", ("workload", "programs", 0, "hosts", 1), "tbh99", "workload.programs[0].hosts[1]"),
    ("programs-ddp", ("workload", "policies", 1, "src"), "tbh99", "workload.policies[1].src"),
    ("priority-demo", ("capture",), {"hosts": ["tbh1", "tbh99"]}, "capture.hosts[1]"),
    ("grouper-testbed-paper", ("workload", "placement", "gpu_hosts", 0), "tbh99", "workload.placement.gpu_hosts[0]"),
    ("gnn-oes-smoke", ("workload", "machines"), {"tbh99": {}}, "workload.machines.tbh99"),
    ("gnn-oes-smoke", ("workload", "compute_factor"), {"tbh99": 2}, "workload.compute_factor.tbh99"),
])
def test_every_kind_names_an_unknown_host_alike(name, path, value, field):
    raw = _set_at(copy.deepcopy(RAW[name]), path, value)
    message = _error(checker(name), raw)
    assert re.fullmatch(rf"{re.escape(field)}: 'tbh99' is not a host of the topology \(tbh1\.\.tbh\d+\)", message), \
        message


def test_an_explicit_gnn_placement_names_an_unknown_host():
    from experiments.gnn import placement as placement_mod
    state = placement_mod._Machines(["tbh1", "tbh2"], {h: {"cpus": 8, "memory_gb": 8, "gpus": 1}
                                                       for h in ("tbh1", "tbh2")})
    need = lambda task: {"cpus": 1, "memory_gb": 1, "gpus": 0}  # noqa: E731
    with pytest.raises(SpecError) as err:
        placement_mod._explicit(state, need, ["worker0"], {"worker0": "tbh7"})
    assert str(err.value) == "workload.placement.worker0: 'tbh7' is not a host of the topology (tbh1..tbh2)"


needs_tcpdump = pytest.mark.skipif(shutil.which("tcpdump") is None or os.geteuid() != 0,
                                   reason="the filter is compiled by tcpdump in a namespace of its own, as root")


@needs_tcpdump
@pytest.mark.parametrize("bpf, problem", [
    ("tcpp port 80", "can't parse filter expression: syntax error"),
    ("tcp port 99999", "illegal port number 99999 > 65535"),
    ("-c 3", "syntax error"),  # never read as an option
    ("host example.org", "unknown host 'example.org'"),  # resolved in a namespace with no network: no lookup leaves
])
def test_a_capture_filter_tcpdump_cannot_compile_is_refused(bpf, problem):
    raw = copy.deepcopy(RAW["priority-demo"])
    raw["capture"] = {"hosts": ["tbh1"], "filter": bpf}
    with pytest.raises(SpecError) as err:
        emulation.validate(raw)
    assert err.value.field == "capture.filter"
    assert err.value.problem.startswith(f"{bpf!r} is not a filter tcpdump compiles (") and problem in err.value.problem
    raw["capture"]["filter"] = "tcp dst port 20000 and not icmp"
    assert emulation.validate(raw)["capture"]["filter"] == "tcp dst port 20000 and not icmp"


@pytest.mark.skipif(os.geteuid() != 0, reason="the compile is tried only as root")
def test_a_capture_filter_is_taken_unchecked_where_no_namespace_may_be_made(tmp_path, monkeypatch):
    from experiments.platform import capture as capture_mod
    for name, script in (("unshare", "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1"),
                         ("tcpdump", "exit 0")):  # as in a container that refuses namespaces
        (tmp_path / name).write_text(f"#!/bin/sh\n{script}\n")
        (tmp_path / name).chmod(0o755)
    capture_mod._compile_problem.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        assert capture_mod.bpf_filter("capture.filter", "tcp") == "tcp"
    finally:
        capture_mod._compile_problem.cache_clear()


def test_a_capture_filter_is_taken_unchecked_without_tcpdump(monkeypatch):
    from experiments.platform import capture as capture_mod
    capture_mod._compile_problem.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        assert capture_mod.bpf_filter("capture.filter", "tcpp port 80") == "tcpp port 80"
    finally:
        capture_mod._compile_problem.cache_clear()
    with pytest.raises(SpecError, match=r"^capture.filter: must be a BPF filter expression, got '\\x00'"):
        capture_mod.bpf_filter("capture.filter", "\x00")


def test_a_failed_tcpdump_is_reported_at_stop(tmp_path):
    import subprocess
    import sys

    from experiments.platform.capture import Capture

    # stands for a tcpdump: exits 0 on SIGINT, as tcpdump does once it has flushed its pcap
    stops_cleanly = ("import signal, sys, time; signal.signal(signal.SIGINT, lambda *_: sys.exit(0)); "
                     "print('ready', flush=True); time.sleep(30)")
    capture = Capture({"hosts": ["tbh1", "tbh2"], "queue_interval_s": None}, tmp_path)
    capture.packets = {"tbh1": subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(1)"]),  # a bad filter
                       "tbh2": subprocess.Popen([sys.executable, "-c", stops_cleanly], stdout=subprocess.PIPE,
                                                text=True)}
    assert capture.packets["tbh2"].stdout.readline() == "ready\n"
    capture.packets["tbh1"].wait()  # exited before the run's end
    capture.stop()
    capture.packets["tbh2"].stdout.close()
    assert capture.fields == {"capture_errors": ["tbh1: tcpdump exited with 1"]}
    assert [proc.returncode for proc in capture.packets.values()] == [1, 0]
