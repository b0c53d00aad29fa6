"""Stand-ins the unit tests share: the controller client a driver applies its
decisions through, and a socket that keeps what a host program wrote."""
from __future__ import annotations

import socket


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
