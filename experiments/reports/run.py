"""A run's ``report.html`` and its console summary, both read from the run directory."""
from __future__ import annotations

import contextlib
import contextvars
import json
from pathlib import Path

from experiments.errors import one_line
from experiments.reports import html
from experiments.reports.rundata import RunData, headline, load, num, tables, verdict
from experiments.store import ENVIRONMENT, SPEC, SUMMARY
from experiments.validation import shown_path

REPORT = "report.html"
_CONSOLE_SUMMARY = contextvars.ContextVar("console_summary", default=True)


@contextlib.contextmanager
def without_console_summary():
    """Runs that end without printing their summary (a sweep's simulated cells, seconds
    each: the sweep's progress line says what each did); their report.html and
    summary.json are written as ever."""
    token = _CONSOLE_SUMMARY.set(False)
    try:
        yield
    finally:
        _CONSOLE_SUMMARY.reset(token)


def where(path: Path) -> str:
    """A path as a newcomer can type it: relative to the working directory when under it."""
    try:
        path = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    return shown_path(path)


def _subtitle(data: RunData) -> str:
    s, env = data.summary, data.environment
    parts = [data.kind, data.backend, "completed" if s.get("completed") else "did NOT complete"]
    if s.get("wall_s") is not None:
        parts.append(f"{num(s['wall_s'], 's')} wall")
    if env.get("time_utc"):
        parts.append(f"started {env['time_utc']}")
    if env.get("git_commit"):
        parts.append(f"commit {env['git_commit'][:12]}{' (dirty tree)' if env.get('git_dirty') else ''}")
    return " · ".join(parts)


def _figures(data: RunData) -> list[str]:
    """The kind's plots, the figures the run already wrote, then the shared plots; a
    plot that cannot be drawn is one line, not a lost report."""
    written = sorted([*data.path.glob("*.png"), *data.path.glob("plots/*.png")])
    existing = [html.figure(f"{p.relative_to(data.path).as_posix()} (written by the run)", p.read_bytes())
                for p in written]
    try:
        from experiments.reports import figures
    except ImportError as err:  # the lent GPU machines may lack matplotlib: the page still gets written
        return existing + [html.paragraph(f"Plots not drawn: {one_line(err)}")]
    drawn, shared = [], []
    for draw in figures.for_run(data):
        target = shared if draw in figures.SHARED else drawn
        try:
            target += [html.figure(caption, png) for caption, png in draw(data)]
        except Exception as err:  # noqa: BLE001 - one plot's data problem must not lose the page
            target.append(html.paragraph(f"{draw.__name__}: not drawn ({one_line(err)})"))
    return drawn + existing + shared


def render_run(data: RunData) -> str:
    v = verdict(data)
    parts = [html.verdict(v), html.section("Headline", html.table(["metric", "value"], headline(data)))]
    parts += [html.section(title, html.table(header, rows)) for title, header, rows in tables(data)]
    shown = _figures(data)
    if shown:
        parts.append(html.section("Figures", *shown))
    parts.append(html.section("Summary", html.preformatted(json.dumps(data.summary, indent=2, sort_keys=True),
                                                           SUMMARY)))
    spec = data.path / SPEC
    parts.append(html.section("Resolved spec", html.preformatted(spec.read_text()) if spec.exists()
                              else html.paragraph(f"This run was recorded without its {SPEC}.")))
    if data.environment:
        parts.append(html.section("Environment", html.preformatted(
            json.dumps(data.environment, indent=2, sort_keys=True), ENVIRONMENT)))
    parts.append(html.section("Files", html.file_list(data.path, skip=[REPORT])))
    return html.page(data.name, _subtitle(data), parts)


def write_run_report(run: str | Path) -> Path:
    """Write ``report.html`` into a run directory (one with ``summary.json``); returns its path."""
    data = load(run)
    return html.write(data.path / REPORT, render_run(data))


def run_summary(run: str | Path) -> str:
    """What a run did, for the console: its headline metrics, whether it can be
    trusted and why not, where its report and files are."""
    data = load(run)
    v = verdict(data)
    lines = [f"{data.name}: {_subtitle(data)}"]
    rows = headline(data)
    width = max((len(label) for label, _ in rows), default=0)
    lines += [f"  {label:<{width}}  {value}" for label, value in rows]
    for _, header, table in tables(data):
        widths = [max(len(str(row[i])) for row in [header, *table]) for i in range(len(header))]
        lines += ["  " + "  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)).rstrip() for row in [header, *table]]
    if v.trustworthy is None:
        lines.append(f"trustworthy: not judged ({v.note})")
    else:
        lines.append(f"trustworthy: {'yes' if v.trustworthy else 'NO'}" + (f" ({v.note})" if v.note else ""))
    lines += [f"  - {reason}" for reason in v.reasons]
    report = data.path / REPORT
    if report.exists():
        lines.append(f"report: {where(report)}")
    entries = sorted(data.path.iterdir(), key=lambda p: (p.is_dir(), p.name))
    names = [p.name + ("/" if p.is_dir() else "") for p in entries if p.name != REPORT]
    lines.append(f"files:  {where(data.path)}/ ({', '.join(names[:10])}{', ...' if len(names) > 10 else ''})")
    return "\n".join(lines)


def publish_run(run: str | Path) -> None:
    """Write the run's report and print its summary: the end of every run. A report
    that cannot be written is one line; the run's data files are its result."""
    try:
        write_run_report(run)
    except Exception as err:  # noqa: BLE001 - the run's end must not fail over its report
        print(f"trainbed: report not written: {one_line(err)}")
    if not _CONSOLE_SUMMARY.get():
        return
    try:
        print(run_summary(run), flush=True)
    except Exception as err:  # noqa: BLE001 - as above
        print(f"trainbed: no summary: {one_line(err)}; run directory: {where(Path(run))}", flush=True)
