"""Reading sweep directories back, for notebooks and for the sweep itself.

``load_sweep(DIR)`` is one row per cell of ``DIR/sweep.yaml``, in the order the
cells ran: ``cell``, ``part`` (None in a sweep without parts), ``backend`` (in a sweep
whose parts run on both, the cell's, run or not), every field any
cell overrides under its dotted spec name (``scheduler.name``, ``seed``,
``topology.host_mbps``: the cell's own value, the base spec's where the cell does
not set it; where neither gives one, a grid's null among them, the value the cell ran
with, from its ``spec.yaml``), ``scheduler`` (the cell spec's ``scheduler.name``, as ``results.csv`` names it;
absent where the spec has none), then the cell's ``summary.json`` with nested fields flattened with dots
(``fidelity.trustworthy``, ``per_model_avg_sct_s.vgg19``); lists stay lists. A
summary field whose name is already a column (``seed``) is left out. A cell not run
yet, or whose run wrote no summary, has ``completed: False`` and nothing else.
``as_frame=True`` returns the same rows as a pandas DataFrame, a list an override
gives (``emulation.queue_weights``) as a tuple, so that it can be grouped by. ``load_summary(RUN)``
is one run directory's summary, ``summary_verdict`` whether it can be trusted and why
not. ``usable_cells(DIR)`` is the cells a figure may draw.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiments import store
from experiments.errors import SpecError
from experiments.validation import read_yaml, shown_path

# Seconds a cell took, in results.csv: the sweep's own count, else (a sweep written
# before it kept one) the run's wall time.
DURATION_COLUMNS = ("cell_s", "wall_s")


def csv_value(value) -> str:
    """A value as ``results.csv`` spells it (a mapping or list as sorted JSON)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def lookup(data, dotted: str, absent=None):
    """``data``'s value at a dotted field (``topology.host_mbps``; a part of digits
    indexes a list: ``flows.0.queue``); ``absent`` where it has none."""
    for part in dotted.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return absent
    return data


def load_summary(run_dir: str | Path) -> dict:
    """A run directory's ``summary.json`` (what ``run_any_spec`` and ``simulate_any_spec``
    return a run directory for); a missing or garbled one is a one-line SpecError."""
    path = Path(run_dir) / store.SUMMARY
    try:
        summary = store.read_json(path)
    except FileNotFoundError:
        raise SpecError(str(run_dir), f"not a run directory: no {store.SUMMARY}") from None
    except OSError as err:
        raise SpecError(str(path), err.strerror or str(err)) from None
    if not isinstance(summary, dict):
        raise SpecError(str(path), "not a run's summary (a JSON mapping)")
    return summary


def read_summary(run_dir: str | Path) -> dict | None:
    """A run directory's ``summary.json``; None when missing or unreadable."""
    try:
        return load_summary(run_dir)
    except SpecError:  # missing, garbled or not a summary
        return None


def summary_verdict(summary: dict) -> tuple[bool | None, list[str]]:
    """Whether a run's summary says it can be trusted, and why not: False for a run
    that did not complete, else its ``trustworthy`` (None: a kind that records no
    fidelity verdict); the reasons: its failure or what it has left, a failed analysis,
    the fidelity check's, and where it is untrusted without one, that none was recorded."""
    failed = summary.get("completed") is False
    trusted = False if failed else summary.get("trustworthy")
    reasons = []
    if failed:
        reasons.append(f"did not complete: {summary['error']}" if summary.get("error") else
                       f"not yet complete: left {', '.join(summary['left'])}" if summary.get("left")
                       else "did not complete")
    if summary.get("analysis_error"):
        reasons.append(f"analysis failed: {summary['analysis_error']}")
    reasons += lookup(summary, "fidelity.untrustworthy_reasons") or []
    if trusted is False and not reasons:
        reasons.append(f"no reason recorded (see {store.SUMMARY})")
    return trusted, reasons


def durations(directory: Path, completed_only: bool = False) -> dict[str, float]:
    """Seconds per cell id from ``directory/results.csv`` ({} when it has none); only
    the completed cells' with ``completed_only`` (a failed cell's says little of how
    long the cell takes)."""
    try:
        rows = store.read_csv(directory / store.RESULTS)
    except (OSError, ValueError):  # none, or unreadable: the cells run in their own order
        return {}
    seconds = {}
    for row in rows:
        if completed_only and row.get("completed") != "true":
            continue
        for column in DURATION_COLUMNS:
            try:
                seconds[row["cell"]] = float(row[column])
                break
            except (KeyError, TypeError, ValueError):
                continue
    return seconds


def _sweep_name(record: Path) -> str | None:
    """The ``name:`` a ``sweep.yaml`` starts with (its first line, as ``run_sweep``
    writes it), without parsing the rest: a store may hold many large records."""
    try:
        with open(record) as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith("name:"):
        return None
    try:
        name = yaml.safe_load(first)
    except yaml.YAMLError:
        return None
    return name.get("name") if isinstance(name, dict) else None


_STAMP = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})(?:-(\d{6}))?")  # results/20261129-211530-..., <name>-2026-11-29


