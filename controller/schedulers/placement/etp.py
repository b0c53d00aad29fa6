"""ETP (Alg. 3 of the DGTP paper, §V-B): MCMC over placements, starting from IFS's.

Each step picks a task of J \\ (J_g ∪ J_a) uniformly (a sampler, worker or PS; a worker
takes its all-reduce tasks along, constraint (4)) and a machine uniformly among
M_avail, the other machines that can take it within the relaxed capacity of Eq. 28,
(1 + mu) C_m^r. The move is accepted with the probability of Eq. 29, min(1,
exp(beta (cost(Y_z) - cost(Y')))), cost being Eq. 27's over a window of ``iterations``.
An accepted placement within the original capacities whose cost is at most (1 +
gamma) x min_cost (the least cost within capacity so far) is a candidate: its makespan
is taken, and the candidate of least makespan is the result, IFS's placement being the
first candidate. The makespan comes from the caller (``makespan``: the paper simulates
OES over profiled iterations); without one, a candidate's cost stands for it.

Readings:
- The listing's "J \\ (J_a ∪ J_a)" is read as the text's J \\ (J_g ∪ J_a).
- The chain starts from IFS's placement with the machines in the problem's order
  (Alg. 2 orders them randomly; ``ifs(problem, seed)`` can): the start is the same for
  every seed, and the seed drives the chain alone.
- Eq. 28 is checked on the receiving machine only: the one the task leaves only sheds load.
- A task with no machine in M_avail: the step proposes nothing (``Step.dst`` None).
- The filter is the text's "cost(Y') <= (1+gamma) x min_cost" (the listing has "<"),
  and min_cost is lowered before the proposal is listed (listing lines 17-18).
- Costs are seconds of the window, so beta = 0.1 takes a move 10 s worse with
  probability 1/e.
- A placement seen again is not re-costed: its cost is cached. A candidate is listed
  once, with the step it first passed the filter, and judged once (the makespan of a
  caller that replays the same profiled iterations, as it must for common random
  numbers, is the same every time).
- The candidates are judged after the chain, not as each is found (the listing's
  lines 2 and 19 simulate OES there): the chain reads costs alone, never a
  makespan, so the candidates, the trace and the result are the same either way,
  and the caller may judge them all at once (``mapper``: in parallel, on other
  processes or machines).
"""
from __future__ import annotations

import math
import numbers
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from controller.schedulers.placement.dag import Cost, cost
from controller.schedulers.placement.ifs import ifs
from controller.schedulers.placement.problem import (
    EPS,
    RESOURCES,
    Problem,
    capacity_penalty,
    usage,
)

Makespan = Callable[[Mapping[str, str]], float]
Mapper = Callable[[Makespan, list], Iterable[float]]  # as ``map``: the makespans in the placements' order


@dataclass(frozen=True)
class Step:
    """One step of the chain: ``task`` proposed to move from ``src`` to ``dst`` (None:
    no machine could take it), the proposal's Eq. 27 ``cost``, whether the chain moved
    there, whether it passed the (1 + gamma) filter, and then its ``makespan``."""

    step: int
    task: str
    src: str
    dst: str | None
    cost: float | None
    accepted: bool
    candidate: bool
    makespan: float | None


@dataclass(frozen=True)
class Candidate:
    """A placement within capacity that passed the filter; ``step`` -1 is IFS's."""

    placement: dict[str, str]
    cost: float
    makespan: float
    step: int


@dataclass(frozen=True)
class EtpResult:
    """The chosen placement (the candidate of least makespan, earliest on ties), its
    cost and makespan, every candidate in the order found, and the step trace."""

    placement: dict[str, str]
    cost: float
    makespan: float
    candidates: tuple[Candidate, ...]
    trace: tuple[Step, ...]


