"""Netlink without a process: the plumbing the capture's samplers share.

The TCP sampler (``sockets.py``: sock_diag) and the queue sampler (``tcstats.py``:
rtnetlink's tc classes) each send one dump request per read over a socket opened
once, and read the kernel's reply here: messages framed by ``struct nlmsghdr``, each
4-byte aligned, a type and a body; a dump comes in as many datagrams as it fills and
ends with NLMSG_DONE; a refusal is an NLMSG_ERROR carrying -errno. A body's
attributes are ``struct rtattr``s (length, type, payload; 4-byte aligned).
linux/netlink.h, linux/rtnetlink.h. Netlink is in host byte order.
"""
from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading
from typing import Callable, TypeVar

# linux/netlink.h, linux/sched.h
NETLINK_ROUTE, NETLINK_SOCK_DIAG = 0, 4
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLA_TYPE_MASK = 0x3FFF  # an attribute's type without its NLA_F_NESTED, NLA_F_NET_BYTEORDER flags
CLONE_NEWNET = 0x40000000
RECV_BYTES = 1 << 16  # the kernel sends a dump in datagrams of at most 32 KiB

NLMSG_HDR = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
NLMSG_ERR = struct.Struct("=i")  # nlmsgerr's error: -errno (0: an acknowledgement)
RTATTR = struct.Struct("=HH")  # rtattr: len, type

_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def _align(n: int) -> int:
    return (n + 3) & ~3  # NLMSG_ALIGN, RTA_ALIGN


def request(kind: int, body: bytes, flags: int = NLM_F_REQUEST | NLM_F_DUMP) -> bytes:
    """A netlink message of type ``kind`` (a dump request unless ``flags`` say otherwise)."""
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), kind, flags, 0, 0) + body + bytes(-len(body) % 4)


def parse_datagram(data: bytes, what: str) -> tuple[list[tuple[int, bytes]], bool]:
    """One datagram of a dump's reply: its messages' (type, body), and whether it ended
    the dump (NLMSG_DONE; nothing after it is read). An NLMSG_ERROR that carries an
    error is an OSError naming the kernel's reason (``<what> refused the dump: ...``);
    one that carries none (an acknowledgement) is skipped; a message cut short is a
    ValueError."""
    messages, offset = [], 0
    while offset < len(data):
        if len(data) - offset < NLMSG_HDR.size:
            raise ValueError(f"{what}: a truncated netlink header at {offset} of {len(data)} bytes")
        length, kind, _flags, _seq, _pid = NLMSG_HDR.unpack_from(data, offset)
        if length < NLMSG_HDR.size or offset + length > len(data):
            raise ValueError(f"{what}: a truncated message ({length} bytes at {offset} of {len(data)})")
        body = data[offset + NLMSG_HDR.size:offset + length]
        offset += _align(length)
        if kind == NLMSG_DONE:  # its body: the dump's end code, -errno if the kernel cut it short
            if len(body) >= NLMSG_ERR.size and (code := -NLMSG_ERR.unpack_from(body)[0]) > 0:
                raise OSError(code, f"{what}: the dump ended on an error: {os.strerror(code)}")
            return messages, True
        if kind == NLMSG_ERROR:
            if len(body) < NLMSG_ERR.size:
                raise ValueError(f"{what}: a truncated error message ({len(body)} bytes)")
            code = -NLMSG_ERR.unpack_from(body)[0]
            if code:
                raise OSError(code, f"{what} refused the dump: {os.strerror(code)}")
            continue
        messages.append((kind, body))
    return messages, False


def dump(sock: socket.socket, req: bytes, what: str) -> list[tuple[int, bytes]]:
    """Send the dump request ``req``; every message of the reply, (type, body), to
    NLMSG_DONE, across as many datagrams as the kernel sends (``parse_datagram``'s errors)."""
    sock.send(req)
    messages: list[tuple[int, bytes]] = []
    done = False
    while not done:
        data = sock.recv(RECV_BYTES)
        if not data:
            raise ValueError(f"{what}: an empty reply before the dump's end")
        got, done = parse_datagram(data, what)
        messages += got
    return messages


def attributes(body: bytes, offset: int, what: str) -> dict[int, bytes]:
    """The attributes of ``body`` from ``offset`` (where its fixed header ends): {type:
    payload}, the type without its flags, the last of a type kept; a nested
    attribute's payload is walked the same way, from 0. One cut short is a ValueError."""
    found, at = {}, offset
    while at + RTATTR.size <= len(body):
        length, kind = RTATTR.unpack_from(body, at)
        if length < RTATTR.size or at + length > len(body):
            raise ValueError(f"{what}: a truncated attribute ({length} bytes at {at} of {len(body)})")
        found[kind & NLA_TYPE_MASK] = body[at + RTATTR.size:at + length]
        at += _align(length)
    return found


def in_netns(ns_path: str, action: Callable[[], T]) -> T:
    """``action()`` run by a throwaway thread that entered the network namespace at
    ``ns_path`` (``/proc/PID/ns/net``): its result, or what it raised. setns moves only
    the calling thread (man 2 setns), and a socket stays in the namespace it was made
    in, so no thread of this process changes namespace for good. A namespace that
    cannot be entered is an OSError naming ``ns_path``."""
    done: list = []

    def enter() -> None:
        try:
            try:
                fd = os.open(ns_path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        code = ctypes.get_errno()
                        raise OSError(code, os.strerror(code))
                finally:
                    os.close(fd)
            except OSError as err:
                raise OSError(err.errno, f"{ns_path}: {err.strerror}") from None
            done.append((True, action()))
        except BaseException as err:  # noqa: BLE001 - raised again in the caller's thread
            done.append((False, err))

    thread = threading.Thread(target=enter, name="netns")
    thread.start()
    thread.join()
    ok, value = done[0]
    if not ok:
        raise value
    return value


def netns_socket(ns_path: str, protocol: int) -> socket.socket:
    """A netlink socket of ``protocol`` (NETLINK_SOCK_DIAG, NETLINK_ROUTE) in the network
    namespace at ``ns_path`` (``in_netns``); OSError naming ``ns_path`` if it cannot be
    entered or the socket made."""
    def make() -> socket.socket:
        try:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol)
        except OSError as err:
            raise OSError(err.errno, f"{ns_path}: {err.strerror}") from None

    return in_netns(ns_path, make)
