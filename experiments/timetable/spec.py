"""Timetable specs for ``trainbed run``: YAML in, a validated plain dict out.

Every problem raises ``SpecError`` whose message is one line, ``field: problem``,
with the field written as a path (``flows[1].dst``). Every field is read through
``experiments.validation`` before use; a flow's or policy change's policy fields
(queue, rate) are checked by the controller's own policy validator, the topology by
its builder, and their errors re-homed to the spec's paths. The resolved spec
(defaults filled in) is what the run directory stores. The format: docs/specs.md;
the fields every kind shares: ``experiments.platform.spec``.
"""
from __future__ import annotations

from pathlib import Path

from experiments.errors import SpecError
from experiments.platform.spec import (
    COMMON_FIELDS,
    POLICY_FIELDS,
    fabric_host,
    fabric_of,
    policy_fields,
    validate_common,
)
from experiments.validation import (
    ROOT,
    at,
    boolean,
    choice,
    integer,
    items,
    mapping,
    number,
    read_yaml,
    string,
    word,
)
from topologies import fabric as fabric_mod

TOP_FIELDS = COMMON_FIELDS | {"duration_s", "flows", "policy_changes", "analysis", "workload"}
FLOW_FIELDS = {"name", "src", "dst", "start_s", "duration_s", "size_bytes", *POLICY_FIELDS}
MAX_FLOW_BYTES = 10**12
CHANGE_FIELDS = {"at_s", "flow", "remove", *POLICY_FIELDS}
ANALYSIS_ROLES = {"priority": ("high", "low"), "rate_limit": ("flow",)}


def _flow_name(path: str, value, names: set[str]) -> str:
    name = string(path, value, what="a flow name")
    if name not in names:
        raise SpecError(path, f"{name!r} is not a flow of this spec")
    return name


def _policy(where: str, entry: dict, flow: dict, fab: fabric_mod.Fabric) -> dict:
    """The entry's policy fields for the flow: every protocol and port of its hosts."""
    return policy_fields(where, entry, [{"src": flow["src"], "dst": flow["dst"]}], fab)


MAX_FLOW_S = 86_400  # iperf3's longest test


def _whole_seconds(path: str, seconds: float, defaulted: bool) -> None:
    """iperf3 times a flow in whole seconds (``-t 8.5`` runs 8 s, one under 1 s runs
    until it is stopped), so a flow's duration must be one, 1 .. ``MAX_FLOW_S``."""
    if seconds != int(seconds) or not 1 <= seconds <= MAX_FLOW_S:
        origin = " (the experiment's duration_s - the flow's start_s)" if defaulted else ""
        raise SpecError(path, f"{seconds:g} s{origin} is not a whole number of seconds in 1..{MAX_FLOW_S}: "
                              f"iperf3 runs a flow for whole seconds")


def _flows(raw, duration: float, fab: fabric_mod.Fabric) -> list[dict]:
    flows, names = [], set()
    for where, entry in items("flows", raw, non_empty=True):
        entry = mapping(where, entry, allowed=FLOW_FIELDS, required=("name", "src", "dst"))
        name = word(at(where, "name"), entry["name"])
        if name in names:
            raise SpecError(at(where, "name"), f"duplicate flow name {name!r}")
        names.add(name)
        flow = {"name": name, "src": fabric_host(at(where, "src"), entry["src"], fab),
                "dst": fabric_host(at(where, "dst"), entry["dst"], fab)}
        if flow["src"] == flow["dst"]:
            raise SpecError(at(where, "dst"), "must differ from src")
        flow["start_s"] = number(at(where, "start_s"), entry.get("start_s", 0), minimum=0)
        if flow["start_s"] >= duration:
            raise SpecError(at(where, "start_s"), f"{flow['start_s']:g} s is not before the experiment's "
                                                  f"duration_s {duration:g}")
        if "size_bytes" in entry:  # sized: it ends when its bytes arrived, within the experiment
            if "duration_s" in entry:
                raise SpecError(at(where, "duration_s"), "a flow of size_bytes ends when its bytes arrived: "
                                                         "give one of duration_s and size_bytes")
            flow["size_bytes"] = integer(at(where, "size_bytes"), entry["size_bytes"], minimum=1,
                                         maximum=MAX_FLOW_BYTES)
            flows.append({**flow, **_policy(where, entry, flow, fab)})
            continue
        flow["duration_s"] = number(at(where, "duration_s"), entry.get("duration_s", duration - flow["start_s"]),
                                    minimum=0, strict=True)
        if flow["start_s"] + flow["duration_s"] > duration + 1e-9:
            raise SpecError(at(where, "duration_s"), f"flow ends at {flow['start_s'] + flow['duration_s']:g} s, "
                                                     f"after the experiment's duration_s {duration:g}")
        _whole_seconds(at(where, "duration_s"), flow["duration_s"], "duration_s" not in entry)
        flow.update(_policy(where, entry, flow, fab))
        flows.append(flow)
    return flows


