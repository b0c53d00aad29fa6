"""DGL through hosts.gnn.dglenv, the synthetic Table II graphs, and METIS partitions."""
import importlib.util
import pathlib
import re

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(importlib.util.find_spec("dgl") is None,
                                reason="dgl not installed: run scripts/install-gnn.sh")

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dgl():
    from hosts.gnn.dglenv import import_dgl
    return import_dgl()


@pytest.fixture(scope="module")
def products():
    from hosts.gnn.graphs import OGBN_PRODUCTS, synthesize
    return synthesize(OGBN_PRODUCTS, 3000, seed=7)


def test_import_dgl_survives_graphbolt_and_says_why_on_use(dgl):
    import sys
    assert dgl.__version__ == "2.1.0"
    assert sys.modules["dgl.graphbolt"].__name__ == "dgl.graphbolt"
    with pytest.raises(AttributeError, match="GraphBolt"):
        dgl.graphbolt.fused_csc_sampling_graph  # noqa: B018 (the access is the test)


def test_nothing_else_imports_dgl_directly():
    direct = re.compile(r"^\s*(import dgl\b|from dgl\b)", re.MULTILINE)
    offenders = [str(p.relative_to(ROOT)) for folder in ("topologies", "controller", "hosts", "experiments", "tests")
                 for p in (ROOT / folder).rglob("*.py")
                 if p.name != "dglenv.py" and direct.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


@pytest.mark.filterwarnings("ignore:Dataloader CPU affinity")
def test_sampler_loader_and_sage_train_step_on_a_tiny_graph(dgl, products):
    from hosts.gnn.graphs import OGBN_PRODUCTS

    torch.manual_seed(0)
    g = products
    train_ids = torch.nonzero(g.ndata["train_mask"]).squeeze(1)
    sampler = dgl.dataloading.NeighborSampler(list(OGBN_PRODUCTS.fanouts))
    loader = dgl.dataloading.DataLoader(g, train_ids, sampler, batch_size=64, shuffle=True, drop_last=False)
    dims = [OGBN_PRODUCTS.features, 32, 32, OGBN_PRODUCTS.classes]
    layers = torch.nn.ModuleList(dgl.nn.SAGEConv(i, o, "mean") for i, o in zip(dims, dims[1:]))
    input_nodes, output_nodes, blocks = next(iter(loader))
    assert len(blocks) == 3 and blocks[-1].num_dst_nodes() == len(output_nodes) == 64
    h = g.ndata["feat"][input_nodes]
    for n, (layer, block) in enumerate(zip(layers, blocks)):
        h = layer(block, h)
        if n < len(layers) - 1:
            h = torch.relu(h)
    loss = torch.nn.functional.cross_entropy(h, g.ndata["label"][output_nodes])
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layers.parameters())


def test_same_seed_same_graph_other_seed_other_graph(products):
    from hosts.gnn.graphs import OGBN_PRODUCTS, synthesize
    again, other = synthesize(OGBN_PRODUCTS, 3000, seed=7), synthesize(OGBN_PRODUCTS, 3000, seed=8)
    for a, b in zip(products.edges(), again.edges()):
        assert torch.equal(a, b)
    for key in products.ndata:
        assert torch.equal(products.ndata[key], again.ndata[key])
    assert not torch.equal(products.ndata["feat"], other.ndata["feat"])


@pytest.mark.parametrize("name,degree", [("ogbn-products", None), ("reddit", 40.0)])
def test_shapes_masks_symmetry_and_homophily(name, degree):
    from hosts.gnn.graphs import HOMOPHILY, SHAPES, synthesize
    shape = SHAPES[name]
    g = synthesize(shape, 2000, seed=1, avg_degree=degree)
    assert g.num_nodes() == 2000
    assert g.ndata["feat"].shape == (2000, shape.features) and g.ndata["feat"].dtype == torch.float32
    assert set(g.ndata["label"].unique().tolist()) == set(range(shape.classes))
    wanted = shape.avg_degree if degree is None else degree
    assert g.num_edges() == 2 * round(2000 * wanted / 2)
    src, dst = (t.numpy() for t in g.edges())
    assert not np.any(src == dst)
    assert set(zip(src.tolist(), dst.tolist())) == set(zip(dst.tolist(), src.tolist()))
    masks = torch.stack([g.ndata[k] for k in ("train_mask", "val_mask", "test_mask")])
    assert torch.equal(masks.sum(0), torch.ones(2000, dtype=torch.long))  # disjoint and covering
    assert masks.sum(1).tolist() == [round(2000 * s) for s in shape.split]
    expected = HOMOPHILY + (1 - HOMOPHILY) / shape.classes
    src, dst = g.edges()
    same_label = (g.ndata["label"][src] == g.ndata["label"][dst]).double().mean()  # the edges' homophily
    assert float(same_label) == pytest.approx(expected, abs=0.02)


def test_features_alone_classify_poorly_neighbour_means_well(products):
    """Nearest class mean (means from all labels): the task needs the graph."""
    g = products
    feat, label = g.ndata["feat"].numpy(), g.ndata["label"].numpy()
    src, dst = (t.numpy() for t in g.edges())
    neighbour_mean = np.zeros_like(feat)
    np.add.at(neighbour_mean, dst, feat[src])
    neighbour_mean /= np.bincount(dst, minlength=g.num_nodes())[:, None]

    def nearest_class_mean_accuracy(x):
        means = np.stack([x[label == c].mean(0) for c in range(label.max() + 1)])
        guess = np.argmin(((x[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
        return float((guess == label).mean())

    assert nearest_class_mean_accuracy(feat) < 0.7
    assert nearest_class_mean_accuracy(neighbour_mean) > 0.95


def test_metis_partition_splits_nodes_and_cuts_far_fewer_edges_than_random(dgl, products, tmp_path):
    from hosts.gnn.graphs import edge_cut, partition
    g = products
    parts = partition(g, 4, str(tmp_path))
    everyone = np.concatenate(parts.node_ids)
    assert len(everyone) == g.num_nodes() and len(np.unique(everyone)) == g.num_nodes()
    assert min(map(len, parts.node_ids)) > 0.8 * g.num_nodes() / 4  # METIS balances nodes
    # The mapping matches what DGL stored: partition 1's features are its nodes' features.
    _, node_feats, *_ = dgl.distributed.load_partition(parts.config_path, 1)
    assert torch.equal(node_feats["_N/feat"], g.ndata["feat"][torch.from_numpy(parts.node_ids[1])])
    random_split = np.random.default_rng(0).integers(0, 4, g.num_nodes())
    random_cut = edge_cut(g, random_split)
    assert random_cut == pytest.approx(0.75 * g.num_edges(), rel=0.05)
    assert parts.edge_cut < 0.4 * random_cut
    # the cut counted again from DGL's stored node split, not from the part_of it was counted with
    stored = np.empty(g.num_nodes(), dtype=np.int64)
    for k, ids in enumerate(parts.node_ids):
        stored[ids] = k
    src, dst = (t.numpy() for t in g.edges())
    assert parts.edge_cut == int((stored[src] != stored[dst]).sum()) and 0 < parts.edge_cut_share < 0.3
