"""The queue and rate plan: tc commands as data, and the parser for their counters.

Strict-priority queues on every switch egress port are an htb tree (the kernel here
has no ``prio`` qdisc)::

    1:    htb root qdisc, default 1:10 (non-IP traffic such as ARP is control)
    1:1   root class at the link rate
    1:1q  one class per queue q = 0..7: small guaranteed rate, ceil = link rate,
          htb ``prio q`` so a lower q always borrows first; a byte-limited bfifo
          leaf (in bytes: under ``segmentation: offload`` one packet can be 64 KB)

With queue weights (``emulation.queue_weights``: one per queue 1..7) the scheduler
queues are weighted instead: one htb ``prio`` for all seven, below queue 0's. htb
serves every class up to its guaranteed rate first, then lends the rest by prio and,
within a prio, in proportion to each class's quantum. So the seven keep strict
priority's guarantees in all (7 x 2% of the link, queue 0 its 2% and first call on
what is lent), split by weight, and their quanta are in proportion to the weights:
backlogged queues share the link by weight, guarantee and loan alike.

u32 filters pick the class from the IP TOS byte; IP packets whose DSCP is in no
queue's entry land in the lowest queue. Queue 0 is reserved for control traffic;
schedulers use 1..7. ``DSCP_OF_QUEUE`` is the one place where the DSCP-to-queue
map is defined: queue q carries class selector CS(7-q), so unmarked traffic
(DSCP 0) is the lowest queue, 7.

Host interfaces get the same tree (``host_base_cmds``); a per-flow sender queue is
one filter and a per-flow rate limit on the sender one class with its own leaf queue
plus one filter.
"""
from __future__ import annotations

import math
import re

from topologies.units import mbps_to_bytes_per_s

# Frame sizes a fabric may run at (every interface of the fabric the same): Ethernet's
# 1500 and up to the common jumbo size. Bytes per packet, not bytes, cost the box CPU.
MIN_MTU, MAX_MTU = 1500, 9000
N_QUEUES = 8
CONTROL_QUEUE = 0
SCHEDULER_QUEUES = range(1, N_QUEUES)
LOWEST_QUEUE = N_QUEUES - 1
DSCP_OF_QUEUE = {q: 8 * (LOWEST_QUEUE - q) for q in range(N_QUEUES)}
LEAF_LIMIT_BYTES = 150_000  # a switch queue's buffer unless a spec sets emulation.switch_buffer_bytes
# A sender's own queues hold what a NIC's default txqueuelen does (1000 packets of 1500 bytes):
# a host's stack is not a switch buffer, and at 150 KB the sender dropped its own
# bursts (two pushes of 400 KB at once), each drop a 200 ms TCP timeout (docs/grouper.md,
# "Why the target is missed").
HOST_LEAF_LIMIT_BYTES = 1_500_000
# Each queue's guaranteed share; the rest of the link is borrowed in prio order. At 1% a
# starved queue (150 KB at 1 Mbit/s) delayed packets 1.2 s and TCP could sit in RTO backoff
# for seconds after the high queue emptied; 2% halves that delay.
GUARANTEED_SHARE = 0.02
# htb bucket: at least two GSO super-packets (``segmentation: offload``) so a 64 KB one never stalls.
BURST_BYTES = 150_000

HOST_FLOW_MINOR_BASE = 0x100
# u32 filters run by ascending pref and the first match classifies: a host's per-flow
# filters (``host_flow_pref``: 101 up to 16,100) come before the DSCP filters every
# queue tree ends with.
HOST_FLOW_PREF_BASE = 100
MAX_POLICY_SLOTS = 4000  # policy ids 1..4000 (controller.policy.MAX_POLICIES) are the slots
MATCH_FIELDS = 3  # what a flow's match may name beyond its hosts: protocol, source port, destination port
DSCP_FILTER_PREF = HOST_FLOW_PREF_BASE + MATCH_FIELDS * MAX_POLICY_SLOTS + MAX_POLICY_SLOTS + 1


def queue_classid(q: int) -> str:
    return f"1:{0x10 + q:x}"


def tos_of_dscp(dscp: int) -> int:
    return dscp << 2


