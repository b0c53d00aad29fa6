"""Metrics of an emulated run, computed from per-flow goodput series (pure).

A series is a list of (run time at the end of a measurement interval [s],
goodput [Mbit/s]). Windows skip ``SETTLE_S`` after a change so that TCP's
ramp-up is not counted against the scheduler.
"""
from __future__ import annotations

import statistics

SETTLE_S = 1.0
RECOVERY_FRACTION = 0.9


def window_mean(series: list[tuple[float, float]], start: float, end: float) -> float | None:
    values = [mbps for t, mbps in series if start < t <= end]
    return statistics.fmean(values) if values else None


def high_share_while_both(high: list, low: list, overlap: tuple[float, float]) -> float | None:
    """The high flow's fraction of what the shared bottleneck delivered while both ran."""
    start, end = overlap[0] + SETTLE_S, overlap[1]
    h, lo = window_mean(high, start, end), window_mean(low, start, end)
    if h is None or lo is None or h + lo <= 0:
        return None
    return h / (h + lo)


def low_recovery_s(low: list, high_start: float, high_end: float, low_start: float) -> float | None:
    """Seconds after the high flow ended until the low flow is back to 90% of its
    own goodput before the high flow joined (the link as the low flow saw it)."""
    before = [mbps for t, mbps in low if low_start + SETTLE_S < t <= high_start]
    if not before:
        return None
    target = RECOVERY_FRACTION * statistics.median(before)
    for t, mbps in low:
        if t > high_end and mbps >= target:
            return max(t - high_end, 0.0)
    return None


def per_second(series: list[tuple[float, float]]) -> dict[int, float]:
    """Mean goodput per whole second k (intervals ending in (k, k+1])."""
    bins: dict[int, list[float]] = {}
    for t, mbps in series:
        bins.setdefault(int(t - 1e-9), []).append(mbps)
    return {k: statistics.fmean(v) for k, v in sorted(bins.items())}


def link_goodput(flows: list[dict], series: dict[str, list], link_mbps: dict[str, float]) -> dict[str, float]:
    """Per receiver link saturated by unlimited flows: median aggregate goodput / configured rate.

    Only whole seconds in which an unlimited flow into that receiver runs (after
    settling) count, so a rate-limited or idle link is not called slow.
    """
    ratios = {}
    for dst in sorted({f["dst"] for f in flows}):
        into = [f for f in flows if f["dst"] == dst]
        busy = {k for f in into if f.get("rate_mbps") is None
                for k in range(int(f["start_s"] + SETTLE_S) + 1,
                               int(f.get("limited_from_s") or f["start_s"] + f["duration_s"]))}
        if not busy:
            continue
        bins = [per_second(series.get(f["name"], [])) for f in into]
        totals = [sum(b.get(k, 0.0) for b in bins) for k in sorted(busy)]
        ratios[f"{dst}-eth0"] = statistics.median(totals) / link_mbps[dst]
    return ratios


def fidelity(cpu_idle: float, link_ratios: dict[str, float], min_cpu_idle: float,
             min_link_ratio: float) -> dict:
    """Whether the box kept up: enough idle CPU and every saturated link near its rate."""
    reasons = []
    if cpu_idle < min_cpu_idle:
        reasons.append(f"CPU idle share {cpu_idle:.2f} < {min_cpu_idle:.2f}")
    for link, ratio in sorted(link_ratios.items()):
        if ratio < min_link_ratio:
            reasons.append(f"link {link} goodput {ratio:.2f} of its rate < {min_link_ratio:.2f}")
    return {"cpu_idle_share": cpu_idle, "link_goodput_ratios": link_ratios, "trustworthy": not reasons,
            "untrustworthy_reasons": reasons}
