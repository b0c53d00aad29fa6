"""The Grouper paper's simulation figures (TNSM 2020, §V-C, Figs. 14-18) from a simulated sweep.

``grouper_sim_figures(DIR)`` reads ``DIR/results.csv`` and ``DIR/sweep.yaml`` of a
sweep with ``backend: simulated`` (``experiments/sweeps/grouper-sim-figures.yaml``)
and each used cell's run directory, and writes into DIR (or ``out_dir``) ``figure-14..18.csv`` (data),
``.md`` (ours beside the paper's) and ``.png``, plus ``figure-17-cdf.csv``.

Which cells a figure uses follows from the data, not from part names: every row of
``results.csv`` carries the value of every field any part of the sweep varies (the
base spec's where its cell does not set it). A figure along field F takes the cells
whose other fields are at the base spec's values, grouped by their value of F; so the
base point (workload 1.0x, ratio 1.0, the base period) is the same cells in every
figure, and a sweep need not run it once per figure.

- Fig. 14: average SCT and JCT normalised to FS along ``workload.arrivals.workload_factor``
  (FS, Baraat, Sincronia, Grouper).
- Fig. 15: the same along ``workload.comm_comp_ratio`` (DeepSpeech2's communication /
  computation ratio; ``experiments.cojob.workload.at_comm_comp_ratio``).
- Fig. 16: Grouper along ``scheduler.period_s``, shown in the paper's minutes (the
  period over 60 x the stages' ``iterations_scale``: every duration of a run is that
  fraction of the paper's), beside Grouper-Immediate and FS (no period) at the base.
- Fig. 17: stage slowdown of Grouper and Grouper-Offline at the base point: each
  stage's SCT over the mean solo SCT of its (model, stage), from the cells that run one
  cojob alone (``workload.only_cojob`` set, otherwise at the base), pooled per seed.
- Fig. 18: Grouper and Grouper-Offline normalised to FS along the workload factor.

Only completed, trustworthy cells are used; the tables say how many were left out.
Averages are over seeds; a ratio takes the seeds both sides have
(``experiments.stats.paired_mean_ratio``).
Metrics are recomputed from each cell's events (``experiments.cojob.metrics``).

The paper's numbers: Figs. 14-18 are given as plots; the text gives only what
``PAPER`` quotes, each with its sentence.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

from experiments.cojob import metrics as gm
from experiments.cojob.figures import (FS, GROUPER, IMMEDIATE, OFFLINE, by_seed, canonical, check_cojob_sweep, fmt,
                                       reduction_pct, scheduler_colour, scheduler_label, scheduler_order)
from experiments.errors import SpecError
from experiments.reports.markdown import markdown_table
from experiments.results import cell_backends, csv_value, lookup, usable_cells
from experiments.stats import cdf, mean, paired_mean_ratio, percentile
from experiments.store import EVENTS, RESULTS, SWEEP_RECORD, read_csv, write_csv
from experiments.validation import read_yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WORKLOAD, RATIO, PERIOD, SOLO = ("workload.arrivals.workload_factor", "workload.comm_comp_ratio",
                                 "scheduler.period_s", "workload.only_cojob")
METRICS = {"avg_sct_s": "SCT", "avg_jct_s": "JCT"}

# What §V-C's text says of each figure (the figures' points are not given as numbers).
PAPER = {
    14: {"axis": "workload: the job arrival intervals of Fig. 13b compressed (2.0x) or stretched (0.5x)",
         "swept": "0.1x to beyond 2.0x (the text names 0.1x, 0.5x, 1.0x and 2.0x)",
         "quotes": ["Fig. 14 shows that Grouper can significantly reduce average SCT and JCT in general, in "
                    "comparison with the other three network designs.",
                    "the performance improvements of Grouper increase as the workload increases from 0.1x to 1.0x.",
                    "when the workload is larger than 2.0x, the performance improvements of Grouper tend to be "
                    "stable."]},
    15: {"axis": "ratio of communication time to computation time",
         "swept": "not listed (the text names 0.5x)",
         "quotes": ["Grouper can reduce average SCT by up to 24.1%, 25.9%, and 34.0%, in comparison with Baraat, "
                    "Sincrona, and FS, respectively. The corresponding reductions in average JCT can be up to "
                    "17.6%, 26.3%, and 30.0%.",
                    "the performance improvements of Grouper tend to be stable when the ratio is larger than 0.5x."],
         # Grouper's largest reduction over the ratios swept, in percent, against each design
         "up_to": {"avg_sct_s": {"baraat": 24.1, "sincronia": 25.9, FS: 34.0},
                   "avg_jct_s": {"baraat": 17.6, "sincronia": 26.3, FS: 30.0}}},
    16: {"axis": "scheduling period, 1 to 100 minutes, and Grouper-Immediate (on every stage start and end)",
         "swept": "1 to 100 minutes (the text names 1, 20, 50 and 100)",
         "quotes": ["when the scheduling period is larger than 50 minutes, both the SCT and JCT of Grouper are "
                    "close to those of FS.",
                    "when the period is less than 20 minutes, the SCT and JCT of Grouper are stable and close to "
                    "those of Grouper updating coflow order upon a stage starting or ending (see Grouper-Immediate "
                    "in Fig. 16)."]},
    17: {"axis": "(a) CDF of stage slowdown, (b) average stage slowdown, Grouper and GrouperOffline",
         "swept": "one workload (not stated)",
         "quotes": ["The average stage slowdown of Grouper is increased by 12.0%, compared with GrouperOffline, as "
                    "shown in Fig. 17(b)."],
         "online_over_offline_pct": 12.0},
    18: {"axis": "workload, Grouper and GrouperOffline normalised to FS",
         "swept": "as Fig. 14",
         "quotes": ["Fig. 18 shows that average SCT and JCT of Grouper is always slightly larger than those of "
                    "GrouperOffline. Compared with GrouperOffline, the performance degradation of Grouper is at "
                    "most 14.2%, in terms of average SCT and JCT."],
         "max_online_over_offline_pct": 14.2},
}
SOURCE = "Grouper (TNSM 2020) §V-C"


@dataclass(frozen=True)
class SimCell:
    cell: str
    scheduler: str
    seed: int | None
    values: dict  # every varied field -> its value in this cell (None: unset)
    metrics: dict  # metrics.summarise of the cell's events, without solo calibration
    run_dir: Path


@dataclass(frozen=True)
class SimSweep:
    cells: list[SimCell]
    left_out: list[str]
    base: dict  # every varied field -> the base spec's value
    iterations_scale: float
    not_run: int = 0  # the record's cells with no row in results.csv (a sweep stopped or run in part)


def _value(text: str):
    """A cell's value of a field as ``results.csv`` spells it: None when unset, a
    number when it is one, else the text."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def load(results_dir: str | Path) -> SimSweep:
    """The usable simulated cells of a sweep directory (``results.usable_cells``, each
    with its events), with what was left out and the base point."""
    results_dir = Path(results_dir)
    record_path = results_dir / SWEEP_RECORD
    if not record_path.is_file():
        raise SpecError("dir", f"{record_path}: no such file (a sweep directory of `trainbed sweep`)")
    record = read_yaml(record_path, "sweep", "sweep record")
    if not isinstance(record, dict) or not isinstance(record.get("base_spec"), dict):
        raise SpecError("dir", f"{record_path}: not a sweep record")
    check_cojob_sweep(record, record_path, "grouper-sim")
    fields = list(record.get("grid") or {})
    base = {field: _value(csv_value(lookup(record["base_spec"], field))) for field in fields}

    def lacks_events(cell) -> str | None:  # the metrics are recomputed from them
        return None if gm.has_run(cell.run_dir) else f"no {EVENTS} and {gm.WORKLOAD_FILE}"

    used, left_out = usable_cells(results_dir, record, "simulated", ("scheduler", *fields), needs=lacks_events)
    cells = [SimCell(c.row["cell"], canonical(c.row["scheduler"]), c.seed, {f: _value(c.row[f]) for f in fields},
                     gm.summarise(*gm.read_run(c.run_dir)), c.run_dir) for c in used]
    scale = lookup(record["base_spec"], "workload.iterations_scale")
    ran = {row["cell"] for row in read_csv(results_dir / RESULTS)}
    not_run = sum(backend == "simulated" and cid not in ran for cid, backend in cell_backends(record).items())
    return SimSweep(cells, left_out, base, float(scale) if isinstance(scale, (int, float)) else 1.0, not_run)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b)
    return a == b


