"""The queue sampler's rtnetlink reads: crafted RTM_NEWTCLASS replies read per class,
and the kernel's own beside tc's text of the same classes, in a namespace of their
own with a switch port's queue plan and packets waiting in it (no fabric needed)."""
from __future__ import annotations

import csv
import io
import os
import shutil
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from fakes import netlink_attr, netlink_message

from experiments.bench import queue_ports
from experiments.platform import capture, netlink, sampling, tcstats
from experiments.platform.capture import QueueSampler
from experiments.platform.netlink import (NETLINK_ROUTE, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERR, NLMSG_ERROR,
                                          NLMSG_HDR)
from experiments.platform.tcstats import (GNET_STATS_BASIC, GNET_STATS_QUEUE, PKT64, RTM_GETTCLASS, RTM_NEWTCLASS,
                                          TC_STATS, TCA_KIND, TCA_STATS, TCA_STATS2, TCA_STATS_BASIC, TCA_STATS_PKT64,
                                          TCA_STATS_QUEUE, TCMSG, WHAT, TcClasses, class_request, classid,
                                          parse_class)
from topologies import queues

ROOT = os.geteuid() == 0
needs_namespace = pytest.mark.skipif(
    not (ROOT and all(shutil.which(tool) for tool in ("unshare", "nsenter", "ip", "tc"))),
    reason="needs root, unshare, nsenter, ip and tc (a network namespace of the test's own)")
TCA_OPTIONS, TCA_XSTATS, TCA_STATS_APP = 2, 4, 4


def parse_classes(data: bytes) -> tuple[dict[str, dict], bool]:
    """One datagram of a dump's reply as ``TcClasses.read`` parses each (through
    ``netlink.dump``): {classid: counters}, and whether it ended the dump."""
    messages, done = netlink.parse_datagram(data, WHAT)
    return dict(parse_class(kind, body) for kind, body in messages), done


NLA_F_NESTED = 1 << 15


def _class(handle: int, basic: tuple | None = None, queue: tuple | None = None, legacy: tuple | None = None,
           pkt64: int | None = None, kind: bytes = b"htb") -> bytes:
    """An RTM_NEWTCLASS as the kernel sends it: TCA_KIND, options, TCA_STATS2 (nested:
    basic, queue, the qdisc's own), the legacy TCA_STATS, xstats."""
    nested = b""
    if basic is not None:
        nested += netlink_attr(TCA_STATS_BASIC, GNET_STATS_BASIC.pack(*basic) + bytes(4))  # the kernel's 16 bytes
    if pkt64 is not None:
        nested += netlink_attr(TCA_STATS_PKT64, PKT64.pack(pkt64))
    if queue is not None:
        nested += netlink_attr(TCA_STATS_QUEUE, GNET_STATS_QUEUE.pack(*queue))
    nested += netlink_attr(TCA_STATS_APP, bytes(20))
    body = (TCMSG.pack(0, 5, handle, 0x10001, 0) + netlink_attr(TCA_KIND, kind + b"\0") + netlink_attr(TCA_OPTIONS, bytes(48))
            + (netlink_attr(TCA_STATS2 | NLA_F_NESTED, nested) if basic or queue else b"")
            + (netlink_attr(TCA_STATS, TC_STATS.pack(*legacy) + bytes(4)) if legacy else b"")
            + netlink_attr(TCA_XSTATS, bytes(20)))
    return netlink_message(RTM_NEWTCLASS, body)


# tc_stats: bytes, packets, drops, overlimits, bps, pps, qlen, backlog
ROOT_CLASS = _class(0x10001, basic=(306864, 300), queue=(0, 0, 0, 0, 1), legacy=(306864, 300, 0, 1, 0, 0, 0, 0))
QUEUE_7 = _class(0x10017, basic=(153174, 147), queue=(53, 55226, 2, 1, 4),
                 legacy=(153174, 147, 2, 4, 0, 0, 53, 55226))


