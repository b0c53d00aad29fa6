"""The multi-queue tables beside the papers' numbers, over the H100 runs kept in measurements/,
and the metrics of a run with failures."""
from pathlib import Path

from experiments.colocation.metrics import aggregate, group_boundaries, summarize
from experiments.colocation.report import _failed_table, _refused_by_text, table_v
from hosts.colocation.executor import TaskRecord
from hosts.colocation.workers import OUT_OF_MEMORY, OUT_OF_MEMORY_WITHIN_BUDGET

H100 = Path(__file__).resolve().parents[1] / "measurements" / "colocate-h100-2026-11-23"


def _rows(text: str, section: str) -> dict[str, list[str]]:
    lines = text.split(f"## {section}")[1].split("\n## ")[0].strip().splitlines()
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}


def test_training_queues_as_ratios_to_pipeswitch_beside_table_v():
    text = table_v([H100 / "train-sage", H100 / "train-gat"])
    assert "NVIDIA H100 80GB HBM3" in text
    makespan = _rows(text, "Makespan / PipeSwitch's, beside Table V's (V100)")
    assert list(makespan) == ["pipeswitch", "base", "lmcf", "bmc"]  # baselines first, as Table V
    # ours over PipeSwitch's, then Table V's: SAGE BMC 11.6 s / 14.7 s here, 3.29 / 3.53 min there
    assert makespan["bmc"] == ["0.791", "0.932", "0.761", "0.912"] and makespan["pipeswitch"] == ["1"] * 4
    assert _rows(text, "Average JCT / PipeSwitch's, beside Table V's (V100)")["lmcf"][:2] == ["0.452", "0.199"]


def test_inference_queues_beside_what_gnnsched_states():
    text = table_v([H100 / "infer-gcn-low", H100 / "infer-mix-low"])
    assert "at low load" in text
    violations = _rows(text, "QoS violation rate (Fig. 5)")
    assert violations["sqtf"] == ["0.24", "0.76", "0"] and violations["mps-base"] == ["0.2", "0.38", "< 0.20"]
    assert _rows(text, "p99 latency / QT (Fig. 6)")["default"][-1] == "GIN: 17.3"
    # BQT's average JCT against MPS-Base's, ours (31% above it here) then the paper's (26.8% below)
    assert "| avg_jct_qt | bqt | mps-base | -31.1% | 26.8% |" in text.splitlines()
    assert _rows(text, "Failed tasks (a run's mean; out of memory, over budget, a worker dead)")["sqtf"] == ["3", "2"]


def test_a_failed_request_violates_qos_and_is_no_latency():
    """A request that failed delivered no result: a QoS violation however soon it
    failed, and outside the JCT and latencies; its end still ends the makespan."""
    def record(key, end, error=None):
        return TaskRecord(task_id=key, method="sqtf", arrival_s=0.0, estimate_bytes=1, need_bytes=1, budget_bytes=1,
                          qt_s=1.0, start_s=0.0, end_s=end, error=error)
    summary = summarize([record("a", 0.5), record("b", 2.0), record("c", 0.1, OUT_OF_MEMORY),
                         record("d", 3.0, "stopped over budget at 9 bytes")])
    assert summary["failed"] == 2 and summary["out_of_memory_tasks"] == 1
    assert summary["qos_violation_rate"] == 0.75  # b late, c and d failed
    assert summary["avg_jct_s"] == 1.25 and summary["avg_jct_qt"] == 1.25  # a and b
    assert summary["median_latency_s"] == 1.25 and summary["p99_latency_qt"] == 0.5 + 1.5 * 0.99
    assert summary["makespan_s"] == 3.0


def test_a_measure_no_repeat_took_has_an_unknown_spread_so_the_summary_can_name_it():
    """A makespan null in every repeat (no task finished) still has its ``_sd`` (null):
    the run's summary takes the primary's ``makespan_s_sd``, so a missing one cost the
    run its summary.json."""
    row = aggregate([{"makespan_s": None, "mps_daemon": "ran", "tasks": 3},
                     {"makespan_s": None, "mps_daemon": "ran", "tasks": 5}])
    assert row == {"repeats": 2, "makespan_s": None, "makespan_s_sd": None, "mps_daemon": "ran", "tasks": 4.0,
                   "tasks_sd": row["tasks_sd"]} and row["tasks_sd"] > 0


def _task(key, arrival=0.0, start=0.0, end=1.0, batch=None, group=None, budget=1, **fields):
    return TaskRecord(task_id=key, method="bmc", arrival_s=arrival, estimate_bytes=1, need_bytes=1, budget_bytes=budget,
                      qt_s=None, start_s=start, end_s=end, batch=batch, group=group, **fields)


def test_a_group_boundary_is_from_when_the_group_could_start_to_its_first_start():
    """Batch 0 arrives at 0 and runs three groups; batch 1 arrives at 5, after batch
    0's last group ended (4): its first group could start only then."""
    records = [
        _task("a", start=0.0, end=1.0, batch=0, group=0), _task("b", start=0.0, end=2.0, batch=0, group=0),
        _task("c", start=2.6, end=2.8, batch=0, group=1), _task("d", start=2.5, end=3.0, batch=0, group=1),
        _task("e", start=3.25, end=4.0, batch=0, group=2),
        _task("f", arrival=5.0, start=5.75, end=6.0, batch=1, group=0),
        _task("g", start=0.0, end=9.0),  # no group (a baseline's task): no boundary
    ]
    assert group_boundaries(records[::-1]) == [0.5, 0.25, 0.75]  # in run order, whatever the records' order
    summary = summarize(records)
    assert summary["group_boundary_s"] == 0.5 and summary["group_boundary_max_s"] == 0.75
    assert summarize(records[:2])["group_boundary_s"] is None  # one group, no boundary


def test_both_kinds_of_refusal_are_out_of_memory_and_memory_violations_and_one_is_within_budget():
    records = [_task("ok"), _task("unbudgeted", budget=None, error=OUT_OF_MEMORY),
               _task("tight", error=OUT_OF_MEMORY_WITHIN_BUDGET, refused_by="cap"),
               _task("stopped", error="stopped over budget at 9 bytes", over_budget=True),
               _task("crowded", over_capacity=True)]
    summary = summarize(records)
    assert (summary["failed"], summary["out_of_memory_tasks"], summary["refused_within_budget_tasks"],
            summary["over_budget_tasks"], summary["over_capacity_tasks"], summary["memory_violations"]) == (
        3, 2, 1, 1, 1, 4)
    row = aggregate([summary, summarize(records[:1])])  # over repeats, as every count
    assert row["refused_within_budget_tasks"] == 0.5 and row["refused_within_budget_tasks_sd"] > 0
    table = _failed_table([{"methods": {"bmc": row}}], ["gcn"], ["bmc"])
    assert "| bmc | 1.5 ± 2.12 (0.5 ± 0.707 refused within budget) |" in table
    assert (summary["refused_within_budget_by_cap_tasks"], summary["refused_within_budget_by_device_tasks"]) == (1, 0)
    assert _refused_by_text(row) == " (by the cap 0.5 ± 0.707, by the device 0)"
    assert _refused_by_text({"refused_within_budget_tasks": 1}) == ""  # a summary from before the split
