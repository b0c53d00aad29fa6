import json

import pytest

from experiments.cojob import metrics as gm
from experiments.cojob.workload import MODELS, Arrival, CojobPlan, JobPlan, LearningCurve
from experiments.errors import SpecError

# c0j0 reaches 90% of its a_final after ceil(10 ln 10) = 24 iterations, i.e. at the
# iteration_end of iteration 23; c0j1 (tau 50) needs 116 and c1j0 (tau 1000) 2303.
CURVES = {(0, 0): LearningCurve(0.8, 10.0), (0, 1): LearningCurve(0.9, 50.0),
          (1, 0): LearningCurve(0.9, 1000.0), (1, 1): LearningCurve(0.7, 1000.0)}


def plan(cojob_id, model):
    jobs = tuple(JobPlan(cojob_id, i, 2 - i, CURVES[(cojob_id, i)]) for i in range(2))
    return CojobPlan(cojob_id, MODELS[model], (20, 40), jobs, Arrival(at_s=0.0))


WORKLOAD = {"source": "test", "placements": {},
            "cojobs": [plan(0, "deepspeech2").to_dict(), plan(1, "vgg19").to_dict()]}


def ev(kind, t, **fields):
    return {"kind": kind, "t": t, **fields}


# Cojob 0 runs both stages; cojob 1 finishes stage 0 and is cut off in stage 1.
EVENTS = [
    ev("cojob_arrival", 100, cojob=0, model="deepspeech2"),
    ev("stage_start", 100, cojob=0, stage=0, jobs=["c0j0", "c0j1"]),
    ev("cojob_arrival", 105, cojob=1, model="vgg19"),
    ev("stage_start", 105, cojob=1, stage=0, jobs=["c1j0", "c1j1"]),
    ev("iteration_end", 110, job="c0j0", iteration=19, stage=0, host="tbh1", task="c0j0/w0"),
    ev("iteration_end", 111, job="c0j1", iteration=19, stage=0, host="tbh2", task="c0j1/w0"),
    ev("stage_end", 130, cojob=0, stage=0),
    ev("job_killed", 130, job="c0j1", cojob=0, after_stage=0),
    ev("stage_start", 130, cojob=0, stage=1, jobs=["c0j0"]),
    ev("stage_end", 135, cojob=0, stage=0),  # a repeat must not move the SCT
    ev("iteration_end", 140, job="c0j0", iteration=22, stage=1, host="tbh1", task="c0j0/w0"),
    ev("iteration_end", 141, job="c0j0", iteration=23, stage=1, host="tbh1", task="c0j0/w0"),
    ev("stage_end", 150, cojob=1, stage=0),
    ev("job_killed", 150, job="c1j1", cojob=1, after_stage=0),
    ev("stage_start", 150, cojob=1, stage=1, jobs=["c1j0"]),
    ev("iteration_end", 160, job="c0j0", iteration=30, stage=1, host="tbh1", task="c0j0/w0"),
    ev("iteration_end", 160, job="c1j0", iteration=25, stage=1, host="tbh3", task="c1j0/w0"),
    ev("decision", 165, scheduler="grouper", order=["c0s1", "c1s1"], changed=0),
    ev("stage_end", 170, cojob=0, stage=1),
    ev("job_finished", 170, job="c0j0", cojob=0),
    ev("cojob_end", 170, cojob=0),
]
SOLO = {("deepspeech2", 0): 15.0, ("deepspeech2", 1): 20.0, ("vgg19", 0): 30.0}


def test_stage_sct_per_cojob_and_stage_skips_unfinished_stages():
    assert gm.stage_sct(EVENTS, WORKLOAD) == [
        {"cojob": 0, "model": "deepspeech2", "stage": 0, "sct_s": 30},
        {"cojob": 0, "model": "deepspeech2", "stage": 1, "sct_s": 40},
        {"cojob": 1, "model": "vgg19", "stage": 0, "sct_s": 45}]


def test_cojct_jct_and_t90_count_from_the_cojob_arrival():
    assert gm.cojob_cojct(EVENTS, WORKLOAD) == [{"cojob": 0, "model": "deepspeech2", "cojct_s": 70}]
    assert gm.job_jct(EVENTS) == [{"job": "c0j0", "cojob": 0, "jct_s": 70}, {"job": "c0j1", "cojob": 0, "jct_s": 30},
                                  {"job": "c1j1", "cojob": 1, "jct_s": 45}]
    assert gm.cojob_t90(EVENTS, WORKLOAD) == [{"cojob": 0, "model": "deepspeech2", "t90_s": 41},
                                              {"cojob": 1, "model": "vgg19", "t90_s": None}]