# Queue weights: one per scheduler queue, > 0, the largest at most MAX_WEIGHT_RATIO
# times the least; the least weight's DRR quantum is one frame of the fabric's MTU
# (htb's own quantum, rate / 10 clamped to 200 KB, would make every fast class's the
# same). At the ratio's limit the largest quantum is 100 frames: its queue sends that
# much a turn (measured: 1 : 1 to 100 : 1, measurements/weighted-queues-2026-11-29).
MAX_WEIGHT_RATIO = 100


def check_weights(weights) -> tuple[float, ...]:
    """``weights`` as a tuple of one weight per scheduler queue (1..7), or ValueError."""
    if not (isinstance(weights, (list, tuple)) and len(weights) == len(SCHEDULER_QUEUES)):
        raise ValueError(f"must be a list of {len(SCHEDULER_QUEUES)} weights, one per queue "
                         f"{SCHEDULER_QUEUES[0]}..{SCHEDULER_QUEUES[-1]}, got {weights!r}")
    for k, w in enumerate(weights):
        if not (isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0):
            raise ValueError(f"every weight must be a finite number > 0; item {k} (queue {SCHEDULER_QUEUES[k]}) is "
                             f"{w!r}" + (" (YAML reads 1e3 as text: write 1.0e3)" if _number_text(w) else ""))
    if max(weights) > MAX_WEIGHT_RATIO * min(weights):
        raise ValueError(f"the largest weight may be at most {MAX_WEIGHT_RATIO} times the least, got {list(weights)}")
    return tuple(float(w) for w in weights)


def _number_text(value) -> bool:
    """A string that spells a number (YAML 1.1 reads ``1e3``, without a dot, as text)."""
    try:
        return isinstance(value, str) and math.isfinite(float(value))
    except ValueError:
        return False


def switch_port_cmds(intf: str, mbps: float, leaf_limit_bytes: int = LEAF_LIMIT_BYTES,
                     weights: tuple[float, ...] | None = None, mtu: int = MAX_MTU) -> list[str]:
    """tc commands that turn ``intf`` into an 8-queue port: strict priority, or with
    ``weights`` (``check_weights``) the scheduler queues weighted below queue 0 (the
    least weight's quantum one ``mtu`` frame)."""
    rate = f"{mbps:g}mbit"
    small_mbps = max(mbps * GUARANTEED_SHARE, 0.01)
    relative = [w / min(weights) for w in weights] if weights is not None else []  # 1..MAX_WEIGHT_RATIO
    cmds = [
        f"tc qdisc replace dev {intf} root handle 1: htb default {0x10 + CONTROL_QUEUE:x}",
        f"tc class replace dev {intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
        f"burst {BURST_BYTES} cburst {BURST_BYTES}",
    ]
    for q in range(N_QUEUES):
        cls = queue_classid(q)
        guaranteed, lend = f"{small_mbps:g}mbit", f"prio {q}"
        if weights is not None and q != CONTROL_QUEUE:  # strict's guarantees in all, split by weight
            w = relative[q - SCHEDULER_QUEUES[0]]
            guaranteed = f"{small_mbps * len(SCHEDULER_QUEUES) * w / sum(relative):.6g}mbit"
            lend = f"quantum {round(mtu * w)} prio {SCHEDULER_QUEUES[0]}"
        cmds.append(f"tc class replace dev {intf} parent 1:1 classid {cls} htb rate {guaranteed} ceil {rate} "
                    f"burst {BURST_BYTES} cburst {BURST_BYTES} {lend}")
        cmds.append(f"tc qdisc replace dev {intf} parent {cls} handle {0x10 + q:x}: bfifo limit {leaf_limit_bytes}")
    for q, dscp in DSCP_OF_QUEUE.items():
        cmds.append(f"tc filter replace dev {intf} parent 1: protocol ip prio {DSCP_FILTER_PREF} u32 "
                    f"match ip tos 0x{tos_of_dscp(dscp):02x} 0xfc flowid {queue_classid(q)}")
    cmds.append(f"tc filter replace dev {intf} parent 1: protocol ip prio {DSCP_FILTER_PREF + 1} u32 "
                f"match u32 0 0 flowid {queue_classid(LOWEST_QUEUE)}")
    return cmds


# What a queued wire packet costs a socket (its skb's truesize) over its bytes on the wire.
SKB_OVERHEAD = 2