def along(sweep: SimSweep, field: str, schedulers: Iterable[str]) -> dict:
    """The cells of ``schedulers`` at the base point on every field but ``field``, by
    their value of it (ascending), one cell per (value, scheduler, seed)."""
    schedulers = set(schedulers)
    found: dict = {}
    for cell in sweep.cells:
        x = cell.values.get(field)
        if cell.scheduler not in schedulers or x is None:
            continue
        if all(_same(value, sweep.base.get(other)) for other, value in cell.values.items() if other != field):
            found.setdefault(x, {}).setdefault((cell.scheduler, cell.seed), cell)
    return {x: list(found[x].values()) for x in sorted(found)}


def at_base(sweep: SimSweep, schedulers: Iterable[str], free: Iterable[str] = ()) -> list[SimCell]:
    """The cells of ``schedulers`` at the base point (fields in ``free`` may take any value)."""
    schedulers, free = set(schedulers), set(free)
    chosen: dict[tuple, SimCell] = {}
    for cell in sweep.cells:
        if cell.scheduler in schedulers and all(_same(value, sweep.base.get(field))
                                                for field, value in cell.values.items() if field not in free):
            chosen.setdefault((cell.scheduler, cell.seed), cell)
    return list(chosen.values())


def _change_pct(ratio: float | None) -> float | None:
    return None if ratio is None else 100 * (ratio - 1)


