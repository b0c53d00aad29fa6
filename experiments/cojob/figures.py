"""The Grouper paper's testbed figures (TNSM 2020, §V-B, Figs. 10-12) from a sweep directory.

``grouper_figures(DIR)`` reads ``DIR/results.csv`` (``trainbed sweep``) and each
used cell's run directory, and writes into DIR (or ``out_dir``), data first: ``figure-N.csv``, then
``figure-N.md`` (the measured values beside the paper's), then ``figure-N.png``.

- Fig. 10: stage slowdown, its CDF per scheduler (``figure-10-cdf.csv``) and its
  average and 90th percentile; needs a solo calibration (``--solo`` run directories,
  each of one cojob of the cells' own setting run alone).
- Fig. 11: average SCT, CoJCT, JCT and T90 of each scheduler, normalised to FS.
- Fig. 12: each model's average SCT per scheduler, normalised to FS.

Only completed, trustworthy cells are used (a run the box could not keep up with
measures the box, not the scheduler); the tables say how many were left out.
Averages are over seeds; a ratio to FS (or Grouper's reduction against a baseline)
takes the seeds both schedulers have, so both sides average the same workloads.
Per-stage data comes from a cell's events.jsonl and workload.json when the run
directory has them (the data, recomputed with ``grouper_metrics``), else from its
summary.json. A sweep with a grid gets one table block and one plot row per grid point.

Paper numbers: the text of §V-B ("Performance improvement", the paragraphs on
Figs. 10 and 11) gives Grouper's reductions against Baraat, Sincronia and FS; the
figures' bars themselves are not given as numbers. For Fig. 11 the text gives
Grouper's value normalised to FS directly (1 - its reduction against FS); a
baseline's value normalised to FS is derived from two of them:
(1 - reduction vs FS) / (1 - reduction vs that baseline). Fig. 12 has no numbers
in the text, only the qualitative reading quoted in its table.
"""
from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

from experiments.cojob import metrics as gm
from experiments.cojob.spec import SCHEDULERS
from experiments.cojob.workload import MODELS
from experiments.errors import SpecError
from experiments.reports.markdown import markdown_table
from experiments.results import lookup, usable_cells
from experiments.stats import cdf, mean, paired_mean_ratio, percentile
from experiments.store import CELLS, EVENTS, SPEC, SWEEP_RECORD, write_csv
from experiments.validation import read_yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FS, GROUPER = "fs", "grouper"
OFFLINE, IMMEDIATE = "grouper-offline", "grouper-immediate"
PAPER_ORDER = (FS, "baraat", "sincronia", GROUPER)
# Every cojob scheduler, the paper's four first: each keeps its place and colour in every figure.
SCHEDULER_ORDER = (*PAPER_ORDER, *(s for s in SCHEDULERS if s not in PAPER_ORDER))
# sincronia-stage is BSSI over cojob stages, not the paper's Sincronia: no paper numbers.
LABELS = {FS: "FS", "baraat": "Baraat", "sincronia": "Sincronia", GROUPER: "Grouper",
          "sincronia-stage": "Sincronia-stage (not the paper's)", OFFLINE: "Grouper-Offline",
          IMMEDIATE: "Grouper-Immediate"}
# Scheduler names a spec may use for the paper's four designs.
ALIASES = {"fs": FS, "fair_share": FS, "fairshare": FS, "grouper": GROUPER, "pda": GROUPER,
           "baraat": "baraat", "sincronia": "sincronia"}
SOURCE = "Grouper (TNSM 2020) §V-B, 'Performance improvement'"

# Grouper's reductions in percent against each design, from the text (None: not given).
PAPER_FIG10 = {  # "reduce 90-th percentile stage slowdown by up to 14.6%, 34.1%, 27.5%"; ASSD 22.7/26.8/34.7
    "p90_stage_slowdown": {"baraat": 14.6, "sincronia": 34.1, FS: 27.5},
    "avg_stage_slowdown": {"baraat": 22.7, "sincronia": 26.8, FS: 34.7},
}
PAPER_FIG11 = {
    "avg_sct_s": {"baraat": 22.5, "sincronia": 24.2, FS: 31.0},
    "avg_cojct_s": {"baraat": 37.1, "sincronia": None, FS: 44.0},  # Sincronia: "close to that of Grouper"
    "avg_jct_s": {"baraat": 16.3, "sincronia": 26.5, FS: 28.0},
    "avg_t90_s": {"baraat": 11.6, "sincronia": 27.6, FS: 24.0},
}
FIG11_LABELS = {"avg_sct_s": "SCT", "avg_cojct_s": "CoJCT", "avg_jct_s": "JCT", "avg_t90_s": "T90"}
PAPER_FIG12_TEXT = (
    "The paper gives no numbers for Fig. 12; its text (§V-B, 'Performance insight') says: for large models "
    "(VGG19) Baraat's average SCT is much smaller than FS's, for small ones (DeepSpeech2) similar to FS's; "
    "Sincronia's is much smaller than FS's for small models and significantly higher for large ones; Grouper "
    "schedules shorter stages first at the bottleneck.")


