"""The TCP sampler: sock_diag replies read per connection (crafted ones, and the kernel's
own beside ``ss``'s view of the same connections, here and in a namespace of its own),
backoff spans cut from samples, and a real sampler over a real connection on
127.0.0.1 (no fabric needed)."""
from __future__ import annotations

import csv
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import closing

import pytest
from fakes import netlink_attr, netlink_message

from experiments.bench import CONNECTIONS_HOLDER
from experiments.platform import netlink, sampling
from experiments.platform.netlink import NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERR, NLMSG_ERROR, NLMSG_HDR
from experiments.platform.sockets import (DIAG_MSG, DIAG_REQ, INET_DIAG_INFO, TCP_INFO, TCPDIAG_GETSOCK, BackoffSpans,
                                          TcpConnections, TcpSampler, WHAT, diag_request,
                                          parse_connection)

ROOT = os.geteuid() == 0  # entering a namespace (setns), even this process's own, takes CAP_SYS_ADMIN
needs_root = pytest.mark.skipif(not ROOT, reason="entering a network namespace needs root")
INET_DIAG_CONG = 4


def parse_diag(data: bytes) -> tuple[list[dict], bool]:
    """One datagram of a dump's reply as ``TcpConnections.read`` parses each (through
    ``netlink.dump``): its connections, and whether it ended the dump."""
    messages, done = netlink.parse_datagram(data, WHAT)
    return [parse_connection(kind, body) for kind, body in messages], done


def _diag(family: int, src: str, sport: int, dst: str, dport: int, info: bytes, rq: int = 0, wq: int = 0) -> bytes:
    raw = [socket.inet_pton(family, a).ljust(16, b"\0") for a in (src, dst)]
    body = DIAG_MSG.pack(family, socket.htons(sport), socket.htons(dport), *raw, rq, wq)
    # an attribute of an unaligned length before tcp_info: the attributes are walked 4-byte aligned
    return netlink_message(TCPDIAG_GETSOCK, body + netlink_attr(INET_DIAG_CONG, b"cubic\0") + netlink_attr(INET_DIAG_INFO, info))


# tcp_info's prefix: backoff, rto (µs), unacked, lost, rtt (µs), snd_cwnd, total_retrans, bytes_acked, bytes_received
QUIET = TCP_INFO.pack(0, 204000, 0, 0, 3500, 10, 0, 1201, 99) + bytes(96)  # a newer kernel's longer tcp_info
WAITING = TCP_INFO.pack(3, 1632000, 14, 14, 12250, 1, 9, 5000, 0)


def test_a_dump_is_read_per_connection_with_the_timer_fields():
    data = (_diag(socket.AF_INET, "10.0.0.2", 20000, "10.0.0.1", 41234, QUIET)
            + _diag(socket.AF_INET6, "::ffff:10.0.0.2", 20001, "::ffff:10.0.0.3", 50000, WAITING, wq=131072)
            + netlink_message(NLMSG_DONE, bytes(4)))
    (quiet, waiting), done = parse_diag(data)
    assert done
    assert quiet == {"recv_q": 0, "send_q": 0, "local": "10.0.0.2:20000", "peer": "10.0.0.1:41234", "rto_ms": 204.0,
                     "srtt_ms": 3.5, "cwnd": 10, "unacked": 0, "backoff": 0, "retrans_total": 0, "lost": 0,
                     "bytes_acked": 1201, "bytes_received": 99}
    # a dual-stack socket's IPv4-mapped addresses read as the IPv4 ones they are
    assert (waiting["local"], waiting["peer"], waiting["send_q"]) == ("10.0.0.2:20001", "10.0.0.3:50000", 131072)
    assert (waiting["rto_ms"], waiting["srtt_ms"], waiting["backoff"], waiting["unacked"], waiting["retrans_total"],
            waiting["lost"]) == (1632.0, 12.25, 3, 14, 9, 14)


def test_a_datagram_without_done_leaves_the_dump_open_and_ipv6_reads_bracketed():
    rows, done = parse_diag(_diag(socket.AF_INET6, "2001:db8::1", 20000, "fe80::2", 443, QUIET))
    assert not done and [(r["local"], r["peer"]) for r in rows] == [("[2001:db8::1]:20000", "[fe80::2]:443")]
    assert parse_diag(netlink_message(NLMSG_DONE, bytes(4))) == ([], True)


def test_an_older_kernels_shorter_tcp_info_reads_what_it_holds_and_0_for_the_rest():
    short = WAITING[:TCP_INFO.size - 16]  # no bytes_acked, bytes_received
    [row], _ = parse_diag(_diag(socket.AF_INET, "10.0.0.1", 1, "10.0.0.2", 2, short))
    assert (row["rto_ms"], row["retrans_total"], row["bytes_acked"], row["bytes_received"]) == (1632.0, 9, 0, 0)


