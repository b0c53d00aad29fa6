"""OES (Alg. 1 of the DGTP paper, §IV): per-flow rates and per-pair flow pipelining.

Data model, placement-independent: ``Machine`` (a NIC's ingress and egress rate in
Mbit/s, which may differ per machine) and ``Flow`` (an id, the sending and the
receiving machine; for the baselines of ``coflow_rates`` also its remaining volume
and its coflow). Tasks and their placement stay with the caller; it hands in the
flows that cross machines.

- ``oes_rates``: Alg. 1 lines 18-21. Every active flow m -> m' gets
  min(B_in(m') / Δ_in(m'), B_out(m) / Δ_out(m)), Δ counting the active flows into
  (out of) a machine. So no machine's ingress or egress exceeds its rate and every
  flow gets a positive rate. OES is not work-conserving (a flow held back by its
  other end leaves its share unused); Theorem 1 bounds what that can cost.
- Intra-machine transfers are not network flows (the paper's F(j, n) holds only
  flows to tasks on other machines): every function here refuses a flow whose two
  ends are the same machine, so a caller cannot silently give one a rate.
- ``PairPipeline``: Alg. 1 lines 8-17, the sets F_act and F_pend. A flow of
  iteration n waits while a flow of its pair from an earlier iteration is active or
  pending. The pair is the paper's task pair (j, j') when the caller names it
  (``Flow.pair``), else the machine pair.
- ``simulate``: a fluid simulation of flows with sizes and release times under OES,
  max-min fair rates or a baseline of ``coflow_rates`` (``rate_policies``), with
  the pipeline; event-driven (rates are constant between releases and
  completions), so its times are exact, the continuous limit of Alg. 1's time
  slots. ``max_degree`` and ``chain_lower_bound`` are Theorem 1's terms: the tests
  check T_OES <= Δ x the bound (24) <= Δ x T* on flow-only instances with them.
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.schedulers.max_min import max_min_fill

_EPS = 1e-9


@dataclass(frozen=True)
class Machine:
    """A machine's NIC: what it can receive and send, in Mbit/s (both > 0)."""

    name: str
    ingress_mbps: float
    egress_mbps: float

    def __post_init__(self):
        if not (self.ingress_mbps > 0 and self.egress_mbps > 0):
            raise ValueError(f"machine {self.name}: rates must be > 0")


@dataclass(frozen=True)
class Flow:
    """One inter-machine flow of one iteration.

    ``pair`` keys the pipeline: the paper's task pair (j, j'); None means the
    machine pair (src, dst). ``iteration`` orders the flows of one pair.
    ``remaining_mbit`` (what is left to send) and ``coflow`` are read only by the
    baselines of ``coflow_rates``; OES and max-min fair rates ignore them. A coflow
    is every transfer into one task in one iteration (the receiving task and the
    iteration); None means the receiving machine stands for the task.
    """

    flow_id: str
    src: str
    dst: str
    iteration: int = 0
    pair: Hashable | None = None
    remaining_mbit: float | None = None
    coflow: Hashable | None = None

    def with_remaining(self, mbit: float) -> Flow:
        """This flow with ``remaining_mbit`` = ``mbit``: ``dataclasses.replace`` without
        its cost (a caller copies every active flow at every decision); a copy of the
        fields, so it passes no check that ``__init__`` would not."""
        copy = object.__new__(Flow)
        copy.__dict__.update(self.__dict__, remaining_mbit=mbit)
        return copy

    @property
    def pipeline_key(self) -> Hashable:
        return (self.src, self.dst) if self.pair is None else self.pair

    @property
    def coflow_key(self) -> Hashable:
        return (self.dst, self.iteration) if self.coflow is None else self.coflow


def _by_name(machines: Iterable[Machine]) -> dict[str, Machine]:
    table: dict[str, Machine] = {}
    for m in machines:
        if m.name in table:
            raise ValueError(f"machine {m.name} given twice")
        table[m.name] = m
    return table


def _check_flows(flows: Iterable[Flow], machines: Mapping[str, Machine]) -> None:
    flows = list(flows)
    ids = {f.flow_id for f in flows}
    ends = {f.src for f in flows} | {f.dst for f in flows}
    if len(ids) == len(flows) and ends <= machines.keys() and all(f.src != f.dst for f in flows):
        return  # all well: the walk below names the first bad flow otherwise
    seen: set[str] = set()
    for f in flows:
        if f.flow_id in seen:
            raise ValueError(f"flow {f.flow_id} given twice")
        seen.add(f.flow_id)
        if f.src not in machines or f.dst not in machines:
            raise ValueError(f"flow {f.flow_id}: unknown machine in {f.src} -> {f.dst}")
        if f.src == f.dst:
            raise ValueError(f"flow {f.flow_id}: {f.src} -> {f.dst} stays on one machine; not a network flow")


