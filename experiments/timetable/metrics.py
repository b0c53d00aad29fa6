"""Metrics of an emulated run, computed from per-flow goodput series (pure).

A series is a list of (run time at the end of a measurement interval [s],
goodput [Mbit/s]). Windows skip ``SETTLE_S`` after a change so that TCP's
ramp-up is not counted against the scheduler.
"""
from __future__ import annotations

import statistics

from controller.schedulers.max_min import max_min_fill
from topologies.fabric import host_interface

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


def saturated_directions(active: list[dict], link_mbps: dict[str, float]) -> set[tuple[str, str]]:
    """Host link directions, ("h", "sent"|"received"), that a max-min fair share of
    the active flows fills (progressive filling over host links; the fabric is
    taken as non-blocking). Rate-limited flows take their limit first."""
    residual = {(h, d): link_mbps[h] for h in link_mbps for d in ("sent", "received")}
    free = {}
    for i, f in enumerate(active):
        uses = ((f["src"], "sent"), (f["dst"], "received"))
        if f.get("rate_mbps") is not None:
            for u in uses:
                residual[u] -= f["rate_mbps"]
        else:
            free[i] = uses
    rates = max_min_fill(residual, free)  # a residual <= 0 (limits took it all) gives its free flows 0
    for i, uses in free.items():
        for u in uses:
            residual[u] -= rates[i]
    # Only directions a free flow uses: one that rate limits alone load is not what the max-min share fills.
    return {u for uses in free.values() for u in uses if residual[u] <= 1e-6 * link_mbps[u[0]]}


def _rate_in_second(flow: dict, k: int) -> tuple[float | None, float | None]:
    """(the flow's rate limit in force in second k, when it last changed before k's end;
    None: never). ``rate_changes``: (at_s, Mbit/s or None), in time order."""
    changed = [(at, rate) for at, rate in flow.get("rate_changes", []) if at < k + 1]
    return (changed[-1][1], changed[-1][0]) if changed else (flow.get("rate_mbps"), None)


def host_link_goodput(flows: list[dict], series: dict[str, list], link_mbps: dict[str, float]) -> dict:
    """Median goodput / link rate of every host link direction, over the whole seconds
    in which a max-min fair share would fill it (after settling, each flow at the rate
    limit in force; a second within SETTLE_S of any of its policy changes is no steady one)."""
    bins = {f["name"]: per_second(series.get(f["name"], [])) for f in flows}
    samples: dict[tuple[str, str], list[float]] = {}
    last = int(max(f["start_s"] + f["duration_s"] for f in flows))
    for k in range(last):
        active = []
        for f in flows:
            end = f["start_s"] + f["duration_s"]
            if f["start_s"] >= k + 1 or end <= k:
                continue  # not running in second k
            rate, changed_at = _rate_in_second(f, k)
            if (k <= f["start_s"] + SETTLE_S or k >= end - 1
                    or (changed_at is not None and k < changed_at + SETTLE_S + 1)):
                active = None  # a flow is starting, ending or changing its policy: not a steady second
                break
            active.append({**f, "rate_mbps": rate})
        if not active:
            continue
        for host, direction in saturated_directions(active, link_mbps):
            end = "src" if direction == "sent" else "dst"
            total = sum(bins[f["name"]].get(k, 0.0) for f in active if f[end] == host)
            samples.setdefault((host, direction), []).append(total / link_mbps[host])
    out: dict[str, dict[str, float]] = {}
    for (host, direction), values in sorted(samples.items()):
        out.setdefault(host, {})[direction] = statistics.median(values)
    return out


def link_goodput(per_host: dict) -> dict[str, float]:
    """Each saturated host link's goodput ratio (the lower of its saturated directions)."""
    return {host_interface(host): min(r.values()) for host, r in per_host.items()}


def link_reasons(link_ratios: dict[str, float], limits: dict) -> list[str]:
    """Why the run cannot be trusted as far as its links go: a saturated link that
    delivered less than the spec's fidelity ``limits`` allow (the box did not keep up)."""
    return [f"link {link} goodput {ratio:.2f} of its rate < {limits['min_link_goodput_ratio']:.2f}"
            for link, ratio in sorted(link_ratios.items()) if ratio < limits["min_link_goodput_ratio"]]
