"""Specs of the ``gnn`` workload kind: distributed GNN training (graph stores, samplers,
workers, parameter servers or ring all-reduce) on the emulated hosts, one scheduler.

Format (defaults in comments)::

    name: gnn-oes-smoke
    description: ...
    topology: {kind: star, hosts: 3, host_mbps: 100}   # any kind; host_mbps_overrides for uneven NICs
    seed: 1                      # 0
    time_limit_s: 300            # 1800; the run is stopped (completed: false) past this
    tcp_congestion: bbr          # bbr (or cubic, reno)
    workload:
      kind: gnn
      graph: {shape: ogbn-products, nodes: 4000, avg_degree: 10}
                                 # shape: one of hosts.gnn.graphs.SHAPES (required); nodes
                                 # (required): 2 x classes .. 2,000,000; avg_degree: null = the shape's
      fanouts: [5, 10, 15]       # the shape's; 1..4 hops of 1..100 neighbours
      batch_size: 32             # 32: seeds per sampler per iteration
      workers: 2                 # 2 (1..32; the paper's papers100M simulation has 20)
      samplers_per_worker: 1     # 1 (1..8)
      sync: ps                   # ps | allreduce
      ps: 1                      # 1 (1..8) with ps; absent or 0 with allreduce
      hidden: 256                # 256 (8..4096)
      lr: 0.001                  # 0.001
      iterations: 30             # 30: at most this many iterations per worker
      target_accuracy: 0.8       # null (every iteration runs); else stop when validation accuracy reaches it
      eval_every: 5              # 5: iterations between evaluations
      eval_nodes: 200            # 200: validation seeds per evaluation
      profile: false             # false
      machines:                  # per host: {cpus: 8, memory_gb: 32, gpus: 0}
        tbh1: {cpus: 4, memory_gb: 16}
      task_resources:            # per task kind, see TASK_DEFAULTS
        worker: {cpus: 2}
      compute_factor:            # per host, 1 (1..100): its tasks compute this many times as long
        tbh3: 2.0                # (a slower machine: the task sleeps (factor - 1) x each compute step)
      placement: distdgl         # distdgl | distdgl-fast-ps | spread | {task id: host, ...} (explicit)
                                 # | {kind: etp, profile: PATH, steps: 10000, seed: 0, pick: makespan}:
                                 # DGTP's search (experiments.gnn.search) on that profile, resolved
                                 # here; pick: cost judges the candidates by Eq. 27, not the model;
                                 # verify_best: K judges only IFS's and the K - 1 least-cost ones
                                 # | {kind: ifs, profile: PATH}: IFS alone (the search's start)
                                 # | {kind: module:function, profile: PATH}: your own, on ETP's problem
    scheduler: {name: oes}       # oes | default | omcoflow | mrtf (the paper's baselines) | fair
                                 # | module:function (your own rate policy)
    simulation:                  # the job's model (experiments.gnn.simulated): what it reads
      profile: results/run-.../profile.json   # a profile: true run's; relative to the checkout
    fidelity: {...}
    emulation: {...}

``simulation.profile`` is required by ``trainbed simulate`` (``validate_simulated``:
the profile is loaded and checked against the job there); an emulated run with it
predicts its iteration time from that profile instead of from its own events.

The resolved spec's ``workload.placement`` is ``{"kind": ..., "tasks": {task id:
host}}`` with every task, stores included, in ``placement.task_ids`` order (see
``experiments.gnn.placement`` for the task ids and the policies); an ``etp`` placement
resolves to ``{"kind": "etp", "profile": resolved path, "steps": n, "seed": s, "pick", "verify_best", "cost",
"makespan_s", "candidates", "search_s", "tasks": {...}}`` (an ``ifs`` one to ``{"kind":
"ifs", "profile", "tasks"}``), its tasks checked as an explicit placement's (capacities kept); ``machines`` has
every host, ``task_resources`` every task kind, each with all three resources.
"""
from __future__ import annotations