def etp(problem: Problem, steps: int, seed: int, iterations: int = 20, beta: float = 0.1, gamma: float = 0.1,
        mu: float = 1.0, makespan: Makespan | None = None, path: Makespan | None = None,
        mapper: Mapper = map) -> EtpResult:
    """Alg. 3 for ``steps`` steps, seeded: the same inputs give the same result and trace.

    Defaults are the paper's (beta 0.1, gamma 0.1, mu 100%; 20 iterations, as many as
    it simulates per candidate). ``path`` replaces the critical path in Eq. 27 by the
    caller's seconds for a placement (the paper's Fig. 9 baseline: the search that
    uses the simulated training time as its cost), the capacity penalty kept.
    ``mapper(makespan, placements)`` judges the candidates after the chain, as ``map``
    does (the default), e.g. a process pool's map."""
    _integer("steps", steps, 0)
    _integer("seed", seed, None)
    _integer("iterations", iterations, 1)
    _real("beta", beta, positive=True)
    _real("gamma", gamma, positive=False)
    _real("mu", mu, positive=False)
    for name, given in (("makespan", makespan), ("path", path)):
        if given is not None and not callable(given):
            raise ValueError(f"{name} must be a callable placement -> seconds, got {given!r}")

    costs: dict[tuple[str, ...], Cost] = {}

    def key(placement: Mapping[str, str]) -> tuple[str, ...]:
        return tuple(placement[t] for t in problem.movable)

    def cost_of(placement: Mapping[str, str]) -> Cost:
        k = key(placement)
        if k not in costs:
            costs[k] = (cost(problem, placement, iterations) if path is None
                        else Cost(_seconds("path", path(dict(placement))), capacity_penalty(problem, placement)))
        return costs[k]

    rng = random.Random(seed)
    current = ifs(problem)
    current_cost = cost_of(current).value  # within capacity: the critical path itself
    min_cost = current_cost
    found = {key(current): (dict(current), current_cost, -1)}  # the candidates, in the order found
    used = usage(problem, current)
    limit = {m: {r: (1 + mu) * machine.capacity[r] for r in RESOURCES} for m, machine in problem.machines.items()}
    trace: list[Step] = []
    passed: list[tuple[int, tuple[str, ...]]] = []  # (index in the trace, the candidate's key) per passing step
    for z in range(steps if problem.movable else 0):  # stores and ring tasks alone: nothing moves
        task = rng.choice(problem.movable)
        src, need = current[task], problem.tasks[task].demand
        avail = [m for m in problem.machines
                 if m != src and all(used[m][r] + need[r] <= limit[m][r] + EPS for r in RESOURCES)]
        if not avail:
            trace.append(Step(z, task, src, None, None, False, False, None))
            continue
        dst = rng.choice(avail)
        proposal = dict(current)
        for moved in [task] + problem.rings.get(task, []):
            proposal[moved] = dst
        proposed = cost_of(proposal)
        # Eq. 29, written so that exp never overflows: an improvement is always taken.
        accept = 1.0 if proposed.value <= current_cost else math.exp(-beta * (proposed.value - current_cost))
        if rng.random() > accept:
            trace.append(Step(z, task, src, dst, proposed.value, False, False, None))
            continue
        current, current_cost = proposal, proposed.value
        for r in RESOURCES:
            used[src][r] -= need[r]
            used[dst][r] += need[r]
        if not (proposed.within_capacity and proposed.value <= (1 + gamma) * min_cost):
            trace.append(Step(z, task, src, dst, proposed.value, True, False, None))
            continue
        min_cost = min(min_cost, proposed.value)
        found.setdefault(key(proposal), (proposal, proposed.value, z))
        passed.append((len(trace), key(proposal)))
        trace.append(Step(z, task, src, dst, proposed.value, True, True, None))
    # Judged now (the chain reads no makespan: see the readings), in the order found.
    placements = [dict(placement) for placement, _, _ in found.values()]
    spans = ([c for _, c, _ in found.values()] if makespan is None
             else [_seconds("makespan", span) for span in mapper(makespan, placements)])
    if len(spans) != len(placements):
        raise ValueError(f"mapper returned {len(spans)} makespans for {len(placements)} candidates")
    span_of = dict(zip(found, spans))
    candidates = tuple(Candidate(dict(p), c, span_of[k], z) for k, (p, c, z) in found.items())
    best = min(candidates, key=lambda c: c.makespan)  # the earliest found on ties
    for i, k in passed:
        trace[i] = replace(trace[i], makespan=span_of[k])
    return EtpResult(dict(best.placement), best.cost, best.makespan, candidates, tuple(trace))


def _seconds(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ValueError(f"{name} returned {value!r} for a placement; expected seconds >= 0")
    return float(value)


def _integer(name: str, value, least: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least):
        raise ValueError(f"{name} must be an integer{'' if least is None else f' >= {least}'}, got {value!r}")


def _real(name: str, value, positive: bool) -> None:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0 or (positive and value == 0)):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")
