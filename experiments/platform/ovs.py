"""Private Open vSwitch instances (ovsdb-server + ovs-vswitchd) of one run.

An instance's db/run/log/etc directories live under one directory of the run's
own; every ``ovs-*`` tool that serves a switch (Mininet's included) finds its
instance through the ``OVS_*DIR`` variables of ``ovs_env()``. The system OVS
(/var/run/openvswitch) is never touched. Only the userspace datapath exists on
this kernel, and one ovs-vswitchd forwards the packets of all its bridges in a
single thread (the ports are AF_PACKET sockets, polled by the main loop), so a
run may split its switches over several instances to forward on several cores.
Userspace TSO keeps TCP checksums right.

An ovs-vswitchd sends every packet, on every port of every bridge, through one
AF_PACKET socket, created at its first send with the default send buffer (208 KB).
Packets waiting in a port's tc queues are charged to that socket, so by default all
the queues of an instance together held 208 KB, and a packet over that was dropped
in sendmsg, before any queue saw it (measured: 1-5% of a run's packets, no tc drop).
``set_send_buffer`` sizes that socket for the queues it feeds.

Each port is read through an AF_PACKET socket of its own, bound to the port's
interface, with the default receive buffer (208 KB, about 100 KB of jumbo frames:
8 ms at 100 Mbit/s). While ovs-vswitchd is off the CPU its ports' packets wait
there, and one that finds it full is dropped, again before any queue (measured on
a 9-host all-to-all at 100 Mbit/s: 18,600 such drops against 1,500 in the queues,
one TCP segment in 13 sent again). ``set_receive_buffers`` sizes each for what its
link brings while the switch waits for the CPU.

A port's queue refuses a packet by failing its send (ENOBUFS; the qdisc counts the
drop). ovs-vswitchd hands a port a batch of up to 32 packets (``NETDEV_MAX_BURST``) in
one sendmmsg, which stops at the refused packet; OVS 3.1 (``netdev_linux_sock_batch_send``)
sends again from it and, refused again, gives up the rest of the batch: packets of any
queue, which no counter shows, and one drop counted twice. Measured on the Grouper
testbed (measurements/switch-losses-2026-12-01): 0.2-0.6% of the switches' packets
under the priority schedulers. With ``switch_drop: "packet"`` (the default) each
instance runs with ``ovs_send.c`` preloaded: a batch's packets go one by one and a
refused one is dropped alone, as a switch's tail-drop queue does, and the instance
counts what it sent and refused (``send_counts``). ``"batch"`` keeps OVS's own
behaviour. Runs report what the switches lost besides their queues
(``switch_loss_share``).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

from experiments.platform.records import proc_stat, state_dir

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
DAEMONS = ("ovs-vswitchd", "ovsdb-server")  # stop order
VSWITCHD_NICE = -10
SO_SNDBUFFORCE = 32  # <asm-generic/socket.h>: SO_SNDBUF beyond wmem_max, for root
SO_RCVBUFFORCE = 33  # and SO_RCVBUF beyond rmem_max
KERNEL_BUFFER_FACTOR = 2  # a socket's buffer is twice what SO_*BUF asks (socket(7): bookkeeping)
SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture
SWITCH_DROPS = ("packet", "batch")  # what a port queue's refusal drops: that packet; OVS's rest of the batch too
SEND_LIBRARY_SOURCE = Path(__file__).with_name("ovs_send.c")
SEND_COUNTS = ("sent", "refused", "failed")  # ovs_send.c's counters, in its file's order
SEND_LIBRARY_BUILD = ("cc", "-O2", "-shared", "-fPIC", "-Wall", "-Werror")
# A frame no host or switch acts on (IEEE local experimental ethertype), sent by an
# instance once so that its send socket exists before the workload's first packet.
PRIMING_FRAME = "ffffffffffff" + "020000000000" + "88b5" + "00" * 46


def ovs_env(base: str | Path) -> dict[str, str]:
    base = Path(base)
    return {"OVS_RUNDIR": str(base / "run"), "OVS_DBDIR": str(base / "db"),
            "OVS_LOGDIR": str(base / "log"), "OVS_SYSCONFDIR": str(base / "etc")}


def send_library() -> Path:
    """``ovs_send.c`` built as a shared library, once per source and flags, in the
    state dir, or in ~/.cache/trainbed where the state dir's filesystem is mounted
    noexec (ld.so would refuse to preload it; /run often is)."""
    where = state_dir()
    if os.statvfs(where).f_flag & os.ST_NOEXEC:
        where = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainbed"
        where.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(SEND_LIBRARY_SOURCE.read_bytes() + " ".join(SEND_LIBRARY_BUILD).encode()).hexdigest()
    library = (where / f"ovs_send-{digest[:16]}.so").resolve()
    if not library.exists():
        partial = library.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            proc = subprocess.run([*SEND_LIBRARY_BUILD, "-o", str(partial), str(SEND_LIBRARY_SOURCE), "-ldl"],
                                  capture_output=True, text=True)
        except FileNotFoundError:
            raise RuntimeError(f"building {SEND_LIBRARY_SOURCE.name} needs a C compiler (cc): "
                               "scripts/install.sh installs gcc") from None
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"building {SEND_LIBRARY_SOURCE.name} failed: {_one_line_text(proc.stderr)}")
        os.replace(partial, library)
    return library


def _one_line_text(text: str) -> str:
    """A tool's message (a compiler's, ld.so's) on one line."""
    return " ".join(text.split())


