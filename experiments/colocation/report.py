"""Tables and plots of co-location runs.

One run: ``table.md``/``table.csv`` with a row per method (CoGNN Table V's
makespan, average JCT and queuing time; for inference GNNSched's QoS violation
rate and latencies normalised to QT, Fig. 5-8) and ``plots/``.

Several runs (one per queue: GCN, SAGE, GAT, GIN, Mix): ``python -m
experiments.colocation.report RUN_DIR... [--out FILE]`` prints the Table V layout,
queues as columns, in minutes as the paper does, then each metric over
PipeSwitch's beside Table V's ratios; inference runs as GNNSched's Fig. 5-8 with
what its text states (``papers``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.colocation.papers import GNNSCHED_REDUCTIONS, TABLE_V_METRICS, gnnsched, table_v_ratio
from experiments.errors import SpecError
from experiments.reports.markdown import markdown_table
from experiments.reports.rundata import COLOCATION_COLUMNS, colocation_rows, spread, spread_of
from experiments.results import load_summary
from experiments.stats import cdf, mean_sd
from experiments.store import SPEC, read_csv, write_csv
from experiments.validation import read_yaml
from hosts.colocation.policies import BASELINE_CONCURRENCY, POLICIES

RUNS_FILE = "runs.csv"  # a run's row per method and repeat (``runner.write_runs_csv``)
REFUSED = "refused_within_budget_tasks"


def _runs_line(summary: dict) -> str:
    """How many runs each number is over: a run not complete (``--repeats-now``,
    ``--methods-now``) has fewer than the spec's repeats, not always alike, and a
    method left whole has none (no row)."""
    planned = summary.get("repeats", 1)
    counts = {name: row.get("repeats", 1) for name, row in summary["methods"].items()}
    for part in summary.get("left", []):  # "<method> repeat <n>"
        counts.setdefault(part.rsplit(" repeat ", 1)[0], 0)
    if set(counts.values()) == {planned}:
        return f"Mean ± standard deviation over {planned} runs per method." if planned > 1 else ""
    measured = ", ".join(f"{name} {n}" for name, n in counts.items())
    return f"Not complete: runs measured per method, of {planned} planned: {measured} (mean ± sd where 2 or more)."


def write_report(run: Path, summary: dict, records) -> None:
    columns = COLOCATION_COLUMNS[summary["kind"]]
    methods = summary["methods"]
    write_csv(run / "table.csv", [{**methods[name], "method": name} for name in methods],
              ["method", "repeats", *(f for key, _ in columns for f in (key, f"{key}_sd"))])
    device = summary["device"]["name"]
    lines = [f"# {summary['name']} ({summary['kind']}, {summary['tasks']} tasks, {summary['workers']} workers, "
             f"{device})", "", _runs_line(summary),
             "", markdown_table(*colocation_rows(summary))]
    overheads = ", ".join(f"{key} {value / 2**20:.1f} MiB"
                          for key, value in summary.get("allocator_overhead_bytes", {}).items() if value)
    refused = ("not recorded" if not any(REFUSED in row for row in methods.values())  # a summary from before it was
               else ", ".join(f"{name} {spread_of(row, REFUSED)}{_refused_by_text(row)}"
                              for name, row in methods.items() if row.get(REFUSED)))
    lines += ["", f"PMC relative error over the run's tasks: max {spread(summary['pmc_max_relative_error'])}, "
                  f"mean {spread(summary['pmc_mean_relative_error'])}",
              "", f"Refused by the allocator within their budget (a cap too tight, or the device full of what the "
                  f"ledger does not count), a run's mean: {refused or 'none'}.",
              "", "Group boundary: seconds from a group's end (or its batch's first arrival, if later) to the next "
                  f"group's first start; the policies' groups {'' if summary.get('pipeline_groups') else 'not '}"
                  "pipelined (MPS-Base's and MPS's never are).",
              "", f"Allocator overhead allowed beyond the budgets, per model and size class: {overheads or 'none'}.",
              ""]
    (run / "table.md").write_text("\n".join(lines))
    _plots(run, summary, records, columns)


def _plots(run: Path, summary: dict, records, columns) -> None:
    try:  # the lent GPU machines may lack matplotlib: tables and data still get written
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = run / "plots"
    plots.mkdir(exist_ok=True)
    methods = list(summary["methods"])
    shown = [(k, label) for k, label in columns if k not in ("groups",)]
    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 3.2))
    for ax, (key, label) in zip(axes, shown):
        values = [summary["methods"][m].get(key) or 0 for m in methods]
        ax.bar(methods, values, color="tab:blue")
        ax.set_title(label, fontsize=9)
        ax.tick_params(axis="x", rotation=60, labelsize=8)
    fig.suptitle(f"{summary['name']} on {summary['device']['name']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(plots / "methods.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for method in methods:
        points = cdf(r.end_s - r.arrival_s for r in records  # delivered results only, as the metrics
                     if r.method == method and r.end_s is not None and r.error is None)
        if points:
            ax.step(*zip(*points), where="post", label=method)
    ax.set_xlabel("JCT (s)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plots / "jct_cdf.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.5))
    pairs = [(r.estimate_bytes, r.measured_peak_bytes) for r in records if r.error is None and r.measured_peak_bytes]
    if pairs:
        ax.scatter([m / 2**20 for _, m in pairs], [100 * (e - m) / m for e, m in pairs], s=10)
    ax.axhline(0, color="gray", linewidth=0.8)
    ax.set_xlabel("measured peak (MiB)")
    ax.set_ylabel("estimate error (%)")
    fig.tight_layout()
    fig.savefig(plots / "pmc_error.png", dpi=120)
    plt.close(fig)


def table_v(runs: list[Path]) -> str:
    """Several runs of one kind, queues as columns, with the papers' numbers beside:
    training as CoGNN Table V (minutes) and as ratios to PipeSwitch beside Table V's;
    inference as GNNSched Fig. 5-8, one table per metric with the paper's statements."""
    summaries = [load_summary(run) for run in runs]
    queues = [_queue(s["name"]) for s in summaries]
    order = [*BASELINE_CONCURRENCY, *POLICIES]  # the papers' order: baselines, then policies
    methods = sorted({m for s in summaries for m in s["methods"]}, key=order.index)
    devices = sorted({s["device"]["name"] for s in summaries})
    repeats = sorted({m["repeats"] for s in summaries for m in s["methods"].values()})  # measured, not asked
    unfinished = [f"{q} ({len(s['left'])} parts left)" if s.get("left") else f"{q} (stopped)"
                  for q, s in zip(queues, summaries) if s.get("completed") is False]
    head = f"Device: {', '.join(devices)}; mean ± sd over {'/'.join(map(str, repeats))} "
    head += f"repeat{'' if repeats == [1] else 's'} per method"
    head += f"; not complete: {', '.join(unfinished)}.\n" if unfinished else ".\n"
    if summaries[0]["kind"] == "training":
        body = _training_tables(runs, summaries, queues, methods)
    else:
        body = _inference_tables(runs, summaries, queues, methods)
    return head + "\n" + body + "\n" + _failed_table(summaries, queues, methods)


