"""The models against the CoGNN artifact's definitions (software/task/{GCN,GraphSAGE,GAT,GIN}.py
of guessmewho233/CoGNN_info_for_SC22): parameter counts worked out by hand from
those definitions, layer shapes, and the training the artifact runs."""
import pytest
import torch
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv

from hosts.colocation.datasets import GraphShape, synthesize
from hosts.colocation.models import ModelConfig, build_model
from hosts.colocation.tasks import TRAINING, Task, run_task

F, H, C = 12, 64, 5  # in_dim, hidden, out_dim


def artifact_parameter_count(model: str, layers: int) -> int:
    """Parameters of the artifact's model for (F, H, C, layers), by hand."""
    if model == "GCN":  # GCNConv(a, b): lin weight a*b (no bias), bias b
        return (F * H + H) + (layers - 2) * (H * H + H) + (H * C + C)
    if model == "SAGE":  # SAGEConv(a, b): lin_l a*b + b, lin_r a*b
        return (2 * F * H + H) + (layers - 2) * (2 * H * H + H) + (2 * H * C + C)
    if model == "GAT":  # GATConv(a, 8, heads=8): lin a*64, att_src 64, att_dst 64, bias 64
        first, hidden = F * 64 + 3 * 64, 64 * 64 + 3 * 64
        last = 64 * C + 3 * C  # GATConv(64, C, heads=1, concat=False)
        return first + (layers - 2) * hidden + last
    if model == "GIN":  # GINConv(Linear(a, H), ReLU, Linear(H, H)) + BatchNorm1d(H), then fc1, fc2
        first, hidden = F * H + H + H * H + H, 2 * (H * H + H)
        return first + (layers - 2) * hidden + (layers - 1) * 2 * H + (H * H + H) + (H * C + C)
    raise ValueError(model)


@pytest.mark.parametrize("layers", [2, 4, 10])
@pytest.mark.parametrize("model", ["GCN", "SAGE", "GAT", "GIN"])
def test_parameter_count_equals_the_artifacts(model, layers):
    net = build_model(ModelConfig(model, F, H, C, layers))
    assert sum(p.numel() for p in net.parameters()) == artifact_parameter_count(model, layers)


def test_gcn_and_sage_layer_shapes():
    for model, conv_type in (("GCN", GCNConv), ("SAGE", SAGEConv)):
        convs = build_model(ModelConfig(model, F, H, C, 4)).convs
        assert [type(c) for c in convs] == [conv_type] * 4
        assert [(c.in_channels, c.out_channels) for c in convs] == [(F, H), (H, H), (H, H), (H, C)]
    gcn = build_model(ModelConfig("GCN", F, H, C, 4)).convs[0]
    assert gcn.normalize and gcn.add_self_loops and not gcn.cached  # normalised in every layer
    assert build_model(ModelConfig("SAGE", F, H, C, 4)).convs[0].aggr == "mean"


def test_gat_layer_shapes():
    convs = build_model(ModelConfig("GAT", F, H, C, 4)).convs
    assert all(type(c) is GATConv and c.dropout == 0.6 and c.add_self_loops for c in convs)
    assert [(c.in_channels, c.out_channels, c.heads, c.concat) for c in convs] == [
        (F, 8, 8, True), (64, 8, 8, True), (64, 8, 8, True), (64, C, 1, False)]
    assert convs[0].lin.weight.shape == (64, F) and convs[0].att_src.shape == (1, 8, 8)
    assert convs[-1].lin.weight.shape == (C, 64) and convs[-1].bias.shape == (C,)


def test_gin_layer_shapes():
    net = build_model(ModelConfig("GIN", F, H, C, 4))
    assert len(net.convs) == 3 and all(type(c) is GINConv for c in net.convs)
    mlps = [[tuple(m.weight.shape) for m in c.nn if isinstance(m, torch.nn.Linear)] for c in net.convs]
    assert mlps == [[(H, F), (H, H)], [(H, H), (H, H)], [(H, H), (H, H)]]
    assert [n.num_features for n in net.norms] == [H, H, H]
    assert net.fc1.weight.shape == (H, H) and net.fc2.weight.shape == (C, H)


@pytest.mark.parametrize("model", ["GCN", "SAGE", "GAT", "GIN"])
def test_output_is_log_probabilities(model):
    graph = synthesize(GraphShape("syn", 60, 240, F, C, 1.0, 0), seed=3)
    out = build_model(ModelConfig(model, F, H, C, 3))(graph.x, graph.edge_index)
    assert out.shape == (60, C)
    assert torch.allclose(out.exp().sum(dim=1), torch.ones(60), atol=1e-5)


def test_trainbed_v1_keeps_the_earlier_models():
    gat = build_model(ModelConfig("GAT", F, H, C, 3, variant="trainbed-v1"))
    assert [(c.heads, c.out_channels) for c in gat.convs] == [(1, H), (1, H), (1, C)]
    gin = build_model(ModelConfig("GIN", F, H, C, 3, variant="trainbed-v1"))
    assert len(gin.convs) == 3 and not hasattr(gin, "norms")
    with pytest.raises(ValueError, match="no edge sampling"):
        ModelConfig("SAGE", F, H, C, 3, sampling_ratio=0.5)


@pytest.mark.parametrize("variant, optimizer, lr", [("artifact", torch.optim.Adam, 1e-2),
                                                    ("trainbed-v1", torch.optim.SGD, 1e-2)])
def test_training_uses_the_variants_optimizer(monkeypatch, variant, optimizer, lr):
    made = []

    class Recording(optimizer):
        def __init__(self, params, **kwargs):
            made.append(kwargs)
            super().__init__(params, **kwargs)

    monkeypatch.setattr(torch.optim, optimizer.__name__, Recording)
    graph = synthesize(GraphShape("syn", 60, 240, F, C, 1.0, 0), seed=3)
    task = Task("t", TRAINING, "GCN", graph.shape, 3, H, 1.0, epochs=2, variant=variant)
    assert run_task(task, graph, torch.device("cpu")) > 0
    assert made == [{"lr": lr}]
