"""A fast, exact flow-level (fluid) network: flows in flight over ports, their rates
and the instants they are delivered.

Model (the semantics of the iteration-level model it replaced, itersim, with a
capacity per port): a flow crosses a tuple of hops ``((port, queue), ...)``; a port serves its
flows by strict priority of their queue there (lower queue first) and max-min fairly
within a queue, by progressive filling: a flow rises only while, on each of its
ports, no flow of a strictly better queue there is still rising; all rising eligible
flows rise together until a port is full (residual <= 1e-9 of its capacity), which
freezes every flow on it. If flows still rise but none is eligible, their queues
follow no single order (a priority cycle: on a leaf-spine a flow's NIC queue is its
sender's local rank and its DSCP its receiver's, and two machines' ranks need not
agree; the fluid model has no unique answer there, since any split of the two ports
between the two flows is a fixed point). Such a component is filled again with every
flow in the queue of its last hop (its DSCP, where it meets flows to the same
receiver) on every port: one class per flow, so no cycle is left. A flow
is delivered once its bytes left are <= 1e-9 of its size; flows due at one instant
are delivered together (one recompute after), in add order. A network made with
``weights`` serves its queues by weight instead of by priority (``experiments.sim.weighted``:
the same groups, components and clock; only a component's filling differs).

Why grouping is exact: flows with identical hops are interchangeable in the filling
(same ports, same queues), so at every round they are eligible together and freeze
together: they always get the same rate. The filling therefore runs over groups of
identical hops, a port counting a group as its number of members.

The filling is itersim's, driven by events instead of rounds: over the common level
L (the sum of the steps so far), a port with n members rising and frozen load f
fills at L = (capacity - f)/n, so a heap of ports gives the next freeze; a group
that started rising at level s and froze at L gets L - s. With one queue on every
port of a component all groups start at 0 and a group's rate is the least fill level
of its ports. Rates match itersim's to float rounding (~1e-15); the one difference is
that a port within 1e-9 of full is frozen in the same round only inside its own
component, where itersim's single global round also freezes one elsewhere: at most
1e-9 of a rate.

Invariants:
- a group (one per distinct hops tuple with >= 1 member) keeps ``sent``: the bytes
  each member has moved since the group's origin (it grows by rate*dt, and is rebased
  to 0 before a flow joins when it is large next to that flow's bytes). A member's
  finish point is its ``sent`` at joining plus its bytes, fixed while it stays; bytes
  left = finish - sent. Members sit in a heap per group by (finish point, add order);
  the top is always a live member (removed and requeued ones are deleted lazily).
- rates are those of the last filling; a change (a group's member count, a group
  created or dropped) marks the group's ports, and the next query refills only the
  connected component(s) (groups linked by shared ports) holding a marked port.
  Rates elsewhere cannot change: the filling of one component never reads another.
  A starved group (rate 0) changing its count moves nothing and refills nothing.
- a group whose last member leaves is detached from the filling at once (as if it
  had never been) but kept idle, with its slot and hops, for the next flow over the
  same hops (``_drop_group``); reused, it starts as a new group would (sent 0).
- the components are cached: a link between two of them or a 3+ hop group coming or
  going drops the cache, and a port pair losing its last link is checked at the next
  filling (still connected: nothing changed).
- the clock only moves in ``advance``, after the rates are current, so ``sent`` always
  integrates the rates actually in force. A group's next delivery time is cached with
  its rate; ``advance(next_end())`` delivers by those same cached numbers, so it
  always makes progress. Within a group only the heap top (and members behind it
  within tolerance) is checked: a member behind a top that is not yet due, with a
  larger size and so a wider tolerance, waits at most 1e-9 of its duration.

Cost: a change costs one refill of its component at the next query, compiled
(``_filling``, numba: in plain Python the filling was most of a simulation's time;
measurements/simulator-2026-11-25): O(slots + ports) to find the component's groups
and set up, then O(groups x hops) for the filling (a port's groups sorted by queue by
insertion: quadratic only in one port's groups, and only where their queues come out
of order); the clock and the next end are numpy vector operations over groups.
``bench_network`` measures a churn (``make bench``'s ``sim_network_churn_*`` rows).
"""
from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Hashable, Mapping

import numpy as np
from numba import njit

from experiments.sim.entries import component_entries
from experiments.sim.weighted import ACCEPTED as WEIGHTED_ACCEPTED
from experiments.sim.weighted import MAX_SWEEPS, weighted_filling
from experiments.sim.weighted import TOLERANCE as WEIGHTED_TOLERANCE

# A port counts as full, and a flow as delivered, within this share of the port's
# capacity or of the flow's size (as itersim): float residue must not leave a
# 1e-17 s event behind.
TOLERANCE = 1e-9
# A group's sent is rebased to 0 before a flow joins when it exceeds this many times
# the flow's bytes: a member's bytes left (finish - sent) then carry float error of a
# few ulps of its own bytes, not of the group's whole history.
_REBASE = 8.0
_INF = math.inf
_DEAD = -2  # _gport row 0 of a free or idle slot (no port: not filled)
# Groups left with no member are kept (idle) for reuse, at most this many
_IDLE = 128

