"""Co-location specs: load, validate (one-line ``SpecError``s), resolve defaults, build the queue.

A spec names the task queue (CoGNN training or GNNSched inference), the device's
memory, the number of workers and the methods to compare. See
README.md, "GPU co-location", for the format.
"""
from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from experiments.errors import SpecError
from hosts.colocation.datasets import DATASETS, dataset_shape, subgraph_shape
from hosts.colocation.models import MODELS
from hosts.colocation.policies import BASELINE_CONCURRENCY, INFERENCE_POLICIES, TRAINING_POLICIES
from hosts.colocation.tasks import INFERENCE, TRAINING, Task

MIB = 1 << 20
TOP_KEYS = {"name", "kind", "seed", "memory", "workers", "methods", "primary", "graphs", "queue", "arrivals"}
QUEUE_KEYS = {"tasks", "models", "datasets", "layers", "count", "epochs", "hidden", "sampling_ratio",
              "subgraphs_per_dataset", "subgraph_fraction"}
TASK_KEYS = {"model", "dataset", "layers", "epochs", "hidden", "sampling_ratio"}
DEFAULTS = {
    TRAINING: {"layers": [4, 10], "hidden": 64, "epochs": 200, "count": 20,
               "sampling_ratio": {"SAGE": 0.5, "GAT": 0.6},
               "methods": ["default", "mps", "mps-base", "base", "lmcf", "bmc"]},
    INFERENCE: {"layers": 8, "hidden": 256, "count": 100, "subgraphs_per_dataset": 25,
                "subgraph_fraction": [0.05, 0.25], "sampling_ratio": {"SAGE": 0.5},
                "methods": ["default", "mps-base", "mps", "sqtf", "bqt"]},
}