def _started(directory: Path) -> str:
    """When a sweep directory's run started, as ``YYYYMMDDHHMMSS`` to compare: its
    record's ``time_utc``, else the date its name carries (the results store's
    ``YYYYMMDD-HHMMSS-...``, measurements/'s ``...-YYYY-MM-DD``), else ""."""
    record = _sweep_record(directory)
    stamp = record.get("time_utc") if isinstance(record, dict) else None
    if isinstance(stamp, str):
        return re.sub(r"\D", "", stamp)[:14]
    for name in (directory.name, directory.parent.name):
        found = _STAMP.search(name)
        if found:
            return "".join(part or "" for part in found.groups())
    return ""


def cell_backends(record, ids=None) -> dict[str, str]:
    """The backend each cell of a sweep record (``sweep.yaml``) runs on, by cell id:
    the cell's own where it differs from the sweep's (the record names only those),
    else the sweep's (``emulated`` in a record before backends). ``ids``: these cells
    instead of the record's, one it does not list on the sweep's backend."""
    record = record if isinstance(record, dict) else {}
    default = record.get("backend") or "emulated"
    cells = record.get("cells") if isinstance(record.get("cells"), list) else []
    own = {str(cell["id"]): cell.get("backend") if isinstance(cell.get("backend"), str) else default
           for cell in cells if isinstance(cell, dict) and "id" in cell}
    return own if ids is None else {cid: own.get(cid, default) for cid in ids}


def cell_dir(directory: str | Path, cell_id) -> Path:
    """A sweep cell's run directory: ``DIR/cells/<id>``."""
    return Path(directory) / store.CELLS / str(cell_id)


@dataclass(frozen=True)
class UsableCell:
    """A cell a figure may draw: what it is (its ``results.csv`` row: scheduler, grid
    values), its seed, how it went (its summary) and its run directory."""

    row: dict
    seed: int | None
    summary: dict
    run_dir: Path


def usable_cells(directory: str | Path, record=None, backend: str | None = None, columns: Sequence[str] = (),
                 needs: Callable[[UsableCell], str | None] | None = None) -> tuple[list[UsableCell], list[str]]:
    """The completed, trustworthy cells of the sweep in ``directory``, in ``results.csv``'s
    order, and one ``CELL: why`` note per cell left out: what every figure draws.

    - ``results.csv`` (plain or kept gzipped) says which cells ran and what each is; it
      must have the columns ``cell``, ``seed`` and ``columns``.
    - With ``backend``, a cell ``record`` (the sweep's ``sweep.yaml``) runs on another
      backend is left out: a mixed sweep's other part, drawn by its own figures.
    - How a cell went is its ``summary.json`` (plain or kept gzipped), as the sweep judges
      a cell done: used only with ``completed`` and ``trustworthy`` true, else left out
      with its error or untrustworthy reasons. A cell without one is left out, a garbled
      one refused (``load_summary``): a figure reads every cell before it draws.
    - ``needs``: a figure's own reason to leave a usable cell out (data it lacks), or None.
    - The seed is the row's, None where empty; a spec's seed is an integer >= 0, so any
      other (``-1``, ``1.5``) is a garbled record, refused.

    Each refusal is a one-line SpecError naming the file, the cell or ``directory``.
    """
    directory = Path(directory)
    table = directory / store.RESULTS
    if store.kept(table) is None:
        raise SpecError("dir", f"{table}: no such file (a sweep directory of `trainbed sweep` has one)")
    rows = store.read_csv(table)
    for column in ("cell", "seed", *columns):
        if rows and column not in rows[0]:
            raise SpecError(str(table), f"has no column {column!r}")
    ran_on = cell_backends(record, [row["cell"] for row in rows]) if backend else {}
    cells, left_out = [], []
    for row in rows:
        cid, run_dir = row["cell"], cell_dir(directory, row["cell"])
        if backend and ran_on[cid] != backend:
            left_out.append(f"{cid}: run on the {ran_on[cid]} backend (these figures draw {backend} cells)")
            continue
        if store.kept(run_dir / store.SUMMARY) is None:
            left_out.append(f"{cid}: no {store.SUMMARY}")
            continue
        summary = load_summary(run_dir)
        if summary.get("completed") is not True:
            left_out.append(f"{cid}: not completed" + (f" ({summary['error']})" if summary.get("error") else ""))
            continue
        if summary.get("trustworthy") is not True:
            reasons = lookup(summary, "fidelity.untrustworthy_reasons") or []
            left_out.append(f"{cid}: untrustworthy" + (f" ({'; '.join(map(str, reasons))})" if reasons else ""))
            continue
        seed = row["seed"]
        if seed and not (seed.isascii() and seed.isdigit()):
            raise SpecError(str(table), f"{cid}: seed must be an integer >= 0, got {seed!r}")
        cell = UsableCell(row, int(seed) if seed else None, summary, run_dir)
        if needs is not None and (lacking := needs(cell)):
            left_out.append(f"{cid}: {lacking}")
        else:
            cells.append(cell)
    if not cells:
        first = f": {left_out[0]}" if left_out else ""
        raise SpecError("dir", f"{directory}: has no completed, trustworthy cell to draw "
                               f"({len(left_out)} left out{first})")
    return cells, left_out