Hops = tuple[tuple[str, int], ...]


class FluidNetwork:
    """Flows in flight over ports of given capacities (bytes/s); see the module doc."""

    def __init__(self, capacity: Mapping[str, float], default_capacity: float | None = None,
                 weights: Mapping[int, float] | None = None):
        """``weights``: queue -> weight (queues >= 1) on every port, which then share by
        weight (``experiments.sim.weighted``); every hop's queue must have one. None:
        strict priority."""
        for port, c in capacity.items():
            if not c > 0 or math.isinf(c):
                raise ValueError(f"port {port!r}: capacity must be finite and > 0, got {c!r}")
        if default_capacity is not None and (not default_capacity > 0 or math.isinf(default_capacity)):
            raise ValueError(f"default_capacity must be finite and > 0, got {default_capacity!r}")
        self._capacity = dict(capacity)
        self._default = default_capacity
        self._qweight = None
        if weights is not None:
            if not weights or any(not isinstance(q, int) or q < 1 or not w > 0 or math.isinf(w)
                                  for q, w in weights.items()):
                raise ValueError(f"weights must map queues >= 1 to finite weights > 0, got {dict(weights)!r}")
            self._qweight = np.zeros(max(weights) + 1)
            for q, w in weights.items():
                self._qweight[q] = w
        self.now = 0.0
        # ports, by index
        self._pid: dict[str, int] = {}
        self._pcap = np.zeros(0)  # capacity, bytes/s
        self._users: list[set[int]] = []  # groups crossing the port
        # which ports groups link (the components): member counts as of the last
        # filling per port pair (most flows have 2 hops), and the 3+ hop groups
        self._pair: list[dict[int, int]] = []  # other port -> members of 2-hop groups over both
        self._multi: list[set[int]] = []  # groups of 3+ hops crossing the port
        # flows: flow -> (group, heap entry, hops); entry = (finish, seq, epoch, size, flow).
        # An entry is live iff the flow's record holds that very tuple (lazy deletion).
        self._flows: dict[Hashable, tuple[int, tuple, Hops]] = {}
        self._seq = 0  # add order
        self._epoch = 0  # makes every entry unique, so heap comparisons stop before `flow`
        # groups, by slot (reused once free)
        self._sig: dict[Hops, int] = {}
        self._ghops: list[tuple[tuple[int, int], ...] | None] = []  # ((port index, queue), ...)
        self._gkey: list[Hops | None] = []
        self._heap: list[list | None] = []
        self._count: list[int] = []
        self._free: list[int] = []
        self._idle: dict[int, None] = {}  # groups with no member, oldest first (see _drop_group)
        # per-group vectors (numpy: moving the clock and finding the next end are one
        # vector op each instead of a Python loop over hundreds of groups)
        self._sent = np.zeros(0)
        self._rate = np.zeros(0)
        self._inv = np.zeros(0)  # 1/rate, inf where the rate is 0
        # _tops rows: finish point of the group's top member (inf: empty), and that finish
        # point less TOLERANCE of its size; _ends rows: the absolute times the top is
        # delivered and is within TOLERANCE at the current rate (one 2-row op for both)
        self._tops = np.zeros((2, 0))
        self._ends = np.zeros((2, 0))
        self._topf, self._topthr = self._tops
        self._end, self._endtol = self._ends
        self._tmp = np.zeros(0)
        self._tmp2 = np.zeros((2, 0))
        # _gport[j, g]: index of the j-th port of group g, -1 past its last hop; a free
        # or idle slot has _DEAD in row 0 (the filling reads these arrays as they are)
        self._gport = np.zeros((2, 0), dtype=np.intp)
        self._counted = np.zeros(0, dtype=np.int64)  # member count at the last filling
        self._gqueue = np.zeros((2, 0), dtype=np.int64)  # _gqueue[j, g]: the queue of that hop
        self._by_name = None  # on weighted queues: the port indices in the order of their names
        self._residual = np.zeros(1)
        # on weighted queues: fillings that stopped at MAX_SWEEPS with offers still moving
        # (by at most WEIGHTED_ACCEPTED of the largest port, else an error), and the most
        self.unsettled_fillings = 0
        self.unsettled_max = 0.0
        self._next = _INF
        self._dirty_groups: set[int] = set()
        self._dirty_ports: set[int] = set()
        self._comps = None  # components of ports, see _components
        self._comp_of = np.zeros(0, dtype=np.intp)
        self._cut: list[tuple[int, int]] = []  # port pairs unlinked since _components
        self._stale = False  # rates or end times need a recompute

    # --- public interface ------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._flows)

    def __contains__(self, flow) -> bool:
        return flow in self._flows

    def add(self, flow: Hashable, hops: Hops, nbytes: float) -> None:
        if flow in self._flows:
            raise ValueError(f"flow {flow!r} is already in flight")
        if not nbytes > 0 or math.isinf(nbytes):
            raise ValueError(f"flow {flow!r}: nbytes must be finite and > 0, got {nbytes!r}")
        nbytes = float(nbytes)
        self._join(flow, hops, nbytes, nbytes, self._seq)
        self._seq += 1

    def requeue(self, flow, hops: Hops) -> None:
        """Move a flow onto other hops (queues and/or ports) with its bytes left."""
        g, e, old = self._flows[flow]
        if old == hops:
            return
        if hops not in self._sig:
            self._new_group(hops)  # checks the hops before the flow leaves its group
        left = e[0] - float(self._sent[g])
        self._leave(flow, g, e)
        # keep its size (the delivery tolerance) and add order
        self._join(flow, hops, max(left, 0.0), e[3], e[1])

    def remove(self, flow) -> float:
        """Drop a flow in flight; its bytes left."""
        g, e, _ = self._flows[flow]
        left = e[0] - float(self._sent[g])
        self._leave(flow, g, e)
        return max(left, 0.0)

    def set_capacity(self, port: str, capacity: float) -> None:
        """Change a port's capacity (bytes/s) from now on, as a per-flow rate limit that
        a scheduler moves; flows keep their bytes left, the port's component is refilled
        at the next query."""
        if not capacity > 0 or math.isinf(capacity):
            raise ValueError(f"port {port!r}: capacity must be finite and > 0, got {capacity!r}")
        capacity = float(capacity)
        self._capacity[port] = capacity
        pid = self._pid.get(port)
        if pid is None or self._pcap[pid] == capacity:
            return
        self._pcap[pid] = capacity
        if self._comps is not None:  # the largest capacity of a component sets its fill tolerance
            ports, cmax = self._comps[self._comp_of[pid]]
            self._comps[self._comp_of[pid]] = (ports, max(cmax, capacity))
        self._dirty_ports.add(pid)
        self._stale = True

    def rate(self, flow) -> float:
        g = self._flows[flow][0]
        self._ensure()
        return float(self._rate[g])

    def left(self, flow) -> float:
        g, e, _ = self._flows[flow]
        return max(e[0] - float(self._sent[g]), 0.0)

    def lefts(self, flows: list) -> np.ndarray:
        """``left`` of each of ``flows`` (one call for many: the same numbers)."""
        records = [self._flows[f] for f in flows]
        groups = np.fromiter((r[0] for r in records), dtype=np.intp, count=len(records))
        finish = np.fromiter((r[1][0] for r in records), dtype=float, count=len(records))
        return np.maximum(finish - self._sent[groups], 0.0)

    def rates(self, flows: list) -> np.ndarray:
        """``rate`` of each of ``flows``."""
        self._ensure()
        flows_ = self._flows
        return self._rate[np.fromiter((flows_[f][0] for f in flows), dtype=np.intp, count=len(flows))]

    def next_end(self) -> float:
        """Absolute time of the earliest delivery at the current rates (inf if none)."""
        self._ensure()
        return self._next

    def advance(self, t: float) -> list:
        """Move the clock to ``t`` (>= now); the flows delivered by then, by end time,
        then add order. Rates change at every delivery, so it steps end by end."""
        if not t >= self.now or math.isinf(t):
            raise ValueError(f"cannot advance to {t!r} from {self.now!r}")
        out = []
        while True:
            self._ensure()
            tau = self._next if self._next < t else t
            if tau > self.now:
                dt = tau - self.now
                np.multiply(self._rate, dt, out=self._tmp)
                self._sent += self._tmp
                self.now = tau
            got = self._deliver(tau)
            if got:
                got.sort()
                out += [f for _, f in got]
            # what is due at one instant does not depend on the rates (bytes left vs
            # size), so after the pass at t nothing more is due and no refill is needed
            if tau == t:
                return out

    # --- flows and groups ------------------------------------------------------------
    def _join(self, flow, hops: Hops, nbytes: float, size: float, seq: int) -> None:
        g = self._sig.get(hops)
        if g is None:
            g = self._new_group(hops)
        elif g in self._idle:
            del self._idle[g]
            self._attach(g)
        sent = self._sent.item(g)
        if sent > _REBASE * nbytes:
            self._rebase(g)
            sent = 0.0
        f = sent + nbytes
        e = (f, seq, self._epoch, size, flow)
        self._epoch += 1
        h = self._heap[g]
        heapq.heappush(h, e)
        self._flows[flow] = (g, e, hops)
        self._count[g] += 1
        if h[0] is e:
            self._topf[g] = f
            self._topthr[g] = f - TOLERANCE * size
        self._dirty_groups.add(g)
        self._stale = True

    def _leave(self, flow, g: int, e: tuple) -> None:
        del self._flows[flow]
        self._count[g] -= 1
        self._stale = True
        if self._count[g] == 0:
            self._drop_group(g)
            return
        self._dirty_groups.add(g)
        h = self._heap[g]
        if h[0] is e:
            self._set_top(g)
        elif len(h) > 2 * self._count[g] + 16:  # too many dead entries: compact
            flows = self._flows
            h[:] = [x for x in h if flows.get(x[4], (0, None))[1] is x]
            heapq.heapify(h)

    def _set_top(self, g: int) -> None:
        """Pop dead entries off the group's heap; record its top."""
        h, flows = self._heap[g], self._flows
        while h:
            e = h[0]
            rec = flows.get(e[4])
            if rec is not None and rec[1] is e:
                self._topf[g] = e[0]
                self._topthr[g] = e[0] - TOLERANCE * e[3]
                return
            heapq.heappop(h)
        self._topf[g] = self._topthr[g] = _INF

    def _rebase(self, g: int) -> None:
        """Shift the group's origin to now: finish points stay small next to sizes."""
        s = float(self._sent[g])
        flows, h = self._flows, []
        for e in self._heap[g]:
            rec = flows.get(e[4])
            if rec is not None and rec[1] is e:
                ne = (e[0] - s, e[1], e[2], e[3], e[4])
                flows[e[4]] = (g, ne, rec[2])
                h.append(ne)
        heapq.heapify(h)
        self._heap[g] = h
        self._sent[g] = 0.0
        self._set_top(g)

    def _port(self, port: str) -> int:
        pid = self._pid.get(port)
        if pid is None:
            c = self._capacity.get(port, self._default)
            if c is None:
                raise KeyError(f"port {port!r} has no capacity (and no default_capacity)")
            pid = self._pid[port] = len(self._pcap)
            self._pcap = np.append(self._pcap, float(c))
            self._users.append(set())
            self._pair.append({})
            self._multi.append(set())
            self._comps = None
            self._by_name = None
        return pid

    def _new_group(self, hops: Hops) -> int:
        if not isinstance(hops, tuple) or not hops:
            raise ValueError(f"hops must be a non-empty tuple of (port, queue), got {hops!r}")
        ports = [p for p, _ in hops]
        if len(set(ports)) != len(ports):
            raise ValueError(f"hops cross a port twice: {hops!r}")
        if not all(-2 ** 63 <= int(q) < 2 ** 63 for _, q in hops):  # _gqueue holds them
            raise ValueError(f"hops' queues must fit in 64 bits: {hops!r}")
        qweight = self._qweight
        if qweight is not None and not all(0 < q < len(qweight) and qweight[q] for _, q in hops):
            raise ValueError(f"hops' queues must be weighted ({', '.join(map(str, np.flatnonzero(qweight)))}): "
                             f"{hops!r}")
        ghops = tuple((self._port(p), int(q)) for p, q in hops)
        if self._free:
            g = self._free.pop()
        else:
            g = len(self._ghops)
            for lst, v in ((self._ghops, None), (self._gkey, None), (self._heap, None), (self._count, 0)):
                lst.append(v)
            if g >= len(self._sent):
                self._grow(max(16, 2 * len(self._sent)))
        self._ghops[g], self._gkey[g], self._heap[g] = ghops, hops, []
        self._count[g] = self._counted[g] = 0
        self._sig[hops] = g
        if len(ghops) > len(self._gport):
            wide = np.full((len(ghops), self._gport.shape[1]), -1, dtype=np.intp)
            wide[:len(self._gport)] = self._gport
            self._gport = wide
            wide = np.zeros(wide.shape, dtype=np.int64)
            wide[:len(self._gqueue)] = self._gqueue
            self._gqueue = wide
        gport, gqueue = self._gport, self._gqueue
        for j in range(1, len(ghops)):
            gport[j, g] = ghops[j][0]
        for j, (_, q) in enumerate(ghops):
            gqueue[j, g] = q
        self._attach(g)
        return g

    def _attach(self, g: int) -> None:
        """Make a new or idle group seen by the filling (it then has members)."""
        ghops = self._ghops[g]
        self._gport[0, g] = ghops[0][0]
        users = self._users
        for pid, _ in ghops:
            users[pid].add(g)
        if len(ghops) > 2:
            for pid, _ in ghops:
                self._multi[pid].add(g)
            # it can only join components: the cache holds while its ports share one
            if self._comps is not None:
                self._merge_components({self._comp_of[pid] for pid, _ in ghops})

    def _drop_group(self, g: int) -> None:
        """The group's last member left: it leaves the filling and its ports are
        refilled. It is kept idle (its slot, hops and signature) for a while, since the
        next flow over the same hops often comes soon (the next iteration of a job):
        reused, it is exactly a new group (nothing of it is left but its hops)."""
        self._recount(g, -int(self._counted[g]))
        ghops = self._ghops[g]
        users, dirty = self._users, self._dirty_ports
        for pid, _ in ghops:
            users[pid].discard(g)
            dirty.add(pid)
        if len(ghops) > 2:
            for pid, _ in ghops:
                self._multi[pid].discard(g)
            # its ports may have come apart: checked at the next filling, as an unlinked pair's
            pids = [pid for pid, _ in ghops]
            self._cut.extend(zip(pids, pids[1:]))
        self._heap[g] = []
        self._count[g] = self._counted[g] = 0
        self._sent[g] = self._rate[g] = 0.0
        self._topf[g] = self._topthr[g] = _INF  # inv and end times: at the next _ensure
        self._dirty_groups.discard(g)
        self._gport[0, g] = _DEAD
        idle = self._idle
        idle[g] = None
        if len(idle) > _IDLE:  # forget the group idle longest
            old = next(iter(idle))
            del idle[old]
            del self._sig[self._gkey[old]]
            self._ghops[old] = self._gkey[old] = self._heap[old] = None
            gport = self._gport
            for j in range(1, len(gport)):
                gport[j, old] = -1
            self._free.append(old)

    def _recount(self, g: int, d: int) -> None:
        """Fold a change of ``d`` members of group ``g`` into the port pairs' member
        counts (the links of the components)."""
        if not d:
            return
        gh = self._ghops[g]
        if len(gh) == 2:
            (p, _), (q, _) = gh
            pp, pq = self._pair[p], self._pair[q]
            m = pp.get(q, 0)
            if not m and self._comps is not None:
                self._merge_components({self._comp_of[p], self._comp_of[q]})  # a new link
            m += d
            if m:
                pp[q] = pq[p] = m
            else:
                del pp[q], pq[p]
                if self._comps is not None:
                    self._cut.append((p, q))  # may split a component: see _fill

    def _grow(self, size: int) -> None:
        old = len(self._sent)

        def grown(a, fill):
            b = np.full(size, fill)
            b[:old] = a
            return b

        def grown2(a, fill):
            b = np.full((2, size), fill)
            b[:, :old] = a
            return b

        self._sent, self._rate, self._inv = grown(self._sent, 0.0), grown(self._rate, 0.0), grown(self._inv, _INF)
        self._tops, self._ends = grown2(self._tops, _INF), grown2(self._ends, _INF)
        self._topf, self._topthr = self._tops
        self._end, self._endtol = self._ends
        self._tmp, self._tmp2 = np.zeros(size), np.zeros((2, size))
        self._counted = grown(self._counted, 0)
        gport = np.full((len(self._gport), size), -1, dtype=np.intp)
        gport[0, old:] = _DEAD
        gport[:, :old] = self._gport
        self._gport = gport
        gqueue = np.zeros(gport.shape, dtype=np.int64)
        gqueue[:, :old] = self._gqueue
        self._gqueue = gqueue

    # --- deliveries ------------------------------------------------------------------
    def _deliver(self, tau: float) -> list:
        """Pop every member due by ``tau``: the top of each group whose tolerance time
        is <= tau (the same cached numbers ``next_end`` came from, so advancing to
        ``next_end`` always delivers), and the members behind it within TOLERANCE of it
        or of ``sent``. Returns (add order, flow) pairs."""
        idx = (self._endtol <= tau).nonzero()[0]
        if not idx.size:
            return []
        flows, out = self._flows, []
        for g in idx.tolist():
            h = self._heap[g]
            reach = max(self._sent.item(g), self._topthr.item(g))
            n = 0
            while h:
                e = h[0]
                rec = flows.get(e[4])
                if rec is None or rec[1] is not e:
                    heapq.heappop(h)
                    continue
                if e[0] - TOLERANCE * e[3] > reach:
                    break
                heapq.heappop(h)
                del flows[e[4]]
                out.append((e[1], e[4]))
                n += 1
            self._count[g] -= n
            if self._count[g] == 0:
                self._drop_group(g)
                continue
            self._dirty_groups.add(g)
            self._set_top(g)
        self._stale = True
        return out

    # --- rates -----------------------------------------------------------------------
    def _ensure(self) -> None:
        if not self._stale:
            return
        seeds = self._dirty_ports
        ghops, count, counted = self._ghops, self._count, self._counted
        rate = self._rate
        recount = self._recount
        for g in self._dirty_groups:
            c = count[g]
            d = c - int(counted[g])
            if d:
                recount(g, d)
                # a starved group (rate 0, there before and after) moves nothing: its
                # multiplicity cannot change any rate, so it needs no refill (strict
                # priority only: on weighted queues no group starves)
                if not (counted[g] and rate[g] == 0.0):
                    for p, _ in ghops[g]:
                        seeds.add(p)
                counted[g] = c
        self._dirty_groups = set()
        self._dirty_ports = set()
        if seeds:
            try:
                self._fill(seeds)
            except RuntimeError:  # a weighted filling that failed: the next query tries again
                self._dirty_ports = seeds
                raise
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(1.0, self._rate, out=self._inv)
            tmp = self._tmp2
            np.subtract(self._tops, self._sent, out=tmp)
            np.multiply(tmp, self._inv, out=tmp)
            np.add(tmp, self.now, out=self._ends)
        # fmin skips the NaN of a zero-rate member with nothing left (0 * inf); its
        # tolerance time is -inf, so the next advance delivers it anyway
        self._next = float(np.fmin.reduce(self._end)) if len(self._end) else _INF
        if self._next != self._next:
            self._next = _INF
        self._stale = False

    def _components(self) -> None:
        """Split the ports into connected components (ports linked by a group crossing
        both). Cached: a new link between two components (a pair or a 3+ hop group)
        merges them (``_merge_components``), and an unlinked port pair or the ports of
        a 3+ hop group gone are checked at the next filling (``_linked``; a port left
        with no group is ignored). A cached component may so be a superset of a true
        one: its filling gives the same rates (its parts share no port), up to float
        rounding, which can order ends within the tolerance differently."""
        pair, multi, ghops, pcap = self._pair, self._multi, self._ghops, self._pcap
        N = len(pcap)
        comp_of = [-1] * N
        comps = []
        for s in range(N):
            if comp_of[s] >= 0:
                continue
            c = len(comps)
            comp_of[s] = c
            ports = [s]
            for p in ports:  # grows while walked
                for q in pair[p]:
                    if comp_of[q] < 0:
                        comp_of[q] = c
                        ports.append(q)
                for g in multi[p]:
                    for q, _ in ghops[g]:
                        if comp_of[q] < 0:
                            comp_of[q] = c
                            ports.append(q)
            comps.append((ports, float(pcap[ports].max())))
        self._comp_of, self._comps = np.array(comp_of, dtype=np.intp), comps
        self._cut = []

    def _merge_components(self, cs: set[int]) -> None:
        """Components ``cs`` are linked now: one component, under the largest's number
        (the others stay as empty entries, so that no number changes)."""
        if len(cs) < 2:
            return
        comps, comp_of = self._comps, self._comp_of
        keep = max(cs, key=lambda c: len(comps[c][0]))
        ports, cmax = list(comps[keep][0]), comps[keep][1]
        for c in cs - {keep}:
            other, other_max = comps[c]
            comp_of[other] = keep
            ports += other
            cmax = max(cmax, other_max)
            comps[c] = ([], 0.0)
        comps[keep] = (ports, cmax)

    def _linked(self, p: int, q: int) -> bool:
        """Whether ports p and q are still in one component (a walk from p)."""
        pair, multi, ghops = self._pair, self._multi, self._ghops
        pp, pq = pair[p], pair[q]
        if q in pp or not pp.keys().isdisjoint(pq):
            return True
        for y in pp:  # p - y - x - q (out and in ports of a star)
            if not pair[y].keys().isdisjoint(pq):
                return True
        seen, todo = {p}, [p]
        while todo:
            x = todo.pop()
            for y in pair[x]:
                if y not in seen:
                    if y == q:
                        return True
                    seen.add(y)
                    todo.append(y)
            for g in multi[x]:
                for y, _ in ghops[g]:
                    if y not in seen:
                        if y == q:
                            return True
                        seen.add(y)
                        todo.append(y)
        return False

    def _fill(self, seeds: set[int]) -> None:
        """Refill the component(s) holding the ``seeds`` ports; sets their groups'
        rates. A loop (``_filling``, compiled), not numpy over groups: itersim's rounds
        vectorised take ~15 numpy calls a round and a round per port that fills (1.08
        ms at 20 ports and 380 groups, where even a plain Python loop took 0.08 ms)."""
        if self._cut:
            # a port left with no group is no side of a split: it holds no rate to fill
            users = self._users
            if self._comps is not None and not all(self._linked(p, q) for p, q in self._cut
                                                   if users[p] and users[q]):
                self._comps = None
            self._cut = []
        if self._comps is None:
            self._components()
        comp_of, comps = self._comp_of, self._comps
        cs = {int(comp_of[p]) for p in seeds} if len(comps) > 1 else (0,)
        args = (comp_of, self._counted, self._gport, self._gqueue, self._pcap)
        for c in cs:
            # weighted queues, unless the component has one queue: then the weights change
            # nothing and the strict filling is max-min exactly, as a strict network's
            if self._qweight is not None and not _one_queue(c, comp_of, self._gport, self._gqueue):
                self._fill_weighted(c, args)
                continue
            tol = TOLERANCE * comps[c][1]
            # a priority cycle: filled again by each flow's last hop, which cannot cycle
            if _filling(c, *args, tol, False, self._rate):
                _filling(c, *args, tol, True, self._rate)

    def _fill_weighted(self, c: int, args: tuple) -> None:
        # ports swept in the order of their names, so that where several rate sets are
        # fair the one chosen depends on the flows alone (experiments/sim/weighted.py)
        if self._by_name is None:
            self._by_name = np.array([self._pid[name] for name in sorted(self._pid)], dtype=np.int64)
        residual = self._residual
        weighted_filling(c, *args, self._qweight, WEIGHTED_TOLERANCE, self._by_name, self._rate, residual)
        share = residual[0]
        if share > WEIGHTED_TOLERANCE:  # settled only so far: the rates are feasible, fair to within this
            if share > WEIGHTED_ACCEPTED:
                raise RuntimeError(f"weighted rates did not settle: offers still moved by {share:.2g} of a "
                                   f"port after {MAX_SWEEPS} sweeps")
            self.unsettled_fillings += 1
            self.unsettled_max = max(self.unsettled_max, share)


