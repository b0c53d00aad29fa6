"""OES (Alg. 1, §IV) executing a placement over a window of K iterations: the makespan
that Theorem 3 bounds by the execution DAG's critical path (``dag.py``): the tests'
oracle for the placement package (which never runs it).

Readings:
- The vertices and edges are the execution DAG's: the same window (iteration 0 has no
  inputs from iteration -1; a flow into iteration K or later is not sent and takes no
  bandwidth), and a pair on one machine or one that never carries data is a plain
  edge, not a flow.
- A task starts once its previous iteration is done and its inputs are in (Alg. 1
  line 7) and runs exec_s / speed; tasks on one machine do not contend (capacities
  are the placement's concern, as in the DAG).
- A flow is released when its sender is done and its pair's previous flow has
  finished (F_pend, Eq. 12). At every event (a task ends, a flow is released or
  finishes) the active flows get ``oes.oes_rates`` over them and drain at those rates
  until the next event: the continuous limit of Alg. 1's time slots. A flow of 0
  bytes (a data-carrying pair's quiet iteration) finishes when released.
- The makespan is when the last task or flow of the window finishes.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping

from controller.schedulers import oes
from controller.schedulers.placement.problem import (
    Problem,
    check_placement,
    check_window,
)


def _predecessors(problem: Problem, placement: Mapping[str, str], iterations: int) -> dict[tuple, list[tuple]]:
    """The execution DAG's vertices, ``("task", j, n)`` and ``("flow", j, j', n)``,
    each with the vertices it waits for."""
    flows = {key for key, pair in problem.pairs.items()
             if pair.carries_data and placement[pair.src] != placement[pair.dst]}
    preds: dict[tuple, list[tuple]] = {}
    for n in range(iterations):
        for task in problem.tasks:
            before = [("task", task, n - 1)] if n else []
            for pair in problem.incoming[task]:
                sent = n - pair.lag
                if sent >= 0:
                    before.append(("flow", pair.src, task, sent) if (pair.src, task) in flows
                                  else ("task", pair.src, sent))
            preds["task", task, n] = before
        for src, dst in flows:
            if n + problem.pairs[src, dst].lag < iterations:
                preds["flow", src, dst, n] = [("task", src, n)] + ([("flow", src, dst, n - 1)] if n else [])
    return preds


def oes_makespan(problem: Problem, placement: Mapping[str, str], iterations: int) -> float:
    """Seconds until OES has run iterations 0 .. ``iterations`` - 1 of ``placement``."""
    check_placement(problem, placement)
    check_window(iterations)
    preds = _predecessors(problem, placement, iterations)
    waiting = {vertex: len(before) for vertex, before in preds.items()}
    successors: dict[tuple, list[tuple]] = defaultdict(list)
    for vertex, before in preds.items():
        for earlier in before:
            successors[earlier].append(vertex)
    nics = [oes.Machine(m.name, m.nic_in, m.nic_out) for m in problem.machines.values()]
    now = 0.0
    running: list[tuple[float, tuple]] = []  # heap of (end, task vertex)
    left: dict[tuple, float] = {}  # active flow vertex -> bytes still to send

    def release(vertex: tuple) -> None:
        if vertex[0] == "task":
            _, task, n = vertex
            exec_s = problem.tasks[task].exec_s
            heapq.heappush(running, (now + exec_s[n % len(exec_s)] / problem.machines[placement[task]].speed, vertex))
        else:
            _, src, dst, n = vertex
            left[vertex] = problem.pairs[src, dst].bytes_at(n)

    def finish(vertex: tuple) -> None:
        for after in successors[vertex]:
            waiting[after] -= 1
            if not waiting[after]:
                release(after)

    for vertex, count in waiting.items():
        if not count:
            release(vertex)
    while running or left:
        active = list(left)
        by_id = oes.oes_rates(nics, [oes.Flow(str(k), placement[v[1]], placement[v[2]])
                                     for k, v in enumerate(active)])
        rates = [by_id[str(k)] for k in range(len(active))]
        done_at = [now + left[v] / rate for v, rate in zip(active, rates)]
        then, now = now, min(done_at + ([running[0][0]] if running else []))
        finished = []
        for vertex, rate, end in zip(active, rates, done_at):
            if end <= now:
                del left[vertex]
                finished.append(vertex)
            else:  # max: rounding must not leave a negative remainder
                left[vertex] = max(0.0, left[vertex] - rate * (now - then))
        while running and running[0][0] <= now:
            finished.append(heapq.heappop(running)[1])
        for vertex in finished:  # after draining, so that flows released now are not drained
            finish(vertex)
    return now
