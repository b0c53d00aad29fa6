"""tc classes' counters from the kernel's rtnetlink, without a process: what
``tc -s class show dev PORT`` prints, for the queue sampler (``capture.queue_interval_s``).

One RTM_GETTCLASS dump per interface (``struct tcmsg``: family AF_UNSPEC, the
interface's index; every class of every qdisc on it) over a NETLINK_ROUTE socket
opened once; the kernel answers one RTM_NEWTCLASS per class (``tcm_handle``: its
classid, major:minor). A class's counters are its TCA_STATS2 attribute's nested
TCA_STATS_BASIC (``struct gnet_stats_basic``: bytes, packets; TCA_STATS_PKT64 where the
packets outgrow 32 bits) and TCA_STATS_QUEUE (``struct gnet_stats_queue``: qlen,
backlog, drops, requeues, overlimits), or the legacy TCA_STATS (``struct tc_stats``)
where TCA_STATS2 lacks them: what tc prints as ``Sent B bytes P pkt (dropped D,
overlimits O requeues R)`` and ``backlog Nb Qp``, tc's backlog in exact bytes (tc's
text rounds it to Kb or Mb near a multiple). linux/rtnetlink.h, linux/gen_stats.h,
linux/pkt_sched.h; the layouts checked against this box's headers (offsetof, sizeof; x86_64)
and against a live reply (Linux 6.18).
"""
from __future__ import annotations

import socket
import struct

from experiments.platform import netlink, sampling
from experiments.platform.netlink import NETLINK_ROUTE
from topologies import queues

# linux/rtnetlink.h, linux/gen_stats.h, linux/pkt_sched.h
RTM_NEWTCLASS, RTM_GETTCLASS = 40, 42
TCA_KIND, TCA_STATS, TCA_STATS2 = 1, 3, 7
TCA_STATS_BASIC, TCA_STATS_QUEUE, TCA_STATS_PKT64 = 1, 3, 8
TC_H_ROOT, TC_H_UNSPEC = 0xFFFFFFFF, 0
WHAT = "rtnetlink"

TCMSG = struct.Struct("=B3xiIII")  # tcmsg: family, ifindex, handle, parent, info (20 bytes)
GNET_STATS_BASIC = struct.Struct("=QI")  # bytes, packets (the kernel's 16 bytes: 4 of padding)
GNET_STATS_QUEUE = struct.Struct("=IIIII")  # qlen, backlog, drops, requeues, overlimits
PKT64 = struct.Struct("=Q")
# tc_stats: bytes, packets, drops, overlimits, bps, pps, qlen, backlog (36 bytes; 40 with a 64-bit u64's padding)
TC_STATS = struct.Struct("=QIIIIIII")
COUNTERS = ("bytes", "packets", "dropped", "overlimits", "requeues", "qlen", "backlog")


def class_request(ifindex: int) -> bytes:
    """A dump request for every tc class of the interface of index ``ifindex``."""
    return netlink.request(RTM_GETTCLASS, TCMSG.pack(socket.AF_UNSPEC, ifindex, 0, 0, 0))


def classid(handle: int) -> str:
    """A class handle as tc prints it: ``1:10`` (hex major:minor), ``1:``, ``:10``, ``root``, ``none``."""
    if handle == TC_H_ROOT:
        return "root"
    if handle == TC_H_UNSPEC:
        return "none"
    major, minor = handle >> 16, handle & 0xFFFF
    return f"{major:x}:" if not minor else f":{minor:x}" if not major else f"{major:x}:{minor:x}"


def _unpack(layout: struct.Struct, payload: bytes, name: str) -> tuple:
    if len(payload) < layout.size:
        raise ValueError(f"{WHAT}: a truncated {name} ({len(payload)} bytes, under its {layout.size})")
    return layout.unpack_from(payload)


def parse_class(kind: int, body: bytes) -> tuple[str, dict]:
    """One class of the dump's reply: its classid and {kind (``htb``), ``COUNTERS``};
    a message of another type, or one cut short, is a ValueError. A class without
    counters (neither TCA_STATS2's nor TCA_STATS) reads them as None."""
    if kind != RTM_NEWTCLASS:
        raise ValueError(f"{WHAT}: a message of type {kind}, not a tc class")
    _family, _ifindex, handle, _parent, _info = _unpack(TCMSG, body, "tcmsg")
    attrs = netlink.attributes(body, TCMSG.size, WHAT)
    found: dict = {"kind": attrs.get(TCA_KIND, b"").split(b"\0", 1)[0].decode(errors="replace"),
                   **dict.fromkeys(COUNTERS)}
    stats2 = netlink.attributes(attrs[TCA_STATS2], 0, WHAT) if TCA_STATS2 in attrs else {}
    if TCA_STATS in attrs:  # the legacy counters first: TCA_STATS2's, where it has them, replace them
        nbytes, packets, drops, overlimits, _bps, _pps, qlen, backlog = _unpack(TC_STATS, attrs[TCA_STATS],
                                                                                 "tc_stats")
        found.update(bytes=nbytes, packets=packets, dropped=drops, overlimits=overlimits, requeues=0, qlen=qlen,
                     backlog=backlog)
    if TCA_STATS_BASIC in stats2:
        found["bytes"], found["packets"] = _unpack(GNET_STATS_BASIC, stats2[TCA_STATS_BASIC], "gnet_stats_basic")
        if TCA_STATS_PKT64 in stats2:  # sent only where the packets outgrew gnet_stats_basic's 32 bits
            found["packets"] = _unpack(PKT64, stats2[TCA_STATS_PKT64], "packet count")[0]
    if TCA_STATS_QUEUE in stats2:
        qlen, backlog, drops, requeues, overlimits = _unpack(GNET_STATS_QUEUE, stats2[TCA_STATS_QUEUE],
                                                             "gnet_stats_queue")
        found.update(qlen=qlen, backlog=backlog, dropped=drops, requeues=requeues, overlimits=overlimits)
    return classid(handle), found


def queue_backlogs(classes: dict[str, dict]) -> dict[int, int]:
    """Bytes waiting per queue number of a switch port from its classes (``TcClasses.read``),
    as ``topologies.queues.queue_backlogs`` reads them from tc's text: its htb classes
    only, mapped by ``queues.per_queue``."""
    return queues.per_queue({cid: c["backlog"] for cid, c in classes.items()
                             if c["kind"] == "htb" and c["backlog"] is not None})


class TcClasses:
    """The tc classes of interfaces, read through one rtnetlink socket: ``sock`` (a
    NETLINK_ROUTE socket; ``netlink.netns_socket`` opens one in another namespace), or
    one opened here, in the calling thread's namespace. An interface is named by its
    index (``socket.if_nametoindex``, in the socket's namespace)."""

    def __init__(self, sock: socket.socket | None = None):
        self.sock = sock if sock is not None else socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        self.sock.settimeout(sampling.READ_TIMEOUT_S)  # a read that hangs ends the sampling

    def read(self, ifindex: int) -> dict[str, dict]:
        """{classid: counters} of every class on the interface; {} where it has none, or
        no interface has that index (the kernel's dump is empty either way)."""
        return dict(parse_class(kind, body) for kind, body in netlink.dump(self.sock, class_request(ifindex), WHAT))

    def close(self) -> None:
        self.sock.close()
