"""One entry for every spec kind: a spec with a ``workload:`` section is run by its
kind's runner (``gnn``, else ``cojob``); one without is a timetable of flows (``flows:``)."""
from __future__ import annotations

from pathlib import Path

from experiments.validation import read_yaml as read_spec


def validate_any(raw) -> dict:
    if isinstance(raw, dict) and "workload" in raw:
        workload = raw["workload"]
        if isinstance(workload, dict) and workload.get("kind") == "gnn":
            from experiments.gnn import spec as gnn_spec
            return gnn_spec.validate(raw)
        from experiments.cojob import spec as cojob_spec  # the default: its errors name any other kind
        return cojob_spec.validate(raw)
    from experiments.emulation import spec as emulation_spec
    return emulation_spec.validate(raw)


def run_any_spec(raw: dict, out: str | None = None) -> Path:
    """Validate a raw spec (a dict as read from YAML) and run it; returns the run directory."""
    spec = validate_any(raw)
    if "workload" in spec and spec["workload"]["kind"] == "gnn":
        from experiments.gnn.runner import run_gnn_spec
        return run_gnn_spec(spec, out)
    if "workload" in spec:
        from experiments.cojob.runner import run_cojob_spec
        return run_cojob_spec(spec, out)
    from experiments.emulation.runner import run_spec
    return run_spec(spec, out)


def run_spec_file(path: str | Path, out: str | None = None) -> Path:
    return run_any_spec(read_spec(path), out)