import math
import sys

from controller.schedulers.placement.problem import check_placement
from experiments.errors import PluginError, SpecError, one_line
from experiments.gnn import placement as placement_mod
from experiments.platform import spec as emulation_spec
from experiments.store import REPO_ROOT
from experiments.validation import (
    OWN_FUNCTION,
    ROOT,
    at,
    boolean,
    choice,
    describe,
    existing_file,
    for_errors_only,
    host_name,
    integer,
    items,
    mapping,
    nearest,
    number,
    own_function,
    relocate,
    shown_path,
    string,
)
from hosts.gnn.graphs import SHAPES, DatasetShape

TOP_FIELDS = emulation_spec.COMMON_FIELDS | {"seed", "time_limit_s", "workload", "scheduler", "simulation"}
SIMULATION_FIELDS = {"profile"}
WORKLOAD_FIELDS = {"kind", "graph", "fanouts", "batch_size", "workers", "samplers_per_worker", "sync", "ps", "hidden",
                   "lr", "iterations", "target_accuracy", "eval_every", "eval_nodes", "profile", "machines",
                   "task_resources", "compute_factor", "placement"}
GRAPH_FIELDS = {"shape", "nodes", "avg_degree"}
SYNCS = ("ps", "allreduce")
# each but default (TCP's own sharing, nothing installed) is a rate policy of
# oes.rate_policies; fair installs max-min fair rates (OES's mechanism without its rates)
SCHEDULERS = ("oes", "default", "omcoflow", "mrtf", "fair")
# ... or the researcher's own rate policy, "module:function" (validation.own_function
# says where it is found): a function of oes.rate_policies' signature, (machines, flows)
# -> {flow id: Mbit/s}, a rate >= 0 for every flow it is given (0 holds a flow at
# coordinator.WAITING_MBPS, as the built-in policies do), run by the emulation's driver
# and by the job's model alike, its answers checked (``_checked``).
OWN_SIGNATURE = "(machines, flows) -> {flow id: Mbit/s}"


def rate_policy(name: str):
    """The rate policy a scheduler name stands for (None for ``default``: TCP's own
    sharing, nothing installed); ValueError (one line) for a name that is neither one
    of ``SCHEDULERS`` nor an importable ``module:function``."""
    from controller.schedulers import oes  # pylint: disable=import-outside-toplevel  # the baselines import it
    if name == "default":
        return None
    policies = oes.rate_policies()
    if isinstance(name, str) and name in policies:
        return policies[name]
    if not (isinstance(name, str) and OWN_FUNCTION.fullmatch(name)):
        near = nearest(name, SCHEDULERS) if isinstance(name, str) else None
        raise ValueError(f"must be one of {', '.join(SCHEDULERS)} or a rate policy of your own as module:function, "
                         f"got {name!r}{f'; did you mean {near}?' if near else ''}")
    return _checked(name, own_function(name, OWN_SIGNATURE, 2))


def _checked(name: str, policy):
    """``policy`` whose answers are checked: whatever it raises, or a wrong answer, is a
    PluginError naming it (the run fails with that line)."""
    def checked(machines, flows):
        try:
            rates = policy(list(machines), list(flows))
        except Exception as err:  # pylint: disable=broad-except  # a plug-in's failure, reported with its name
            raise PluginError(f"scheduler {name} raised {one_line(err)}") from err
        if not isinstance(rates, dict):
            raise PluginError(f"scheduler {name} must return {{flow id: Mbit/s}}, got {describe(rates)}")
        given = [flow.flow_id for flow in flows]
        unknown = sorted(set(rates) - set(given), key=str)
        missing = [fid for fid in given if fid not in rates]
        if unknown or missing:
            raise PluginError(f"scheduler {name} " + (f"returned a rate for unknown flow {unknown[0]!r}" if unknown
                               else f"gave no rate to flow {missing[0]!r} (every flow it is given needs one; "
                                    "0 holds it)"))
        for fid, mbps in rates.items():
            if isinstance(mbps, bool) or not isinstance(mbps, (int, float)) or not 0 <= mbps < math.inf:
                raise PluginError(f"scheduler {name} returned {describe(mbps)} for flow {fid!r}: a rate must be "
                                   "a number >= 0 (Mbit/s)")
        return rates
    checked.__name__ = checked.__qualname__ = name
    return checked


