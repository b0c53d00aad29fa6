"""GNN task placements of a researcher's own, as a spec names them (``workload.placement:
{kind: tests.gnn_placements:ifs_again, profile: ...}``), for tests/test_gnn_place.py:
each takes the job's placement problem and returns {task id: host}."""
from __future__ import annotations

from controller.schedulers.placement.ifs import ifs


def ifs_again(problem):
    """DGTP's IFS, called from outside the repository."""
    return ifs(problem)


def forgets_a_worker(problem):
    return {task: host for task, host in ifs(problem).items() if task != "worker0"}


def crowds_the_first(problem):
    """Every sampler, worker and PS on the first machine: more than it holds."""
    first = next(iter(problem.machines))
    return {**ifs(problem), **{task: first for task in problem.movable}}


def moves_a_store(problem):
    found = ifs(problem)
    others = [name for name in problem.machines if name != found["store0"]]
    return {**found, "store0": others[0]}


def fails(problem):
    raise KeyError("no machine")


def as_a_list(problem):
    return list(ifs(problem).items())
