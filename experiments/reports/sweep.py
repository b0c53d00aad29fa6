"""A sweep's ``report.html`` and console summary, read from its directory:
``results.csv`` (one row per cell, with the box that ran it), ``sweep.yaml``, each cell's ``summary.json``
for the reasons behind an untrustworthy cell, and any figures already written there
(``trainbed figures``)."""
from __future__ import annotations

import functools
from html import escape
from pathlib import Path

import yaml

from experiments import store
from experiments.errors import SpecError, one_line
from experiments.kinds import KINDS
from experiments.reports import html
from experiments.reports.run import REPORT, where
from experiments.reports.rundata import load, num, verdict
from experiments.results import cell_dir, csv_value, lookup, record_backends
from experiments.stats import mean_sd
from experiments.validation import read_yaml

SPLIT_MAX_GROUPS = 12  # schedulers x grid points compared one by one; more: each scheduler pooled over the grid


def backends(record: dict) -> str:
    """The backends a sweep's record runs its cells on, as a listing shows them
    (``emulated+simulated``)."""
    return "+".join(sorted(record_backends(record)))


class SweepData:
    def __init__(self, directory: str | Path):
        self.path = Path(directory)
        self.rows = store.read_csv(self.path / store.RESULTS)
        record = self.path / store.SWEEP_RECORD
        self.record = read_yaml(record, store.SWEEP_RECORD, "sweep record") if record.exists() else {}
        if not isinstance(self.record, dict):
            raise SpecError(store.SWEEP_RECORD, f"{record} is not a sweep record (a mapping)")
        self.name = self.record.get("name") or self.path.name

    @functools.cached_property
    def problems(self) -> dict[str, list[str]]:
        """Per flagged cell (not completed, or untrustworthy), why: read from its run
        when asked (a listing of the store never asks)."""
        return {row["cell"]: self._reasons(row) for row in self.rows if self._flagged(row)}

    @staticmethod
    def _flagged(row: dict) -> bool:
        return row.get("completed") != "true" or row.get("trustworthy") == "false"

    def _reasons(self, row: dict) -> list[str]:
        cell = cell_dir(self.path, row["cell"])
        try:
            reasons = ([f"no {store.SUMMARY}"] if store.kept(cell / store.SUMMARY) is None  # failed before writing it
                       else verdict(load(cell)).reasons)
        except (OSError, ValueError) as err:  # a file of the run garbled or unreadable
            reasons = [f"its run cannot be read ({one_line(err)})"]
        if row.get("error") and not any(row["error"] in r for r in reasons):
            reasons.insert(0, row["error"])
        return reasons or ["no reason recorded"]

    def boxes(self) -> str | None:
        """Which boxes the completed cells ran on, where more than one did (or some cells
        have no box record: run before boxes were recorded), as one line; None for one box."""
        done = [row for row in self.rows if row.get("completed") == "true"]
        by: dict[str, list[dict]] = {}
        for row in done:
            by.setdefault(row.get("box") or "", []).append(row)
        unknown = by.pop("", [])
        if len(by) + bool(unknown) < 2:
            return None
        shown = []
        for box, cells in by.items():
            loops = [float(row["box_cpu_loop_ms"]) for row in cells if row.get("box_cpu_loop_ms")]
            loop = f", CPU loop {min(loops):.1f} ms" if loops else ""
            shown.append(f"{box} ({len(cells)} cell{'s' if len(cells) != 1 else ''}{loop})")
        if unknown:
            shown.append(f"{len(unknown)} cell{'s' if len(unknown) != 1 else ''} with no box recorded")
        return f"cells ran on more than one box: {', '.join(shown)}; compare cells across boxes with care"

    def kind(self) -> str | None:
        for row in self.rows:
            try:
                return load(cell_dir(self.path, row["cell"])).kind
            except (OSError, ValueError):
                continue
        return None

    def counts(self) -> str:
        """Cells, completed and trusted (a co-location sweep's cells are not judged)."""
        completed = sum(row.get("completed") == "true" for row in self.rows)
        if self.kind() == "colocation":
            return f"{len(self.rows)} cells, {completed} completed (co-location runs are not judged)"
        trusted = sum(row.get("trustworthy") == "true" for row in self.rows)
        return f"{len(self.rows)} cells, {completed} completed, {trusted} trustworthy"

    def compared(self) -> tuple[tuple[str, str, str], list[list[str]]] | None:
        """``compared_values`` as text: per group its label, mean, cells, standard
        deviation and the grid fields it pools."""
        compared = self.compared_values
        if compared is None:
            return None
        metric, groups = compared
        rows = []
        for label, values, pooled in groups:
            average, sd = mean_sd(values)  # num prints a single value's undefined sd as "n/a"
            rows.append([label, num(average, metric[2]), str(len(values)), num(sd, metric[2]), ", ".join(pooled)])
        return metric, rows

    @functools.cached_property
    def compared_values(self) -> tuple[tuple[str, str, str], list[tuple[str, list[float], list[str]]]] | None:
        """Per scheduler (per part and scheduler in a sweep of parts: they differ in more
        than the scheduler) and per grid point where the grid's points make at most
        ``SPLIT_MAX_GROUPS`` groups, the kind's compared metric of its completed cells
        (their seeds), and the grid fields whose values those cells pool (a larger
        grid: every point of a scheduler pooled)."""
        kind = KINDS.get(self.kind() or "")
        metric = kind.compared if kind else None
        if metric is None or not any(row.get("scheduler") for row in self.rows):
            return None
        column, _, unit = metric
        grid = list(self.record.get("grid") or {}) if isinstance(self.record.get("grid"), dict) else []
        done = [row for row in self.rows if row.get("completed") == "true" and row.get(column)]
        # Every cell the sweep plans, as results.csv spells it: the groups and the fields
        # that split them do not change as cells complete.
        planned = self._planned(grid) or self.rows
        varied = {part: [f for f in grid if len({r.get(f) for r in planned if r.get("part", "") == part}) > 1]
                  for part in {row.get("part", "") for row in planned + done}}

        def group(row: dict, split: bool) -> str:
            name = f"{row['part']} / {row['scheduler']}" if row.get("part") else row["scheduler"]
            point = ", ".join(f"{f}={row.get(f) or 'default'}" for f in varied[row.get("part", "")]) if split else ""
            return f"{name} ({point})" if point else name

        split = len({group(row, True) for row in planned}) <= SPLIT_MAX_GROUPS
        by: dict[str, list[dict]] = {}
        for row in done:
            by.setdefault(group(row, split), []).append(row)
        if not by:
            return None
        return metric, [(group, [float(row[column]) for row in cells],
                         [field for field in grid if len({row.get(field) for row in cells}) > 1])
                        for group, cells in by.items()]

    def _planned(self, grid: list[str]) -> list[dict]:
        """The record's cells as results.csv rows of their part, scheduler and grid fields
        ([] for a record without cells)."""
        cells = self.record.get("cells")
        if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("overrides"), dict)
                                                  for c in cells):
            return []
        base = self.record.get("base_spec")
        return [{"part": cell.get("part") or "",
                 "scheduler": csv_value(cell["overrides"].get("scheduler.name", lookup(base, "scheduler.name"))),
                 **{f: csv_value(cell["overrides"][f]) for f in grid if f in cell["overrides"]}} for cell in cells]