def _failed_table(summaries, queues, methods) -> str:
    """Tasks that failed, a run's mean: a method with any is no clean measurement
    (its failures count as QoS violations, its makespan ends at them). Those the
    allocator refused within their budget are named: ours (a cap too tight, the device full), not the method's."""
    return "\n".join(["## Failed tasks (a run's mean; out of memory, over budget, a worker dead)", "",
                      markdown_table(["method", *queues], [
                          [method, *(_failed(s["methods"][method]) if method in s["methods"] else "-"
                                     for s in summaries)] for method in methods])]) + "\n"


def _refused_by_text(row: dict) -> str:
    """' (by the cap 1, by the device 0.5)': which limit refused, where recorded."""
    by = [f"by the {limit} {spread_of(row, f'refused_within_budget_by_{limit}_tasks')}" for limit in ("cap", "device")
          if f"refused_within_budget_by_{limit}_tasks" in row]
    return f" ({', '.join(by)})" if by else ""


def _failed(row: dict) -> str:
    refused = f" ({spread_of(row, REFUSED)} refused within budget)" if row.get(REFUSED) else ""
    return spread_of(row, "failed") + refused


def _training_tables(runs, summaries, queues, methods) -> str:
    labels = {"makespan_s": "Makespan", "avg_jct_s": "Average JCT", "avg_queuing_s": "Average queuing"}  # Table V: "QT"
    header = ["Method-policy"] + [f"{labels[key]} (min): {q}" for key in TABLE_V_METRICS for q in queues]
    lines = ["## CoGNN Table V (minutes)", "", markdown_table(header, [
        [method, *(spread_of(s["methods"][method], key, 60) if method in s["methods"] else "-"
                   for key in TABLE_V_METRICS for s in summaries)] for method in methods])]
    per_repeat = [_runs_csv(run) for run in runs]
    for key in TABLE_V_METRICS:
        header = ["Method-policy"] + [c for q in queues for c in (q, "paper")]
        lines += ["", f"## {labels[key]} / PipeSwitch's, beside Table V's (V100)", "", markdown_table(header, [
            [method, *(cell for queue, rows in zip(queues, per_repeat)
                       for cell in (_ratio(rows, method, key), spread(table_v_ratio(method, key, queue))))]
            for method in methods])]
    return "\n".join(lines) + "\n"