def normalised_rows(sweep: SimSweep, field: str, column: str, schedulers: Sequence[str]) -> list[dict]:
    """Per value of ``field``, metric and scheduler: the mean over seeds, it over FS's
    at the same value, and Grouper's reduction against it (percent)."""
    rows = []
    for x, cells in along(sweep, field, schedulers).items():
        for metric in METRICS:
            fs = by_seed(cells, FS, lambda c, m=metric: c.metrics.get(m))
            grouper = by_seed(cells, GROUPER, lambda c, m=metric: c.metrics.get(m))
            offline = by_seed(cells, OFFLINE, lambda c, m=metric: c.metrics.get(m))
            for scheduler in scheduler_order(c.scheduler for c in cells):
                values = by_seed(cells, scheduler, lambda c, m=metric: c.metrics.get(m))
                rows.append({column: x, "metric": metric, "scheduler": scheduler, "seeds": len(values),
                             "mean_s": mean(values.values()), "normalised_to_fs": paired_mean_ratio(values, fs)[0],
                             "grouper_reduction_pct": reduction_pct(grouper, values) if scheduler != GROUPER else None,
                             "grouper_over_offline_pct": (_change_pct(paired_mean_ratio(grouper, offline)[0])
                                                          if scheduler == GROUPER else None)})
    return rows


def figure16_rows(sweep: SimSweep) -> list[dict]:
    """Grouper per period, and Grouper-Immediate and FS, normalised to FS at the base."""
    references = at_base(sweep, (FS, IMMEDIATE), free=(PERIOD,))
    rows = []
    for metric in METRICS:
        fs = by_seed(references, FS, lambda c, m=metric: c.metrics.get(m))
        immediate = by_seed(references, IMMEDIATE, lambda c, m=metric: c.metrics.get(m))
        for period, cells in along(sweep, PERIOD, (GROUPER,)).items():
            values = by_seed(cells, GROUPER, lambda c, m=metric: c.metrics.get(m))
            rows.append(_period_row(metric, GROUPER, period, values, fs, immediate, sweep.iterations_scale))
        for scheduler, values in ((IMMEDIATE, immediate), (FS, fs)):
            if values:
                rows.append(_period_row(metric, scheduler, None, values, fs, immediate, sweep.iterations_scale))
    return rows


