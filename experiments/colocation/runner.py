"""``trainbed colocate SPEC --device cpu|cuda``: run a task queue under every method.

A run: load the spec, build the queue, estimate every task's peak (PMC), check
that each task fits the allocatable memory alone, then profile each distinct
task alone: its exact peak, inference tasks' run time (the QoS target is twice
that) and, in a warm worker, what its allocator reserves beyond its tensors (the
cap's overhead, per model and size class); then run the queue ``repeats`` times
under every method and write the run directory: ``spec.yaml`` (resolved),
``environment.json``, ``tasks.json`` (the queue with estimates and the profile),
``records-<method>.json`` (raw per-task records and facts of every repeat),
``runs.csv`` (a row per method and repeat), ``summary.json`` (per method the
mean of every metric and its spread as ``<metric>_sd``), ``table.md``/``table.csv``
and ``plots/``.

Resuming (``resume=True``, used by ``make colocate-gpu`` and by ``trainbed colocate
--out DIR``): a run directory that
holds a run of the same resolved spec is continued; its profile (``tasks.json``)
is kept, and a part measured already (a method's repeat in ``records-<method>.json``)
is not run again. Another spec is refused; so is other code (another commit, or
a dirty tree where the first run's was clean) unless ``force``, as sweeps do.
``repeats_now=K`` measures no repeat past the first K in this call (the first answer
of every queue before any queue's spread, where device time is short), and
``methods_now`` only those of the spec's methods (the slow ones, e.g. Default's
process per task, for a later call); the run's summary then says ``completed:
false`` and lists the parts ``left``.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, replace
from pathlib import Path

import torch
import yaml

from experiments.colocation.metrics import aggregate, group_boundaries, pmc_errors, summarize
from experiments.colocation.report import RUNS_FILE, write_report
from experiments.reports import publish_run
from experiments.colocation.spec import build_tasks, load_spec, with_arrival_times
from experiments.errors import SpecError
from experiments.platform.cpu import box_identity
from experiments.store import (ENVIRONMENT, SPEC, SUMMARY, check_same_code, git_state, point_latest, read_json,
                               record_error, resumed, start_run, write_csv, write_json)
from experiments.validation import read_yaml
from hosts.colocation.allocator import MIB, class_key, overhead_by_class, size_class
from hosts.colocation.executor import Executor, Plan, PreparedInputs, TaskRecord
from hosts.colocation.memory import TaskMemoryWatch, measure_peak
from hosts.colocation.tasks import INFERENCE, SAFETY_THRESHOLD, Task, profile_key, profiled, run_task

TASKS_FILE = "tasks.json"  # the queue with its estimates and profile, kept for a resume


def run_colocate_file(spec_path: str | Path, device: str = "cpu", out: str | Path | None = None,
                      overrides: dict | None = None, resume: bool = False, force: bool = False,
                      continue_with: Callable[[Path], str] | None = None, repeats_now: int | None = None,
                      methods_now: Collection[str] | None = None) -> Path | None:
    return run_colocate(load_spec(spec_path, overrides), device, out, resume, force, continue_with, repeats_now,
                        methods_now)


def run_colocate(spec: dict, device: str, out: str | Path | None, resume: bool = False, force: bool = False,
                 continue_with: Callable[[Path], str] | None = None, repeats_now: int | None = None,
                 methods_now: Collection[str] | None = None) -> Path | None:
    """Run a resolved spec (``resume``: continue the run in ``out``; ``repeats_now``: only
    the first repeats now; ``methods_now``: only these methods now; see above); returns
    the run directory, None where ``methods_now`` names none of the spec's methods (not
    even profiled: a minute of device time for nothing).
    ``continue_with(run)``: the caller's command that would continue the run, said as it starts."""
    if repeats_now is not None and repeats_now < 1:
        raise SpecError("--repeats-now", f"must be at least 1, got {repeats_now}")
    if methods_now is not None and not set(methods_now) & set(spec["methods"]):
        print(f"{spec['name']}: not run now: none of its methods ({', '.join(spec['methods'])}) is chosen "
              f"(--methods-now {' '.join(methods_now)})", flush=True)
        return None
    dev = resolve_device(device)
    allocatable = allocatable_bytes(spec, dev)
    tasks = build_tasks(spec)
    estimates = estimate_all(tasks, dev.type)
    needs = {t.task_id: math.ceil(estimates[t.task_id] * SAFETY_THRESHOLD[t.kind]) for t in tasks}
    for task in tasks:
        if needs[task.task_id] > allocatable:
            raise SpecError("memory.capacity_mib", (
                f"task {task.task_id} ({task.model}, {task.graph.dataset}, {task.layers} layers) needs "
                f"{needs[task.task_id] / MIB:.1f} MiB with the x{SAFETY_THRESHOLD[task.kind]} threshold, "
                f"more than the {allocatable / MIB:.1f} MiB allocatable"))

    run = _open_run(spec, dev, out, resume, force)
    env = read_json(run / ENVIRONMENT)
    print(f"run directory: {run} ({len(tasks)} tasks, {len(spec['methods'])} methods x {spec['repeats']} repeats "
          f"on {dev.type}{f'; if stopped, {continue_with(run)} continues it' if continue_with else ''})", flush=True)

    base = {"name": spec["name"], "kind": spec["kind"], "device": env["device"], "primary": spec["primary"],
            "allocatable_bytes": allocatable, "workers": spec["workers"], "tasks": len(tasks),
            "repeats": spec["repeats"], "pipeline_groups": spec["pipeline_groups"]}
    runs: dict[str, list[dict]] = {method: [] for method in spec["methods"]}
    all_records: list = []
    profile: dict = {}
    left: list[str] = []
    try:
        left = _measure(spec, dev, allocatable, tasks, estimates, needs, run, runs, all_records, profile,
                        spec["repeats"] if repeats_now is None else repeats_now,
                        spec["methods"] if methods_now is None else set(methods_now))
    except BaseException as err:  # noqa: BLE001 - recorded in summary.json with what was measured, re-raised
        failed = {**base, **profile, "methods": {method: aggregate(rows) for method, rows in runs.items() if rows}}
        record_error(run, failed, err)
        write_json(run / SUMMARY, failed)
        write_runs_csv(run / RUNS_FILE, runs)
        point_latest(run)  # results/latest and report.html, as at every runner's end, failed or not
        publish_run(run)
        raise
    methods = {method: aggregate(rows) for method, rows in runs.items() if rows}  # not those left, unmeasured
    write_runs_csv(run / RUNS_FILE, runs)
    primary = methods.get(spec["primary"], {})  # left for a later call: no headline yet
    summary = {
        "completed": not left, **({"left": left} if left else {}), **base,
        **{key: primary.get(key) for key in ("makespan_s", "makespan_s_sd", "avg_jct_s", "avg_queuing_s",
                                         "memory_violations", "median_latency_s", "p90_latency_s", "p99_latency_s",
                                         "group_boundary_s")},
        "qos_violation_rate": primary.get("qos_violation_rate"),
        **pmc_errors(all_records),
        **profile,
        "methods": methods,
    }
    write_json(run / SUMMARY, summary)
    write_report(run, summary, all_records)
    point_latest(run)
    publish_run(run)
    return run


