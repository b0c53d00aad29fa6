"""Synthetic graphs with the sizes of the papers' datasets (no download possible here).

A graph is a stochastic block model with class-correlated noisy features: nodes of
one class form a contiguous block, 80% of edges stay inside the source's block, so
neighbour aggregation carries signal. There are no self-loops. Everything follows
from the seed.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
import torch

# name: (nodes, edges, features, classes). CoGNN Table IV; GNNSched Table 4 adds
# reddit (its "amazon" has amazon0601's counts), as that table states it: 50 classes
# and one edge fewer than DGL's Reddit (41 classes), which hosts/gnn/graphs.py uses.
DATASETS: dict[str, tuple[int, int, int, int]] = {
    "cora": (2_708, 10_858, 1_433, 7),
    "citeseer": (3_327, 9_464, 3_703, 6),
    "pubmed": (19_717, 88_676, 500, 3),
    "PROTEINS": (43_471, 162_088, 29, 2),
    "artist": (50_515, 1_638_396, 100, 12),
    "soc-BlogCatalog": (88_784, 2_093_195, 128, 39),
    "DD": (334_925, 1_686_092, 98, 2),
    "amazon0601": (410_236, 4_878_875, 96, 22),
    "TWITTER": (580_768, 1_435_116, 1_323, 2),
    "Yeast": (1_714_644, 3_636_546, 74, 2),
    "OVCAR-8H": (1_890_931, 3_946_402, 66, 2),
    "reddit": (232_965, 114_615_891, 602, 50),
}

HOMOPHILY = 0.8
FEATURE_NOISE = 2.0


@dataclass(frozen=True)
class GraphShape:
    """Sizes of one task's input graph, and how it relates to the named dataset."""

    dataset: str
    nodes: int
    edges: int
    features: int
    classes: int
    scale: float  # nodes/edges relative to the dataset (1.0 = full size)
    variant: int  # 0: the graph itself; k >= 1: the k-th request subgraph

    @property
    def raw_bytes(self) -> int:
        """Bytes of features (float32), edge_index (int64) and labels (int64)."""
        return self.nodes * self.features * 4 + self.edges * 16 + self.nodes * 8


@dataclass
class Graph:
    shape: GraphShape
    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor


def dataset_shape(name: str, scale: float = 1.0, max_bytes: int | None = None) -> GraphShape:
    """The shape of dataset ``name`` at ``scale``, shrunk further (and recorded) when
    its raw tensors would exceed ``max_bytes``; a ValueError when even its smallest
    graph (two nodes a class) would."""
    nodes, edges, features, classes = DATASETS[name]
    shape = _scaled(name, nodes, edges, features, classes, scale, variant=0)
    factor = scale
    while max_bytes is not None and shape.raw_bytes > max_bytes:
        factor *= min(0.999, max_bytes / shape.raw_bytes)
        smaller = _scaled(name, nodes, edges, features, classes, factor, 0)
        if smaller.raw_bytes >= shape.raw_bytes:  # at its floor: shrinking further changes nothing
            raise ValueError(f"{name}'s smallest graph takes {shape.raw_bytes} bytes, more than {max_bytes}")
        shape = smaller
    return shape


def subgraph_shape(base: GraphShape, variant: int, fraction: float) -> GraphShape:
    """A request's subgraph: ``fraction`` of the base graph's nodes at its average degree."""
    nodes = max(2 * base.classes, round(base.nodes * fraction))
    edges = max(1, round(base.edges * nodes / base.nodes))
    return GraphShape(base.dataset, nodes, edges, base.features, base.classes, base.scale * nodes / base.nodes, variant)


def _scaled(name, nodes, edges, features, classes, scale, variant) -> GraphShape:
    if scale >= 1.0:
        return GraphShape(name, nodes, edges, features, classes, 1.0, variant)
    n = max(2 * classes, math.ceil(nodes * scale))
    e = max(1, math.ceil(edges * n / nodes))
    return GraphShape(name, n, e, features, classes, n / nodes, variant)


def synthesize(shape: GraphShape, seed: int) -> Graph:
    """Build the graph of ``shape`` deterministically from ``seed`` (and its name)."""
    key = f"{shape.dataset}/{shape.nodes}/{shape.edges}/{shape.variant}".encode()
    rng = np.random.default_rng([seed, zlib.crc32(key)])
    n, e, f, c = shape.nodes, shape.edges, shape.features, shape.classes
    labels = (np.arange(n, dtype=np.int64) * c) // n
    block_start = (np.arange(c, dtype=np.int64) * n + c - 1) // c
    block_size = np.diff(np.append(block_start, n))
    src = rng.integers(0, n, size=e, dtype=np.int64)
    inside = rng.random(e) < HOMOPHILY
    src_class = labels[src]
    offset = (rng.random(e) * block_size[src_class]).astype(np.int64)
    dst = np.where(inside, block_start[src_class] + offset, rng.integers(0, n, size=e, dtype=np.int64))
    # No self-loops: GCN and GAT add exactly one per node, so their edge counts are known.
    dst = np.where(dst == src, (dst + 1) % n, dst)
    centroids = rng.standard_normal((c, f), dtype=np.float32)
    features = rng.standard_normal((n, f), dtype=np.float32)
    features *= FEATURE_NOISE
    features += centroids[labels]
    return Graph(
        shape=shape,
        x=torch.from_numpy(features),
        edge_index=torch.from_numpy(np.stack([src, dst])),
        y=torch.from_numpy(labels),
    )
