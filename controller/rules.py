"""OpenFlow rules as plain data, so that algorithms can be tested without a switch.

A ``FlowRule`` is what the os-ken app turns into one OFPFlowMod: a match (os-ken
OFPMatch field names), a list of actions, and optionally a meter and a goto-table.
Actions are tuples: ("output", port), ("group", group_id), ("controller",),
("set_dscp", dscp).
"""
from __future__ import annotations

from dataclasses import dataclass, field

ETH_IP = 0x0800
ETH_ARP = 0x0806

# Pipeline: table 0 = per-flow scheduler policies (marking, meters); table 1 =
# forwarding. Policies never touch forwarding, forwarding never sees policies.
POLICY_TABLE = 0
FORWARD_TABLE = 1


@dataclass(frozen=True)
class FlowRule:
    dpid: int
    table: int
    priority: int
    match: dict = field(hash=False)
    actions: tuple = ()
    goto: int | None = None
    meter: int | None = None
    cookie: int = 0


@dataclass(frozen=True)
class SelectGroup:
    """An OpenFlow SELECT group: the switch hashes each flow onto one bucket."""

    dpid: int
    group_id: int
    ports: tuple[int, ...]


@dataclass(frozen=True)
class Meter:
    dpid: int
    meter_id: int
    kbps: int
