"""Sweeps: one base spec run over schedulers x seeds x a grid of overridden fields.

A sweep file::

    name: grouper-testbed
    spec: specs/grouper-testbed.yaml       # the base spec, relative to this file
    backend: emulated                      # or simulated: every cell on the kind's simulator
    schedulers: [fs, baraat, sincronia, grouper]   # each sets the spec's scheduler.name
    seeds: [1, 2, 3]                       # each sets the spec's seed
    grid:                                  # optional: dotted spec field -> values
      topology.host_mbps: [50, 100]
    report: [avg_jct_s, fidelity.cpu_idle_share]   # optional: summary fields to show

Every combination is a cell, run one after another (one fabric is up at a time)
into ``DIR/cells/<cell id>/``; the id is a slug of the cell's overrides
(``sched-grouper_seed-1_topology.host_mbps-100``), so it is the same on every run of
the sweep. Re-running into the same directory resumes: a cell whose summary.json
says ``"completed": true`` is kept; any other is set aside under ``DIR/failed/`` and
run again into a fresh directory (a runner refuses a directory holding a summary).
A cell that raises is recorded and the sweep goes on. ``DIR/results.csv`` is
rewritten after every cell, so a sweep stopped halfway still has its table.

Instead of one grid, a sweep may list ``parts``, each its own product over the same
base spec, so that one directory holds sweeps of different fields (a paper's
figures) without their cross product::

    parts:
      - {name: workload, schedulers: [fs, grouper], grid: {workload.arrivals.workload_factor: [0.5, 1, 2]}}
      - {name: period, schedulers: [grouper], grid: {scheduler.period_s: [1, 10]}}

A part's ``schedulers`` and ``seeds`` default to the sweep's; its grid is its own (a
sweep with parts has no top-level ``grid``). Cells run part by part; every id must
be unique over the whole sweep; ``results.csv`` gains a ``part`` column and a column
for every field any part's grid sets (a cell's own value, the base spec's where its
part does not set it).
"""
from __future__ import annotations

import copy
import csv
import itertools
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from experiments import store
from experiments.errors import SpecError, one_line
from experiments.runner import is_colocation, run_any_spec, simulate_any_spec, simulated_kind
from experiments.validation import at, describe, error, integer, items, mapping, read_yaml, shown_path, string, word

SWEEP_FIELDS = ("name", "description", "spec", "backend", "grid", "schedulers", "seeds", "report", "parts")
PART_FIELDS = ("name", "schedulers", "seeds", "grid")
BACKENDS = ("emulated", "simulated")
SCHEDULER_FIELD, SEED_FIELD = "scheduler.name", "seed"
ID_PREFIX = {SCHEDULER_FIELD: "sched", SEED_FIELD: "seed"}
HEADLINE = ("avg_sct_s", "avg_cojct_s")
_DOTTED = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")

RunCell = Callable[[dict, Path], Path]


@dataclass(frozen=True)
class Cell:
    id: str
    overrides: dict  # dotted spec field -> value, in id order
    spec: dict  # the base spec's raw dict with the overrides applied
    part: str | None = None  # the name of the part it belongs to, in a sweep with parts


@dataclass(frozen=True)
class Part:
    name: str
    schedulers: list | None
    seeds: list | None
    grid: dict

    def resolved(self) -> dict:
        return {"name": self.name, "schedulers": self.schedulers, "seeds": self.seeds, "grid": self.grid}


@dataclass(frozen=True)
class Sweep:
    name: str
    description: str
    spec_path: Path
    base_spec: dict
    grid: dict
    schedulers: list | None  # None: the base spec's own scheduler
    seeds: list | None
    report: list
    cells: tuple[Cell, ...]
    backend: str = "emulated"
    parts: tuple[Part, ...] = ()  # with parts, ``grid`` is the union of theirs (the result columns)

    def resolved(self) -> dict:
        """What ``DIR/sweep.yaml`` keeps: the sweep, its base spec and every cell."""
        parts = {"parts": [part.resolved() for part in self.parts]} if self.parts else {}
        return {"name": self.name, "description": self.description, "spec": str(self.spec_path),
                "backend": self.backend,
                "schedulers": self.schedulers, "seeds": self.seeds, "grid": self.grid, "report": self.report,
                **parts, "base_spec": self.base_spec,
                "cells": [{"id": cell.id, "overrides": cell.overrides, **({"part": cell.part} if cell.part else {})}
                          for cell in self.cells]}


@dataclass
class SweepResult:
    directory: Path
    rows: list = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [row["cell"] for row in self.rows if row["completed"] is not True]


