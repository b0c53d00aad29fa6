"""Sweeps: one base spec run over schedulers x seeds x a grid of overridden fields.

A sweep file::

    name: grouper-testbed
    spec: specs/grouper-testbed.yaml       # the base spec, relative to this file (or the spec itself)
    backend: emulated                      # or simulated: every cell on the kind's simulator
    schedulers: [fs, baraat, sincronia, grouper]   # each sets the spec's scheduler.name
    seeds: [1, 2, 3]                       # each sets the spec's seed
    grid:                                  # optional: dotted spec field -> values
      topology.host_mbps: [50, 100]
    report: [avg_jct_s, fidelity.cpu_idle_share]   # optional: summary fields to show
    order: {shuffle: 7}                    # optional: cells in a shuffled order, seed 7

Every combination is a cell, run one after another (one fabric is up at a time),
or by another ``Executor`` (a Dask cluster: ``experiments.cluster``), into
``DIR/cells/<cell id>/``; the id is a slug of the cell's overrides
(``sched-grouper_seed-1_topology.host_mbps-100``), so it is the same on every run of
the sweep. Re-running into the same directory resumes: a cell whose summary.json
says ``"completed": true`` is kept; any other is set aside under ``DIR/failed/`` and
run again into a fresh directory (a runner refuses a directory holding a summary),
except a co-location cell run here: it continues in place, its measured repeats kept.
Before the first cell runs, and before anything is written, every cell to run is
checked by its kind for errors (``validation.errors_only``: quick, a searched
placement's ETP steps are left to its run); one invalid cell refuses the whole
sweep in one line, each invalid cell named above it. A cell that raises while it
runs is recorded and the sweep goes on. ``DIR/results.csv`` and the
report are rewritten after every cell, so a sweep stopped halfway still has its table; its
``cell_s`` (seconds per cell) makes the ETA of a later resume, or of a later sweep of the
same name (``earlier_sweep_run``: the results store, measurements/). A ``report``
field no cell's kind writes (``summary_fields``) is refused when the sweep is read.

Cells run seeds outermost and schedulers innermost. ``order: {shuffle: SEED}`` runs
them in a random order drawn from SEED, shuffling the groups of cells that differ
only in their scheduler, not the cells, so that the schedulers of one seed and grid
point still run side by side (a drift of the machine over hours hits both sides of
a comparison alike). ``DIR/sweep.yaml`` records the order, and the commit the sweep
was started under (``git_commit``, ``git_dirty``); a resume that would run cells
under another commit, or from a dirty tree where the first run's was clean, is
refused unless forced (``run_sweep(..., force=True)``, ``trainbed sweep --force``),
and then recorded under ``resumes``. A second sweep in a directory another sweep is
running in is refused (``sweep_lock``).

Instead of one grid, a sweep may list ``parts``, each its own product over the same
base spec, so that one directory holds sweeps of different fields (a paper's
figures) without their cross product::

    parts:
      - {name: workload, schedulers: [fs, grouper], grid: {workload.arrivals.workload_factor: [0.5, 1, 2]}}
      - {name: period, schedulers: [grouper], grid: {scheduler.period_s: [1, 10]}}

A part's ``schedulers``, ``seeds`` and ``backend`` default to the sweep's; its grid is
its own (a sweep with parts has no top-level ``grid``). A part of another backend
mixes emulated and simulated cells in one sweep (say, a testbed figure and the
simulator's beside it); ``results.csv`` then has a ``backend`` column. Cells run part by part; every id must
be unique over the whole sweep, but one configuration may run on both backends (the
testbed beside its model): the cell not on the sweep's ``backend`` then ends its id
with ``_backend-<backend>``; ``results.csv`` gains a ``part`` column and a column
for every field any part's grid sets (a cell's own value, the base spec's where its
part does not set it).
"""
from __future__ import annotations

import contextlib
import copy
import fcntl
import fnmatch
import hashlib
import itertools
import math
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import yaml

from experiments import store, summary_fields
from experiments.errors import SpecError, one_line
from experiments.kinds import kind_of, read_spec, resume_colocation
from experiments.platform.records import state_dir
from experiments.reports import publish_sweep
from experiments.reports.run import without_console_summary
from experiments.results import (
    cell_dir,
    csv_value,
    durations,
    earlier_sweep_run,
    lookup,
    read_summary,
)
from experiments.runner import is_colocation, run_any_spec, simulate_any_spec, simulated_kind, validate_any
from experiments.stats import is_number
from experiments.validation import (
    OWN_FUNCTION,
    at,
    describe,
    error,
    errors_only,
    importable_beside,
    integer,
    items,
    mapping,
    read_yaml,
    shown_path,
    string,
    word,
)

SWEEP_FIELDS = ("name", "description", "spec", "backend", "grid", "schedulers", "seeds", "repeats", "report", "parts",
                "order")
MAX_REPEATS = 100
PART_FIELDS = ("name", "schedulers", "seeds", "grid", "backend")
BACKENDS = ("emulated", "simulated")
SCHEDULER_FIELD, SEED_FIELD = "scheduler.name", "seed"
ID_PREFIX = {SCHEDULER_FIELD: "sched", SEED_FIELD: "seed"}
_ABSENT = object()  # a field a summary does not have (a null value is one it has)
_DOTTED = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")

RunCell = Callable[[dict, Path], Path]


@dataclass(frozen=True)
class Cell:
    id: str
    overrides: dict  # dotted spec field -> value, in id order
    spec: dict  # the base spec's raw dict with the overrides applied
    part: str | None = None  # the name of the part it belongs to, in a sweep with parts
    backend: str = "emulated"  # its part's, else the sweep's
    repeat: int | None = None  # 1..repeats, in a sweep that repeats its cells (the spec unchanged)


@dataclass(frozen=True)
class Part:
    name: str
    schedulers: list | None
    seeds: list | None
    grid: dict
    backend: str | None = None  # None: the sweep's

    def resolved(self) -> dict:
        return {"name": self.name, "schedulers": self.schedulers, "seeds": self.seeds, "grid": self.grid,
                **({"backend": self.backend} if self.backend else {})}