def switch_send_buffer_bytes(n_ports: int, leaf_limit_bytes: int = LEAF_LIMIT_BYTES) -> int:
    """Send buffer for a userspace switch process whose ``n_ports`` ports it feeds
    through one socket: every queue of every port full at once, so that only the
    queues drop (``experiments.platform.ovs``)."""
    return n_ports * N_QUEUES * leaf_limit_bytes * SKB_OVERHEAD


# How long a userspace switch may wait for the CPU without its ports losing what arrives
# meanwhile (ten scheduler periods of a busy 2-core box).
SWITCH_CPU_WAIT_S = 0.1


def switch_receive_buffer_bytes(mbps: float) -> int:
    """Receive buffer for the socket a userspace switch reads one port through: an htb
    burst from the sender plus what the link brings while the switch waits for the CPU
    (``SWITCH_CPU_WAIT_S``), so that a real switch's lossless ingress stays lossless.
    What is asked of the kernel, which keeps twice as much (as for the send buffer)."""
    return int((BURST_BYTES + mbps_to_bytes_per_s(mbps) * SWITCH_CPU_WAIT_S) * SKB_OVERHEAD)


def host_base_cmds(intf: str, mbps: float, weights: tuple[float, ...] | None = None, mtu: int = MAX_MTU) -> list[str]:
    """The sender NIC: the same eight queues as a switch port (strict priority, or
    weighted), as deep as a NIC's queue (a host marks nothing, so its traffic sits in
    the lowest queue unless a policy's per-flow filter picks a queue or a rate class)."""
    return switch_port_cmds(intf, mbps, HOST_LEAF_LIMIT_BYTES, weights, mtu)


def named_fields(proto: str | None, src_port: int | None, dst_port: int | None) -> int:
    """How many of the ``MATCH_FIELDS`` a flow's match names beyond its hosts: where two
    flows' matches overlap, the one naming more wins, in the switches and on the sender."""
    return (proto is not None) + (src_port is not None) + (dst_port is not None)


def host_flow_pref(slot: int, proto: str | None, src_port: int | None, dst_port: int | None) -> int:
    """The pref of flow ``slot``'s filter on its sender. The first filter that matches
    classifies, so the more fields a match names the earlier it comes (a port's policy
    wins over its host pair's), then the lower slot: the switches' order of their
    policy rules (``controller.policy.rule_for``)."""
    return HOST_FLOW_PREF_BASE + (MATCH_FIELDS - named_fields(proto, src_port, dst_port)) * MAX_POLICY_SLOTS + slot


def host_flow_queue_cmds(intf: str, pref: int, queue: int, match: str) -> list[str]:
    """Send the flow ``match`` selects through the sender's queue ``queue`` (strict
    priority or weighted), by a filter at ``pref`` (``host_flow_pref``)."""
    return [f"tc filter replace dev {intf} parent 1: protocol ip prio {pref} u32 "
            f"{match} flowid {queue_classid(queue)}"]


SEGMENTATIONS = ("wire", "offload")
IP_PROTO = {"tcp": 6, "udp": 17}  # IP protocol numbers: tc's u32 match and OpenFlow's ip_proto


# A spec's switch_buffer_bytes: two jumbo frames at least (a queue that cannot hold one
# frame drops everything), 4 MB at most (the switch's send socket holds every queue
# full, SKB_OVERHEAD x ports x queues x this).
MIN_SWITCH_BUFFER_BYTES, MAX_SWITCH_BUFFER_BYTES = 2 * MAX_MTU, 4_000_000


def mtu_cmd(intf: str, mtu: int) -> list[str]:
    """``intf``'s MTU, as an ``ip`` command (run where the interface lives)."""
    if not MIN_MTU <= mtu <= MAX_MTU:
        raise ValueError(f"mtu: {mtu} is not in {MIN_MTU}..{MAX_MTU}")
    return ["ip", "link", "set", "dev", intf, "mtu", str(mtu)]


