"""The DGTP paper's testbed figures (§VI-A: Table III, Figs. 6, 7 and 8) from a sweep
directory of gnn cells (``experiments/sweeps/gnn-dgtp.yaml``, ``gnn-dgtp-allreduce.yaml``,
``gnn-dgtp-reddit.yaml``, ``gnn-dgtp-mixed.yaml``).

``dgtp_figures(DIR)`` reads ``DIR/results.csv`` and each used cell's run directory
and writes into DIR (or ``out_dir``), data first:

- ``table-3.csv`` / ``table-3.md``: per placement x policy, the time to the target
  validation accuracy (mean and spread over seeds), the same counted from worker 0's
  first iteration end (the tasks' start-up left out: mostly the box's speed at
  Python, it differs between boxes by more than the placements do), the mean
  iteration time and the model's prediction for it; then DGTP's speed-up over
  DistDGL + FIFO beside the paper's, and the shares of the gain that come from
  placement (ETP under default scheduling against DistDGL under default scheduling)
  and from OES (DistDGL under OES against DistDGL under default scheduling).
- ``figure-6.csv`` / ``figure-6.png``: validation accuracy against time, one line per
  placement x policy (the lowest seed every one of them has).
- ``figure-7.csv`` / ``figure-7.png``: bandwidth used per machine over time (sent plus
  received, 1 s bins), DistDGL + FIFO beside DGTP (that seed).

Readings, stated here and in docs/gnn-oes.md:

- The paper's speed-up formula is garbled in the text ("Time-to-Convergence of DistDGL
  / Time-to-Convergence of DistDGL"); its numbers ("DGTP outperforms DistDGL by 28%")
  are read as the reduction 1 - T_DGTP / T_DistDGL of the time to the target accuracy.
- A cell is placed by its placement kind (``distdgl``, ``etp``, ...) and its scheduler:
  ``default`` is DistDGL's FIFO (TCP sharing, tasks run when ready), ``oes`` is OES.
  DGTP is ETP + OES.
- Ratios pair seeds: both sides average the seeds both have (every cell of a seed
  trains on the same graph, so only the network differs).
- Fig. 7's bandwidth is from the tasks' transfer reports (``flows.csv``: a transfer's
  bytes spread evenly over its duration), payload only, counted at both ends: the
  paper plots what each server's NIC carried.
- Only completed, trustworthy cells are used; the tables say how many were left out.
- A sweep has one cell per placement, policy and seed: one whose grid varies anything
  else (the synchronisation, the graph) is refused, not averaged; table each value from
  its own sweep (``table3_across`` sets them side by side).
- A cell whose summary predates ``time_to_accuracy_after_first_iteration_s`` gets it
  from its kept events (``metrics.training``, as a run computes it now).
- A sweep whose machines compute at different speeds (a ``workload.compute_factor``
  above 1) is the paper's mixed testbed: its table is ``figure-8-table.{csv,md}`` and
  ``figure-8-table-gains.csv``, with Fig. 8's 48% beside, and its training progress
  ``figure-8.{csv,png}`` in place of Fig. 6's.

``table3_across(DIRS, OUT)`` sets several such sweeps side by side, one row per sweep
(its synchronisation, graph and testbed): ``OUT/table-3-all.{csv,md}``, DGTP's gain
over DistDGL + FIFO (also from the first iteration's end) with the paper's beside,
and the placement and OES shares.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

from experiments import store
from experiments.errors import SpecError
from experiments.gnn.metrics import binned_host_mbps, training
from experiments.reports.markdown import markdown_table
from experiments.results import usable_cells
from experiments.stats import mean_sd, paired_mean_ratio
from experiments.validation import read_yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DISTDGL, DEFAULT, OES = "distdgl", "default", "oes"
BIN_S = 1.0  # Fig. 7's time bins
AFTER_FIRST = "time_to_accuracy_after_first_iteration_s"  # less the start-up and the first iteration
SOURCE = {"Table III": "DGTP paper §VI-A, Table III and 'End-to-end training performance'",
          "Fig. 8 (mixed testbed)": "DGTP paper §VI-A, Fig. 8 and 'Heterogeneous testbed'"}
# Table III: DGTP's speed-up over DistDGL in percent (the text's "outperforms by").
PAPER_TABLE3 = {("ps", "ogbn-products"): 28, ("ps", "reddit"): 26, ("allreduce", "ogbn-products"): 26,
                ("allreduce", "reddit"): 24}
PAPER_FIG8 = 48  # the mixed testbed, ring all-reduce, ogbn-products


@dataclass(frozen=True)
class Cell:
    """One used cell: its placement kind, scheduler, seed, summary and run directory."""

    placement: str
    scheduler: str
    seed: int  # the run's own (its summary's): a sweep that sets none runs the spec's default
    summary: dict
    run_dir: Path

    @property
    def key(self) -> tuple[str, str]:
        return self.placement, self.scheduler


def load_cells(directory: str | Path) -> tuple[list[Cell], list[str]]:
    """The usable gnn cells of a sweep directory (``results.usable_cells``) that reached
    the target accuracy, and why others were left out."""
    def short_of_target(cell) -> str | None:
        return None if cell.summary.get("time_to_accuracy_s") is not None else "never reached the target accuracy"

    used, left_out = usable_cells(directory, needs=short_of_target)
    cells = [Cell(c.summary["placement"], c.summary["scheduler"], int(c.summary["seed"]),
                  _with_first_iteration_split(c.summary, c.run_dir), c.run_dir) for c in used]
    seen: dict[tuple[str, str, int], Cell] = {}
    for cell in cells:  # a seed pairs one cell per side: two would average, or overwrite, unlike things
        twin = seen.setdefault((*cell.key, cell.seed), cell)
        if twin is not cell:
            raise SpecError("dir", f"{directory}: cells {twin.run_dir.name} and {cell.run_dir.name} are both "
                                   f"{cell.placement} + {cell.scheduler}, seed {cell.seed}: the sweep varies "
                                   f"something else; table each value from its own sweep")
    return cells, left_out


def _with_first_iteration_split(summary: dict, run_dir: Path) -> dict:
    """``summary`` with the time to accuracy split at worker 0's first iteration end
    (``first_iteration_s``, ``AFTER_FIRST``), the first from the run's events where the
    summary predates them, the second its time to accuracy less the first."""
    if AFTER_FIRST in summary:
        return summary
    first = training(store.read_jsonl(run_dir / store.EVENTS), None)["first_iteration_s"]
    return {**summary, "first_iteration_s": first, AFTER_FIRST: round(summary["time_to_accuracy_s"] - first, 3)}


def _by_seed(cells: Iterable[Cell], key: tuple[str, str], field: str) -> dict[int, float]:
    return {c.seed: c.summary[field] for c in cells if c.key == key and c.summary.get(field) is not None}


def reduction(cells: Sequence[Cell], better: tuple[str, str], base: tuple[str, str],
              field: str = "time_to_accuracy_s") -> tuple[float | None, int]:
    """1 - mean(better) / mean(base) over the seeds both have, and how many."""
    ratio, seeds = paired_mean_ratio(_by_seed(cells, better, field), _by_seed(cells, base, field), exact=True)
    return None if ratio is None else 1 - ratio, seeds


def _stats(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sd over seeds; one seed's sd is 0.0, as Table III prints it."""
    average, sd = mean_sd(values)
    return average, 0.0 if average is not None and sd is None else sd