SCHEDULER_FIELDS = {"name"}
MACHINE_DEFAULTS = {"cpus": 8.0, "memory_gb": 32.0, "gpus": 0}
TASK_DEFAULTS = {"store": {"cpus": 1.0, "memory_gb": 2.0, "gpus": 0},
                 "sampler": {"cpus": 1.0, "memory_gb": 2.0, "gpus": 0},
                 "worker": {"cpus": 1.0, "memory_gb": 3.0, "gpus": 0},
                 "ps": {"cpus": 1.0, "memory_gb": 2.0, "gpus": 0}}
DEFAULTS = {"batch_size": 32, "workers": 2, "samplers_per_worker": 1, "sync": "ps", "ps": 1, "hidden": 256,
            "lr": 0.001, "iterations": 30, "target_accuracy": None, "eval_every": 5, "eval_nodes": 200,
            "profile": False, "placement": "distdgl"}
# Bounds that keep a job emulatable on one box (and its validation fast).
MAX_NODES = 2_000_000
MAX_WORKERS = 32
MAX_AVG_DEGREE = 1000.0
MAX_HOPS = 4
MAX_FANOUT = 100
MAX_CPUS = 1024.0
MAX_MEMORY_GB = 65536.0
MAX_GPUS = 64


def validate(raw) -> dict:
    """Check a gnn spec and return it resolved (defaults filled, every task placed)."""
    spec = mapping(ROOT, raw, allowed=TOP_FIELDS, required=("name", "topology", "workload", "scheduler"))
    common = emulation_spec.validate_common(spec)
    if common["emulation"]["queue_weights"]:
        raise SpecError("emulation.queue_weights", "a gnn job's flows share one queue (its schedulers set rates, "
                                                   "not queues): weights would change only that queue's guarantee, "
                                                   "which the job's model takes as strict priority's: remove it")
    hosts = [h.name for h in emulation_spec.fabric_of(common).hosts]
    workload = mapping("workload", spec["workload"], allowed=WORKLOAD_FIELDS, required=("kind", "graph"))
    choice("workload.kind", workload["kind"], ("gnn",))

    def field(name: str):
        return workload.get(name, DEFAULTS[name])

    graph, shape = _graph(workload["graph"])
    fanouts = [integer(p, v, minimum=1, maximum=MAX_FANOUT) for p, v in
               items("workload.fanouts", workload.get("fanouts", list(shape.fanouts)), non_empty=True)]
    if len(fanouts) > MAX_HOPS:
        raise SpecError("workload.fanouts", f"must have 1 to {MAX_HOPS} hops, got {len(fanouts)}")
    sync = choice("workload.sync", field("sync"), SYNCS)
    if sync == "ps":
        ps = integer("workload.ps", field("ps"), minimum=1, maximum=8)
    else:
        ps = workload.get("ps", 0)
        if ps is not None and (isinstance(ps, bool) or not isinstance(ps, int) or ps != 0):
            raise SpecError("workload.ps", f"must be absent or 0 with sync allreduce (no parameter servers), "
                                           f"got {describe(ps)}")
        ps = 0
    resolved = {"kind": "gnn", "graph": graph, "fanouts": fanouts,
                "batch_size": integer("workload.batch_size", field("batch_size"), minimum=1, maximum=10_000),
                "workers": integer("workload.workers", field("workers"), minimum=1, maximum=MAX_WORKERS),
                "samplers_per_worker": integer("workload.samplers_per_worker", field("samplers_per_worker"),
                                               minimum=1, maximum=8),
                "sync": sync, "ps": ps,
                "hidden": integer("workload.hidden", field("hidden"), minimum=8, maximum=4096),
                "lr": number("workload.lr", field("lr"), minimum=0, strict=True),
                "iterations": integer("workload.iterations", field("iterations"), minimum=1, maximum=100_000),
                "target_accuracy": None if workload.get("target_accuracy") is None else
                number("workload.target_accuracy", workload["target_accuracy"], minimum=0, maximum=1, strict=True),
                "eval_every": integer("workload.eval_every", field("eval_every"), minimum=1, maximum=100_000),
                "eval_nodes": integer("workload.eval_nodes", field("eval_nodes"), minimum=1, maximum=100_000),
                "profile": boolean("workload.profile", field("profile")),
                "machines": _machines(workload.get("machines"), hosts),
                "task_resources": _task_resources(workload.get("task_resources")),
                "compute_factor": _compute_factor(workload.get("compute_factor"), hosts)}
    scheduler = mapping("scheduler", spec["scheduler"], allowed=SCHEDULER_FIELDS, required=("name",))
    try:
        rate_policy(scheduler["name"])
    except ValueError as err:
        raise SpecError("scheduler.name", str(err)) from None
    scheduler = {"name": scheduler["name"]}
    # A searched placement simulates its candidates under the run's scheduler.
    resolved["placement"] = _placement(field("placement"), hosts, resolved, {**common, "scheduler": scheduler})
    simulation = {}
    if spec.get("simulation") is not None:
        section = mapping("simulation", spec["simulation"], allowed=SIMULATION_FIELDS, required=("profile",))
        simulation["simulation"] = {"profile": str(existing_file("simulation.profile", section["profile"],
                                                                 base=REPO_ROOT))}
    return {**common, "seed": emulation_spec.validate_seed(spec),
            "time_limit_s": emulation_spec.validate_time_limit(spec, 1800),
            "workload": resolved, "scheduler": scheduler,
            **simulation}


