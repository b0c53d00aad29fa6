"""The four GNNs of the papers, built from PyTorch Geometric's conv layers.

GCN normalises (with self-loops) once per forward pass and GAT adds self-loops once;
SAGE and GAT then subsample the edges afresh in every layer (the papers' sampling
ratios 0.5 and 0.6): ``ceil(ratio * E)`` edges drawn uniformly with replacement, so
the sampled size is exact and needs no edge-sized scratch (no pyg-lib here).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import add_self_loops

MODELS = ("GCN", "SAGE", "GAT", "GIN")


@dataclass(frozen=True)
class ModelConfig:
    model: str
    in_dim: int
    hidden: int
    out_dim: int
    layers: int
    sampling_ratio: float = 1.0

    @property
    def dims(self) -> list[int]:
        return [self.in_dim] + [self.hidden] * (self.layers - 1) + [self.out_dim]


def sampled_edges(edges: int, ratio: float) -> int:
    return edges if ratio >= 1.0 else max(1, math.ceil(ratio * edges))


class GNN(torch.nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        dims = config.dims
        self.convs = torch.nn.ModuleList(_conv(config.model, a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        model, nodes = self.config.model, x.size(0)
        edge_weight = None
        if model == "GCN":
            edge_index, edge_weight = gcn_norm(edge_index, None, nodes, add_self_loops=True, dtype=x.dtype)
        elif model == "GAT":
            edge_index, _ = add_self_loops(edge_index, num_nodes=nodes)
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            layer_edges = self._sample(edge_index)
            x = conv(x, layer_edges, edge_weight) if model == "GCN" else conv(x, layer_edges)
            if i < last:
                x = F.relu(x)
        return x

    def _sample(self, edge_index: torch.Tensor) -> torch.Tensor:
        ratio = self.config.sampling_ratio
        if ratio >= 1.0:
            return edge_index
        edges = edge_index.size(1)
        keep = torch.randint(0, edges, (sampled_edges(edges, ratio),), device=edge_index.device)
        return edge_index[:, keep]


def _conv(model: str, fin: int, fout: int) -> torch.nn.Module:
    if model == "GCN":
        return GCNConv(fin, fout, normalize=False, add_self_loops=False)
    if model == "SAGE":
        return SAGEConv(fin, fout)
    if model == "GAT":
        return GATConv(fin, fout, heads=1, add_self_loops=False)
    if model == "GIN":
        mlp = torch.nn.Sequential(torch.nn.Linear(fin, fout), torch.nn.ReLU(), torch.nn.Linear(fout, fout))
        return GINConv(mlp)
    raise ValueError(f"unknown model {model!r}")
