"""Experiment specs for ``trainbed run``: YAML in, a validated plain dict out.

Every problem raises ``SpecError`` whose message is one line, ``field: problem``,
with the field written as a path (``flows[1].dst``). The resolved spec (defaults
filled in) is what the run directory stores. The format is in the README.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from controller.policy import RATE_MECHANISMS
from experiments.errors import SpecError
from topologies import fabric as fabric_mod
from topologies import queues

CONGESTION_CONTROLS = ("cubic", "bbr", "reno")
TOP_FIELDS = {"name", "description", "topology", "duration_s", "tcp_congestion", "flows", "policy_changes",
              "analysis", "fidelity"}
FLOW_FIELDS = {"name", "src", "dst", "start_s", "duration_s", "queue", "rate_mbps", "rate_mechanism"}
CHANGE_FIELDS = {"at_s", "flow", "queue", "rate_mbps", "rate_mechanism", "remove"}
FIDELITY_DEFAULTS = {"min_cpu_idle": 0.05, "min_link_goodput_ratio": 0.85}


def _unknown(where: str, data: dict, allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            raise SpecError(f"{where}{key}", f"unknown field (allowed: {', '.join(sorted(allowed))})")


def _number(field: str, value, minimum: float | None = None, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(field, f"must be a number, got {value!r}")
    if minimum is not None and (value < minimum or (strict and value == minimum)):
        raise SpecError(field, f"must be {'>' if strict else '>='} {minimum:g}, got {value!r}")
    return float(value)


def _mapping(field: str, value) -> dict:
    if not isinstance(value, dict):
        raise SpecError(field, f"must be a mapping, got {type(value).__name__}")
    return value


def _policy_fields(where: str, entry: dict, out: dict) -> None:
    if entry.get("queue") is not None:
        q = entry["queue"]
        if isinstance(q, bool) or q not in queues.SCHEDULER_QUEUES:
            raise SpecError(f"{where}.queue", f"must be a scheduler queue 1..7 (0 is reserved for control), got {q!r}")
        out["queue"] = q
    if entry.get("rate_mbps") is not None:
        out["rate_mbps"] = _number(f"{where}.rate_mbps", entry["rate_mbps"], 0, strict=True)
    if entry.get("rate_mechanism") is not None:
        if entry["rate_mechanism"] not in RATE_MECHANISMS:
            raise SpecError(f"{where}.rate_mechanism", f"must be one of {', '.join(RATE_MECHANISMS)}, got "
                                                       f"{entry['rate_mechanism']!r}")
        out["rate_mechanism"] = entry["rate_mechanism"]


def validate(raw) -> dict:
    """Check a parsed spec and return it resolved (defaults filled)."""
    spec = _mapping("spec", raw)
    _unknown("", spec, TOP_FIELDS)
    for required in ("name", "topology", "duration_s", "flows"):
        if required not in spec:
            raise SpecError(required, "is required")
    name = spec["name"]
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        raise SpecError("name", f"must be a non-empty word of letters, digits, - and _, got {name!r}")
    topo = dict(_mapping("topology", spec["topology"]))
    kind = topo.pop("kind", None)
    if kind is None:
        raise SpecError("topology.kind", f"is required (one of {', '.join(fabric_mod.BUILDERS)})")
    try:
        fab = fabric_mod.build(kind, **topo)
    except fabric_mod.TopologyError as err:
        field, _, problem = str(err).partition(": ")
        raise SpecError(field if field.startswith("topology") else f"topology.{field}", problem) from None
    duration = _number("duration_s", spec["duration_s"], 0, strict=True)
    congestion = spec.get("tcp_congestion", "bbr")
    if congestion not in CONGESTION_CONTROLS:
        raise SpecError("tcp_congestion", f"must be one of {', '.join(CONGESTION_CONTROLS)}, got {congestion!r}")
    hosts = {h.name for h in fab.hosts}
    flows_raw = spec["flows"]
    if not isinstance(flows_raw, list) or not flows_raw:
        raise SpecError("flows", "must be a non-empty list")
    flows, names = [], set()
    for i, entry in enumerate(flows_raw):
        where = f"flows[{i}]"
        entry = _mapping(where, entry)
        _unknown(f"{where}.", entry, FLOW_FIELDS)
        for required in ("name", "src", "dst"):
            if required not in entry:
                raise SpecError(f"{where}.{required}", "is required")
        if entry["name"] in names:
            raise SpecError(f"{where}.name", f"duplicate flow name {entry['name']!r}")
        names.add(entry["name"])
        for end in ("src", "dst"):
            if entry[end] not in hosts:
                raise SpecError(f"{where}.{end}", f"{entry[end]!r} is not a host of the topology "
                                                  f"({fab.hosts[0].name}..{fab.hosts[-1].name})")
        if entry["src"] == entry["dst"]:
            raise SpecError(f"{where}.dst", "must differ from src")
        flow = {"name": str(entry["name"]), "src": entry["src"], "dst": entry["dst"],
                "start_s": _number(f"{where}.start_s", entry.get("start_s", 0), 0)}
        flow["duration_s"] = _number(f"{where}.duration_s", entry.get("duration_s", duration - flow["start_s"]),
                                     0, strict=True)
        if flow["start_s"] + flow["duration_s"] > duration + 1e-9:
            raise SpecError(f"{where}.duration_s", f"flow ends at {flow['start_s'] + flow['duration_s']:g} s, "
                                                   f"after the experiment's duration_s {duration:g}")
        _policy_fields(where, entry, flow)
        flows.append(flow)
    changes = []
    for i, entry in enumerate(spec.get("policy_changes") or []):
        where = f"policy_changes[{i}]"
        entry = _mapping(where, entry)
        _unknown(f"{where}.", entry, CHANGE_FIELDS)
        if entry.get("flow") not in names:
            raise SpecError(f"{where}.flow", f"{entry.get('flow')!r} is not a flow of this spec")
        change = {"at_s": _number(f"{where}.at_s", entry.get("at_s"), 0), "flow": entry["flow"],
                  "remove": bool(entry.get("remove", False))}
        if change["at_s"] > duration:
            raise SpecError(f"{where}.at_s", f"{change['at_s']:g} s is after duration_s {duration:g}")
        _policy_fields(where, entry, change)
        if not change["remove"] and "queue" not in change and "rate_mbps" not in change:
            raise SpecError(where, "sets neither queue nor rate_mbps nor remove")
        changes.append(change)
    analysis = _mapping("analysis", spec.get("analysis") or {})
    _unknown("analysis.", analysis, {"priority", "rate_limit"})
    for section, roles in (("priority", ("high", "low")), ("rate_limit", ("flow",))):
        if section in analysis:
            part = _mapping(f"analysis.{section}", analysis[section])
            _unknown(f"analysis.{section}.", part, set(roles))
            for role in roles:
                if part.get(role) not in names:
                    raise SpecError(f"analysis.{section}.{role}", f"{part.get(role)!r} is not a flow of this spec")
    fidelity = dict(FIDELITY_DEFAULTS)
    fid = _mapping("fidelity", spec.get("fidelity") or {})
    _unknown("fidelity.", fid, set(FIDELITY_DEFAULTS))
    for key, value in fid.items():
        fidelity[key] = _number(f"fidelity.{key}", value, 0)
    return {"name": name, "description": spec.get("description", ""), "topology": {"kind": kind, **topo},
            "duration_s": duration, "tcp_congestion": congestion, "flows": flows, "policy_changes": changes,
            "analysis": analysis, "fidelity": fidelity}


def load(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise SpecError("spec", f"no such file: {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError("spec", f"{path} is not valid YAML{where}") from None
    return validate(raw)


def fabric_of(spec: dict) -> fabric_mod.Fabric:
    topo = dict(spec["topology"])
    return fabric_mod.build(topo.pop("kind"), **topo)
