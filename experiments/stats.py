"""The summary statistics every experiment's metrics share, so a number means the same everywhere.

``percentile`` takes q in 0..100. Its default is numpy's default definition,
linear between the closest ranks (the cojob stage-slowdown p90). The other methods
keep readings that metrics were computed and kept with, so re-analysing kept data
gives the same numbers:

- ``numpy``: the same definition as np.percentile rounds it (it can differ from
  ``linear`` in the last bit): the co-location latency percentiles.
- ``nearest``: the value at the nearest rank, ties to the even one: GNN OES's
  decision latency and apply time p50/p99.
- ``lower`` / ``higher``: the value at the rank below / above: the simulator's flow
  p90 / p50 and a gnn run's ``achieved_over_target_median`` (``higher`` at 50 is the
  upper median).
- ``exclusive``: ``statistics.quantiles``' default, rank (n + 1) q / 100 counted from
  1, linear between the closest ranks and beyond the first or last pair past the
  ends (the p99 of [1, 2] is 2.97): the benchmarks' p99 latencies.

``mean_sd`` and ``paired_mean_ratio`` are the spread over seeds or repeats, and the
ratio of two designs' means over the seeds both ran, that the figures and reports print;
``cdf`` the empirical distribution they draw.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping

METHODS = ("linear", "numpy", "nearest", "lower", "higher", "exclusive")


def is_number(value) -> bool:
    """An int or float a statistic can take: never a bool, which Python counts as an int."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def mean(values: Iterable[float], numpy: bool = False) -> float | None:
    """The arithmetic mean; None for no values (a metric of nothing is missing, not zero).
    ``numpy``: np.mean's pairwise sum, which can differ in the last bits: the co-location
    runs' summaries were computed and kept with it."""
    values = list(values)
    if not values:
        return None
    if numpy:
        import numpy as np  # only this reading needs it

        return float(np.mean(values))
    return sum(values) / len(values)


def mean_sd(values: Iterable[float], numpy: bool = False) -> tuple[float | None, float | None]:
    """The mean and the sample standard deviation (n - 1); the mean None for no values,
    the sd None for fewer than two (the sample sd is undefined there). statistics'
    exactly rounded sums, or with ``numpy`` np.mean and np.std (ddof=1), which can differ
    in the last bits: the co-location runs' summaries were computed and kept with those."""
    values = list(values)
    if not values:
        return None, None
    if numpy:
        import numpy as np  # only this reading needs it

        return mean(values, numpy=True), float(np.std(values, ddof=1)) if len(values) > 1 else None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def paired_mean_ratio(numerator: Mapping, denominator: Mapping, exact: bool = False) -> tuple[float | None, int]:
    """mean(numerator) / mean(denominator) over the keys (seeds) both have, and how many:
    a ratio of means, both over the same seeds. None for no common key or a zero
    denominator. ``exact`` averages with statistics.fmean (the gnn figures' reading),
    else with ``mean`` in the numerator's order (the Grouper figures'): each keeps the
    last bits its kept tables were computed with."""
    keys = [key for key in numerator if key in denominator]
    if not keys:
        return None, 0
    average = statistics.fmean if exact else mean
    den = average(denominator[key] for key in keys)
    return (average(numerator[key] for key in keys) / den if den else None), len(keys)


def cdf(values: Iterable[float]) -> list[tuple[float, float]]:
    """The empirical CDF as (value, fraction of values <= it), one point per value, ascending."""
    ordered = sorted(values)
    return [(value, (i + 1) / len(ordered)) for i, value in enumerate(ordered)]


def percentile(values: Iterable[float], q: float, method: str = "linear") -> float | None:
    """The q-th percentile (0..100) by ``method`` (see the module docstring); None for no values."""
    if method not in METHODS:
        raise ValueError(f"percentile method must be one of {', '.join(METHODS)}, got {method!r}")
    ordered = sorted(values)
    if not ordered:
        return None
    n = len(ordered)
    rank = (n - 1) * q / 100
    if method == "linear":
        low = math.floor(rank)
        high = min(low + 1, n - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
    if method == "numpy":
        import numpy as np  # only this reading needs it

        return float(np.percentile(ordered, q))
    if method == "nearest":
        return ordered[round(rank)]
    if method == "lower":
        return ordered[math.floor(rank)]
    if method == "higher":
        return ordered[math.ceil(rank)]
    # exclusive, in statistics.quantiles' arithmetic (100 cut points); one value is every quantile
    if n == 1:
        return ordered[0]
    j = min(max(int(q * (n + 1) // 100), 1), n - 1)
    delta = q * (n + 1) - j * 100
    return (ordered[j - 1] * (100 - delta) + ordered[j] * delta) / 100
