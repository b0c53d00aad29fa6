"""A fluid (flow-level) evaluator of stage orders: the tests' oracle for schedules (the package never runs it).

Model: the paper's analysis model (§III-B, the concurrent-open-shop relaxation
behind Eq. 15 and Theorem 2): every port has capacity 1 per time unit and works on
each stage's load on it independently; loads are seconds at port rate. A stage is
ready once it has arrived (``arrival``) and every stage of its cojob with a smaller
index has finished; it finishes when its load on all of its ports is gone (a stage
without load finishes as soon as it is ready).
- Strict priority (an ``order``): each port serves, at full rate, the ready stage
  highest in the order that still has load on it; work-conserving, preemptive.
- Fair share (``order=None``): each port splits its capacity equally among the
  ready stages with load on it (processor sharing).
Several stages may share one (cojob, index): then they are the jobs of one cojob
stage, all must finish before index+1 starts (Eq. 8), and ``stage_completion_times``
takes the latest of them as the stage's completion (Eq. 2). This is how the
per-job schedules of Fig. 3 (per-flow FS, SPTF) are evaluated.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

from controller.schedulers.grouper import Stage, validate

_EPS = 1e-12


def completion_times(stages: Sequence[Stage], order: Sequence[str] | None = None) -> dict[str, float]:
    """stage id -> completion time under strict priority by ``order``, or fair share if None."""
    validate(stages, unique_positions=False)
    rank = None
    if order is not None:
        rank = {sid: n for n, sid in enumerate(order)}
        missing = [s.stage_id for s in stages if s.stage_id not in rank]
        if missing or len(rank) != len(order):
            raise ValueError(f"order must list each stage once; missing {missing[:5]}")
    left = {s.stage_id: {p: float(x) for p, x in s.loads.items() if x > 0} for s in stages}
    scale = max((x for loads in left.values() for x in loads.values()), default=1.0)
    earlier: dict[str, list[str]] = {}
    for s in stages:
        earlier[s.stage_id] = [o.stage_id for o in stages if o.cojob == s.cojob and o.index < s.index]
    arrival = {s.stage_id: s.arrival for s in stages}
    done: dict[str, float] = {}
    now = 0.0
    while len(done) < len(stages):
        ready = [sid for sid in left if sid not in done and arrival[sid] <= now
                 and all(e in done for e in earlier[sid])]
        finished = [sid for sid in ready if not left[sid]]
        if finished:
            done.update((sid, now) for sid in finished)
            continue
        rates = _rates(ready, left, rank)
        upcoming = [arrival[sid] for sid in left if sid not in done and arrival[sid] > now]
        step = min([left[sid][p] / r for (sid, p), r in rates.items()] + [a - now for a in upcoming],
                   default=math.inf)
        if math.isinf(step):
            raise ValueError("no stage can progress: a precedence cycle or an unfinishable stage")
        now += step
        for (sid, p), r in rates.items():
            rest = left[sid][p] - r * step
            if rest <= _EPS * scale:
                del left[sid][p]
            else:
                left[sid][p] = rest
    return done


def _rates(ready: Sequence[str], left: Mapping[str, Mapping[str, float]],
           rank: Mapping[str, int] | None) -> dict[tuple[str, str], float]:
    """(stage id, port) -> service rate for the ready stages right now."""
    users: dict[str, list[str]] = defaultdict(list)
    for sid in ready:
        for p in left[sid]:
            users[p].append(sid)
    if rank is None:
        return {(sid, p): 1.0 / len(sids) for p, sids in users.items() for sid in sids}
    return {(min(sids, key=rank.__getitem__), p): 1.0 for p, sids in users.items()}


def stage_completion_times(stages: Sequence[Stage], times: Mapping[str, float]) -> dict[tuple[str, int], float]:
    """(cojob, index) -> the latest completion among the stages at that position."""
    out: dict[tuple[str, int], float] = {}
    for s in stages:
        key = (s.cojob, s.index)
        out[key] = max(out.get(key, 0.0), times[s.stage_id])
    return out


def mean_completion(stages: Sequence[Stage], order: Sequence[str] | None = None) -> float:
    """Average stage completion time (the paper's average SCT) of ``order`` (None: fair share)."""
    per_stage = stage_completion_times(stages, completion_times(stages, order))
    return sum(per_stage.values()) / len(per_stage)
