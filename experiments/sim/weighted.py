"""Rates on ports whose queues share by weight (the fabric's ``emulation.queue_weights``:
queues 1..7 of every port in one htb priority, DRR quanta in proportion to the
weights; ``topologies.queues``), for ``experiments.sim.network.FluidNetwork``.

Model, per port: the queues share the port in proportion to their weights, a queue's
share never more than its flows can take (weighted max-min over queues: what one
cannot use goes to the others, by weight); within a queue, max-min over its flows.
Over a fabric, a flow's rate is the least of what its hops give it. The emulation's
guarantees (2% of the link per queue, split by weight) are left out, as the
strict-priority model leaves them out, and so is queue 0 (above the weighted queues
on the fabric: control traffic, which no simulated flow is).

Fair here means hierarchical max-min: every flow has a bottleneck hop, a full port
where no flow of its queue is faster and no queue takes more per unit of weight than
its own. Unlike strict priority that is not one progressive filling (a flow's share of
a common level differs from port to port: its queue's weight over that port's members
of the queue), and it need not be one rate set: two flows sharing a queue at one port
and in queues of weights 2 and 1 at the next are fair at any split from 1 : 1 to 2 : 1
(tests/test_sim_weighted.py). The model picks one by rule: each port offers each of
its queues a level (what a member with more demand would get), from demands that are
the least offers of the members' other hops, as ABR switches find max-min rates;
from no offers, ports are visited in the order of their names (Gauss-Seidel sweeps
over the component) until a sweep moves no offer by more than ``tol`` (``TOLERANCE``
of the component's largest port), offers moving only halfway to a port's new ones
after ``UNDAMPED`` sweeps, and by smaller steps after each ``WINDOW`` of sweeps that
did not halve the move. So the rates are a function of the flows in
flight (to float rounding), not of their history; the fabric's TCP may settle at
another fair split. A flow's rate is its least share on its hops from the settled
offers, so no port is ever over its capacity. A filling that has not settled after
``MAX_SWEEPS`` sweeps stops there: on the paper's cluster a few circle for good, their
offers moving by about 5e-5 of a port whatever the step, and on the 60-host spec (seed
5, weights 4 : 3 : 2 : 1 : 1 : 1 : 1) one by 2.3e-3, seven ports' offers drifting round
a long cycle that neither the smaller steps nor 10,000 sweeps settle
(tests/data/weighted-circling-sim60-seed5.npz); the network accepts that up to
``ACCEPTED`` and counts it (a simulated cojob run's ``weighted_unsettled_fillings``
and ``weighted_unsettled_max``), and raises beyond.

Checked: tests/test_sim_weighted.py (the bottleneck conditions on random fabrics and
through deliveries and arrivals, one queue everywhere as the strict filling, the rule's
choice independent of history); measurements/weighted-model-2026-11-29 (3,000 random
fabrics, the iterations tried and dropped on the way).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from experiments.sim.entries import component_entries

# Offers settle within this share of a connected part's largest port (strict
# priority's fillings are exact to float rounding): on the paper's trace some fillings
# circle for good within about 1e-7 of it.
TOLERANCE = 1e-6
# What the caller accepts of a filling that stopped at MAX_SWEEPS with offers still
# moving (a share of a connected part's largest port): on the paper's cluster a few
# fillings circle for good by about 5e-5 of it, whatever the step; on the 60-host
# spec one by 2.3e-3. The rates stay within every port's capacity either way.
ACCEPTED = 1e-2
# Sweeps before the filling stops where it is (the caller judges what is left):
# random fabrics settle in tens, 121 at most.
MAX_SWEEPS = 1000
# Sweeps that take each port's new offers as they are (most fillings settle within
# them); later ones move offers halfway, and by half as much again after each WINDOW
# of sweeps that did not halve the move, down to MIN_STEP (a queue's share flipping
# between two levels settles so: on the paper's cluster at 40 Gbit/s a filling
# swung by 1/8 of a port for good at half steps, and settled in 190 sweeps).
UNDAMPED = 50
WINDOW = 50
MIN_STEP = 1.0 / 64


@njit(cache=True)
def _level(m, d, a, b, order, capacity):
    """The water level x at which sum(m[k] * min(d[k], x)) over k in a..b reaches
    ``capacity`` (inf: every demand is met); ``order[a:b]`` is scratch."""
    if b - a > 24:
        order[a:b] = a + np.argsort(d[a:b])
    else:  # insertion sort: a port's queue is mostly a few groups, and this allocates nothing
        for k in range(a, b):
            v = d[k]
            j = k
            while j > a and d[order[j - 1]] > v:
                order[j] = order[j - 1]
                j -= 1
            order[j] = k
    left = capacity
    n = 0.0
    for j in range(a, b):
        n += m[order[j]]
    for j in range(a, b):
        k = order[j]
        if d[k] * n <= left:
            left -= m[k] * d[k]
            n -= m[k]
            if n <= 0.0:
                return np.inf
        else:
            return max(left, 0.0) / n
    return np.inf


@njit(cache=True)
def _largest(d, s, e):
    """The entry of s..e with the largest demand."""
    best = s
    for j in range(s + 1, e):
        if d[j] > d[best]:
            best = j
    return best


@njit(cache=True)
def _offer(s, e, ent_q, m, d, cap, qweight, out, order, starts, qd, qw, qorder):
    """One port's offers over its entries s..e (sorted by queue), members ``m`` with
    demands ``d`` each, into ``out``: the water level of each entry's queue, what a
    member of it with more demand would get. The queues by weight, max-min inside a
    queue. Where a queue takes all it asks, the offer is the level its most demanding
    entry would get with no limit of its own (as an ABR switch's advertised rate): an
    offer of "anything" (inf) makes the members' other ports take them as unlimited,
    and a port can then swing between inf and a level for good (seen on the paper's
    trace). ``order`` (as ``d``), ``starts``, ``qd``, ``qw``, ``qorder`` (a queue
    each, and one more) are scratch."""
    # the queues' runs: demand and weight of each
    nq = 0
    j = s
    while j < e:
        starts[nq] = j
        q = ent_q[j]
        while j < e and ent_q[j] == q:
            j += 1
        nq += 1
    starts[nq] = e
    for r in range(nq):
        qw[r] = qweight[ent_q[starts[r]]]
        total = 0.0
        for j in range(starts[r], starts[r + 1]):
            total += m[j] * d[j]
        qd[r] = total / qw[r]  # a queue's demand, per unit of its weight
    # weighted max-min over the queues: the level y (per unit of weight)
    y = _level(qw, qd, 0, nq, qorder, cap)
    for r in range(nq):
        a, b = starts[r], starts[r + 1]
        # a queue that asks no more than its share takes all it asks: decided on the
        # queue's demand, not on its members' sum against the share, which rounds either
        # way and then swings the offer between that sum's level and inf for good
        x = np.inf if qd[r] <= y else _level(m, d, a, b, order, y * qw[r])
        if x == np.inf:  # what its most demanding entry would get with no limit of its own
            top = _largest(d, a, b)
            held, held_q, d[top], qd[r] = d[top], qd[r], np.inf, np.inf
            x = _level(m, d, a, b, order, _level(qw, qd, 0, nq, qorder, cap) * qw[r])
            d[top], qd[r] = held, held_q
        for j in range(a, b):
            out[j] = x


@njit(cache=True)
def _root(parent, p):
    """Port ``p``'s part in the union-find ``parent`` (paths halved on the way)."""
    while parent[p] != p:
        parent[p] = parent[parent[p]]
        p = parent[p]
    return p


@njit(cache=True)
def _demands(s, e, ent_i, nh, at, offer, d):
    """Port entries s..e's demands into ``d``: each the least offer on its group's other hops."""
    for k in range(s, e):
        i = ent_i[k]
        v = np.inf
        for j in range(nh[i]):
            kk = at[j, i]
            if kk != k and offer[kk] < v:
                v = offer[kk]
        d[k] = v


@njit(cache=True)
def weighted_filling(c, comp_of, count, gport, gqueue, pcap, qweight, rel_tol, by_name, rate, residual):
    """The rates of component ``c``'s groups (the slots whose first port ``comp_of``
    puts in it; ``count`` members each, hops ``gport``/``gqueue`` as
    ``network._filling`` reads them) on weighted ports (``qweight[q]`` of queue q,
    every queue of a hop weighted; at least one member each), into ``rate``; the ports
    swept in the order of ``by_name`` (every port index, ordered by name), each
    connected part of the component until no offer moves by more than ``rel_tol`` of
    the part's largest port, or ``MAX_SWEEPS``. Returns the most sweeps a part took;
    ``residual[0]``: the most an offer moved in a part's last sweep, as a share of
    the part's largest port (<= ``rel_tol``: settled).
    """
    H, N = gport.shape[0], len(pcap)
    groups, nh, off, ent_q, ent_i = component_entries(c, comp_of, gport, gqueue, False)
    G, E = len(groups), off[N]
    # each group's entries: at[:nh[i], i]
    at = np.empty((H, G), np.int64)
    seen = np.zeros(G, np.int64)
    m = np.empty(E)
    for k in range(E):
        i = ent_i[k]
        at[seen[i], i] = k
        seen[i] += 1
        m[k] = count[groups[i]]
    offer = np.full(E, np.inf)
    d = np.empty(E)
    out = np.empty(E)
    order = np.empty(E, np.int64)
    Q = len(qweight)
    starts, qorder = np.empty(Q + 1, np.int64), np.empty(Q, np.int64)
    qd, qw = np.empty(Q), np.empty(Q)
    # the component's connected parts (a cached component may hold several: network.py),
    # each port's part by union over its groups' hops; each part settles on its own
    parent = np.arange(N)
    for i in range(G):
        r0 = _root(parent, gport[0, groups[i]])
        for j in range(1, nh[i]):
            r = _root(parent, gport[j, groups[i]])
            if r != r0:
                parent[r] = r0
    # ports in name order, grouped by part: a part's ports are ports[pstart[t]:pstart[t + 1]]
    part_of = np.full(N, -1)
    nparts = 0
    size = np.zeros(N + 1, np.int64)
    for p in by_name:
        if off[p + 1] > off[p]:
            r = _root(parent, p)
            if part_of[r] < 0:
                part_of[r] = nparts
                nparts += 1
            size[part_of[r] + 1] += 1
    pstart = np.cumsum(size[:nparts + 1])
    put = pstart[:nparts].copy()
    ports = np.empty(pstart[nparts], np.int64)
    for p in by_name:
        if off[p + 1] > off[p]:
            t = part_of[_root(parent, p)]
            ports[put[t]] = p
            put[t] += 1
    most_sweeps = 0
    worst = 0.0
    for t in range(nparts):
        a, b = pstart[t], pstart[t + 1]
        largest = 0.0
        for w in range(a, b):
            largest = max(largest, pcap[ports[w]])
        tol = rel_tol * largest
        sweeps = 0
        moved = np.inf
        step = 1.0
        mark = np.inf  # the last window's final move
        while moved > tol and sweeps < MAX_SWEEPS:
            sweeps += 1
            if sweeps == UNDAMPED + 1:
                step = 0.5
            elif sweeps > UNDAMPED + 1 and (sweeps - UNDAMPED - 1) % WINDOW == 0:
                if moved > 0.5 * mark:  # a window that did not halve the move: a smaller step
                    step = max(0.5 * step, MIN_STEP)
                mark = moved
            moved = 0.0
            for w in range(a, b):
                p = ports[w]
                s, e = off[p], off[p + 1]
                _demands(s, e, ent_i, nh, at, offer, d)
                _offer(s, e, ent_q, m, d, pcap[p], qweight, out, order, starts, qd, qw, qorder)
                for k in range(s, e):
                    old, new = offer[k], out[k]
                    if old == new:
                        continue
                    moved = max(moved, abs(new - old))  # inf (no offer yet) -> finite: inf
                    # after UNDAMPED sweeps a step of the way: the offers of two ports can
                    # swing each other forever (see the module doc); a damped step settles,
                    # at a fixed point of the same iteration
                    offer[k] = old + step * (new - old) if old != np.inf else new
        most_sweeps = max(most_sweeps, sweeps)
        worst = max(worst, moved / largest)
    # the rates: each group's least share (its offer, or its demand where less) on its
    # hops, from the settled offers, so that every port's sum is within its capacity
    # (the least offers alone could pass it by up to tol a member)
    for i in range(G):
        rate[groups[i]] = np.inf
    for w in range(len(ports)):
        p = ports[w]
        s, e = off[p], off[p + 1]
        _demands(s, e, ent_i, nh, at, offer, d)
        _offer(s, e, ent_q, m, d, pcap[p], qweight, out, order, starts, qd, qw, qorder)
        for k in range(s, e):
            g = groups[ent_i[k]]
            share = min(out[k], d[k])
            if share < rate[g]:
                rate[g] = share
    residual[0] = worst
    return most_sweeps