def _figures(sweep: SweepData) -> list[Path]:
    """PNG files in the sweep directory and its folders, except the cells' own."""
    return sorted(p for p in [*sweep.path.glob("*.png"), *sweep.path.glob("*/*.png")]
                  if p.parent.name not in (store.CELLS, store.FAILED_CELLS))


def _readable(text: str) -> str:
    """A decimal as six significant digits (``170.19009933668218`` -> ``170.19``);
    anything else as it is."""
    if "." not in text:
        return text
    try:
        return f"{float(text):.6g}"
    except ValueError:  # an id, a path, a version
        return text


def render_sweep(sweep: SweepData) -> str:
    on = "" if sweep.kind() == "colocation" else f" · backend {backends(sweep.record)}"
    subtitle = (sweep.counts()
                + (f" · base spec {sweep.record['spec']}" if sweep.record.get("spec") else "")  # in full: the record
                + on)
    parts = []
    boxes = sweep.boxes()
    if boxes:
        parts.append(html.section("Boxes", html.paragraph(f"{boxes} (the box column of the results).")))
    compared = sweep.compared()
    if compared:
        from experiments.reports.figures import compared_metric  # matplotlib: not for a listing of the store
        (_, label, _), rows = compared
        parts.append(html.section(f"{label} by scheduler (completed cells)", html.table(
            ["scheduler", f"mean {label}", "cells", "standard deviation", "pooled over"], rows),
            html.figure(*compared_metric(*sweep.compared_values))))
    if sweep.problems:
        parts.append(html.section("Untrustworthy or failed cells", html.table(
            ["cell", "reasons"], [[cell, "; ".join(reasons)] for cell, reasons in sweep.problems.items()],
            bad=[True] * len(sweep.problems))))
    header = list(sweep.rows[0]) if sweep.rows else []
    parts.append(html.section(f"Results ({store.RESULTS}, every digit there; six significant here)", html.table(
        header, [[_readable(row.get(h, "")) for h in header] for row in sweep.rows],
        bad=[row["cell"] in sweep.problems for row in sweep.rows])))
    figures = _figures(sweep)
    if figures:
        parts.append(html.section("Figures", *[html.figure(p.relative_to(sweep.path).as_posix(), p.read_bytes())
                                               for p in figures]))
    cells = []
    for row in sweep.rows:
        cell = f"{store.CELLS}/{row['cell']}"
        if not (sweep.path / cell).is_dir():
            cells.append(f"<li>{escape(row['cell'])} (no directory)</li>")
            continue
        report = sweep.path / cell / REPORT
        shown = html.link(f"{cell}/{REPORT}", row["cell"]) if report.exists() else escape(row["cell"])
        cells.append(f"<li>{shown} ({html.link(cell + '/', 'files')})</li>")
    parts.append(html.section("Cells", f"<ul>{''.join(cells)}</ul>"))
    if sweep.record:
        parts.append(html.section("Sweep record", html.preformatted(yaml.safe_dump(sweep.record, sort_keys=False),
                                                                    store.SWEEP_RECORD)))
    top = [p.name for p in sorted(sweep.path.iterdir()) if p.is_file() and p.name != REPORT]
    parts.append(html.section("Files", f"<ul>{''.join(f'<li>{html.link(n, n)}</li>' for n in top)}</ul>"))
    return html.page(f"sweep {sweep.name}", subtitle, parts)


