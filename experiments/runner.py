"""One entry for every spec kind: a spec is checked and run by its kind
(``experiments.kinds``: ``kind_of`` decides, ``KINDS`` holds how each is validated,
run and simulated). A co-location queue (``kind: training|inference``) runs on the
best device here; a spec with a ``workload:`` section is run by its
``workload.kind``; one without is a timetable of flows (``flows:``), as is
``workload: {kind: timetable}``."""
from __future__ import annotations

from pathlib import Path

from experiments.kinds import COLOCATION_KINDS, KINDS, Kind, is_colocation, kind_of, read_spec, simulated_kind

__all__ = ["COLOCATION_KINDS", "KINDS", "Kind", "is_colocation", "kind_of", "read_spec", "run_any_spec",
           "simulate_any_spec", "simulated_kind", "validate_any"]


def validate_any(raw, simulated: bool = False) -> dict:
    """A raw spec (as read from YAML) checked and resolved by its kind; ``simulated``:
    for its kind's simulator (a one-line SpecError where the kind has none)."""
    if simulated:
        kind = simulated_kind(raw)
        return (kind.validate_simulated or kind.validate)(raw)
    return kind_of(raw).validate(raw)


def run_any_spec(raw: dict, out: str | None = None) -> Path:
    """Validate a raw spec (a dict as read from YAML) and run it; returns the run directory."""
    kind = kind_of(raw)
    return kind.run(kind.validate(raw), out)


def simulate_any_spec(raw: dict, out: str | None = None) -> Path:
    """Validate a raw spec and run its workload without an emulated network
    (``backend: simulated``); a kind without a simulator is a one-line SpecError."""
    return simulated_kind(raw).simulate(validate_any(raw, simulated=True), out)

