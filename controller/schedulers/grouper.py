"""Grouper (Zhou et al.): order cojob stages with PDA (§III-C), map the order to queues (§IV-B).

Data model. A ``Stage`` is one stage of one cojob (all of its jobs together) with
its remaining load on each port it uses. Ports are the machine ends of the paper's
big-switch fabric (§III-A), ``"<machine>/out"`` (egress of the machine, ingress of
the fabric) and ``"<machine>/in"``; loads may be bytes or seconds at port rate, in
one unit for all ports. The stages of a cojob form a chain: stage ``index`` k must
finish before k+1 starts. ``index`` is the stage's number in its cojob counted from
0 (the paper's k is index + 1), online too, where finished stages are left out.
An order is a list of stage ids, highest priority first; every scheduler here
returns an order that lists each stage once and keeps every chain in index order.

Online vs offline (§IV-C, §V-B). PDA itself is offline; the variants differ only in
the loads the driver passes in:
- online (the paper's default, rerun every period): every job still alive is
  assumed to run all remaining stages of its cojob, so a stage's load on a port is
  the sum over the cojob's live jobs of (one iteration's bytes on that port) x
  (iterations of that stage still to run);
- offline (GrouperOffline): the same sum, but a job counts towards stage k only if
  it really survives to stage k (the driver knows who will be killed).
In both, the running stage carries only its remaining iterations and finished
stages are left out.

Readings of Alg. 1 (details where they live): line 16 takes the smallest w/L
(it is printed L/w) over every unplaced stage, the stage whose dual constraint the
rising beta makes tight first, as Lemma 2 needs; the initial weights are Eq. 46's
with the cojob's own stage number k (``pda_weights``); precedence, which the
printed loop leaves to the weights, is kept by placing chain tails
(``primal_dual_steps``).

Queues (§IV-B, Fig. 7/8). Each machine ranks only the stages that have flows on
it, in the global order; rank r takes ``queues[r]`` (by default scheduler queue
r+1, 1 being the highest) and ranks past the last queue share the lowest one.
Queue 0 is reserved for control traffic and never handed out. A sender marks its
flow with its own local queue on its NIC and with the receiver's local queue for
the switch egress port towards the receiver (Fig. 8).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from topologies.queues import CONTROL_QUEUE, SCHEDULER_QUEUES


@dataclass(frozen=True)
class Stage:
    """One cojob stage: its jobs' remaining traffic over this stage, per port."""

    stage_id: str                 # unique, e.g. "c1/s2"
    cojob: str
    index: int                    # position in the cojob's chain
    loads: Mapping[str, float]    # port -> remaining load (>= 0)
    weight: float = 1.0
    arrival: float = 0.0          # when the stage's first flow arrived (FIFO baselines, fluid release)


@dataclass(frozen=True)
class Step:
    """One iteration of the backward loop (Alg. 1, lines 15-22): ``stage_id`` is
    placed last among the stages still unplaced."""

    stage_id: str
    port: str | None      # lambda(i), the bottleneck port; None for a stage without load
    rho: float            # rho(i) = beta_{lambda(i), M(i)}, the dual raised at this step
    tight: str | None     # the stage whose dual constraint this step made tight (line 16's argmin)
    weight_left: float    # the placed stage's adjusted weight after the step; 0 when its dual constraint is tight
    min_weight: float     # smallest adjusted weight this step left on an unplaced stage (inf if none changed)


def validate(stages: Sequence[Stage], *, unique_positions: bool = True) -> None:
    """Raise ValueError unless stage ids are unique, loads and weights finite and
    non-negative, and (with ``unique_positions``) each (cojob, index) appears once."""
    ids, positions = set(), set()
    for s in stages:
        if s.stage_id in ids:
            raise ValueError(f"stage_id {s.stage_id!r} appears twice")
        ids.add(s.stage_id)
        if unique_positions and (s.cojob, s.index) in positions:
            raise ValueError(f"stage {s.stage_id!r}: cojob {s.cojob!r} has index {s.index} twice")
        positions.add((s.cojob, s.index))
        bad = [p for p, x in s.loads.items() if not (math.isfinite(x) and x >= 0)]
        if bad:
            raise ValueError(f"stage {s.stage_id!r}: load on {bad[0]!r} must be finite and >= 0")
        if not (math.isfinite(s.weight) and s.weight >= 0):
            raise ValueError(f"stage {s.stage_id!r}: weight must be finite and >= 0")


