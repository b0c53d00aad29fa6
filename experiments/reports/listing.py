"""``trainbed results [DIR]``: the results store at a glance, one row per run or sweep
directory directly under DIR (default: the results store, ``results/`` or
``TRAINBED_RESULTS``), the last written first.

A row is data first (``entries``: dicts of ``FIELDS``; ``--csv`` prints them) and a
line second (``as_text``): its directory, what it is (a run's kind and backend; a
sweep's, from its base spec), its verdict (a run: completed and trustworthy, from its
summary, ``running or killed`` while it has none; a sweep: how many of its cells
completed and are trustworthy, from results.csv) and a line: why a run did not complete
or is not trusted, else its key figures (``KEY_FIGURES``); a sweep's compared metric per
scheduler (its name before a cell completes). A directory
that is neither (``bench/``, ``cache/``) is left out, as is ``latest`` (a link to a row
of its own); one whose files cannot be read is a row saying why.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from experiments.errors import one_line
from experiments.kinds import kind_of
from experiments.reports.rundata import headline, load, verdict
from experiments.reports.sweep import SweepData, backends
from experiments.store import RESULTS, SPEC, SUMMARY, SWEEP_RECORD
from experiments.validation import read_yaml

FIELDS = ("directory", "type", "kind", "backend", "cells", "completed", "trustworthy", "headline")
# The headline rows (by how their label ends) a run's row shows, per kind; else its first.
KEY_FIGURES = {"timetable": ("high's share while both ran", "rate limit achieved"), "cojob": ("scheduler", "avg SCT"),
               "gnn": ("training", "time to target accuracy", "iteration time"),
               "programs": ("all-reduce over the ring's ideal",),
               "colocation": ("(primary) makespan",)}
SWEEP_MARKERS = (SWEEP_RECORD, RESULTS)
RUN_MARKERS = (SUMMARY, SPEC)  # a run writes its spec first, its summary last


def _key_figures(kind: str, rows: list[tuple[str, str]]) -> str:
    keys = KEY_FIGURES.get(kind, ())
    chosen = [row for row in rows if any(row[0].endswith(key) for key in keys)] or rows[:1]
    return "; ".join(f"{label} {value}" for label, value in chosen)


def _spec_kind(spec) -> str:
    try:
        return kind_of(spec).name
    except Exception:  # noqa: BLE001 - a spec of no known kind is listed, not refused
        return "unknown"


def _run(path: Path) -> dict:
    if not (path / SUMMARY).exists():  # still running, or killed before its end
        spec = read_yaml(path / SPEC, SPEC, "run spec")
        return {"kind": _spec_kind(spec), "completed": "running or killed"}
    data = load(path)
    judged = verdict(data)
    completed = bool(data.summary.get("completed"))
    why = judged.reasons[0] if judged.reasons and (not completed or judged.trustworthy is False) else None
    return {"kind": data.kind, "backend": data.backend, "completed": "yes" if completed else "no",
            "trustworthy": {True: "yes", False: "no", None: "-"}[judged.trustworthy],
            "headline": why or _key_figures(data.kind, headline(data))}


def _sweep(path: Path) -> dict:
    if (path / RESULTS).exists():
        data = SweepData(path)  # results.csv read once, for the counts and the compared metric
        record, rows = data.record, data.rows
    else:  # none before its first cell lands
        data, rows = None, []
        record = read_yaml(path / SWEEP_RECORD, SWEEP_RECORD, "sweep record")
        if not isinstance(record, dict):
            raise ValueError(f"{SWEEP_RECORD} is not a sweep record (a mapping)")
    cells = record.get("cells")
    base = record.get("base_spec")
    kind = _spec_kind(base) if isinstance(base, dict) else rows and data.kind() or "unknown"
    colocation = kind == "colocation"  # no network backend, and its runs are not judged
    return {"kind": kind,
            "backend": "" if colocation else backends(record),
            "cells": str(len(cells) if isinstance(cells, list) else len(rows)),
            "completed": str(sum(row.get("completed") == "true" for row in rows)),
            "trustworthy": "-" if colocation else str(sum(row.get("trustworthy") == "true" for row in rows)),
            "headline": rows and _compared(data) or str(record.get("name") or path.name)}


def _compared(data: SweepData) -> str:
    """The compared metric per scheduler, as the sweep's console summary leads with it
    (none before a cell completes)."""
    try:
        compared = data.compared()
    except Exception:  # noqa: BLE001 - rows a garbled results.csv gave: the sweep's name, its counts kept
        return ""
    if not compared:
        return ""
    (_, label, _), by_scheduler = compared
    return f"{label}: " + ", ".join(f"{r[0]} {r[1]}" for r in by_scheduler)


def entries(root: str | Path) -> list[dict]:
    """A row per run or sweep directory directly under ``root``, the last written first
    (its summary, results or directory), then by name."""
    found = []
    for path in Path(root).iterdir():
        if path.name == "latest" or path.name.startswith("."):
            continue
        listed = row(path)
        if listed is not None:
            written, entry = listed
            found.append((-written, path.name, entry))
    return [entry for *_, entry in sorted(found, key=lambda entry: entry[:2])]


def row(path: Path) -> tuple[float, dict] | None:
    """(when it was last written, its row) of a run or sweep directory; None for a path
    that is neither. One that cannot be looked into is a row saying why, not a stop."""
    entry = dict.fromkeys(FIELDS, "")
    entry["directory"] = path.name
    written = 0.0  # a directory that cannot be looked into: last
    try:
        if not path.is_dir():
            return None
        if any((path / m).exists() for m in SWEEP_MARKERS):
            entry["type"], markers = "sweep", [path / RESULTS, path / SWEEP_RECORD]
        elif any((path / m).exists() for m in RUN_MARKERS):
            entry["type"], markers = "run", [path / SUMMARY, path]
        else:
            return None
        written = next(m for m in markers if m.exists()).stat().st_mtime
        entry.update(_sweep(path) if entry["type"] == "sweep" else _run(path))
    except Exception as err:  # noqa: BLE001 - one unreadable directory is a row saying why, not a stop
        entry["headline"] = f"unreadable: {one_line(err)}"
    return written, entry


def as_text(rows: list[dict]) -> str:
    """The rows in columns under a header: directory, what, completed, trustworthy, then
    the headline (a sweep's counts are of its cells)."""
    def shown(row: dict) -> list[str]:
        if row["type"] == "sweep":
            judged = "-" if row["trustworthy"] == "-" else f"{row['trustworthy']}/{row['cells']} cells"
            return [row["directory"], " · ".join(part for part in (f"sweep of {row['kind']}", row["backend"]) if part),
                    f"{row['completed']}/{row['cells']} cells", judged, row["headline"]]
        what = " · ".join(part for part in (row["kind"], row["backend"]) if part)
        return [row["directory"], what, row["completed"], row["trustworthy"], row["headline"]]

    table = [["directory", "what", "completed", "trustworthy", "headline"]] + [shown(row) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(4)]
    return "\n".join(("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[4]).rstrip()
                     for line in table)


def as_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