def test_a_dump_is_read_per_class_with_its_counters_and_backlog():
    (classes, done) = parse_classes(ROOT_CLASS + QUEUE_7 + netlink_message(NLMSG_DONE, bytes(4)))
    assert done
    assert classes == {
        "1:1": {"kind": "htb", "bytes": 306864, "packets": 300, "dropped": 0, "overlimits": 1, "requeues": 0,
                "qlen": 0, "backlog": 0},
        "1:17": {"kind": "htb", "bytes": 153174, "packets": 147, "dropped": 2, "overlimits": 4, "requeues": 1,
                 "qlen": 53, "backlog": 55226}}
    # the port's queues only, as tc's text is read: the root class 1:1 is no queue
    assert tcstats.queue_backlogs(classes) == {7: 55226}


def test_tca_stats2s_counters_are_read_over_the_legacy_ones():
    both = _class(0x10013, basic=(2 ** 40 + 5, 9), queue=(1, 1042, 3, 0, 7), legacy=(5, 1, 1, 1, 0, 0, 0, 9))
    (classes, done) = parse_classes(both)
    assert not done  # no NLMSG_DONE in this datagram: the dump goes on
    assert classes["1:13"] == {"kind": "htb", "bytes": 2 ** 40 + 5, "packets": 9, "dropped": 3, "overlimits": 7,
                               "requeues": 0, "qlen": 1, "backlog": 1042}


def test_packets_past_32_bits_come_in_their_own_attribute():
    (classes, _) = parse_classes(_class(0x10010, basic=(10 ** 13, 2 ** 32 - 1), pkt64=2 ** 33 + 4,
                                        queue=(0, 0, 0, 0, 0)))
    assert classes["1:10"]["packets"] == 2 ** 33 + 4


def test_a_class_with_the_legacy_tca_stats_only_reads_them():
    (classes, _) = parse_classes(_class(0x10015, legacy=(70000, 50, 4, 6, 100, 1, 3, 4500)))
    assert classes == {"1:15": {"kind": "htb", "bytes": 70000, "packets": 50, "dropped": 4, "overlimits": 6,
                                "requeues": 0, "qlen": 3, "backlog": 4500}}
    assert tcstats.queue_backlogs(classes) == {5: 4500}


def test_only_htb_classes_with_counters_are_a_ports_queues():
    (classes, _) = parse_classes(_class(0x10012, kind=b"hfsc", queue=(0, 7, 0, 0, 0)) + _class(0x10014))
    assert classes["1:14"]["backlog"] is None and classes["1:12"]["kind"] == "hfsc"
    assert tcstats.queue_backlogs(classes) == {}


def test_a_refused_dump_is_an_error_naming_the_kernels_reason_and_an_ack_is_not():
    refused = netlink_message(NLMSG_ERROR, NLMSG_ERR.pack(-19) + class_request(3))
    with pytest.raises(OSError, match="rtnetlink refused the dump: No such device$") as err:
        parse_classes(ROOT_CLASS + refused)
    assert err.value.errno == 19
    acked = netlink_message(NLMSG_ERROR, NLMSG_ERR.pack(0) + class_request(3))
    assert parse_classes(acked + QUEUE_7 + netlink_message(NLMSG_DONE, bytes(4)))[0].keys() == {"1:17"}


@pytest.mark.parametrize("cut", [3, 20, 30, len(QUEUE_7) - 60, len(QUEUE_7) - 4])
def test_a_truncated_reply_is_an_error_not_a_silent_class(cut):
    with pytest.raises(ValueError, match="truncated"):
        parse_classes(ROOT_CLASS + QUEUE_7[:cut])


def test_a_counter_attribute_too_short_for_its_struct_is_an_error():
    short = TCMSG.pack(0, 5, 0x10011, 0x10001, 0) + netlink_attr(TCA_STATS2, netlink_attr(TCA_STATS_QUEUE, bytes(16)))
    with pytest.raises(ValueError, match=r"truncated gnet_stats_queue \(16 bytes, under its 20\)"):
        parse_classes(netlink_message(RTM_NEWTCLASS, short))
    with pytest.raises(ValueError, match="truncated tcmsg"):
        parse_classes(netlink_message(RTM_NEWTCLASS, bytes(12)))