def _graph(raw) -> tuple[dict, DatasetShape]:
    graph = mapping("workload.graph", raw, allowed=GRAPH_FIELDS, required=("shape", "nodes"))
    shape = SHAPES[choice("workload.graph.shape", graph["shape"], tuple(SHAPES), what="graph shape")]
    nodes = integer("workload.graph.nodes", graph["nodes"], minimum=2 * shape.classes, maximum=MAX_NODES)
    degree = graph.get("avg_degree")
    if degree is not None:
        degree = number("workload.graph.avg_degree", degree, minimum=0, maximum=MAX_AVG_DEGREE, strict=True)
    return {"shape": shape.name, "nodes": nodes, "avg_degree": degree}, shape


def _resources(path: str, raw, defaults: dict, *, machine: bool) -> dict:
    """``{cpus, memory_gb, gpus}``, the missing ones from ``defaults``. A machine has
    some CPU and memory (> 0); a task may take none of a resource (>= 0)."""
    section = mapping(path, raw, allowed=placement_mod.RESOURCES, optional=True)
    return {"cpus": number(at(path, "cpus"), section.get("cpus", defaults["cpus"]), minimum=0, maximum=MAX_CPUS,
                           strict=machine),
            "memory_gb": number(at(path, "memory_gb"), section.get("memory_gb", defaults["memory_gb"]), minimum=0,
                                maximum=MAX_MEMORY_GB, strict=machine),
            "gpus": integer(at(path, "gpus"), section.get("gpus", defaults["gpus"]), minimum=0, maximum=MAX_GPUS)}


def _machines(raw, hosts: list[str]) -> dict:
    section = mapping("workload.machines", raw, optional=True)
    for name in section:
        host_name(at("workload.machines", name), name, hosts)
    return {host: _resources(at("workload.machines", host), section.get(host), MACHINE_DEFAULTS, machine=True)
            for host in hosts}