class PrivateOVS:
    def __init__(self, base: str | Path, switch_drop: str = "packet"):
        if switch_drop not in SWITCH_DROPS:
            raise ValueError(f"switch_drop must be one of {SWITCH_DROPS}, got {switch_drop!r}")
        self.base = Path(base)
        self.env = ovs_env(self.base)
        self.switch_drop = switch_drop
        self.send_counts_path = self.base / "run" / "send_counts"

    def _run(self, *cmd: str, timeout: float = 20, env: dict[str, str] | None = None) -> str:
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **self.env, **(env or {})},
                              timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def start(self) -> None:
        for d in self.env.values():
            Path(d).mkdir(parents=True, exist_ok=True)
        run, db, log = self.env["OVS_RUNDIR"], self.env["OVS_DBDIR"], self.env["OVS_LOGDIR"]
        self._run("ovsdb-tool", "create", f"{db}/conf.db", SCHEMA)
        self._run("ovsdb-server", f"{db}/conf.db", f"--remote=punix:{run}/db.sock",
                  f"--pidfile={run}/ovsdb-server.pid", "--detach", f"--log-file={log}/ovsdb-server.log")
        self._run("ovs-vsctl", "--no-wait", "init")
        self._run("ovs-vsctl", "--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true")
        # --enable-dummy: bridges of datapath type "dummy" (dpif-netdev without a kernel tap) exist.
        # nice -10: a switch is hardware of its own, so it goes before the hosts' programs when
        # they compete for the CPU (measured under a 0.7-core quota: high-priority share 0.17 -> 0.44).
        preload = {}
        if self.switch_drop == "packet":
            library = send_library()
            preload = {"LD_PRELOAD": str(library), "TRAINBED_SEND_COUNTS": str(self.send_counts_path)}
        self._run("nice", "-n", f"{VSWITCHD_NICE}", "ovs-vswitchd", f"unix:{run}/db.sock", "--enable-dummy", f"--pidfile={run}/ovs-vswitchd.pid",
                  "--detach",
                  f"--log-file={log}/ovs-vswitchd.log", env=preload)
        self._run("ovs-vsctl", "--timeout=10", "show")
        if preload and str(library) not in Path(f"/proc/{self.pids().get('ovs-vswitchd')}/maps").read_text():
            why = subprocess.run(["true"], env={"LD_PRELOAD": str(library)}, capture_output=True, text=True).stderr
            raise RuntimeError(f"ovs-vswitchd of {self.base} runs without {library}: "
                               f"{_one_line_text(why) or 'not preloaded'}")

    def send_out(self, bridge: str, port: int) -> None:
        """Make the instance send ``PRIMING_FRAME`` out of ``port`` of ``bridge``."""
        self._run("ovs-ofctl", "-O", "OpenFlow13", "packet-out", bridge,
                  f"in_port=controller packet={PRIMING_FRAME} actions=output:{port}")

    def set_send_buffer(self, nbytes: int) -> list[int]:
        """Ask for ``nbytes`` of send buffer on the instance's send socket; returns the
        sizes the kernel then reports (``KERNEL_BUFFER_FACTOR`` times as much), one per
        socket (none: it has not sent anything yet)."""
        wanted = {inode for inode, bound in _packet_sockets().items() if bound == (0, 0)}
        return list(self._resize(wanted, SO_SNDBUFFORCE, socket.SO_SNDBUF, lambda _inode: nbytes).values())

    def set_receive_buffers(self, nbytes_of_ifindex: dict[int, int]) -> dict[int, int]:
        """Ask for a receive buffer on the socket that reads each port (by interface
        index); returns, per interface index found, the size the kernel then reports."""
        bound = {inode: ifindex for inode, (_proto, ifindex) in _packet_sockets().items()
                 if ifindex in nbytes_of_ifindex}
        got = self._resize(set(bound), SO_RCVBUFFORCE, socket.SO_RCVBUF,
                           lambda inode: nbytes_of_ifindex[bound[inode]])
        return {bound[inode]: size for inode, size in got.items()}

    def _resize(self, inodes: set[int], force_option: int, option: int, nbytes) -> dict[int, int]:
        """Set ``force_option`` to ``nbytes(inode)`` on each of ovs-vswitchd's sockets in
        ``inodes``, through a copy of its descriptor (pidfd_getfd); returns the size
        ``option`` then reads, per inode."""
        pid = self.pids().get("ovs-vswitchd")
        if pid is None or not inodes:
            return {}
        libc = ctypes.CDLL(None, use_errno=True)
        done = {}
        pidfd = os.pidfd_open(pid)
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if not (target.startswith("socket:[") and int(target[8:-1]) in inodes):
                    continue
                inode = int(target[8:-1])
                copy = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(fd), 0)
                if copy < 0:
                    raise OSError(ctypes.get_errno(), f"pidfd_getfd on ovs-vswitchd {pid} fd {fd}")
                sock = socket.socket(fileno=copy)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, force_option, nbytes(inode))
                    done[inode] = sock.getsockopt(socket.SOL_SOCKET, option)
                finally:
                    sock.close()
        finally:
            os.close(pidfd)
        return done

    def packet_socket_drops(self) -> dict[str, int]:
        """Packets the kernel dropped because one of ovs-vswitchd's AF_PACKET sockets was
        full, per socket, named by the interface it reads ("*" for the send socket).
        No queue counts these."""
        out = subprocess.run(["ss", "-H", "-0", "-a", "-m", "-p"], capture_output=True, text=True, check=True).stdout
        return parse_packet_socket_drops(out, self.pids().get("ovs-vswitchd"))

    def send_counts(self) -> dict[str, int] | None:
        """What ``ovs_send.c`` counted so far (``SEND_COUNTS``): packets the instance
        sent, refused by a port's queue, and ended by another error; None under
        ``switch_drop: "batch"``."""
        if self.switch_drop != "packet":
            return None
        data = self.send_counts_path.read_bytes()
        return dict(zip(SEND_COUNTS, struct.unpack(f"={len(SEND_COUNTS)}Q", data)))

    def appctl(self, *args: str) -> str:
        return self._run("ovs-appctl", "--timeout=10", *args)

    def cpu_seconds(self) -> float:
        """CPU time used so far by this instance's ovs-vswitchd (all its threads)."""
        pid = self.pids().get("ovs-vswitchd")
        fields = proc_stat(pid) if pid is not None else None
        if fields is None:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def cpu_wait_seconds(self) -> float:
        """Time ovs-vswitchd's main thread, which polls every port, spent so far ready to
        run but waiting for a CPU (its ``schedstat``): the switches the box kept off the CPU."""
        pid = self.pids().get("ovs-vswitchd")
        try:
            return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return 0.0

    def pids(self) -> dict[str, int]:
        return _pidfile_pids(self.base)

    def stop(self) -> list[str]:
        return stop_ovs_dir(self.base)