def _inference_tables(runs, summaries, queues, methods) -> str:
    loads = {_load(run) for run in runs}
    load = loads.pop() if len(loads) == 1 else None
    lines = [f"GNNSched's queues at {load or 'mixed'} load; `paper`: what GNNSched's text states of its figure "
             "(V100, MPS = MPS-Aggr)."]
    for key, label in GNNSCHED_FIGURES:
        lines += ["", f"## {label}", "", markdown_table(["method", *queues, "paper"], [
            [method, *(spread_of(s["methods"][method], key) if method in s["methods"] else "-" for s in summaries),
             gnnsched(key, method, load) or "-"] for method in methods])]
    rows = []
    for key, against in GNNSCHED_REDUCTIONS.items():
        for policy in ("sqtf", "bqt"):
            for baseline, paper in against.items():
                reductions = [1 - s["methods"][policy][key] / s["methods"][baseline][key] for s in summaries
                              if policy in s["methods"] and baseline in s["methods"]
                              and s["methods"][policy].get(key) is not None and s["methods"][baseline].get(key)]
                ours = f"{100 * sum(reductions) / len(reductions):.1f}%" if reductions else "-"
                rows.append([key, policy, baseline, ours, f"{100 * paper:.1f}%"])
    lines += ["", "## GNNSched's reductions against the baselines (mean over the queues)", "",
              markdown_table(["metric", "policy", "against", "ours", "paper"], rows)]
    return "\n".join(lines) + "\n"


GNNSCHED_FIGURES = [("qos_violation_rate", "QoS violation rate (Fig. 5)"),
                    ("median_latency_qt", "median latency / QT (Fig. 6)"),
                    ("p90_latency_qt", "p90 latency / QT (Fig. 6)"), ("p99_latency_qt", "p99 latency / QT (Fig. 6)"),
                    ("avg_jct_qt", "average JCT / QT (Fig. 7)"), ("avg_queuing_qt", "average queuing / QT (Fig. 8)"),
                    ("group_boundary_s", "group boundary (s): a group's end to the next group's first start")]


def _queue(name: str) -> str:
    """'colocate-train-gcn' and 'colocate-infer-gcn-low' are the queue 'gcn'."""
    for prefix in ("colocate-train-", "colocate-infer-"):
        if name.startswith(prefix):
            return name[len(prefix):].removesuffix("-low").removesuffix("-high")
    return name


def _load(run: Path) -> str | None:
    """GNNSched's loads: 1 (low) or 2 (high) requests per tick on average."""
    spec = read_yaml(run / SPEC, SPEC, "run spec")
    return {1: "low", 2: "high"}.get(spec.get("arrivals", {}).get("mean_per_tick"))


def _runs_csv(run: Path) -> dict[tuple[str, str], dict]:
    return {(row["method"], row["repeat"]): row for row in read_csv(run / RUNS_FILE)}


def _ratio(rows: dict[tuple[str, str], dict], method: str, key: str) -> str:
    """Mean ± sd over the repeats of the method's value over PipeSwitch's in the same repeat."""
    ratios = [float(row[key]) / float(rows[("pipeswitch", repeat)][key]) for (m, repeat), row in rows.items()
              if m == method and row[key] and ("pipeswitch", repeat) in rows and rows[("pipeswitch", repeat)][key]]
    return spread(*mean_sd(ratios))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Table V of several co-location runs (one per queue)")
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:
        text = table_v(args.runs)
    except SpecError as err:  # a directory that is no run, a garbled summary or spec
        parser.error(str(err))
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