def _spec_path(sweep_path: Path, value) -> Path:
    """The base spec's path, relative to the sweep file unless absolute."""
    path = sweep_path.parent / string("spec", value, what="a path to the base spec")
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):  # a name too long, a loop, a NUL: read_yaml names it
        return path


def _scalar(path: str, value):
    """A grid value: something a cell id can spell (a string, a finite number, true/false)."""
    is_number = isinstance(value, (int, float)) and not (isinstance(value, float) and not math.isfinite(value))
    if not (isinstance(value, str) and value or is_number):
        raise error(path, f"must be a non-empty string, a finite number or true/false, got {describe(value)}")
    return value


def _distinct(path: str, values: list) -> list:
    seen = []
    for where, value in items(path, values):
        if any(type(value) is type(other) and value == other for other in seen):
            raise error(where, f"repeats {describe(value)}")
        seen.append(value)
    return values


def _dotted(path: str, key) -> str:
    if not isinstance(key, str) or not _DOTTED.fullmatch(key):
        raise error(path, "must be a dotted spec field name (e.g. topology.host_mbps)")
    return key


def _grid(raw, path: str = "grid") -> dict:
    grid = {}
    for key, values in mapping(path, raw, optional=True).items():
        where = at(path, key)
        _dotted(where, key)
        if key in ID_PREFIX:
            raise error(where, f"is set by `{'schedulers' if key == SCHEDULER_FIELD else 'seeds'}`, not by the grid")
        for item_path, value in items(where, values, non_empty=True):
            _scalar(item_path, value)
        grid[key] = _distinct(where, values)
    return grid


def parse(raw, sweep_path: Path) -> Sweep:
    """A parsed sweep file, checked field by field, with its base spec loaded and
    every cell's spec built (so a bad override stops the sweep before any cell runs)."""
    if not isinstance(raw, dict):
        raise error("sweep", f"must be a mapping, got {describe(raw)}")
    sweep = mapping("", raw, allowed=SWEEP_FIELDS, required=("name", "spec"))
    name = word("name", sweep["name"])
    description = string("description", sweep.get("description", ""), non_empty=False)
    spec_path = _spec_path(sweep_path, sweep["spec"])
    base = read_yaml(spec_path, "spec", "base spec")
    if not isinstance(base, dict):
        raise error("spec", f"{shown_path(spec_path)} must hold a mapping, got {describe(base)}")
    if sweep.get("schedulers") is not None and is_colocation(base):
        raise error("schedulers", "a co-location spec has no scheduler: its methods are compared within each cell")
    schedulers = _schedulers("schedulers", sweep.get("schedulers"))
    seeds = _seeds("seeds", sweep.get("seeds"))
    report = [_dotted(p, v) for p, v in items("report", sweep.get("report"), optional=True)]
    backend = sweep.get("backend", "emulated")
    if not (isinstance(backend, str) and backend in BACKENDS):
        raise error("backend", f"must be one of {', '.join(BACKENDS)}, got {describe(backend)}")
    if backend == "simulated":
        simulated_kind(base)  # a kind without a simulator stops the sweep here, naming the field
    if sweep.get("parts") is None:
        grid = _grid(sweep.get("grid"))
        return Sweep(name, description, spec_path, base, grid, schedulers, seeds, report,
                     _cells(base, schedulers, seeds, grid), backend)
    if sweep.get("grid") is not None:
        raise error("grid", "a sweep with parts has none: give each part its own grid")
    parts, cells, owner = [], [], {}
    for where, raw_part in items("parts", sweep["parts"], non_empty=True):
        part = _part(where, raw_part, schedulers, seeds)
        if part.schedulers is not None and is_colocation(base):
            raise error(at(where, "schedulers"), "a co-location spec has no scheduler: its methods are compared "
                                                 "within each cell")
        if any(part.name == other.name for other in parts):
            raise error(at(where, "name"), f"repeats {part.name!r}")
        for cell in _cells(base, part.schedulers, part.seeds, part.grid, where):
            if cell.id in owner:
                raise error(where, f"its cell {cell.id!r} is also a cell of part {owner[cell.id]!r}")
            owner[cell.id] = part.name
            cells.append(Cell(cell.id, cell.overrides, cell.spec, part.name))
        parts.append(part)
    grid: dict[str, list] = {}  # every value any part gives a field
    for part in parts:
        for key, values in part.grid.items():
            known = grid.setdefault(key, [])
            known += [value for value in values if value not in known]
    return Sweep(name, description, spec_path, base, grid, schedulers, seeds, report, tuple(cells), backend,
                 tuple(parts))


