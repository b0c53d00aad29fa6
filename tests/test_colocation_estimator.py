"""The peak-memory estimator against measured peaks, and the measures themselves."""
import pytest
import torch

from hosts.colocation.datasets import GraphShape, synthesize
from hosts.colocation.estimator import relative_error
from hosts.colocation.memory import BudgetExceeded, DeviceLedger, TaskMemoryWatch, measure_peak, round_up
from hosts.colocation.models import ARTIFACT, TRAINBED_V1
from hosts.colocation.tasks import INFERENCE, TRAINING, Task, run_task

CPU = torch.device("cpu")
# (nodes, edges, features, classes): small, medium and edge-heavy graphs
SIZES = [(400, 1_600, 40, 4), (2_000, 10_000, 300, 7), (4_000, 40_000, 64, 10)]
MODELS = ["GCN", "SAGE", "GAT", "GIN"]
TARGET = 0.03


def _task(model: str, kind: str, shape: GraphShape, variant: str = ARTIFACT) -> Task:
    """CoGNN training (hidden 64, 4 layers, two epochs) or GNNSched inference (8 x 256);
    trainbed-v1 samples SAGE/GAT edges at 0.5/0.6 in training and SAGE's at 0.5 in inference."""
    v1 = variant == TRAINBED_V1
    if kind == TRAINING:
        ratio = {"SAGE": 0.5, "GAT": 0.6}.get(model, 1.0) if v1 else 1.0
        return Task("t", kind, model, shape, 4, 64, ratio, epochs=2, variant=variant)
    return Task("r", kind, model, shape, 8, 256, 0.5 if v1 and model == "SAGE" else 1.0, variant=variant)


@pytest.fixture(scope="module")
def graphs():
    return [synthesize(GraphShape("syn", n, e, f, c, 1.0, 0), seed=11) for n, e, f, c in SIZES]


@pytest.mark.parametrize("variant", [ARTIFACT, TRAINBED_V1])
@pytest.mark.parametrize("kind", [TRAINING, INFERENCE])
@pytest.mark.parametrize("model", MODELS)
def test_estimate_within_target_of_measured_peak(graphs, model, kind, variant):
    errors = []
    for graph in graphs:
        task = _task(model, kind, graph.shape, variant)
        measured = measure_peak(lambda: run_task(task, graph, CPU), CPU)
        errors.append(relative_error(task.estimate_bytes("cpu"), measured))
    assert max(errors) < TARGET, errors


def test_device_specific_terms():
    """GAT's attention dropout keeps a bool mask on CUDA, a float32 one on CPU; Adam's
    step takes square roots parameter by parameter on CPU, of all parameters at once
    on CUDA (foreach)."""
    gat = _task("GAT", TRAINING, GraphShape("syn", 2_000, 20_000, 32, 4, 1.0, 0))
    assert gat.estimate_bytes("cuda") < gat.estimate_bytes("cpu")
    # ten 512 x 512 layers on 20 nodes: the optimiser's step is the peak
    wide = Task("t", TRAINING, "GCN", GraphShape("syn", 20, 40, 512, 4, 1.0, 0), 10, 512, 1.0, epochs=2)
    assert wide.estimate_bytes("cuda") > wide.estimate_bytes("cpu")


@pytest.mark.parametrize("model", MODELS)
def test_watch_errs_high_never_low(graphs, model):
    """The executor's per-task watch may see a gradient buffer more than an unwatched
    run (autograd accumulates out of place under any dispatch mode), never less."""
    for graph in graphs:
        for kind in (TRAINING, INFERENCE):
            task = _task(model, kind, graph.shape)
            measured = measure_peak(lambda: run_task(task, graph, CPU), CPU)
            watch = TaskMemoryWatch(budget_bytes=None)
            with watch:
                run_task(task, graph, CPU)
            assert measured <= watch.record.peak_bytes <= 1.10 * measured
            if kind == INFERENCE or model in ("GCN", "GAT"):
                assert watch.record.peak_bytes == measured


def test_watch_records_budget_overrun_without_stopping_the_task(graphs):
    graph = graphs[0]
    task = _task("GCN", TRAINING, graph.shape)
    budget = task.estimate_bytes("cpu") // 2
    watch = TaskMemoryWatch(budget_bytes=budget)
    with watch:
        loss = run_task(task, graph, CPU)
    assert watch.record.exceeded_at_bytes is not None and watch.record.exceeded_at_bytes > budget
    assert loss > 0


def test_enforcing_watch_stops_the_task_and_settles_the_ledger(graphs):
    graph = graphs[0]
    task = _task("GCN", TRAINING, graph.shape)
    budget = task.estimate_bytes("cpu") // 2
    ledger = DeviceLedger(capacity_bytes=budget * 4)
    watch = TaskMemoryWatch(budget_bytes=budget, ledger=ledger, enforce=True)
    with pytest.raises(BudgetExceeded), watch:
        run_task(task, graph, CPU)
    assert budget < watch.record.exceeded_at_bytes <= watch.record.peak_bytes
    unenforced = TaskMemoryWatch(budget_bytes=budget)
    with unenforced:
        run_task(task, graph, CPU)
    # stopped where it broke the budget, not after the task had reached its own peak
    assert watch.record.peak_bytes < unenforced.record.peak_bytes
    watch.settle()
    over, crossings = ledger.snapshot()
    assert ledger.peak_bytes == watch.record.peak_bytes and not over and crossings == 0
    ledger.change(budget * 5)  # another task's bytes push the sum over capacity: one crossing
    ledger.change(budget)
    assert ledger.snapshot() == (True, 1)


def test_estimate_grows_with_graph_and_layers():
    small = GraphShape("syn", 1_000, 5_000, 50, 5, 1.0, 0)
    large = GraphShape("syn", 2_000, 10_000, 50, 5, 1.0, 0)
    assert _task("SAGE", TRAINING, large).estimate_bytes("cpu") > _task("SAGE", TRAINING, small).estimate_bytes("cpu")
    shallow = Task("a", TRAINING, "GIN", small, 4, 64, 1.0)
    deep = Task("b", TRAINING, "GIN", small, 10, 64, 1.0)
    assert deep.estimate_bytes("cpu") > shallow.estimate_bytes("cpu")


def test_round_up_to_allocator_blocks():
    assert [round_up(b) for b in (0, 1, 512, 513, 4096)] == [0, 512, 512, 1024, 4096]


def test_a_cpu_peak_is_measured_without_the_profilers_marker_lines_and_keeps_the_tasks_output(capfd):
    import os
    import sys

    def task():
        x = torch.ones(1000)
        print("task says", file=sys.stderr, flush=True)
        os.write(2, b"USDT: a task's own line\n")
        return x * 2
    assert measure_peak(task, CPU) >= round_up(1000 * 4)
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "profiler_stop" not in err
    assert "task says" in err and "USDT: a task's own line" in err
