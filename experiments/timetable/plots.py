"""Plots of an emulated run, drawn from the data files' contents (never the reverse)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.timetable.metrics import per_second  # noqa: E402


def flow_goodput(series: dict[str, list], spec: dict, path: Path) -> None:
    """Per-second receiver goodput of every flow, with policy changes marked."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name, points in series.items():
        bins = per_second(points)
        flow = next(f for f in spec["flows"] if f["name"] == name)
        label = name
        if "queue" in flow:
            label += f" (queue {flow['queue']})"
        if "host_queue" in flow:
            label += f" (host queue {flow['host_queue']})"
        if "rate_mbps" in flow:
            label += f" (limit {flow['rate_mbps']:g})"
        ax.plot([k + 1 for k in bins], list(bins.values()), marker=".", label=label)
    for change in spec["policy_changes"]:
        what = "remove" if change["remove"] else ", ".join(
            f"{k}={change[k]:g}" for k in ("queue", "host_queue", "rate_mbps") if k in change)
        ax.axvline(change["at_s"], color="grey", linestyle=":")
        ax.annotate(f"{change['flow']}: {what}", (change["at_s"], ax.get_ylim()[1] * 0.95), fontsize=8,
                    rotation=90, va="top", ha="right")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("receiver goodput [Mbit/s]")
    ax.set_title(spec["name"])
    ax.set_xlim(0, spec["duration_s"] + 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
