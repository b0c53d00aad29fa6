"""Co-location specs: load, validate (one-line ``SpecError``s), resolve defaults, build the queue.

A spec names the task queue (CoGNN training or GNNSched inference), the device's
memory, the number of workers and the methods to compare. See
docs/specs.md, "Co-location specs", for the format.
"""
from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np

from experiments.errors import SpecError
from experiments.sweep import apply_overrides  # no cycle: nothing experiments.sweep imports imports this
from experiments.validation import (
    ROOT,
    at,
    boolean,
    choice,
    describe,
    inclusive_range,
    integer,
    items,
    mapping,
    number,
    read_yaml,
    string,
)
from hosts.colocation.allocator import MIB
from hosts.colocation.datasets import DATASETS, dataset_shape, subgraph_shape
from hosts.colocation.models import ARTIFACT, MODELS, TRAINBED_V1, VARIANTS
from hosts.colocation.policies import BASELINE_CONCURRENCY, INFERENCE_POLICIES, TRAINING_POLICIES
from hosts.colocation.tasks import INFERENCE, TRAINING, Task

TOP_KEYS = {"name", "kind", "seed", "memory", "workers", "repeats", "methods", "primary", "graphs", "queue",
            "arrivals", "pipeline_groups"}
QUEUE_KEYS = {"tasks", "models", "datasets", "layers", "count", "epochs", "hidden", "variant", "sampling_ratio",
              "subgraphs_per_dataset", "subgraph_fraction"}
TASK_KEYS = {"model", "dataset", "layers", "epochs"}  # hidden and sampling_ratio are the queue's
DEFAULTS = {
    TRAINING: {"layers": [4, 10], "hidden": 64, "epochs": 200, "count": 20,
               "methods": ["default", "pipeswitch", "mps-pair", "mps", "mps-base", "base", "lmcf", "bmc"]},
    INFERENCE: {"layers": 8, "hidden": 256, "count": 100, "subgraphs_per_dataset": 25,
                "subgraph_fraction": [0.05, 0.25], "methods": ["default", "mps-base", "mps", "sqtf", "bqt"]},
}
# trainbed-v1's edge sampling per layer (the papers' ratios read as sampling)
V1_SAMPLING_RATIO = {TRAINING: {"SAGE": 0.5, "GAT": 0.6}, INFERENCE: {"SAGE": 0.5}}


