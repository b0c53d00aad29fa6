"""Malformed specs end in one-line SpecErrors that start with a field path, never in
another exception: every shipped spec, mutated at random (wrong types, deleted and
unknown fields, out-of-range numbers, unknown names), is either accepted or refused
that way. Plus the helpers of ``experiments.validation`` and the cases that used to
escape as TypeErrors."""
import copy
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.policy import FlowPolicy, PolicyError
from controller.policy import validate as validate_policy
from experiments import validation as v
from experiments.colocation.spec import resolve as resolve_colocation
from experiments.emulation import spec as emulation
from experiments.cojob.spec import build_workload
from experiments.cojob.spec import validate as validate_cojob
from experiments.errors import SpecError
from experiments.runner import validate_any
from topologies.fabric import leaf_spine

SPECS = sorted((Path(__file__).resolve().parent.parent / "experiments" / "specs").glob("*.yaml"))
RAW = {path.stem: yaml.safe_load(path.read_text()) for path in SPECS}
COLOCATION = sorted(name for name, raw in RAW.items() if raw.get("kind") in ("training", "inference"))
GNN = sorted(name for name, raw in RAW.items() if (raw.get("workload") or {}).get("kind") == "gnn")
COJOB = sorted(name for name, raw in RAW.items() if "workload" in raw and name not in GNN)
EMULATION = sorted(name for name in RAW if name not in COLOCATION and name not in COJOB and name not in GNN)
# A field path: a name, then .field, [index] or ['odd key'] steps; `spec` is the root itself.
FIELD_PATH = re.compile(r"^([\w-]+|\[.+?\])(\.[\w-]+|\[.+?\])*$")

WRONG_VALUES = st.one_of(
    st.sampled_from([{"x": 1}, {}, [1, 2], [], ["cora"], "text", "", "tbh99", "tbh0", "GCN", True, False, None,
                     1.5, -3, 0, float("nan"), float("inf"), 10**12, 10**400]),
    st.integers(min_value=-10**6, max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
UNKNOWN_KEYS = st.one_of(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), st.integers(0, 3), st.text(max_size=6))


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


@st.composite
def mutants(draw, names: list[str]):
    """A shipped spec with 1-3 mutations: a value replaced, a field or item deleted,
    an unknown field added. Drawn values are copied: later mutations edit them."""
    raw = copy.deepcopy(RAW[draw(st.sampled_from(names))])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(raw)))
        node = node_at(raw, path)
        operation = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        wrong = copy.deepcopy(draw(WRONG_VALUES))
        if operation == "add" and isinstance(node, dict):
            node[draw(UNKNOWN_KEYS)] = wrong
        elif operation == "delete" and path:
            del node_at(raw, path[:-1])[path[-1]]
        elif path:
            node_at(raw, path[:-1])[path[-1]] = wrong
        else:
            raw = wrong
    return raw


def assert_accepted_or_one_line_error(validate, raw) -> None:
    try:
        validate(raw)
    except SpecError as err:
        message = str(err)
        assert "\n" not in message, message
        assert message.startswith(f"{err.field}: ") and err.problem, message
        assert FIELD_PATH.match(err.field), message


@settings(max_examples=200, deadline=None, derandomize=True)
@given(mutants(EMULATION))
def test_mutated_emulation_specs_fail_only_with_one_line_spec_errors(raw):
    assert_accepted_or_one_line_error(lambda spec: emulation.fabric_of(emulation.validate(spec)), raw)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(mutants(COLOCATION))
def test_mutated_colocation_specs_fail_only_with_one_line_spec_errors(raw):
    assert_accepted_or_one_line_error(resolve_colocation, raw)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(mutants(COJOB))
def test_mutated_cojob_specs_fail_only_with_one_line_spec_errors(raw):
    assert_accepted_or_one_line_error(lambda spec: build_workload(validate_cojob(spec)), raw)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(mutants(GNN))
def test_mutated_gnn_specs_fail_only_with_one_line_spec_errors(raw):
    assert_accepted_or_one_line_error(validate_any, raw)  # a mutated workload.kind goes to the cojob validator


def test_every_family_is_mutated():
    assert "priority-demo" in EMULATION and "colocate-smoke" in COLOCATION and "grouper-smoke" in COJOB
    assert "gnn-oes-smoke" in GNN


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
    assert _error(resolve_colocation, raw) == f"queue.datasets[2]: must be a dataset name (string), got {got}"


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