def _period_row(metric, scheduler, period, values, fs, immediate, iterations_scale) -> dict:
    return {"period_s": period, "paper_period_min": None if period is None else period / (60 * iterations_scale),
            "metric": metric, "scheduler": scheduler, "seeds": len(values), "mean_s": mean(values.values()),
            "normalised_to_fs": paired_mean_ratio(values, fs)[0],
            "over_immediate_pct": _change_pct(paired_mean_ratio(values, immediate)[0])}


def solo_by_seed(sweep: SimSweep) -> dict[int | None, gm.SoloSct]:
    """Each seed's solo calibration: its cells of one cojob alone, at the base point otherwise."""
    runs: dict[int | None, list] = {}
    for cells in along(sweep, SOLO, {c.scheduler for c in sweep.cells}).values():
        for cell in cells:
            runs.setdefault(cell.seed, []).append(gm.read_run(cell.run_dir))
    return {seed: gm.pool_solo(pairs) for seed, pairs in runs.items()}


def figure17_rows(sweep: SimSweep, solo: dict[int | None, gm.SoloSct]) -> tuple[list[dict], list[dict]]:
    """(per-scheduler slowdown statistics, CDF points) at the base point, pooled over
    the seeds that have a solo calibration; Grouper over Grouper-Offline per seed."""
    cells = at_base(sweep, (GROUPER, OFFLINE))
    slowdowns = {c.cell: [r["slowdown"] for r in gm.stage_slowdown(c.metrics["sct_s"], solo[c.seed])]
                 for c in cells if c.seed in solo}
    average = {s: by_seed(cells, s, lambda c: mean(slowdowns.get(c.cell, []))) for s in {c.scheduler for c in cells}}
    rows, points = [], []
    for scheduler in scheduler_order(average):
        values = [v for c in cells if c.scheduler == scheduler for v in slowdowns.get(c.cell, [])]
        rows.append({"scheduler": scheduler, "seeds": len(average[scheduler]), "stages": len(values),
                     "avg_stage_slowdown": mean(values), "p90_stage_slowdown": percentile(values, 90),
                     "over_offline_pct": (_change_pct(paired_mean_ratio(average[scheduler],
                                                                        average.get(OFFLINE, {}))[0])
                                          if scheduler != OFFLINE else None)})
        points += [{"scheduler": scheduler, "slowdown": x, "cdf": y} for x, y in cdf(values)]
    return rows, points


# --- Markdown -------------------------------------------------------------------------
def _header(number: int, title: str, sweep: SimSweep, used: int) -> list[str]:
    paper = PAPER[number]
    lines = [f"# Fig. {number}: {title}", "",
             f"Cells used: {used} (completed and trustworthy, at the base point but for the field varied); "
             f"left out of the sweep: {len(sweep.left_out)}"
             f"{f'; not run: {sweep.not_run} of the sweep file' if sweep.not_run else ''}."]
    if sweep.left_out:
        lines.append("Left out: " + "; ".join(sweep.left_out) + ".")
    lines += ["", f"Paper ({SOURCE}): x axis: {paper['axis']}; values: {paper['swept']}."]
    lines += [f"> {quote}" for quote in paper["quotes"]]
    return lines + [""]


def _ordering(rows: Sequence[dict], metric: str, column: str) -> list[str]:
    """Per x value, the schedulers from the smallest mean to the largest."""
    lines = []
    for x in dict.fromkeys(r[column] for r in rows):
        block = sorted((r for r in rows if r[column] == x and r["metric"] == metric and r["mean_s"] is not None),
                       key=lambda r: r["mean_s"])
        if block:
            lines.append(f"{fmt(x, 'x')}: " + " < ".join(scheduler_label(r["scheduler"]) for r in block))
    return lines


