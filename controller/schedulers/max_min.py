"""Max-min fair progressive filling over shared resources (pure).

The one copy: ``oes.max_min_fair_rates`` fills NICs with it, the timetable metrics host link directions.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping


def max_min_fill(capacity: Mapping[Hashable, float],
                 uses: Mapping[Hashable, tuple[Hashable, ...]]) -> dict[Hashable, float]:
    """flow -> rate: the max-min fair rates of flows that each use the resources ``uses`` names.

    Progressive filling, one bottleneck per round: the resource whose remaining
    capacity split over its unfixed flows is the least fixes those flows at that
    share, which every other resource they use then gives up. Invariants:

    - every flow of ``uses`` gets a rate >= 0;
    - no resource carries more than max(capacity, 0) (up to rounding): a capacity
      <= 0 means nothing is left, so every flow through it gets 0;
    - every flow has a bottleneck: a resource it uses that is full and on which no
      flow has a higher rate (so no flow can rise without lowering a smaller one);
    - ties between bottlenecks go to the resource first named in ``uses``, so the
      result does not depend on hashing.

    A flow must use at least one resource, each named once and with a capacity.
    O(resources x rounds); there are at most as many rounds as resources.
    """
    left: dict[Hashable, float] = {}
    users: dict[Hashable, set] = {}  # resource -> its flows not fixed yet
    for flow, resources in uses.items():
        if not resources or len(set(resources)) != len(resources):
            raise ValueError(f"flow {flow!r}: needs at least one resource, each once: {resources!r}")
        for r in resources:
            if r not in users:
                if r not in capacity:
                    raise ValueError(f"flow {flow!r}: resource {r!r} has no capacity")
                left[r] = max(0.0, capacity[r])
                users[r] = set()
            users[r].add(flow)
    rates: dict[Hashable, float] = {}
    while users:
        tightest = min(users, key=lambda r: left[r] / len(users[r]))
        fixed = users.pop(tightest)
        share = left[tightest] / len(fixed)
        for flow in fixed:
            rates[flow] = share
            for r in uses[flow]:
                if r == tightest:
                    continue
                # max(0, ...): rounding must not leave a resource a negative share later
                left[r] = max(0.0, left[r] - share)
                flows = users[r]
                flows.discard(flow)
                if not flows:
                    del users[r]  # every flow fixed: out of the running for a bottleneck
    return rates