def _policy_changes(raw, duration: float, flows: list[dict], fab: fabric_mod.Fabric) -> list[dict]:
    by_name = {f["name"]: f for f in flows}
    changes = []
    for where, entry in items("policy_changes", raw, optional=True):
        entry = mapping(where, entry, allowed=CHANGE_FIELDS, required=("at_s", "flow"))
        flow = by_name[_flow_name(at(where, "flow"), entry["flow"], set(by_name))]
        change = {"at_s": number(at(where, "at_s"), entry["at_s"], minimum=0), "flow": flow["name"],
                  "remove": boolean(at(where, "remove"), entry.get("remove", False))}
        if change["at_s"] > duration:
            raise SpecError(at(where, "at_s"), f"{change['at_s']:g} s is after duration_s {duration:g}")
        if change["remove"]:
            if any(entry.get(key) is not None for key in POLICY_FIELDS):
                raise SpecError(at(where, "remove"), "drops the flow's policy; leave out queue, host_queue, "
                                                     "rate_mbps and rate_mechanism")
            changes.append(change)
            continue
        policy = _policy(where, entry, flow, fab)
        if not policy:
            raise SpecError(where, "sets neither queue, host_queue, rate_mbps nor remove")
        changes.append({**change, **policy})
    return changes


def _analysis(raw, flows: list[dict], changes: list[dict]) -> dict:
    analysis = mapping("analysis", raw, allowed=ANALYSIS_ROLES, optional=True)
    names = {f["name"] for f in flows}
    sized = {f["name"] for f in flows if "size_bytes" in f}
    for section, roles in ANALYSIS_ROLES.items():
        if section in analysis:
            part = mapping(at("analysis", section), analysis[section], allowed=roles, required=roles)
            for role in roles:
                name = _flow_name(at(at("analysis", section), role), part[role], names)
                if name in sized:
                    raise SpecError(at(at("analysis", section), role), f"{name!r} is a flow of size_bytes; the "
                                                                       f"analyses judge flows of a duration_s")
    if "priority" in analysis and analysis["priority"]["high"] == analysis["priority"]["low"]:
        raise SpecError(at(at("analysis", "priority"), "low"), "must be another flow than high")
    if "rate_limit" in analysis:
        name = analysis["rate_limit"]["flow"]
        limited = [f for f in flows if f["name"] == name and f.get("rate_mbps") is not None]
        if not limited and not any(c["flow"] == name and c.get("rate_mbps") is not None for c in changes):
            raise SpecError(at(at("analysis", "rate_limit"), "flow"),
                            f"{name!r} is never given a rate_mbps: there is no limit to judge it by")
    return analysis


def validate(raw) -> dict:
    """Check a parsed spec and return it resolved (defaults filled)."""
    spec = mapping(ROOT, raw, allowed=TOP_FIELDS, required=("name", "topology", "duration_s", "flows"))
    if "workload" in spec:  # optional: the timetable is the kind a spec without one has
        workload = mapping("workload", spec["workload"], allowed=("kind",), required=("kind",))
        choice("workload.kind", workload["kind"], ("timetable",))
    common = validate_common(spec)
    fab = fabric_of(common)
    duration = number("duration_s", spec["duration_s"], minimum=0, strict=True)
    flows = _flows(spec["flows"], duration, fab)
    changes = _policy_changes(spec.get("policy_changes"), duration, flows, fab)
    analysis = _analysis(spec.get("analysis"), flows, changes)
    return {**common, "duration_s": duration, "flows": flows, "policy_changes": changes, "analysis": analysis}


def load(path: str | Path) -> dict:
    return validate(read_yaml(path))
