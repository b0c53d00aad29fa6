"""Stand-ins the unit tests share: the controller client a driver applies its
decisions through, a socket that keeps what a host program wrote, netlink
replies built as the kernel frames them (a co-location worker's capped allocator is
in fake_allocator)."""
from __future__ import annotations

import socket

from experiments.platform.netlink import NLMSG_HDR, RTATTR


class FakeClient:
    """``ControllerClient.apply`` that keeps every batch and hands out fresh policy ids."""

    def __init__(self):
        self.batches = []

    def apply(self, changes):
        self.batches.append(changes)
        return list(range(100 + sum(len(b) for b in self.batches[:-1]), 100 + sum(len(b) for b in self.batches)))


class RecordingSocket:
    """A socket whose writes are kept: each write is one sendall, as the program made it."""

    def __init__(self, sock: socket.socket):
        self.sock, self.writes = sock, []

    def sendall(self, data) -> None:
        self.writes.append(bytes(data))
        self.sock.sendall(data)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def netlink_message(kind: int, body: bytes) -> bytes:
    """A netlink message of a kernel's reply (flags NLM_F_MULTI, as a dump's), 4-byte aligned."""
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), kind, 2, 7, 0) + body + bytes(-len(body) % 4)


def netlink_attr(kind: int, payload: bytes) -> bytes:
    """An rtattr, its payload padded to 4 bytes."""
    return RTATTR.pack(RTATTR.size + len(payload), kind) + payload + bytes(-len(payload) % 4)