def _schedulers(path: str, raw) -> list | None:
    if raw is None:
        return None
    return _distinct(path, [word(p, v) for p, v in items(path, raw, non_empty=True)])


def _seeds(path: str, raw) -> list | None:
    if raw is None:
        return None
    return _distinct(path, [integer(p, v, minimum=0) for p, v in items(path, raw, non_empty=True)])


def _part(where: str, raw, schedulers: list | None, seeds: list | None) -> Part:
    """One part of a sweep; its schedulers and seeds default to the sweep's."""
    part = mapping(where, raw, allowed=PART_FIELDS, required=("name",))
    own_schedulers = _schedulers(at(where, "schedulers"), part.get("schedulers"))
    own_seeds = _seeds(at(where, "seeds"), part.get("seeds"))
    return Part(word(at(where, "name"), part["name"]), schedulers if own_schedulers is None else own_schedulers,
                seeds if own_seeds is None else own_seeds, _grid(part.get("grid"), at(where, "grid")))


def load(path: str | Path) -> Sweep:
    path = Path(path)
    return parse(read_yaml(path, "sweep", "sweep file"), path)


def _slug(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return _UNSAFE.sub("-", str(value)).strip("-") or "-"


def cell_id(overrides: Mapping) -> str:
    """``sched-<name>_seed-<n>_<field>-<value>...`` ("base" without overrides)."""
    parts = [f"{ID_PREFIX.get(key, key)}-{_slug(value)}" for key, value in overrides.items()]
    return "_".join(parts) or "base"


def apply_overrides(spec: Mapping, overrides: Mapping, sources: Mapping[str, str] | None = None) -> dict:
    """A deep copy of ``spec`` with each dotted field set, missing sections created.
    ``sources`` names the sweep field behind each override, for the error message."""
    result = copy.deepcopy(dict(spec))
    for key, value in overrides.items():
        node = result
        *parents, leaf = key.split(".")
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = (sources or {}).get(key, key)
                raise error(where, f"cannot set {key}: the base spec's {'.'.join(parents[:depth + 1])} "
                                   f"is {describe(node)}, not a mapping")
        node[leaf] = copy.deepcopy(value)
    return result


def _cells(base: dict, schedulers, seeds, grid: dict, where: str = "") -> tuple[Cell, ...]:
    """Seeds outermost and schedulers innermost, so that a sweep stopped early has
    every scheduler of its first seeds: comparable pairs before more repeats.
    ``where``: the part's path, in a sweep with parts."""
    grid_path = at(where, "grid")
    sources = {SCHEDULER_FIELD: at(where, "schedulers"), SEED_FIELD: at(where, "seeds"),
               **{key: at(grid_path, key) for key in grid}}
    grid_keys = sorted(grid)
    cells, ids = [], {}
    for seed, values, scheduler in itertools.product(seeds or [None], itertools.product(*(grid[k] for k in grid_keys)),
                                                     schedulers or [None]):
        overrides = {}
        if scheduler is not None:
            overrides[SCHEDULER_FIELD] = scheduler
        if seed is not None:
            overrides[SEED_FIELD] = seed
        overrides.update(zip(grid_keys, values))
        cid = cell_id(overrides)
        if cid in ids:
            raise error(grid_path, f"cells {ids[cid]} and {overrides} share the id {cid!r}; use values that "
                                   "differ in letters or digits")
        ids[cid] = overrides
        cells.append(Cell(cid, overrides, apply_overrides(base, overrides, sources)))
    return tuple(cells)


def run_with_runner(spec: dict, out_dir: Path) -> Path:
    """The default cell runner: the project's runner for any spec family."""
    return run_any_spec(spec, out=str(out_dir))


def simulate_with_runner(spec: dict, out_dir: Path) -> Path:
    """The cell runner of ``backend: simulated``: the kind's simulator."""
    return simulate_any_spec(spec, out=str(out_dir))


def _lookup(data, dotted: str):
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _read_summary(cell_dir: Path) -> dict | None:
    try:
        summary = json.loads((cell_dir / "summary.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return summary if isinstance(summary, dict) else None


def _shown(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _row(sweep: Sweep, cell: Cell, summary: dict | None, error_text: str | None) -> dict:
    summary = summary or {}
    scheduler = _lookup(cell.spec, SCHEDULER_FIELD)
    row = {"cell": cell.id, **({"part": cell.part} if sweep.parts else {}), "scheduler": scheduler,
           "seed": cell.spec.get(SEED_FIELD),
           **{key: _lookup(cell.spec, key) for key in sweep.grid},
           "completed": summary.get("completed") is True and error_text is None,
           "trustworthy": summary.get("trustworthy"),
           "error": error_text or summary.get("error")}
    for key in (*HEADLINE, *sweep.report):
        row[key] = _lookup(summary, key)
    for key, value in summary.items():
        if _is_number(value) and key not in row:
            row[key] = value
    return row


def _csv_value(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def write_results(path: Path, rows: list[dict]) -> None:
    """One row per cell; fixed columns first, then every other column in first-seen
    order (later cells may add summary fields). Replaced atomically, as a reader
    (``trainbed figures``) may look while a sweep runs."""
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows([_csv_value(row.get(key)) for key in columns] for row in rows)
    os.replace(tmp, path)


def _set_aside(cell_dir: Path, failed_root: Path) -> None:
    failed_root.mkdir(exist_ok=True)
    n = 1
    while (failed_root / f"{cell_dir.name}-{n}").exists():
        n += 1
    cell_dir.rename(failed_root / f"{cell_dir.name}-{n}")


def _prepare(sweep: Sweep, directory: Path) -> None:
    """Write ``sweep.yaml``; refuse a directory holding a sweep of another base spec,
    whose cells would be mixed with this one's under the same ids."""
    resolved = directory / "sweep.yaml"
    if resolved.exists():
        previous = read_yaml(resolved, "--out", "sweep record")
        if not isinstance(previous, dict) or previous.get("base_spec") != sweep.base_spec:
            raise SpecError("--out", f"{directory} holds a sweep of a different base spec; choose a new directory")
    directory.mkdir(parents=True, exist_ok=True)
    resolved.write_text(yaml.safe_dump(sweep.resolved(), sort_keys=False))


def _run_cell(cell: Cell, directory: Path, run_cell: RunCell) -> tuple[dict | None, str | None, float | None]:
    """(summary, error, seconds) of one cell; a cell completed earlier is not run
    again (seconds None), any other leftover is set aside first."""
    cell_dir = directory / "cells" / cell.id
    summary = _read_summary(cell_dir)
    if summary is not None and summary.get("completed") is True:
        return summary, None, None
    if cell_dir.exists():
        _set_aside(cell_dir, directory / "failed")
    started = time.monotonic()
    error_text = None
    try:
        run_cell(copy.deepcopy(cell.spec), cell_dir)
    except Exception as err:  # noqa: BLE001 - one failed cell must not stop the sweep
        error_text = one_line(err)
    summary = _read_summary(cell_dir)
    if error_text is None and summary is None:
        error_text = "the runner wrote no summary.json"
    return summary, error_text, time.monotonic() - started


def run_sweep(sweep: Sweep, directory: str | Path, run_cell: RunCell | None = None) -> SweepResult:
    """Run every cell not yet completed in ``directory`` with ``run_cell(spec, cell
    directory)`` (default ``run_with_runner``); see the module docstring."""
    run_cell = run_cell or (simulate_with_runner if sweep.backend == "simulated" else run_with_runner)
    directory = Path(directory)
    _prepare(sweep, directory)
    print(f"sweep directory: {directory} ({len(sweep.cells)} cells)", flush=True)
    (directory / "cells").mkdir(exist_ok=True)
    result = SweepResult(directory)
    shown_fields = sweep.report or [HEADLINE[0]]
    for n, cell in enumerate(sweep.cells, 1):
        print(f"[{n}/{len(sweep.cells)}] {cell.id} ...", end=" ", flush=True)
        summary, error_text, seconds = _run_cell(cell, directory, run_cell)
        row = _row(sweep, cell, summary, error_text)
        details = [f"{key} {_shown(_lookup(summary or {}, key))}" for key in shown_fields]
        details.append(f"trustworthy {_shown(row['trustworthy'])}")
        if not row["completed"] and row["error"]:
            details.append(f"error: {row['error']}")
        outcome = "already done" if seconds is None else \
            f"{'done' if row['completed'] else 'FAILED'} in {seconds:.0f} s"
        print(f"{outcome} ({', '.join(details)})", flush=True)
        result.rows.append(row)
        write_results(directory / "results.csv", result.rows)
    return result


def run_sweep_file(path: str | Path, out: str | None = None, run_cell: RunCell | None = None) -> SweepResult:
    """Load, check and run a sweep file into ``out`` (default: a new results directory)."""
    sweep = load(path)
    return run_sweep(sweep, store.new_run_dir("sweep", sweep.name, out), run_cell)
