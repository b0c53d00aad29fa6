"""Loop-free proactive forwarding for a fabric, as data (``FlowRule``/``SelectGroup``).

- Forwarding is by IPv4 destination only; every path is leaf -> spine -> leaf, so
  there are no loops and no flooding.
- ECMP: at the ingress leaf, traffic for another leaf goes to an OpenFlow SELECT
  group whose buckets are the uplinks to every spine; Open vSwitch hashes each
  flow's 5-tuple onto one bucket, so flows spread over all spines while a flow's
  packets stay on one path (no reordering).
- ARP goes to the controller, which answers from the fabric's address plan
  (proxy ARP); no ARP packet is ever forwarded.
"""
from __future__ import annotations

import ipaddress

from controller.rules import (
    ETH_ARP,
    ETH_IP,
    FORWARD_TABLE,
    POLICY_TABLE,
    FlowRule,
    SelectGroup,
)
from topologies.fabric import HOST_SUBNET, Fabric

UPLINK_GROUP = 1
PRIO_HOST = 100
PRIO_REMOTE = 10
PRIO_ARP = 200
_HOSTS = ipaddress.ip_network(HOST_SUBNET)
SUBNET = (str(_HOSTS.network_address), str(_HOSTS.netmask))  # as OpenFlow masks it


def forwarding(fabric: Fabric) -> tuple[list[FlowRule], list[SelectGroup]]:
    """All proactive rules and groups of ``fabric``, installed when switches connect."""
    rules: list[FlowRule] = []
    groups: list[SelectGroup] = []
    for sw in fabric.switches:
        rules.append(FlowRule(sw.dpid, POLICY_TABLE, 0, {}, goto=FORWARD_TABLE))
        rules.append(FlowRule(sw.dpid, FORWARD_TABLE, PRIO_ARP, {"eth_type": ETH_ARP}, (("controller",),)))
        if sw.role == "spine":
            for h in fabric.hosts:
                port = fabric.port_towards(sw.name, h.switch)
                rules.append(_to_host(sw.dpid, h.ip, ("output", port)))
            continue
        for h in fabric.hosts:
            if h.switch == sw.name:
                rules.append(_to_host(sw.dpid, h.ip, ("output", h.port)))
        if sw.role == "leaf":
            uplinks = tuple(port for port, _ in fabric.uplinks(sw.name))
            groups.append(SelectGroup(sw.dpid, UPLINK_GROUP, uplinks))
            rules.append(FlowRule(sw.dpid, FORWARD_TABLE, PRIO_REMOTE,
                                  {"eth_type": ETH_IP, "ipv4_dst": SUBNET}, (("group", UPLINK_GROUP),)))
    return rules, groups


def _to_host(dpid: int, ip: str, action: tuple) -> FlowRule:
    return FlowRule(dpid, FORWARD_TABLE, PRIO_HOST, {"eth_type": ETH_IP, "ipv4_dst": ip}, (action,))


def arp_reply_for(fabric: Fabric, target_ip: str) -> str | None:
    """The MAC to answer an ARP request for ``target_ip`` with, if it is a fabric host."""
    for h in fabric.hosts:
        if h.ip == target_ip:
            return h.mac
    return None
