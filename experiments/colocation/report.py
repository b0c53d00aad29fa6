"""Tables and plots of co-location runs.

One run: ``table.md``/``table.csv`` with a row per method (CoGNN Table V's
makespan, average JCT and queuing time; for inference GNNSched's QoS violation
rate and latencies normalised to QT, Fig. 5-8) and ``plots/``.

Several runs (one per queue: GCN, SAGE, GAT, GIN, Mix): ``python -m
experiments.colocation.report RUN_DIR... [--out FILE]`` prints the Table V layout,
queues as columns, in minutes as the paper does.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path


TRAINING_COLUMNS = [("makespan_s", "makespan (s)"), ("avg_jct_s", "avg JCT (s)"),
                    ("avg_queuing_s", "avg queuing (s)"), ("memory_violations", "memory violations"),
                    ("device_utilization", "device busy"), ("groups", "groups")]
INFERENCE_COLUMNS = [("qos_violation_rate", "QoS violation rate"), ("median_latency_qt", "median latency / QT"),
                     ("p90_latency_qt", "p90 latency / QT"), ("p99_latency_qt", "p99 latency / QT"),
                     ("avg_jct_qt", "avg JCT / QT"), ("avg_queuing_qt", "avg queuing / QT"),
                     ("makespan_s", "makespan (s)"), ("memory_violations", "memory violations"),
                     ("device_utilization", "device busy")]


def write_report(run: Path, summary: dict, records) -> None:
    columns = TRAINING_COLUMNS if summary["kind"] == "training" else INFERENCE_COLUMNS
    methods = summary["methods"]
    header = ["method"] + [label for _, label in columns]
    with open(run / "table.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["method", "repeats"] + [f for key, _ in columns for f in (key, f"{key}_sd")])
        writer.writerows([[name, methods[name].get("repeats")]
                          + [methods[name].get(f) for key, _ in columns for f in (key, f"{key}_sd")]
                          for name in methods])
    device = summary["device"]["name"]
    repeats = summary.get("repeats", 1)
    lines = [f"# {summary['name']} ({summary['kind']}, {summary['tasks']} tasks, {summary['workers']} workers, "
             f"{device})", "", f"Mean ± standard deviation over {repeats} runs per method." if repeats > 1 else "",
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join([name] + [_fmt_spread(methods[name], key) for key, _ in columns]) + " |"
              for name in methods]
    lines += ["", f"PMC relative error over the run's tasks: max {_fmt(summary['pmc_max_relative_error'])}, "
                  f"mean {_fmt(summary['pmc_mean_relative_error'])}", ""]
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
        jct = sorted(r.end_s - r.arrival_s for r in records if r.method == method and r.end_s is not None)
        if jct:
            ax.step(jct, [(i + 1) / len(jct) for i in range(len(jct))], where="post", label=method)
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
    """CoGNN Table V (training) or a GNNSched summary (inference), queues as columns."""
    summaries = [json.loads((run / "summary.json").read_text()) for run in runs]
    queues = [s["name"] for s in summaries]
    methods = list(dict.fromkeys(m for s in summaries for m in s["methods"]))
    kind = summaries[0]["kind"]
    metrics = ([("makespan_s", "Makespan (min)", 60), ("avg_jct_s", "Average JCT (min)", 60),
                ("avg_queuing_s", "Average QT (min)", 60)] if kind == "training" else
               [("qos_violation_rate", "QoS violation rate", 1), ("p99_latency_qt", "p99 latency / QT", 1),
                ("avg_jct_qt", "Average JCT / QT", 1)])
    header = ["Method-policy"] + [f"{label}: {q}" for _, label, _ in metrics for q in queues]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method in methods:
        cells = [method]
        for key, _, divisor in metrics:
            for s in summaries:
                value = s["methods"].get(method, {}).get(key)
                cells.append(_fmt(value / divisor if value is not None else None))
        lines.append("| " + " | ".join(cells) + " |")
    devices = sorted({s["device"]["name"] for s in summaries})
    return "\n".join(lines) + f"\n\nDevice: {', '.join(devices)}\n"


def _fmt_spread(row: dict, key: str) -> str:
    sd = row.get(f"{key}_sd")
    return _fmt(row.get(key)) + (f" ± {_fmt(sd)}" if sd else "")


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Table V of several co-location runs (one per queue)")
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    text = table_v(args.runs)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