@dataclass(frozen=True)
class Sweep:
    name: str
    description: str
    spec_path: Path | None  # None: the base spec was given in the sweep itself
    base_spec: dict
    grid: dict
    schedulers: list | None  # None: the base spec's own scheduler
    seeds: list | None
    report: list
    cells: tuple[Cell, ...]
    backend: str = "emulated"
    parts: tuple[Part, ...] = ()  # with parts, ``grid`` is the union of theirs (the result columns)
    shuffle: int | None = None  # ``order: {shuffle: SEED}``: ``cells`` are in that shuffled order
    repeats: int = 1  # each cell this many times, its spec unchanged (a kind without a seed repeats so)

    @property
    def headline(self) -> tuple[str, ...]:
        """The summary fields the base spec's kind leads with (``Kind.headline``)."""
        return kind_of(self.base_spec).headline

    @property
    def backends(self) -> set[str]:
        return {cell.backend for cell in self.cells}

    def resolved(self) -> dict:
        """What ``DIR/sweep.yaml`` keeps: the sweep, its base spec and every cell, in run order."""
        parts = {"parts": [part.resolved() for part in self.parts]} if self.parts else {}
        order = {"order": {"shuffle": self.shuffle}} if self.shuffle is not None else {}
        return {"name": self.name, "description": self.description,
                "spec": str(self.spec_path) if self.spec_path else None,
                "backend": self.backend,
                "schedulers": self.schedulers, "seeds": self.seeds, "grid": self.grid,
                **({"repeats": self.repeats} if self.repeats > 1 else {}), "report": self.report,
                **parts, **order, "base_spec": self.base_spec,
                "cells": [{"id": cell.id, "overrides": cell.overrides, **({"part": cell.part} if cell.part else {}),
                           **({"backend": cell.backend} if cell.backend != self.backend else {})}
                          for cell in self.cells]}


@dataclass
class SweepResult:
    directory: Path
    rows: list = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [row["cell"] for row in self.rows if row["completed"] is not True]


