"""The paper's baselines (§V-A) over the same ``Stage`` data, returning orders.

- FS (per-flow fair share): no priorities, so no order: the coordinator installs
  nothing and every flow stays in the default queue, where TCP shares the ports.
  The fluid evaluator's ``order=None`` is the same policy.
- Baraat: FIFO, ``baraat``.
- Sincronia: BSSI, ``sincronia``, over whatever coflows it is given. The paper's
  Sincronia (§I, §V-A) is agnostic to stages: each iteration of each job is one
  coflow (its push and pull), and those are what the cojob coordinator passes
  under the scheduler name ``sincronia``. Under ``sincronia-stage`` it passes
  cojob stages with their remaining volumes, information the paper's Sincronia
  never has: that variant is not the paper's.
Both orders list each stage once and keep every cojob's chain in index order.
"""
from __future__ import annotations

from collections.abc import Sequence

from controller.schedulers.grouper import Stage, order_of, primal_dual_steps, validate


def baraat(stages: Sequence[Stage]) -> list[str]:
    """Baraat: FIFO by arrival, ties by cojob then index.

    A stage's arrival counts as no earlier than its predecessors' (running maximum
    along the chain), so a later stage given an earlier or unknown arrival (0.0 for
    future stages in online mode) still follows its chain; stages of one cojob with
    equal arrivals then go together, which is Baraat's task-level FIFO.
    """
    validate(stages)
    effective: dict[str, float] = {}
    latest: dict[str, float] = {}
    for s in sorted(stages, key=lambda s: (s.cojob, s.index)):
        latest[s.cojob] = max(latest.get(s.cojob, s.arrival), s.arrival)
        effective[s.stage_id] = latest[s.cojob]
    return [s.stage_id for s in sorted(stages, key=lambda s: (effective[s.stage_id], s.cojob, s.index))]


def sincronia(coflows: Sequence[Stage]) -> list[str]:
    """Sincronia's Bottleneck-Select-Scale-Iterate (Agarwal et al., SIGCOMM'18, Alg. 1).

    Implemented as published: weights start at the coflows' own (1 for the paper's
    baseline); repeatedly take the most loaded port b, place last the coflow with
    the smallest w/L_b (the largest weighted load on b), and scale every unplaced
    weight w_c -= w_last * L_{b,c} / L_{b,last}. This is PDA's loop without its
    stage weights, so it runs on ``primal_dual_steps``; coflows that share a cojob
    (cojob stages) stay in chain order, and independent coflows (one per job and
    iteration) are each a chain of one, where that guard never binds.
    """
    return order_of(primal_dual_steps(coflows, {c.stage_id: c.weight for c in coflows}))