def load_spec(path: str | Path, overrides: dict | None = None) -> dict:
    """Read and validate a spec; return it resolved (every default filled in).
    ``overrides`` maps dotted fields (``queue.epochs``) to values set before
    validation; the resolved spec records them."""
    path = Path(path)
    if not path.exists():
        raise SpecError(str(path), "no such spec file")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise SpecError(str(path), f"not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise SpecError(str(path), "a spec is a mapping of fields")
    raw.setdefault("name", path.stem)
    for dotted, value in (overrides or {}).items():
        node = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return resolve(raw)


def resolve(raw: dict) -> dict:
    _unknown_keys(raw, TOP_KEYS, "")
    kind = raw.get("kind")
    if kind not in (TRAINING, INFERENCE):
        raise SpecError("kind", f"must be {TRAINING!r} or {INFERENCE!r}, got {kind!r}")
    defaults = DEFAULTS[kind]
    spec: dict = {"name": _str(raw.get("name"), "name"), "kind": kind}
    spec["seed"] = _int(raw.get("seed", 0), "seed", minimum=0)

    memory = raw.get("memory")
    if not isinstance(memory, dict) or "capacity_mib" not in memory:
        raise SpecError("memory.capacity_mib", "required: the device's memory in MiB")
    _unknown_keys(memory, {"capacity_mib", "reserved_mib"}, "memory.")
    capacity = _number(memory["capacity_mib"], "memory.capacity_mib", positive=True)
    reserved = _number(memory.get("reserved_mib", 0), "memory.reserved_mib")
    if reserved >= capacity:
        raise SpecError("memory.reserved_mib", f"{reserved} leaves nothing of capacity {capacity}")
    spec["memory"] = {"capacity_mib": capacity, "reserved_mib": reserved}
    spec["workers"] = _int(raw.get("workers", 2), "workers", minimum=1)

    allowed = list(BASELINE_CONCURRENCY) + list(TRAINING_POLICIES if kind == TRAINING else INFERENCE_POLICIES)
    methods = raw.get("methods", defaults["methods"])
    if not isinstance(methods, list) or not methods:
        raise SpecError("methods", "a non-empty list of methods")
    for i, method in enumerate(methods):
        if method not in allowed:
            raise SpecError(f"methods[{i}]", f"unknown method {method!r} for {kind} (known: {', '.join(allowed)})")
    if len(set(methods)) != len(methods):
        raise SpecError("methods", "lists a method twice")
    spec["methods"] = list(methods)
    primary = raw.get("primary", methods[-1])
    if primary not in methods:
        raise SpecError("primary", f"{primary!r} is not one of the methods")
    spec["primary"] = primary

    graphs = raw.get("graphs", {}) or {}
    _unknown_keys(graphs, {"scale", "max_graph_mib"}, "graphs.")
    scale = _number(graphs.get("scale", 1.0), "graphs.scale", positive=True)
    if scale > 1.0:
        raise SpecError("graphs.scale", f"must be in (0, 1], got {scale}")
    spec["graphs"] = {"scale": scale,
                      "max_graph_mib": _number(graphs.get("max_graph_mib", 4096), "graphs.max_graph_mib", positive=True)}

    spec["queue"] = _queue(raw.get("queue"), kind, defaults)
    if kind == INFERENCE:
        arrivals = raw.get("arrivals", {}) or {}
        _unknown_keys(arrivals, {"mean_per_tick", "tick_solo_multiple"}, "arrivals.")
        spec["arrivals"] = {
            "mean_per_tick": _number(arrivals.get("mean_per_tick", 1), "arrivals.mean_per_tick", positive=True),
            "tick_solo_multiple": _number(arrivals.get("tick_solo_multiple", 1.0), "arrivals.tick_solo_multiple",
                                          positive=True),
        }
    elif "arrivals" in raw:
        raise SpecError("arrivals", "only for inference queues (training tasks all arrive at 0)")
    return spec


def _queue(raw, kind: str, defaults: dict) -> dict:
    if not isinstance(raw, dict) or not raw:
        raise SpecError("queue", "empty: give `tasks` or `models` and `datasets`")
    _unknown_keys(raw, QUEUE_KEYS, "queue.")
    queue: dict = {}
    ratios = dict(defaults["sampling_ratio"])
    ratios.update(raw.get("sampling_ratio", {}) or {})
    for model, ratio in ratios.items():
        _model(model, f"queue.sampling_ratio.{model}")
        r = _number(ratio, f"queue.sampling_ratio.{model}", positive=True)
        if r > 1:
            raise SpecError(f"queue.sampling_ratio.{model}", f"must be in (0, 1], got {r}")
    queue["sampling_ratio"] = ratios
    queue["hidden"] = _int(raw.get("hidden", defaults["hidden"]), "queue.hidden", minimum=1)
    if "tasks" in raw:
        if kind != TRAINING:
            raise SpecError("queue.tasks", "explicit task lists are for training queues")
        tasks = raw["tasks"]
        if not isinstance(tasks, list) or not tasks:
            raise SpecError("queue.tasks", "empty: no tasks")
        resolved = []
        for i, entry in enumerate(tasks):
            field = f"queue.tasks[{i}]"
            if not isinstance(entry, dict):
                raise SpecError(field, "a task is a mapping (model, dataset, layers, epochs)")
            _unknown_keys(entry, TASK_KEYS, field + ".")
            resolved.append({
                "model": _model(entry.get("model"), field + ".model"),
                "dataset": _dataset(entry.get("dataset"), field + ".dataset"),
                "layers": _int(entry.get("layers", 4), field + ".layers", minimum=1),
                "epochs": _int(entry.get("epochs", raw.get("epochs", 1)), field + ".epochs", minimum=1),
            })
        queue["tasks"] = resolved
        return queue
    models, datasets = raw.get("models"), raw.get("datasets")
    if not models or not isinstance(models, list):
        raise SpecError("queue.models", "empty: list the models of the queue")
    if not datasets or not isinstance(datasets, list):
        raise SpecError("queue.datasets", "empty: list the datasets of the queue")
    queue["models"] = [_model(m, f"queue.models[{i}]") for i, m in enumerate(models)]
    queue["datasets"] = [_dataset(d, f"queue.datasets[{i}]") for i, d in enumerate(datasets)]
    queue["count"] = _int(raw.get("count", defaults["count"]), "queue.count", minimum=1)
    layers = raw.get("layers", defaults["layers"])
    if isinstance(layers, int) and not isinstance(layers, bool):
        layers = [layers, layers]
    if (not isinstance(layers, list) or len(layers) != 2
            or not all(isinstance(v, int) and v >= 1 for v in layers) or layers[0] > layers[1]):
        raise SpecError("queue.layers", f"a layer count or an inclusive range [low, high] of counts >= 1, got {layers!r}")
    queue["layers"] = layers
    only = ("epochs",) if kind == INFERENCE else ("subgraphs_per_dataset", "subgraph_fraction")
    for key in only:
        if key in raw:
            raise SpecError(f"queue.{key}", f"not for {kind} queues")
    if kind == TRAINING:
        queue["epochs"] = _int(raw.get("epochs", defaults["epochs"]), "queue.epochs", minimum=1)
    else:
        queue["subgraphs_per_dataset"] = _int(raw.get("subgraphs_per_dataset", defaults["subgraphs_per_dataset"]),
                                              "queue.subgraphs_per_dataset", minimum=1)
        fraction = raw.get("subgraph_fraction", defaults["subgraph_fraction"])
        if (not isinstance(fraction, list) or len(fraction) != 2
                or not all(isinstance(v, (int, float)) and 0 < v <= 1 for v in fraction) or fraction[0] > fraction[1]):
            raise SpecError("queue.subgraph_fraction", f"a range [low, high] within (0, 1], got {fraction!r}")
        queue["subgraph_fraction"] = [float(v) for v in fraction]
    return queue


def build_tasks(spec: dict) -> list[Task]:
    """The spec's queue in arrival order. Inference tasks carry their arrival *tick*
    in ``arrival_s`` until ``with_arrival_times`` scales ticks to seconds."""
    queue, kind, seed = spec["queue"], spec["kind"], spec["seed"]
    graphs = spec["graphs"]
    max_bytes = int(graphs["max_graph_mib"] * MIB)

    def ratio(model: str) -> float:
        return float(queue["sampling_ratio"].get(model, 1.0))

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
                     e["layers"], queue["hidden"], ratio(e["model"]), epochs=e["epochs"])
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
                          arrival_s=float(ticks[i])))
    return tasks