def host_nic_cmds(intf: str, segmentation: str, mtu: int = MIN_MTU) -> list[list[str]]:
    """Host NIC features, as commands to run in the host's namespace: its MTU (the
    fabric's, ``mtu_cmd``) and who cuts TCP's data into packets.

    ``wire``: the host's TCP hands packets of the MTU to its NIC queue, so every
    queue on the path shapes, drops and counts wire packets, as a real NIC ring and
    a real switch buffer do. TSO and GSO off are not enough for the NIC's own queue:
    the kernel lets TCP build GSO super-packets whatever the device says and cuts
    them only after the qdisc, so a sender's rate class released up to 7 jumbo
    frames back to back and a tbf leaf's drops of their segments went untold to
    TCP; a device that takes one segment per packet (``gso_max_segs 1``) makes TCP
    build packets of one MSS (measurements/oes-retrans-2026-11-30). ``offload``: TCP hands over GSO
    super-packets of up to 64 KB, which every queue on the path holds and drops
    whole (measured at 6 hosts all-to-all, 100 Mbit/s: ~20 segments retransmitted
    per queue drop; docs/emulation.md, Capacity).
    """
    if segmentation not in SEGMENTATIONS:
        raise ValueError(f"segmentation: {segmentation!r} is not one of {', '.join(SEGMENTATIONS)}")
    cmds = [mtu_cmd(intf, mtu)]
    if segmentation == "wire":
        cmds += [["ethtool", "-K", intf, "tso", "off", "gso", "off"],
                 ["ip", "link", "set", "dev", intf, "gso_max_segs", "1"]]
    return cmds


def host_route_cmds(intf: str, subnet: str, rto_min_ms: float | None = None,
                    congestion: str | None = None) -> list[list[str]]:
    """The host's route to the fabric, carrying what every TCP connection over it
    uses unless its socket says otherwise: the congestion control (``congctl``: so
    programs that open their own sockets, DGL's among them, follow the spec; the
    kernel lets a namespace default only to reno or bbr) and, when given, the minimum
    retransmission timeout (Linux: 200 ms; a run that scales its transfers down can
    scale this timer with them)."""
    attrs = []
    if rto_min_ms is not None:
        attrs += ["rto_min", f"{rto_min_ms:g}ms"]
    if congestion is not None:
        attrs += ["congctl", congestion]
    return [["ip", "route", "replace", subnet, "dev", intf, *attrs]] if attrs else []


def host_flow_match(dst_ip: str, proto: str | None, src_port: int | None, dst_port: int | None) -> str:
    parts = [f"match ip dst {dst_ip}/32"]
    if proto:
        parts.append(f"match ip protocol {IP_PROTO[proto]} 0xff")
    if src_port is not None:
        parts.append(f"match ip sport {src_port} 0xffff")
    if dst_port is not None:
        parts.append(f"match ip dport {dst_port} 0xffff")
    return " ".join(parts)


def host_flow_rate_cmds(intf: str, slot: int, mbps: float) -> list[str]:
    """Set the rate of flow ``slot``'s class on the sender (rate = ceil = target): all a
    rate change of an installed flow needs, its filter and leaf queue stay."""
    minor = f"{HOST_FLOW_MINOR_BASE + slot:x}"
    rate = f"{mbps:g}mbit"
    # A small bucket keeps the class close to its rate over short windows.
    burst = max(int(mbps_to_bytes_per_s(mbps) * 0.002), 15_000)
    return [f"tc class replace dev {intf} parent 1:1 classid 1:{minor} htb rate {rate} ceil {rate} "
            f"burst {burst} cburst {burst}"]


def host_flow_set_cmds(intf: str, slot: int, pref: int, mbps: float, match: str) -> list[str]:
    """Add the rate class of flow ``slot`` on the sender, with its leaf queue and its
    filter at ``pref`` (``host_flow_pref``)."""
    minor = f"{HOST_FLOW_MINOR_BASE + slot:x}"
    # The flow's leaf holds LEAF_LIMIT_BYTES, not a sender's HOST_LEAF_LIMIT_BYTES: it
    # serves one TCP connection, which keeps a segment its own qdisc refuses and sends
    # it again as the class drains; a deeper leaf would only add delay at the class's
    # rate. Measured under OES on 2026-11-29 (measurements/gnn-dgtp-reddit-allreduce-
    # 2026-11-29): the leaves refused 3-10% of their hosts' packets while the flows
    # kept 0.995-0.997 of their targets (median) and the job's model stayed within 0.4%.
    return host_flow_rate_cmds(intf, slot, mbps) + [
        f"tc qdisc replace dev {intf} parent 1:{minor} handle {minor}: bfifo limit {LEAF_LIMIT_BYTES}",
        f"tc filter replace dev {intf} parent 1: protocol ip prio {pref} u32 {match} flowid 1:{minor}",
    ]