def record_backends(record) -> set[str]:
    """The backends a sweep record runs its cells on (the sweep's own for a record
    without cells)."""
    return set(cell_backends(record).values()) or {(record if isinstance(record, dict) else {}).get("backend")
                                                   or "emulated"}


def _ran_on(directory: Path, ids) -> dict[str, str]:
    """``cell_backends`` of the cells ``ids`` of a sweep directory (each on the sweep's
    backend, or emulated, where its record is unreadable)."""
    return cell_backends(_sweep_record(directory), ids)


def _sweep_record(directory: Path):
    """A sweep directory's record (``sweep.yaml``) as parsed, None where it is unreadable."""
    try:
        return yaml.safe_load((directory / store.SWEEP_RECORD).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def earlier_sweep_run(name: str, roots, backends, exclude: Path | None = None
                      ) -> tuple[dict[str, float], dict[str, str], Path | None]:
    """The completed cells' seconds (``durations``) of the newest earlier run of the
    sweep ``name`` holding any of ``backends``, each such cell's backend, and that run's directory: a
    directory ``DIR/sweep.yaml`` of which names the sweep, one or two levels under each
    of ``roots`` (the results store, the checkout's measurements/), newest by when it
    started (``_started``; then its ``results.csv``'s time); ``({}, {}, None)`` where
    there is none. ``exclude``: a directory not to count (the sweep's own)."""
    found = []
    for root in roots:
        for record in [*Path(root).glob(f"*/{store.SWEEP_RECORD}"), *Path(root).glob(f"*/*/{store.SWEEP_RECORD}")]:
            directory = record.parent
            table = store.kept(directory / store.RESULTS)
            if table is None or (exclude is not None and directory.resolve() == Path(exclude).resolve()):
                continue
            if _sweep_name(record) == name:  # the first line only: most records are of other sweeps
                found.append((_started(directory), table.stat().st_mtime, str(directory), directory))
    for *_, directory in sorted(found, reverse=True):
        seconds = durations(directory, completed_only=True)
        ran_on = _ran_on(directory, seconds)
        if set(ran_on.values()) & set(backends):
            return seconds, ran_on, directory
    return {}, {}, None


def flatten(data: dict, prefix: str = "") -> dict:
    """Nested mappings as one level of dotted keys; other values (lists too) as they are."""
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def load_sweep(directory: str | Path, as_frame: bool = False):
    """One row per cell of the sweep in ``directory`` (see the module docstring): a
    list of dicts, or a pandas DataFrame with ``as_frame``."""
    directory = Path(directory)
    if not (directory / store.SWEEP_RECORD).exists() and store.kept(directory / store.SUMMARY):
        raise SpecError("DIR", f"{shown_path(directory)} is a run, not a sweep: load_summary reads it")
    record = read_yaml(directory / store.SWEEP_RECORD, "DIR", "sweep record")
    cells = record.get("cells") if isinstance(record, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("overrides"), dict)
                                              for c in cells):
        raise SpecError("DIR", f"{shown_path(directory / store.SWEEP_RECORD)}: not a sweep record (no cells)")
    fields: list[str] = []
    for cell in cells:
        fields.extend(key for key in cell["overrides"] if key not in fields)
    ran_on = cell_backends(record)
    mixed = len(set(ran_on.values())) > 1  # parts on both backends: each row says which it runs on
    rows = []
    for cell in cells:
        row = {"cell": cell.get("id"), "part": cell.get("part"),
               **({"backend": ran_on.get(str(cell.get("id")))} if mixed else {})}
        row.update({key: cell["overrides"][key] if key in cell["overrides"] else lookup(record.get("base_spec"), key)
                    for key in fields})
        unset = [key for key in fields if row[key] is None]
        ran = cell_dir(directory, cell.get("id")) / store.SPEC
        if unset and ran.is_file():  # the kind's default it ran with, as resolved in its spec
            try:
                resolved = read_yaml(ran, "DIR", "cell spec")
            except SpecError:  # a garbled spec.yaml: the value stays unknown, as a garbled summary's
                resolved = None
            row.update({key: lookup(resolved, key) for key in unset})
        scheduler = cell["overrides"].get("scheduler.name", lookup(record.get("base_spec"), "scheduler.name"))
        if scheduler is not None:  # as results.csv names it, from the cell's spec
            row["scheduler"] = scheduler
        summary = read_summary(cell_dir(directory, cell.get("id")))
        if summary is None:
            row["completed"] = False
        else:
            row.update({key: value for key, value in flatten(summary).items() if key not in row})
        rows.append(row)
    if not as_frame:
        return rows
    try:
        import pandas
    except ImportError as err:
        raise ImportError(f"as_frame: needs pandas, which is not importable here ({err}); "
                          "without as_frame the rows are a list of dicts") from None
    return pandas.DataFrame([{key: tuple(value) if key in fields and isinstance(value, list) else value
                               for key, value in row.items()} for row in rows])