MAX_COMPUTE_FACTOR = 100.0


def _compute_factor(raw, hosts: list[str]) -> dict:
    """host -> its factor (every host; 1 where not given). Reading: a factor slows a host
    down against this box (a task cannot compute faster than the box does), so >= 1."""
    section = mapping("workload.compute_factor", raw, optional=True)
    for name in section:
        host_name(at("workload.compute_factor", name), name, hosts)
    return {host: number(at("workload.compute_factor", host), section.get(host, 1.0), minimum=1.0,
                         maximum=MAX_COMPUTE_FACTOR) for host in hosts}


def _task_resources(raw) -> dict:
    section = mapping("workload.task_resources", raw, allowed=placement_mod.TASK_KINDS, optional=True)
    return {kind: _resources(at("workload.task_resources", kind), section.get(kind), TASK_DEFAULTS[kind],
                         machine=False)
            for kind in placement_mod.TASK_KINDS}


SEARCH_FIELDS = {"etp": {"kind", "profile", "steps", "seed", "pick", "verify_best"}, "ifs": {"kind", "profile"}}
PICKS = ("makespan", "cost")  # how ETP judges its candidates: the model's makespan (the paper's), or Eq. 27


SEARCH_RECORD = {"cost", "makespan_s", "candidates", "search_s"}  # what an ETP search adds to the resolved spec


# ... or the researcher's own placement, {kind: module:function, profile: PATH}: a function
# of the job's placement problem (controller.schedulers.placement.problem.Problem, built
# from the profile as ETP's is) returning {task id: host}, run at validation.
OWN_PLACEMENT_SIGNATURE = "(problem) -> {task id: host}"


def _placement(raw, hosts: list[str], workload: dict, common: dict) -> dict:
    if isinstance(raw, dict) and "kind" in raw and "tasks" in raw:  # no task is named kind or tasks
        return _resolved_placement(raw, hosts, workload)
    if isinstance(raw, dict) and isinstance(raw.get("kind"), str) and OWN_FUNCTION.fullmatch(raw["kind"]):
        return _own_placement(raw, hosts, workload, common)
    if isinstance(raw, dict) and "kind" in raw:
        return _searched_placement(raw, hosts, workload, common)
    if isinstance(raw, dict):
        kind = "explicit"
    elif isinstance(raw, str) and raw in placement_mod.KINDS and raw != "explicit":
        kind = raw
    else:
        raise SpecError("workload.placement", f"must be distdgl, distdgl-fast-ps, spread, a mapping of task id to "
                                              f"host (explicit) or {{kind: etp | ifs | module:function, "
                                              f"profile: ...}}, got {describe(raw)}")
    nic_mbps = (emulation_spec.fabric_of(common).host_mbps()
                if kind == "distdgl-fast-ps" else None)
    tasks = placement_mod.place(kind, hosts, workload["machines"], workload["task_resources"], workload["workers"],
                                workload["samplers_per_worker"], workload["ps"],
                                explicit=raw if kind == "explicit" else None, nic_mbps=nic_mbps)
    return {"kind": kind, "tasks": tasks}


