"""Specs of the ``cojob`` workload kind: cojobs of PS-trained jobs, one scheduler.

Format (docs/specs.md, "Cojob specs")::

    name: grouper-smoke
    topology: {kind: leaf_spine, ...}
    seed: 1
    time_limit_s: 600              # the run is stopped (completed: false) past this
    tcp_congestion: bbr
    workload:
      kind: cojob
      models: [deepspeech2, vgg19] # testbed arrivals: one cojob per model at t=0 ...
      cojobs_per_model: 1          # ... and the next one of a model after stage S-2
      # arrivals: {kind: poisson, cojobs: 12, mean_interarrival_s: 600, workload_factor: 1.5}
      #   or {kind: weibull, ..., shape: 0.5}: Weibull gaps (bursty below 1)
      # comm_comp_ratio: 1.0       # DeepSpeech2's comm/comp ratio; sets every model's compute
      jobs: 2                      # per cojob: 2^(stages-1)
      stage_iterations: [3, 6]     # x iterations_scale (default 1) = run iterations
      workers: 2
      ps: 2
      bytes_scale: 0.002           # of the model's bytes per iteration
      # or: trace: ../shared/data/grouper-trace.json (relative to the checkout)
      #     cojobs: 4                # with a trace: its first 4 cojobs by arrival
    scheduler: {name: grouper, period_s: 2.0}   # or name: module:function, your own stage order
    fidelity: {...}
    emulation: {...}

Compute time per iteration follows ``experiments.cojob.workload.Scaling``: the
testbed's comm/comp ratio at 1 Gbit/s is kept at the emulated host rate.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

from experiments.cojob import scheduling
from experiments.cojob import workload as cojob_mod
from experiments.errors import SpecError
from experiments.platform import spec as emulation_spec
from experiments.store import REPO_ROOT
from experiments.validation import (OWN_FUNCTION, ROOT, choice, existing_file, host_name, integer, items, mapping,
                                   nearest, number, own_function, word)
from topologies.fabric import Fabric

TOP_FIELDS = emulation_spec.COMMON_FIELDS | {"seed", "time_limit_s", "workload", "scheduler"}
WORKLOAD_FIELDS = {"kind", "models", "cojobs_per_model", "jobs", "stage_iterations", "workers", "ps", "bytes_scale",
                   "iterations_scale", "trace", "cojobs", "arrivals", "only_cojob", "comm_comp_ratio", "placement"}
MODEL_FIELDS = ("models", "cojobs_per_model", "jobs", "stage_iterations", "arrivals")  # cojobs drawn, not a trace's
ARRIVAL_FIELDS = {"kind", "cojobs", "mean_interarrival_s", "workload_factor", "shape"}
ARRIVAL_KINDS = ("testbed", "poisson", "weibull")
PLACEMENT_KINDS = ("spread", "gpu_servers", "gpu_slots")
MAX_GPUS_PER_HOST = 64
# sincronia is the paper's baseline (one coflow per job and iteration); sincronia-stage
# runs the same BSSI over cojob stages, which is not the paper's (scheduling.py).
SCHEDULERS = ("fs", "baraat", "sincronia", "sincronia-stage", "grouper", "grouper-immediate", "grouper-offline")
# ... or the researcher's own stage order as module:function (scheduling.OWN_SIGNATURE).
SCHEDULER_FIELDS = {"name", "period_s"}
# Bounds that keep a spec emulatable on one box (and its validation fast).
MAX_STAGES = 8  # successive halving: 2^(stages-1) jobs per cojob
MAX_COJOBS = 200
MAX_STAGE_ITERATIONS = 100_000


def scheduler_name(value) -> str:
    """``scheduler.name``: one of ``SCHEDULERS``, or an importable ``module:function``
    (checked here, so a run never starts with a scheduler it cannot call)."""
    if isinstance(value, str) and OWN_FUNCTION.fullmatch(value):
        try:
            own_function(value, scheduling.OWN_SIGNATURE, 2)
        except ValueError as err:
            raise SpecError("scheduler.name", str(err)) from None
        return value
    if isinstance(value, str) and value not in SCHEDULERS:
        near = nearest(value, SCHEDULERS)
        raise SpecError("scheduler.name", f"must be one of {', '.join(SCHEDULERS)} or a scheduler of your own "
                                          f"as module:function, got {value!r}{f'; did you mean {near}?' if near else ''}")
    return choice("scheduler.name", value, SCHEDULERS)


def validate(raw, simulated: bool = False) -> dict:
    """Check a cojob spec and return it resolved (defaults filled); ``simulated``: for
    the simulator, which alone places jobs as they are admitted (``gpu_slots``)."""
    spec = mapping(ROOT, raw, allowed=TOP_FIELDS, required=("name", "topology", "workload", "scheduler"))
    common = emulation_spec.validate_common(spec)
    workload = mapping("workload", spec["workload"], allowed=WORKLOAD_FIELDS, required=("kind",))
    choice("workload.kind", workload["kind"], ("cojob",))
    resolved_workload = {"kind": "cojob",
                         "workers": integer("workload.workers", workload.get("workers", 2), minimum=1, maximum=16),
                         "ps": integer("workload.ps", workload.get("ps", 2), minimum=1, maximum=16),
                         "bytes_scale": number("workload.bytes_scale", workload.get("bytes_scale", 0.01),
                                               minimum=0, strict=True),
                         "iterations_scale": number("workload.iterations_scale",
                                                    workload.get("iterations_scale", 1.0), minimum=0, strict=True)}
    if workload.get("only_cojob") is not None:
        resolved_workload["only_cojob"] = integer("workload.only_cojob", workload["only_cojob"], minimum=0)
    if workload.get("trace") is not None:
        if workload.get("comm_comp_ratio") is not None:
            raise SpecError("workload.comm_comp_ratio", "only with models (a trace gives its own compute times)")
        for name in MODEL_FIELDS:  # a trace gives its own cojobs: these would be ignored
            if workload.get(name) is not None:
                raise SpecError(f"workload.{name}", "not with a trace (it gives its own cojobs, jobs, stages "
                                                    "and arrivals)")
        trace = existing_file("workload.trace", workload["trace"], base=REPO_ROOT)  # relative to the checkout
        resolved_workload["trace"] = str(trace)
        if workload.get("cojobs") is not None:
            resolved_workload["cojobs"] = integer("workload.cojobs", workload["cojobs"], minimum=1,
                                                  maximum=MAX_COJOBS)
        if workload.get("placement") is not None:
            raise SpecError("workload.placement", "only with models (a trace places its own jobs)")
    elif "cojobs" in workload:
        raise SpecError("workload.cojobs", "only with a trace (the first N of its cojobs by arrival)")
    else:
        models = []
        for path, value in items("workload.models", workload.get("models", list(cojob_mod.MODELS)), non_empty=True):
            model = choice(path, value, cojob_mod.MODELS, what="model")
            if model in models:  # a cojob per model: a second mention would make no second cojob
                raise SpecError(path, f"duplicate model {model!r}")
            models.append(model)
        stages = [integer(p, v, minimum=1, maximum=MAX_STAGE_ITERATIONS) for p, v in
                  items("workload.stage_iterations", workload.get("stage_iterations", list(cojob_mod.TESTBED_STAGES)),
                        non_empty=True)]
        if len(stages) > MAX_STAGES:
            raise SpecError("workload.stage_iterations", f"at most {MAX_STAGES} stages, got {len(stages)}")
        jobs = integer("workload.jobs", workload.get("jobs", 2 ** (len(stages) - 1)), minimum=1)
        if jobs != 2 ** (len(stages) - 1):
            raise SpecError("workload.jobs", f"successive halving over {len(stages)} stages needs "
                                             f"{2 ** (len(stages) - 1)} jobs, got {jobs}")
        resolved_workload["placement"] = _placement(workload.get("placement"), common, simulated)
        resolved_workload.update(models=models, stage_iterations=stages, jobs=jobs,
                                 cojobs_per_model=integer("workload.cojobs_per_model",
                                                          workload.get("cojobs_per_model", 1), minimum=1,
                                                          maximum=MAX_COJOBS),
                                 arrivals=_arrivals(workload.get("arrivals")))
        if workload.get("comm_comp_ratio") is not None:
            resolved_workload["comm_comp_ratio"] = number("workload.comm_comp_ratio", workload["comm_comp_ratio"],
                                                          minimum=0, maximum=1000, strict=True)
    scheduler = mapping("scheduler", spec["scheduler"], allowed=SCHEDULER_FIELDS, required=("name",))
    resolved_scheduler = {"name": scheduler_name(scheduler["name"]),
                          "period_s": number("scheduler.period_s", scheduler.get("period_s", 2.0), minimum=0,
                                             strict=True)}
    resolved = {**common, "seed": emulation_spec.validate_seed(spec),
                "time_limit_s": emulation_spec.validate_time_limit(spec, 1800),
                "workload": resolved_workload, "scheduler": resolved_scheduler}
    _check_cojobs(resolved)
    if not simulated:
        _check_time_limit(resolved)
    return resolved


def _check_time_limit(spec: dict) -> None:
    """A run that cannot end within ``time_limit_s`` is refused before it starts: each
    generated cojob's last job alone computes every stage's iterations (the scaled
    stages, at the slowest host link's time scale), a bound that sending only adds to.
    A trace's stages are the trace's: left to the run."""
    w = spec["workload"]
    if "trace" in w:
        return
    models = [cojob_mod.MODELS[name] for name in w["models"]]
    if "comm_comp_ratio" in w:
        models = [cojob_mod.at_comm_comp_ratio(m, w["comm_comp_ratio"]) for m in models]
    iterations = sum(cojob_mod.scaled_stages(w["stage_iterations"], w["iterations_scale"]))
    per_iteration = min(m.compute_s for m in models) * build_scaling(spec).time_scale
    least = iterations * per_iteration
    if least > spec["time_limit_s"]:
        raise SpecError("time_limit_s", f"{spec['time_limit_s']:g} s cannot hold the run: a cojob's last job alone "
                                        f"computes {iterations} iterations of at least {per_iteration:.3g} s, "
                                        f"{least:.0f} s (workload.stage_iterations x iterations_scale); raise it "
                                        f"or shorten the stages")


def _check_cojobs(spec: dict) -> None:
    """What only the workload's cojobs tell, checked without building them (a sweep
    validates every cell): a trace's contents, read as a run reads them and against the
    topology's hosts, that a ``gpu_slots`` cluster holds its PSs and a cojob's stage 0,
    and that ``only_cojob`` is one of the run's cojobs. Cojob ids
    are 0..n-1 for generated arrivals (``testbed_cojobs``, ``poisson_cojobs``, ...)
    and the trace's own, by arrival, for a trace."""
    w = spec["workload"]
    hosts = tuple(h.name for h in emulation_spec.fabric_of(spec).hosts)
    if "trace" in w:
        ids = _trace_cojob_ids(w["trace"], hosts)[:w.get("cojobs")]
    elif w["arrivals"]["kind"] == "testbed":
        ids = tuple(range(len(w["models"]) * w["cojobs_per_model"]))
    else:
        ids = tuple(range(w["arrivals"]["cojobs"]))
    placement = w.get("placement", {"kind": "spread"})
    if placement["kind"] == "gpu_slots" and "trace" not in w:  # every generated cojob has w["jobs"] jobs
        cojob_mod.GpuCluster(hosts, {}, placement["gpus_per_host"], w["workers"], w["ps"], spec["seed"]) \
            .check_jobs(w["jobs"])
    only = w.get("only_cojob")
    if only is not None and only not in ids:
        have = f"0..{len(ids) - 1}" if ids == tuple(range(len(ids))) else ", ".join(map(str, sorted(ids)))
        have = have if len(have) <= 80 else have[:77] + "..."
        raise SpecError("workload.only_cojob", f"no cojob {only} (have {have})")