def with_arrival_times(tasks: list[Task], tick_s: float) -> list[Task]:
    return [replace(t, arrival_s=t.arrival_s * tick_s) for t in tasks]


def _poisson_ticks(count: int, mean: float, seed: int) -> list[int]:
    """GNNSched's load: at every tick a Poisson(mean) number of requests arrives."""
    rng = np.random.default_rng(seed)
    ticks: list[int] = []
    tick = 0
    while len(ticks) < count:
        ticks.extend([tick] * int(rng.poisson(mean)))
        tick += 1
    return ticks[:count]


def _unknown_keys(mapping, known: set, prefix: str) -> None:
    if not isinstance(mapping, dict):
        raise SpecError(prefix.rstrip(".") or "spec", "must be a mapping")
    for key in mapping:
        if key not in known:
            raise SpecError(prefix + str(key), f"unknown field (known: {', '.join(sorted(known))})")


def _model(value, field: str) -> str:
    if value not in MODELS:
        raise SpecError(field, f"unknown model {value!r} (known: {', '.join(MODELS)})")
    return value


def _dataset(value, field: str) -> str:
    if value not in DATASETS:
        raise SpecError(field, f"unknown dataset {value!r} (known: {', '.join(DATASETS)})")
    return value


def _str(value, field: str) -> str:
    if not isinstance(value, str) or not value or "/" in value:
        raise SpecError(field, f"a non-empty name without '/', got {value!r}")
    return value


def _int(value, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(field, f"must be an integer >= {minimum}, got {value!r}")
    return value


def _number(value, field: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise SpecError(field, f"must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise SpecError(field, f"must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)
