import json

import pytest

from experiments.cojob import metrics as gm
from experiments.cojob.workload import MODELS, Arrival, CojobPlan, JobPlan, LearningCurve
from experiments.errors import SpecError

# Learning curves a(n) = a_final (1 - exp(-n / tau)) reach 90% of a_final once
# n >= tau ln 10: c0j0 (tau 10) after 24 iterations, i.e. at the iteration_end of
# iteration 23; c0j1 (tau 5) after 12 (iteration 11); c1j0 and c1j1 (tau 1000) after 2303.
CURVES = {(0, 0): LearningCurve(0.8, 10.0), (0, 1): LearningCurve(0.9, 5.0),
          (1, 0): LearningCurve(0.9, 1000.0), (1, 1): LearningCurve(0.7, 1000.0)}


def plan(cojob_id, model):
    jobs = tuple(JobPlan(cojob_id, i, 2 - i, CURVES[(cojob_id, i)]) for i in range(2))
    return CojobPlan(cojob_id, MODELS[model], (20, 40), jobs, Arrival(at_s=0.0))


WORKLOAD = {"source": "test", "placements": {},
            "cojobs": [plan(0, "deepspeech2").to_dict(), plan(1, "vgg19").to_dict()]}


def ev(kind, t, **fields):
    return {"kind": kind, "t": t, **fields}