def _trace_cojob_ids(path: str, hosts: tuple[str, ...]) -> tuple[int, ...]:
    """The trace's cojob ids in the order a run takes its first ``cojobs`` (by arrival,
    then id), or its first problem as a ``workload.trace`` error. Cached by the file's
    modification time and size: a sweep's cells share one trace."""
    try:
        stat = os.stat(path)
        version = (stat.st_mtime_ns, stat.st_size)
    except (OSError, ValueError):
        version = None  # load_trace says why
    ids, problem = _trace_ids(path, version, hosts)
    if problem is not None:
        raise SpecError("workload.trace", problem)
    return ids


@functools.lru_cache(maxsize=8)
def _trace_ids(path: str, _version, hosts: tuple[str, ...]) -> tuple[tuple[int, ...], str | None]:
    """(ids, None), or ((), the problem) for a trace a run would refuse."""
    try:
        trace = cojob_mod.load_trace(path, hosts)
    except SpecError as err:  # a field of the trace file, not of the spec, is named in the problem
        if err.field in ("workload.trace", "hosts"):
            return (), err.problem
        return (), f"the trace {err.problem}" if err.field == "trace" else f"the trace's {err.field} {err.problem}"
    return tuple(plan.cojob_id for plan in _by_arrival(trace.cojobs)), None