@dataclass(frozen=True)
class CellResult:
    cell: str
    scheduler: str  # canonical (ALIASES) when one of the paper's designs
    seed: int | None
    config: str  # the grid point, "field=value, ...", or the sweep part ("all" without either)
    metrics: dict  # grouper_metrics.summarise's fields (or the summary's own)


def canonical(scheduler: str) -> str:
    return ALIASES.get(scheduler.lower(), scheduler)


SOLO_FREE = ("only_cojob", "placement")  # what a solo run may differ in from the cells' workload


def solo_calibration(run_dirs: Iterable[str | Path], reference: Path | None = None) -> gm.SoloSct:
    """The pooled solo SCTs of runs in each of which one cojob ran alone; with
    ``reference`` (a cell's run directory), each run must have run that cell's topology
    and workload (but for ``SOLO_FREE``): a solo SCT of another cluster or scale would
    divide the cells' SCTs into slowdowns of nothing."""
    runs = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        if not gm.has_run(run_dir):
            raise SpecError("--solo", f"{run_dir}: no {EVENTS} and {gm.WORKLOAD_FILE} "
                                      "(a solo run directory holds both)")
        events, workload = gm.read_run(run_dir)
        cojobs = {e["cojob"] for e in events if e.get("kind") == "cojob_arrival"}
        if len(cojobs) != 1:
            raise SpecError("--solo", f"{run_dir}: {len(cojobs)} cojobs ran, not one alone")
        if reference is not None:
            _same_setting(run_dir, reference)
        runs.append((events, workload))
    return gm.pool_solo(runs)


def _same_setting(solo: Path, cell: Path) -> None:
    ran, wanted = (read_yaml(d / SPEC, "--solo", "run spec") for d in (solo, cell))
    for field in ("topology", "workload"):
        a, b = (({k: v for k, v in (spec.get(field) or {}).items() if k not in SOLO_FREE}) for spec in (ran, wanted))
        if a != b:
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            raise SpecError("--solo", f"{solo}: its {field} differs from the sweep's cells in {', '.join(keys)}: a "
                                      "solo calibration runs the cells' own setting, one cojob alone")


def _cell_metrics(cell_dir: Path, summary: dict, solo: gm.SoloSct | None) -> dict:
    if gm.has_run(cell_dir):
        return gm.summarise(*gm.read_run(cell_dir), solo)
    if solo:  # a cell kept without its events: its summary's per-stage SCTs
        return {**summary, "stage_slowdown": gm.stage_slowdown(summary.get("sct_s", []), solo)}
    return summary


def load_results(results_dir: str | Path, solo: gm.SoloSct | None = None) -> tuple[list[CellResult], list[str]]:
    """The usable emulated cells of a sweep directory (``results.usable_cells``), and
    one note per cell left out (why)."""
    results_dir = Path(results_dir)
    sweep_file = results_dir / SWEEP_RECORD
    record = read_yaml(sweep_file, "sweep", "sweep record") if sweep_file.is_file() else {}
    check_cojob_sweep(record, sweep_file, "grouper")
    grid = list((record if isinstance(record, dict) else {}).get("grid") or {})
    used, left_out = usable_cells(results_dir, record, "emulated", ("scheduler",))
    cells = [CellResult(cell.row["cell"], canonical(cell.row["scheduler"]), cell.seed,
                        ", ".join(f"{key}={cell.row.get(key, '')}" for key in grid) or cell.row.get("part") or "all",
                        _cell_metrics(cell.run_dir, cell.summary, solo)) for cell in used]
    return cells, left_out


def check_cojob_sweep(record, sweep_file: Path, figures: str) -> None:
    """Refuse a sweep record whose cells are not cojobs (``figures``: the command's paper)."""
    kind = lookup(record, "base_spec.workload.kind")
    if kind is not None and kind != "cojob":
        raise SpecError(str(sweep_file), f"a sweep of {kind} cells; trainbed figures {figures} reads cojob sweeps")