# Cojob 0 arrives at 100, its tasks start up until 102, and it runs both stages;
# cojob 1 arrives at 105, finishes stage 0 and is cut off in stage 1.
EVENTS = [
    ev("cojob_arrival", 100, cojob=0, model="deepspeech2"),
    ev("stage_start", 102, cojob=0, stage=0, jobs=["c0j0", "c0j1"]),
    ev("cojob_arrival", 105, cojob=1, model="vgg19"),
    ev("stage_start", 105, cojob=1, stage=0, jobs=["c1j0", "c1j1"]),
    ev("iteration_end", 110, job="c0j0", iteration=19, stage=0, host="tbh1", task="c0j0/w0"),
    ev("iteration_end", 111, job="c0j1", iteration=19, stage=0, host="tbh2", task="c0j1/w0"),
    ev("stage_end", 130, cojob=0, stage=0),
    ev("job_killed", 130, job="c0j1", cojob=0, after_stage=0),
    ev("stage_start", 130, cojob=0, stage=1, jobs=["c0j0"]),
    ev("stage_end", 135, cojob=0, stage=0),  # a repeat must not move the SCT
    ev("iteration_end", 139, job="c0j0", iteration=23, stage=1, host="tbh4", task="c0j0/w1"),  # not worker 0
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
# Solo SCTs from the solo cojob's arrival: deepspeech2's stages end 15 and 35 s after it arrives.
SOLO = {("deepspeech2", 0): 15.0, ("deepspeech2", 1): 35.0, ("vgg19", 0): 30.0}


def test_sct_counts_from_the_cojob_arrival_and_the_duration_from_the_stage_start():
    # SCT: 130 - 100, 170 - 100, 150 - 105; duration: 130 - 102, 170 - 130, 150 - 105.
    assert gm.stage_sct(EVENTS, WORKLOAD) == [
        {"cojob": 0, "model": "deepspeech2", "stage": 0, "sct_s": 30, "duration_s": 28},
        {"cojob": 0, "model": "deepspeech2", "stage": 1, "sct_s": 70, "duration_s": 40},
        {"cojob": 1, "model": "vgg19", "stage": 0, "sct_s": 45, "duration_s": 45}]


def test_the_papers_fig_3b_fair_share_example_has_average_sct_8():
    # Fig. 3(b): cojob A (jobs 1, 2) and B (jobs 3, 4) arrive at 0; under per-flow fair
    # share stages A-1, B-1, A-2, B-2 complete at time steps 4, 7, 9, 12 (worked out by
    # hand in test_grouper_scheduler.py): "average SCT is (4+7+9+12)/4 = 8". Durations:
    # 4, 7, 9 - 4, 12 - 7: 21/4. CoJCT: A 9, B 12; JCT: job 2 killed at 4, job 4 at 7,
    # job 1 done at 9, job 3 at 12.
    fig3 = [ev("cojob_arrival", 0, cojob=0), ev("cojob_arrival", 0, cojob=1),
            ev("stage_start", 0, cojob=0, stage=0, jobs=["c0j0", "c0j1"]),
            ev("stage_start", 0, cojob=1, stage=0, jobs=["c1j0", "c1j1"]),
            ev("stage_end", 4, cojob=0, stage=0), ev("job_killed", 4, job="c0j1", cojob=0, after_stage=0),
            ev("stage_start", 4, cojob=0, stage=1, jobs=["c0j0"]),
            ev("stage_end", 7, cojob=1, stage=0), ev("job_killed", 7, job="c1j1", cojob=1, after_stage=0),
            ev("stage_start", 7, cojob=1, stage=1, jobs=["c1j0"]),
            ev("stage_end", 9, cojob=0, stage=1), ev("job_finished", 9, job="c0j0", cojob=0),
            ev("cojob_end", 9, cojob=0),
            ev("stage_end", 12, cojob=1, stage=1), ev("job_finished", 12, job="c1j0", cojob=1),
            ev("cojob_end", 12, cojob=1)]
    summary = gm.summarise(fig3, WORKLOAD)
    assert summary["avg_sct_s"] == 8
    assert summary["avg_stage_duration_s"] == 21 / 4
    assert summary["avg_cojct_s"] == (9 + 12) / 2
    assert summary["avg_jct_s"] == (4 + 7 + 9 + 12) / 4
    assert summary["per_model_avg_sct_s"] == {"deepspeech2": (4 + 9) / 2, "vgg19": (7 + 12) / 2}
    assert [(r["cojob"], r["stage"], r["sct_s"]) for r in summary["sct_s"]] == [(0, 0, 4), (0, 1, 9), (1, 0, 7),
                                                                               (1, 1, 12)]


def test_cojct_is_the_last_stages_sct_and_jct_counts_from_the_cojob_arrival():
    assert gm.cojob_cojct(EVENTS, WORKLOAD) == [{"cojob": 0, "model": "deepspeech2", "cojct_s": 70}]
    # c0j0 finished at 170, c0j1 killed at 130 (cojob 0 arrived at 100); c1j1 killed at 150 (arrived 105)
    assert gm.job_jct(EVENTS) == [{"job": "c0j0", "cojob": 0, "jct_s": 70}, {"job": "c0j1", "cojob": 0, "jct_s": 30},
                                  {"job": "c1j1", "cojob": 1, "jct_s": 45}]


def test_t90_is_per_job_from_its_cojob_arrival_on_worker_0s_iterations():
    # c0j0: worker 0's iteration 23 at 141 (worker 1's at 139 does not count); c0j1:
    # iteration 19 >= 11 at 111; cojob 1's jobs never get near 2303 iterations.
    assert gm.job_t90(EVENTS, WORKLOAD) == [{"job": "c0j0", "cojob": 0, "model": "deepspeech2", "t90_s": 41},
                                            {"job": "c0j1", "cojob": 0, "model": "deepspeech2", "t90_s": 11},
                                            {"job": "c1j0", "cojob": 1, "model": "vgg19", "t90_s": None},
                                            {"job": "c1j1", "cojob": 1, "model": "vgg19", "t90_s": None}]


def test_summarise_headline_figures():
    summary = gm.summarise(EVENTS, WORKLOAD, SOLO)
    assert summary["avg_sct_s"] == pytest.approx((30 + 70 + 45) / 3)
    assert summary["avg_stage_duration_s"] == pytest.approx((28 + 40 + 45) / 3)
    assert summary["avg_cojct_s"] == 70
    assert summary["avg_jct_s"] == pytest.approx((70 + 30 + 45) / 3)
    assert summary["avg_t90_s"] == (41 + 11) / 2
    assert summary["per_model_avg_sct_s"] == {"deepspeech2": (30 + 70) / 2, "vgg19": 45}
    # slowdown: 30 / 15, 70 / 35, 45 / 30
    assert [row["slowdown"] for row in summary["stage_slowdown"]] == [2.0, 2.0, 1.5]
    assert summary["avg_stage_slowdown"] == pytest.approx(5.5 / 3)
    assert summary["p90_stage_slowdown"] == pytest.approx(2.0)
    assert {k: summary[k] for k in ("stages_completed", "stages_planned", "stages_unfinished", "stages_without_solo",
                                    "cojobs_completed", "cojobs_planned", "cojobs_unfinished", "jobs_without_t90",
                                    "jobs_ended", "jobs_unfinished")} == {
        "stages_completed": 3, "stages_planned": 4, "stages_unfinished": 1, "stages_without_solo": 0,
        "cojobs_completed": 1, "cojobs_planned": 2, "cojobs_unfinished": 1, "jobs_without_t90": 2, "jobs_ended": 3,
        "jobs_unfinished": 1}
    json.dumps(summary)  # goes into summary.json as it is


def test_without_solo_data_slowdown_is_none_and_missing_keys_are_counted():
    summary = gm.summarise(EVENTS, WORKLOAD)
    assert summary["avg_stage_slowdown"] is None and summary["stage_slowdown"] == []
    partial = gm.summarise(EVENTS, WORKLOAD, {("vgg19", 0): 30.0})
    assert partial["avg_stage_slowdown"] == 1.5 and partial["stages_without_solo"] == 2


def test_solo_sct_averages_each_model_stage_over_solo_runs_from_their_arrival():
    run_a = [ev("cojob_arrival", 0, cojob=0), ev("stage_start", 0, cojob=0, stage=0, jobs=["c0j0", "c0j1"]),
             ev("stage_end", 15, cojob=0, stage=0), ev("stage_start", 15, cojob=0, stage=1, jobs=["c0j0"]),
             ev("stage_end", 35, cojob=0, stage=1)]
    # arrives at 50, starts at 51: its stage 0 lasts 16 s and completes 17 s after the arrival
    run_b = [ev("cojob_arrival", 50, cojob=0), ev("stage_start", 51, cojob=0, stage=0, jobs=["c0j0", "c0j1"]),
             ev("stage_end", 67, cojob=0, stage=0)]
    assert gm.pool_solo([(run_a, WORKLOAD)]) == {("deepspeech2", 0): 15, ("deepspeech2", 1): 35}
    assert gm.pool_solo([(run_a, WORKLOAD), (run_b, WORKLOAD)]) == {("deepspeech2", 0): (15 + 17) / 2,
                                                                     ("deepspeech2", 1): 35}


def test_events_of_another_workload_are_refused_naming_the_event():
    with pytest.raises(SpecError, match=r"^events\[1\]\.cojob: no cojob 9 in the workload$"):
        gm.summarise([EVENTS[0], ev("cojob_arrival", 1, cojob=9)], WORKLOAD)
    with pytest.raises(SpecError, match=r"^events\[0\]\.job: no job 'c7j0' in the workload$"):
        gm.job_t90([ev("iteration_end", 1, job="c7j0", iteration=0, stage=0)], WORKLOAD)
    with pytest.raises(SpecError, match=r"^events\[0\]\.cojob: cojob 0 starts a stage before its cojob_arrival$"):
        gm.stage_sct([ev("stage_start", 1, cojob=0, stage=0, jobs=[])], WORKLOAD)


def test_read_run_loads_events_and_workload(tmp_path):
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    (tmp_path / "workload.json").write_text(json.dumps(WORKLOAD))
    events, workload = gm.read_run(tmp_path)
    assert gm.summarise(events, workload)["avg_cojct_s"] == 70


def test_tcp_summary_totals_the_hosts_counters():
    from experiments.platform.fidelity import TCP_COUNTERS, tcp_summary
    host = dict.fromkeys(TCP_COUNTERS, 0)
    counters = {"h1": {**host, "TcpOutSegs": 900, "TcpRetransSegs": 90, "TcpExtTCPTimeouts": 3,
                       "TcpExtTCPSpuriousRTOs": 2},
                "h2": {**host, "TcpOutSegs": 100, "TcpRetransSegs": 10, "TcpExtTCPSpuriousRtxHostQueues": 5}}
    summary = tcp_summary(counters)
    assert summary["segments"] == 1000 and summary["retransmissions_tried_share"] == 0.1
    assert summary["retransmitted_on_wire_share"] == 0.1  # none refused: every try left the host
    assert (summary["timeouts"], summary["spurious_timeouts"], summary["retransmissions_held_in_sender_queue"]) == (3, 2, 5)
    assert tcp_summary({"h1": host})["retransmitted_on_wire_share"] is None
    counters["h1"] |= {"TcpExtTCPFastRetrans": 40, "TcpExtTCPSackRecovery": 7, "TcpExtTCPDSACKRecv": 4,
                       "TcpExtTCPDSACKOfoRecv": 1, "TcpExtTCPSACKReorder": 2, "TcpExtTCPTSReorder": 1,
                       "TcpExtTCPRcvQDrop": 3, "TcpExtTCPOFODrop": 1, "TcpExtTCPRetransFail": 6}
    counters["h2"] |= {"TcpExtTCPBacklogDrop": 2, "TcpExtTCPZeroWindowDrop": 1, "TcpExtTCPRenoReorder": 1}
    summary = tcp_summary(counters)
    assert (summary["fast_retransmits"], summary["sack_recoveries"], summary["dsacks_received"],
            summary["reorderings_seen"], summary["receiver_drops"],
            summary["retransmissions_refused_by_sender_queue"], summary["retransmissions_tried"]) == (40, 7, 5, 4, 7, 6, 100)
    # 6 of the 100 retransmissions counted were attempts the sender's own qdisc refused
    assert summary["retransmitted_on_wire"] == 94 and summary["retransmitted_on_wire_share"] == 0.094
    # a file kept before a counter was read counts it 0
    old = {"h1": {"TcpOutSegs": 10, "TcpRetransSegs": 1}}
    assert tcp_summary(old)["dsacks_received"] == 0 and tcp_summary(old)["retransmitted_on_wire_share"] == 0.1


def test_switch_loss_share_is_what_the_switches_received_and_never_sent():
    from experiments.platform.fidelity import switch_loss_share
    balance = {"tbl1": {"received": 1000, "transmitted": 970}, "tbs1": {"received": 1000, "transmitted": 1000}}
    queues = {"tbl1-eth1": {"1": {"dropped": 0}, "7": {"dropped": 10}}, "tbs1-eth1": {"7": {"dropped": 0}}}
    assert switch_loss_share(balance, {}) == 30 / 2000
    assert switch_loss_share(balance, queues) == 20 / 2000  # a queue's drops are counted, not lost
    assert switch_loss_share({"tbl1": {"received": 10, "transmitted": 12}}, {}) == 0  # more out than in (the switch ends' own IPv6, before 2026-12-01): held at 0
    assert switch_loss_share({}, {}) is None
