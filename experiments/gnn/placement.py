"""Where the tasks of a GNN training job run: task ids and placement policies (pure, no DGL).

Tasks, in this order (the order of ``task_ids``, of the resolved spec's
``placement.tasks`` and so of the job's port plan):

- ``store{m}``, m = 0..M-1: one graph store per machine (M = the fabric's hosts);
  store m is fixed on the m-th host in fabric order (it holds partition m);
- ``sampler{i}``, i = 0..W*S-1: sampler i serves worker ``i // S``;
- ``worker{w}``, w = 0..W-1;
- ``ps{p}``, p = 0..P-1 (P = 0 with ring all-reduce).

Every task kind has resources (``cpus``, ``memory_gb``, ``gpus``), every machine a
capacity; the tasks on a machine, its store included, must fit it in each resource.
Policies (``place``):

- ``distdgl`` (DistDGL's): each worker together with its samplers as one unit, put on
  the first machine it fits, machines ordered by most free CPU first (ties: host
  order). A unit that fits no machine is split so that as many of its samplers as fit
  sit beside their worker (the paper's "maximally colocates each worker with its
  associated samplers within one server", §VI-A): the worker goes on the machine that
  fits it with most of its samplers (ties: most free CPU, then host order), those
  samplers beside it, each sampler left over on the machine with most free CPU that
  fits it. PSs last, on the machine with most free CPU that fits each. This is the
  paper's DistDGL baseline as we read it: the paper says how DistDGL co-locates a
  worker with its samplers, not where its PS goes. Until 2026-11-28 a split unit's
  samplers went by most free CPU alone (docs/gnn-oes.md says which results ran that).
- ``distdgl-fast-ps``: ``distdgl``'s units, then each PS on the machine with the
  fastest NIC that fits it (ties: most free CPU, then host order). The
  bandwidth-aware baseline, so that DistDGL is not judged by a PS it happened to put
  behind a slow NIC (on every Table III spec here it places as ``distdgl`` does).
- ``spread``: samplers round-robin over the hosts in order; each worker starts one
  host past its last sampler (so, with fewer samplers per worker than machines, a
  worker never sits with its own samplers); PSs continue the samplers' round-robin.
  A machine without room for the task is skipped (the next one that has room).
- ``explicit``: the spec names every task but the stores, each with a host.

A task that fits nowhere, or an explicit one over its machine's capacity, raises a
one-line ``SpecError`` naming ``workload.placement`` (``workload.placement.<task>``
for explicit placements), the machine(s) and the resource.
"""
from __future__ import annotations

from collections.abc import Mapping

from experiments.errors import SpecError
from experiments.validation import at, describe, host_name
from hosts.gnn import task_kind

RESOURCES = ("cpus", "memory_gb", "gpus")
TASK_KINDS = ("store", "sampler", "worker", "ps")
KINDS = ("distdgl", "distdgl-fast-ps", "spread", "explicit")
FIELD = "workload.placement"
_EPS = 1e-9  # summed float resources: 0.1 + 0.2 still fits 0.3
_SHOWN_MACHINES = 4  # a "fits nowhere" error names this many machines' shortfalls


def task_ids(machines_count: int, workers: int, samplers_per_worker: int, ps: int) -> list[str]:
    """Every task of the job: stores, samplers, workers, PSs (each by index)."""
    return ([f"store{m}" for m in range(machines_count)]
            + [f"sampler{i}" for i in range(workers * samplers_per_worker)]
            + [f"worker{w}" for w in range(workers)] + [f"ps{p}" for p in range(ps)])


def sampler_worker(i: int, samplers_per_worker: int) -> int:
    """The worker that sampler ``i`` serves."""
    return i // samplers_per_worker


def _amount(value: float) -> str:
    return f"{value:g}"


def _needs(need: Mapping[str, float]) -> str:
    return ", ".join(f"{r} {_amount(need[r])}" for r in RESOURCES)


