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
are delivered together (one recompute after), in add order.

Why grouping is exact: flows with identical hops are interchangeable in the filling
(same ports, same queues), so at every round they are eligible together and freeze
together: they always get the same rate. The filling therefore runs over groups of
identical hops, a port counting a group as its number of members.

The filling is itersim's, driven by events instead of rounds: over the common level
L (the sum of the steps so far), a port with n members rising and frozen load f
fills at L = (capacity - f)/n, so a heap of ports gives the next freeze; a group
that started rising at level s and froze at L gets L - s. With one queue on every
port of a component all groups start at 0 and a group's rate is the least fill level
of its ports, so the loop walks port pairs (2-hop groups summed) rather than groups.
Rates match itersim's to float rounding (~1e-15); the one difference is that a port
within 1e-9 of full is frozen in the same round only inside its own component, where
itersim's single global round also freezes one elsewhere: at most 1e-9 of a rate.

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
  filling (still connected: nothing changed). A component is filled by priority only
  if one of its ports has more than one queue (checked at each filling).
- while no component has priorities (and none was filled by priority since every
  component was last refilled), every group's rate is the least one-queue fill level
  of its ports, each port keeping its level from its component's last filling, so
  rates are set for all groups at once (``_fill``).
- the clock only moves in ``advance``, after the rates are current, so ``sent`` always
  integrates the rates actually in force. A group's next delivery time is cached with
  its rate; ``advance(next_end())`` delivers by those same cached numbers, so it
  always makes progress. Within a group only the heap top (and members behind it
  within tolerance) is checked: a member behind a top that is not yet due, with a
  larger size and so a wider tolerance, waits at most 1e-9 of its duration.

