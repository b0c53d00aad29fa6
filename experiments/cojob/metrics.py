"""Grouper's evaluation metrics (TNSM 2020, §III and §V-A), computed afterwards from a run's data.

Inputs are the run's ``events.jsonl`` (host events of ``hosts.messages`` plus the
driver's ``cojob_arrival``, ``stage_start``, ``stage_end``, ``job_killed``,
``job_finished``, ``cojob_end``) and its ``workload.json``
(``experiments.cojob.workload.Workload.to_dict()``), so a metric can be recomputed
or corrected without running the emulation again. Times are the events' ``t``.
Each metric is the paper's, read as follows:

- SCT of a (cojob, stage): its ``stage_end`` minus its cojob's ``cojob_arrival``.
  Eq. (2) makes S_{g,k} "the time when all jobs in the cojob have finished their
  kth stage", and Eq. (9) counts time from the cojob's start, "all jobs arrival at
  time 0"; Fig. 3(b) confirms it: stages ending at time steps 4, 7, 9, 12 have
  "average SCT (4+7+9+12)/4 = 8", not the stages' durations. In the emulation the
  SCT includes the tasks' start-up (arrival to stage 0's start); the simulator
  starts stage 0 as the cojob arrives.
- Average SCT: over every stage of every cojob alike, Eq. (1)'s sum over g and
  k in [K_g] ("minimizing average completion times of cojobs' stages is equivalent
  to minimizing the sum of their completion times") divided by the number of stages.
- Stage duration of a (cojob, stage): its ``stage_end`` minus its ``stage_start``
  (what this module called SCT before; kept as ``avg_stage_duration_s``).
- CoJCT of a cojob: ``cojob_end`` minus ``cojob_arrival``. The paper names it
  without a formula; by Eq. (2) a cojob completes with its last stage, so it is the
  SCT of the last stage (``cojob_end`` is noted with that ``stage_end``).
- JCT of a job: its ``job_killed`` or ``job_finished`` minus its cojob's arrival.
  Eq. (3)'s note: a job with fewer stages "is completed at the time when it is
  stopped", from the same time 0 (Eq. (9)); the paper reads a smaller JCT as "more
  unpromising jobs are stopped per unit time".
- T90 of a job: from its cojob's arrival until the job reaches 90% of its own
  converged accuracy, averaged over the jobs that got there. §V-A: "the average
  time to reach 90% of the converged accuracy, indicating how fast a job can
  achieve a high training accuracy" (per job, not per cojob). Read off the job's
  learning curve at worker 0's ``iteration_end`` (the iterations the coordinator
  counts and the simulator reports; ``iteration`` k, counted from 0, means k + 1
  iterations done, the curve's argument). None for a job killed before it got
  there (or without a curve).
- Stage slowdown: §V-A's "ratio between its completion time and its minimum
  completion time if running alone in the network", i.e. the stage's SCT over the
  SCT of the same (model, stage) when its cojob ran alone, from a solo calibration
  (``pool_solo``) measured the same way (from the solo cojob's arrival).

A stage, cojob or job whose end event is missing (a run cut short) has no
completion time; ``summarise`` counts such unfinished ones instead of guessing.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from experiments import store
from experiments.cojob.workload import CojobPlan, t90_iteration
from experiments.errors import SpecError
from experiments.stats import mean, percentile

SoloSct = dict[tuple[str, int], float]
WORKLOAD_FILE = "workload.json"  # a cojob run's workload (``Workload.to_dict``), in its run directory


def has_run(run_dir: str | Path) -> bool:
    """Whether ``read_run`` can read the directory (events and workload, plain or gzipped)."""
    run_dir = Path(run_dir)
    return store.kept(run_dir / WORKLOAD_FILE) is not None and store.kept(run_dir / store.EVENTS) is not None


def read_run(run_dir: str | Path) -> tuple[list[dict], dict]:
    """The events (one JSON object a line) and workload dict of a run directory."""
    run_dir = Path(run_dir)
    workload = store.read_json(run_dir / WORKLOAD_FILE)
    if not isinstance(workload, dict):
        raise SpecError(str(run_dir / WORKLOAD_FILE), "not a cojob workload (a JSON object)")
    return store.read_jsonl(run_dir / store.EVENTS), workload


def _plans(events: Sequence[Mapping], workload: Mapping) -> dict[int, CojobPlan]:
    """The workload's cojobs by id, once every cojob and job the events name is known
    to be one of them (a run's events read against another run's workload fail here)
    and every stage starts after its cojob's arrival, which its SCT counts from."""
    plans = {plan["cojob_id"]: CojobPlan.from_dict(plan) for plan in workload["cojobs"]}
    jobs = {job.key for plan in plans.values() for job in plan.jobs}
    arrived = set()
    for i, event in enumerate(events):
        if "cojob" in event and event["cojob"] not in plans:
            raise SpecError(f"events[{i}].cojob", f"no cojob {event['cojob']!r} in the workload")
        if event.get("kind") == "cojob_arrival":
            arrived.add(event["cojob"])
        elif event.get("kind") == "stage_start" and event["cojob"] not in arrived:
            raise SpecError(f"events[{i}].cojob", f"cojob {event['cojob']!r} starts a stage before its cojob_arrival")
        if event.get("kind") == "iteration_end" and event.get("job") not in jobs:
            raise SpecError(f"events[{i}].job", f"no job {event.get('job')!r} in the workload")
    return plans


