"""``trainbed results [DIR]``: the results store at a glance, one row per run or sweep
directory directly under DIR (default ``results/``), newest first.

A row is data first (``entries``: dicts; ``--csv`` prints them) and a line second:
its directory, what it is (a run's kind and backend; a sweep's cells' kind), its
verdict (a run: completed and trustworthy, from its summary; a sweep: how many of its
cells completed and are trustworthy, from results.csv) and a run's key figures from its
headline (``KEY_FIGURES``), a sweep's name. A directory that is neither (``bench/``, ``cache/``) is left out; one whose
files cannot be read is listed with why.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from experiments.errors import one_line
from experiments.reports.rundata import headline, load, verdict
from experiments.reports.sweep import RESULTS, SweepData

FIELDS = ("directory", "type", "what", "completed", "trustworthy", "headline")
# The headline rows (by how their label ends) a run's row shows, per kind; else its first.
KEY_FIGURES = {"timetable": ("high's share while both ran", "rate limit achieved"), "cojob": ("scheduler", "avg SCT"),
               "gnn": ("time to target accuracy", "iteration time"), "programs": ("all-reduce over the ring's ideal",),
               "colocation": ("(primary) makespan",)}


def _key_figures(kind: str, rows: list[tuple[str, str]]) -> str:
    keys = KEY_FIGURES.get(kind, ())
    chosen = [row for row in rows if any(row[0].endswith(key) for key in keys)] or rows[:1]
    return "; ".join(f"{label} {value}" for label, value in chosen)


def _run(path: Path) -> dict:
    data = load(path)
    trusted = verdict(data).trustworthy
    return {"type": "run", "what": f"{data.kind} · {data.backend}",
            "completed": "yes" if data.summary.get("completed") else "no",
            "trustworthy": {True: "yes", False: "no", None: "-"}[trusted],
            "headline": _key_figures(data.kind, headline(data))}


def _sweep(path: Path) -> dict:
    sweep = SweepData(path)
    cells = len(sweep.record.get("cells") or []) or len(sweep.rows)
    completed = sum(row.get("completed") == "true" for row in sweep.rows)
    trusted = sum(row.get("trustworthy") == "true" for row in sweep.rows)
    backend = sweep.record.get("backend", "emulated")
    return {"type": "sweep", "what": f"sweep of {sweep.kind() or 'no cell yet'} · {backend}",
            "completed": f"{completed}/{cells} cells", "trustworthy": f"{trusted}/{cells} cells",
            "headline": sweep.name}


def entries(root: str | Path) -> list[dict]:
    """A row per run or sweep directory directly under ``root``, newest first (by the
    time its summary or results were last written)."""
    found = []
    for path in Path(root).iterdir():
        if path.is_symlink() or not path.is_dir() or path.name.startswith("."):
            continue  # results/latest points at a row of its own
        marker = path / RESULTS if (path / "sweep.yaml").exists() or (path / RESULTS).exists() else \
            path / "summary.json"
        if not marker.exists() and not (path / "sweep.yaml").exists():
            continue
        row = {"directory": path.name, "type": "sweep" if marker.name == RESULTS else "run", "what": "",
               "completed": "", "trustworthy": "", "headline": ""}
        try:
            row.update(_sweep(path) if row["type"] == "sweep" else _run(path))
        except Exception as err:  # noqa: BLE001 - one unreadable directory is a row saying why, not a stop
            row["headline"] = f"unreadable: {one_line(err)}"
        found.append((marker.stat().st_mtime if marker.exists() else path.stat().st_mtime, row))
    return [row for _, row in sorted(found, key=lambda pair: pair[0], reverse=True)]


def as_text(rows: list[dict]) -> str:
    """The rows aligned in columns, a header first."""
    header = {field: field for field in FIELDS}
    widths = {field: max(len(str(row[field])) for row in [header, *rows]) for field in FIELDS[:-1]}
    return "\n".join("  ".join(str(row[f]).ljust(widths[f]) for f in FIELDS[:-1]) + "  " + str(row["headline"])
                     for row in [header, *rows]).rstrip()


def as_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