Cost: a change costs one refill of its component at the next query: O(port pairs)
for one queue, O(groups x hops) with priorities, in plain Python (measured against a
numpy version of the rounds, see ``_fill``); the clock and the next end are numpy
vector operations over groups. ``bench_network`` measures a churn (``make bench``'s
``sim_network_churn_*`` rows). On the Grouper trace (20 ports, ~2,400 flows in ~90
groups under FS, ~120 under Grouper) a one-queue filling takes ~40 us and a priority
one ~130 us: most of a simulation's time.
"""
from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Hashable, Mapping

import numpy as np

# A port counts as full, and a flow as delivered, within this share of the port's
# capacity or of the flow's size (as itersim): float residue must not leave a
# 1e-17 s event behind.
TOLERANCE = 1e-9
# A group's sent is rebased to 0 before a flow joins when it exceeds this many times
# the flow's bytes: a member's bytes left (finish - sent) then carry float error of a
# few ulps of its own bytes, not of the group's whole history.
_REBASE = 8.0
_INF = math.inf
_DEAD = -2  # _gport row 0 of a free or idle slot: the level 0 (rate 0)
# Groups left with no member are kept (idle) for reuse, at most this many
_IDLE = 128

Hops = tuple[tuple[str, int], ...]


class FluidNetwork:
    """Flows in flight over ports of given capacities (bytes/s); see the module doc."""

    def __init__(self, capacity: Mapping[str, float], default_capacity: float | None = None):
        for port, c in capacity.items():
            if not c > 0 or math.isinf(c):
                raise ValueError(f"port {port!r}: capacity must be finite and > 0, got {c!r}")
        if default_capacity is not None and (not default_capacity > 0 or math.isinf(default_capacity)):
            raise ValueError(f"default_capacity must be finite and > 0, got {default_capacity!r}")
        self._capacity = dict(capacity)
        self._default = default_capacity
        self.now = 0.0
        # ports, by index
        self._pid: dict[str, int] = {}
        self._pcap: list[float] = []
        self._users: list[set[int]] = []  # groups crossing the port
        self._pqueues: list[dict[int, set[int]]] = []  # queue -> its groups (>1 key: priorities)
        # member counts as of the last filling, aggregated per port: the one-queue
        # filling then walks port pairs instead of groups (most flows have 2 hops)
        self._deg: list[int] = []  # members crossing the port
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
        self._counted: list[int] = []  # member count at the last filling
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
        # _gport[j, g]: index of the j-th port of group g, -1 past its last hop (one row
        # per hop position: column-wise np.minimum is far faster than min(axis=1)); a
        # free slot has _DEAD in row 0
        self._gport = np.zeros((2, 0), dtype=np.intp)
        self._next = _INF
        self._dirty_groups: set[int] = set()
        self._dirty_ports: set[int] = set()
        self._comps = None  # components of ports, see _components
        self._comp_of: list[int] = []
        self._cut: list[tuple[int, int]] = []  # port pairs unlinked since _components
        self._mixed_ports = 0  # ports with more than one queue
        # fill level of every port by its component's last one-queue filling, then the
        # levels _DEAD (0: rate 0) and -1 (inf: padding) index; while _levels_ok, every
        # group's rate is the least level of its ports (no priority filling since the
        # last refill of every component)
        self._lv = [0.0, _INF]
        self._levels_ok = True
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
            self._pcap.append(float(c))
            self._users.append(set())
            self._pqueues.append({})
            self._deg.append(0)
            self._pair.append({})
            self._multi.append(set())
            self._lv.insert(-2, _INF)
            self._comps = None
        return pid

    def _new_group(self, hops: Hops) -> int:
        if not isinstance(hops, tuple) or not hops:
            raise ValueError(f"hops must be a non-empty tuple of (port, queue), got {hops!r}")
        ports = [p for p, _ in hops]
        if len(set(ports)) != len(ports):
            raise ValueError(f"hops cross a port twice: {hops!r}")
        ghops = tuple((self._port(p), int(q)) for p, q in hops)
        if self._free:
            g = self._free.pop()
        else:
            g = len(self._ghops)
            for lst, v in ((self._ghops, None), (self._gkey, None), (self._heap, None), (self._count, 0),
                           (self._counted, 0)):
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
        gport = self._gport
        for j in range(1, len(ghops)):
            gport[j, g] = ghops[j][0]
        self._attach(g)
        return g

    def _attach(self, g: int) -> None:
        """Make a new or idle group seen by the filling (it then has members)."""
        ghops = self._ghops[g]
        self._gport[0, g] = ghops[0][0]
        users, pqueues = self._users, self._pqueues
        for pid, q in ghops:
            users[pid].add(g)
            pq = pqueues[pid]
            if q in pq:
                pq[q].add(g)
            else:
                pq[q] = {g}
                if len(pq) == 2:
                    self._mixed_ports += 1
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
        self._recount(g, -self._counted[g])
        ghops = self._ghops[g]
        users, pqueues, dirty = self._users, self._pqueues, self._dirty_ports
        for pid, q in ghops:
            users[pid].discard(g)
            pq = pqueues[pid]
            s = pq[q]
            s.discard(g)
            if not s:
                del pq[q]
                if len(pq) == 1:
                    self._mixed_ports -= 1
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
        """Fold a change of ``d`` members of group ``g`` into the per-port aggregates."""
        if not d:
            return
        gh = self._ghops[g]
        deg = self._deg
        for pid, _ in gh:
            deg[pid] += d
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
        gport = np.full((len(self._gport), size), -1, dtype=np.intp)
        gport[0, old:] = _DEAD
        gport[:, :old] = self._gport
        self._gport = gport

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
            d = c - counted[g]
            if d:
                recount(g, d)
                # a starved group (rate 0, there before and after) moves nothing: its
                # multiplicity cannot change any rate, so it needs no refill
                if not (counted[g] and rate[g] == 0.0):
                    for p, _ in ghops[g]:
                        seeds.add(p)
                counted[g] = c
        self._dirty_groups = set()
        self._dirty_ports = set()
        if seeds:
            self._fill(seeds)
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
            comps.append((ports, max([pcap[p] for p in ports])))
        self._comp_of, self._comps = comp_of, comps
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
            for p in other:
                comp_of[p] = keep
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
        """Refill the component(s) holding the ``seeds`` ports; sets their groups' rates.

        Plain Python rather than numpy, by measurement (2400 flows on random port
        pairs): itersim's rounds vectorised over groups take ~15 numpy calls a round
        and one round per port that fills: 1.08 ms at 20 ports and 380 groups (this
        loop: 0.08 ms), 1.38 ms with 2 queues and 727 groups (0.55 ms), 6.3 ms at 60
        ports and 1770 groups (0.36 ms). numpy stays for the per-group vectors (clock,
        next end), where one call replaces a loop over all groups.
        """
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
        cs = {comp_of[p] for p in seeds} if len(comps) > 1 else (0,)
        mixed_ports = self._mixed_ports
        if not mixed_ports and not self._levels_ok:
            # no priorities left: refill every component once, so that every group's
            # rate is the least level of its ports again (unchanged ones refill equal)
            cs = range(len(comps))
            self._levels_ok = True
        pqueues = self._pqueues
        single = []
        for c in cs:
            ports, cmax = comps[c]
            if mixed_ports and any(len(pqueues[p]) > 1 for p in ports):
                self._levels_ok = False
                users = self._users
                groups = list(set().union(*[users[p] for p in ports]))
                if groups:
                    try:
                        rates = self._fill_priority(groups, ports, cmax)
                    except PriorityCycle:
                        rates = self._fill_priority(groups, ports, cmax, *self._by_last_hop(groups))
                    self._rate[np.array(groups, dtype=np.intp)] = rates
                continue
            # one queue per port: every group rises from 0 and freezes with the first
            # of its ports to fill, so its rate is the least fill level of its ports
            self._fill_single(ports, cmax)
            single.append(ports)
        if not single:
            return
        level = np.array(self._lv)
        gport = self._gport
        if self._levels_ok:
            # every other component's levels are those of its last filling too
            r = self._rate
            level.take(gport[0], out=r)
            for row in gport[1:]:
                np.minimum(r, level.take(row), out=r)
            return
        r = level.take(gport[0])
        for row in gport[1:]:
            np.minimum(r, level.take(row), out=r)
        inside = np.zeros(len(level), dtype=bool)  # False at _DEAD and -1
        for ports in single:
            inside[ports] = True
        np.copyto(self._rate, r, where=inside.take(gport[0]))

    def _fill_single(self, ports: list[int], cmax: float) -> None:
        """One queue on every port: the level at which each port of ``ports`` fills
        (inf: never), into ``_lv``. 2-hop groups are walked as port pairs, 3+ hop
        groups one by one; a 1-hop group only counts in its port's total. Event-driven
        over the common level L: a port with n members rising and a = residual + n*L
        fills at a/n; a heap of ports gives the next."""
        pcap, pair, multi = self._pcap, self._pair, self._multi
        n = list(self._deg)  # members rising at the port; 0 once it is frozen
        a = list(pcap)
        level = self._lv
        heap = []
        for p in ports:
            level[p] = _INF
            k = n[p]
            if k:
                heap.append((a[p] / k, p))
        if not heap:
            return
        heapq.heapify(heap)
        done = None  # 3+ hop groups frozen
        L = 0.0
        tol = TOLERANCE * cmax
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        # With one queue a port's fill level a/n only rises ((a - mL)/(n - m) >= a/n
        # when a/n >= L), so a heap entry is a lower bound: a freeze only updates a and
        # n of the neighbours, and a port's level is recomputed (and put back if it
        # rose) when its entry comes up. Far fewer operations than eager updates.
        # A port whose members all froze elsewhere (n = 0) never fills.
        while heap:
            lvl, p = heap[0]
            k = n[p]
            if not k:
                heappop(heap)
                continue
            v = a[p] / k
            if v > lvl:
                heapreplace(heap, (v, p))
                continue
            heappop(heap)
            if lvl > L:
                L = lvl
            n[p] = 0
            level[p] = L
            # every other port within TOLERANCE of full freezes in the same round (as a
            # round of itersim.allocate); residual = n * (its level - L), n >= 1
            lim = L + tol
            if heap and heap[0][0] <= lim:
                full = [p]
                back = []
                while heap and heap[0][0] <= lim:
                    q = heappop(heap)[1]
                    k = n[q]
                    if not k:
                        continue
                    if a[q] - k * L <= TOLERANCE * pcap[q]:
                        full.append(q)
                        n[q] = 0
                        level[q] = L
                    else:
                        back.append((a[q] / k, q))
                for x in back:
                    heapq.heappush(heap, x)
            else:
                full = (p,)
            for p in full:
                # a pair whose other port is not frozen was rising until now
                for q, m in pair[p].items():
                    if n[q]:
                        n[q] -= m
                        a[q] -= m * L
                if multi[p]:
                    if done is None:
                        done = set()
                    count, ghops = self._count, self._ghops
                    for g in multi[p]:
                        if g not in done:
                            done.add(g)
                            m = count[g]
                            for q, _ in ghops[g]:
                                if n[q]:
                                    n[q] -= m
                                    a[q] -= m * L

    def _by_last_hop(self, groups: list[int]) -> tuple[list, list]:
        """(hops, port queues) of ``groups`` with every hop in the queue of the group's
        last hop: one class per flow, so the classes follow one order at every port."""
        ghops = list(self._ghops)
        pqueues = [dict(pq) for pq in self._pqueues]
        touched = {p for g in groups for p, _ in ghops[g]}
        for p in touched:
            pqueues[p] = {}
        for g in groups:
            last = ghops[g][-1][1]
            ghops[g] = tuple((p, last) for p, _ in ghops[g])
        for g in set().union(*[self._users[p] for p in touched]):
            for p, q in ghops[g]:
                if p in touched:
                    pqueues[p].setdefault(q, set()).add(g)
        return ghops, pqueues

    def _fill_priority(self, groups: list[int], ports: list[int], cmax: float, ghops=None,
                       pqueues=None) -> list[float]:
        """Strict priority per port: a group rises once, on each of its ports, its
        queue is the best (lowest) among the groups still rising there; it freezes with
        the first of its ports to fill, at level L, and gets L - (level it started at).
        A port's groups by queue are kept between fillings (``_pqueues``); ``ghops``
        and ``pqueues`` replace the groups' own (``_by_last_hop``)."""
        users, count, pcap = self._users, self._count, self._pcap
        ghops = self._ghops if ghops is None else ghops
        pqueues = self._pqueues if pqueues is None else pqueues
        S, N = len(ghops), len(pcap)
        rising = [False] * S
        for g in groups:
            rising[g] = True
        left = len(groups)
        ok = [0] * S  # ports where the group's queue is the best
        start: list = [None] * S  # level at which the group became eligible
        rate = [0.0] * S
        n = [0] * N  # members rising at the port
        a = list(pcap)  # residual + n * L
        frozen = [False] * N
        qs: list = [None] * N  # the port's queues, ascending
        bi = [0] * N  # index in qs of the best queue with groups still rising
        bestq: list = [None] * N  # that queue
        rem = [0] * N  # groups still rising in the best queue
        # a group is eligible (rises from level 0) once its queue is the best on all its ports
        for p in ports:
            pq = pqueues[p]
            if not pq:
                continue
            if len(pq) == 1:
                for b in pq:
                    qs[p] = (b,)
            else:
                qs[p] = sorted(pq)
                b = qs[p][0]
            bestq[p] = b
            best = pq[b]
            rem[p] = len(best)
            for g in best:
                k = ok[g] + 1
                ok[g] = k
                gh = ghops[g]
                if k == len(gh):
                    start[g] = 0.0
                    m = count[g]
                    for q, _ in gh:
                        n[q] += m
        heap = [(a[p] / n[p], p) for p in ports if n[p]]
        heapq.heapify(heap)
        L = 0.0
        tol = TOLERANCE * cmax
        heappop, heappush = heapq.heappop, heapq.heappush
        # A freeze only raises the fill levels a/n of other ports (entries then stale
        # low: re-pushed when they come up); a group starting to rise lowers them, so
        # those ports are pushed at once.
        while heap:
            lvl, p = heappop(heap)
            if frozen[p]:
                continue
            k = n[p]
            if not k:
                continue
            v = a[p] / k
            if v != lvl:
                heappush(heap, (v, p))
                continue
            if lvl > L:
                L = lvl
            frozen[p] = True
            # every other port within TOLERANCE of full freezes in the same round (as a
            # round of itersim.allocate); residual = n * (its level - L), n >= 1
            lim = L + tol
            if heap and heap[0][0] <= lim:
                full = [p]
                back = []
                while heap and heap[0][0] <= lim:
                    q = heappop(heap)[1]
                    if frozen[q]:
                        continue
                    k = n[q]
                    if not k:
                        continue
                    if a[q] - k * L <= TOLERANCE * pcap[q]:
                        full.append(q)
                        frozen[q] = True
                    else:
                        back.append((a[q] / k, q))
                for x in back:
                    heappush(heap, x)
            else:
                full = (p,)
            emptied = []  # ports whose best queue has no group rising any more
            for p in full:
                for g in users[p]:
                    if not rising[g]:
                        continue
                    rising[g] = False
                    left -= 1
                    s = start[g]
                    if s is not None:
                        rate[g] = L - s
                        m = count[g]
                        d = m * L
                        for q, qq in ghops[g]:
                            n[q] -= m
                            a[q] -= d
                            if qq == bestq[q] and not frozen[q]:
                                rem[q] -= 1
                                if not rem[q]:
                                    emptied.append(q)
                    elif ok[g]:  # starved (rate 0), counted in a best queue: a port waits for it
                        for q, qq in ghops[g]:
                            if qq == bestq[q] and not frozen[q]:
                                rem[q] -= 1
                                if not rem[q]:
                                    emptied.append(q)
            if not emptied:
                continue
            pushed = {}
            for q in reversed(emptied):  # latest first
                if frozen[q]:
                    continue
                # the next queue at q with groups still rising becomes the best
                qq, i = qs[q], bi[q] + 1
                pq = pqueues[q]
                nq = len(qq)
                while i < nq:
                    cls = [h for h in pq[qq[i]] if rising[h]]
                    if cls:
                        break
                    i += 1
                bi[q] = i
                if i == nq:
                    bestq[q] = None
                    continue
                bestq[q] = qq[i]
                rem[q] = len(cls)
                for h in cls:
                    k = ok[h] + 1
                    ok[h] = k
                    gh = ghops[h]
                    if k == len(gh):
                        start[h] = L
                        mh = count[h]
                        d = mh * L
                        for q2, _ in gh:
                            n[q2] += mh
                            a[q2] += d
                            pushed[q2] = None
            for q in pushed:
                if not frozen[q] and n[q]:
                    heappush(heap, (a[q] / n[q], q))
        if left:
            stuck = sorted({self._gkey[g] for g in groups if rising[g]}, key=repr)[:4]
            raise PriorityCycle(f"flows block each other: their queues follow no single order (hops {stuck})")
        return [*map(rate.__getitem__, groups)]