def _open_run(spec: dict, dev: torch.device, out: str | Path | None, resume: bool, force: bool) -> Path:
    """A fresh run directory, or with ``resume`` the one in ``out`` if it holds this spec's run.
    Without ``resume``, an ``out`` holding a run is refused: its measured parts would
    be kept, unchecked, under this spec."""
    run = Path(out) if out is not None else None
    holds_run = run is not None and (run / SPEC).exists()
    if holds_run and not resume:
        raise SpecError("--out", f"{run} holds a co-location run ({SPEC}); choose a new directory")
    if not holds_run:
        return start_run(spec, out, kind="colocate", device=describe_device(dev))
    if read_yaml(run / SPEC, SPEC, "run spec") != yaml.safe_load(yaml.safe_dump(spec, sort_keys=False)):
        raise SpecError("--out", f"{run} holds a run of another spec ({SPEC} differs); choose a new directory")
    env = read_json(run / ENVIRONMENT)
    now = git_state()
    check_same_code(str(run), env, now, force)
    there, here = env["device"], describe_device(dev)
    if there != here:  # a CPU's threads, a GPU's memory and CUDA too: they change the timings
        differ = "; ".join(f"{key} {there.get(key)!r} there, {here.get(key)!r} here"
                           for key in sorted(there.keys() | here.keys()) if there.get(key) != here.get(key))
        raise SpecError("--device", f"{run} was measured on another device ({differ})")
    env["resumes"] = resumed(env, now)
    write_json(run / ENVIRONMENT, env)
    return run