def test_a_refused_dump_is_an_error_naming_the_kernels_reason():
    refused = netlink_message(NLMSG_ERROR, NLMSG_ERR.pack(-22) + diag_request())
    with pytest.raises(OSError, match="sock_diag refused the dump: Invalid argument$") as err:
        parse_diag(_diag(socket.AF_INET, "10.0.0.1", 1, "10.0.0.2", 2, QUIET) + refused)
    assert err.value.errno == 22


@pytest.mark.parametrize("cut", [3, 20, 60, len(_diag(socket.AF_INET, "10.0.0.1", 1, "10.0.0.2", 2, QUIET)) - 4])
def test_a_truncated_reply_is_an_error_not_a_silent_row(cut):
    whole = _diag(socket.AF_INET, "10.0.0.1", 1, "10.0.0.2", 2, QUIET)
    with pytest.raises(ValueError, match="truncated"):
        parse_diag(whole[:cut])


def test_a_message_too_short_for_a_connection_is_an_error():
    with pytest.raises(ValueError, match="under inet_diag_msg"):
        parse_diag(netlink_message(TCPDIAG_GETSOCK, bytes(40)))


def test_the_request_dumps_every_established_connection_of_both_families_with_its_tcp_info():
    request = diag_request()
    assert len(request) == NLMSG_HDR.size + DIAG_REQ.size == 16 + 60  # nlmsghdr + inet_diag_req
    length, kind, flags, _seq, _pid = NLMSG_HDR.unpack_from(request)
    assert (length, kind, flags) == (len(request), TCPDIAG_GETSOCK, NLM_F_REQUEST | NLM_F_DUMP)
    family, src_len, dst_len, ext, states, dbs = DIAG_REQ.unpack_from(request, NLMSG_HDR.size)
    assert (family, src_len, dst_len, ext, states, dbs) == (socket.AF_INET, 0, 0, 1 << (INET_DIAG_INFO - 1), 1 << 1, 0)
    assert request[NLMSG_HDR.size + 4:NLMSG_HDR.size + 52] == bytes(48)  # no socket id: every socket


def _ss(port: int) -> dict[tuple, dict]:
    """``ss -tin``'s view of the established connections on ``port``, by (local, peer)."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} or dport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    conns: dict[tuple, dict] = {}
    for line in out.splitlines():
        if line and not line[0].isspace():
            recv_q, send_q, local, peer = line.split()[:4]
            conn = conns[(local, peer)] = {"recv_q": int(recv_q), "send_q": int(send_q)}
        elif line.strip():
            fields = dict(token.split(":", 1) for token in line.split() if token.count(":") == 1)
            conn.update(cwnd=int(fields["cwnd"]), rto_ms=float(fields["rto"]))
    return conns


def _connection(address: str = "127.0.0.1") -> tuple[list[socket.socket], tuple[str, str]]:
    """A client, its peer and their server on ``address``; 5000 bytes sent, left unread."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    server = socket.create_server((address, 0), family=family)
    client = socket.create_connection(server.getsockname()[:2])
    peer, _ = server.accept()
    client.sendall(b"x" * 5000)
    time.sleep(0.2)  # acknowledged: the queues hold still for both readers
    name = "[%s]:%d" if family == socket.AF_INET6 else "%s:%d"
    return [client, peer, server], (name % client.getsockname()[:2], name % server.getsockname()[:2])


@needs_root
@pytest.mark.skipif(shutil.which("ss") is None, reason="needs iproute2's ss")
@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_the_kernels_reply_is_what_ss_reads_of_the_same_connections(address):
    """One request, both families: an IPv4 and an IPv6 connection read as ss reads them."""
    if address == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    sockets, (client, server) = _connection(address)
    here = os.readlink("/proc/thread-self/ns/net")
    try:
        with closing(TcpConnections("/proc/self/ns/net")) as conns:
            assert os.readlink("/proc/thread-self/ns/net") == here  # the socket was opened by another thread
            port = int(server.rsplit(":", 1)[1])
            ours = {(r["local"], r["peer"]): r for r in conns.read() if port in (int(r["local"].rsplit(":", 1)[1]),
                                                                                 int(r["peer"].rsplit(":", 1)[1]))}
            theirs = _ss(port)
    finally:
        for s in sockets:
            s.close()
    assert set(ours) == set(theirs) == {(client, server), (server, client)}  # both established, both ends
    for key, seen in theirs.items():
        assert {k: ours[key][k] for k in seen} == seen, key
    assert ours[(server, client)]["recv_q"] == 5000 and ours[(client, server)]["bytes_acked"] > 5000
    assert ours[(server, client)]["bytes_received"] == 5000 and ours[(client, server)]["srtt_ms"] > 0