def _by_arrival(plans) -> list[cojob_mod.CojobPlan]:
    """A trace's cojobs in the order its first ``cojobs`` are taken: by arrival, then id."""
    return sorted(plans, key=lambda plan: (plan.arrival.at_s, plan.cojob_id))


def _placement(raw, common: dict, simulated: bool) -> dict:
    """``spread`` (every task over every host: fewest of its job's tasks, then racks,
    then load), ``{kind: gpu_servers, gpu_hosts: [...]}``: the paper's testbed
    (§V-A), workers on the GPU servers and PSs on the CPU servers (every other host),
    or ``{kind: gpu_slots, gpus_per_host: 4}``: the paper's simulated cluster (§V-C),
    every host a GPU server, cojobs admitted as GPUs free up (``workload.GpuSlots``;
    simulator only: the emulated tasks start with their cojob's placement known)."""
    if raw is None or raw == "spread":
        return {"kind": "spread"}
    if not isinstance(raw, dict):
        raise SpecError("workload.placement", f"must be spread or a mapping {{kind: gpu_servers, gpu_hosts: [...]}}, "
                                              f"got {raw!r:.60}")
    placement = mapping("workload.placement", raw, allowed={"kind", "gpu_hosts", "gpus_per_host"}, required=("kind",))
    kind = choice("workload.placement.kind", placement["kind"], PLACEMENT_KINDS)
    if "gpus_per_host" in placement and kind != "gpu_slots":
        raise SpecError("workload.placement.gpus_per_host", "only for gpu_slots placement")
    if kind == "gpu_slots":
        if not simulated:
            raise SpecError("workload.placement.kind", "gpu_slots runs only on the simulator (backend: simulated, "
                                                       "trainbed simulate)")
        if "gpu_hosts" in placement:
            raise SpecError("workload.placement.gpu_hosts", "only for gpu_servers placement")
        return {"kind": kind, "gpus_per_host": integer("workload.placement.gpus_per_host",
                                                       placement.get("gpus_per_host", 4), minimum=1,
                                                       maximum=MAX_GPUS_PER_HOST)}
    if kind == "spread":
        if "gpu_hosts" in placement:
            raise SpecError("workload.placement.gpu_hosts", "only for gpu_servers placement")
        return {"kind": kind}
    if "gpu_hosts" not in placement:
        raise SpecError("workload.placement.gpu_hosts", "is required for gpu_servers placement")
    hosts = [h.name for h in emulation_spec.fabric_of(common).hosts]  # only this kind names hosts
    gpu_hosts = []
    for path, host in items("workload.placement.gpu_hosts", placement["gpu_hosts"], non_empty=True):
        host_name(path, word(path, host), hosts)
        if host in gpu_hosts:
            raise SpecError(path, f"duplicate host {host!r}")
        gpu_hosts.append(host)
    if len(gpu_hosts) == len(hosts):
        raise SpecError("workload.placement.gpu_hosts", "leaves no host for the parameter servers")
    return {"kind": kind, "gpu_hosts": gpu_hosts}