def write_sweep_report(sweep_dir: str | Path) -> Path:
    """Write ``report.html`` into a sweep directory (one with ``results.csv``); returns its path."""
    sweep = SweepData(sweep_dir)
    return html.write(sweep.path / REPORT, render_sweep(sweep))


def sweep_summary(sweep_dir: str | Path) -> str:
    """A sweep for the console: cells done and trusted, the compared metric per
    scheduler, every untrustworthy or failed cell with its reasons, where things are."""
    sweep = SweepData(sweep_dir)
    lines = [f"sweep {sweep.name}: {sweep.counts()}"]
    compared = sweep.compared()
    if compared:
        (_, label, _), rows = compared
        shown = [f"{r[0]} {r[1]} ({r[2]} cell{'s' if r[2] != '1' else ''}{f', pooled over {r[4]}' if r[4] else ''})"
                 for r in rows]
        if len(shown) <= 3:
            lines.append(f"  {label} by scheduler: " + ", ".join(shown))
        else:  # a group a line: grid points make long labels
            lines += [f"  {label} by scheduler:", *(f"    {line}" for line in shown)]
    boxes = sweep.boxes()
    if boxes:
        lines.append(f"  {boxes}")
    for cell, reasons in sweep.problems.items():
        lines.append(f"  {cell}: " + "; ".join(reasons))
    report = sweep.path / REPORT
    if report.exists():
        lines.append(f"report: {where(report)}")
    lines.append(f"results: {where(sweep.path / store.RESULTS)}")
    return "\n".join(lines)


def publish_sweep(sweep_dir: str | Path, console: bool = True) -> None:
    """Write the sweep's report and print its summary: the end of every sweep;
    without ``console`` only the report, as each cell lands."""
    try:
        write_sweep_report(sweep_dir)
    except Exception as err:  # noqa: BLE001 - the sweep's results are its data files
        print(f"trainbed: sweep report not written: {one_line(err)}")
    if not console:
        return
    try:
        print(sweep_summary(sweep_dir), flush=True)
    except Exception as err:  # noqa: BLE001 - as above
        print(f"trainbed: no sweep summary: {one_line(err)}", flush=True)