def _measure(spec: dict, dev: torch.device, allocatable: int, tasks: list[Task], estimates: dict, needs: dict,
             run: Path, runs: dict[str, list[dict]], all_records: list, profile: dict,
             repeats_now: int, methods_now: Collection[str]) -> list[str]:
    """Profile the tasks alone (or keep a resumed run's profile), then run the queue
    under every method ``repeats`` times, appending to ``runs`` and ``all_records``
    as it goes (a fault keeps them); a method's repeat found in its records file
    is kept, not run again, and one not found from repeat ``repeats_now`` on, or of a
    method not in ``methods_now``, is left for a later call: returns those left, as
    "<method> repeat <n>" (1-based)."""
    inputs = PreparedInputs(spec["seed"])
    executor = Executor(dev, allocatable, spec["workers"], inputs, spec["pipeline_groups"])
    profiled = (run / TASKS_FILE).exists()
    print(f"profile: {'kept from the run directory' if profiled else f'each of the {len(tasks)} tasks alone'} ...",
          flush=True)
    plan = (_kept_profile(run, tasks, estimates, needs) if profiled
            else _profile(spec, dev, tasks, estimates, needs, inputs, executor, run))
    profile["allocator_overhead_bytes"] = overhead_by_class(
        [(t.model, estimates[t.task_id], plan.overhead_bytes[t.task_id]) for t in plan.tasks])
    raw: dict[str, list[dict]] = {}
    for method in spec["methods"]:
        path = run / f"records-{method}.json"
        raw[method] = read_json(path)["runs"] if path.exists() else []
    # Repeat outermost, so that a slow spell of a shared machine falls on every method alike.
    left = []
    for repeat in range(spec["repeats"]):
        for method in spec["methods"]:
            entry = next((e for e in raw[method] if e["repeat"] == repeat), None)
            kept = entry is not None
            if not kept and (repeat >= repeats_now or method not in methods_now):
                left.append(f"{method} repeat {repeat + 1}")
                continue
            if not kept:
                started = time.perf_counter()
                records, facts = executor.run(method, plan)
                entry = {"repeat": repeat, "facts": facts, "records": [asdict(r) for r in records],
                         "group_boundaries_s": group_boundaries(records), "wall_s": time.perf_counter() - started}
                raw[method] = sorted([*raw[method], entry], key=lambda e: e["repeat"])
                write_json(run / f"records-{method}.json", {"runs": raw[method]})
            else:
                records = [TaskRecord(**r) for r in entry["records"]]
            all_records.extend(records)
            row = _row(records, entry["facts"], entry["wall_s"])
            runs[method].append(row)
            print(f"[{repeat + 1}/{spec['repeats']}] {method:>10}: makespan {_seconds(row['makespan_s'])}, "
                  f"avg JCT {_seconds(row['avg_jct_s'])}, memory violations {row['memory_violations']}, "
                  f"failed {row['failed']}{' (measured earlier, kept)' if kept else ''}", flush=True)
    return left


def _row(records: list[TaskRecord], facts: dict, wall_s: float) -> dict:
    row = {**summarize(records), "device_peak_bytes": facts["device_peak_bytes"],
           "over_capacity_events": facts["over_capacity_events"],
           "groups": sum(len(batch) for batch in facts["groups"]) or None,
           "worker_processes": facts["worker_processes"], "device_utilization": facts["device_utilization"],
           "wall_s": wall_s}
    if "mps_daemon" in facts:
        row["mps_daemon"] = facts["mps_daemon"]
    return row


def _profile(spec: dict, dev: torch.device, tasks: list[Task], estimates: dict, needs: dict,
             inputs: PreparedInputs, executor: Executor, run: Path) -> Plan:
    """Each distinct task alone: its exact peak, inference run times (QT), and its
    allocator's overhead in a worker; the cap allows each task the largest
    overhead of its model and size class. Written to ``tasks.json``."""
    warm_up(tasks, dev, inputs)
    measured, solo = profile_alone(tasks, dev, inputs, time_it=spec["kind"] == INFERENCE)
    qt: dict[str, float] = {key: 2.0 * seconds for key, seconds in solo.items()}
    if spec["kind"] == INFERENCE:
        mean_solo = sum(solo.values()) / len(solo)
        tasks = with_arrival_times(tasks, spec["arrivals"]["tick_solo_multiple"] * mean_solo)
    overhead = executor.allocator_overheads(tasks)
    classes = overhead_by_class([(t.model, estimates[t.task_id], overhead[t.task_id]) for t in tasks])
    cap_overhead = {t.task_id: classes[class_key(t.model, estimates[t.task_id])] for t in tasks}
    write_json(run / TASKS_FILE, [
        {**t.describe(), "estimate_bytes": estimates[t.task_id], "need_bytes": needs[t.task_id],
         "measured_peak_bytes": measured[t.task_id], "solo_s": solo.get(t.task_id), "qt_s": qt.get(t.task_id),
         "size_class": size_class(estimates[t.task_id]), "allocator_overhead_bytes": overhead[t.task_id],
         "cap_overhead_bytes": cap_overhead[t.task_id]}
        for t in tasks])
    return Plan(tasks, estimates, needs, qt, measured, cap_overhead)