def _arrivals(raw) -> dict:
    """``testbed`` (one cojob per model at 0, the next of a model after stage S-2),
    ``poisson`` or ``weibull`` (seeded; testbed seconds between arrivals divided by
    the workload factor; a Weibull's ``shape`` below 1 makes them bursty)."""
    arrivals = mapping("workload.arrivals", raw, allowed=ARRIVAL_FIELDS, optional=True)
    kind = choice("workload.arrivals.kind", arrivals.get("kind", "testbed"), ARRIVAL_KINDS)
    if kind == "testbed":
        if set(arrivals) - {"kind"}:
            raise SpecError("workload.arrivals",
                            "testbed arrivals take no other field (cojobs_per_model sets the count)")
        return {"kind": kind}
    for required in ("cojobs", "mean_interarrival_s") + (("shape",) if kind == "weibull" else ()):
        if required not in arrivals:
            raise SpecError(f"workload.arrivals.{required}", f"is required for {kind} arrivals")
    if kind == "poisson" and "shape" in arrivals:
        raise SpecError("workload.arrivals.shape", "only for weibull arrivals (a Poisson process has none)")
    shape = {} if kind == "poisson" else {
        "shape": number("workload.arrivals.shape", arrivals["shape"], minimum=0.05, maximum=20)}
    return {"kind": kind, **shape, "cojobs": integer("workload.arrivals.cojobs", arrivals["cojobs"], minimum=1,
                                           maximum=MAX_COJOBS),
            "mean_interarrival_s": number("workload.arrivals.mean_interarrival_s", arrivals["mean_interarrival_s"],
                                          minimum=0, strict=True),
            "workload_factor": number("workload.arrivals.workload_factor", arrivals.get("workload_factor", 1.0),
                                      minimum=0, strict=True)}


@dataclass(frozen=True)
class CojobRun:
    """A cojob spec resolved once: its fabric, its cojobs placed on that fabric and
    how they are scaled; what the driver, the simulator and the analysis read."""

    spec: dict
    fabric: Fabric
    workload: cojob_mod.Workload
    scaling: cojob_mod.Scaling