@njit(cache=True)
def _one_queue(c, comp_of, gport, gqueue):
    """Whether every hop of component ``c``'s groups is in one queue."""
    first = -1
    for g in range(gport.shape[1]):
        p = gport[0, g]
        if p < 0 or comp_of[p] != c:
            continue
        for j in range(gport.shape[0]):
            if j and gport[j, g] < 0:
                break
            if first < 0:
                first = gqueue[j, g]
            elif gqueue[j, g] != first:
                return False
    return True


@njit(cache=True)
def _filling(c, comp_of, count, gport, gqueue, pcap, tol, last_hop, rate):
    """Progressive filling of component ``c``'s groups (the slots whose first port
    ``comp_of`` puts in it; ``count`` members each) by strict priority per port: a
    group rises once, on each of its ports, its queue is the best (lowest) among the
    groups still rising there; it freezes with the first of its ports to fill, at level
    L, and gets L - (the level it started at), into ``rate``. With one queue on every
    port all start at 0: max-min fair. Returns how many groups were left rising: > 0 is
    a priority cycle (every rate of the component then unusable). ``last_hop``: every
    hop in the queue of its group's last hop (one class per flow: no cycle).

    Compiled (numba, cached on disk): in plain Python this filling was most of a
    simulation's time (measurements/simulator-2026-11-25); the rates are the Python
    filling's to rounding (the same sums in another order)."""
    N = len(pcap)
    groups, nh, off, ent_q, ent_i = component_entries(c, comp_of, gport, gqueue, last_hop)
    G = len(groups)
    rising = np.ones(G, np.bool_)
    left = G
    ok = np.zeros(G, np.int64)  # ports where the group's queue is the best
    start = np.full(G, np.nan)  # level at which the group became eligible
    n = np.zeros(N, np.int64)  # members rising at the port
    a = pcap.copy()  # residual + n * L
    frozen = np.zeros(N, np.bool_)
    bq = np.zeros(N, np.int64)  # the port's best queue with groups still rising
    has_best = np.zeros(N, np.bool_)
    be = np.zeros(N, np.int64)  # end of its run of entries
    rem = np.zeros(N, np.int64)  # groups still rising in it
    for i in range(G):
        rate[groups[i]] = 0.0
    # a group is eligible (rises from level 0) once its queue is the best on all its ports
    for p in range(N):
        s, e = off[p], off[p + 1]
        if s == e:
            continue
        q = ent_q[s]
        r = s
        while r < e and ent_q[r] == q:
            r += 1
        bq[p], has_best[p], be[p], rem[p] = q, True, r, r - s
        for k in range(s, r):
            i = ent_i[k]
            ok[i] += 1
            if ok[i] == nh[i]:
                start[i] = 0.0
                g = groups[i]
                for j in range(nh[i]):
                    n[gport[j, g]] += count[g]
    # a heap of (fill level a/n, port), ordered as tuples are
    cap = 2 * N + 16
    hv = np.empty(cap)
    hp = np.empty(cap, np.int64)
    size = 0
    for p in range(N):
        if n[p]:
            hv, hp, size = _push(hv, hp, size, a[p] / n[p], p)
    L = 0.0
    full = np.empty(N, np.int64)
    back_v = np.empty(N)
    back_p = np.empty(N, np.int64)
    emptied = np.empty(N, np.int64)
    pushed = np.empty(N, np.int64)
    stamp = np.zeros(N, np.int64)
    rnd = 0
    # A freeze only raises the fill levels a/n of other ports (entries then stale low:
    # re-pushed when they come up); a group starting to rise lowers them, so those
    # ports are pushed at once.
    while size:
        lvl, p = hv[0], hp[0]
        size = _pop(hv, hp, size)
        if frozen[p] or not n[p]:
            continue
        v = a[p] / n[p]
        if v != lvl:
            hv, hp, size = _push(hv, hp, size, v, p)
            continue
        if lvl > L:
            L = lvl
        frozen[p] = True
        # every other port within tolerance of full freezes in the same round (as a
        # round of itersim.allocate); residual = n * (its level - L), n >= 1
        nfull = 1
        full[0] = p
        nback = 0
        if len(back_v) < size:  # a port can sit in the heap more than once
            back_v, back_p = np.empty(len(hv)), np.empty(len(hv), np.int64)
        lim = L + tol
        while size and hv[0] <= lim:
            q = hp[0]
            size = _pop(hv, hp, size)
            if frozen[q] or not n[q]:
                continue
            if a[q] - n[q] * L <= TOLERANCE * pcap[q]:
                full[nfull] = q
                nfull += 1
                frozen[q] = True
            else:
                back_v[nback] = a[q] / n[q]
                back_p[nback] = q
                nback += 1
        for k in range(nback):
            hv, hp, size = _push(hv, hp, size, back_v[k], back_p[k])
        nemp = 0  # ports whose best queue has no group rising any more
        for f in range(nfull):
            p = full[f]
            for k in range(off[p], off[p + 1]):
                i = ent_i[k]
                if not rising[i]:
                    continue
                rising[i] = False
                left -= 1
                started = not np.isnan(start[i])
                if not started and not ok[i]:
                    continue
                g = groups[i]
                lq = gqueue[nh[i] - 1, g]
                m = count[g]
                d = m * L
                if started:
                    rate[g] = L - start[i]
                # a starved group (rate 0) counted in a best queue: a port waits for it too
                for j in range(nh[i]):
                    q = gport[j, g]
                    if started:
                        n[q] -= m
                        a[q] -= d
                    qq = lq if last_hop else gqueue[j, g]
                    if has_best[q] and qq == bq[q] and not frozen[q]:
                        rem[q] -= 1
                        if not rem[q]:
                            emptied[nemp] = q
                            nemp += 1
        if not nemp:
            continue
        rnd += 1
        npushed = 0
        for x in range(nemp - 1, -1, -1):  # latest first
            q = emptied[x]
            if frozen[q]:
                continue
            # the next queue at q with groups still rising becomes the best
            s, e = be[q], off[q + 1]
            has_best[q] = False
            while s < e:
                qq = ent_q[s]
                r = s
                live = 0
                while r < e and ent_q[r] == qq:
                    live += rising[ent_i[r]]
                    r += 1
                if live:
                    bq[q], has_best[q], be[q], rem[q] = qq, True, r, live
                    for k in range(s, r):
                        h = ent_i[k]
                        if not rising[h]:
                            continue
                        ok[h] += 1
                        if ok[h] == nh[h]:
                            start[h] = L
                            mh = count[groups[h]]
                            d = mh * L
                            g = groups[h]
                            for j in range(nh[h]):
                                q2 = gport[j, g]
                                n[q2] += mh
                                a[q2] += d
                                if stamp[q2] != rnd:
                                    stamp[q2] = rnd
                                    pushed[npushed] = q2
                                    npushed += 1
                    break
                s = r
        for x in range(npushed):
            q = pushed[x]
            if not frozen[q] and n[q]:
                hv, hp, size = _push(hv, hp, size, a[q] / n[q], q)
    return left