def test_a_message_of_another_type_is_an_error():
    with pytest.raises(ValueError, match="a message of type 36, not a tc class"):
        parse_classes(netlink_message(36, bytes(20)))


def test_the_request_dumps_every_class_of_one_interface():
    request = class_request(7)
    assert len(request) == NLMSG_HDR.size + TCMSG.size == 16 + 20  # nlmsghdr + tcmsg
    length, kind, flags, _seq, _pid = NLMSG_HDR.unpack_from(request)
    assert (length, kind, flags) == (len(request), RTM_GETTCLASS, NLM_F_REQUEST | NLM_F_DUMP)
    assert TCMSG.unpack_from(request, NLMSG_HDR.size) == (socket.AF_UNSPEC, 7, 0, 0, 0)  # every class, any parent


@pytest.mark.parametrize("handle, text", [(0x10010, "1:10"), (0x10001, "1:1"), (0x1A0000, "1a:"), (0x11, ":11"),
                                          (0xFFFFFFFF, "root"), (0, "none")])
def test_a_classid_is_written_as_tc_writes_it(handle, text):
    assert classid(handle) == text


def test_a_dump_is_read_to_its_done_across_datagrams():
    here, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        kernel.send(ROOT_CLASS)
        kernel.send(QUEUE_7 + netlink_message(NLMSG_DONE, bytes(4)))
        assert TcClasses(here).read(7).keys() == {"1:1", "1:17"}
        assert kernel.recv(100) == class_request(7)
    finally:
        here.close()
        kernel.close()


def test_a_read_the_kernel_never_answers_ends_the_sampling_instead_of_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(sampling, "READ_TIMEOUT_S", 0.3)
    here, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)

    class Silent(sampling.Sampler):
        header, prefix = ["time_s"], "test"

        def sample(self, t, writer):
            classes.read(1)

    classes = TcClasses(here)
    started = time.monotonic()
    try:
        sampler = Silent(tmp_path / "rows.csv", 0.05, started)
        sampler.start()
        sampler.join(5)  # the error ends it
        fields = sampler.stop()
    finally:
        classes.close()
        kernel.close()
    assert time.monotonic() - started < 5
    assert fields["test_samples"] == 0 and fields["test_sampler_error"] == "TimeoutError: timed out"


def test_attributes_are_read_without_their_flags_and_a_cut_one_is_an_error():
    body = bytes(8) + netlink_attr(3 | NLA_F_NESTED, b"\1\2\3") + netlink_attr(1, b"abcd")
    assert netlink.attributes(body, 8, "x") == {3: b"\1\2\3", 1: b"abcd"}
    with pytest.raises(ValueError, match=r"^x: a truncated attribute \(7 bytes at 8 of 14\)$"):
        netlink.attributes(body[:14], 8, "x")


def _stub_fabric(*ports: str):
    return SimpleNamespace(switch_ports=lambda: [("tbs1", port, 100.0) for port in ports])


def test_a_port_that_does_not_exist_fails_the_sampler_before_it_samples(tmp_path):
    with pytest.raises(OSError) as err:
        QueueSampler(_stub_fabric("tbnone-eth9"), tmp_path / "q.csv", 0.1, time.monotonic())
    assert str(err.value) == "tbnone-eth9: its queues cannot be read: no interface with this name"


def test_a_capture_that_fails_to_start_releases_the_samplers_it_built(tmp_path, monkeypatch):
    closed = []
    monkeypatch.setattr(TcClasses, "close", lambda self: (closed.append(self), self.sock.close()))
    gone = subprocess.Popen(["true"])
    gone.wait()
    em = SimpleNamespace(fabric=_stub_fabric("lo"), host=lambda name: SimpleNamespace(pid=gone.pid))
    options = {"queue_interval_s": 0.1, "tcp_interval_s": 0.1, "hosts": ["tbh1"]}
    with pytest.raises(OSError, match="^tbh1: its TCP connections cannot be read"):
        capture.Capture(options, tmp_path).start(em)
    assert len(closed) == 1


def _tc_text(ns: str, port: str) -> str:
    return subprocess.run(["nsenter", f"--net={ns}", "tc", "-s", "class", "show", "dev", port], capture_output=True,
                          text=True, check=True).stdout


