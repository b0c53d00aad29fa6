"""ovs_send.c, the sendmmsg that ovs-vswitchd runs with (switch_drop: "packet"), on a
real queue: a rate-limited htb with a 5 KB bfifo on a veth, in a network
namespace of the test's own (``unshare --net``: it goes with the process). Root."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from experiments.platform.ovs import SEND_COUNTS, send_library

pytestmark = pytest.mark.root

# Sends one batch of FRAMES frames of 1,000 bytes on an AF_PACKET socket through libc's
# sendmmsg, as ovs-vswitchd does, then two datagrams on an AF_UNIX socket; prints what
# the calls returned and the queue's counters.
SENDER = r"""
import ctypes, json, os, re, socket, subprocess, sys
FRAMES = 32
ipv6 = "/proc/sys/net/ipv6/conf/default/disable_ipv6"  # this namespace's: no neighbour discovery on the queue
if os.path.exists(ipv6):
    with open(ipv6, "w") as f:
        f.write("1")
for cmd in ("ip link add d0 type veth peer name d1", "ip link set d1 up", "ip link set d0 up",
            "tc qdisc add dev d0 root handle 1: htb default 1",
            "tc class add dev d0 parent 1: classid 1:1 htb rate 1mbit burst 2k",
            "tc qdisc add dev d0 parent 1:1 handle 10: bfifo limit 5000"):
    subprocess.run(cmd.split(), check=True)

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]

class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]

libc = ctypes.CDLL(None, use_errno=True)

def sendmmsg(sock, payloads):
    bufs = [ctypes.create_string_buffer(p, len(p)) for p in payloads]
    iovs = (iovec * len(bufs))(*[iovec(ctypes.cast(b, ctypes.c_void_p), len(b)) for b in bufs])
    msgs = (mmsghdr * len(bufs))()
    for i in range(len(bufs)):
        msgs[i].hdr.iov = ctypes.pointer(iovs[i])
        msgs[i].hdr.iovlen = 1
    return libc.sendmmsg(sock.fileno(), msgs, len(bufs), 0), ctypes.get_errno()

frame = bytes.fromhex("ffffffffffff" + "020000000000" + "88b5") + bytes(986)
raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
raw.bind(("d0", 0))
sent, err = sendmmsg(raw, [frame] * FRAMES)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
unix_sent, _ = sendmmsg(a, [b"one", b"two"])
text = subprocess.run(["tc", "-s", "qdisc", "show", "dev", "d0"], capture_output=True, text=True, check=True).stdout
root = text.split("qdisc bfifo")[0]
print(json.dumps({"returned": sent, "errno": err, "unix_returned": unix_sent,
                  "unix_received": [b.recv(10).decode(), b.recv(10).decode()],
                  "queue_sent": int(re.search(r"Sent \d+ bytes (\d+) pkt", root)[1]),
                  "queue_dropped": int(re.search(r"dropped (\d+)", root)[1]),
                  "queue_backlog": int(re.search(r"backlog \d+b (\d+)p", root)[1])}))
"""
FRAMES = 32


def send_batch(env: dict[str, str]) -> dict:
    out = subprocess.run(["unshare", "--net", "--", sys.executable, "-c", SENDER], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_without_it_a_batch_stops_at_the_first_packet_its_queue_refuses():
    """What OVS's own sends meet: the call ends at the refused packet, the rest untried."""
    got = send_batch({"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    accepted = got["queue_sent"] + got["queue_backlog"]
    assert 0 < accepted < FRAMES - 1, got
    assert got["returned"] == accepted and got["queue_dropped"] == 1, got


def test_with_it_every_packet_of_the_batch_is_sent_or_dropped_by_its_queue_and_counted(tmp_path):
    counts = tmp_path / "counts"
    got = send_batch({"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_PRELOAD": str(send_library()),
                      "TRAINBED_SEND_COUNTS": str(counts)})
    accepted = got["queue_sent"] + got["queue_backlog"]
    assert 0 < accepted < FRAMES - 1, got  # the queue refused more than one
    assert got["returned"] == FRAMES and accepted + got["queue_dropped"] == FRAMES, got
    values = dict(zip(SEND_COUNTS, (int.from_bytes(counts.read_bytes()[8 * i:8 * i + 8], sys.byteorder)
                                    for i in range(len(SEND_COUNTS)))))
    assert values == {"sent": accepted, "refused": got["queue_dropped"], "failed": 0}, (values, got)
    # a socket of another family goes to libc's own sendmmsg, uncounted
    assert got["unix_returned"] == 2 and got["unix_received"] == ["one", "two"], got
