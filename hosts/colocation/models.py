"""The four GNNs of the papers, built from PyTorch Geometric's conv layers, in two variants.

``artifact`` (the default) is what CoGNN's public artifact (SC'22,
``software/task/{GCN,GraphSAGE,GAT,GIN}.py``) trains: every layer sees the whole
graph, and the output is ``log_softmax``.

- GCN, SAGE: ``layers`` convs (in -> hidden -> ... -> out), ReLU after every one,
  the last included. The convs normalise (GCN) and aggregate (SAGE, mean) the full
  neighbourhood in every layer.
- GAT: ``layers`` GATConvs, no activation between them: 8 heads of 8 channels,
  concatenated (64 wide whatever ``hidden``), then one head of ``out`` channels
  averaged; attention dropout 0.6, self-loops added by every layer.
- GIN: ``layers - 1`` GINConvs, each MLP ``Linear(in, hidden), ReLU, Linear(hidden,
  hidden)``, each followed by ReLU and ``BatchNorm1d(hidden)``; then ``fc1`` (hidden
  -> hidden, ReLU) and ``fc2`` (hidden -> out).

The papers' "sampling ratios" 0.5 / 0.6 are the artifact's dropout arguments: 0.5 is
passed to every model and unused, 0.6 is GAT's attention dropout.

``trainbed-v1`` is what this project ran before: ``layers`` convs with ReLU between
them and logits out, 1-head GAT, GIN without BatchNorm or head, GCN normalised and
GAT's self-loops added once per forward pass, and SAGE and GAT subsampling the
edges afresh in every layer (``ceil(ratio * E)`` edges drawn uniformly with
replacement, so the sampled size is exact and needs no edge-sized scratch).
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
ARTIFACT, TRAINBED_V1 = "artifact", "trainbed-v1"
VARIANTS = (ARTIFACT, TRAINBED_V1)
GAT_HEADS, GAT_HEAD_CHANNELS, GAT_ATTENTION_DROPOUT = 8, 8, 0.6


@dataclass(frozen=True)
class ModelConfig:
    model: str
    in_dim: int
    hidden: int
    out_dim: int
    layers: int
    sampling_ratio: float = 1.0  # trainbed-v1 only
    variant: str = ARTIFACT

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown model variant {self.variant!r}")
        if self.variant == ARTIFACT and self.sampling_ratio < 1.0:
            raise ValueError("the artifact's models aggregate full neighbourhoods: no edge sampling")
        if self.variant == ARTIFACT and self.layers < 2:
            raise ValueError("the artifact's models have an input and an output layer: at least 2 layers")

    @property
    def dims(self) -> list[int]:
        """Widths of trainbed-v1's conv stack, input to output."""
        return [self.in_dim] + [self.hidden] * (self.layers - 1) + [self.out_dim]


def build_model(config: ModelConfig) -> torch.nn.Module:
    return ArtifactGNN(config) if config.variant == ARTIFACT else TrainbedV1GNN(config)


def artifact_conv_dims(config: ModelConfig) -> list[tuple[int, int]]:
    """(input, output) width of each conv of the artifact's model."""
    fin, hidden, fout, layers = config.in_dim, config.hidden, config.out_dim, config.layers
    if config.model == "GAT":
        dims = [fin] + [GAT_HEADS * GAT_HEAD_CHANNELS] * (layers - 1) + [fout]
    elif config.model == "GIN":  # fc1 and fc2 make the output
        dims = [fin] + [hidden] * (layers - 1)
    else:
        dims = [fin] + [hidden] * (layers - 1) + [fout]
    return list(zip(dims[:-1], dims[1:]))


def artifact_convs(config: ModelConfig) -> list[torch.nn.Module]:
    dims = artifact_conv_dims(config)
    if config.model == "GCN":
        return [GCNConv(a, b) for a, b in dims]
    if config.model == "SAGE":
        return [SAGEConv(a, b) for a, b in dims]
    if config.model == "GAT":
        *hidden, (a, b) = dims
        return ([GATConv(a, GAT_HEAD_CHANNELS, heads=GAT_HEADS, dropout=GAT_ATTENTION_DROPOUT) for a, _ in hidden]
                + [GATConv(a, b, heads=1, concat=False, dropout=GAT_ATTENTION_DROPOUT)])
    if config.model == "GIN":
        return [GINConv(_mlp(a, b)) for a, b in dims]
    raise ValueError(f"unknown model {config.model!r}")


def _mlp(fin: int, hidden: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(fin, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden))


class ArtifactGNN(torch.nn.Module):
    """One of the artifact's four models (see the module docstring); returns log-probabilities."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.convs = torch.nn.ModuleList(artifact_convs(config))
        if config.model == "GIN":
            self.norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(config.hidden) for _ in self.convs)
            self.fc1 = torch.nn.Linear(config.hidden, config.hidden)
            self.fc2 = torch.nn.Linear(config.hidden, config.out_dim)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        model = self.config.model
        for i, conv in enumerate(self.convs):
            if model == "GAT":  # the artifact's GAT stacks its layers without an activation
                x = conv(x, edge_index)
            else:
                x = F.relu(conv(x, edge_index))
            if model == "GIN":
                x = self.norms[i](x)
        if model == "GIN":
            x = self.fc2(F.relu(self.fc1(x)))
        return F.log_softmax(x, dim=-1)


def sampled_edges(edges: int, ratio: float) -> int:
    return edges if ratio >= 1.0 else max(1, math.ceil(ratio * edges))


class TrainbedV1GNN(torch.nn.Module):
    """This project's earlier models (see the module docstring); returns logits."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        dims = config.dims
        self.convs = torch.nn.ModuleList(_v1_conv(config.model, a, b) for a, b in zip(dims[:-1], dims[1:]))

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


def _v1_conv(model: str, fin: int, fout: int) -> torch.nn.Module:
    if model == "GCN":
        return GCNConv(fin, fout, normalize=False, add_self_loops=False)
    if model == "SAGE":
        return SAGEConv(fin, fout)
    if model == "GAT":
        return GATConv(fin, fout, heads=1, add_self_loops=False)
    if model == "GIN":
        return GINConv(_mlp(fin, fout))
    raise ValueError(f"unknown model {model!r}")