def load_spec(path: str | Path, overrides: dict | None = None) -> dict:
    """Read and validate a spec; return it resolved (every default filled in).
    ``overrides`` maps dotted fields (``queue.epochs``) to values set before
    validation; the resolved spec records them."""
    path = Path(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise SpecError("spec", f"a spec is a mapping of fields, got {describe(raw)}")
    if "workload" in raw or ("kind" not in raw and "duration_s" in raw):
        raise SpecError("kind", "is a co-location spec's (training or inference); this is a network experiment's "
                                "spec (trainbed run)")
    raw.setdefault("name", path.stem)
    return validate(apply_overrides(raw, overrides or {}))


def validate(raw: dict) -> dict:
    """Check a raw spec (as read from YAML) and return it resolved (every default filled in)."""
    raw = mapping(ROOT, raw, allowed=TOP_KEYS, required=("name", "kind", "memory", "queue"))
    kind = choice("kind", raw["kind"], (TRAINING, INFERENCE))
    defaults = DEFAULTS[kind]
    name = string("name", raw["name"], what="a name")
    if "/" in name:
        raise SpecError("name", f"must be a name without '/', got {name!r}")
    spec: dict = {"name": name, "kind": kind, "seed": integer("seed", raw.get("seed", 0), minimum=0)}

    memory = mapping("memory", raw["memory"], allowed=("capacity_mib", "reserved_mib"), required=("capacity_mib",))
    capacity = number("memory.capacity_mib", memory["capacity_mib"], minimum=0, strict=True)
    reserved = number("memory.reserved_mib", memory.get("reserved_mib", 0), minimum=0)
    if reserved >= capacity:
        raise SpecError("memory.reserved_mib", f"{reserved:g} leaves nothing of capacity {capacity:g}")
    spec["memory"] = {"capacity_mib": capacity, "reserved_mib": reserved}
    spec["workers"] = integer("workers", raw.get("workers", 2), minimum=1)
    spec["repeats"] = integer("repeats", raw.get("repeats", 1), minimum=1)
    spec["pipeline_groups"] = boolean("pipeline_groups", raw.get("pipeline_groups", True))

    allowed = list(BASELINE_CONCURRENCY) + list(TRAINING_POLICIES if kind == TRAINING else INFERENCE_POLICIES)
    methods = [choice(where, method, allowed, what=f"{kind} method")
               for where, method in items("methods", raw.get("methods", defaults["methods"]), non_empty=True)]
    if len(set(methods)) != len(methods):
        raise SpecError("methods", "lists a method twice")
    spec["methods"] = methods
    spec["primary"] = choice("primary", raw.get("primary", methods[-1]), methods)

    graphs = mapping("graphs", raw.get("graphs"), allowed=("scale", "max_graph_mib"), optional=True)
    spec["graphs"] = {
        "scale": number("graphs.scale", graphs.get("scale", 1.0), minimum=0, maximum=1, strict=True),
        "max_graph_mib": number("graphs.max_graph_mib", graphs.get("max_graph_mib", 4096), minimum=0, strict=True),
    }

    spec["queue"] = _queue(raw["queue"], kind, defaults)
    queue = spec["queue"]
    for dataset in sorted({t["dataset"] for t in queue["tasks"]} if "tasks" in queue else set(queue["datasets"])):
        try:
            dataset_shape(dataset, spec["graphs"]["scale"], int(spec["graphs"]["max_graph_mib"] * MIB))
        except ValueError as err:
            raise SpecError("graphs.max_graph_mib", f"too small: {err}") from None
    if kind == INFERENCE:
        arrivals = mapping("arrivals", raw.get("arrivals"), allowed=("mean_per_tick", "tick_solo_multiple"),
                           optional=True)
        spec["arrivals"] = {
            "mean_per_tick": number("arrivals.mean_per_tick", arrivals.get("mean_per_tick", 1), minimum=0,
                                    strict=True),
            "tick_solo_multiple": number("arrivals.tick_solo_multiple", arrivals.get("tick_solo_multiple", 1.0),
                                         minimum=0, strict=True),
        }
    elif "arrivals" in raw:
        raise SpecError("arrivals", "only for inference queues (training tasks all arrive at 0)")
    return spec


def _model(path: str, value) -> str:
    return choice(path, value, MODELS, what="model")


def _dataset(path: str, value) -> str:
    return choice(path, value, DATASETS, what="dataset")


def _fraction(path: str, value) -> float:
    return number(path, value, minimum=0, maximum=1, strict=True)


def _queue(raw, kind: str, defaults: dict) -> dict:
    raw = mapping("queue", raw, allowed=QUEUE_KEYS)
    if not raw:
        raise SpecError("queue", "empty: give `tasks` or `models` and `datasets`")
    variant = choice("queue.variant", raw.get("variant", ARTIFACT), VARIANTS, what="model variant")
    queue: dict = {"variant": variant}
    min_layers = 2 if variant == ARTIFACT else 1  # the artifact's models have an input and an output layer

    def layer_count(path: str, value) -> int:
        return integer(path, value, minimum=min_layers)

    if variant == TRAINBED_V1:
        ratios = dict(V1_SAMPLING_RATIO[kind])
        ratios.update(mapping("queue.sampling_ratio", raw.get("sampling_ratio"), optional=True))
        for model, ratio in ratios.items():
            where = at("queue.sampling_ratio", model)
            _model(where, model)
            ratios[model] = _fraction(where, ratio)
            if model == "GCN" and ratios[model] < 1:  # its normalised weights are one per edge of the whole graph
                raise SpecError(where, "GCN is not sampled in trainbed-v1 (its edge weights are normalised over "
                                       "the whole graph): leave it at 1")
        queue["sampling_ratio"] = ratios
    elif "sampling_ratio" in raw:
        raise SpecError("queue.sampling_ratio", f"only for variant {TRAINBED_V1}: the artifact's models "
                                                "aggregate full neighbourhoods")
    queue["hidden"] = integer("queue.hidden", raw.get("hidden", defaults["hidden"]), minimum=1)
    if "tasks" in raw:
        if kind != TRAINING:
            raise SpecError("queue.tasks", "explicit task lists are for training queues")
        for key in ("models", "datasets", "count", "layers", "subgraphs_per_dataset", "subgraph_fraction"):
            if key in raw:  # a drawn queue's field beside a list of its own: one of the two is a mistake
                raise SpecError(f"queue.{key}", "not with queue.tasks (each task names its model, dataset "
                                                "and layers)")
        tasks = items("queue.tasks", raw["tasks"])
        if not tasks:
            raise SpecError("queue.tasks", "empty: no tasks")
        epochs = integer("queue.epochs", raw.get("epochs", 1), minimum=1)
        queue["tasks"] = []
        for where, entry in tasks:
            entry = mapping(where, entry, allowed=TASK_KEYS, required=("model", "dataset"))
            queue["tasks"].append({
                "model": _model(at(where, "model"), entry["model"]),
                "dataset": _dataset(at(where, "dataset"), entry["dataset"]),
                "layers": layer_count(at(where, "layers"), entry.get("layers", 4)),
                "epochs": integer(at(where, "epochs"), entry.get("epochs", epochs), minimum=1),
            })
        return queue
    queue["models"] = [_model(where, m) for where, m in items("queue.models", raw.get("models"), non_empty=True)]
    queue["datasets"] = [_dataset(where, d)
                         for where, d in items("queue.datasets", raw.get("datasets"), non_empty=True)]
    queue["count"] = integer("queue.count", raw.get("count", defaults["count"]), minimum=1)
    layers = raw.get("layers", defaults["layers"])
    queue["layers"] = (inclusive_range("queue.layers", layers, layer_count) if isinstance(layers, list)
                       else [layer_count("queue.layers", layers)] * 2)
    only = ("epochs",) if kind == INFERENCE else ("subgraphs_per_dataset", "subgraph_fraction")
    for key in only:
        if key in raw:
            raise SpecError(f"queue.{key}", f"not for {kind} queues")
    if kind == TRAINING:
        queue["epochs"] = integer("queue.epochs", raw.get("epochs", defaults["epochs"]), minimum=1)
    else:
        queue["subgraphs_per_dataset"] = integer(
            "queue.subgraphs_per_dataset", raw.get("subgraphs_per_dataset", defaults["subgraphs_per_dataset"]),
            minimum=1)
        queue["subgraph_fraction"] = inclusive_range(
            "queue.subgraph_fraction", raw.get("subgraph_fraction", defaults["subgraph_fraction"]), _fraction)
    return queue


def build_tasks(spec: dict) -> list[Task]:
    """The spec's queue in arrival order. Inference tasks carry their arrival tick;
    ``with_arrival_times`` gives them their arrival in seconds once a tick's length is
    known (from the tasks' solo times)."""
    queue, kind, seed = spec["queue"], spec["kind"], spec["seed"]
    graphs = spec["graphs"]
    max_bytes = int(graphs["max_graph_mib"] * MIB)
    variant = queue["variant"]

    def ratio(model: str) -> float:
        return float(queue.get("sampling_ratio", {}).get(model, 1.0))

    rng = random.Random(seed)
    if kind == TRAINING:
        if "tasks" in queue:
            entries = queue["tasks"]
        else:
            lo, hi = queue["layers"]
            combos = [(m, d, n) for m in queue["models"] for d in queue["datasets"] for n in range(lo, hi + 1)]
            picks = (rng.sample(combos, queue["count"]) if queue["count"] <= len(combos)
                     else [rng.choice(combos) for _ in range(queue["count"])])
            entries = [{"model": m, "dataset": d, "layers": n, "epochs": queue["epochs"]} for m, d, n in picks]
        return [Task(f"t{i:03d}", TRAINING, e["model"], dataset_shape(e["dataset"], graphs["scale"], max_bytes),
                     e["layers"], queue["hidden"], ratio(e["model"]), epochs=e["epochs"], variant=variant)
                for i, e in enumerate(entries)]

    lo, hi = queue["subgraph_fraction"]
    subgraphs = {}
    for d in queue["datasets"]:
        base = dataset_shape(d, graphs["scale"], max_bytes)
        subgraphs[d] = [subgraph_shape(base, k + 1, rng.uniform(lo, hi))
                        for k in range(queue["subgraphs_per_dataset"])]
    ticks = _poisson_ticks(queue["count"], spec["arrivals"]["mean_per_tick"], seed)
    tasks = []
    for i in range(queue["count"]):
        model = rng.choice(queue["models"])
        shape = rng.choice(subgraphs[rng.choice(queue["datasets"])])
        layers = rng.randint(*queue["layers"])
        tasks.append(Task(f"r{i:03d}", INFERENCE, model, shape, layers, queue["hidden"], ratio(model),
                          arrival_tick=ticks[i], variant=variant))
    return tasks


def with_arrival_times(tasks: list[Task], tick_s: float) -> list[Task]:
    return [replace(t, arrival_s=t.arrival_tick * tick_s) for t in tasks]


def _poisson_ticks(count: int, mean: float, seed: int) -> list[int]:
    """GNNSched's load: at every tick a Poisson(mean) number of requests arrives."""
    rng = np.random.default_rng(seed)
    ticks: list[int] = []
    tick = 0
    while len(ticks) < count:
        ticks.extend([tick] * int(rng.poisson(mean)))
        tick += 1
    return ticks[:count]