def by_seed(cells: Iterable, scheduler: str, value) -> dict:
    """{seed: value(cell)} of one scheduler's cells (anything with ``scheduler`` and
    ``seed``), leaving out missing values."""
    found = {}
    for cell in cells:
        if cell.scheduler == scheduler and value(cell) is not None:
            found[cell.seed] = value(cell)
    return found


def reduction_pct(grouper: Mapping, other: Mapping) -> float | None:
    """Grouper's reduction against ``other`` in percent, over their common seeds."""
    ratio, _ = paired_mean_ratio(grouper, other)
    return None if ratio is None else 100 * (1 - ratio)


def scheduler_order(schedulers: Iterable[str]) -> list[str]:
    """``schedulers`` in ``SCHEDULER_ORDER``, then any others by name."""
    present = set(schedulers)
    return [s for s in SCHEDULER_ORDER if s in present] + sorted(present - set(SCHEDULER_ORDER))


def _configs(cells: Iterable[CellResult]) -> list[str]:
    return list(dict.fromkeys(cell.config for cell in cells))


def paper_normalised(reductions: Mapping[str, float | None], scheduler: str) -> float | None:
    """A design's value normalised to FS implied by Grouper's reductions (see module docstring)."""
    against_fs = reductions.get(FS)
    if against_fs is None:
        return None
    grouper = 1 - against_fs / 100
    if scheduler == FS:
        return 1.0
    if scheduler == GROUPER:
        return grouper
    against = reductions.get(scheduler)
    return None if against is None else grouper / (1 - against / 100)


def _slowdown_stat(cell: CellResult, stat: str) -> float | None:
    """One cell's average or 90th-percentile stage slowdown (the paper's two Fig. 10 statistics)."""
    values = [row["slowdown"] for row in cell.metrics.get("stage_slowdown") or []]
    return mean(values) if stat == "avg_stage_slowdown" else percentile(values, 90)


def figure10_rows(cells: Sequence[CellResult]) -> tuple[list[dict], list[dict]]:
    """(per-scheduler rows, CDF points) of stage slowdown: the CDF, average and 90th
    percentile pool every stage of every seed; Grouper's reductions compare each
    seed's statistic, averaged over the seeds both schedulers have."""
    rows, points = [], []
    for config in _configs(cells):
        here = [c for c in cells if c.config == config]
        schedulers = scheduler_order(c.scheduler for c in here)
        per_seed = {stat: {s: by_seed(here, s, lambda c, stat=stat: _slowdown_stat(c, stat)) for s in schedulers}
                    for stat in PAPER_FIG10}
        for scheduler in schedulers:
            values = [row["slowdown"] for c in here if c.scheduler == scheduler
                      for row in c.metrics.get("stage_slowdown") or []]
            row = {"config": config, "scheduler": scheduler, "stages": len(values),
                   "avg_stage_slowdown": mean(values), "p90_stage_slowdown": percentile(values, 90)}
            for stat, paper in PAPER_FIG10.items():
                grouper = per_seed[stat].get(GROUPER, {})
                row[f"grouper_reduction_{stat}_pct"] = (reduction_pct(grouper, per_seed[stat][scheduler])
                                                        if scheduler != GROUPER else None)
                row[f"paper_grouper_reduction_{stat}_pct"] = paper.get(scheduler)
            rows.append(row)
            points += [{"config": config, "scheduler": scheduler, "slowdown": x, "cdf": y} for x, y in cdf(values)]
    return rows, points


def figure11_rows(cells: Sequence[CellResult]) -> list[dict]:
    rows = []
    for config in _configs(cells):
        here = [c for c in cells if c.config == config]
        schedulers = scheduler_order(c.scheduler for c in here)
        for metric, paper in PAPER_FIG11.items():
            per_seed = {s: by_seed(here, s, lambda c: c.metrics.get(metric)) for s in schedulers}
            for scheduler, values in per_seed.items():
                rows.append({
                    "config": config, "metric": metric, "scheduler": scheduler, "seeds": len(values),
                    "mean_s": mean(values.values()),
                    "normalised_to_fs": paired_mean_ratio(values, per_seed.get(FS, {}))[0],
                    "paper_normalised_to_fs": paper_normalised(paper, scheduler),
                    "grouper_reduction_pct": (reduction_pct(per_seed.get(GROUPER, {}), values)
                                              if scheduler != GROUPER else None),
                    "paper_grouper_reduction_pct": paper.get(scheduler)})
    return rows