def oes_rates(machines: Iterable[Machine], active_flows: Sequence[Flow]) -> dict[str, float]:
    """flow id -> Mbit/s under OES (Alg. 1 line 21)."""
    table = _by_name(machines)
    _check_flows(active_flows, table)
    into = defaultdict(int)
    out_of = defaultdict(int)
    for f in active_flows:
        into[f.dst] += 1
        out_of[f.src] += 1
    in_share = {m: table[m].ingress_mbps / n for m, n in into.items()}  # B_in(m') / Δ_in(m')
    out_share = {m: table[m].egress_mbps / n for m, n in out_of.items()}
    return {f.flow_id: min(in_share[f.dst], out_share[f.src]) for f in active_flows}


def max_min_fair_rates(machines: Iterable[Machine], active_flows: Sequence[Flow]) -> dict[str, float]:
    """flow id -> Mbit/s, max-min fair over the NICs (what TCP flows approach): the baseline."""
    table = _by_name(machines)
    _check_flows(active_flows, table)
    capacity = ({("in", n): m.ingress_mbps for n, m in table.items()}
                | {("out", n): m.egress_mbps for n, m in table.items()})
    return max_min_fill(capacity, {f.flow_id: (("out", f.src), ("in", f.dst)) for f in active_flows})


RatePolicy = Callable[[Iterable[Machine], Sequence[Flow]], dict[str, float]]


def reads_remaining(policy: RatePolicy) -> bool:
    """Whether ``policy`` reads ``Flow.remaining_mbit``: OES and max-min fair rates do not,
    so a caller may skip estimating it for them (one estimate per flow per decision)."""
    return policy not in (oes_rates, max_min_fair_rates)


def rate_policies() -> dict[str, RatePolicy]:
    """Every rate policy by name: OES, max-min fair, and the DGTP paper's baselines."""
    # Imported here, not at the top: the baselines build on this module's Machine and Flow.
    from controller.schedulers.coflow_rates import mrtf_rates, omcoflow_rates
    return {"oes": oes_rates, "fair": max_min_fair_rates, "mrtf": mrtf_rates, "omcoflow": omcoflow_rates}


class PairPipeline:
    """F_act and F_pend of Alg. 1: per pair, one iteration's flows on the wire at a time.

    Invariants: the flows of one pair arrive (``start``) in non-decreasing
    iteration order (as in training: a task's iteration n+1 ends after its
    iteration n); a pair's active flows are all of one iteration, and its pending
    flows are of later iterations, in arrival order.
    """

    def __init__(self):
        self._active: dict[Hashable, dict[str, Flow]] = defaultdict(dict)
        self._pending: dict[Hashable, list[Flow]] = defaultdict(list)
        self._latest: dict[Hashable, int] = {}  # per pair, the latest iteration admitted
        self._ids: set[str] = set()  # active or pending
        self.pending_count = 0  # len(pending), without building the list at every decision
        # The pairs with an active flow, in the order of their first flow (``active``'s
        # order), so that ``active`` walks the busy pairs only, not every pair seen.
        self._rank: dict[Hashable, int] = {}
        self._busy_ranks: list[int] = []
        self._busy: list[Hashable] = []

    @property
    def active(self) -> list[Flow]:
        active = self._active
        return [f for key in self._busy for f in active[key].values()]

    @property
    def pending(self) -> list[Flow]:
        return [f for flows in self._pending.values() for f in flows]

    def is_active(self, flow: Flow) -> bool:
        return flow.flow_id in self._active.get(flow.pipeline_key, {})

    def start(self, flow: Flow) -> bool:
        """Admit ``flow`` (its sending task is done): True if it may start now, else it waits."""
        key = flow.pipeline_key
        if flow.flow_id in self._ids:
            raise ValueError(f"flow {flow.flow_id} is already active or pending")
        if flow.iteration < self._latest.get(key, flow.iteration):
            raise ValueError(f"flow {flow.flow_id}: iteration {flow.iteration} after {self._latest[key]} of its pair")
        self._latest[key] = flow.iteration
        self._ids.add(flow.flow_id)
        rank = self._rank.setdefault(key, len(self._rank))
        running = self._active[key]
        if self._pending[key] or any(f.iteration < flow.iteration for f in running.values()):
            self._pending[key].append(flow)
            self.pending_count += 1
            return False
        if not running:
            i = bisect.bisect_left(self._busy_ranks, rank)
            self._busy_ranks.insert(i, rank)
            self._busy.insert(i, key)
        running[flow.flow_id] = flow
        return True

    def end(self, flow: Flow) -> list[Flow]:
        """``flow`` finished: the pending flows of its pair that start now (now active)."""
        key = flow.pipeline_key
        running = self._active.get(key)
        if running is None or running.pop(flow.flow_id, None) is None:
            raise ValueError(f"flow {flow.flow_id} is not active")
        self._ids.discard(flow.flow_id)
        if running:
            return []
        waiting = self._pending[key]
        if not waiting:
            i = bisect.bisect_left(self._busy_ranks, self._rank[key])
            del self._busy_ranks[i], self._busy[i]
            return []
        released = [f for f in waiting if f.iteration == waiting[0].iteration]
        del waiting[:len(released)]
        self.pending_count -= len(released)
        running.update((f.flow_id, f) for f in released)
        return released


