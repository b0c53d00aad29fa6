"""The execution DAG of §V-B for one placement over a window of K iterations, its
critical path, and the capacity-penalised cost of Eq. 27.

Vertices (Fig. 5): ``("task", j, n)`` for every task j and iteration n < K, weighted
p_j^{m(j)} = exec_s(n) / speed(m(j)); ``("flow", j, j', n)`` for every task pair on
two machines that carries data, weighted d(n) / OES's guaranteed rate (Eq. 26).
Edges: (j, n) -> flow -> (j', n + lag) across machines (Eqs. 8, 9); (j, n) ->
(j', n + lag) on one machine (Eq. 10: same-machine transfers cost nothing, so they
have no flow vertex); (j, n) -> (j, n + 1) (Eq. 11); a pair's flow of iteration n ->
its flow of n + 1 (Eq. 12).

Readings of the window: the paper's DAG spans all N iterations; here it spans K, so a
lag transfer into iteration K or later has no vertex, and iteration 0 has no inputs
from iteration -1 (the initial parameters are on the workers before training). A
pair that carries no data in any iteration (a pure dependency) is an edge even across
machines: it is no flow of Eq. 26's degrees, and a message of no data takes no time.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controller.schedulers.placement.problem import (
    Problem,
    capacity_penalty,
    check_placement,
    check_window,
)


def guaranteed_rates(problem: Problem, placement: Mapping[str, str]) -> dict[tuple[str, str], float]:
    """(src task, dst task) -> bytes/s for every pair that is a flow under ``placement``.

    Eq. 26: min(B_in(m(j')) / Δ̂_in(m(j')), B_out(m(j)) / Δ̂_out(m(j))), with Δ̂ of Eqs.
    21-22 counting F_one_iter, the inter-machine flows of one iteration (one per task
    pair, the PS's parameters included). That is OES's rate (``oes.oes_rates``) with
    every flow of an iteration active (written again here for ETP's hot path; a test
    holds the two equal); by Lemma 1 no flow ever gets less under OES.
    """
    flows = [(p.src, p.dst) for p in problem.data_pairs if placement[p.src] != placement[p.dst]]
    into: dict[str, int] = {}
    out_of: dict[str, int] = {}
    for src, dst in flows:
        into[placement[dst]] = into.get(placement[dst], 0) + 1
        out_of[placement[src]] = out_of.get(placement[src], 0) + 1
    machines = problem.machines
    return {(src, dst): min(machines[placement[dst]].nic_in / into[placement[dst]],
                            machines[placement[src]].nic_out / out_of[placement[src]])
            for src, dst in flows}


@dataclass(frozen=True)
class CriticalPath:
    """The longest weighted path: its length (s) and its vertices, first to last."""

    length: float
    vertices: tuple[tuple, ...]

    def made_of(self, dag: "ExecutionDag", problem: Problem) -> dict[str, float]:
        """Seconds of the path by what they are: a task kind's compute (``worker``,
        ``sampler``, ``allreduce``, ...) or a transfer between two kinds
        (``sampler->worker``), largest first: why a placement's iterations take what
        they take under Eq. 27."""
        weight = dict(zip(dag.vertices, dag.weights))
        share: dict[str, float] = {}
        for vertex in self.vertices:
            kind = (problem.tasks[vertex[1]].kind if vertex[0] == "task"
                    else f"{problem.tasks[vertex[1]].kind}->{problem.tasks[vertex[2]].kind}")
            share[kind] = share.get(kind, 0.0) + weight[vertex]
        return dict(sorted(share.items(), key=lambda item: -item[1]))


@dataclass(frozen=True)
class ExecutionDag:
    """Vertices in topological order, their weights (s), and per vertex the indices of
    its predecessors."""

    vertices: tuple[tuple, ...]
    weights: tuple[float, ...]
    preds: tuple[tuple[int, ...], ...]

    def critical_path(self) -> CriticalPath:
        """Longest path by one pass in topological order, O(|V| + |E|) (§V-B, [50])."""
        finish: list[float] = []
        via: list[int] = []  # per vertex, the predecessor that finishes last (-1: none)
        for weight, before in zip(self.weights, self.preds):
            latest = max(before, key=finish.__getitem__, default=-1)
            via.append(latest)
            finish.append(weight + (finish[latest] if latest >= 0 else 0.0))
        v = max(range(len(finish)), key=finish.__getitem__)
        length = finish[v]
        path = []
        while v >= 0:
            path.append(self.vertices[v])
            v = via[v]
        return CriticalPath(length, tuple(reversed(path)))


def execution_dag(problem: Problem, placement: Mapping[str, str], iterations: int) -> ExecutionDag:
    """The execution DAG of ``placement`` over iterations 0 .. ``iterations`` - 1."""
    check_placement(problem, placement)
    check_window(iterations)
    rates = guaranteed_rates(problem, placement)
    speed = {t: problem.machines[placement[t]].speed for t in problem.tasks}
    vertices: list[tuple] = []
    weights: list[float] = []
    preds: list[tuple[int, ...]] = []
    index: dict[tuple, int] = {}

    def add(vertex: tuple, weight: float, before: list[int]) -> None:
        index[vertex] = len(vertices)
        vertices.append(vertex)
        weights.append(weight)
        preds.append(tuple(before))

    for n in range(iterations):
        for task in problem.order:
            before = [index["task", task, n - 1]] if n else []
            for pair in problem.incoming[task]:
                sent = n - pair.lag
                if sent >= 0:
                    before.append(index["flow", pair.src, task, sent] if (pair.src, task) in rates
                                  else index["task", pair.src, sent])
            exec_s = problem.tasks[task].exec_s
            add(("task", task, n), exec_s[n % len(exec_s)] / speed[task], before)
            # A flow vertex right after its sender: its receiver comes later in this
            # iteration's order (lag 0) or in a later iteration.
            for pair in problem.outgoing[task]:
                if (task, pair.dst) in rates and n + pair.lag < iterations:
                    previous = [index["flow", task, pair.dst, n - 1]] if n else []
                    add(("flow", task, pair.dst, n), pair.bytes_at(n) / rates[task, pair.dst],
                        [index["task", task, n]] + previous)
    return ExecutionDag(tuple(vertices), tuple(weights), tuple(preds))


@dataclass(frozen=True)
class Cost:
    """Eq. 27: ``critical_path_s`` (CP̄_Y) times 1 + ``penalty`` (the relative capacity
    overload summed over machines and resource kinds)."""

    critical_path_s: float
    penalty: float

    @property
    def value(self) -> float:
        if math.isinf(self.penalty):  # a zero-length path must not make it nan
            return math.inf
        return self.critical_path_s * (1.0 + self.penalty)

    @property
    def within_capacity(self) -> bool:
        return self.penalty == 0.0


def path_length(problem: Problem, placement: Mapping[str, str], iterations: int) -> float:
    """The critical path's length of ``execution_dag(problem, placement, iterations)``
    without building the DAG: the same vertices in the same order, each one's finish
    time kept per task (or flow) and iteration. ETP costs thousands of placements;
    this is what it calls."""
    check_placement(problem, placement)
    check_window(iterations)
    rates = guaranteed_rates(problem, placement)
    machines = problem.machines
    task_done: dict[str, list[float]] = {t: [] for t in problem.tasks}
    flow_done: dict[tuple[str, str], list[float]] = {key: [] for key in rates}
    # Per task in order, resolved once per placement: each input's finish times (its
    # flow's, or on one machine its sender's) with its lag, and the flows it sends.
    plan = []
    for task in problem.order:
        inputs = tuple((pair.lag, flow_done[pair.src, task] if (pair.src, task) in rates else task_done[pair.src])
                       for pair in problem.incoming[task])
        sends = tuple((pair.lag, flow_done[task, pair.dst], pair.totals, len(pair.totals), rates[task, pair.dst])
                      for pair in problem.outgoing[task] if (task, pair.dst) in rates)
        exec_s = problem.tasks[task].exec_s
        plan.append((task_done[task], inputs, sends, exec_s, len(exec_s), machines[placement[task]].speed))
    longest = 0.0
    for n in range(iterations):
        for done_before, inputs, sends, exec_s, period, speed in plan:
            start = done_before[n - 1] if n else 0.0
            for lag, ready in inputs:
                if n >= lag and ready[n - lag] > start:
                    start = ready[n - lag]
            done = start + exec_s[n % period] / speed
            done_before.append(done)
            if done > longest:
                longest = done
            for lag, flows, totals, bytes_period, rate in sends:
                if n + lag < iterations:
                    ended = flows[n - 1] if n and flows[n - 1] > done else done
                    ended += totals[n % bytes_period] / rate
                    flows.append(ended)
                    if ended > longest:
                        longest = ended
    return longest


def cost(problem: Problem, placement: Mapping[str, str], iterations: int) -> Cost:
    """Eq. 27 for ``placement`` over a window of ``iterations``."""
    return Cost(path_length(problem, placement, iterations), capacity_penalty(problem, placement))
