"""What the cojob coordinator decides, as pure functions of what it knows.

The coordinator (``coordinator.py``), which both backends drive, calls these: the remaining stages of a running cojob (online: every live job assumed to
run all remaining stages; offline: only the real survivors), or, for the paper's
Sincronia, each live job's current iteration as one coflow; the scheduler's order
of them, their queues per machine (Fig. 7), and a flow's queues (Fig. 8).
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from controller.schedulers import baselines, grouper
from controller.schedulers.grouper import Stage
from experiments.cojob import workload as cojob_mod
from experiments.errors import PluginError, one_line
from experiments.validation import OWN_FUNCTION, describe, own_function

# Schedulers the coordinator reruns on its period; grouper-immediate reruns on every
# stage start and end instead, sincronia where its coflows come and go (below), fs never runs.
PERIODIC = ("grouper", "grouper-offline", "sincronia-stage")
# Schedulers rerun on every stage start: grouper-immediate, and Baraat, whose FIFO
# order gives a task its place when it arrives (§V-A: a stage is Baraat's task; the
# paper gives it no period). Its order changes only there; a stage end either
# starts the next stage or ends its cojob (then Baraat reruns too: its ranks free).
ON_STAGE_START = ("grouper-immediate", "baraat")
# Schedulers that rank each live job's current iteration as one coflow (§V-A: a coflow
# scheduler is agnostic to stages) instead of cojob stages. The paper's Sincronia
# re-ranks as iterations end. A job's next iteration is a coflow with the same loads
# as the one that ended (they depend on its placement and model only), so the BSSI
# order is a function of the set of live jobs, which changes only when a cojob's
# stage 0 starts (its jobs' first coflows) or a stage ends (the killed and finished
# jobs' coflows leave). The coordinator re-ranks exactly there: the order a re-rank
# at every iteration end would give, without a decision per iteration end that
# changes nothing (640 iteration ends in a testbed run, 28,800 on the authors' full
# trace; 16 and 160 stage ends).
PER_ITERATION = ("sincronia",)
# ... or the researcher's own scheduler, "module:function" (validation.own_function says
# where it is found): (every, running) -> stage ids, highest priority first, over the
# same ``Stage``s PDA reads (online: every live job assumed to run every remaining
# stage). It reruns as grouper does: on its period and when a cojob's stage 0 starts.
OWN_SIGNATURE = "(every: list[Stage], running: list[Stage]) -> [stage id, ...]"


def is_own(scheduler: str) -> bool:
    """Whether ``scheduler`` names a researcher's function."""
    return OWN_FUNCTION.fullmatch(scheduler) is not None


def periodic(scheduler: str) -> bool:
    """Whether ``scheduler`` reruns on its period."""
    return scheduler in PERIODIC or is_own(scheduler)


def remaining_stages(plan: cojob_mod.CojobPlan, placements: Mapping[str, cojob_mod.JobPlacement],
                     bytes_scale: float, stage: int, done: Mapping[str, int], started_t: float, now: float,
                     offline: bool) -> list[Stage]:
    """Stages ``stage``.. of a cojob running ``stage``, loads in bytes; ``done`` maps each
    live job to the iterations it finished in the running stage. A stage without load
    is left out."""
    jobs = {job.key: job for job in plan.jobs}
    out = []
    for k in range(stage, len(plan.stage_iterations)):
        iterations = {}
        for key, finished in done.items():
            if offline and not jobs[key].runs(k):
                continue
            left = plan.stage_iterations[k] - (finished if k == stage else 0)
            if left > 0:
                iterations[key] = left
        loads = cojob_mod.cojob_port_loads(plan, placements, iterations, bytes_scale)
        if loads:
            out.append(Stage(f"c{plan.cojob_id}/s{k}", f"c{plan.cojob_id}", k, loads,
                             arrival=started_t if k == stage else now))
    return out