def pda_weights(stages: Sequence[Stage]) -> dict[str, float]:
    """Initial weights of Alg. 1 (lines 3-11) as the proof evaluates them (Eq. 46):
    w_{g,k} = weight * (1 + (1/2)^(k+1)), k = index + 1, the stage's own number in
    its cojob.

    Online (a cojob part-way done, its finished stages not given) k stays the
    cojob's own stage number rather than restarting at 1 with the first stage given:
    Eq. 46 is written in the cojob's k, and the proof uses k only through
    alpha_{g,k} = 1 - (1/2)^k, which either numbering keeps >= 0 and rising along the
    chain. So a cojob further along weighs less and goes later among equal loads.

    Eq. 46 treats the last stage like the others; reading line 10 literally
    (alpha_{g,K+1} = 0) would give it weight (1/2)^K, and with that PDA misorders the
    paper's own Fig. 3 example (A1, B1, A2, B2). The weight factor keeps the
    order unchanged when all weights are scaled.
    """
    negative = [s.stage_id for s in stages if s.index < 0]
    if negative:
        raise ValueError(f"stage {negative[0]!r}: index counts from 0")
    return {s.stage_id: s.weight * (1.0 + 0.5 ** (s.index + 2)) for s in stages}


def primal_dual_steps(stages: Sequence[Stage], weights: Mapping[str, float]) -> list[Step]:
    """The backward primal-dual loop shared by PDA and Sincronia's BSSI, last place first.

    Each step is Alg. 1 lines 15-22: lambda = the most loaded port (total unplaced
    load); x = the unplaced stage on lambda with the smallest w/L_lambda (line 16
    with the ratio the dual needs: x is the first constraint that the rising
    beta_{lambda,M} makes tight); rho = w_x/L_x; every unplaced stage on lambda
    loses rho * L_lambda of its weight. Precedence: the stage placed is the last
    unplaced stage of x's cojob; that is x itself unless x still has unplaced
    successors, which must come after x anyway (x keeps weight 0 and is placed
    once they are).
    Line 16 is not restricted to chain tails: a stage it skipped could go negative
    (infeasible duals), and on the test's instance that order costs 2.35x the best,
    past Theorem 2's bound.
    Invariants: adjusted weights never go negative (x has the smallest ratio; it
    lands exactly on 0), so the duals stay feasible (Lemma 2(d)); only chain tails
    are placed, so every order keeps precedence. A chain tail without load is
    placed at once with rho = 0: its position delays nobody.
    Ties: for x, a chain tail first, then the larger stage id. Cost per step: the
    stages on lambda plus one pass over the ports.
    """
    validate(stages)
    stages = sorted(stages, key=lambda s: s.stage_id)
    n = len(stages)
    ports, stage_ports, stage_loads, port_stages, port_loads = _incidence(stages)
    unplaced_on_port = np.array([v.size for v in port_stages], dtype=np.intp)

    weight = np.array([float(weights[s.stage_id]) for s in stages])
    if not np.all(np.isfinite(weight) & (weight >= 0)):
        raise ValueError("weights must be finite and >= 0")
    total = np.zeros(len(ports))
    for used, loads in zip(stage_ports, stage_loads):
        total[used] += loads

    chains: dict[str, list[int]] = defaultdict(list)
    for i in sorted(range(n), key=lambda i: (stages[i].cojob, stages[i].index)):
        chains[stages[i].cojob].append(i)
    predecessor = np.full(n, -1, dtype=np.intp)
    for chain in chains.values():
        predecessor[chain[1:]] = chain[:-1]
    tail = {cojob: chain[-1] for cojob, chain in chains.items()}
    is_tail = np.zeros(n, dtype=bool)
    is_tail[list(tail.values())] = True
    loadless = [i for i in tail.values() if not stage_ports[i].size]
    placed = np.zeros(n, dtype=bool)

    steps: list[Step] = []
    for _ in range(n):
        if loadless:
            i = loadless.pop()
            steps.append(Step(stages[i].stage_id, None, 0.0, None, float(weight[i]), math.inf))
        else:
            b = int(np.argmax(np.where(unplaced_on_port > 0, total, -np.inf)))
            unplaced = ~placed[port_stages[b]]
            idx, load = port_stages[b][unplaced], port_loads[b][unplaced]
            ratio = weight[idx] / load
            rho = float(ratio.min())
            tied = np.flatnonzero(ratio == rho)
            tied_tails = tied[is_tail[idx[tied]]]
            x = int(idx[(tied_tails if tied_tails.size else tied)[-1]])
            # Where ratio > rho, w > rho*L exactly, and rounding rho*L cannot pass w.
            adjusted = np.where(ratio == rho, 0.0, weight[idx] - rho * load)
            weight[idx] = adjusted
            i = tail[stages[x].cojob]
            others = adjusted[idx != i]
            steps.append(Step(stages[i].stage_id, ports[b], rho, stages[x].stage_id, float(weight[i]),
                              float(others.min()) if others.size else math.inf))
            unplaced_on_port[stage_ports[i]] -= 1
            total[stage_ports[i]] -= stage_loads[i]
        placed[i] = True
        is_tail[i] = False
        j = int(predecessor[i])
        if j >= 0:
            tail[stages[i].cojob] = j
            is_tail[j] = True
            if not stage_ports[j].size:
                loadless.append(j)
    return steps