def _kept_profile(run: Path, tasks: list[Task], estimates: dict, needs: dict) -> Plan:
    """A resumed run's profile from its ``tasks.json``: the same arrival times, QTs,
    peaks and overheads as its earlier parts ran with."""
    kept = {t["task_id"]: t for t in read_json(run / TASKS_FILE)}
    tasks = [replace(t, arrival_s=kept[t.task_id]["arrival_s"]) for t in tasks]
    qt = {key: t["qt_s"] for key, t in kept.items() if t["qt_s"] is not None}
    return Plan(tasks, estimates, needs, qt, {key: t["measured_peak_bytes"] for key, t in kept.items()},
                {key: t["cap_overhead_bytes"] for key, t in kept.items()})


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


RUN_COLUMNS = ("makespan_s", "avg_jct_s", "avg_queuing_s", "memory_violations", "qos_violation_rate",
               "p99_latency_s", "failed", "worker_processes", "device_utilization", "wall_s")


def write_runs_csv(path: Path, runs: dict[str, list[dict]]) -> None:
    """One row per method and repeat: the data behind the means and spreads."""
    write_csv(path, [{**row, "method": method, "repeat": repeat} for method, rows in runs.items()
                     for repeat, row in enumerate(rows)], ["method", "repeat", *RUN_COLUMNS])


def resolve_device(device: str) -> torch.device:
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SpecError("--device", "cuda requested but torch.cuda.is_available() is False")
        return torch.device("cuda", torch.cuda.current_device())
    if device != "cpu":
        raise SpecError("--device", f"must be cpu or cuda, got {device!r}")
    return torch.device("cpu")


def allocatable_bytes(spec: dict, dev: torch.device) -> int:
    """MA: the declared capacity less the reserve. On a GPU the declared capacity
    may not exceed what the device has free."""
    capacity = int(spec["memory"]["capacity_mib"] * MIB)
    if dev.type == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        if capacity > free:
            raise SpecError("memory.capacity_mib",
                            f"{capacity / MIB:.0f} MiB declared but the GPU has {free / MIB:.0f} MiB free")
    return capacity - int(spec["memory"]["reserved_mib"] * MIB)


def describe_device(dev: torch.device) -> dict:
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        return {"type": "cuda", "name": props.name, "total_memory_bytes": props.total_memory,
                "torch_cuda": torch.version.cuda}
    return {"type": "cpu", "name": box_identity()["cpu_model"] or "cpu", "threads": torch.get_num_threads()}


def estimate_all(tasks: list[Task], device_type: str) -> dict[str, int]:
    cache: dict[tuple, int] = {}
    estimates = {}
    for task in tasks:
        key = (task.config, task.graph.nodes, task.graph.edges, task.kind)
        if key not in cache:
            cache[key] = task.estimate_bytes(device_type)
        estimates[task.task_id] = cache[key]
    return estimates


def warm_up(tasks: list[Task], dev: torch.device, inputs: PreparedInputs) -> None:
    """Run the smallest task of each model once, untimed: the first use of a PyG
    layer generates its code and the first kernels initialise the device, which
    would otherwise be charged to whichever method runs first."""
    smallest: dict[str, Task] = {}
    for task in tasks:
        if task.model not in smallest or task.graph.raw_bytes < smallest[task.model].graph.raw_bytes:
            smallest[task.model] = task
    for task in smallest.values():
        run_task(task, inputs.get(task.graph), dev)


def profile_alone(tasks: list[Task], dev: torch.device, inputs: PreparedInputs, time_it: bool):
    """Each distinct task run alone: its exact peak (``measure_peak``; training for
    at most two epochs, as every epoch repeats the first one's peak) and, for
    inference, its run time under the executor's watch, the faster of two runs
    (GNNSched's QT = 2 x that)."""
    peaks: dict[tuple, int] = {}
    seconds: dict[tuple, float] = {}
    measured, solo = {}, {}
    for task in tasks:
        key = profile_key(task)
        if key not in peaks:
            graph = inputs.get(task.graph)
            short = profiled(task)
            peaks[key] = measure_peak(lambda: run_task(short, graph, dev), dev)
            if time_it:
                seconds[key] = min(_timed_run(task, graph, dev) for _ in range(2))
        measured[task.task_id] = peaks[key]
        if time_it:
            solo[task.task_id] = seconds[key]
    return measured, solo


def _timed_run(task: Task, graph, dev: torch.device) -> float:
    _sync(dev)
    start = time.perf_counter()
    with TaskMemoryWatch(None, device_type=dev.type):
        run_task(task, graph, dev)
    _sync(dev)
    return time.perf_counter() - start


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