def iteration_coflows(plan: cojob_mod.CojobPlan, placements: Mapping[str, cojob_mod.JobPlacement],
                      bytes_scale: float, alive: list[str]) -> list[Stage]:
    """The paper's Sincronia's coflows of a running cojob: per live job, one iteration's
    push and pull bytes on each port, weight 1, named by the job (its current iteration:
    each job has one at a time). A job without load is left out."""
    out = []
    for key in alive:
        loads = cojob_mod.cojob_port_loads(plan, placements, {key: 1}, bytes_scale)
        if loads:
            out.append(Stage(key, key, 0, loads))
    return out


def order(scheduler: str, every: list[Stage], running: list[Stage]) -> list[str]:
    """The scheduler's global order of the running stages (the only ones with flows
    now, so the local ranks of Fig. 7 spend no queue on a stage yet to come); for
    ``sincronia`` both are the live jobs' iteration coflows. A running stage that an own
    scheduler leaves out gets no queue: its flows stay in the lowest."""
    if is_own(scheduler):
        ranked = own_order(scheduler, every, running)
    elif scheduler == "baraat":
        ranked = baselines.baraat(running)
    elif scheduler in ("sincronia", "sincronia-stage"):
        ranked = baselines.sincronia(running)
    else:
        ranked = grouper.pda(every)  # PDA plans over every remaining stage
    ids = {stage.stage_id for stage in running}
    return [stage_id for stage_id in ranked if stage_id in ids]


@functools.lru_cache(maxsize=None)
def _own(scheduler: str):
    """The researcher's function, imported and checked once a process (a decision a period)."""
    return own_function(scheduler, OWN_SIGNATURE, 2)


def own_order(scheduler: str, every: list[Stage], running: list[Stage]) -> list[str]:
    """What the researcher's ``module:function`` orders, checked: a list of distinct ids of
    the stages it was given (copies: what it does to them stays its own). Whatever it
    raises, or a wrong answer, is a PluginError naming it (the run fails with that line)."""
    try:
        ranked = _own(scheduler)([replace(s, loads=dict(s.loads)) for s in every],
                                 [replace(s, loads=dict(s.loads)) for s in running])
    except Exception as err:  # pylint: disable=broad-except  # a plug-in's failure, reported with its name
        raise PluginError(f"scheduler {scheduler} raised {one_line(err)}") from err
    known = {stage.stage_id for stage in every}
    if not isinstance(ranked, (list, tuple)) or not all(isinstance(i, str) for i in ranked):
        raise PluginError(f"scheduler {scheduler} must return a list of stage ids, got {describe(ranked)}")
    unknown = [i for i in ranked if i not in known]
    if unknown or len(set(ranked)) != len(ranked):
        raise PluginError(f"scheduler {scheduler} returned " +
                          (f"unknown stage id {unknown[0]!r}" if unknown else "a stage id twice") +
                          f" (given: {', '.join(sorted(known))})")
    return list(ranked)


def stage_queues(ranked: list[str], running: list[Stage]) -> dict[str, dict[str, int]]:
    """machine -> {stage (or coflow) id: queue}: each machine's local ranks (Fig. 7) as
    queues 1..7. A running stage not ranked (only an own scheduler leaves one out) gets
    none: its flows stay in the lowest queue."""
    ranked_ids = set(ranked)
    return grouper.to_queues(grouper.local_priorities(
        ranked, grouper.stage_machines(s for s in running if s.stage_id in ranked_ids)))


def flow_queues(queues: Mapping[str, Mapping[str, int]], stage_id: str, src: str,
                dst: str) -> tuple[int, int] | None:
    """(switch queue, sender NIC queue) of a flow of ``stage_id`` (a stage or a coflow)
    from ``src`` to ``dst``: the receiver's local queue as DSCP and the sender's on its
    NIC (Fig. 8); None when either end has no queue for it."""
    if stage_id in queues.get(dst, {}) and stage_id in queues.get(src, {}):
        return queues[dst][stage_id], queues[src][stage_id]
    return None