def table3_rows(cells: Sequence[Cell]) -> list[dict]:
    rows = []
    for key in sorted({c.key for c in cells}, key=lambda k: (k[0] != DISTDGL, k[0], k[1] != DEFAULT, k[1])):
        mine = [c for c in cells if c.key == key]
        tta, tta_sd = _stats([c.summary["time_to_accuracy_s"] for c in mine])
        after, after_sd = _stats([c.summary[AFTER_FIRST] for c in mine])
        it, it_sd = _stats([c.summary["iteration_s_mean"] for c in mine])
        predicted, _ = _stats([c.summary["predicted_iteration_s"] for c in mine
                               if c.summary.get("predicted_iteration_s") is not None])
        rows.append({"placement": key[0], "scheduler": key[1], "seeds": len(mine),
                     "time_to_accuracy_s": tta, "time_to_accuracy_sd": tta_sd,
                     "after_first_iteration_s": after, "after_first_iteration_sd": after_sd, "iteration_s": it,
                     "iteration_sd": it_sd, "predicted_iteration_s": predicted,
                     "model_error": None if not (predicted and it) else predicted / it - 1,
                     "iterations_to_accuracy": _stats([c.summary["iterations"] for c in mine])[0]})
    return rows


def mixed(cells: Sequence[Cell]) -> bool:
    """Whether the sweep ran on a mixed testbed (some machine computes slower: Fig. 8)."""
    factors = (_spec(cells[0])["workload"].get("compute_factor") or {}).values()
    return any(f > 1 for f in factors)