class PriorityCycle(RuntimeError):
    """Flows whose queues follow no single order: each is behind another on some port."""


def bench_network(flows: int = 2400, ports: int = 20, transfers: int = 50000, seed: int = 1,
                  queues: int = 1) -> float:
    """Seconds per delivered transfer for a synthetic churn: ``flows`` concurrent flows,
    each over a random pair of distinct ports out of ``ports`` (10 Gb/s each) with a
    log-uniform size of 100 kB..10 MB; each delivered flow is replaced at once by a
    new one. ``queues`` > 1 gives each flow a random rank 0..queues-1 used as its queue
    on both ports (one order, as decisions give)."""
    rng = random.Random(seed)
    names = [f"p{i}" for i in range(ports)]
    net = FluidNetwork({}, default_capacity=1.25e9)
    next_id = 0

    def new_flow():
        nonlocal next_id
        a, b = rng.sample(names, 2)
        q = rng.randrange(queues)
        net.add(next_id, ((a, q), (b, q)), 10 ** rng.uniform(5, 7))
        next_id += 1

    for _ in range(flows):
        new_flow()
    done = 0
    t0 = time.perf_counter()
    while done < transfers:
        ended = net.advance(net.next_end())
        done += len(ended)
        for _ in ended:
            new_flow()
    return (time.perf_counter() - t0) / done