def _first_times(events: Sequence[Mapping], kind: str, key) -> dict:
    """``t`` of the first event of ``kind`` per ``key(event)``: a repeated event
    (e.g. a re-sent end) must not move a completion time."""
    times: dict = {}
    for event in events:
        if event.get("kind") == kind:
            times.setdefault(key(event), event["t"])
    return times


def _arrivals(events: Sequence[Mapping]) -> dict:
    return _first_times(events, "cojob_arrival", lambda e: e["cojob"])


def stage_sct(events: Sequence[Mapping], workload: Mapping) -> list[dict]:
    """``{cojob, model, stage, sct_s, duration_s}`` of every stage that started and
    ended, by (cojob, stage): its SCT (from its cojob's arrival) and its own duration."""
    plans = _plans(events, workload)
    arrivals = _arrivals(events)
    starts = _first_times(events, "stage_start", lambda e: (e["cojob"], e["stage"]))
    ends = _first_times(events, "stage_end", lambda e: (e["cojob"], e["stage"]))
    rows = []
    for (cojob, stage), start in sorted(starts.items()):
        end = ends.get((cojob, stage))
        if end is not None:
            rows.append({"cojob": cojob, "model": plans[cojob].model, "stage": stage,
                         "sct_s": end - arrivals[cojob], "duration_s": end - start})
    return rows


def cojob_cojct(events: Sequence[Mapping], workload: Mapping) -> list[dict]:
    """``{cojob, model, cojct_s}`` of every cojob that arrived and ended."""
    plans = _plans(events, workload)
    arrivals, ends = _arrivals(events), _first_times(events, "cojob_end", lambda e: e["cojob"])
    return [{"cojob": cojob, "model": plans[cojob].model, "cojct_s": ends[cojob] - arrival}
            for cojob, arrival in sorted(arrivals.items()) if cojob in ends]


def job_jct(events: Sequence[Mapping]) -> list[dict]:
    """``{job, cojob, jct_s}`` of every job that was killed or finished after its cojob arrived."""
    arrivals = _arrivals(events)
    ended: dict = {}
    for event in events:
        if event.get("kind") in ("job_killed", "job_finished"):
            ended.setdefault(event["job"], event)
    return [{"job": job, "cojob": event["cojob"], "jct_s": event["t"] - arrivals[event["cojob"]]}
            for job, event in sorted(ended.items()) if event["cojob"] in arrivals]


def job_t90(events: Sequence[Mapping], workload: Mapping) -> list[dict]:
    """``{job, cojob, model, t90_s}`` of every job of every cojob that arrived; t90_s
    None when the job did not reach 90% of its converged accuracy."""
    plans = _plans(events, workload)
    jobs = {job.key: (plan.cojob_id, job) for plan in plans.values() for job in plan.jobs}
    arrivals = _arrivals(events)
    reached: dict = {}
    for event in events:
        # worker 0's count, as the simulator reports it (its events name no task)
        if event.get("kind") != "iteration_end" or not event.get("task", "/w0").endswith("/w0"):
            continue
        cojob, job = jobs[event["job"]]
        if job.curve is not None and cojob in arrivals and event["iteration"] + 1 >= t90_iteration(job.curve):
            reached[job.key] = min(reached.get(job.key, math.inf), event["t"] - arrivals[cojob])
    return [{"job": job.key, "cojob": cojob, "model": plans[cojob].model, "t90_s": reached.get(job.key)}
            for cojob in sorted(arrivals) for job in plans[cojob].jobs]


