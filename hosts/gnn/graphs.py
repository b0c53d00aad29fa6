"""Synthetic graphs shaped like the OES paper's datasets (Table II), and METIS partitions.

No dataset can be downloaded here, so a graph is a stochastic block model: every
node has a class, and each undirected edge joins a node to another of its class
with probability ``HOMOPHILY``, otherwise to a uniformly random other node (so the edge
homophily is about HOMOPHILY + (1 - HOMOPHILY) / classes). Features are the class's
random centroid plus unit Gaussian noise; centroids have norm about CENTROID_NORM
whatever the feature length, so features alone classify poorly (even the true
centroids get ~0.4 of 47 classes right) while the mean over a node's neighbours,
80% of its class, classifies almost perfectly: GNN training has something to learn.

Invariants of ``synthesize``: the graph is symmetric (each undirected edge is stored
in both directions, as DGL stores ogbn-products and Reddit) and has no self-loops;
ndata holds ``feat`` (float32), ``label`` (int64) and the disjoint boolean
``train_mask`` / ``val_mask`` / ``test_mask``; everything follows from the seed.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import torch

from hosts.gnn.dglenv import import_dgl

HOMOPHILY = 0.8
CENTROID_NORM = 2.0


@dataclass(frozen=True)
class DatasetShape:
    """A real dataset's shape (Table II) and its official train/val/test split shares."""

    name: str
    nodes: int
    edges: int  # directed edges as Table II counts them
    features: int
    classes: int
    fanouts: tuple[int, ...]  # neighbours sampled per hop, first hop first
    split: tuple[float, float, float]  # train, val, test shares of the nodes

    @property
    def avg_degree(self) -> float:
        """Average in-degree (= out-degree) of the real graph."""
        return self.edges / self.nodes


OGBN_PRODUCTS = DatasetShape("ogbn-products", 2_449_029, 61_859_140, 100, 47, (5, 10, 15), (0.08, 0.02, 0.90))
REDDIT = DatasetShape("reddit", 232_965, 114_615_892, 602, 41, (5, 10, 25), (0.66, 0.10, 0.24))
SHAPES = {s.name: s for s in (OGBN_PRODUCTS, REDDIT)}


def synthesize(shape: DatasetShape, nodes: int, seed: int, avg_degree: float | None = None):
    """A DGLGraph of ``nodes`` nodes shaped like ``shape``.

    ``avg_degree`` (default: the real graph's) sets the edge count: exactly
    2 x round(nodes x avg_degree / 2) directed edges. Reddit's ~490 is costly, so
    callers sizing for two cores may lower it.
    """
    if nodes < 2 * shape.classes:
        raise ValueError(f"{shape.name} needs at least {2 * shape.classes} nodes, two per class")
    dgl = import_dgl()
    rng = np.random.default_rng(seed)
    degree = shape.avg_degree if avg_degree is None else avg_degree
    classes, features = shape.classes, shape.features

    labels = rng.permutation(np.arange(nodes, dtype=np.int64) % classes)
    by_class = np.argsort(labels, kind="stable")  # class 0's nodes, then class 1's, ...
    class_start = np.searchsorted(labels[by_class], np.arange(classes))
    class_size = np.bincount(labels, minlength=classes)
    rank_in_class = np.empty(nodes, dtype=np.int64)
    rank_in_class[by_class] = np.arange(nodes) - class_start[labels[by_class]]

    # Each end drawn from the n-1 (or class size - 1) candidates other than src: no self-loops.
    pairs = round(nodes * degree / 2)
    src = rng.integers(0, nodes, size=pairs, dtype=np.int64)
    src_class = labels[src]
    offset = (rng.random(pairs) * (class_size[src_class] - 1)).astype(np.int64)
    offset += offset >= rank_in_class[src]
    peer = by_class[class_start[src_class] + offset]
    anyone = rng.integers(0, nodes - 1, size=pairs, dtype=np.int64)
    anyone += anyone >= src
    dst = np.where(rng.random(pairs) < HOMOPHILY, peer, anyone)

    centroids = rng.standard_normal((classes, features), dtype=np.float32)
    centroids *= CENTROID_NORM / np.sqrt(features)
    feat = rng.standard_normal((nodes, features), dtype=np.float32)
    feat += centroids[labels]

    graph = dgl.graph((torch.from_numpy(np.concatenate([src, dst])), torch.from_numpy(np.concatenate([dst, src]))),
                      num_nodes=nodes)
    graph.ndata["feat"] = torch.from_numpy(feat)
    graph.ndata["label"] = torch.from_numpy(labels)
    order = rng.permutation(nodes)
    n_train, n_val = round(nodes * shape.split[0]), round(nodes * shape.split[1])
    for name, ids in (("train_mask", order[:n_train]), ("val_mask", order[n_train:n_train + n_val]),
                      ("test_mask", order[n_train + n_val:])):
        mask = torch.zeros(nodes, dtype=torch.bool)
        mask[torch.from_numpy(ids)] = True
        graph.ndata[name] = mask
    return graph


def edge_cut(graph, part_of: np.ndarray) -> int:
    """Directed edges whose ends lie in different parts (``part_of``: node -> part)."""
    src, dst = (t.numpy() for t in graph.edges())
    return int(np.count_nonzero(part_of[src] != part_of[dst]))


@dataclass(frozen=True)
class Partitioning:
    """What ``partition`` wrote: a DistDGL config and the node split it holds.

    ``node_ids[p]`` are the original ids of partition p's own (inner) nodes, in the
    order the partition stores their features; the partitions are disjoint and
    cover the graph. ``edge_cut`` counts directed edges between partitions, so an
    undirected edge that is cut counts twice.
    """

    config_path: str
    node_ids: list[np.ndarray]
    part_of: np.ndarray  # original node id -> partition
    edge_cut: int
    num_edges: int

    @property
    def edge_cut_share(self) -> float:
        return self.edge_cut / self.num_edges


def partition(graph, n_parts: int, out_dir: str, graph_name: str = "graph") -> Partitioning:
    """METIS-partition ``graph`` into ``n_parts`` DistDGL partitions under ``out_dir``.

    The node split is read back from the written config (its node ranges are in
    DGL's reshuffled ids) and the returned old-id mapping; the edge cut is counted
    from that split, because DGL's closing "0 edge cuts" log line is wrong.
    """
    dgl = import_dgl()
    new_to_orig, _ = dgl.distributed.partition_graph(graph, graph_name, n_parts, out_dir, part_method="metis",
                                                     return_mapping=True)
    config_path = os.path.join(out_dir, f"{graph_name}.json")
    with open(config_path, encoding="utf-8") as f:
        ranges = json.load(f)["node_map"]["_N"]  # [start, end) per partition, reshuffled ids
    new_to_orig = new_to_orig.numpy()
    node_ids = [new_to_orig[start:end] for start, end in ranges]
    part_of = np.empty(graph.num_nodes(), dtype=np.int64)
    for p, ids in enumerate(node_ids):
        part_of[ids] = p
    return Partitioning(config_path, node_ids, part_of, edge_cut(graph, part_of), graph.num_edges())