def _model_order(cells: Iterable[CellResult]) -> list[str]:
    present = {model for c in cells for model in c.metrics.get("per_model_avg_sct_s") or {}}
    return [m for m in MODELS if m in present] + sorted(present - set(MODELS))


def figure12_rows(cells: Sequence[CellResult]) -> list[dict]:
    rows = []
    for config in _configs(cells):
        here = [c for c in cells if c.config == config]
        schedulers = scheduler_order(c.scheduler for c in here)
        for model in _model_order(here):
            per_seed = {s: by_seed(here, s, lambda c: (c.metrics.get("per_model_avg_sct_s") or {}).get(model))
                        for s in schedulers}
            for scheduler, values in per_seed.items():
                rows.append({"config": config, "model": model, "scheduler": scheduler, "seeds": len(values),
                             "mean_s": mean(values.values()),
                             "normalised_to_fs": paired_mean_ratio(values, per_seed.get(FS, {}))[0],
                             "paper_normalised_to_fs": None})
    return rows


def fmt(value, kind: str = "ratio") -> str:
    """A table cell of the Grouper figures: "n/a" for a missing value, text as it is."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    return {"ratio": f"{value:.3f}", "s": f"{value:.1f}", "pct": f"{value:.1f}%", "change": f"{value:+.1f}%",
            "x": f"{value:g}"}[kind]


def scheduler_label(scheduler: str) -> str:
    return LABELS.get(scheduler, scheduler)


def scheduler_colour(scheduler: str, schedulers: Sequence[str] = ()) -> str:
    """A cojob scheduler's own colour in every plot (``SCHEDULER_ORDER``); another one
    takes the spare colours by its place among the others in ``schedulers``."""
    if scheduler in SCHEDULER_ORDER:
        return f"C{SCHEDULER_ORDER.index(scheduler)}"
    others = [s for s in schedulers if s not in SCHEDULER_ORDER]
    place = others.index(scheduler) if scheduler in others else 0
    return f"C{len(SCHEDULER_ORDER) + place % (10 - len(SCHEDULER_ORDER))}"


def _header(title: str, cells: Sequence[CellResult], left_out: Sequence[str]) -> list[str]:
    lines = [f"# {title}", "", f"Cells used: {len(cells)} (completed and trustworthy); left out: {len(left_out)}."]
    if left_out:
        lines.append("Left out: " + "; ".join(left_out) + ".")
    return lines + [""]


def _by_config(rows: Sequence[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        grouped.setdefault(row["config"], []).append(row)
    return grouped


def figure10_markdown(rows, cells, left_out, solo_note: str) -> str:
    lines = _header("Fig. 10: stage slowdown (SCT / SCT of the same model and stage run alone)", cells, left_out)
    lines += [solo_note, "",
              f"Paper: {SOURCE}: Grouper reduces the 90th-percentile stage slowdown by up to 14.6%, 34.1% and "
              "27.5% and the average stage slowdown (ASSD) by 22.7%, 26.8% and 34.7% against Baraat, Sincronia "
              "and FS; the absolute slowdowns of Fig. 10 are not given in the text (n/a).", ""]
    for config, block in _by_config(rows).items():
        lines += [f"## {config}", "", markdown_table(
            ["scheduler", "stages", "avg slowdown", "p90 slowdown", "Grouper's ASSD reduction vs it", "paper",
             "Grouper's p90 reduction vs it", "paper"],
            [[scheduler_label(r["scheduler"]), str(r["stages"]), fmt(r["avg_stage_slowdown"]),
              fmt(r["p90_stage_slowdown"]),
              fmt(r["grouper_reduction_avg_stage_slowdown_pct"], "pct"),
              fmt(r["paper_grouper_reduction_avg_stage_slowdown_pct"], "pct"),
              fmt(r["grouper_reduction_p90_stage_slowdown_pct"], "pct"),
              fmt(r["paper_grouper_reduction_p90_stage_slowdown_pct"], "pct")] for r in block]), ""]
    return "\n".join(lines)


def figure11_markdown(rows, cells, left_out) -> str:
    lines = _header("Fig. 11: average SCT, CoJCT, JCT and time to 90% accuracy, normalised to FS", cells, left_out)
    lines += [f"Paper: {SOURCE}: Grouper's reductions against Baraat / Sincronia / FS: SCT 22.5% / 24.2% / "
              "31.0% ('up to'), CoJCT 37.1% / n/a ('close to that of Grouper') / 44.0%, JCT 16.3% / 26.5% / "
              "28.0% ('up to'), T90 11.6% / 27.6% / 24.0%. Paper ÷FS: Grouper's is 1 - its reduction against "
              "FS; a baseline's is derived as (1 - Grouper's reduction vs FS) / (1 - Grouper's reduction vs it).",
              ""]
    for config, block in _by_config(rows).items():
        lines += [f"## {config}", "", markdown_table(
            ["metric", "scheduler", "seeds", "mean (s)", "÷FS", "paper ÷FS", "Grouper's reduction vs it", "paper"],
            [[FIG11_LABELS[r["metric"]], scheduler_label(r["scheduler"]), str(r["seeds"]), fmt(r["mean_s"], "s"),
              fmt(r["normalised_to_fs"]), fmt(r["paper_normalised_to_fs"]),
              fmt(r["grouper_reduction_pct"], "pct"), fmt(r["paper_grouper_reduction_pct"], "pct")]
             for r in block]), ""]
    return "\n".join(lines)


def figure12_markdown(rows, cells, left_out) -> str:
    lines = _header("Fig. 12: average SCT per model, normalised to FS", cells, left_out)
    lines += [PAPER_FIG12_TEXT, ""]
    for config, block in _by_config(rows).items():
        lines += [f"## {config}", "", markdown_table(
            ["model", "scheduler", "seeds", "mean SCT (s)", "÷FS", "paper ÷FS"],
            [[r["model"], scheduler_label(r["scheduler"]), str(r["seeds"]), fmt(r["mean_s"], "s"),
              fmt(r["normalised_to_fs"]), fmt(r["paper_normalised_to_fs"])] for r in block]), ""]
    return "\n".join(lines)


def _bars(ax, groups: Sequence[str], rows_by_group: Mapping[str, Mapping[str, dict]], schedulers: Sequence[str],
          value: str, paper: str | None = None) -> None:
    """Grouped bars, one group per x label and one bar per scheduler; the paper's
    value, where there is one, as a black marker on the bar."""
    width = 0.8 / max(1, len(schedulers))
    for i, scheduler in enumerate(schedulers):
        xs = [g + (i - (len(schedulers) - 1) / 2) * width for g in range(len(groups))]
        rows = [rows_by_group[group].get(scheduler, {}) for group in groups]
        ax.bar(xs, [r.get(value) or 0 for r in rows], width, label=scheduler_label(scheduler),
               color=scheduler_colour(scheduler, schedulers))
        if paper:
            marks = [(x, r[paper]) for x, r in zip(xs, rows) if r.get(paper) is not None]
            ax.plot([x for x, _ in marks], [y for _, y in marks], "k_", markersize=12, markeredgewidth=2,
                    label="paper" if i == 0 and marks else None)
    ax.set_xticks(range(len(groups)), groups)
    ax.grid(axis="y", alpha=0.3)


def figure10_plot(rows, points, path: Path, solo_note: str) -> None:
    configs = list(_by_config(rows)) or ["all"]
    fig, axes = plt.subplots(len(configs), 2, figsize=(11, 3.6 * len(configs)), squeeze=False)
    for (cdf_ax, bar_ax), config in zip(axes, configs):
        block = [r for r in rows if r["config"] == config]
        schedulers = [r["scheduler"] for r in block]
        for r in block:
            curve = [(p["slowdown"], p["cdf"]) for p in points
                     if p["config"] == config and p["scheduler"] == r["scheduler"]]
            if curve:  # from 0 at the smallest slowdown, so a single stage still draws a step
                cdf_ax.step([curve[0][0]] + [x for x, _ in curve], [0.0] + [y for _, y in curve], where="post",
                            label=scheduler_label(r["scheduler"]), color=scheduler_colour(r["scheduler"], schedulers))
        cdf_ax.set(xlabel="stage slowdown", ylabel="CDF", title=f"(a) CDF of stage slowdown ({config})")
        bar_ax.bar([scheduler_label(r["scheduler"]) for r in block], [r["avg_stage_slowdown"] or 0 for r in block],
                   color=[scheduler_colour(s, schedulers) for s in schedulers])
        bar_ax.set(ylabel="average stage slowdown", title="(b) average stage slowdown")
        if not any(r["stages"] for r in block):
            cdf_ax.text(0.5, 0.5, textwrap.fill(solo_note, 45), ha="center", va="center", fontsize=9,
                        transform=cdf_ax.transAxes)
        elif block:
            cdf_ax.legend(fontsize=8)
        cdf_ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def figure11_plot(rows, path: Path) -> None:
    configs = list(_by_config(rows)) or ["all"]
    fig, axes = plt.subplots(len(configs), 1, figsize=(8, 3.6 * len(configs)), squeeze=False)
    for ax, config in zip(axes[:, 0], configs):
        block = [r for r in rows if r["config"] == config]
        by_metric = {FIG11_LABELS[m]: {r["scheduler"]: r for r in block if r["metric"] == m} for m in FIG11_LABELS}
        _bars(ax, list(by_metric), by_metric, scheduler_order(r["scheduler"] for r in block), "normalised_to_fs",
              "paper_normalised_to_fs")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set(ylabel="normalised to FS", title=f"average completion times ({config})")
        ax.legend(fontsize=8, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def figure12_plot(rows, path: Path) -> None:
    configs = list(_by_config(rows)) or ["all"]
    fig, axes = plt.subplots(len(configs), 1, figsize=(8, 3.6 * len(configs)), squeeze=False)
    for ax, config in zip(axes[:, 0], configs):
        block = [r for r in rows if r["config"] == config]
        models = list(dict.fromkeys(r["model"] for r in block))
        by_model = {m: {r["scheduler"]: r for r in block if r["model"] == m} for m in models}
        _bars(ax, models, by_model, scheduler_order(r["scheduler"] for r in block), "normalised_to_fs")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set(ylabel="average SCT normalised to FS", title=f"average SCT per model ({config})")
        ax.legend(fontsize=8, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def grouper_figures(results_dir: str | Path, solo_runs: Sequence[str | Path] = (),
                    out_dir: str | Path | None = None) -> list[Path]:
    """Write Figs. 10-12 (CSV, Markdown, PNG) into ``out_dir`` (default ``results_dir``);
    returns the paths written."""
    results_dir = Path(results_dir)
    target = Path(out_dir) if out_dir is not None else results_dir
    reference = next((spec.parent for spec in sorted(results_dir.glob(f"{CELLS}/*/{SPEC}"))), None)
    solo = solo_calibration(solo_runs, reference) if solo_runs else None
    cells, left_out = load_results(results_dir, solo)
    if solo:
        solo_note = (f"Solo calibration: {len(solo_runs)} run(s), {len(solo)} (model, stage) pairs "
                     "(solo-sct.csv).")
    else:
        solo_note = ("No solo calibration: stage slowdown needs runs of each cojob alone "
                     "(`trainbed figures grouper DIR --solo RUN_DIR`).")
    written = []
    target.mkdir(parents=True, exist_ok=True)

    def out(name: str) -> Path:
        written.append(target / name)
        return target / name

    if solo:
        write_csv(out("solo-sct.csv"), [{"model": m, "stage": k, "solo_sct_s": s} for (m, k), s in solo.items()],
                  ("model", "stage", "solo_sct_s"))
    rows10, points10 = figure10_rows(cells)
    write_csv(out("figure-10.csv"), rows10, (
        "config", "scheduler", "stages", "avg_stage_slowdown", "p90_stage_slowdown",
        "grouper_reduction_avg_stage_slowdown_pct", "paper_grouper_reduction_avg_stage_slowdown_pct",
        "grouper_reduction_p90_stage_slowdown_pct", "paper_grouper_reduction_p90_stage_slowdown_pct"))
    write_csv(out("figure-10-cdf.csv"), points10, ("config", "scheduler", "slowdown", "cdf"))
    out("figure-10.md").write_text(figure10_markdown(rows10, cells, left_out, solo_note))
    figure10_plot(rows10, points10, out("figure-10.png"), solo_note)
    rows11 = figure11_rows(cells)
    write_csv(out("figure-11.csv"), rows11, ("config", "metric", "scheduler", "seeds", "mean_s", "normalised_to_fs",
                                             "paper_normalised_to_fs", "grouper_reduction_pct",
                                             "paper_grouper_reduction_pct"))
    out("figure-11.md").write_text(figure11_markdown(rows11, cells, left_out))
    figure11_plot(rows11, out("figure-11.png"))
    rows12 = figure12_rows(cells)
    write_csv(out("figure-12.csv"), rows12, ("config", "model", "scheduler", "seeds", "mean_s", "normalised_to_fs",
                                             "paper_normalised_to_fs"))
    out("figure-12.md").write_text(figure12_markdown(rows12, cells, left_out))
    figure12_plot(rows12, out("figure-12.png"))
    return written