def _resolved_placement(raw: dict, hosts: list[str], workload: dict) -> dict:
    """A resolved spec's placement (a run's ``spec.yaml``: ``{kind, tasks}``, a search's
    record beside): its tasks are the placement, checked as an explicit one and not
    searched again, so that a run's spec runs the same placement again."""
    own = isinstance(raw["kind"], str) and OWN_FUNCTION.fullmatch(raw["kind"])  # not imported: its tasks are kept
    kind = raw["kind"] if own else choice("workload.placement.kind", raw["kind"],
                                          tuple(placement_mod.KINDS) + tuple(SEARCH_FIELDS))
    allowed = {"kind", "tasks"} | (SEARCH_FIELDS.get(kind, set()) | (SEARCH_RECORD if kind == "etp" else set()))
    allowed |= {"profile"} if own else set()
    section = mapping("workload.placement", raw, allowed=allowed,
                      required=("kind", "tasks", "profile") if kind in SEARCH_FIELDS else ("kind", "tasks"))
    if own and "profile" in section:
        string("workload.placement.profile", section["profile"])
    if kind in SEARCH_FIELDS:  # the search's record, checked as the search checks it (the profile is not read)
        string("workload.placement.profile", section["profile"])
        _search_settings(section)
        for key in SEARCH_RECORD & set(section):
            if section[key] is not None:
                number(at("workload.placement", key), section[key], minimum=0)
    tasks = mapping("workload.placement.tasks", section["tasks"])
    explicit = {t: h for t, h in tasks.items() if not str(t).startswith("store")}
    try:
        placed = placement_mod.place("explicit", hosts, workload["machines"], workload["task_resources"],
                                     workload["workers"], workload["samplers_per_worker"], workload["ps"],
                                     explicit=explicit)
    except SpecError as err:
        raise relocate(err, "workload.placement", "workload.placement.tasks") from None
    for task, host in tasks.items():
        if str(task).startswith("store") and placed.get(task) != host:
            raise SpecError(at("workload.placement.tasks", str(task)),
                            f"stores are fixed ({task} on {placed.get(task, 'no host')}), got {describe(host)}")
    return {**section, "tasks": placed}


def _own_placement(raw: dict, hosts: list[str], workload: dict, common: dict) -> dict:
    """``{kind: module:function, profile}``: the researcher's function of the job's
    placement problem (ETP's, from the profile), its answer checked as an explicit
    placement (every task but the stores, within the machines' capacities)."""
    from experiments.gnn import search  # pylint: disable=import-outside-toplevel  # the search reads the model
    from experiments.gnn.simulated import ProfileError  # pylint: disable=import-outside-toplevel

    name = raw["kind"]
    section = mapping("workload.placement", raw, allowed={"kind", "profile"}, required=("kind", "profile"))
    profile = existing_file("workload.placement.profile", section["profile"], base=REPO_ROOT)
    try:
        function = own_function(name, OWN_PLACEMENT_SIGNATURE, 1)
    except ValueError as err:
        raise SpecError("workload.placement.kind", str(err)) from None
    job = {**common, "workload": workload}
    try:
        problem = search.problem_from_profile(job, profile)
    except ProfileError as err:
        raise SpecError("workload.placement.profile", str(err)) from None
    try:
        found = function(problem)
    except Exception as err:  # pylint: disable=broad-except  # a plug-in's failure, reported with its name
        raise SpecError("workload.placement.kind", f"{name} raised {one_line(err)}") from None
    if not isinstance(found, dict):
        raise SpecError("workload.placement.kind", f"{name} must return {{task id: host}}, got {describe(found)}")
    # Stores stay home and a ring's steps go with their worker where the answer leaves them out;
    # the problem's own check then refuses what breaks its constraints (3) and (4).
    full = {t: task.home for t, task in problem.tasks.items() if task.kind == "store"} | found
    full |= {t: full[task.worker] for t, task in problem.tasks.items()
             if task.kind == "allreduce" and t not in found and task.worker in full}
    try:
        check_placement(problem, full)
    except ValueError as err:
        raise SpecError("workload.placement.kind", f"{name} placed it: {err}") from None
    try:
        tasks = _as_explicit(full, hosts, workload)
    except SpecError as err:
        raise SpecError(err.field, f"{name} placed it: {err.problem}") from None
    return {"kind": name, "profile": str(profile), "tasks": tasks}