# Sends 200 datagrams of 1000 bytes to each of queue 3 (TOS 0x80: DSCP CS4) and queue 7 (unmarked) through
# port tbq0, one socket a queue (what waits in a queue is charged to its socket's send buffer).
SEND = """
import socket
for tos in (0x80, 0x00):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    s.setblocking(False)
    for _ in range(200):
        try:
            s.sendto(bytes(1000), ("10.99.0.2", 9))
        except BlockingIOError:
            pass
    s.close()
"""


@needs_namespace
def test_the_kernels_reply_is_what_tc_prints_of_the_same_classes_with_packets_waiting():
    """A switch port's queue plan at 0.01 Mbit/s: the first 150 KB a queue gets pass (its
    htb burst), the rest wait, leaving at about a packet a second, so that tc's text and
    the netlink read see the same counters when read back to back."""
    assert queues.DSCP_OF_QUEUE[3] << 2 == 0x80 and queues.DSCP_OF_QUEUE[7] == 0
    with queue_ports(1, mbps=0.01) as (pid, [port]):
        ns = f"/proc/{pid}/ns/net"
        subprocess.run(["nsenter", f"--net={ns}", sys.executable, "-c", SEND], check=True, timeout=60)
        index = netlink.in_netns(ns, lambda: socket.if_nametoindex(port))
        reader = TcClasses(netlink.netns_socket(ns, NETLINK_ROUTE))
        try:
            for _ in range(20):  # until tc reads the same before and after: a packet left in between otherwise
                before = _tc_text(ns, port)
                ours = reader.read(index)
                after = _tc_text(ns, port)
                if (queues.parse_class_counters(before), queues.queue_backlogs(before)) == (
                        queues.parse_class_counters(after), queues.queue_backlogs(after)):
                    break
            else:
                pytest.fail("the classes never held still between two reads of tc")
        finally:
            reader.close()
    theirs = queues.queue_backlogs(before)
    backlogs = tcstats.queue_backlogs(ours)
    assert backlogs.keys() == theirs.keys() == set(range(queues.N_QUEUES))
    for q, backlog in backlogs.items():  # tc's text rounds a size within 16 bytes of a KiB multiple to Kb
        assert backlog == theirs[q] or (theirs[q] % 1024 == 0 and abs(backlog - theirs[q]) < 16), (q, backlog)
    assert backlogs[3] > 0 and backlogs[7] > 0 and ours["1:13"]["qlen"] > 0, ours
    # every class's counters, the root class's too, as tc prints them
    assert {cid: {k: c[k] for k in ("bytes", "packets", "dropped")} for cid, c in ours.items()} == \
        queues.parse_class_counters(before)
    assert ours["1:17"]["bytes"] >= 140_000 and ours["1:1"]["packets"] >= ours["1:13"]["packets"] + \
        ours["1:17"]["packets"]


@needs_namespace
def test_the_sampler_writes_every_ports_queues_and_stops_on_a_port_gone(tmp_path):
    """The sampler as it runs in the root namespace, here run by a thread in the test's
    own: a plain socket, each port's index resolved where it lives."""
    with queue_ports(2) as (pid, ports):
        ns = f"/proc/{pid}/ns/net"

        def sample_twice() -> tuple[str, str]:
            sampler = QueueSampler(_stub_fabric(*ports), tmp_path / "q.csv", 0.1, time.monotonic())
            try:
                out = io.StringIO()
                sampler.sample(1.5, csv.writer(out))
                subprocess.run(["ip", "link", "del", ports[1]], check=True)  # its veth pair's other end with it
                try:
                    sampler.sample(2.0, csv.writer(out))
                except OSError as err:
                    return out.getvalue(), str(err)
                return out.getvalue(), ""
            finally:
                sampler.close()

        rows, error = netlink.in_netns(ns, sample_twice)
    assert list(csv.reader(io.StringIO(rows))) == [["1.500", port, str(q), "0"] for port in ports
                                                   for q in range(queues.N_QUEUES)]
    assert error == f"{ports[1]}: its queues cannot be read: the interface is gone"