def normalised_markdown(number: int, title: str, rows: Sequence[dict], column: str, sweep: SimSweep,
                        used: int, offline: bool, extra: Sequence[str] = ()) -> str:
    lines = _header(number, title, sweep, used)
    for metric, name in METRICS.items():
        block = [r for r in rows if r["metric"] == metric]
        lines += [f"## Average {name}", "", markdown_table(
            [column, "scheduler", "seeds", f"mean {name} (s)", "÷FS", "Grouper's reduction vs it",
             *(["Grouper over Offline"] if offline else [])],
            [[fmt(r[column], "x"), scheduler_label(r["scheduler"]), str(r["seeds"]), fmt(r["mean_s"], "s"),
              fmt(r["normalised_to_fs"]), fmt(r["grouper_reduction_pct"], "pct"),
              *([fmt(r["grouper_over_offline_pct"], "change")] if offline else [])] for r in block]), "",
            f"Ordering by mean {name}, smallest first: " + "; ".join(_ordering(rows, metric, column) or ["n/a"]), ""]
    return "\n".join([*lines, *extra])


def figure15_extra(rows: Sequence[dict]) -> list[str]:
    """Grouper's largest reduction against each design over the ratios swept, beside the paper's "up to"."""
    def largest(metric: str, scheduler: str) -> float | None:
        found = [r["grouper_reduction_pct"] for r in rows if r["metric"] == metric and r["scheduler"] == scheduler
                 and r["grouper_reduction_pct"] is not None]
        return max(found, default=None)

    return ["## Beside the paper's numbers", "", markdown_table(
        ["metric", "against", "Grouper's largest reduction (ours)", "paper ('up to')"],
        [[METRICS[metric], scheduler_label(s), fmt(largest(metric, s), "pct"), f"{paper}%"]
         for metric, by in PAPER[15]["up_to"].items() for s, paper in by.items()]), ""]


def figure16_markdown(rows: Sequence[dict], sweep: SimSweep, used: int) -> str:
    lines = _header(16, "average SCT and JCT vs the scheduling period, normalised to FS", sweep, used)
    lines += [f"A period here is the paper's minutes x 60 x {sweep.iterations_scale:g} s (the stages' scale).", ""]
    for metric, name in METRICS.items():
        lines += [f"## Average {name}", "", markdown_table(
            ["scheduler", "period (s)", "paper minutes", "seeds", f"mean {name} (s)", "÷FS", "over Immediate"],
            [[scheduler_label(r["scheduler"]), fmt(r["period_s"], "x") if r["period_s"] is not None else "-",
              fmt(r["paper_period_min"], "x") if r["paper_period_min"] is not None else "-", str(r["seeds"]),
              fmt(r["mean_s"], "s"), fmt(r["normalised_to_fs"]), fmt(r["over_immediate_pct"], "change")]
             for r in rows if r["metric"] == metric]), ""]
    return "\n".join(lines)


def figure17_markdown(rows: Sequence[dict], sweep: SimSweep, used: int, solo_seeds: int) -> str:
    lines = _header(17, "stage slowdown, online vs offline (at the base point)", sweep, used)
    lines += [f"Solo calibration: the cells of one cojob alone, {solo_seeds} seed(s).", "", markdown_table(
        ["scheduler", "seeds", "stages", "avg slowdown", "p90 slowdown", "avg over Offline", "paper"],
        [[scheduler_label(r["scheduler"]), str(r["seeds"]), str(r["stages"]), fmt(r["avg_stage_slowdown"]),
          fmt(r["p90_stage_slowdown"]), fmt(r["over_offline_pct"], "change"),
          f"+{PAPER[17]['online_over_offline_pct']}%" if r["scheduler"] == GROUPER else ""] for r in rows]), ""]
    return "\n".join(lines)


def figure18_extra(rows: Sequence[dict]) -> list[str]:
    changes = [r["grouper_over_offline_pct"] for r in rows if r["grouper_over_offline_pct"] is not None]
    largest = max(changes, default=None)
    return ["## Beside the paper's numbers", "",
            f"Grouper over Grouper-Offline, largest over the workloads and both metrics: {fmt(largest, 'change')} "
            f"(paper: at most +{PAPER[18]['max_online_over_offline_pct']}%, and always above); "
            f"Grouper above Offline in {sum(c > 0 for c in changes)} of {len(changes)} (workload, metric) points.", ""]