@needs_root
@pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("ip")), reason="needs unshare and ip")
def test_a_namespaces_connections_are_read_there_and_only_there():
    """200 connections, both ends seen: a dump of many datagrams (the kernel's are of 32 KiB at most)."""
    holder = subprocess.Popen(["unshare", "--net", sys.executable, "-c", CONNECTIONS_HOLDER, "200"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    sockets, root_pair = _connection()
    try:
        port = int(holder.stdout.readline())
        with closing(TcpConnections(f"/proc/{holder.pid}/ns/net")) as there, \
                closing(TcpConnections("/proc/self/ns/net")) as here:
            inside = {(r["local"], r["peer"]) for r in there.read()}
            outside = {(r["local"], r["peer"]) for r in here.read()}
    finally:
        for s in sockets:
            s.close()
        holder.kill()
        holder.wait()
    assert len(inside) == 400 and all(f"127.0.0.1:{port}" in pair for pair in inside), len(inside)
    assert root_pair not in inside and root_pair in outside and not inside & outside


@needs_root
@pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("ip")), reason="needs unshare and ip")
def test_a_host_gone_mid_run_ends_the_reads_though_its_socket_holds_the_namespace():
    holder = subprocess.Popen(["unshare", "--net", sys.executable, "-c", CONNECTIONS_HOLDER, "2"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        with closing(TcpConnections(f"/proc/{holder.pid}/ns/net")) as there:
            assert len(there.read()) == 4
            holder.kill()
            holder.wait()
            with pytest.raises(OSError, match=f"^/proc/{holder.pid}/ns/net: gone"):
                there.read()
    finally:
        holder.kill()
        holder.wait()


def test_a_reply_read_at_the_headers_offsets():
    """The layouts against linux/inet_diag.h and linux/tcp.h's offsets (gcc's offsetof on
    this box), written here by number, not by the module's own structs."""
    msg = bytearray(72)  # inet_diag_msg
    msg[0] = socket.AF_INET
    msg[4:6], msg[6:8] = (20000).to_bytes(2, "big"), (41234).to_bytes(2, "big")  # id.idiag_sport, idiag_dport
    msg[8:12], msg[24:28] = socket.inet_aton("10.0.0.2"), socket.inet_aton("10.0.0.1")  # idiag_src, idiag_dst
    msg[56:60], msg[60:64] = (11).to_bytes(4, "little"), (22).to_bytes(4, "little")  # idiag_rqueue, idiag_wqueue
    info = bytearray(136)  # tcp_info to tcpi_bytes_received
    info[4] = 3  # tcpi_backoff
    for offset, size, value in ((8, 4, 204000), (24, 4, 5), (32, 4, 6), (68, 4, 3500), (80, 4, 10), (100, 4, 9),
                                (120, 8, 1201), (128, 8, 99)):  # rto, unacked, lost, rtt, snd_cwnd, total_retrans,
        info[offset:offset + size] = value.to_bytes(size, "little")  # bytes_acked, bytes_received
    assert sys.byteorder == "little"  # netlink is in host order; this box's
    body = bytes(msg) + netlink_attr(INET_DIAG_INFO, bytes(info))
    [row], _ = parse_diag(netlink_message(TCPDIAG_GETSOCK, body))
    assert row == {"recv_q": 11, "send_q": 22, "local": "10.0.0.2:20000", "peer": "10.0.0.1:41234", "rto_ms": 204.0,
                   "srtt_ms": 3.5, "cwnd": 10, "unacked": 5, "backoff": 3, "retrans_total": 9, "lost": 6,
                   "bytes_acked": 1201, "bytes_received": 99}


def test_a_connection_without_its_tcp_info_or_a_dump_cut_short_is_an_error():
    body = DIAG_MSG.pack(socket.AF_INET, 1, 2, bytes(16), bytes(16), 0, 0)
    with pytest.raises(ValueError, match="without its tcp_info"):
        parse_diag(netlink_message(TCPDIAG_GETSOCK, body))
    with pytest.raises(OSError, match="the dump ended on an error: Interrupted system call"):
        parse_diag(netlink_message(NLMSG_DONE, NLMSG_ERR.pack(-4)))


def test_a_host_gone_fails_the_sampler_before_it_samples(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(OSError) as err:
        TcpSampler({"tbh3": gone.pid}, tmp_path, 0.1, time.monotonic())
    assert str(err.value) == (f"tbh3: its TCP connections cannot be read: /proc/{gone.pid}/ns/net: "
                              "No such file or directory")


def _conn(local: str, backoff: int = 0, unacked: int = 0, srtt: float = 2.0, rto: float = 204.0) -> dict:
    return {"local": local, "peer": "10.0.0.9:9", "backoff": backoff, "unacked": unacked, "srtt_ms": srtt,
            "rto_ms": rto}


def test_a_span_is_the_samples_a_connection_waited_on_its_backed_off_timer_with_data_out():
    spans = BackoffSpans()
    spans.add(0.0, "tbh1", [_conn("a:1", srtt=3.0), _conn("b:2")])
    spans.add(0.5, "tbh1", [_conn("a:1", backoff=1, unacked=4, rto=400), _conn("b:2", backoff=2)])  # b: nothing out
    spans.add(1.0, "tbh1", [_conn("a:1", backoff=2, unacked=4, rto=800), _conn("b:2")])
    spans.add(1.5, "tbh1", [_conn("a:1", srtt=9.0), _conn("b:2", backoff=1, unacked=1)])
    spans.add(1.5, "tbh2", [_conn("c:3", backoff=1, unacked=2)])
    spans.add(2.0, "tbh1", [_conn("b:2", backoff=1, unacked=1)])  # tbh2 not sampled again: c still open
    got = spans.close()
    assert [(s["host"], s["local"], s["start_s"], s["end_s"], s["samples"]) for s in got] == [
        ("tbh1", "a:1", 0.5, 1.0, 2), ("tbh1", "b:2", 1.5, 2.0, 2), ("tbh2", "c:3", 1.5, 1.5, 1)]
    a = got[0]
    assert (a["backoff_max"], a["rto_ms_max"], a["srtt_ms_before"]) == (2, 800.0, 3.0)
    assert got[2]["srtt_ms_before"] is None  # never seen before it waited


def test_a_connection_that_closes_while_it_waits_ends_its_span_at_its_last_sample():
    spans = BackoffSpans()
    spans.add(0.0, "tbh1", [_conn("a:1", backoff=1, unacked=1)])
    spans.add(0.5, "tbh1", [])
    spans.add(1.0, "tbh1", [_conn("a:1", backoff=1, unacked=1)])  # a new connection on the same ports
    assert [(s["start_s"], s["end_s"]) for s in spans.close()] == [(0.0, 0.0), (1.0, 1.0)]


def _sampled(sampler, rounds: int, deadline_s: float = 10.0) -> dict:
    """Run ``sampler`` until it has sampled ``rounds`` times (or ended), then stop it."""
    sampler.start()
    deadline = time.monotonic() + deadline_s
    while sampler.samples < rounds and sampler.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return sampler.stop()


@needs_root
def test_the_sampler_records_a_live_connection_and_its_own_cost(tmp_path):
    sockets, ends = _connection()
    try:
        fields = _sampled(TcpSampler({"here": None}, tmp_path, 0.1, time.monotonic()), 3)
    finally:
        for s in sockets:
            s.close()
    # no child processes: the cost is the thread's own
    assert fields["tcp_samples"] >= 2 and fields["tcp_sampler_cpu_s"] > 0 and "tcp_sampler_error" not in fields
    rows = list(csv.DictReader((tmp_path / "tcp_sockets.csv").open()))
    ours = [r for r in rows if (r["local"], r["peer"]) == ends]
    assert len(ours) >= 2 and all(r["host"] == "here" and int(r["bytes_acked"]) > 5000 for r in ours), ours
    assert (fields["tcp_backoff_spans"], fields["tcp_backoff_longest_s"]) == (0, 0.0)
    assert (tmp_path / "tcp_backoffs.csv").read_text().splitlines() == [
        "host,local,peer,start_s,end_s,samples,backoff_max,rto_ms_max,srtt_ms_before"]


class _Failing(sampling.Sampler):
    header, prefix = ["time_s", "x"], "test"

    def __init__(self, path, fail):
        super().__init__(path, 0.05, time.monotonic())
        self.fail = fail

    def sample(self, t, writer):
        if self.samples == 2:
            self.fail(self)
        writer.writerow([f"{t:.3f}", self.samples])


def test_a_sampler_that_fails_any_way_keeps_its_rows_and_says_why(tmp_path):
    def unexpected(_sampler):
        raise KeyError("rtt")

    fields = _sampled(_Failing(tmp_path / "rows.csv", unexpected), 5)
    assert fields["test_samples"] == 2 and fields["test_sampler_error"] == "KeyError: 'rtt'"
    assert (tmp_path / "rows.csv").read_text().splitlines()[0] == "time_s,x"
    assert len((tmp_path / "rows.csv").read_text().splitlines()) == 3


def test_a_samplers_cost_counts_its_own_threads_work(tmp_path):
    def busy(_sampler):
        ends = time.thread_time() + 0.2
        while time.thread_time() < ends:
            pass
        raise RuntimeError("done")

    fields = _sampled(_Failing(tmp_path / "rows.csv", busy), 5)
    assert fields["test_sampler_cpu_s"] >= 0.2, fields
