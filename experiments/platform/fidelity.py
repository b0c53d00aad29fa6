"""Whether a run can be trusted, and the fabric counters every kind keeps for it.

The fabric counters are read while the fabric is still up, after the workload's
traffic stopped (``collect_fabric_counters``), into the run's ``raw/``; the verdict
is computed afterwards from them, the CPU monitor and the controller's outages
(``fidelity_fields``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from experiments import store
from experiments.errors import one_line
from experiments.platform.cpu import CpuMonitor, cpu_reasons

QUEUE_COUNTERS = "queue_counters.json"  # per switch port, per queue: bytes/packets/dropped
SWITCH_PACKETS = "switch_packets.json"  # per switch: packets its ports received and transmitted
HOST_QDISCS = "host_qdisc_counters.json"  # per host, its NIC's root qdisc: bytes/packets/dropped
INTERFACE_DROPS = "interface_drops.json"  # per fabric interface: packets the kernel dropped, rx and tx
SWITCH_SENDS = "switch_sends.json"  # per OVS instance: packets sent, refused by a queue, failed (ovs.send_counts)


def collect_fabric_counters(em, raw: Path) -> list[str]:
    """Write ``QUEUE_COUNTERS`` (``em.port_counters``), ``SWITCH_PACKETS``
    (``em.switch_packet_balance``), ``HOST_QDISCS`` (``em.host_qdisc_counters``),
    ``INTERFACE_DROPS`` (``em.interface_drops``), ``SWITCH_SENDS`` (``em.switch_send_counts``)
    and ``TCP_FILE`` (``host_tcp_counters``:
    the hosts' TCP account, for every kind) into ``raw``, each on its own: one that
    cannot be read is not written and is named in the returned list (``file: error``,
    one line each), the others still are."""
    unread = []
    # the switches' refusals before their queues' drops: traffic that has not quite
    # stopped can only make the queues count more
    for name, read in ((SWITCH_SENDS, em.switch_send_counts), (QUEUE_COUNTERS, em.port_counters),
                       (SWITCH_PACKETS, em.switch_packet_balance),
                       (HOST_QDISCS, em.host_qdisc_counters), (INTERFACE_DROPS, em.interface_drops),
                       (TCP_FILE, lambda: host_tcp_counters(em))):
        try:
            counters = read()
        except Exception as err:  # noqa: BLE001 - a missing part must not lose the other
            unread.append(f"{name}: {one_line(err)}")
            continue
        store.write_json(raw / name, counters)
    return unread


# TCP's own account of each host's run (fresh namespaces: absolute = this run's):
# segments sent and retransmitted, and retransmission timeouts, which queue counters
# do not show: a timeout also fires with nothing lost when a starved queue holds a
# segment longer than the RTO (spurious RTOs as F-RTO detects them; retransmissions
# skipped because the original still sat in the sender's own queue). What set the
# retransmissions off: fast retransmits (SACK recoveries), tail loss probes, timeouts;
# which of them were needless (DSACKs: the receiver had the segment already) and the
# reorderings TCP saw; and the segments a receiver's own stack dropped (its receive
# queue, socket backlog or out-of-order queue full, a zero window), a loss no queue
# on the path counts.
TCP_COUNTERS = ("TcpOutSegs", "TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes",
                "TcpExtTCPSpuriousRTOs", "TcpExtTCPSpuriousRtxHostQueues",
                "TcpExtTCPFastRetrans", "TcpExtTCPSackRecovery", "TcpExtTCPRetransFail",
                "TcpExtTCPDSACKRecv", "TcpExtTCPDSACKOfoRecv",
                "TcpExtTCPSACKReorder", "TcpExtTCPTSReorder", "TcpExtTCPRenoReorder",
                "TcpExtTCPRcvQDrop", "TcpExtTCPBacklogDrop", "TcpExtTCPOFODrop", "TcpExtTCPZeroWindowDrop")
RECEIVER_DROPS = ("TcpExtTCPRcvQDrop", "TcpExtTCPBacklogDrop", "TcpExtTCPOFODrop", "TcpExtTCPZeroWindowDrop")
TCP_FILE = "tcp_counters.json"  # per host: its TCP_COUNTERS


def host_tcp_counters(em) -> dict:
    """Per host, its ``TCP_COUNTERS``."""
    return {host.name: em.host_counters(host.name, TCP_COUNTERS) for host in em.fabric.hosts}


def tcp_summary(counters: dict) -> dict:
    """Totals over hosts: segments sent, the retransmissions TCP tried and those that
    left the host (on the wire; their share of the segments sent), what set the
    retransmissions off, which were needless, and the receivers' own drops. A counter
    a run's file lacks (kept before it was read) counts 0."""
    total = {name: sum(host.get(name, 0) for host in counters.values()) for name in TCP_COUNTERS}
    sent = total["TcpOutSegs"]
    # The kernel counts a retransmission as it tries it (RetransSegs): one its own
    # qdisc refused (TCPRetransFail) is counted, and counted again when retried; under
    # per-flow rate leaves the tries pass the segments sent. Those that left the host
    # are the rest: what "retransmitted" means here.
    tried = total["TcpRetransSegs"]
    on_wire = tried - total["TcpExtTCPRetransFail"]
    return {"segments": sent, "retransmissions_tried": tried,
            "retransmissions_tried_share": tried / sent if sent else None,
            "retransmitted_on_wire": on_wire, "retransmitted_on_wire_share": on_wire / sent if sent else None,
            "timeouts": total["TcpExtTCPTimeouts"], "loss_probes": total["TcpExtTCPLossProbes"],
            "spurious_timeouts": total["TcpExtTCPSpuriousRTOs"],
            "retransmissions_held_in_sender_queue": total["TcpExtTCPSpuriousRtxHostQueues"],
            "fast_retransmits": total["TcpExtTCPFastRetrans"], "sack_recoveries": total["TcpExtTCPSackRecovery"],
            "retransmissions_refused_by_sender_queue": total["TcpExtTCPRetransFail"],
            "dsacks_received": total["TcpExtTCPDSACKRecv"] + total["TcpExtTCPDSACKOfoRecv"],
            "reorderings_seen": total["TcpExtTCPSACKReorder"] + total["TcpExtTCPTSReorder"]
            + total["TcpExtTCPRenoReorder"],
            "receiver_drops": sum(total[name] for name in RECEIVER_DROPS)}


def host_bytes(em) -> dict[str, tuple[int, int]]:
    """Per host: (bytes it sent into the fabric, bytes the fabric delivered to it), read
    at its switch port (rx and tx of the switch end, in the root namespace)."""
    out = {}
    for link in em.fabric.host_links():  # the host is end a
        stats = Path(f"/sys/class/net/{link.intf(link.b)}/statistics")
        out[link.a] = (int((stats / "rx_bytes").read_text()), int((stats / "tx_bytes").read_text()))
    return out


TRAFFIC_MIN_BYTES = 10_000  # in a sampling interval, over all hosts: below, control chatter (ARP, a rendezvous)


def traffic_window(samples: list[tuple[float, dict]], t0_epoch: float | None) -> tuple[float, float] | None:
    """The epoch window the fabric carried a workload's traffic in, from ``host_bytes``
    samples (seconds since ``t0_epoch``, counters): from the start of the first
    sampling interval in which the hosts sent more than ``TRAFFIC_MIN_BYTES`` to the
    end of the last; None without such an interval."""
    if t0_epoch is None:
        return None
    busy = [(t_a, t_b) for (t_a, a), (t_b, b) in zip(samples, samples[1:])
            if sum(b[h][0] - a[h][0] for h in a if h in b) > TRAFFIC_MIN_BYTES]
    if not busy:
        return None
    return t0_epoch + busy[0][0], t0_epoch + busy[-1][1]


def switch_loss_share(balance: dict[str, dict[str, int]], port_counters: dict) -> float | None:
    """Share of the packets the switches received that they lost where no counter
    shows it (``switch_internal_losses``; after the run, so nothing is in flight).
    ``port_counters``: the switch ports' queue counters (``Emulation.port_counters``)."""
    received = sum(s["received"] for s in balance.values())
    return switch_internal_losses(balance, port_counters) / received if received else None


def switch_balance_residue(balance: dict[str, dict[str, int]], port_counters: dict) -> int:
    """Packets the switches received less those they sent on or dropped where a counter
    shows it: a queue, a full receive socket, a peer's full backlog (the latter two
    absent from runs recorded before they were counted, 2026-12-01). Below 0 where a
    switch sent what it never received (the switch ends' own IPv6, before 2026-12-01)."""
    kept = sum(s["received"] - s["transmitted"] - s.get("receive_socket_drops", 0) - s.get("transmit_drops", 0)
               for s in balance.values())
    return kept - queue_drops(port_counters)


def switch_internal_losses(balance: dict[str, dict[str, int]], port_counters: dict) -> int:
    """Packets the switches lost where no counter shows it (``switch_balance_residue``, at
    least 0)."""
    return max(switch_balance_residue(balance, port_counters), 0)


def queue_drops(port_counters: dict) -> int:
    """Packets the switch ports' queues dropped (``Emulation.port_counters``)."""
    return sum(q["dropped"] for port in port_counters.values() for q in port.values())


def read_switch_loss_share(raw: Path) -> float | None:
    """``switch_loss_share`` of the counters in ``raw``; None when
    either file is missing (a run that failed before they were collected)."""
    balance, counters = raw / SWITCH_PACKETS, raw / QUEUE_COUNTERS
    if not (balance.exists() and counters.exists()):
        return None
    return switch_loss_share(json.loads(balance.read_text()), json.loads(counters.read_text()))


def packet_losses(raw: Path) -> dict[str, int | None]:
    """Where the fabric lost packets, from the counter files in ``raw`` (None: that
    file missing): ``switch_queues``, the switch ports' queues (the modelled losses,
    as a real switch's buffer drops); ``switch_sockets``, the switch ports' receive
    sockets, full while the switch waited for the CPU (None where the balance lacks
    them: runs recorded before they were counted, 2026-12-01); ``switch_internal``,
    inside the userspace switches (``switch_internal_losses``); ``interfaces``, the
    kernel's drops on the fabric's interfaces (a veth whose peer's receive backlog was
    full); ``host_queues``, the packets a host's NIC queue plan refused its own stack
    (TCP keeps such a segment and sends it again as new: no loss on the wire). A
    receiver's own drops are TCP's (``tcp_summary``'s ``receiver_drops``)."""
    def read(name):
        path = raw / name
        return json.loads(path.read_text()) if path.exists() else None

    ports, balance, qdiscs, interfaces = (read(n) for n in (QUEUE_COUNTERS, SWITCH_PACKETS, HOST_QDISCS,
                                                             INTERFACE_DROPS))
    sockets = None if balance is None or any("receive_socket_drops" not in s for s in balance.values()) \
        else sum(s["receive_socket_drops"] for s in balance.values())
    return {"switch_queues": None if ports is None else queue_drops(ports),
            "switch_sockets": sockets,
            "switch_internal": None if ports is None or balance is None else switch_internal_losses(balance, ports),
            "interfaces": None if interfaces is None else sum(d["rx"] + d["tx"] for d in interfaces.values()),
            "host_queues": None if qdiscs is None else sum(q["dropped"] for q in qdiscs.values() if q)}


# A policy change applied later than this after it was due makes the run untrustworthy.
POLICY_DELAY_TOLERANCE_S = 1.0


def delayed_changes(changes: Sequence[dict], name: str) -> tuple[list[dict], list[str]]:
    """The policy changes (``at_s`` due, ``applied_s``) applied too late, and a reason
    for each naming the change by its field ``name`` (a flow's, a policy's)."""
    delayed = [c for c in changes if c["applied_s"] - c["at_s"] > POLICY_DELAY_TOLERANCE_S]
    return delayed, [f"policy change of {c[name]} due at {c['at_s']:g} s applied at {c['applied_s']:.1f} s"
                     for c in delayed]


def fidelity_fields(cpu: CpuMonitor, limits: dict, outages: list[dict], raw: Path,
                    reasons: Sequence[str] = (), outage_reasons: Sequence[str] | None = None,
                    cpu_window: tuple[float, float] | None = None) -> dict:
    """The summary fields that say whether a run can be trusted: the CPU shares
    (``cpu.summary()``), ``controller_outages``; from ``raw`` (None where a file is
    missing) ``switch_loss_share``, ``packet_losses`` and ``tcp`` with its
    ``tcp_retransmitted_share`` and ``tcp_timeouts``; ``fidelity`` (the CPU shares,
    ``untrustworthy_reasons``, ``trustworthy``) and ``trustworthy``.

    The CPU is judged over the whole run, or over ``cpu_window`` (epoch seconds) where
    the kind gives the window its traffic ran in (the GNN job: its iterations; the
    user's programs: ``traffic_window``), not its processes' start-up, which carries
    no traffic and would judge the box by how long torch and DGL take to import;
    ``cpu_window_s`` then says which, on cpu.csv's time axis.

    The reasons, in order: the CPU's against the spec's fidelity ``limits``
    (``cpu_reasons``), the controller outages', then the kind's own ``reasons``. An
    outage is a reason (no policy could change while it lasted) unless the kind judges
    them itself (``outage_reasons``: the timetable, by the measured windows each
    touched). The run is trustworthy exactly when there is no reason; the switch loss
    share is reported, not judged.
    """
    cpu_shares = cpu.summary(cpu_window)
    if cpu_window is not None and cpu.per_second:
        cpu_shares["cpu_window_s"] = cpu.seconds_of(cpu_window)
    if outage_reasons is None:
        outage_reasons = [f"controller outage at {o['start_s']:.1f} s" for o in outages]
    untrustworthy = cpu_reasons(cpu_shares, limits) + list(outage_reasons) + list(reasons)
    tcp_path = raw / TCP_FILE
    tcp = tcp_summary(store.read_json(tcp_path)) if tcp_path.exists() else None
    return {**cpu_shares, "controller_outages": outages, "switch_loss_share": read_switch_loss_share(raw),
            "packet_losses": packet_losses(raw), "tcp": tcp,
            "tcp_retransmitted_share": tcp and tcp["retransmitted_on_wire_share"],
            "tcp_timeouts": tcp and tcp["timeouts"],
            "fidelity": {**cpu_shares, "untrustworthy_reasons": untrustworthy, "trustworthy": not untrustworthy},
            "trustworthy": not untrustworthy}