# --- plots -------------------------------------------------------------------------------
def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _log_x(ax, xs: Iterable[float]) -> None:
    """A log x axis ticked at the values swept."""
    xs = sorted(set(xs))
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(xs, [f"{x:g}" for x in xs])


def _lines_plot(rows: Sequence[dict], column: str, xlabel: str, title: str, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
    for ax, (metric, name) in zip(axes[0], METRICS.items()):
        block = [r for r in rows if r["metric"] == metric and r["normalised_to_fs"] is not None]
        for scheduler in scheduler_order(r["scheduler"] for r in block):
            points = [(r[column], r["normalised_to_fs"]) for r in block if r["scheduler"] == scheduler]
            ax.plot([x for x, _ in points], [y for _, y in points], "o-", label=scheduler_label(scheduler),
                    color=scheduler_colour(scheduler))
        _log_x(ax, [r[column] for r in block])
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set(xlabel=xlabel, ylabel=f"average {name} normalised to FS", title=f"{title}: average {name}")
        ax.grid(alpha=0.3)
        if block:
            ax.legend(fontsize=8)
    _save(fig, path)


def figure16_plot(rows: Sequence[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
    for ax, (metric, name) in zip(axes[0], METRICS.items()):
        block = [r for r in rows if r["metric"] == metric and r["normalised_to_fs"] is not None]
        periodic = [r for r in block if r["paper_period_min"] is not None]
        ax.plot([r["paper_period_min"] for r in periodic], [r["normalised_to_fs"] for r in periodic], "o-",
                label=scheduler_label(GROUPER), color=scheduler_colour(GROUPER))
        for r in block:
            if r["paper_period_min"] is None:
                ax.axhline(r["normalised_to_fs"], linestyle="--", color=scheduler_colour(r["scheduler"]),
                           label=scheduler_label(r["scheduler"]))
        _log_x(ax, [r["paper_period_min"] for r in periodic])
        ax.set(xlabel="scheduling period (the paper's minutes)", ylabel=f"average {name} normalised to FS",
               title=f"Fig. 16: average {name}")
        ax.grid(alpha=0.3)
        if block:
            ax.legend(fontsize=8)
    _save(fig, path)


def figure17_plot(rows: Sequence[dict], points: Sequence[dict], path: Path) -> None:
    fig, (cdf_ax, bar_ax) = plt.subplots(1, 2, figsize=(11, 3.8))
    for r in rows:
        curve = [(p["slowdown"], p["cdf"]) for p in points if p["scheduler"] == r["scheduler"]]
        if curve:
            cdf_ax.step([curve[0][0]] + [x for x, _ in curve], [0.0] + [y for _, y in curve], where="post",
                        label=scheduler_label(r["scheduler"]), color=scheduler_colour(r["scheduler"]))
    cdf_ax.set(xlabel="stage slowdown", ylabel="CDF", title="Fig. 17(a): CDF of stage slowdown")
    cdf_ax.grid(alpha=0.3)
    if points:
        cdf_ax.legend(fontsize=8)
    bar_ax.bar([scheduler_label(r["scheduler"]) for r in rows], [r["avg_stage_slowdown"] or 0 for r in rows],
               color=[scheduler_colour(r["scheduler"]) for r in rows])
    bar_ax.set(ylabel="average stage slowdown", title="Fig. 17(b): average stage slowdown")
    bar_ax.tick_params(axis="x", labelsize=8)
    _save(fig, path)


NORMALISED_COLUMNS = ("metric", "scheduler", "seeds", "mean_s", "normalised_to_fs", "grouper_reduction_pct")


_DESIGNS = (FS, "baraat", "sincronia", GROUPER)
# Figs. 14, 15 and 18: (number, the field varied, its column, the schedulers, title, x label)
_ALONG = ((14, WORKLOAD, "workload_factor", _DESIGNS, "average SCT and JCT vs workload, normalised to FS",
           "workload (x the base arrival rate)"),
          (15, RATIO, "comm_comp_ratio", _DESIGNS, "average SCT and JCT vs the communication/computation ratio",
           "DeepSpeech2's communication / computation ratio"),
          (18, WORKLOAD, "workload_factor", (FS, GROUPER, OFFLINE),
           "online vs offline Grouper vs workload, normalised to FS", "workload (x the base arrival rate)"))


def _read_by_any_figure(sweep: SimSweep) -> bool:
    """Whether a figure has a cell of ``sweep`` to draw: one of Figs. 14, 15, 18 along
    its field, Fig. 16's Grouper along the period or its immediate reference, Fig. 17's
    slowdowns (a seed with solo runs)."""
    along_any = any(cells for _, field, _, schedulers, _, _ in _ALONG
                    for cells in along(sweep, field, schedulers).values())
    period = any(along(sweep, PERIOD, (GROUPER,)).values()) or bool(at_base(sweep, (IMMEDIATE,), free=(PERIOD,)))
    slowdowns = any(row["seeds"] for row in figure17_rows(sweep, solo_by_seed(sweep))[0])
    return along_any or period or slowdowns


def grouper_sim_figures(results_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write Figs. 14-18 (CSV, Markdown, PNG) into ``out_dir`` (default ``results_dir``);
    returns the paths written."""
    results_dir = Path(results_dir)
    target = Path(out_dir) if out_dir is not None else results_dir
    sweep = load(results_dir)
    if not _read_by_any_figure(sweep):  # five empty figures would say nothing the sweep lacks
        raise SpecError("dir", f"{results_dir}: none of its {len(sweep.cells)} cells is one Figs. 14-18 read (a "
                               f"scheduler of theirs at the base spec's point, one figure's field varied): "
                               f"experiments/sweeps/grouper-sim-figures.yaml makes them")
    written = []
    target.mkdir(parents=True, exist_ok=True)

    def out(name: str) -> Path:
        written.append(target / name)
        return target / name

    for number, field, column, schedulers, title, xlabel in _ALONG:
        rows = normalised_rows(sweep, field, column, schedulers)
        used = sum(len(cells) for cells in along(sweep, field, schedulers).values())
        offline = OFFLINE in schedulers
        write_csv(out(f"figure-{number}.csv"), rows,
                  (column, *NORMALISED_COLUMNS, *(["grouper_over_offline_pct"] if offline else [])))
        extra = figure15_extra(rows) if number == 15 else figure18_extra(rows) if number == 18 else ()
        out(f"figure-{number}.md").write_text(normalised_markdown(number, title, rows, column, sweep, used, offline,
                                                                  extra))
        _lines_plot(rows, column, xlabel, f"Fig. {number}", out(f"figure-{number}.png"))
    rows16 = figure16_rows(sweep)
    write_csv(out("figure-16.csv"), rows16, ("period_s", "paper_period_min", "metric", "scheduler", "seeds", "mean_s",
                                             "normalised_to_fs", "over_immediate_pct"))
    used16 = sum(len(c) for c in along(sweep, PERIOD, (GROUPER,)).values()) + \
        len(at_base(sweep, (FS, IMMEDIATE), free=(PERIOD,)))
    out("figure-16.md").write_text(figure16_markdown(rows16, sweep, used16))
    figure16_plot(rows16, out("figure-16.png"))
    solo = solo_by_seed(sweep)
    rows17, points17 = figure17_rows(sweep, solo)
    write_csv(out("figure-17.csv"), rows17, ("scheduler", "seeds", "stages", "avg_stage_slowdown",
                                             "p90_stage_slowdown", "over_offline_pct"))
    write_csv(out("figure-17-cdf.csv"), points17, ("scheduler", "slowdown", "cdf"))
    out("figure-17.md").write_text(figure17_markdown(rows17, sweep, sum(r["seeds"] for r in rows17), len(solo)))
    figure17_plot(rows17, points17, out("figure-17.png"))
    return sorted(written, key=lambda p: p.name)