def pool_solo(runs: Iterable[tuple[Sequence[Mapping], Mapping]]) -> SoloSct:
    """The solo SCT of each (model, stage): the mean over every such stage of every
    solo run. The mean, not the minimum over repeats: the paper's "minimum SCT if
    running alone" is the uncontended time, and picking the luckiest repeat would
    bias every slowdown upwards."""
    samples: dict[tuple[str, int], list[float]] = {}
    for events, workload in runs:
        for row in stage_sct(events, workload):
            samples.setdefault((row["model"], row["stage"]), []).append(row["sct_s"])
    return {key: mean(values) for key, values in sorted(samples.items())}


def stage_slowdown(scts: Sequence[Mapping], solo: Mapping[tuple[str, int], float]) -> list[dict]:
    """``{cojob, model, stage, slowdown}`` of every stage whose (model, stage) has a solo SCT."""
    return [{"cojob": row["cojob"], "model": row["model"], "stage": row["stage"],
             "slowdown": row["sct_s"] / solo[(row["model"], row["stage"])]}
            for row in scts if solo.get((row["model"], row["stage"]))]


def per_model_avg_sct(scts: Sequence[Mapping]) -> dict[str, float]:
    """Average SCT of each model's stages (the paper's Fig. 12), by model name."""
    by_model: dict[str, list[float]] = {}
    for row in scts:
        by_model.setdefault(row["model"], []).append(row["sct_s"])
    return {model: mean(values) for model, values in sorted(by_model.items())}


def summarise(events: Sequence[Mapping], workload: Mapping,
              solo: Mapping[tuple[str, int], float] | None = None) -> dict:
    """The headline figures of one run under stable names (JSON-ready), with the
    per-stage, per-cojob and per-job values they average and counts of what never
    ended. Slowdown fields are None (and ``stage_slowdown`` empty) without ``solo``."""
    scts = stage_sct(events, workload)
    cojcts = cojob_cojct(events, workload)
    jcts = job_jct(events)
    t90s = job_t90(events, workload)
    slowdowns = stage_slowdown(scts, solo) if solo else []
    slowdown_values = [row["slowdown"] for row in slowdowns]
    plans = _plans(events, workload)
    started_stages = {(e["cojob"], e["stage"]) for e in events if e.get("kind") == "stage_start"}
    started_jobs = {job for e in events if e.get("kind") == "stage_start" for job in e.get("jobs", ())}
    return {
        "avg_sct_s": mean(row["sct_s"] for row in scts),
        "avg_stage_duration_s": mean(row["duration_s"] for row in scts),
        "avg_cojct_s": mean(row["cojct_s"] for row in cojcts),
        "avg_jct_s": mean(row["jct_s"] for row in jcts),
        "avg_t90_s": mean(row["t90_s"] for row in t90s if row["t90_s"] is not None),
        "avg_stage_slowdown": mean(slowdown_values),
        "p90_stage_slowdown": percentile(slowdown_values, 90),  # linear, numpy's default
        "per_model_avg_sct_s": per_model_avg_sct(scts),
        "stages_completed": len(scts),
        "stages_planned": sum(len(plan.stage_iterations) for plan in plans.values()),
        "stages_unfinished": len(started_stages) - len(scts),
        "stages_without_solo": len(scts) - len(slowdowns) if solo else None,
        "cojobs_completed": len(cojcts),
        "cojobs_planned": len(plans),
        "cojobs_unfinished": len(_arrivals(events)) - len(cojcts),
        "jobs_without_t90": sum(row["t90_s"] is None for row in t90s),
        "jobs_ended": len(jcts),
        "jobs_unfinished": len(started_jobs - {row["job"] for row in jcts}),
        "sct_s": scts,
        "cojct_s": cojcts,
        "jct_s": jcts,
        "t90_s": t90s,
        "stage_slowdown": slowdowns,
    }
