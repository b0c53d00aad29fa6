"""The ports a flow crosses on a fabric, for the simulators of every kind
(``experiments.sim.network.FluidNetwork`` serves the flows over them).

A flow crosses its sender's host link (``<host>/out``, the sender's NIC queue), on a
leaf-spine between two leaves the leaf's uplink to one spine and that spine's
downlink to the receiver's leaf (``<leaf>><spine>``, ``<spine>><leaf>``; left out
where they cannot fill), and the receiver's host link (``<host>/in``). The spine is
picked per flow key by a stable hash (ECMP, as the leaves' OpenFlow select groups
hash the 5-tuple); callers key a flow by what the fabric would hash: a connection.
"""
from __future__ import annotations

import zlib
from collections.abc import Hashable

from topologies.fabric import Fabric
from topologies.units import mbps_to_bytes_per_s


class Paths:
    """The ports a flow crosses on a fabric, and every port's rate in bytes/s.

    A fabric link at least as fast as all the host links of its leaf together can
    never be a bottleneck, so it is left out (a port that never fills changes no rate,
    and strict priority on it would only delay flows it never holds up)."""

    def __init__(self, fabric: Fabric):
        self.leaf = {h.name: h.switch for h in fabric.hosts}
        self.capacity: dict[str, float] = {}
        behind: dict[str, float] = {}  # leaf -> its host links' rates, bytes/s
        hosts = set(self.leaf)
        fabric_links = []
        for link in fabric.links:
            rate = mbps_to_bytes_per_s(link.mbps)
            if link.a in hosts:
                self.capacity[f"{link.a}/out"] = self.capacity[f"{link.a}/in"] = rate
                behind[link.b] = behind.get(link.b, 0.0) + rate
            else:
                fabric_links.append((link.a, link.b, rate))
        self.bottlenecks: set[str] = set()  # the fabric ports that can fill
        for a, b, rate in fabric_links:
            leaf = a if a in behind else b
            if rate < behind[leaf]:
                for port in (f"{a}>{b}", f"{b}>{a}"):
                    self.capacity[port] = rate
                    self.bottlenecks.add(port)
        self.spines = [s.name for s in fabric.spines()]
        self._spine: dict[Hashable, str] = {}

    def ports(self, src: str, dst: str, flow: Hashable) -> tuple[str, ...]:
        a, b = self.leaf[src], self.leaf[dst]
        if a == b:
            return (f"{src}/out", f"{dst}/in")
        spine = self._spine.get(flow)
        if spine is None:  # ECMP: a stable hash per flow, once (a flow recurs every iteration)
            spine = self._spine[flow] = self.spines[zlib.crc32(repr(flow).encode()) % len(self.spines)]
        middle = tuple(port for port in (f"{a}>{spine}", f"{spine}>{b}") if port in self.bottlenecks)
        return (f"{src}/out", *middle, f"{dst}/in")