def _base_spec(sweep_path: Path | None, value) -> tuple[Path | None, dict]:
    """(its path, the base spec): a path relative to the sweep file (to the current
    directory without one) unless absolute, or the base spec itself, a mapping."""
    if isinstance(value, dict):
        try:  # what sweep.yaml will keep: refused now, not after the sweep's directory is made
            yaml.safe_dump(value)
        except yaml.YAMLError as err:
            raise error("spec", f"the base spec holds a value YAML cannot keep ({one_line(err)})") from None
        return None, copy.deepcopy(value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise error("spec", f"must be a path to the base spec, or the base spec itself (a mapping), "
                            f"got {describe(value)}")
    path = (sweep_path.parent if sweep_path else Path()) / string("spec", value, what="a path to the base spec")
    try:
        path = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a name too long, a loop, a NUL: read_yaml names it
        pass
    base = read_spec(path, "spec", "base spec")
    if not isinstance(base, dict):
        raise error("spec", f"{shown_path(path)} must hold a mapping, got {describe(base)}")
    return path, base


def _is_scalar(value) -> bool:
    finite_or_bool = isinstance(value, (int, float)) and not (isinstance(value, float) and not math.isfinite(value))
    return isinstance(value, str) and bool(value) or finite_or_bool


def _grid_value(path: str, value):
    """A grid value: something a cell id can spell (a string, a finite number, true/false,
    or a list of them: ``emulation.queue_weights``'s), or null: the field unset, so the
    cell has its kind's default."""
    if not (value is None or _is_scalar(value)
            or isinstance(value, list) and value and all(_is_scalar(item) for item in value)):
        raise error(path, f"must be a non-empty string, a finite number, true/false, a list of them or null, "
                          f"got {describe(value)}")
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


def _grid(raw, path: str = "grid", base: dict | None = None, sweep_path: Path | None = None) -> dict:
    """The grid's fields and values; a value naming a function of your own (one of the base
    spec's kind's ``function_fields``, ``module:function``) is found beside the sweep file too."""
    try:
        own = kind_of(base).function_fields if base is not None and sweep_path is not None else ()
    except SpecError:  # the base spec's own check names what is wrong
        own = ()
    grid = {}
    for key, values in mapping(path, raw, optional=True).items():
        where = at(path, key)
        _dotted(where, key)
        if key in ID_PREFIX:
            raise error(where, f"is set by `{'schedulers' if key == SCHEDULER_FIELD else 'seeds'}`, not by the grid")
        for item_path, value in items(where, values, non_empty=True):
            _grid_value(item_path, value)
            if key in own:
                importable_beside(item_path, value, sweep_path.absolute().parent)
        grid[key] = _distinct(where, values)
        if base is not None and all(value is None for value in values) and not _sets(base, key, where):
            raise error(where, f"every value is null, which unsets the field, and the base spec does not set {key}: "
                               "the key changes no cell's spec (misspelled?)")
    return grid


def _sets(spec: Mapping, key: str, where: str | None = None) -> bool:
    """Whether ``spec`` sets the dotted field ``key``: unsetting it changes the spec. A
    key ``apply_overrides`` cannot follow (an index past a list's end, a scalar on the
    way) is refused by it, at ``where``."""
    return apply_overrides(spec, {key: None}, {key: where} if where else None) != spec


def parse(raw, sweep_path: Path | None = None) -> Sweep:
    """A parsed sweep (a sweep file's contents, read from ``sweep_path``, or a dict of a
    script's), checked field by field, with its base spec loaded and every cell's spec
    built (so a bad override stops the sweep before any cell runs)."""
    if not isinstance(raw, dict):
        raise error("sweep", f"must be a mapping, got {describe(raw)}")
    if "spec" not in raw and {"workload", "flows", "topology", "kind"} & set(raw):
        raise error("sweep", "this is a spec, not a sweep file (which names one with spec:): run it with trainbed "
                             "run, or write a sweep over it")
    sweep = mapping("", raw, allowed=SWEEP_FIELDS, required=("name", "spec"))
    name = word("name", sweep["name"])
    description = string("description", sweep.get("description", ""), non_empty=False)
    spec_path, base = _base_spec(sweep_path, sweep["spec"])
    if sweep.get("schedulers") is not None and is_colocation(base):
        raise error("schedulers", "a co-location spec has no scheduler: its methods are compared within each cell")
    schedulers = _schedulers("schedulers", sweep.get("schedulers"), sweep_path)
    seeds = _seeds("seeds", sweep.get("seeds"))
    report = [_dotted(p, v) for p, v in items("report", sweep.get("report"), optional=True)]
    backend = _backend("backend", sweep.get("backend", "emulated"), base)
    shuffle = _shuffle(sweep.get("order"))
    repeats = integer("repeats", sweep.get("repeats", 1), minimum=1, maximum=MAX_REPEATS)
    if sweep.get("parts") is None:
        grid = _grid(sweep.get("grid"), base=base, sweep_path=sweep_path)
        cells = [replace(cell, backend=backend) for cell in _cells(base, schedulers, seeds, grid, repeats=repeats)]
        _check_report(report, cells)
        return Sweep(name, description, spec_path, base, grid, schedulers, seeds, report,
                     _ordered(cells, shuffle), backend, shuffle=shuffle, repeats=repeats)
    if sweep.get("grid") is not None:
        raise error("grid", "a sweep with parts has none: give each part its own grid")
    parts, made = [], []
    for where, raw_part in items("parts", sweep["parts"], non_empty=True):
        part = _part(where, raw_part, schedulers, seeds, base, sweep_path)
        if part.schedulers is not None and is_colocation(base):
            raise error(at(where, "schedulers"), "a co-location spec has no scheduler: its methods are compared "
                                                 "within each cell")
        if any(part.name == other.name for other in parts):
            raise error(at(where, "name"), f"repeats {part.name!r}")
        made += [(where, replace(cell, part=part.name, backend=part.backend or backend))
                 for cell in _cells(base, part.schedulers, part.seeds, part.grid, where, repeats)]
        parts.append(part)
    cells = _backend_ids(made, backend)
    grid: dict[str, list] = {}  # every value any part gives a field
    for part in parts:
        for key, values in part.grid.items():
            known = grid.setdefault(key, [])
            known += [value for value in values if not any(type(value) is type(k) and value == k for k in known)]
    _check_report(report, cells)
    return Sweep(name, description, spec_path, base, grid, schedulers, seeds, report, _ordered(cells, shuffle),
                 backend, tuple(parts), shuffle, repeats)


def _backend_ids(made: list[tuple[str, Cell]], backend: str) -> list[Cell]:
    """The parts' cells (each with its part's path), ids unique over the sweep: a
    configuration that parts of both backends run (the testbed beside its model) is
    told apart by ``_backend-<backend>`` ending the id of the cell not on the sweep's
    ``backend``; every other id is as the cell's overrides spell it, so a sweep's ids
    stay those of its earlier runs (unless a part added on the other backend now shares
    one: then the cell off the sweep's backend is renamed, and a resume into the earlier
    directory is refused, which holds it under its old id). Any other shared id is refused."""
    backends: dict[str, set] = {}
    for _, cell in made:
        backends.setdefault(cell.id, set()).add(cell.backend)
    owner: dict[str, str] = {}
    cells = []
    for where, cell in made:
        if len(backends[cell.id]) > 1 and cell.backend != backend:
            cell = replace(cell, id=f"{cell.id}_backend-{cell.backend}")
        if cell.id in owner:
            raise error(where, f"its cell {cell.id!r} is also a cell of part {owner[cell.id]!r}")
        owner[cell.id] = cell.part
        cells.append(cell)
    return cells


def _check_report(report: list[str], cells: list[Cell]) -> None:
    """A one-line error for a ``report`` field that no cell's summary can hold (a
    typo), before anything runs: each is checked against what the cells' kinds write
    on their backends (``summary_fields``); a cell whose kind its spec does not yet
    tell is left to the cells' own checks."""
    shapes = set()
    for cell in cells:
        try:
            kind = kind_of(cell.spec).name
        except SpecError:
            continue
        shapes.add((kind, None if kind == "colocation" else cell.backend))
    methods = _methods(cells) if any(dotted.startswith("methods.") for dotted in report) else set()
    for n, dotted in enumerate(report):
        reasons = [summary_fields.unknown(dotted, kind, backend) for kind, backend in sorted(shapes, key=str)
                   if (kind, backend) in summary_fields.KINDS]
        if reasons and all(reasons):
            raise error(f"report[{n}]", f"{reasons[0]}; every field: docs/summary-fields.md")
        head, *rest = dotted.split(".")
        if head == "methods" and rest and methods and rest[0] not in methods:
            raise error(f"report[{n}]", f"{rest[0]!r} is not a method any cell runs (they run "
                                        f"{', '.join(sorted(methods))})")


def _methods(cells: list[Cell]) -> set[str]:
    """The co-location methods the cells run (their specs' ``methods``, else their
    kind's default); empty where no cell is a co-location queue."""
    from experiments.colocation.spec import DEFAULTS  # numpy only, and only for co-location sweeps
    found: set[str] = set()
    for cell in cells:
        if is_colocation(cell.spec):
            given = cell.spec.get("methods", DEFAULTS.get(cell.spec.get("kind"), {}).get("methods"))
            if not isinstance(given, list):  # not a list of methods: the kind's check says so
                return set()
            found.update(method for method in given if isinstance(method, str))
    return found


def _shuffle(raw) -> int | None:
    """``order``'s shuffle seed; None (no ``order``): the declared order."""
    if raw is None:
        return None
    order = mapping("order", raw, allowed=("shuffle",), required=("shuffle",))
    return integer("order.shuffle", order["shuffle"], minimum=0)


def groups(cells) -> list[list[Cell]]:
    """``cells`` in groups, in first-seen order: a group is the cells that differ only
    in their scheduler (one part, repeat, seed and grid point), a comparison of schedulers."""
    by_key: dict[tuple, list[Cell]] = {}
    for cell in cells:
        # csv_value: a grid's list value (queue weights) as text, so the key hashes
        key = (cell.part, cell.repeat, tuple((k, csv_value(v)) for k, v in cell.overrides.items()
                                             if k != SCHEDULER_FIELD))
        by_key.setdefault(key, []).append(cell)
    return list(by_key.values())


def _ordered(cells, seed: int | None) -> tuple[Cell, ...]:
    """``cells`` as declared, or with ``seed`` their groups shuffled, each kept
    together and in its order, so that each comparison of schedulers still runs
    side by side."""
    if seed is None:
        return tuple(cells)
    shuffled = groups(cells)
    random.Random(seed).shuffle(shuffled)
    return tuple(cell for group in shuffled for cell in group)


def _schedulers(path: str, raw, sweep_path: Path | None) -> list | None:
    """Scheduler names: words, or a researcher's own ``module:function``, found beside the
    sweep file too (each cell's spec checks that its kind has it)."""
    if raw is None:
        return None
    names = []
    for where, value in items(path, raw, non_empty=True):
        if not (isinstance(value, str) and (OWN_FUNCTION.fullmatch(value) or _is_word(value))):
            raise error(where, f"must be a scheduler name or module:function, got {describe(value)}"
                               + ("; set a scheduler's other fields with grid: {scheduler.period_s: [...]}"
                                  if isinstance(value, dict) else ""))
        if sweep_path is not None:
            importable_beside(where, value, sweep_path.absolute().parent)
        names.append(value)
    return _distinct(path, names)


def _is_word(value: str) -> bool:
    try:
        word("", value)
    except SpecError:
        return False
    return True


def _seeds(path: str, raw) -> list | None:
    if raw is None:
        return None
    return _distinct(path, [integer(p, v, minimum=0) for p, v in items(path, raw, non_empty=True)])


def _backend(path: str, value, base: dict) -> str:
    if not (isinstance(value, str) and value in BACKENDS):
        raise error(path, f"must be one of {', '.join(BACKENDS)}, got {describe(value)}")
    if value == "simulated":
        simulated_kind(base)  # a kind without a simulator stops the sweep here, naming the field
    return value


def _part(where: str, raw, schedulers: list | None, seeds: list | None, base: dict,
          sweep_path: Path | None) -> Part:
    """One part of a sweep; its schedulers, seeds and backend default to the sweep's."""
    part = mapping(where, raw, allowed=PART_FIELDS, required=("name",))
    own_schedulers = _schedulers(at(where, "schedulers"), part.get("schedulers"), sweep_path)
    own_seeds = _seeds(at(where, "seeds"), part.get("seeds"))
    backend = _backend(at(where, "backend"), part["backend"], base) if "backend" in part else None
    return Part(word(at(where, "name"), part["name"]), schedulers if own_schedulers is None else own_schedulers,
                seeds if own_seeds is None else own_seeds, _grid(part.get("grid"), at(where, "grid"), base, sweep_path),
                backend)


def load(path: str | Path) -> Sweep:
    path = Path(path)
    return parse(read_yaml(path, "sweep", "sweep file"), path)


def _slug(value) -> str:
    if value is None:  # a grid's null: the field left to its default
        return "default"
    if isinstance(value, list):
        return "-".join(_slug(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _UNSAFE.sub("-", str(value))  # -1 keeps its sign: `period_s--1`, not `period_s-1`
    return _UNSAFE.sub("-", str(value)).strip("-") or "-"


def cell_id(overrides: Mapping) -> str:
    """``sched-<name>_seed-<n>_<field>-<value>...`` ("base" without overrides)."""
    parts = [f"{ID_PREFIX.get(key, key)}-{_slug(value)}" for key, value in overrides.items()]
    return "_".join(parts) or "base"


def apply_overrides(spec: Mapping, overrides: Mapping, sources: Mapping[str, str] | None = None) -> dict:
    """A deep copy of ``spec`` with each dotted field set, missing sections created; a
    part of digits indexes a list the base spec has (``flows.0.queue``: the first
    flow's queue). A value of None unsets the field (its kind's default then holds).
    ``sources`` names the sweep field behind each override, for the error message."""
    result = copy.deepcopy(dict(spec))
    for key, value in overrides.items():
        node = result
        parts = key.split(".")
        where = (sources or {}).get(key, key)
        for depth, part in enumerate(parts):
            held = ".".join(parts[:depth]) or "spec"
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise error(where, f"cannot set {key}: the base spec's {held} is {describe(node)}; "
                                       f"index it 0..{len(node) - 1}")
                part = int(part)
            elif not isinstance(node, dict):
                raise error(where, f"cannot set {key}: the base spec's {held} is {describe(node)}, "
                                   f"not a mapping or a list")
            if depth == len(parts) - 1 and value is None:
                if isinstance(node, list):
                    raise error(where, f"cannot unset {key}: null unsets a mapping's field, not a list's item")
                node.pop(part, None)
            elif depth == len(parts) - 1:
                node[part] = copy.deepcopy(value)
            elif isinstance(node, dict):
                if value is None and part not in node:
                    break  # unsetting a field under a section the spec does not have: nothing to unset
                if part not in node and parts[depth + 1].isdigit():
                    raise error(where, f"cannot set {key}: digits index a list, and the base spec has no "
                                       f"{'.'.join(parts[:depth + 1])}: give it the list to index")
                node = node.setdefault(part, {})
            else:
                node = node[part]
    return result


def _cells(base: dict, schedulers, seeds, grid: dict, where: str = "", repeats: int = 1) -> tuple[Cell, ...]:
    """Repeats and seeds outermost and schedulers innermost, so that a sweep stopped
    early has every scheduler of its first seeds: comparable pairs before more
    repeats. ``where``: the part's path, in a sweep with parts; ``repeats`` > 1: each
    cell that many times, ``_rep-K`` ending its id."""
    grid_path = at(where, "grid")
    sources = {SCHEDULER_FIELD: at(where, "schedulers"), SEED_FIELD: at(where, "seeds"),
               **{key: at(grid_path, key) for key in grid}}
    grid_keys = sorted(grid)
    cells, ids = [], {}
    for repeat, seed, values, scheduler in itertools.product(
            range(1, repeats + 1), seeds or [None], itertools.product(*(grid[k] for k in grid_keys)),
            schedulers or [None]):
        overrides = {}
        if scheduler is not None:
            overrides[SCHEDULER_FIELD] = scheduler
        if seed is not None:
            overrides[SEED_FIELD] = seed
        overrides.update(zip(grid_keys, values))
        cid = cell_id(overrides) + (f"_rep-{repeat}" if repeats > 1 else "")
        if cid in ids:
            differ = next((key for key in overrides if ids[cid].get(key) != overrides[key]), None)
            raise error(sources.get(differ, grid_path), f"cells {ids[cid]} and {overrides} share the id {cid!r}; "
                                                        "use values that differ in letters or digits")
        ids[cid] = overrides
        cells.append(Cell(cid, overrides, apply_overrides(base, overrides, sources),
                          repeat=repeat if repeats > 1 else None))
    return tuple(cells)


def run_with_runner(spec: dict, out_dir: Path) -> Path:
    """The default cell runner: the project's runner for any spec family."""
    return run_any_spec(spec, out=str(out_dir))


def simulate_with_runner(spec: dict, out_dir: Path) -> Path:
    """The cell runner of ``backend: simulated``: the kind's simulator, its console
    summary left to the sweep's progress line (a simulated cell takes seconds)."""
    with without_console_summary():
        return simulate_any_spec(spec, out=str(out_dir))


def backend_runner(cell: Cell) -> RunCell:
    """The cell runner of the cell's backend (looked up when called, so a test may swap
    one); a co-location cell's continues an interrupted run of it in place."""
    if cell.backend == "simulated":
        return simulate_with_runner
    return resume_colocation if is_colocation(cell.spec) else run_with_runner


def _shown(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):  # a field of many values (sct_s): results.csv has them, a line their count
        return f"[{len(value)} {'item' if len(value) == 1 else 'items'}]"
    return str(value)


def _row(sweep: Sweep, cell: Cell, run_dir: Path, summary: dict | None, error_text: str | None,
         seconds: float | None) -> dict:
    summary = summary or {}
    environment = store.read_environment(run_dir, garbled_ok=True)
    row = {"cell": cell.id, **({"part": cell.part} if sweep.parts else {}),
           **({"repeat": cell.repeat} if sweep.repeats > 1 else {}),
           **({"backend": cell.backend} if len(sweep.backends) > 1 else {}),
           "scheduler": lookup(cell.spec, SCHEDULER_FIELD), "seed": cell.spec.get(SEED_FIELD),
           **{key: lookup(cell.spec, key) for key in sweep.grid},
           "completed": summary.get("completed") is True and error_text is None,
           "trustworthy": summary.get("trustworthy"),
           "error": error_text or summary.get("error"),
           "cell_s": None if seconds is None else round(seconds, 1)}
    for key in (*sweep.headline, *sweep.report):
        row[key] = lookup(summary, key)
    for key, value in summary.items():
        if is_number(value) and key not in row:
            row[key] = value
    # which box ran the cell, and its speed: cells of one box compare, across boxes with care
    row["box"], row["box_cpu_loop_ms"] = store.box(environment), environment.get("cpu_loop_ms")
    return row


def write_results(path: Path, rows: list[dict]) -> None:
    """One row per cell; fixed columns first, then every other column in first-seen
    order (later cells may add summary fields); values as ``csv_value`` spells them."""
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    store.write_csv(path, [{key: csv_value(value) for key, value in row.items()} for row in rows], columns)


def _set_aside(cell_dir: Path, failed_root: Path) -> None:
    failed_root.mkdir(exist_ok=True)
    n = 1
    while (failed_root / f"{cell_dir.name}-{n}").exists():
        n += 1
    cell_dir.rename(failed_root / f"{cell_dir.name}-{n}")


def select(sweep: Sweep, patterns=()) -> tuple[Cell, ...]:
    """The cells whose id matches any of the shell patterns (``--only``); all without one."""
    if not patterns:
        return sweep.cells
    chosen = tuple(cell for cell in sweep.cells if any(fnmatch.fnmatchcase(cell.id, p) for p in patterns))
    if not chosen:
        raise SpecError("--only", f"no cell id matches {' or '.join(map(repr, patterns))} "
                                  f"(its {len(sweep.cells)} ids: trainbed sweep FILE --list)")
    return chosen


def list_lines(cells) -> list[str]:
    """``--list``: each cell's id and its overrides (and part), in run order."""
    width = max((len(cell.id) for cell in cells), default=0)
    return [f"{cell.id:<{width}}  " + " ".join([*(f"{k}={'null' if v is None else csv_value(v)}"
                                                  for k, v in cell.overrides.items()),
                                                 *([f"part={cell.part}"] if cell.part else [])])
            for cell in cells]


def _is_done(directory: Path | None, cell: Cell) -> bool:
    summary = read_summary(cell_dir(directory, cell.id)) if directory else None
    return summary is not None and summary.get("completed") is True


def cells_to_run(sweep: Sweep, directory: Path | None, only=()) -> list[Cell]:
    """The cells chosen by ``only`` not yet completed in ``directory``."""
    return [cell for cell in select(sweep, only) if not _is_done(directory, cell)]


def _check_directory(sweep: Sweep, directory: Path | None, runs_cells: bool, force: bool) -> tuple[dict, dict | None]:
    """(the checkout's git state, the directory's sweep record or None). Refuses a
    directory holding a run's summary.json, one holding a sweep of another base spec, whose
    cells would be mixed with this one's under the same ids, one holding run cells this
    sweep lacks (they would leave its tables), one whose cell ran on another backend than
    this sweep's cell of that id, and one started under other code (another commit, or a
    clean tree that is dirty now) where cells would run, unless ``force``:
    then it warns on one line."""
    now = store.git_state()
    if directory is not None and (directory / store.SUMMARY).exists():
        raise SpecError("--out", f"{directory} holds a run ({store.SUMMARY}), not a sweep; choose a new directory")
    path = directory / store.SWEEP_RECORD if directory is not None else None
    if path is None or not path.exists():
        if "git_note" in now:
            print(f"warning: the sweep records no commit: {now['git_note']}", file=sys.stderr, flush=True)
        return now, None
    previous = read_yaml(path, "--out", "sweep record")
    if not isinstance(previous, dict):
        raise SpecError("--out", f"{path} is not a sweep record (a mapping); choose a new directory")
    if previous.get("base_spec") != sweep.base_spec:
        raise SpecError("--out", f"{directory} holds a sweep of a different base spec; choose a new directory")
    if previous.get("name") not in (None, sweep.name):  # its record takes the new name (a later ETA looks it up)
        print(f"warning: {directory} holds the sweep {previous['name']!r}; it is recorded as {sweep.name!r} now",
              file=sys.stderr, flush=True)
    ids = {cell.id for cell in sweep.cells}
    recorded = [c.get("id") for c in previous.get("cells") or [] if isinstance(c, dict)]
    dropped = [cell for cell in recorded if cell not in ids and (cell_dir(directory, cell) / store.SUMMARY).exists()]
    if dropped:  # its rows would leave results.csv and sweep.yaml, its directory kept unlisted
        more = f" and {len(dropped) - 1} more" if len(dropped) > 1 else ""
        raise SpecError("--out", f"{directory} holds cells this sweep does not have ({dropped[0]}{more}): a resume "
                                 "may add cells, not drop them; resume with the sweep that ran them, or choose a new "
                                 "directory")
    for cell in sweep.cells:  # a cell run on the other backend is not this sweep's cell done
        ran_on = (read_summary(cell_dir(directory, cell.id)) or {}).get("backend")
        if ran_on is not None and ran_on != cell.backend:
            raise SpecError("--out", f"{directory}'s cell {cell.id} ran on the {ran_on} backend, this sweep runs it "
                                     f"{cell.backend}; choose a new directory")
    if runs_cells:
        store.check_same_code(str(directory), previous, now, force)
    return now, previous


class _SpelledOut(yaml.SafeDumper):
    """Every value written where it stands: a grid's list shared by its cells is no
    ``&id001`` / ``*id001`` alias, so the record reads (and greps) as it ran."""

    def ignore_aliases(self, data) -> bool:
        return True


def _record(sweep: Sweep, directory: Path, now: dict, previous: dict | None, runs_cells: bool) -> None:
    """Write ``sweep.yaml``: the sweep and the code it was started under; a resume
    keeps the first run's code and, when it runs cells, adds its own under ``resumes``."""
    if previous is None:
        record = {**sweep.resolved(), **now, "time_utc": store.utc_now()}
    else:
        first = {key: previous[key] for key in ("git_commit", "git_dirty", "git_note") if key in previous}
        first.update({"time_utc": previous["time_utc"]} if "time_utc" in previous else {})
        resumes = store.resumed(previous, now) if runs_cells else previous.get("resumes") or []
        record = {**sweep.resolved(), **(first or {"git_commit": None, "git_dirty": None,
                                                   "git_note": "not recorded by the sweep's first run"}),
                  **({"resumes": resumes} if resumes else {})}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / store.SWEEP_RECORD).write_text(yaml.dump(record, Dumper=_SpelledOut, sort_keys=False))


# A cell that ran: (the cell, the error its run raised or None, seconds it took or
# None where unknown). Its files are in ``DIR/cells/<id>/`` by then.
Landed = tuple[Cell, str | None, float | None]


class Executor(Protocol):
    """How a sweep's cells run: one after another here (``SerialExecutor``), or on a
    Dask cluster (``experiments.cluster.DaskExecutor``). ``run_sweep`` keeps the
    books (rows, ``results.csv``, the report, the progress lines) as cells land."""

    # whether cells of different backends run at the same time (on resources of their own)
    together: bool

    def slots(self, sweep: Sweep) -> dict[str, int]:
        """Per backend of the sweep's cells, how many of its cells run at once, for the ETA."""

    def run(self, cells: list[Cell], directory: Path, runner: Callable[[Cell], RunCell],
            started: Callable[[Cell], None]) -> Iterator[Landed]:
        """Run ``cells`` into ``directory/cells/<id>/``, each with ``runner(cell)``, yielding
        each as it lands; ``started(cell)`` where the executor knows when a cell starts."""


class SerialExecutor:
    """Every cell in this process, in order (one fabric is up at a time)."""

    together = False

    def slots(self, sweep: Sweep) -> dict[str, int]:
        return dict.fromkeys(sweep.backends, 1)

    def run(self, cells, directory, runner, started):
        for cell in cells:
            started(cell)
            began = time.monotonic()
            error_text = None
            try:
                runner(cell)(copy.deepcopy(cell.spec), cell_dir(directory, cell.id))
            except Exception as err:  # noqa: BLE001 - one failed cell must not stop the sweep
                error_text = one_line(err)
            yield cell, error_text, time.monotonic() - began


def _resumed_in_place(cell: Cell, run_cell: RunCell | None, executor: Executor) -> bool:
    """A co-location cell run here by the project's runner keeps its directory: the
    runner continues its measured repeats there (``resume_colocation``). A cluster
    runs a cell afresh in a directory of its own."""
    return run_cell is None and isinstance(executor, SerialExecutor) and backend_runner(cell) is resume_colocation


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _estimate(cells: list[Cell], ran: list[tuple[str, float]], earlier: dict[str, float],
              backend_of: Mapping[str, str], slots: Mapping[str, int] | None = None,
              together: bool = False) -> str | None:
    """The time ``cells`` take: each at the mean of the cells of its backend this sweep
    ran so far (``ran``: backend, seconds); before any, at its own seconds in an earlier
    run (``earlier``, its cells' backends ``backend_of``) where it ran on the same
    backend, else at the mean of that run's cells of its backend. None where a cell has
    none of these (a simulated cell's seconds say nothing of an emulated one's). Each
    backend's cells ``slots[backend]`` at a time; the backends one after the other, or
    at the same time (``together``: on resources of their own)."""
    def means(pairs) -> dict[str, float]:
        sums: dict[str, list[float]] = {}
        for backend, seconds in pairs:
            sums.setdefault(backend, []).append(seconds)
        return {backend: sum(values) / len(values) for backend, values in sums.items()}
    ran_mean = means(ran)
    alike = means((backend_of.get(cid), seconds) for cid, seconds in earlier.items())
    per_backend: dict[str, float] = {}
    for cell in cells:
        if cell.backend in ran_mean:
            seconds = ran_mean[cell.backend]
        elif cell.id in earlier and backend_of.get(cell.id) == cell.backend:
            seconds = earlier[cell.id]
        elif cell.backend in alike:
            seconds = alike[cell.backend]
        else:
            return None
        per_backend[cell.backend] = per_backend.get(cell.backend, 0.0) + seconds
    times = [total / max((slots or {}).get(backend, 1), 1) for backend, total in per_backend.items()]
    return _duration((max(times, default=0.0) if together else sum(times)))


def _eta(cells: list[Cell], ran: list[tuple[str, float]], earlier: dict[str, float], backend_of: Mapping[str, str],
         slots: Mapping[str, int] | None = None, together: bool = False) -> str:
    return f"ETA {_estimate(cells, ran, earlier, backend_of, slots, together) or 'unknown'}"


def _earlier_seconds(sweep: Sweep, directory: Path | None) -> tuple[dict[str, float], dict[str, str], Path | None]:
    """The completed cells' seconds an estimate starts from, each such cell's backend,
    and the directory whose ``results.csv`` holds them: ``directory``'s own (a resume:
    its cells ran on this sweep's backends, ``_check_directory``), else the newest
    earlier run of this sweep on any of its backends in the results store or the
    checkout's measurements/ (``earlier_sweep_run``); ``({}, {}, None)`` where there is none."""
    own = durations(directory, completed_only=True) if directory is not None else {}
    if own:
        return own, {cell.id: cell.backend for cell in sweep.cells}, directory
    return earlier_sweep_run(sweep.name, (store.results_root(), store.REPO_ROOT / "measurements"), sweep.backends,
                             exclude=directory)


@contextlib.contextmanager
def sweep_lock(directory: Path | None) -> Iterator[None]:
    """Hold ``directory``'s lock (a file in the state dir named by its path) while a
    sweep runs in it: a second sweep there would run the same cells into the same cell
    directories. A new results directory (None) needs none."""
    if directory is None:
        yield
        return
    key = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    with open(state_dir() / f"sweep-{key}.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SpecError("--out", f"another sweep is running in {directory}; wait for it to end") from None
        yield


def run_sweep(sweep: Sweep, directory: str | Path | None, run_cell: RunCell | None = None, only=(),
              force: bool = False, executor: Executor | None = None) -> SweepResult:
    """Run every cell not yet completed in ``directory`` (None: a new results
    directory) with ``run_cell(spec, cell directory)`` (default: its backend's
    runner, and then every spec to run is checked by its kind before the first runs
    and before anything is written), only those whose id matches a pattern of
    ``only`` where given; ``force``: resume under other code; ``executor``: where the
    cells run (default: here, one after another). One sweep at a time in a directory
    (``sweep_lock``). See the module docstring.
    ``results.csv`` keeps the rows of earlier cells left out by ``only``."""
    with sweep_lock(Path(directory) if directory is not None else None):
        return _run_sweep(sweep, directory, run_cell, only, force, executor)


def _run_sweep(sweep: Sweep, directory: str | Path | None, run_cell: RunCell | None, only, force: bool,
               executor: Executor | None) -> SweepResult:
    runner = (lambda cell: run_cell) if run_cell else backend_runner
    executor = executor or SerialExecutor()
    chosen = select(sweep, only)
    given = Path(directory) if directory is not None else None
    pending = cells_to_run(sweep, given, only)
    now, previous = _check_directory(sweep, given, bool(pending), force)
    if run_cell is None:  # the kinds' runners: their kinds check the specs (a given runner reads its own)
        refuse_invalid(pending)
    directory = store.new_run_dir("sweep", sweep.name, directory)
    _record(sweep, directory, now, previous, bool(pending))
    (directory / store.CELLS).mkdir(exist_ok=True)
    earlier = durations(directory)
    before, backend_of, source = _earlier_seconds(sweep, directory)
    slots = executor.slots(sweep) if pending else {}
    together = executor.together
    picked = f", {len(chosen)} chosen by --only" if len(chosen) < len(sweep.cells) else ""
    left = list(pending)
    estimate = _estimate(left, [], before, backend_of, slots, together)
    eta = f"ETA {estimate or 'unknown'}"
    by = f" by {shown_path(source)}, an earlier run" if estimate and source not in (None, directory) else ""
    print(f"sweep directory: {directory} ({len(sweep.cells)} cells{picked}, {len(pending)} to run, "
          f"{eta}{by})", flush=True)
    rows: dict[str, dict] = {}  # by cell id: the chosen cells', and any earlier row of the others
    chosen_ids = {cell.id for cell in chosen}
    for cell in sweep.cells:
        summary = read_summary(cell_dir(directory, cell.id))
        if cell.id not in chosen_ids and summary is not None:
            rows[cell.id] = _row(sweep, cell, cell_dir(directory, cell.id), summary, None, earlier.get(cell.id))
    ran: list[tuple[str, float]] = []
    shown_fields = sweep.report or list(sweep.headline[:1])
    unchecked = list(sweep.report)  # report fields no completed cell's summary has shown yet

    def where(cell: Cell) -> str:
        return f"[{len(rows.keys() & chosen_ids) + 1}/{len(chosen)}] {cell.id}"

    def land(cell: Cell, summary: dict | None, error_text: str | None, seconds: float | None, kept: bool) -> None:
        row = _row(sweep, cell, cell_dir(directory, cell.id), summary, error_text, seconds)
        details = [f"{key} {_shown(lookup(summary or {}, key))}" for key in shown_fields]
        details.append(f"trustworthy {_shown(row['trustworthy'])}")
        if not row["completed"] and row["error"]:
            details.append(f"error: {row['error']}")
        took = "" if seconds is None else f" in {seconds:.0f} s"
        outcome = "already done" if kept else f"{'done' if row['completed'] else 'FAILED'}{took}"
        to_go = f"; {len(left)} to run, {_eta(left, ran, before, backend_of, slots, together)}" if left else ""
        print(f"{where(cell)}: {outcome} ({', '.join(details)}){to_go}", flush=True)
        if row["completed"] and unchecked:  # a name the first completed cell's summary lacks is a typo's
            missing = [key for key in unchecked if lookup(summary, key, absent=_ABSENT) is _ABSENT]
            if missing:
                print(f"sweep: warning: report field(s) {', '.join(missing)} not in {cell.id}'s {store.SUMMARY} "
                      f"(its fields: {', '.join(sorted(summary))})", flush=True)
            unchecked.clear()
        rows[cell.id] = row
        write_results(directory / store.RESULTS, [rows[c.id] for c in sweep.cells if c.id in rows])
        if left and not kept:  # the last cell's report is written by publish_sweep below
            publish_sweep(directory, console=False)

    pending_ids = {cell.id for cell in pending}
    for cell in chosen:
        if cell.id not in pending_ids:
            land(cell, read_summary(cell_dir(directory, cell.id)), None, earlier.get(cell.id), kept=True)
    for cell in pending:
        if cell_dir(directory, cell.id).exists() and not _resumed_in_place(cell, run_cell, executor):
            _set_aside(cell_dir(directory, cell.id), directory / store.FAILED_CELLS)
    started = (lambda cell: print(f"{where(cell)} ...", flush=True))  # a line of its own: the run prints its summary
    for cell, error_text, seconds in executor.run(pending, directory, runner, started):
        summary = read_summary(cell_dir(directory, cell.id))
        if error_text is None and summary is None:
            error_text = f"the runner wrote no {store.SUMMARY}"
        left.remove(cell)
        if seconds is not None:
            ran.append((cell.backend, seconds))
        land(cell, summary, error_text, seconds, kept=False)
    if rows:
        publish_sweep(directory)  # report.html and the console summary; never stops the sweep
    return SweepResult(directory, [rows[cell.id] for cell in chosen if cell.id in rows])


def check_cell(cell: Cell, validate: Callable[[dict], dict] | None = None) -> dict:
    """``cell``'s spec checked by ``validate`` (default: by its kind, for its backend,
    for errors only: see ``validation.errors_only``) on a copy; raises what the check
    raises."""
    spec = copy.deepcopy(cell.spec)
    if validate:
        return validate(spec)
    with errors_only():
        return validate_any(spec, simulated=cell.backend == "simulated")


def _set_by(cell: Cell, err: Exception) -> str:
    """Where in the sweep file the spec field an error names was set for ``cell``, if
    the sweep set it (a misspelt scheduler is the sweep's ``schedulers``, not the spec's)."""
    field = getattr(err, "field", None)
    for key in cell.overrides if isinstance(field, str) else ():
        if field == key or field.startswith((f"{key}.", f"{key}[")):
            where = {SCHEDULER_FIELD: "schedulers", SEED_FIELD: "seeds"}.get(key, f"grid[{key!r}]")
            return f" (set by the sweep's {where})"
    return ""


def refuse_invalid(cells: list[Cell]) -> None:
    """A one-line SpecError, before any cell runs, when a cell's spec is invalid (a
    grid key or scheduler its kind does not take): each such cell is printed with its
    error first, so a sweep never runs its cells into FAILED one by one."""
    invalid = []
    for cell in cells:
        try:
            check_cell(cell)
        except Exception as err:  # noqa: BLE001 - every cell is checked; a kind may raise more than SpecError
            invalid.append((cell.id, one_line(err) + _set_by(cell, err)))
            print(f"{cell.id}: INVALID: {invalid[-1][1]}", file=sys.stderr, flush=True)
    if invalid:  # the first cell's reason in the error too: a script that catches it keeps one
        raise SpecError("sweep", f"{len(invalid)} of {len(cells)} cells to run have an invalid spec (above), so none "
                                 f"ran; the first, {invalid[0][0]}: {invalid[0][1]}")


def dry_run(sweep: Sweep, directory: str | Path | None, only=(), force: bool = False,
            validate: Callable[[dict], dict] | None = None) -> list[str]:
    """``--dry-run``: check every chosen cell's spec (``check_cell``) and print what
    would run (with ``directory``, an earlier run's completed cells are kept) and the
    estimated time; runs and writes nothing. Returns the ids of the invalid cells."""
    directory = Path(directory) if directory is not None else None
    chosen = select(sweep, only)
    pending = {cell.id for cell in cells_to_run(sweep, directory, only)}
    _check_directory(sweep, directory, bool(pending), force)
    invalid, limits = [], []
    for n, cell in enumerate(chosen, 1):
        if cell.id not in pending:
            print(f"[{n}/{len(chosen)}] {cell.id}: already done", flush=True)
            continue
        try:
            spec = check_cell(cell, validate)
        except Exception as err:  # noqa: BLE001 - every cell is checked; a kind may raise more than SpecError
            invalid.append(cell.id)
            print(f"[{n}/{len(chosen)}] {cell.id}: INVALID: {one_line(err)}{_set_by(cell, err)}", flush=True)
            continue
        if cell.backend == "emulated":
            limits.append(spec.get("time_limit_s") if isinstance(spec, dict) else None)
        print(f"[{n}/{len(chosen)}] {cell.id}: would run ({cell.backend})", flush=True)
    before, backend_of, source = _earlier_seconds(sweep, directory)
    to_run = [cell for cell in chosen if cell.id in pending and cell.id not in invalid]
    estimate = _estimate(to_run, [], before, backend_of)
    if not to_run:
        estimate = "nothing to run"
    elif estimate:
        estimate = (f"estimated {estimate} (each cell as long as in {shown_path(source)}'s {store.RESULTS}, "
                    f"{len(before)} {'cell' if len(before) == 1 else 'cells'}, a cell it lacks at the mean of "
                    f"those of its backend)")
    else:
        estimate = ("estimated time unknown (no earlier run of this sweep, in --out DIR, the results store or "
                    "measurements/, timed a cell of each backend it runs)")
        if limits and all(is_number(limit) for limit in limits):
            estimate += f"; at most {_duration(sum(limits))} by the cells' time_limit_s, plus each bring-up"
    print(f"{len(pending) - len(invalid)} of {len(chosen)} cells would run"
          f"{f', {len(invalid)} invalid' if invalid else ''}, "
          f"{len(chosen) - len(pending)} already done; {estimate}", flush=True)
    return invalid


def run_any_sweep(sweep: str | Path | dict, out: str | None = None, *, only=(), force: bool = False,
                  executor: Executor | None = None, run_cell: RunCell | None = None) -> SweepResult:
    """Check and run a sweep into ``out`` (default: a new results directory): a sweep
    file's path, or a sweep as a dict (a script's; its ``spec`` a path relative to the
    current directory, or the base spec itself). ``run_cell(spec, cell directory)``
    replaces the cells' runner (their kinds' checks are then its own)."""
    return run_sweep(parse(sweep) if isinstance(sweep, dict) else load(sweep), out, run_cell, only, force, executor)
