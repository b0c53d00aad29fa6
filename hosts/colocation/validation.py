"""Estimator validation: estimated against measured peak, task by task, on one device."""
from __future__ import annotations

import torch

from hosts.colocation.datasets import synthesize
from hosts.colocation.estimator import relative_error
from hosts.colocation.memory import measure_peak
from hosts.colocation.tasks import Task, profiled, run_task, warm_up_models


def validate_estimator(tasks: list[Task], device: torch.device, seed: int = 0) -> list[dict]:
    """Run each task alone (training: two epochs, whose peak every later epoch
    repeats) and compare ``measure_peak`` with the estimate."""
    rows = []
    if tasks:  # first use: PyG generates its layers' code, CUDA creates handles and workspaces
        warm_up_models(device)
    for task in tasks:
        short = profiled(task)
        graph = synthesize(task.graph, seed)
        measured = measure_peak(lambda: run_task(short, graph, device), device)
        estimated = task.estimate_bytes(device.type)
        rows.append({"task": task.task_id, "kind": task.kind, "model": task.model, "variant": task.variant,
                     "dataset": task.graph.dataset, "nodes": task.graph.nodes, "edges": task.graph.edges,
                     "features": task.graph.features, "scale": task.graph.scale, "layers": task.layers,
                     "hidden": task.hidden,
                     "estimated_bytes": estimated, "measured_bytes": measured,
                     "relative_error": relative_error(estimated, measured)})
        del graph
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows
