"""A component's groups and each port's entries, as both fillings read them
(``network._filling``, strict priority; ``weighted.weighted_filling``)."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline='always')  # inlined: the strict filling runs per change, this is its setup
def component_entries(c, comp_of, gport, gqueue, last_hop):
    """The slots of component ``c``'s groups (those whose first port ``comp_of`` puts in
    it) as ``groups``, each one's hop count ``nh``, and every port's groups as (queue,
    group index) entries sorted by queue: port p's are ``ent_q``/``ent_i[off[p]:off[p + 1]]``,
    a queue's groups a run of them. ``last_hop``: every hop in the queue of its group's
    last hop."""
    H, N = gport.shape[0], len(comp_of)
    G = 0
    groups = np.empty(gport.shape[1], np.int64)
    for g in range(gport.shape[1]):
        p = gport[0, g]
        if p >= 0 and comp_of[p] == c:
            groups[G] = g
            G += 1
    groups = groups[:G]
    nh = np.zeros(G, np.int64)
    deg = np.zeros(N + 1, np.int64)
    for i in range(G):
        g = groups[i]
        for j in range(H):
            p = gport[j, g]
            if p < 0:
                break
            deg[p + 1] += 1
            nh[i] += 1
    off = np.cumsum(deg)
    fill = off[:N].copy()
    ent_q = np.empty(off[N], np.int64)
    ent_i = np.empty(off[N], np.int64)
    for i in range(G):
        g = groups[i]
        lq = gqueue[nh[i] - 1, g]
        for j in range(nh[i]):
            p = gport[j, g]
            k = fill[p]
            q = lq if last_hop else gqueue[j, g]
            # insertion by (queue, index): indices come ascending, so only the queue moves it
            while k > off[p] and ent_q[k - 1] > q:
                ent_q[k] = ent_q[k - 1]
                ent_i[k] = ent_i[k - 1]
                k -= 1
            ent_q[k] = q
            ent_i[k] = i
            fill[p] += 1
    return groups, nh, off, ent_q, ent_i
