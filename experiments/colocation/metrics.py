"""Metrics of one method's run over a queue (CoGNN Table V, GNNSched Fig. 5-8)."""
from __future__ import annotations

from experiments.stats import is_number, mean, mean_sd, percentile
from hosts.colocation.estimator import relative_error
from hosts.colocation.executor import TaskRecord
from hosts.colocation.workers import OUT_OF_MEMORY_ERRORS, OUT_OF_MEMORY_WITHIN_BUDGET


def summarize(records: list[TaskRecord]) -> dict:
    """Makespan, JCT, queuing time, latency percentiles (np.mean's and np.percentile's,
    as the kept runs were summarised), QoS violations, memory violations and the estimator's error
    against the measured peaks.

    A failed task (out of memory, over its budget, its worker dead) delivered no
    result; the papers have none, so this is a reading: it counts as a QoS
    violation, it is left out of JCT, queuing and the latencies (they describe
    results delivered), and its end, once it started, still ends the makespan
    (the queue's work was over then), so a method with failures is not a clean
    measurement; ``failed`` says how many, and the tables print it beside the
    method's numbers."""
    finished = [r for r in records if r.end_s is not None and r.start_s is not None]
    delivered = [r for r in finished if r.error is None]
    jct = [r.end_s - r.arrival_s for r in delivered]
    queuing = [r.start_s - r.arrival_s for r in delivered]
    first_arrival = min(r.arrival_s for r in records)
    summary = {
        "tasks": len(records),
        "failed": sum(r.error is not None for r in records),
        "makespan_s": max(r.end_s for r in finished) - first_arrival if finished else None,
        "avg_jct_s": mean(jct, numpy=True),
        "avg_queuing_s": mean(queuing, numpy=True),
        "median_latency_s": percentile(jct, 50, method="numpy"),
        "p90_latency_s": percentile(jct, 90, method="numpy"),
        "p99_latency_s": percentile(jct, 99, method="numpy"),
        "memory_violations": sum(r.memory_violation for r in records),
        "over_budget_tasks": sum(r.over_budget for r in records),
        "over_capacity_tasks": sum(r.over_capacity for r in records),
        "out_of_memory_tasks": sum(r.error in OUT_OF_MEMORY_ERRORS for r in records),
        # refused while the watch saw the budget held: a cap too tight or the device full (workers._run),
        # and by which (allocator.refused_by; neither where the device's free memory was unknown)
        "refused_within_budget_tasks": sum(r.error == OUT_OF_MEMORY_WITHIN_BUDGET for r in records),
        **{f"refused_within_budget_by_{limit}_tasks":
           sum(r.error == OUT_OF_MEMORY_WITHIN_BUDGET and r.refused_by == limit for r in records)
           for limit in ("cap", "device")},
    }
    boundaries = group_boundaries(records)
    summary["group_boundary_s"] = mean(boundaries, numpy=True)
    summary["group_boundary_max_s"] = max(boundaries, default=None)
    with_qt = [r for r in records if r.qt_s]
    if with_qt:
        met = [r.error is None and r.end_s is not None and r.end_s - r.arrival_s <= r.qt_s for r in with_qt]
        delivered_qt = [r for r in delivered if r.qt_s]
        normalized = [(r.end_s - r.arrival_s) / r.qt_s for r in delivered_qt]
        summary.update({
            "qos_violation_rate": 1.0 - mean(met, numpy=True),
            "median_latency_qt": percentile(normalized, 50, method="numpy"),
            "p90_latency_qt": percentile(normalized, 90, method="numpy"),
            "p99_latency_qt": percentile(normalized, 99, method="numpy"),
            # Fig. 7's "average JCT normalised to QT" read as the mean of each request's JCT / QT
            "avg_jct_qt": mean(normalized, numpy=True),
            "avg_queuing_qt": mean([(r.start_s - r.arrival_s) / r.qt_s for r in delivered_qt], numpy=True),
        })
    summary.update(pmc_errors(records))
    return summary


def group_boundaries(records: list[TaskRecord]) -> list[float]:
    """Per group after the first, in run order: seconds from when it could start
    to its first task's start. It could start when the previous group's last task
    ended or, for the first group of a batch, when the batch's first task arrived
    if that was later (waiting for arrivals is no boundary cost)."""
    groups: dict[tuple[int, int], list[TaskRecord]] = {}
    opened: dict[int, float] = {}
    for r in records:
        if r.batch is None:
            continue
        opened[r.batch] = min(opened.get(r.batch, r.arrival_s), r.arrival_s)
        if r.start_s is not None:
            groups.setdefault((r.batch, r.group), []).append(r)
    order = sorted(groups)
    return [min(r.start_s for r in groups[current]) - max(max(r.end_s for r in groups[previous]), opened[current[0]])
            for previous, current in zip(order, order[1:])]


def aggregate(runs: list[dict]) -> dict:
    """One method's repeated runs as one row: every numeric field is the mean over
    the runs that have it, with its sample standard deviation as ``<field>_sd``
    (None for a single run, and for a measure no run took: null in every run, as a
    makespan where no task finished); other fields are the first run's."""
    row: dict = {"repeats": len(runs)}
    for key in runs[0]:
        values = [run[key] for run in runs if is_number(run.get(key))]
        if not values:
            row[key] = runs[0][key]
            if all(run.get(key) is None for run in runs):
                row[f"{key}_sd"] = None
            continue
        row[key], row[f"{key}_sd"] = mean_sd(values, numpy=True)
    return row


def pmc_errors(records: list[TaskRecord]) -> dict:
    """Relative error of the estimated peak against the peak measured with the task
    alone (``measure_peak``), over the tasks of the records."""
    return error_summary([relative_error(r.estimate_bytes, r.measured_peak_bytes)
                          for r in records if r.measured_peak_bytes])


def error_summary(errors: list[float]) -> dict:
    """The PMC estimator's max and mean relative error (None for no errors): a run's, a
    validation grid's."""
    return {"pmc_max_relative_error": max(errors) if errors else None,
            "pmc_mean_relative_error": mean(errors, numpy=True)}
