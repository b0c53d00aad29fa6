"""Training tasks (CoGNN) and inference requests (GNNSched) as runnable units.

A task owns everything it puts on the device: its copy of the graph (the
host-to-device transfer; on CPU an explicit copy so both devices count the
same bytes), its model, activations and gradients. ``run_task`` is what a
worker executes and what the estimator predicts the peak of.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F

from hosts.colocation.datasets import Graph, GraphShape, synthesize
from hosts.colocation.estimator import TaskShape, estimate_peak_bytes
from hosts.colocation.models import ARTIFACT, MODELS, ModelConfig, build_model

TRAINING, INFERENCE = "training", "inference"
# Multiplied onto the estimate before packing (CoGNN §III-C, GNNSched §4.5).
SAFETY_THRESHOLD = {TRAINING: 1.15, INFERENCE: 1.1}
LEARNING_RATE = 0.01  # the artifact's Adam lr; trainbed-v1's SGD used the same


@dataclass(frozen=True)
class Task:
    task_id: str
    kind: str
    model: str
    graph: GraphShape
    layers: int
    hidden: int
    sampling_ratio: float
    epochs: int = 1  # training only
    arrival_tick: int = 0  # inference: the tick its request arrives at (GNNSched's load)
    arrival_s: float = 0.0  # inference: when it arrives, in seconds (the tick times the tick's length)
    variant: str = ARTIFACT

    @property
    def config(self) -> ModelConfig:
        return ModelConfig(self.model, self.graph.features, self.hidden, self.graph.classes, self.layers,
                           self.sampling_ratio, self.variant)

    @property
    def training(self) -> bool:
        return self.kind == TRAINING

    def estimate_bytes(self, device_type: str) -> int:
        """The PMC on a ``cpu`` or ``cuda`` device: estimated peak bytes (before the safety threshold)."""
        return estimate_peak_bytes(TaskShape(self.config, self.graph.nodes, self.graph.edges, self.training,
                                             device_type))

    def describe(self) -> dict:
        d = asdict(self)
        d["graph"] = asdict(self.graph)
        return d


PROFILED_EPOCHS = 2  # every later epoch repeats the peak of the first two


def profiled(task: Task) -> Task:
    """The task as it is profiled alone: training for at most ``PROFILED_EPOCHS`` epochs."""
    return replace(task, epochs=min(task.epochs, PROFILED_EPOCHS))


def profile_key(task: Task) -> tuple:
    """Tasks with one key profile alike: one profiling run serves them all."""
    return task.config, task.graph, task.kind, min(task.epochs, PROFILED_EPOCHS)


def warm_up_models(device: torch.device) -> None:
    """Initialise the device and PyG's generated layer code of every model on a tiny
    graph, outside any measured time."""
    shape = GraphShape("warm-up", 32, 128, 8, 2, 1.0, 0)
    graph = synthesize(shape, 0)
    for model in MODELS:
        run_task(Task("warm-up", TRAINING, model, shape, layers=2, hidden=8, sampling_ratio=1.0), graph, device)


def run_task(task: Task, graph: Graph, device: torch.device, model: torch.nn.Module | None = None,
             pipelined: bool = False) -> float:
    """Run ``task`` on ``device``; return the final training loss, or the share
    of nodes predicted correctly for inference. ``model``: built already on the
    host (a standby's preparation), copied to the device here as the inputs
    are, on the CPU too, so the task owns the same bytes on both; ``pipelined``:
    its parameters go to a CUDA device layer by layer, each layer computing as
    soon as its own have arrived (PipeSwitch)."""
    x = graph.x.to(device, copy=True)
    edge_index = graph.edge_index.to(device, copy=True)
    y = graph.y.to(device, copy=True)
    if model is None:
        model = build_model(task.config).to(device)
    elif pipelined and device.type == "cuda":
        _pipelined_to(model, device)
    else:
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.data = tensor.data.to(device, copy=True)
    if task.training:
        if task.variant == ARTIFACT:
            optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
            train_epoch = _artifact_epoch
        else:
            optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
            train_epoch = _trainbed_v1_epoch
        loss = 0.0
        for _ in range(task.epochs):
            loss = train_epoch(model, optimizer, x, edge_index, y)
        return loss
    model.eval()
    with torch.no_grad():
        predicted = model(x, edge_index).argmax(dim=1)
        return float((predicted == y).float().mean())


def _pipelined_to(model: torch.nn.Module, device: torch.device) -> None:
    """Issue every module's parameter copy on a side stream, in module order, and
    make each module's forward wait only for its own copy."""
    compute = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(compute)
    for module in model.modules():
        tensors = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        if not tensors:
            continue
        with torch.cuda.stream(side):
            for tensor in tensors:
                tensor.data = tensor.data.to(device, non_blocking=True)
        arrived = torch.cuda.Event()
        arrived.record(side)
        for tensor in tensors:
            tensor.data.record_stream(compute)  # allocated on the side stream, used on the compute stream
        module.register_forward_pre_hook(lambda _module, _inputs, event=arrived: compute.wait_event(event))


def _artifact_epoch(model, optimizer, x, edge_index, y) -> float:
    """The artifact's order: the last step's gradients live through this forward pass."""
    loss = F.nll_loss(model(x, edge_index), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()


def _trainbed_v1_epoch(model, optimizer, x, edge_index, y) -> float:
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x, edge_index), y)
    loss.backward()
    optimizer.step()
    return loss.item()