def host_flow_remove_cmds(intf: str, slot: int, pref: int) -> list[str]:
    minor = f"{HOST_FLOW_MINOR_BASE + slot:x}"
    return [
        f"tc filter del dev {intf} parent 1: protocol ip prio {pref}",
        f"tc qdisc del dev {intf} parent 1:{minor}",
        f"tc class del dev {intf} classid 1:{minor}",
    ]


_CLASS_RE = re.compile(r"^class htb (\S+) ")
_SENT_RE = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+)")
_BACKLOG_RE = re.compile(r"backlog (\d+(?:\.\d+)?)([KM]?)b ")
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024 * 1024}


def _class_stats(text: str, stat: re.Pattern) -> dict[str, re.Match]:
    """``tc -s class show`` output -> {classid: the first match of ``stat`` in its block}."""
    found: dict[str, re.Match] = {}
    current = None
    for line in text.splitlines():
        m = _CLASS_RE.match(line.strip())
        if m:
            current = m.group(1)
            continue
        m = stat.search(line + " ")
        if m and current is not None:
            found[current] = m
            current = None
    return found


def per_queue(by_class: dict) -> dict:
    """{classid (tc's ``1:10``): value} -> {queue number: value}: a port's queue classes
    (``queue_classid``) only, its root class (1:1) and a host's per-flow classes left
    out. tc's text (``queue_counters``, ``queue_backlogs``) and the queue sampler's
    rtnetlink reads (``experiments/platform/tcstats.py``) alike."""
    return {q: by_class[queue_classid(q)] for q in range(N_QUEUES) if queue_classid(q) in by_class}


def parse_class_counters(text: str) -> dict[str, dict[str, int]]:
    """``tc -s class show`` output -> {classid: {bytes, packets, dropped}}."""
    return {classid: {"bytes": int(m.group(1)), "packets": int(m.group(2)), "dropped": int(m.group(3))}
            for classid, m in _class_stats(text, _SENT_RE).items()}


def root_qdisc_counters(text: str) -> dict[str, int] | None:
    """{bytes, packets, dropped} of the root qdisc in ``tc -s qdisc show`` output (None
    without one). An htb root counts every packet a class's leaf refused, so its drops
    outlast a per-flow class that was removed with its own counters."""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("qdisc ") and " root " in line + " ":
            for after in lines[k + 1:]:
                m = _SENT_RE.search(after)
                if m:
                    return {"bytes": int(m.group(1)), "packets": int(m.group(2)), "dropped": int(m.group(3))}
                if after.startswith("qdisc "):
                    break
    return None


def queue_counters(text: str) -> dict[int, dict[str, int]]:
    """Counters per queue number from one switch port's ``tc -s class show``."""
    return per_queue(parse_class_counters(text))


def queue_backlogs(text: str) -> dict[int, int]:
    """Bytes waiting per queue number, from one switch port's ``tc -s class show``
    (this tc prints classes as text only; it rounds a size to Kb or Mb only when that
    is within 16 bytes or 1 KiB of exact). The queue sampler reads the same from
    rtnetlink, exact (``experiments/platform/tcstats.py``); this reads tc's view of it."""
    return per_queue({classid: round(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
                       for classid, m in _class_stats(text, _BACKLOG_RE).items()})


_RATE_RE = re.compile(r"^class htb 1:([0-9a-f]+) .*? rate (\d+(?:\.\d+)?)([KMG]?)bit ")
_RATE_UNITS = {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3}


def host_flow_rates(text: str) -> dict[int, float]:
    """A host's ``tc class show`` output -> {policy slot: rate in Mbit/s} of its per-flow
    rate classes (the read-back of ``host_flow_set_cmds``; tc prints rates rounded to
    its own units, e.g. "12500Kbit")."""
    rates = {}
    for line in text.splitlines():
        m = _RATE_RE.match(line.strip())
        if m and int(m.group(1), 16) >= HOST_FLOW_MINOR_BASE:
            rates[int(m.group(1), 16) - HOST_FLOW_MINOR_BASE] = float(m.group(2)) * _RATE_UNITS[m.group(3)]
    return rates