def gains(cells: Sequence[Cell], searched: str | None, on_mixed: bool = False) -> list[dict]:
    """DGTP over DistDGL + FIFO, and its two parts, with the paper's number beside
    (Fig. 8's when ``on_mixed``, else Table III's row for the job). A comparison whose
    cells the sweep lacks (no searched placement: ``searched`` None) is None over 0 seeds."""
    job = cells[0].summary
    paper = PAPER_FIG8 if on_mixed else PAPER_TABLE3.get((job.get("sync"), _shape(cells[0])))
    out = []
    for name, better, base, paper_value in (
            ("DGTP (ETP + OES) vs DistDGL + FIFO", (searched, OES), (DISTDGL, DEFAULT), paper),
            ("placement alone: ETP vs DistDGL, both FIFO", (searched, DEFAULT), (DISTDGL, DEFAULT), None),
            ("OES alone: DistDGL + OES vs DistDGL + FIFO", (DISTDGL, OES), (DISTDGL, DEFAULT), None),
            ("OES on ETP's placement", (searched, OES), (searched, DEFAULT), None)):
        value, seeds = reduction(cells, better, base)
        after, _ = reduction(cells, better, base, AFTER_FIRST)
        iteration, _ = reduction(cells, better, base, "iteration_s_mean")
        out.append({"comparison": name, "time_to_accuracy_reduction": value, "after_first_iteration_reduction": after,
                    "iteration_reduction": iteration, "seeds": seeds,
                    "paper": None if paper_value is None else paper_value / 100})
    return out


def _spec(cell: Cell) -> dict:
    return read_yaml(cell.run_dir / store.SPEC, store.SPEC, "run spec")


def _shape(cell: Cell) -> str:
    return _spec(cell)["workload"]["graph"]["shape"]


def _searched(cells: Sequence[Cell]) -> str | None:
    """The searched placement set beside DistDGL's: ETP where the sweep ran it, else its
    one other (an own placement); None where it ran none (OES alone stands without it)."""
    kinds = sorted({c.placement for c in cells} - {DISTDGL, "distdgl-fast-ps", "spread"})
    if "etp" in kinds:
        return "etp"
    if len(kinds) > 1:
        raise SpecError("workload.placement", f"the sweep ran several searched placements and no ETP "
                                              f"({', '.join(kinds)}): Table III sets one beside DistDGL's")
    return kinds[0] if kinds else None


def accuracy_curve(cell: Cell) -> list[tuple[float, float]]:
    """(seconds since the tasks were up, validation accuracy) at worker 0's evaluations."""
    events = store.read_jsonl(cell.run_dir / store.EVENTS)
    up = max(e["t"] for e in events if e["kind"] == "hello")
    return [(round(e["t"] - up, 3), e["val_accuracy"]) for e in events
            if e["kind"] == "iteration_end" and e["task"] == "worker0" and e.get("val_accuracy") is not None]


def bandwidth(cell: Cell, bin_s: float = BIN_S) -> dict[str, list[float]]:
    """host -> Mbit/s it sent plus received in each ``bin_s`` bin since the first transfer."""
    rows = store.read_csv(cell.run_dir / store.FLOWS)
    sent, received = binned_host_mbps(rows, min(float(r["start_t"]) for r in rows), bin_s) if rows else ({}, {})
    if not sent:
        raise SpecError("dir", f"{cell.run_dir / store.FLOWS}: no finished transfer to draw Fig. 7 from")
    bins = len(next(iter(sent.values())))
    return {host: [s + r for s, r in zip(sent.get(host, [0.0] * bins), received.get(host, [0.0] * bins))]
            for host in sorted(sent.keys() | received.keys())}


def _fmt(value, kind: str = "s") -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:+.1f}%" if kind == "%" else f"{value:.2f}"


def _label(key: tuple[str, str]) -> str:
    placement, scheduler = key
    return f"{'DistDGL' if placement == DISTDGL else placement.upper()} + {'FIFO' if scheduler == DEFAULT else scheduler.upper()}"


