"""What the cojob coordinator decides, as pure functions of what it knows.

The coordinator (``coordinator.py``), which both backends drive, calls these: the remaining stages of a running cojob (online: every live job assumed to
run all remaining stages; offline: only the real survivors), the scheduler's order
of the running stages, their queues per machine (Fig. 7), and a flow's queues
(Fig. 8).
"""
from __future__ import annotations

from collections.abc import Mapping

from controller.schedulers import baselines, grouper
from controller.schedulers.grouper import Stage
from experiments.cojob import workload as cojob_mod

# Schedulers the coordinator reruns on its period; grouper-immediate reruns on every
# stage start and end instead, fs never runs.
PERIODIC = ("grouper", "grouper-offline", "baraat", "sincronia")


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


def order(scheduler: str, every: list[Stage], running: list[Stage]) -> list[str]:
    """The scheduler's global order of the running stages (the only ones with flows
    now, so the local ranks of Fig. 7 spend no queue on a stage yet to come)."""
    if scheduler == "baraat":
        ranked = baselines.baraat(running)
    elif scheduler == "sincronia":
        ranked = baselines.sincronia(running)
    else:
        ranked = grouper.pda(every)  # PDA plans over every remaining stage
    ids = {stage.stage_id for stage in running}
    return [stage_id for stage_id in ranked if stage_id in ids]


def stage_queues(ranked: list[str], running: list[Stage]) -> dict[str, dict[str, int]]:
    """machine -> {stage id: queue}: each machine's local ranks (Fig. 7) as queues 1..7."""
    return grouper.to_queues(grouper.local_priorities(ranked, grouper.stage_machines(running)))


def flow_queues(queues: Mapping[str, Mapping[str, int]], stage_id: str, src: str,
                dst: str) -> tuple[int, int] | None:
    """(switch queue, sender NIC queue) of a flow of ``stage_id`` from ``src`` to ``dst``:
    the receiver's local queue as DSCP and the sender's on its NIC (Fig. 8); None
    when either end has no queue for the stage."""
    if stage_id in queues.get(dst, {}) and stage_id in queues.get(src, {}):
        return queues[dst][stage_id], queues[src][stage_id]
    return None
