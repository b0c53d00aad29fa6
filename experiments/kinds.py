"""The workload kinds a spec can be, each with how it is checked, run and (later)
simulated. ``KINDS`` is the registry, ``kind_of(raw)`` decides a spec's kind:

* a spec with a top-level ``kind: training|inference`` is a co-location queue
  (``colocation``), run on one GPU (or the CPU) rather than on an emulated network;
* otherwise ``workload.kind`` names the kind (``cojob``, ``gnn``, ``programs``, ``timetable``);
* a spec without a ``workload:`` section is a timetable of flows (``flows:``).

A kind's callables import their modules when called, so that reading this registry
(``trainbed run``'s dispatch, a sweep) does not load torch or the emulator:

* ``validate(raw) -> spec``: the spec checked and resolved (defaults filled), or a
  one-line ``SpecError``;
* ``run(spec, out) -> run directory``: runs a resolved spec;
* ``simulate(spec, out) -> run directory``: the same workload without an emulated
  network (``backend: simulated``); None where the kind has no simulator yet;
* ``validate_simulated(raw) -> spec``: the spec checked for the simulator, whose
  limits differ (links faster than this box can shape); None: ``validate``.

A new kind is one more ``Kind`` in ``KINDS``: its ``validate`` must accept only its
own ``workload.kind``, and its runner is usually built on
``experiments.platform.run.run_workload``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiments.errors import SpecError
from experiments.results import lookup
from experiments.store import SPEC
from experiments.validation import describe, importable_beside, read_yaml

Validate = Callable[[object], dict]
Run = Callable[[dict, "str | None"], Path]

COLOCATION_KINDS = ("training", "inference")  # a co-location spec's top-level kind


@dataclass(frozen=True)
class Kind:
    name: str
    validate: Validate
    run: Run
    simulate: Run | None = None
    validate_simulated: Validate | None = None
    summary: str = ""  # one line for ``trainbed run --help`` and ``simulate --help``
    by_workload: bool = True  # chosen by ``workload.kind`` (False: by the top-level ``kind``)
    headline: tuple[str, ...] = ()  # summary fields a sweep's table and progress lines lead with
    # (summary field, label, unit) a sweep's report compares its schedulers by; None: the
    # kind has no scheduler and compares in its results table only
    compared: tuple[str, str, str] | None = None
    file_fields: tuple[str, ...] = ()  # dotted fields naming a file (``read_spec`` anchors them)
    function_fields: tuple[str, ...] = ()  # dotted fields that may name a function of your own (module:function)


def _validate_timetable(raw) -> dict:
    from experiments.timetable.spec import validate
    return validate(raw)


def _run_timetable(spec: dict, out: str | None = None) -> Path:
    from experiments.timetable.runner import run_spec
    return run_spec(spec, out)


def _validate_cojob(raw) -> dict:
    from experiments.cojob.spec import validate
    return validate(raw)


def _run_cojob(spec: dict, out: str | None = None) -> Path:
    from experiments.cojob.runner import run_cojob_spec
    return run_cojob_spec(spec, out)


def _validate_cojob_simulated(raw) -> dict:
    from experiments.cojob.simulated import validate
    return validate(raw)


def _simulate_cojob(spec: dict, out: str | None = None) -> Path:
    from experiments.cojob.simulated import simulate_spec
    return simulate_spec(spec, out)


def _validate_gnn(raw) -> dict:
    from experiments.gnn.spec import validate
    return validate(raw)


def _run_gnn(spec: dict, out: str | None = None) -> Path:
    from experiments.gnn.runner import run_gnn_spec
    return run_gnn_spec(spec, out)


def _validate_gnn_simulated(raw) -> dict:
    from experiments.gnn.simulated import validate
    return validate(raw)


def _simulate_gnn(spec: dict, out: str | None = None) -> Path:
    from experiments.gnn.simulated import simulate_spec
    return simulate_spec(spec, out)


def _validate_programs(raw) -> dict:
    from experiments.programs.spec import validate
    return validate(raw)


def _run_programs(spec: dict, out: str | None = None) -> Path:
    from experiments.programs.runner import run_programs_spec
    return run_programs_spec(spec, out)


def _validate_colocation(raw) -> dict:
    from experiments.colocation.spec import validate  # imports torch
    return validate(raw)


def _colocation_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def _run_colocation(spec: dict, out: str | None = None) -> Path:
    from experiments.colocation.runner import run_colocate
    return run_colocate(spec, _colocation_device(), out)


def resume_colocation(raw: dict, out: str | Path) -> Path:
    """A sweep's co-location cell, continued in ``out`` where an interrupted run of it
    is (its measured repeats kept, as ``trainbed colocate --out`` keeps them), else
    run there afresh. Its spec is the cell's and its code was checked by the sweep."""
    from experiments.colocation.runner import run_colocate
    held = (Path(out) / SPEC).exists()
    return run_colocate(_validate_colocation(raw), _colocation_device(), out, resume=held, force=held)


KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind("timetable", _validate_timetable, _run_timetable,
         summary="flows started and re-prioritised at set times (a spec without workload: is one)",
         headline=("high_share_while_both", "rate_limit_achieved_mbps", "link_goodput_ratio", "mean_fct_s")),
    Kind("cojob", _validate_cojob, _run_cojob, _simulate_cojob, _validate_cojob_simulated,
         summary="cojobs of PS-trained jobs under one network scheduler", headline=("avg_sct_s", "avg_cojct_s"),
         compared=("avg_sct_s", "avg SCT", "s"),
         file_fields=("workload.trace",), function_fields=("scheduler.name",)),
    Kind("gnn", _validate_gnn, _run_gnn, _simulate_gnn, _validate_gnn_simulated,
         summary="distributed GNN training (graph stores, samplers, workers)",
         headline=("time_to_accuracy_s", "iteration_s_mean"),
         # the median: a few outlying iterations (a retransmission timeout) do not sway it
         compared=("iteration_s_median", "median iteration time", "s"),
         file_fields=("simulation.profile", "workload.placement.profile"),
         function_fields=("scheduler.name", "workload.placement.kind")),
    Kind("programs", _validate_programs, _run_programs,
         summary="your own commands on the hosts (e.g. torch.distributed), with per-flow policies",
         headline=("allreduce_over_ideal", "wall_s")),
    Kind("colocation", _validate_colocation, _run_colocation, by_workload=False,
         summary="a queue of GNN tasks co-located on one GPU (top-level kind: training or inference)",
         headline=("makespan_s", "avg_jct_s")),
)}


def workload_kinds() -> list[str]:
    """The names ``workload.kind`` may take."""
    return sorted(name for name, kind in KINDS.items() if kind.by_workload)


def is_colocation(raw) -> bool:
    """A co-location spec: a mapping whose top-level kind is training or inference."""
    return isinstance(raw, dict) and isinstance(raw.get("kind"), str) and raw["kind"] in COLOCATION_KINDS


def read_spec(path, field: str = "spec", what: str = "file") -> object:
    """A spec file's contents (``read_yaml``'s one-line errors), its kind's file fields
    (``Kind.file_fields``) that are relative and name a file beside the spec made
    absolute: a spec kept with its own profile or trace names it as it lies. One that
    names no file there is left to its kind, which reads it from the checkout (the
    shipped specs' ``measurements/...``). A function of your own (``Kind.function_fields``,
    ``module:function``) whose module lies beside the spec is found there."""
    raw = read_yaml(path, field, what)
    try:
        kind = kind_of(raw)
    except SpecError:  # the kind's own check says what is wrong, at validation
        return raw
    here = Path(path).absolute().parent
    for dotted in kind.file_fields:
        parent, _, leaf = dotted.rpartition(".")
        node = lookup(raw, parent)
        value = node.get(leaf) if isinstance(node, dict) else None
        try:
            beside = isinstance(value, str) and value and not Path(value).is_absolute() and (here / value).is_file()
        except (OSError, ValueError):  # a name too long, a NUL: the kind's check names it
            beside = False
        if beside:
            node[leaf] = str(here / value)
    for dotted in kind.function_fields:  # a function of your own kept beside the spec
        importable_beside(dotted, lookup(raw, dotted), here)
    return raw


def kind_of(raw) -> Kind:
    """The kind of a parsed spec (see the module docstring), or a one-line SpecError
    for a top-level ``kind`` or a ``workload:`` section that names none, or a sweep file. Anything
    else about the spec is left to the kind's own ``validate`` (a spec that is not a
    mapping at all is a timetable's error: ``spec: must be a mapping``)."""
    if is_colocation(raw):
        return KINDS["colocation"]
    if isinstance(raw, dict) and "spec" in raw and not {"flows", "workload"} & set(raw) \
            and {"schedulers", "seeds", "grid", "parts"} & set(raw):
        raise SpecError("spec", "this is a sweep file (its spec: names a base spec): run it with trainbed sweep "
                                "(--dry-run checks it)")
    known = ", ".join(workload_kinds())
    if isinstance(raw, dict) and "kind" in raw and "workload" not in raw:
        raise SpecError("kind", f"must be {' or '.join(COLOCATION_KINDS)} (a co-location spec), got "
                                f"{describe(raw['kind'])}; other kinds are set by workload.kind ({known})")
    if not (isinstance(raw, dict) and "workload" in raw):
        return KINDS["timetable"]
    workload = raw["workload"]
    if not isinstance(workload, dict):
        raise SpecError("workload", f"must be a mapping, got {describe(workload)}")
    if "kind" not in workload:
        raise SpecError("workload.kind", f"is required (one of {known})")
    name = workload["kind"]
    if not isinstance(name, str):
        raise SpecError("workload.kind", f"must be the name of a workload kind ({known}), got {describe(name)}")
    kind = KINDS.get(name)
    if kind is None:
        raise SpecError("workload.kind", f"unknown workload kind {describe(name)} (known: {known})")
    if not kind.by_workload:
        raise SpecError("workload.kind", f"{name!r} is not a workload kind: a co-location spec has a top-level "
                                         f"kind: {' or '.join(COLOCATION_KINDS)} (and no workload section)")
    return kind


def simulator_names() -> list[str]:
    """The kinds that have a simulator (``trainbed simulate``, ``backend: simulated``)."""
    return [name for name, k in KINDS.items() if k.simulate is not None]


def simulated_kind(raw) -> Kind:
    """The kind of ``raw`` if it can be simulated (``backend: simulated``), else a
    one-line SpecError naming the kinds that can."""
    if not isinstance(raw, dict):
        raise SpecError("spec", f"must be a mapping, got {describe(raw)}")
    kind = kind_of(raw)
    if kind.simulate is None:
        available = ", ".join(simulator_names()) or "none yet"
        raise SpecError("backend", f"simulated is not available for workload kind {kind.name!r} "
                                   f"(available: {available})")
    return kind