def table3_markdown(rows: Sequence[dict], gain_rows: Sequence[dict], left_out: Sequence[str],
                    title: str = "Table III") -> str:
    lines = [f"# {title}: time to the target accuracy ({SOURCE[title]})", "", markdown_table(
        ["placement + policy", "seeds", "time to accuracy (s), mean ± sd", "from the first iteration's end (s)",
         "iterations", "s / iteration", "model's s / iteration", "model error"],
        [[_label((r["placement"], r["scheduler"])), r["seeds"],
          f"{_fmt(r['time_to_accuracy_s'])} ± {_fmt(r['time_to_accuracy_sd'])}",
          f"{_fmt(r['after_first_iteration_s'])} ± {_fmt(r['after_first_iteration_sd'])}",
          _fmt(r["iterations_to_accuracy"]),
          _fmt(r["iteration_s"]), _fmt(r["predicted_iteration_s"]), _fmt(r["model_error"], "%")] for r in rows])]
    lines += ["", markdown_table(
        ["comparison", "time to accuracy", "from the first iteration's end", "s / iteration", "seeds", "paper"],
        [[g["comparison"], _fmt(_neg(g["time_to_accuracy_reduction"]), "%"),
          _fmt(_neg(g["after_first_iteration_reduction"]), "%"), _fmt(_neg(g["iteration_reduction"]), "%"),
          g["seeds"], _paper(g["paper"])] for g in gain_rows])]
    lines += ["", "Negative: shorter than the baseline. Speed-up read as 1 - T_DGTP / T_DistDGL (the paper's "
                  "formula is garbled in its text)."]
    if left_out:
        lines += ["", f"Left out ({len(left_out)}): " + "; ".join(left_out)]
    return "\n".join(lines) + "\n"


def _neg(value: float | None) -> float | None:
    return None if value is None else -value


def _paper(reduction: float | None) -> str:
    """The paper's speed-up as our tables print it: a shorter time, negative."""
    return "" if reduction is None else f"-{100 * reduction:.0f}%"