def test_summarise_headline_figures():
    summary = gm.summarise(EVENTS, WORKLOAD, SOLO)
    assert summary["avg_sct_s"] == pytest.approx(115 / 3)
    assert summary["avg_cojct_s"] == 70
    assert summary["avg_jct_s"] == pytest.approx(145 / 3)
    assert summary["avg_t90_s"] == 41
    assert summary["per_model_avg_sct_s"] == {"deepspeech2": 35, "vgg19": 45}
    assert [row["slowdown"] for row in summary["stage_slowdown"]] == [2.0, 2.0, 1.5]
    assert summary["avg_stage_slowdown"] == pytest.approx(5.5 / 3)
    assert summary["p90_stage_slowdown"] == pytest.approx(2.0)
    assert {k: summary[k] for k in ("stages_completed", "stages_unfinished", "stages_without_solo",
                                    "cojobs_completed", "cojobs_unfinished", "cojobs_without_t90",
                                    "jobs_ended", "jobs_unfinished")} == {
        "stages_completed": 3, "stages_unfinished": 1, "stages_without_solo": 0, "cojobs_completed": 1,
        "cojobs_unfinished": 1, "cojobs_without_t90": 1, "jobs_ended": 3, "jobs_unfinished": 1}
    json.dumps(summary)  # goes into summary.json as it is


def test_without_solo_data_slowdown_is_none_and_missing_keys_are_counted():
    summary = gm.summarise(EVENTS, WORKLOAD)
    assert summary["avg_stage_slowdown"] is None and summary["stage_slowdown"] == []
    partial = gm.summarise(EVENTS, WORKLOAD, {("vgg19", 0): 30.0})
    assert partial["avg_stage_slowdown"] == 1.5 and partial["stages_without_solo"] == 2


def test_solo_sct_averages_each_model_stage_over_solo_runs():
    run_a = [ev("cojob_arrival", 0, cojob=0), ev("stage_start", 0, cojob=0, stage=0, jobs=["c0j0", "c0j1"]),
             ev("stage_end", 15, cojob=0, stage=0), ev("stage_start", 15, cojob=0, stage=1, jobs=["c0j0"]),
             ev("stage_end", 35, cojob=0, stage=1)]
    run_b = [ev("stage_start", 50, cojob=0, stage=0, jobs=["c0j0", "c0j1"]), ev("stage_end", 67, cojob=0, stage=0)]
    assert gm.solo_sct(run_a, WORKLOAD) == {("deepspeech2", 0): 15, ("deepspeech2", 1): 20}
    assert gm.pool_solo([(run_a, WORKLOAD), (run_b, WORKLOAD)]) == {("deepspeech2", 0): 16, ("deepspeech2", 1): 20}


def test_cdf_and_percentile():
    assert gm.cdf([3.0, 1.0, 2.0]) == [(1.0, 1 / 3), (2.0, 2 / 3), (3.0, 1.0)]
    assert gm.percentile([1.0, 2.0, 3.0, 4.0], 90) == pytest.approx(3.7)
    assert gm.percentile([], 90) is None


def test_events_of_another_workload_are_refused_naming_the_event():
    with pytest.raises(SpecError, match=r"^events\[1\]\.cojob: no cojob 9 in the workload$"):
        gm.summarise([EVENTS[0], ev("cojob_arrival", 1, cojob=9)], WORKLOAD)
    with pytest.raises(SpecError, match=r"^events\[0\]\.job: no job 'c7j0' in the workload$"):
        gm.cojob_t90([ev("iteration_end", 1, job="c7j0", iteration=0, stage=0)], WORKLOAD)


def test_read_run_loads_events_and_workload(tmp_path):
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    (tmp_path / "workload.json").write_text(json.dumps(WORKLOAD))
    events, workload = gm.read_run(tmp_path)
    assert gm.summarise(events, workload)["avg_cojct_s"] == 70


def test_tcp_summary_totals_the_hosts_counters():
    from experiments.cojob.runner import TCP_COUNTERS, tcp_summary
    host = dict.fromkeys(TCP_COUNTERS, 0)
    counters = {"h1": {**host, "TcpOutSegs": 900, "TcpRetransSegs": 90, "TcpExtTCPTimeouts": 3,
                       "TcpExtTCPSpuriousRTOs": 2},
                "h2": {**host, "TcpOutSegs": 100, "TcpRetransSegs": 10, "TcpExtTCPSpuriousRtxHostQueues": 5}}
    summary = tcp_summary(counters)
    assert summary["segments"] == 1000 and summary["retransmitted_share"] == 0.1
    assert (summary["timeouts"], summary["spurious_timeouts"], summary["retransmissions_held_in_sender_queue"]) == (3, 2, 5)
    assert tcp_summary({"h1": host})["retransmitted_share"] is None


def test_switch_loss_share_is_what_the_switches_received_and_never_sent():
    from experiments.platform.fidelity import switch_loss_share
    balance = {"tbl1": {"received": 1000, "transmitted": 970}, "tbs1": {"received": 1000, "transmitted": 1000}}
    queues = {"tbl1-eth1": {"1": {"dropped": 0}, "7": {"dropped": 10}}, "tbs1-eth1": {"7": {"dropped": 0}}}
    assert switch_loss_share(balance, {}) == 30 / 2000
    assert switch_loss_share(balance, queues) == 20 / 2000  # a queue's drops are counted, not lost
    assert switch_loss_share({"tbl1": {"received": 10, "transmitted": 12}}, {}) == 0  # a flood sends more than came in
    assert switch_loss_share({}, {}) is None
