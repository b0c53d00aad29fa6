"""Prepare a GNN training job on disk: the graph, its METIS partitions, the task config.

``prepare`` takes the spec's graph (``hosts.gnn.graphs``) partitioned with DGL's
METIS partitioner into one partition per machine (store m holds partition m), with
the training and validation node ids in DGL's reshuffled id space, from the cache
(``partitioned``), copies it into the job directory, and writes the
``config.json`` that every task process reads (``hosts.gnn.task``).

Port plan: the task at position k of the task list listens on ``TASK_PORT_BASE + k``
(below the ephemeral range, so no outgoing connection takes it).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from experiments import store

TASK_PORT_BASE = 21000
TASK_TIMEOUT_S = 600.0
CACHE_VERSION = 1  # bump when what a cached graph directory holds changes


def prepare(workload: dict, tasks: dict[str, str], addresses: dict[str, str], machines: list[str], seed: int,
            out_dir: Path, timeout_s: float = TASK_TIMEOUT_S, cache_root: Path | None = None) -> dict:
    """Write the job under ``out_dir`` and return its config.

    ``tasks``: task id -> host (every task, stores included); ``addresses``: host -> IP;
    ``machines``: the hosts in store order (store m on machines[m]). The graph and its
    partitions come from ``cache_root`` when it holds them (see ``partitioned``)."""
    for m, host in enumerate(machines):
        if tasks[f"store{m}"] != host:
            raise ValueError(f"store{m} must be on {host}, the machine of partition {m}")
    out_dir.mkdir(parents=True, exist_ok=True)
    source = partitioned(workload["graph"], len(machines), seed, cache_root or store.results_root() / "cache")
    shutil.copytree(source, out_dir / "graph", dirs_exist_ok=True)  # the run keeps the data it trained on
    meta = json.loads((out_dir / "graph" / "meta.json").read_text())
    config = {
        "partition_config": str(out_dir / "graph" / "partitions" / "graph.json"),
        "ids_path": str(out_dir / "graph" / "ids.npz"), **meta,
        **{k: workload[k] for k in ("fanouts", "batch_size", "hidden", "lr", "iterations", "eval_every",
                                    "eval_nodes", "sync", "workers", "samplers_per_worker", "ps", "profile")},
        "seed": seed, "timeout_s": timeout_s,
        "tasks": {task: {"host": host, "ip": addresses[host], "port": TASK_PORT_BASE + k,
                         "compute_factor": workload.get("compute_factor", {}).get(host, 1.0)}
                  for k, (task, host) in enumerate(tasks.items())},
    }
    (out_dir / "config.json").write_text(json.dumps(config, indent=1))
    return config


def partitioned(graph_spec: dict, parts: int, seed: int, cache_root: Path) -> Path:
    """The directory holding the spec's graph, METIS-split into ``parts``: DGL's
    partitions, the training and validation node ids (DGL's reshuffled ids) and
    ``meta.json`` (node ranges per partition, sizes, edge cut).

    Why a cache: DGL's METIS partitioning is not deterministic (the same graph gave
    edge cuts of 47.6k-55.5k in repeated runs, seeds set), and the partition decides
    which training nodes each sampler draws. Runs that compare schedulers or
    placements on one graph must train on the same data, so the first run writes
    the partition and every later one reuses it."""
    key = (f"{graph_spec['shape']}-n{graph_spec['nodes']}-d{graph_spec.get('avg_degree')}-s{seed}-p{parts}"
           f"-v{CACHE_VERSION}")
    final = cache_root / "gnn-graphs" / key
    if (final / "meta.json").exists():
        return final
    from hosts.gnn import graphs  # pylint: disable=import-outside-toplevel  # DGL: only when a graph is built

    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    shape = graphs.SHAPES[graph_spec["shape"]]
    graph = graphs.synthesize(shape, graph_spec["nodes"], seed, graph_spec.get("avg_degree"))
    split = graphs.partition(graph, parts, str(work / "partitions"))
    # DGL renumbers nodes partition by partition; the tasks work in those ids.
    new_of_orig = np.empty(graph.num_nodes(), dtype=np.int64)
    new_of_orig[np.concatenate(split.node_ids)] = np.arange(graph.num_nodes())
    rng = np.random.default_rng(seed)
    train = new_of_orig[graph.ndata["train_mask"].numpy().nonzero()[0]]
    val = new_of_orig[rng.permutation(graph.ndata["val_mask"].numpy().nonzero()[0])]
    np.savez(work / "ids.npz", train=train, val=val)
    ranges, start = [], 0
    for ids in split.node_ids:
        ranges.append([start, start + len(ids)])
        start += len(ids)
    meta = {"node_ranges": ranges, "num_nodes": graph.num_nodes(), "features": shape.features,
            "classes": shape.classes, "edge_cut_share": round(split.edge_cut_share, 4)}
    (work / "meta.json").write_text(json.dumps(meta))
    try:
        work.rename(final)  # atomic: a concurrent or interrupted run never sees half a graph
    except OSError:
        shutil.rmtree(work)  # another run got there first
    return final