def dgtp_figures(directory: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Table III (or Fig. 8's table) and Figs. 6-7 of the sweep in ``directory`` (module
    doc), written into ``out_dir`` (default ``directory``); returns the paths written."""
    cells, left_out = load_cells(directory)
    root = Path(out_dir) if out_dir is not None else Path(directory)
    searched = _searched(cells)
    on_mixed = mixed(cells)
    rows, gain_rows = table3_rows(cells), gains(cells, searched, on_mixed)
    # Every cell file is read before anything is written: a garbled one is refused with
    # no figure half rewritten.
    keys = sorted({c.key for c in cells})
    common = set.intersection(*({c.seed for c in cells if c.key == k} for k in keys))
    seed = min(common, default=None)
    chosen = {k: next(c for c in cells if c.key == k and c.seed == seed) for k in keys} if common else {}
    curves = {k: accuracy_curve(c) for k, c in chosen.items()}
    pair = [k for k in ((DISTDGL, DEFAULT), (searched, OES)) if k in chosen]
    loads = {k: bandwidth(chosen[k]) for k in pair}
    target = _spec(chosen[keys[0]])["workload"]["target_accuracy"] if chosen else None
    table, progress, title = (("figure-8-table", "figure-8", "Fig. 8 (mixed testbed)") if on_mixed
                              else ("table-3", "figure-6", "Table III"))
    paths = [root / f"{table}.csv", root / f"{table}-gains.csv", root / f"{table}.md"]
    root.mkdir(parents=True, exist_ok=True)
    store.write_csv(paths[0], rows, list(rows[0]))
    store.write_csv(paths[1], gain_rows, list(gain_rows[0]))
    paths[2].write_text(table3_markdown(rows, gain_rows, left_out, title))
    if not common:
        return paths
    fig6 = root / f"{progress}.csv"
    store.write_csv(fig6, [{"placement": k[0], "scheduler": k[1], "seed": seed, "t_s": t, "val_accuracy": a}
                           for k, points in curves.items() for t, a in points],
                    ["placement", "scheduler", "seed", "t_s", "val_accuracy"])
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, points in curves.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=_label(k))
    if target:
        ax.axhline(target, color="grey", linestyle=":", linewidth=1)
    ax.set(xlabel="time (s)", ylabel="validation accuracy",
           title=f"Fig. {progress[-1]}: training progress (seed {seed})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(root / f"{progress}.png", dpi=120)
    plt.close(fig)
    paths += [fig6, root / f"{progress}.png"]
    if not pair:  # neither DistDGL + FIFO nor DGTP among the cells: no Fig. 7 pair
        return paths
    fig7 = root / "figure-7.csv"
    store.write_csv(fig7, [{"placement": k[0], "scheduler": k[1], "seed": seed, "host": host, "t_s": n * BIN_S,
                            "mbps": round(v, 3)} for k, hosts in loads.items() for host, series in hosts.items()
                           for n, v in enumerate(series)], ["placement", "scheduler", "seed", "host", "t_s", "mbps"])
    fig, axes = plt.subplots(1, len(pair), figsize=(6 * len(pair), 3.6), sharey=True, squeeze=False)
    for ax, k in zip(axes[0], pair):
        for host, series in loads[k].items():
            ax.plot([n * BIN_S for n in range(len(series))], series, linewidth=0.8, label=host)
        ax.set(title=f"{_label(k)} (seed {seed})", xlabel="time (s)")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("Mbit/s sent + received")
    fig.suptitle("Fig. 7: bandwidth used per machine")
    fig.tight_layout()
    fig.savefig(root / "figure-7.png", dpi=120)
    plt.close(fig)
    return paths + [fig7, root / "figure-7.png"]


def boxes(cells: Iterable[Cell]) -> str:
    """The boxes that ran ``cells`` (``store.box``): their number, and how many cells
    have none recorded (run before boot ids were): "1", "2", "1 + 3 unrecorded"."""
    labels = [store.box(store.read_environment(c.run_dir, garbled_ok=True)) for c in cells]
    known, unknown = {label for label in labels if label}, labels.count(None)
    return " + ".join(part for part in (str(len(known)) if known else "", f"{unknown} unrecorded" if unknown else "")
                      if part)


def table3_across(directories: Sequence[str | Path], out: str | Path) -> list[Path]:
    """Table III over several sweeps (module doc): ``table-3-all.{csv,md}`` in ``out``;
    a row's ``boxes`` are those that ran the cells of its comparisons (DGTP's and the
    ablations')."""
    rows = []
    for directory in directories:
        cells, left_out = load_cells(directory)
        searched, on_mixed = _searched(cells), mixed(cells)
        compared = [c for c in cells if c.placement in (searched, DISTDGL) and c.scheduler in (OES, DEFAULT)]
        means = {(r["placement"], r["scheduler"]): r["time_to_accuracy_s"] for r in table3_rows(cells)}
        dgtp, placement, oes_alone, _ = gains(cells, searched, on_mixed)
        rows.append({"sync": cells[0].summary.get("sync"), "graph": _shape(cells[0]),
                     "testbed": "mixed (Fig. 8)" if on_mixed else "heterogeneous NICs",
                     "distdgl_fifo_s": means.get((DISTDGL, DEFAULT)), "dgtp_s": means.get((searched, OES)),
                     "dgtp_reduction": dgtp["time_to_accuracy_reduction"],
                     "dgtp_after_first_iteration_reduction": dgtp["after_first_iteration_reduction"],
                     "seeds": dgtp["seeds"],
                     "paper": dgtp["paper"], "placement_reduction": placement["time_to_accuracy_reduction"],
                     "placement_seeds": placement["seeds"], "oes_reduction": oes_alone["time_to_accuracy_reduction"],
                     "oes_seeds": oes_alone["seeds"], "left_out": len(left_out), "boxes": boxes(compared),
                     "sweep": str(directory)})
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    paths = [root / "table-3-all.csv", root / "table-3-all.md"]
    store.write_csv(paths[0], rows, list(rows[0]))
    def share(value, seeds):
        return f"{_fmt(_neg(value), '%')} ({seeds} seeds)" if seeds else "-"

    lines = ["# Table III across sweeps: DGTP (ETP + OES) against DistDGL + FIFO, time to the target accuracy "
             f"({SOURCE['Table III']}; Fig. 8 for a mixed testbed)", "", markdown_table(
                 ["sync", "graph", "testbed", "DistDGL + FIFO (s)", "DGTP (s)", "DGTP",
                  "DGTP from the first iteration's end", "paper", "placement alone", "OES alone", "boxes",
                  "left out", "sweep"],
                 [[r["sync"], r["graph"], r["testbed"], _fmt(r["distdgl_fifo_s"]), _fmt(r["dgtp_s"]),
                   share(r["dgtp_reduction"], r["seeds"]), _fmt(_neg(r["dgtp_after_first_iteration_reduction"]), "%"),
                   _paper(r["paper"]),
                   share(r["placement_reduction"], r["placement_seeds"]), share(r["oes_reduction"], r["oes_seeds"]),
                   r["boxes"], r["left_out"], r["sweep"]] for r in rows])]
    lines += ["", "Negative: shorter than DistDGL + FIFO. From the first iteration's end: the tasks' start-up "
                  "left out. Placement alone: ETP against DistDGL, both FIFO; OES "
                  "alone: DistDGL under OES against FIFO. A gain is 1 - mean(T) / mean(T_base) over the "
                  "seeds both sides have; the seconds average every seed a side has. Boxes: how many ran the "
                  "cells of the row's comparisons; across boxes a gain carries the boxes' difference. Left out: "
                  "cells not completed, not trustworthy, or short of the target accuracy (none counts as a "
                  "time; the sweep's table-3.md names them)."]
    paths[1].write_text("\n".join(lines) + "\n")
    return paths


def main(argv: list[str] | None = None) -> None:
    import argparse  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="python -m experiments.gnn.figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    for path in dgtp_figures(parser.parse_args(argv).dir):
        print(path)


if __name__ == "__main__":
    main()
