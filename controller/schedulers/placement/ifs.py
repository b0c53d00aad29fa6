"""IFS (Alg. 2 of the DGTP paper, §V-A): a feasible initial placement from a dynamic
programme over per-machine task counts.

The machines are taken in an order m_1 .. m_M (the paper orders them randomly:
``seed`` shuffles them, None keeps the problem's order). Ω(i) holds every tuple
(q_s, q_w, q_ps) of sampler, worker and PS counts that fits on m_1 .. m_i, each with the
per-machine counts that first reached it (the paper's A). At machine i, the first
tuple of Ω(i-1) whose remainder fits m_i completes the placement. A machine's
feasibility depends only on its counts (tasks of one kind demand the same, which
``Problem`` enforces), so Ω(i) holds every tuple reachable on the first i machines:
IFS finds a placement whenever one exists (Theorem 2), on the shortest prefix of the
machine order that can hold the job (the DP's own objective).

Reading of "Generate the initial placement solution Y_0 based on A_solution", which
the paper leaves open: with the counts fixed, workers fill their machines' worker
slots in task order and machine order; each sampler then takes a sampler slot on its
worker's machine while one is left, and the remaining samplers fill the remaining
slots in machine order (DistDGL's co-location, as far as the counts allow); PSs fill
their slots in machine order. Stores stay home; all-reduce tasks go with their worker.
"""
from __future__ import annotations

import random

from controller.schedulers.placement.problem import EPS, MOVABLE, RESOURCES, Problem

Counts = tuple[int, ...]  # per kind of MOVABLE, how many


def ifs(problem: Problem, seed: int | None = None) -> dict[str, str]:
    """Task id -> machine for every task, within every capacity; ValueError if none fits."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")
    order = list(problem.machines)
    if seed is not None:
        random.Random(seed).shuffle(order)
    left = _left_after_stores(problem)
    demand = {}  # per kind, what one task of it demands (Problem: all of a kind the same)
    for kind in MOVABLE:
        ids = problem.of_kind(kind)
        demand[kind] = problem.tasks[ids[0]].demand if ids else dict.fromkeys(RESOURCES, 0.0)
    need = tuple(tuple(demand[kind][r] for kind in MOVABLE) for r in RESOURCES)
    room = {m: tuple(left[m][r] for r in RESOURCES) for m in order}
    total = tuple(len(problem.of_kind(kind)) for kind in MOVABLE)
    for k, kind in enumerate(MOVABLE):
        one = tuple(int(j == k) for j in range(len(MOVABLE)))
        if total[k] and not any(_fits(room[m], need, one) for m in order):
            raise ValueError(f"{kind}: no machine has room for one "
                             f"({', '.join(f'{r} {demand[kind][r]:g}' for r in RESOURCES)}) beside its store")
    # Count tuples as integers, kind k a digit of radix 2 * total[k] + 1: two tuples
    # within total add without carry, key(a) + key(b) = key(a + b), so the DP adds ints
    # and looks the sums up in ``within`` (1 where every digit is at most its total).
    strides, within = [], b"\x01"
    for t in total:
        strides.append(len(within))
        within = within * (t + 1) + bytes(len(within) * t)
    full = sum(t * s for t, s in zip(total, strides))
    omega: dict[int, tuple[Counts, ...]] = {0: ()}
    for i, machine in enumerate(order):
        here = {sum(q * s for q, s in zip(counts, strides)): counts
                for counts in _fitting(room[machine], need, total)}
        for placed, per_machine in omega.items():
            rest = here.get(full - placed)  # here holds every tuple up to total that fits
            if rest is not None:
                counts = per_machine + (rest,) + ((0,) * len(MOVABLE),) * (len(order) - i - 1)
                return _assign(problem, dict(zip(order, counts)))
        unreached = bytearray(within)
        grown: dict[int, tuple[Counts, ...]] = {}
        for placed, per_machine in omega.items():
            for q, counts in here.items():
                reached = placed + q
                if unreached[reached]:
                    unreached[reached] = 0
                    grown[reached] = per_machine + (counts,)
        omega = grown
    raise ValueError(f"no placement fits {', '.join(f'{t} {kind}' for t, kind in zip(total, MOVABLE))} "
                     f"in the capacity the machines have left beside their stores")


def _left_after_stores(problem: Problem) -> dict[str, dict[str, float]]:
    """Per machine, its capacity less its store's demand (the paper's C'_m^r)."""
    left = {m: dict(machine.capacity) for m, machine in problem.machines.items()}
    for store in problem.of_kind("store"):
        task = problem.tasks[store]
        for r in RESOURCES:
            left[task.home][r] -= task.demand[r]
            if left[task.home][r] < -EPS:
                raise ValueError(f"machine {task.home}: its store {store} demands {r} {task.demand[r]:g}, "
                                 f"more than its capacity {problem.machines[task.home].capacity[r]:g}")
    return left


def _fits(room: tuple[float, ...], need: tuple[tuple[float, ...], ...], counts: Counts) -> bool:
    """Whether ``counts`` fit ``room`` (per resource); ``need[r][k]``: one task of kind k's demand of r."""
    return all(sum(q * d for q, d in zip(counts, per_kind)) <= free + EPS for per_kind, free in zip(need, room))


def _fitting(room: tuple[float, ...], need: tuple[tuple[float, ...], ...], total: Counts,
             prefix: Counts = ()) -> list[Counts]:
    """Every count tuple up to ``total`` that starts with ``prefix`` and fits ``room``, in
    itertools.product order. Demands are >= 0, so what fits is downward closed: a count
    that does not fit (with zeros after it) ends its range."""
    if len(prefix) == len(total):
        return [prefix]
    zeros = (0,) * (len(total) - len(prefix) - 1)
    out = []
    for q in range(total[len(prefix)] + 1):
        if not _fits(room, need, prefix + (q,) + zeros):
            break
        out += _fitting(room, need, total, prefix + (q,))
    return out


def _assign(problem: Problem, counts: dict[str, Counts]) -> dict[str, str]:
    """Which task goes where, given per machine how many of each kind (module docstring)."""
    slots = {kind: [m for m, q in counts.items() for _ in range(q[k])] for k, kind in enumerate(MOVABLE)}
    placement = {t: task.home for t, task in problem.tasks.items() if task.kind == "store"}
    for kind in ("worker", "ps"):
        placement.update(zip(problem.of_kind(kind), slots[kind]))
    unplaced = []
    for sampler in problem.of_kind("sampler"):
        fed = [p.dst for p in problem.outgoing[sampler] if problem.tasks[p.dst].kind == "worker"]
        home = placement[fed[0]] if fed else None
        if home in slots["sampler"]:
            slots["sampler"].remove(home)
            placement[sampler] = home
        else:
            unplaced.append(sampler)
    placement.update(zip(unplaced, slots["sampler"]))
    for worker, ring in problem.rings.items():
        placement.update(dict.fromkeys(ring, placement[worker]))
    return {t: placement[t] for t in problem.tasks}
