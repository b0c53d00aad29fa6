"""Co-location specs: bad input gets one line naming the field; good input resolves."""
import pytest
import yaml

from experiments.cli import main
from experiments.colocation.spec import build_tasks, load_spec, validate
from experiments.errors import SpecError
from hosts.colocation.datasets import DATASETS, dataset_shape, synthesize

GOOD = {
    "name": "ok", "kind": "training", "memory": {"capacity_mib": 100},
    "queue": {"models": ["GCN"], "datasets": ["cora"], "count": 3, "epochs": 1},
}


def _with(path, value):
    spec = yaml.safe_load(yaml.safe_dump(GOOD))
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return spec


@pytest.mark.parametrize("path, value, field", [
    (("queue", "models"), ["GCN", "Transformer"], "queue.models[1]"),
    (("memory", "capacity_mib"), -5, "memory.capacity_mib"),
    (("memory", "reserved_mib"), -1, "memory.reserved_mib"),
    (("queue",), {}, "queue"),
    (("queue", "models"), [], "queue.models"),
    (("queue", "datasets"), ["imagenet"], "queue.datasets[0]"),
    (("methods",), ["default", "sqtf"], "methods[1]"),
    (("workers",), 0, "workers"),
    (("repeats",), 0, "repeats"),
    (("repeats",), "twice", "repeats"),
    (("kind",), "serving", "kind"),
    (("graphs",), {"scale": 2}, "graphs.scale"),
    (("queue", "layers"), [6, 4], "queue.layers"),
    (("queue", "colour"), "red", "queue.colour"),
    (("queue", "subgraph_fraction"), [0.1, 0.2], "queue.subgraph_fraction"),
    (("arrivals",), {"mean_per_tick": 1}, "arrivals"),
    (("queue", "variant"), "v2", "queue.variant"),
    (("queue", "sampling_ratio"), {"SAGE": 0.5}, "queue.sampling_ratio"),  # the artifact samples no edges
    (("queue", "layers"), [1, 4], "queue.layers[0]"),  # the artifact's models have at least 2 layers
])
def test_bad_spec_gets_one_line_error_naming_the_field(path, value, field):
    with pytest.raises(SpecError) as err:
        validate(_with(path, value))
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_overrides_are_set_as_a_sweep_sets_them(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    spec = load_spec(path, {"queue.epochs": 3, "graphs.scale": 0.5})  # graphs: a section created
    assert spec["queue"]["epochs"] == 3 and spec["graphs"]["scale"] == 0.5
    with pytest.raises(SpecError) as err:
        load_spec(path, {"queue.models.first": "GCN"})  # queue.models is a list
    assert err.value.field == "queue.models.first"
    assert err.value.problem == "cannot set queue.models.first: the base spec's queue.models is a list of 1 item; " \
                                "index it 0..0"
    assert load_spec(path, {"queue.models.0": "GAT"})["queue"]["models"] == ["GAT"]  # a list item, by index
    with pytest.raises(SpecError) as err:
        load_spec(path, {"queue.epochs": 0})  # set, then validated
    assert err.value.field == "queue.epochs"


def test_validate_is_the_one_name_of_every_kind():
    from experiments.colocation import spec as spec_mod
    from experiments.kinds import KINDS
    assert not hasattr(spec_mod, "resolve")
    assert KINDS["colocation"].validate(dict(GOOD)) == validate(dict(GOOD))


def test_empty_task_list_is_refused():
    with pytest.raises(SpecError, match="^queue.tasks: empty"):
        validate(_with(("queue",), {"tasks": []}))


@pytest.mark.parametrize("key, value", [("models", ["GAT"]), ("datasets", ["cora"]), ("count", 50), ("layers", 9)])
def test_a_drawn_queues_field_beside_a_task_list_is_refused(key, value):
    """It was dropped without a word: the resolved queue kept only the tasks."""
    with pytest.raises(SpecError, match=rf"^queue.{key}: not with queue.tasks "):
        validate(_with(("queue",), {"tasks": [{"model": "GCN", "dataset": "cora"}], key: value}))


def test_a_graph_budget_below_a_datasets_smallest_graph_is_refused():
    """Two nodes a class is the floor: shrinking towards a smaller budget looped for ever."""
    spec = _with(("graphs",), {"max_graph_mib": 0.05})
    with pytest.raises(SpecError, match=r"^graphs.max_graph_mib: too small: \w+'s smallest graph takes \d+ bytes"):
        validate(spec)


def test_gcn_is_not_sampled():
    """trainbed-v1's GCN normalises its edge weights over the whole graph: sampled
    edges would not match them (the model failed on the first layer)."""
    spec = _with(("queue",), {"variant": "trainbed-v1", "models": ["GCN"], "datasets": ["cora"],
                              "sampling_ratio": {"GCN": 0.5}})
    with pytest.raises(SpecError, match=r"^queue.sampling_ratio.GCN: GCN is not sampled in trainbed-v1"):
        validate(spec)
    spec["queue"]["sampling_ratio"]["GCN"] = 1
    assert validate(spec)["queue"]["sampling_ratio"]["GCN"] == 1


@pytest.mark.parametrize("key", ["hidden", "sampling_ratio"])
def test_a_listed_task_takes_the_queues_width_and_sampling(key):
    """Per task they were taken and dropped; the queue's fields set them."""
    task = {"model": "GCN", "dataset": "cora", key: 16}
    with pytest.raises(SpecError, match=rf"^queue.tasks\[0\].{key}: unknown field \(allowed: dataset, epochs, "
                                        rf"layers, model\)$"):
        validate(_with(("queue",), {"tasks": [task]}))


def test_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_with(("queue", "models"), ["MLP"])))
    assert main(["colocate", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("trainbed: error: queue.models[0]: unknown model 'MLP'")


def test_task_that_cannot_fit_alone_is_refused(tmp_path, capsys):
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(_with(("memory", "capacity_mib"), 1)))
    assert main(["colocate", str(path), "--device", "cpu"]) == 2
    assert "more than the 1.0 MiB allocatable" in capsys.readouterr().err


def test_defaults_resolved_and_queue_built():
    spec = validate(_with(("queue", "layers"), [4, 10]))
    assert spec["methods"] == ["default", "pipeswitch", "mps-pair", "mps", "mps-base", "base", "lmcf", "bmc"]
    assert spec["repeats"] == 1
    assert spec["queue"]["hidden"] == 64 and spec["queue"]["variant"] == "artifact"
    assert "sampling_ratio" not in spec["queue"]
    tasks = build_tasks(spec)
    assert len(tasks) == 3 and all(4 <= t.layers <= 10 and t.arrival_s == 0 for t in tasks)
    assert all(t.variant == "artifact" and t.sampling_ratio == 1.0 for t in tasks)
    assert build_tasks(spec) == tasks  # deterministic from the seed


def test_trainbed_v1_variant_keeps_its_edge_sampling():
    raw = _with(("queue", "models"), ["SAGE", "GAT", "GCN"])
    raw["queue"].update(variant="trainbed-v1", layers=1)
    spec = validate(raw)
    assert spec["queue"]["sampling_ratio"] == {"SAGE": 0.5, "GAT": 0.6}
    tasks = build_tasks(spec)
    assert {t.variant for t in tasks} == {"trainbed-v1"} and {t.layers for t in tasks} == {1}
    assert {t.model: t.sampling_ratio for t in tasks} == {"SAGE": 0.5, "GAT": 0.6, "GCN": 1.0}


def test_inference_arrivals_follow_poisson_ticks():
    spec = validate({"kind": "inference", "name": "i", "memory": {"capacity_mib": 100},
                    "queue": {"models": ["SAGE"], "datasets": ["pubmed"], "count": 400},
                    "arrivals": {"mean_per_tick": 2}})
    tasks = build_tasks(spec)
    ticks = [t.arrival_tick for t in tasks]
    assert ticks == sorted(ticks) and all(t.arrival_s == 0 for t in tasks)  # seconds once a tick's length is known
    per_tick = len(tasks) / (ticks[-1] + 1)
    assert 1.6 < per_tick < 2.4  # mean arrivals per tick, as GNNSched's high load
    assert all(t.layers == 8 and t.hidden == 256 and t.sampling_ratio == 1.0 for t in tasks)


def test_every_example_spec_loads():
    from pathlib import Path
    specs = sorted(Path("experiments/specs").glob("colocate-*.yaml"))
    assert any(p.name == "colocate-smoke.yaml" for p in specs)
    for path in specs:
        assert load_spec(path)["name"] == path.stem


def test_synthetic_graphs_deterministic_and_sized():
    shape = dataset_shape("pubmed", scale=0.05)
    a, b = synthesize(shape, seed=1), synthesize(shape, seed=1)
    assert (a.x == b.x).all() and (a.edge_index == b.edge_index).all()
    assert not (synthesize(shape, seed=2).edge_index == a.edge_index).all()
    assert a.x.shape == (shape.nodes, DATASETS["pubmed"][2]) and a.edge_index.shape == (2, shape.edges)
    assert int(a.y.max()) == DATASETS["pubmed"][3] - 1
    assert not (a.edge_index[0] == a.edge_index[1]).any()
    assert abs(shape.scale - 0.05) < 0.001


def test_graph_too_large_for_the_box_is_scaled_and_recorded():
    full = dataset_shape("reddit")
    capped = dataset_shape("reddit", max_bytes=256 << 20)
    assert full.scale == 1.0 and full.edges == DATASETS["reddit"][1]
    assert capped.raw_bytes <= 256 << 20 and 0 < capped.scale < 1.0
    assert capped.edges / capped.nodes == pytest.approx(full.edges / full.nodes, rel=0.01)