class _Machines:
    """The free resources of every machine as tasks are put on them."""

    def __init__(self, hosts: list[str], machines: Mapping[str, Mapping[str, float]]):
        self.hosts = list(hosts)
        self.order = {host: k for k, host in enumerate(self.hosts)}
        self.total = {host: {r: machines[host][r] for r in RESOURCES} for host in self.hosts}
        self.free = {host: dict(self.total[host]) for host in self.hosts}
        self.tasks: dict[str, str] = {}

    def short(self, host: str, need: Mapping[str, float]) -> str | None:
        """The first resource in which ``host`` cannot take ``need``, or None if it fits."""
        for r in RESOURCES:
            if need[r] > self.free[host][r] + _EPS:
                return r
        return None

    def fits(self, host: str, need: Mapping[str, float]) -> bool:
        return self.short(host, need) is None

    def shortfall(self, host: str, need: Mapping[str, float]) -> str:
        r = self.short(host, need)
        return (f"{host} has {r} {_amount(max(self.free[host][r], 0.0))} free of {_amount(self.total[host][r])}, "
                f"needs {_amount(need[r])}")

    def put(self, task: str, host: str, need: Mapping[str, float]) -> None:
        for r in RESOURCES:
            self.free[host][r] -= need[r]
        self.tasks[task] = host

    def by_free_cpu(self) -> list[str]:
        return sorted(self.hosts, key=lambda host: (-self.free[host]["cpus"], self.order[host]))

    def nowhere(self, what: str, need: Mapping[str, float], candidates: list[str]) -> SpecError:
        """The error for a task (or unit) that fits none of ``candidates``."""
        shown = [self.shortfall(host, need) for host in candidates[:_SHOWN_MACHINES]]
        more = len(candidates) - len(shown)
        return SpecError(FIELD, f"no machine has room for {what} (needs {_needs(need)}): {'; '.join(shown)}"
                                f"{f'; and {more} more machine(s) without room' if more > 0 else ''}")


def _sum(*needs: Mapping[str, float]) -> dict[str, float]:
    return {r: sum(need[r] for need in needs) for r in RESOURCES}


def place(kind: str, hosts: list[str], machines: Mapping[str, Mapping[str, float]],
          task_resources: Mapping[str, Mapping[str, float]], workers: int, samplers_per_worker: int, ps: int,
          explicit: Mapping | None = None, nic_mbps: Mapping[str, float] | None = None) -> dict[str, str]:
    """Task id -> host for every task (stores included), in ``task_ids`` order.

    ``hosts``: the fabric's host names in fabric order; ``machines``: host -> its
    capacity; ``task_resources``: task kind -> what one task of it takes (each a
    mapping of ``cpus``, ``memory_gb``, ``gpus``). ``explicit`` (kind ``explicit``):
    the spec's raw mapping of task id -> host, checked here. ``nic_mbps`` (kind
    ``distdgl-fast-ps``): host -> its link's Mbit/s."""
    if kind not in KINDS:
        raise SpecError(FIELD, f"must be one of {', '.join(KINDS)}, got {describe(kind)}")
    ids = task_ids(len(hosts), workers, samplers_per_worker, ps)
    state = _Machines(hosts, machines)

    def need(task: str) -> Mapping[str, float]:
        return task_resources[task_kind(task)]

    for m, host in enumerate(hosts):  # stores first: they are where their partitions are
        store = f"store{m}"
        if not state.fits(host, need(store)):
            raise SpecError(FIELD, f"{store} is fixed on {host}, which has no room for it: "
                                   f"{state.shortfall(host, need(store))}")
        state.put(store, host, need(store))
    samplers = [t for t in ids if t.startswith("sampler")]
    worker_ids = [t for t in ids if t.startswith("worker")]
    ps_ids = [t for t in ids if t.startswith("ps")]
    if kind in ("distdgl", "distdgl-fast-ps"):
        _distdgl(state, need, worker_ids, samplers, samplers_per_worker, ps_ids,
                 nic_mbps if kind == "distdgl-fast-ps" else None)
    elif kind == "spread":
        _spread(state, need, worker_ids, samplers, samplers_per_worker, ps_ids)
    else:
        _explicit(state, need, ids, explicit)
    return {task: state.tasks[task] for task in ids}