@dataclass(frozen=True)
class TimedFlow:
    """A flow for ``simulate``: ``size_mbit`` (> 0) to send from ``release_s`` on."""

    flow: Flow
    size_mbit: float
    release_s: float = 0.0


def simulate(flows: Sequence[TimedFlow], machines: Iterable[Machine], policy: str = "oes") -> dict[str, float]:
    """flow id -> completion time (s): flows admitted to a ``PairPipeline`` at their
    release, active ones sent at the rates of ``policy`` (a name of ``rate_policies``),
    each handed its remaining volume. A flow whose rate is 0 waits."""
    table = _by_name(machines)
    _check_flows([t.flow for t in flows], table)
    if any(not t.size_mbit > 0 or t.release_s < 0 for t in flows):
        raise ValueError("sizes must be > 0 and release times >= 0")
    policies = rate_policies()
    if policy not in policies:
        raise ValueError(f"policy must be one of {sorted(policies)}, not {policy!r}")
    rates_of = policies[policy]
    arrivals = sorted(flows, key=lambda t: (t.release_s, t.flow.iteration, t.flow.flow_id))
    left = {t.flow.flow_id: t.size_mbit for t in flows}
    scale = max(left.values(), default=1.0)
    pipeline = PairPipeline()
    done: dict[str, float] = {}
    now, nxt = 0.0, 0
    while len(done) < len(flows):
        while nxt < len(arrivals) and arrivals[nxt].release_s <= now:
            pipeline.start(arrivals[nxt].flow)
            nxt += 1
        active = pipeline.active
        rates = rates_of(table.values(), [f.with_remaining(left[f.flow_id]) for f in active])
        step = min([left[f.flow_id] / rates[f.flow_id] for f in active if rates[f.flow_id] > 0]
                   + ([arrivals[nxt].release_s - now] if nxt < len(arrivals) else []))
        now += step
        for f in active:
            left[f.flow_id] -= rates[f.flow_id] * step
            if left[f.flow_id] <= _EPS * scale:
                done[f.flow_id] = now
                pipeline.end(f)
    return done


def max_degree(flows: Iterable[Flow]) -> int:
    """Δ (Eq. 23) for the pipeline: the most flows that can be active at once into or
    out of one machine, i.e. per machine and direction the sum over pairs of the
    largest number of that pair's flows in one iteration."""
    per_iteration: dict[tuple[str, str, Hashable, int], int] = defaultdict(int)
    for f in flows:
        per_iteration[("in", f.dst, f.pipeline_key, f.iteration)] += 1
        per_iteration[("out", f.src, f.pipeline_key, f.iteration)] += 1
    widest: dict[tuple[str, str, Hashable], int] = defaultdict(int)
    for (way, machine, key, _), count in per_iteration.items():
        widest[way, machine, key] = max(widest[way, machine, key], count)
    degree: dict[tuple[str, str], int] = defaultdict(int)
    for (way, machine, _), count in widest.items():
        degree[way, machine] += count
    return max(degree.values(), default=0)


def chain_lower_bound(flows: Sequence[TimedFlow], machines: Iterable[Machine]) -> float:
    """Theorem 1's bound (24) on flow-only instances: no schedule that keeps the
    pipeline (Eq. 12 per pair) finishes earlier.

    A pair's iterations run one after another; no flow starts before its release or
    runs faster than its slower NIC alone (its solo time). So for every flow f of
    iteration n: T* >= release(f) + solo(f) + the sum over the pair's later
    iterations of their longest solo time. With one flow per pair and iteration
    (the paper's task pairs) this is the chain bound of (24) with p_sum = 0.
    """
    table = _by_name(machines)
    by_pair: dict[Hashable, dict[int, list[TimedFlow]]] = defaultdict(lambda: defaultdict(list))
    for t in flows:
        by_pair[t.flow.pipeline_key][t.flow.iteration].append(t)

    def solo(t: TimedFlow) -> float:
        return t.size_mbit / min(table[t.flow.dst].ingress_mbps, table[t.flow.src].egress_mbps)

    bound = 0.0
    for iterations in by_pair.values():
        later = 0.0  # sum of the longest solo times of the iterations after the current one
        for n in sorted(iterations, reverse=True):
            bound = max(bound, max(t.release_s + solo(t) for t in iterations[n]) + later)
            later += max(solo(t) for t in iterations[n])
    return bound
