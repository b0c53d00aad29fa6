"""GNN training on emulated hosts with DGL: synthetic datasets, METIS partitions.

DGL is imported only through ``hosts.gnn.dglenv.import_dgl`` (it works around the
GraphBolt import failure of dgl 2.1.0 with torch 2.13); it is installed by
``scripts/install-gnn.sh``, so importing this package itself needs no DGL.
"""

# Shared by the task programs (``hosts.gnn.task``) and the simulator of the job
# (``experiments.gnn.simulated``), which must not import the tasks' module.
PREFETCH = 2  # mini-batches a sampler may prepare ahead of its worker (the worker returns a credit per one used)


def is_eval(iteration: int, eval_every: int, iterations: int) -> bool:
    """Whether worker 0 evaluates at ``iteration``: every ``eval_every``-th and the last."""
    return iteration % eval_every == eval_every - 1 or iteration == iterations - 1


def task_kind(task: str) -> str:
    """``sampler3`` -> ``sampler``: a task id without its index."""
    return task.rstrip("0123456789")


def task_index(task: str) -> int:
    """``sampler3`` -> 3: a task id's index among the tasks of its kind."""
    return int(task[len(task_kind(task)):])
