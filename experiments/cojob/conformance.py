"""Did the decisions take effect? Packets and counters checked against the decision log.

- DSCP: a sampled capture of what every host received (``sample-<host>.pcap``,
  read with scapy) is matched, packet by packet, against the decision in force for
  that flow at the packet's time (a flow without a policy is unmarked: DSCP 0). A
  packet within ``TRANSITION_S`` after a change may carry the old or the new mark.
- Sender queue: on each host NIC, the share of the bytes each queue sent is
  compared with the share the decisions asked for (every flow's bytes, from its
  ``flow_end`` event, counted in the sender queue in force when it started; a flow
  between two tasks of one host crosses no NIC and is left out); the
  overlap of the two distributions, weighted by bytes, is the match share.
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from pathlib import Path

from experiments.platform.policysync import flow_key
from topologies import queues
from topologies.fabric import Fabric

TRANSITION_S = 0.5


def _history(decisions: list[dict]) -> dict[tuple, tuple[list[float], list[tuple[int, int] | None]]]:
    """Per flow key: decision times and the (queue, host_queue) set then (None: removed)."""
    history: dict[tuple, tuple[list[float], list]] = defaultdict(lambda: ([], []))
    for record in decisions:
        for src, dst, proto, src_port, dst_port, queue, host_queue in record.get("set", []):
            times, values = history[(src, dst, proto, src_port, dst_port)]
            times.append(record["t"])
            values.append((queue, host_queue))
        for key in record.get("removed", []):
            times, values = history[tuple(key)]
            times.append(record["t"])
            values.append(None)
    return history


def _in_force(history, key: tuple, t: float) -> tuple[int, int] | None:
    times, values = history.get(key, ([], []))
    i = bisect.bisect_right(times, t)
    return values[i - 1] if i else None


def dscp_share(fabric: Fabric, decisions: list[dict], pcaps: list[Path]) -> dict:
    from scapy.all import IP, TCP, PcapReader  # scapy is slow to import: only when checking

    host_of_ip = {h.ip: h.name for h in fabric.hosts}
    history = _history(decisions)
    sampled = matched = 0
    for pcap in pcaps:
        if not pcap.exists() or pcap.stat().st_size <= 24:
            continue
        with PcapReader(str(pcap)) as packets:
            for packet in packets:
                if IP not in packet or TCP not in packet:
                    continue
                ip, tcp = packet[IP], packet[TCP]
                key = (host_of_ip.get(ip.src), host_of_ip.get(ip.dst), "tcp", tcp.sport, tcp.dport)
                t = float(packet.time)
                allowed = set()
                for at in (t, t - TRANSITION_S):
                    decision = _in_force(history, key, at)
                    allowed.add(0 if decision is None else queues.DSCP_OF_QUEUE[decision[0]])
                sampled += 1
                matched += (ip.tos >> 2) in allowed
    return {"sampled_packets": sampled, "dscp_match_share": matched / sampled if sampled else None}


def sender_queue_share(events: list[dict], decisions: list[dict], host_counters: dict) -> dict:
    history = _history(decisions)
    expected: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    starts = {e["flow"]: e for e in events if e.get("kind") == "flow_start"}
    for event in events:
        if event.get("kind") != "flow_end" or event["flow"] not in starts:
            continue
        start = starts[event["flow"]]
        if start["src"] == start["dst"]:  # over loopback: no NIC queue sends it
            continue
        key = flow_key(start)
        decision = _in_force(history, key, start["t"])
        expected[start["src"]][queues.LOWEST_QUEUE if decision is None else decision[1]] += event["bytes"]
    overlap = total = 0.0
    per_host = {}
    for host, wanted in expected.items():
        sent = {int(q): c["bytes"] for q, c in host_counters.get(host, {}).items() if int(q) != queues.CONTROL_QUEUE}
        wanted_total, sent_total = sum(wanted.values()), sum(sent.values())
        if not wanted_total or not sent_total:
            continue
        share = sum(min(wanted.get(q, 0) / wanted_total, sent.get(q, 0) / sent_total)
                    for q in queues.SCHEDULER_QUEUES)
        per_host[host] = round(share, 4)
        overlap += share * wanted_total
        total += wanted_total
    return {"sender_queue_match_share": overlap / total if total else None, "per_host": per_host}


def check(fabric: Fabric, events: list[dict], decisions: list[dict], pcaps: list[Path], host_counters: dict) -> dict:
    return {**dscp_share(fabric, decisions, pcaps), **sender_queue_share(events, decisions, host_counters)}
