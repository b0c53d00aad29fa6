"""Prepare a GNN training job on disk: the graph, its METIS partitions, the task config.

``prepare`` synthesizes the spec's graph (``hosts.gnn.graphs``), partitions it with
DGL's METIS partitioner into one partition per machine (store m holds partition m),
writes the training and validation node ids in DGL's reshuffled id space, and the
``config.json`` that every task process reads (``hosts.gnn.task``).

Port plan: the task at position k of the task list listens on ``TASK_PORT_BASE + k``
(below the ephemeral range, so no outgoing connection takes it).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TASK_PORT_BASE = 21000
TASK_TIMEOUT_S = 600.0


def prepare(workload: dict, tasks: dict[str, str], addresses: dict[str, str], machines: list[str], seed: int,
            out_dir: Path, timeout_s: float = TASK_TIMEOUT_S) -> dict:
    """Write the job under ``out_dir`` and return its config.

    ``tasks``: task id -> host (every task, stores included); ``addresses``: host -> IP;
    ``machines``: the hosts in store order (store m on machines[m])."""
    from hosts.gnn import graphs  # pylint: disable=import-outside-toplevel  # DGL: only when a job is built

    out_dir.mkdir(parents=True, exist_ok=True)
    shape = graphs.SHAPES[workload["graph"]["shape"]]
    graph = graphs.synthesize(shape, workload["graph"]["nodes"], seed, workload["graph"].get("avg_degree"))
    parts = graphs.partition(graph, len(machines), str(out_dir / "partitions"))
    # DGL renumbers nodes partition by partition; the tasks work in those ids.
    new_of_orig = np.empty(graph.num_nodes(), dtype=np.int64)
    new_of_orig[np.concatenate(parts.node_ids)] = np.arange(graph.num_nodes())
    rng = np.random.default_rng(seed)
    train = new_of_orig[graph.ndata["train_mask"].numpy().nonzero()[0]]
    val = new_of_orig[rng.permutation(graph.ndata["val_mask"].numpy().nonzero()[0])]
    ids_path = out_dir / "ids.npz"
    np.savez(ids_path, train=train, val=val)
    ranges, start = [], 0
    for ids in parts.node_ids:
        ranges.append([start, start + len(ids)])
        start += len(ids)
    for m, host in enumerate(machines):
        if tasks[f"store{m}"] != host:
            raise ValueError(f"store{m} must be on {host}, the machine of partition {m}")
    config = {
        "partition_config": parts.config_path, "ids_path": str(ids_path), "node_ranges": ranges,
        "num_nodes": graph.num_nodes(), "features": shape.features, "classes": shape.classes,
        "edge_cut_share": round(parts.edge_cut_share, 4),
        **{k: workload[k] for k in ("fanouts", "batch_size", "hidden", "lr", "iterations", "eval_every",
                                    "eval_nodes", "sync", "workers", "samplers_per_worker", "ps", "profile")},
        "seed": seed, "timeout_s": timeout_s,
        "tasks": {task: {"host": host, "ip": addresses[host], "port": TASK_PORT_BASE + k}
                  for k, (task, host) in enumerate(tasks.items())},
    }
    (out_dir / "config.json").write_text(json.dumps(config, indent=1))
    return config