def parse_packet_socket_drops(ss_text: str, pid: int | None) -> dict[str, int]:
    """From ``ss -H -0 -a -m -p`` output: the drops (``skmem``'s ``d``) of each packet
    socket process ``pid`` holds, by the interface it is bound to ("*": none)."""
    drops: dict[str, int] = {}
    for line in ss_text.replace("\n\t", " ").splitlines():
        found = re.search(r':(\S+)\s.*\(\("[^"]*",pid=(\d+),.*skmem:\(.*\bd(\d+)\)', line)
        if found and int(found[2]) == pid:
            drops[found[1]] = drops.get(found[1], 0) + int(found[3])
    return drops


def _packet_sockets() -> dict[int, tuple[int, int]]:
    """This namespace's AF_PACKET sockets (/proc/net/packet): inode -> (the protocol,
    the index of the interface) each is bound to, 0 for none. ovs-vswitchd's send
    socket is bound to neither; each port's receive socket to its port."""
    out = {}
    for line in Path("/proc/net/packet").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 9:
            out[int(fields[8])] = (int(fields[3], 16), int(fields[4]))
    return out


def _pidfile_pids(base: Path) -> dict[str, int]:
    pids = {}
    for daemon in DAEMONS:
        path = Path(base) / "run" / f"{daemon}.pid"
        try:
            pids[daemon] = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
    return pids


def _is_daemon_of(pid: int, daemon: str, base: Path) -> bool:
    """True if ``pid`` is ``daemon`` started on this directory (never someone else's)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return daemon in cmd and str(base) in cmd


def stop_ovs_dir(base: str | Path) -> list[str]:
    """Stop the daemons whose pidfiles live under ``base``; returns what was stopped."""
    base = Path(base)
    stopped = []
    for daemon, pid in _pidfile_pids(base).items():
        if not _is_daemon_of(pid, daemon, base):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _is_daemon_of(pid, daemon, base):
            time.sleep(0.05)
        if _is_daemon_of(pid, daemon, base):
            os.kill(pid, signal.SIGKILL)
        stopped.append(f"{daemon} {pid}")
    return stopped