def resolve(spec: dict, fabric: Fabric | None = None) -> CojobRun:
    """A validated spec's run; ``fabric``: the spec's, when already built."""
    fabric = fabric or emulation_spec.fabric_of(spec)
    return CojobRun(spec, fabric, build_workload(spec, fabric), build_scaling(spec, fabric))


def build_scaling(spec: dict, fabric: Fabric | None = None) -> cojob_mod.Scaling:
    """How the spec's run shrinks the testbed workload: at the slowest host link."""
    w = spec["workload"]
    fabric = fabric or emulation_spec.fabric_of(spec)
    link_mbps = min(fabric.host_mbps().values())
    return cojob_mod.Scaling(link_mbps, w["bytes_scale"], w["iterations_scale"])


def build_workload(spec: dict, fabric: Fabric | None = None) -> cojob_mod.Workload:
    """The cojobs of the spec, placed on the fabric's hosts (racks = leaves).

    With ``only_cojob`` the run is a solo calibration: that one cojob, arriving at 0,
    on exactly the hosts it has in the full workload (for Fig. 10's stage slowdown)."""
    full = _build_full(spec, fabric or emulation_spec.fabric_of(spec))
    only = spec["workload"].get("only_cojob")
    if only is None:
        return full
    plans = [plan for plan in full.cojobs if plan.cojob_id == only]
    if not plans:
        raise SpecError("workload.only_cojob", f"no cojob {only} (have 0..{len(full.cojobs) - 1})")
    plan = replace(plans[0], arrival=cojob_mod.Arrival(at_s=0.0))
    keys = {job.key for job in plan.jobs}
    # On a GPU cluster the solo cojob is placed as admitted into the empty cluster: the
    # same packing, though not always the same hosts as in the full run (run-dependent).
    return cojob_mod.Workload((plan,), {k: v for k, v in full.placements.items() if k in keys},
                              f"{full.source}, cojob {only} alone", full.gpus)


def _build_full(spec: dict, fab: Fabric) -> cojob_mod.Workload:
    hosts = [h.name for h in fab.hosts]
    racks = {h.name: h.switch for h in fab.hosts}
    w = spec["workload"]
    if "trace" in w:
        trace = cojob_mod.load_trace(w["trace"], hosts)
        first = _by_arrival(trace.cojobs)[:w.get("cojobs")]
        keys = {job.key for plan in first for job in plan.jobs}
        plans = tuple(replace(plan, stage_iterations=cojob_mod.scaled_stages(plan.stage_iterations,
                                                                             w["iterations_scale"]))
                      for plan in first)
        source = trace.source if "cojobs" not in w else f"{trace.source}, first {len(first)} cojobs"
        return cojob_mod.Workload(plans, {k: v for k, v in trace.placements.items() if k in keys}, source)
    models = {name: cojob_mod.MODELS[name] for name in w["models"]}
    if "comm_comp_ratio" in w:
        models = {name: cojob_mod.at_comm_comp_ratio(profile, w["comm_comp_ratio"]) for name, profile in models.items()}
    arrivals = w["arrivals"]
    stages = cojob_mod.scaled_stages(w["stage_iterations"], w["iterations_scale"])
    if arrivals["kind"] == "poisson":
        plans = cojob_mod.poisson_cojobs(arrivals["cojobs"], arrivals["mean_interarrival_s"],
                                         arrivals["workload_factor"], spec["seed"], models, w["jobs"], stages)
    elif arrivals["kind"] == "weibull":
        plans = cojob_mod.weibull_cojobs(arrivals["cojobs"], arrivals["mean_interarrival_s"],
                                         arrivals["workload_factor"], arrivals["shape"], spec["seed"], models,
                                         w["jobs"], stages)
    else:
        plans = cojob_mod.testbed_cojobs(w["cojobs_per_model"], spec["seed"], models, w["jobs"], stages)
    placement = w.get("placement", {"kind": "spread"})
    if placement["kind"] == "gpu_slots":
        gpus = cojob_mod.GpuCluster(tuple(hosts), racks, placement["gpus_per_host"], w["workers"], w["ps"],
                                    spec["seed"])
        return cojob_mod.Workload(tuple(plans), {}, f"{arrivals['kind']} arrivals, gpu_slots placement "
                                                    f"({placement['gpus_per_host']} GPUs per host)", gpus)
    return cojob_mod.placed(plans, hosts, racks, source=f"{arrivals['kind']} arrivals, {placement['kind']} placement",
                            workers=w["workers"], ps=w["ps"], seed=spec["seed"],
                            worker_hosts=placement.get("gpu_hosts"))