@njit(cache=True, inline='always')  # inlined, as _pop: a call per heap operation doubled the filling's time
def _push(hv, hp, size, v, p):
    """Push (v, p) on the heap in hv/hp[:size]; the arrays (grown when full) and size."""
    if size == len(hv):
        hv2 = np.empty(2 * size)
        hp2 = np.empty(2 * size, np.int64)
        hv2[:size] = hv
        hp2[:size] = hp
        hv, hp = hv2, hp2
    k = size
    while k:
        u = (k - 1) >> 1
        if hv[u] < v or (hv[u] == v and hp[u] < p):
            break
        hv[k], hp[k] = hv[u], hp[u]
        k = u
    hv[k], hp[k] = v, p
    return hv, hp, size + 1


@njit(cache=True, inline='always')
def _pop(hv, hp, size):
    """Drop the heap's top; the new size."""
    size -= 1
    v, p = hv[size], hp[size]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= size:
            break
        if c + 1 < size and (hv[c + 1] < hv[c] or (hv[c + 1] == hv[c] and hp[c + 1] < hp[c])):
            c += 1
        if v < hv[c] or (v == hv[c] and p < hp[c]):
            break
        hv[k], hp[k] = hv[c], hp[c]
        k = c
    hv[k], hp[k] = v, p
    return size


