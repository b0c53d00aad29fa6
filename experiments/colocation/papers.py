"""The papers' co-location numbers, to print beside ours.

CoGNN (SC'22, ../shared/papers/001, §V-B) Table V: makespan, average JCT and
average queuing time in minutes on a V100, per training queue; its "MPS" runs
two tasks at once, our ``mps-pair``. GNNSched (004, §4.2) gives Fig. 5-8 as
figures only; what its text states of them is kept here, per method and load
(None: both loads).
"""
from __future__ import annotations

COGNN_QUEUES = ("gcn", "sage", "gat", "gin", "mix")
_TABLE_V_ROWS = {  # method: makespan x5, average JCT x5, average QT x5 (GCN, SAGE, GAT, GIN, Mix)
    "default": (12.14, 11.57, 18.40, 19.10, 15.02, 7.47, 7.04, 10.47, 14.20, 8.86, 6.86, 6.46, 9.55, 13.25, 8.11),
    "mps-pair": (4.26, 10.55, 44.00, 23.12, 44.69, 3.27, 8.05, 39.47, 20.24, 40.96, 2.89, 7.02, 35.21, 18.21, 36.74),
    "pipeswitch": (3.54, 3.53, 7.02, 11.67, 6.07, 2.89, 2.87, 4.93, 10.56, 4.34, 2.71, 2.69, 4.58, 9.97, 4.04),
    "base": (3.41, 3.40, 6.54, 11.85, 6.04, 2.81, 2.78, 4.52, 10.56, 4.17, 2.62, 2.59, 4.13, 9.92, 3.83),
    "lmcf": (3.43, 3.45, 6.88, 11.55, 5.65, 0.56, 0.57, 1.86, 1.33, 1.15, 0.34, 0.35, 1.38, 0.67, 0.80),
    "bmc": (3.47, 3.29, 6.40, 13.76, 5.46, 2.86, 2.73, 4.62, 11.38, 4.33, 2.67, 2.54, 4.24, 10.67, 4.01),
}
TABLE_V_METRICS = ("makespan_s", "avg_jct_s", "avg_queuing_s")
# TABLE_V[method][metric][queue]: minutes
TABLE_V = {method: {metric: dict(zip(COGNN_QUEUES, values[5 * i:5 * i + 5]))
                    for i, metric in enumerate(TABLE_V_METRICS)}
           for method, values in _TABLE_V_ROWS.items()}


def table_v_ratio(method: str, metric: str, queue: str) -> float | None:
    """The paper's ``metric`` of ``method`` on ``queue`` over PipeSwitch's."""
    row = TABLE_V.get(method)
    if row is None or queue not in COGNN_QUEUES:
        return None
    return row[metric][queue] / TABLE_V["pipeswitch"][metric][queue]


# GNNSCHED[metric][(method, load)]: the text's statement (GNNSched = sqtf and bqt; MPS-Aggr = mps)
_GNNSCHED_POLICIES = ("sqtf", "bqt")
GNNSCHED = {
    "qos_violation_rate": {
        **{(p, "low"): "0" for p in _GNNSCHED_POLICIES}, **{(p, "high"): "<= 0.08" for p in _GNNSCHED_POLICIES},
        ("mps-base", None): "< 0.20", ("default", None): "<= 0.93", ("mps", None): "<= 0.91"},
    "median_latency_qt": {("default", None): "GIN: 6.6"},
    "p90_latency_qt": {("default", None): "GIN: 12.2"},
    "p99_latency_qt": {**{(p, None): "< 2" for p in _GNNSCHED_POLICIES}, ("mps-base", None): "< 2",
                       ("default", None): "GIN: 17.3", ("mps", None): "GCN: 7.5"},
    "avg_queuing_qt": {**{(p, "low"): "0" for p in (*_GNNSCHED_POLICIES, "mps-base")},
                       **{(p, "high"): "0 on SAGE, GIN" for p in _GNNSCHED_POLICIES}},
}
# Fig. 6-7: GNNSched's average reductions against a baseline, over its queues
GNNSCHED_REDUCTIONS = {
    "avg_jct_qt": {"default": 0.606, "mps-base": 0.268, "mps": 0.627},
    "median_latency_qt": {"mps-base": 0.262},
    "p90_latency_qt": {"mps-base": 0.274},
    "p99_latency_qt": {"mps-base": 0.319},
}


def gnnsched(metric: str, method: str, load: str | None) -> str | None:
    statements = GNNSCHED.get(metric, {})
    return statements.get((method, load), statements.get((method, None)))