def _incidence(stages: Sequence[Stage]) -> tuple[list[str], list[np.ndarray], list[np.ndarray],
                                                list[np.ndarray], list[np.ndarray]]:
    """The positive loads both ways: sorted ports; per stage its port indices and
    loads; per port its stage indices and loads."""
    ports = sorted({p for s in stages for p, x in s.loads.items() if x > 0})
    port_index = {p: j for j, p in enumerate(ports)}
    stage_ports, stage_loads = [], []
    on_port: list[list[int]] = [[] for _ in ports]
    load_on_port: list[list[float]] = [[] for _ in ports]
    for i, s in enumerate(stages):
        used = sorted(port_index[p] for p, x in s.loads.items() if x > 0)
        stage_ports.append(np.array(used, dtype=np.intp))
        stage_loads.append(np.array([s.loads[ports[j]] for j in used], dtype=float))
        for j in used:
            on_port[j].append(i)
            load_on_port[j].append(s.loads[ports[j]])
    return (ports, stage_ports, stage_loads,
            [np.array(v, dtype=np.intp) for v in on_port], [np.array(v, dtype=float) for v in load_on_port])


def order_of(steps: Sequence[Step]) -> list[str]:
    """The order (first = highest priority) that backward steps describe."""
    return [step.stage_id for step in reversed(steps)]


def pda_steps(stages: Sequence[Stage]) -> list[Step]:
    """Alg. 1 step by step (for checking its dual invariants)."""
    return primal_dual_steps(stages, pda_weights(stages))


def pda(stages: Sequence[Stage]) -> list[str]:
    """Alg. 1 (PDA): the global stage order, highest priority first."""
    return order_of(pda_steps(stages))


def machine_of(port: str) -> str:
    """``"tbh3/out"`` -> ``"tbh3"``."""
    return port.partition("/")[0]


def stage_machines(stages: Iterable[Stage]) -> dict[str, frozenset[str]]:
    """stage id -> the machines on which it has load (its flows' ends)."""
    return {s.stage_id: frozenset(machine_of(p) for p, x in s.loads.items() if x > 0) for s in stages}


def local_priorities(order: Sequence[str],
                     machines_of_stage: Mapping[str, Iterable[str]]) -> dict[str, dict[str, int]]:
    """Fig. 7: machine -> {stage id: rank}. Each machine ranks only its own stages,
    in global order, densely from 0. Every stage with a machine must be in ``order``."""
    position = {sid: n for n, sid in enumerate(order)}
    if len(position) != len(order):
        raise ValueError("order lists a stage twice")
    missing = sorted(set(machines_of_stage) - set(position))
    if missing:
        raise ValueError(f"stages missing from the order: {missing[:5]}")
    on_machine: dict[str, list[str]] = defaultdict(list)
    for sid, machines in machines_of_stage.items():
        for m in set(machines):
            on_machine[m].append(sid)
    return {m: {sid: rank for rank, sid in enumerate(sorted(sids, key=position.__getitem__))}
            for m, sids in sorted(on_machine.items())}


def _check_queues(queues: Sequence[int]) -> None:
    if not queues:
        raise ValueError("no queues given")
    if len(set(queues)) != len(queues):
        raise ValueError(f"queues repeat: {list(queues)}")
    outside = [q for q in queues if q not in SCHEDULER_QUEUES]
    if outside:
        raise ValueError(f"queue {outside[0]} is not a scheduler queue {list(SCHEDULER_QUEUES)} "
                         f"(queue {CONTROL_QUEUE} is reserved for control)")


def to_queues(local: Mapping[str, Mapping[str, int]],
              queues: Sequence[int] = tuple(SCHEDULER_QUEUES)) -> dict[str, dict[str, int]]:
    """Rank r -> ``queues[r]``, highest priority first; ranks past the end share the
    last (lowest) queue, as the paper maps priorities > q into queue q."""
    _check_queues(queues)
    last = len(queues) - 1
    return {m: {sid: queues[min(rank, last)] for sid, rank in ranks.items()} for m, ranks in local.items()}