def bench_network(flows: int = 2400, ports: int = 20, transfers: int = 50000, seed: int = 1,
                  queues: int = 1, weights: Mapping[int, float] | None = None) -> float:
    """Seconds per delivered transfer for a synthetic churn: ``flows`` concurrent flows,
    each over a random pair of distinct ports out of ``ports`` (10 Gb/s each) with a
    log-uniform size of 100 kB..10 MB; each delivered flow is replaced at once by a
    new one. ``queues`` > 1 gives each flow a random rank 0..queues-1 used as its queue
    on both ports (one order, as decisions give); ``weights``: the queues (then 1..queues)
    share by weight."""
    rng = random.Random(seed)
    names = [f"p{i}" for i in range(ports)]
    net = FluidNetwork({}, default_capacity=1.25e9, weights=weights)
    first = 0 if weights is None else 1
    next_id = 0

    def new_flow():
        nonlocal next_id
        a, b = rng.sample(names, 2)
        q = first + rng.randrange(queues)
        net.add(next_id, ((a, q), (b, q)), 10 ** rng.uniform(5, 7))
        next_id += 1

    for _ in range(flows):
        new_flow()
    net.next_end()  # the first filling (compiles ``_filling`` on a cold cache) is not timed
    done = 0
    t0 = time.perf_counter()
    while done < transfers:
        ended = net.advance(net.next_end())
        done += len(ended)
        for _ in ended:
            new_flow()
    return (time.perf_counter() - t0) / done