def _most_free_fit(state: _Machines, task: str, need: Mapping[str, float],
                   nic_mbps: Mapping[str, float] | None = None) -> None:
    """Put ``task`` on the machine with most free CPU that fits it; with ``nic_mbps``,
    on the fastest NIC that fits it first."""
    order = state.by_free_cpu()
    if nic_mbps is not None:
        order.sort(key=lambda host: -nic_mbps[host])  # stable: most free CPU within a rate
    for host in order:
        if state.fits(host, need):
            state.put(task, host, need)
            return
    raise state.nowhere(task, need, order)


def _distdgl(state: _Machines, need, worker_ids: list[str], samplers: list[str], per_worker: int,
             ps_ids: list[str], nic_mbps: Mapping[str, float] | None) -> None:
    for w, worker in enumerate(worker_ids):
        own = samplers[w * per_worker:(w + 1) * per_worker]
        host = _most_beside(state, need, worker, own)  # a whole unit's first fit, where there is one
        state.put(worker, host, need(worker))
        for task in own:
            if state.fits(host, need(task)):
                state.put(task, host, need(task))
            else:
                _most_free_fit(state, task, need(task))
    for task in ps_ids:
        _most_free_fit(state, task, need(task), nic_mbps)


def _most_beside(state: _Machines, need, worker: str, own: list[str]) -> str:
    """The machine that fits ``worker`` with the most of its samplers ``own`` (ties:
    most free CPU, then host order): the first machine, by most free CPU, that fits the
    whole unit where one does; else a unit split as little as capacity allows."""
    best, best_count = None, -1
    for host in state.by_free_cpu():
        if not state.fits(host, need(worker)):
            continue
        count, taken = 0, dict(need(worker))
        for task in own:
            trial = _sum(taken, need(task))
            if not state.fits(host, trial):
                break
            count, taken = count + 1, trial
        if count > best_count:
            best, best_count = host, count
    if best is None:
        raise state.nowhere(worker, need(worker), state.by_free_cpu())
    return best


def _spread(state: _Machines, need, worker_ids: list[str], samplers: list[str], per_worker: int,
            ps_ids: list[str]) -> None:
    count = len(state.hosts)

    def round_robin(task: str, start: int) -> int:
        """Put ``task`` on the first host from ``start`` (cyclically) with room; its index."""
        for step in range(count):
            k = (start + step) % count
            if state.fits(state.hosts[k], need(task)):
                state.put(task, state.hosts[k], need(task))
                return k
        raise state.nowhere(task, need(task), state.hosts[start % count:] + state.hosts[:start % count])

    cursor = 0
    for task in samplers:
        cursor = round_robin(task, cursor) + 1
    for w, worker in enumerate(worker_ids):
        last_sampler = samplers[(w + 1) * per_worker - 1]
        round_robin(worker, state.order[state.tasks[last_sampler]] + 1)
    for task in ps_ids:
        cursor = round_robin(task, cursor) + 1


def _explicit(state: _Machines, need, ids: list[str], explicit) -> None:
    if not isinstance(explicit, Mapping):
        raise SpecError(FIELD, f"an explicit placement must be a mapping of task id to host, got {describe(explicit)}")
    stores = {t for t in ids if t.startswith("store")}
    placed = [t for t in ids if t not in stores]
    known = set(placed)
    for task in explicit:
        where = at(FIELD, str(task))
        if task in stores:
            raise SpecError(where, "stores are fixed (store m on the m-th host of the fabric); leave them out")
        if task not in known:
            raise SpecError(where, f"unknown task (tasks: {_ranges(placed)})")
    for task in placed:
        where = at(FIELD, task)
        if task not in explicit:
            raise SpecError(where, "is required (an explicit placement names every task but the stores)")
        host = host_name(where, explicit[task], state.hosts)
        if not state.fits(host, need(task)):
            raise SpecError(where, f"no room on {host} for {task}: {state.shortfall(host, need(task))} "
                                   f"(with the tasks placed before it)")
        state.put(task, host, need(task))


def _ranges(tasks: list[str]) -> str:
    """``sampler0..sampler3, worker0..worker1, ps0``: task ids by kind, compactly."""
    parts = []
    for kind in TASK_KINDS:
        of_kind = [t for t in tasks if task_kind(t) == kind]
        if of_kind:
            parts.append(of_kind[0] if len(of_kind) == 1 else f"{of_kind[0]}..{of_kind[-1]}")
    return ", ".join(parts)
