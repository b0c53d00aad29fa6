"""One entry for every spec kind: a spec with a ``workload:`` section is run by its
kind's runner (``WORKLOAD_KINDS``; ``cojob`` validates any kind it does not know,
so its error names the field); a co-location queue (``kind: training|inference``)
by ``experiments.colocation`` on the best device here; one without a workload
section is a timetable of flows (``flows:``), as is ``workload: {kind: timetable}``.

A workload kind is a package with ``spec.validate(raw) -> resolved spec`` and a
runner built on ``experiments.workloads.run.run_workload``."""
from __future__ import annotations

import importlib
from pathlib import Path

from experiments.validation import read_yaml as read_spec

# kind -> (its spec module, its runner module and function)
WORKLOAD_KINDS = {"timetable": ("experiments.emulation.spec", "experiments.emulation.runner", "run_spec"),
                  "cojob": ("experiments.cojob.spec", "experiments.cojob.runner", "run_cojob_spec"),
                  "gnn": ("experiments.gnn.spec", "experiments.gnn.runner", "run_gnn_spec")}


COLOCATION_KINDS = ("training", "inference")


def is_colocation(raw) -> bool:
    return isinstance(raw, dict) and raw.get("kind") in COLOCATION_KINDS


def _kind(raw) -> str:
    if not (isinstance(raw, dict) and "workload" in raw):
        return "timetable"  # the first kind: a spec without a workload section is a list of flows
    workload = raw["workload"]
    kind = workload.get("kind") if isinstance(workload, dict) else None
    return kind if kind in WORKLOAD_KINDS else "cojob"


def validate_any(raw) -> dict:
    if is_colocation(raw):
        from experiments.colocation.spec import resolve
        return resolve(raw)
    kind = _kind(raw)
    return importlib.import_module(WORKLOAD_KINDS[kind][0]).validate(raw)


def run_any_spec(raw: dict, out: str | None = None) -> Path:
    """Validate a raw spec (a dict as read from YAML) and run it; returns the run directory."""
    if is_colocation(raw):
        import torch

        from experiments.colocation.runner import run_colocate_spec
        return run_colocate_spec(raw, out, "cuda" if torch.cuda.is_available() else "cpu")
    spec = validate_any(raw)
    _, module, function = WORKLOAD_KINDS[_kind(spec)]
    return getattr(importlib.import_module(module), function)(spec, out)


def run_spec_file(path: str | Path, out: str | None = None) -> Path:
    return run_any_spec(read_spec(path), out)