def _as_explicit(found: dict, hosts: list[str], workload: dict) -> dict:
    """A placement found on the job's problem (a search's, or a researcher's), checked as
    an explicit one: every sampler, worker and PS on a host, within its capacities."""
    ids = placement_mod.task_ids(len(hosts), workload["workers"], workload["samplers_per_worker"], workload["ps"])
    explicit = {t: found[t] for t in ids if t in found and not t.startswith("store")}
    return placement_mod.place("explicit", hosts, workload["machines"], workload["task_resources"],
                               workload["workers"], workload["samplers_per_worker"], workload["ps"], explicit=explicit)


def _search_settings(section: dict) -> tuple[int, int, str, int]:
    """A search's steps, seed, pick and verify_best, defaults where not given."""
    from experiments.gnn.search import DEFAULT_STEPS, MAX_STEPS  # pylint: disable=import-outside-toplevel  # reads the model
    steps = integer("workload.placement.steps", section.get("steps", DEFAULT_STEPS), minimum=0, maximum=MAX_STEPS)
    seed = integer("workload.placement.seed", section.get("seed", 0), minimum=0)
    pick = choice("workload.placement.pick", section.get("pick", PICKS[0]), PICKS)
    verify_best = integer("workload.placement.verify_best", section.get("verify_best", 0), minimum=0)
    if verify_best and pick != "makespan":
        raise SpecError("workload.placement.verify_best", "needs pick: makespan (the model judges the candidates)")
    return steps, seed, pick, verify_best


def _searched_placement(raw: dict, hosts: list[str], workload: dict, common: dict) -> dict:
    """``{kind: etp, profile, steps, seed, pick, verify_best}`` (DGTP's search: IFS then
    ETP, candidates judged by simulated makespan or by cost) or ``{kind: ifs, profile}`` (IFS alone) on the
    profile, the result checked as an explicit placement (so its capacities are kept,
    as the search's are)."""
    # Imported here: the search reads the model, which reads this module.
    from experiments.gnn import search
    from experiments.gnn.simulated import ProfileError

    if not (isinstance(raw["kind"], str) and raw["kind"] in SEARCH_FIELDS):
        raise SpecError("workload.placement.kind", f"must be etp, ifs or a placement of your own as "
                                                   f"module:function, got {describe(raw['kind'])}")
    kind = raw["kind"]
    section = mapping("workload.placement", raw, allowed=SEARCH_FIELDS[kind], required=("kind", "profile"))
    profile = existing_file("workload.placement.profile", section["profile"], base=REPO_ROOT)
    steps, seed, pick, verify_best = _search_settings(section)
    job = {**common, "workload": workload}
    try:
        # ETP starts from IFS's placement, so IFS meets the job's and the profile's errors but
        # those of a transfer only the model reads (a profile without it): the run finds those.
        if kind == "ifs" or for_errors_only():
            found, resolved = search.ifs_placement(job, profile), {}
        else:  # a minute or more on a large job: said on stderr, the run's output stays its own
            print(f"placement: IFS, then {steps} ETP steps (seed {seed}, judged by {pick}) on {shown_path(profile)} "
                  f"...", file=sys.stderr, flush=True)
            searched = search.searched(job, {"profile": profile, "steps": steps, "seed": seed, "pick": pick,
                                             "verify_best": verify_best})
            print(f"placement: found in {searched.search_s:.0f} s, {len(searched.result.candidates)} candidates",
                  file=sys.stderr, flush=True)
            found = searched.placement
            resolved = {"steps": steps, "seed": seed, "pick": pick, "verify_best": verify_best, "cost": searched.cost,
                        "makespan_s": searched.makespan,
                        "candidates": len(searched.result.candidates), "search_s": round(searched.search_s, 3)}
    except ProfileError as err:
        raise SpecError("workload.placement.profile", str(err)) from None
    except ValueError as err:  # IFS: no placement fits the machines
        raise SpecError("workload.placement", str(err)) from None
    except PluginError as err:  # the job's model judged the candidates with a rate policy of your own that failed
        raise SpecError("scheduler.name", str(err)) from None
    return {"kind": kind, "profile": str(profile), **resolved, "tasks": _as_explicit(found, hosts, workload)}
