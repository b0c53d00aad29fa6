"""Packets and queues of a run, for any kind: the spec's ``capture:`` section.

``capture: {hosts: all, snap_bytes: 128, packets: 20000, filter: "tcp", queue_interval_s: 0.2,
tcp_interval_s: 0.25}``

- Packet capture: one tcpdump per chosen host, on its interface in its namespace,
  of what the host receives (``-Q in``: DSCP as the switches left it), the first
  ``snap_bytes`` of each packet, at most ``packets`` packets per host, an optional
  BPF ``filter`` (compiled by ``tcpdump -d`` at validation, so a typo is a spec
  error, not an empty pcap); ``raw/capture-<host>.pcap``. A tcpdump that exits
  other than 0 is listed in the summary's ``capture_errors``.
- Queue occupancy (``queue_interval_s``): every interval, every switch egress port's
  backlog per queue, as ``tc -s class show`` prints it, read from the kernel's
  rtnetlink (one RTM_GETTCLASS dump per port over one socket: no process forked;
  ``experiments/platform/tcstats.py``; the root namespace holds the switch ports);
  ``raw/queue_occupancy.csv`` (``time_s,port,queue,backlog_bytes``, run time from the
  run's start, before the fabric's bring-up, as ``cpu.csv``'s; the bytes exact, where
  tc's text rounds a size near a KiB multiple). A port that does not exist fails the
  capture's start; one gone while sampling ends the sampling (``queue_sampler_error``).
  The sampler's own cost, the CPU time of its thread, is reported
  (``queue_sampler_cpu_s``, ``queue_sampler_cpu_share`` of the box's CPU time over the
  sampling) beside the run's fidelity fields: it competes with the emulation for the
  same cores.
- TCP connections (``tcp_interval_s``): every interval, the chosen hosts' established
  connections as their kernels hold them, and the spans in which one waited on its
  backed-off retransmission timer (``experiments/platform/sockets.py``).
"""
from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from experiments.errors import SpecError
from experiments.platform import tcstats
from experiments.platform.sampling import Sampler
from experiments.platform.sockets import TcpSampler
from experiments.platform.tcstats import TcClasses
from experiments.validation import at, describe, host_name, integer, items, mapping, number, string, word
from topologies.fabric import Fabric, host_interface

CAPTURE_FIELDS = {"hosts", "snap_bytes", "packets", "filter", "queue_interval_s", "tcp_interval_s"}
DEFAULT_SNAP_BYTES, DEFAULT_PACKETS = 128, 20000
MAX_PACKETS = 1_000_000
MIN_QUEUE_INTERVAL_S = 0.05
MIN_TCP_INTERVAL_S = 0.1  # one sock_diag dump a host a sample; its cost is reported (tcp_sampler_cpu_share)
COMPILE_TIMEOUT_S = 5.0
QUEUE_OCCUPANCY = "queue_occupancy.csv"  # the queue sampler's, in the run's raw/


def validate_capture(raw, fab: Fabric) -> dict:
    """The ``capture:`` section resolved: hosts (a list; ``all`` by default), snap
    length, packet budget per host, filter, and the queue and TCP samplers' intervals
    (None: off; the TCP sampler samples the chosen hosts)."""
    section = mapping("capture", raw, allowed=CAPTURE_FIELDS)
    names = [h.name for h in fab.hosts]
    hosts_raw = section.get("hosts", "all")
    if hosts_raw == "all":
        hosts = names
    else:
        hosts = []
        for path, value in items("capture.hosts", hosts_raw, non_empty=True):
            host = host_name(path, word(path, value), names)
            if host not in hosts:
                hosts.append(host)
    interval, tcp_interval = section.get("queue_interval_s"), section.get("tcp_interval_s")
    return {"hosts": hosts,
            "snap_bytes": integer("capture.snap_bytes", section.get("snap_bytes", DEFAULT_SNAP_BYTES), minimum=64,
                                  maximum=65535),
            "packets": integer("capture.packets", section.get("packets", DEFAULT_PACKETS), minimum=0,
                               maximum=MAX_PACKETS),
            "filter": bpf_filter("capture.filter", section.get("filter", "")),
            "queue_interval_s": None if interval is None else number(at("capture", "queue_interval_s"), interval,
                                                                     minimum=MIN_QUEUE_INTERVAL_S, maximum=60),
            "tcp_interval_s": None if tcp_interval is None else number(at("capture", "tcp_interval_s"), tcp_interval,
                                                                       minimum=MIN_TCP_INTERVAL_S, maximum=60)}


def bpf_filter(path: str, value) -> str:
    """A BPF filter expression that tcpdump compiles (``tcpdump -d``: compiled only,
    for Ethernet, on no interface); an empty one captures everything. The compile runs
    in a network namespace of its own with no interface up, as root: a filter naming a
    host makes tcpdump resolve it, and no DNS lookup may leave the box (a name the box
    cannot resolve without the network is refused, as it would fail in an emulated host
    too). Where that cannot be run here (not root, no tcpdump, no namespace allowed),
    the filter is taken unchecked."""
    text = string(path, value, non_empty=False)
    if not text:
        return text
    if "\0" in text:
        raise SpecError(path, f"must be a BPF filter expression, got {describe(text)} (holds a NUL)")
    problem = _compile_problem(text)
    if problem:
        raise SpecError(path, f"{describe(text)} is not a filter tcpdump compiles ({problem})")
    return text


@functools.lru_cache(maxsize=64)  # a sweep validates the same filter in every cell
def _compile_problem(text: str) -> str | None:
    """tcpdump's own complaint about a filter, as one line; None when it compiles or
    when tcpdump cannot be asked (absent, not allowed to run, too slow)."""
    if os.geteuid() != 0 or shutil.which("tcpdump") is None:
        return None  # unshare needs root; without tcpdump the run's capture fails and says so
    try:
        done = subprocess.run(["unshare", "--net", "--", "tcpdump", "-d", "-y", "EN10MB", "--", text],
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=COMPILE_TIMEOUT_S)
    except OSError as err:
        if err.errno == errno.E2BIG:
            return f"{len(text)} characters are too many"
        return None  # no unshare here
    except subprocess.TimeoutExpired:
        return None
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
    if lines and lines[0].startswith("unshare:"):
        return None  # no namespace of its own here (e.g. a container): the filter cannot be checked, not refused
    complaints = [line for line in lines if not line.lower().startswith("warning")] or lines
    line = complaints[0] if complaints else f"tcpdump exited with {done.returncode}"
    line = line.removeprefix("tcpdump: ")
    return line if len(line) <= 200 else line[:197] + "..."


def start_packet_captures(em, raw: Path, hosts, snap_bytes: int, packets: int, bpf: str,
                          prefix: str = "capture") -> dict[str, subprocess.Popen]:
    """One tcpdump per host of what it receives, into ``raw/<prefix>-<host>.pcap``."""
    procs = {}
    for host in hosts:
        cmd = ["tcpdump", "-i", host_interface(host), "-Q", "in", "-n", "-s", str(snap_bytes), "-U",
               "-w", str(raw / f"{prefix}-{host}.pcap")]
        if packets:
            cmd[1:1] = ["-c", str(packets)]
        if bpf:
            cmd += ["--", bpf]  # a filter is never read as an option
        procs[host] = em.popen(host, cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return procs


def stop_packet_captures(procs: dict[str, subprocess.Popen]) -> list[str]:
    """Stop every tcpdump; one line per host whose tcpdump failed (its pcap missing or
    cut short; tcpdump exits 0 on SIGINT and on reaching its packet count)."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # tcpdump flushes its file on SIGINT
    failed = []
    for host, proc in procs.items():
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code != 0:
            failed.append(f"{host}: tcpdump exited with {code}")
    return failed


class QueueSampler(Sampler):
    """Every ``interval_s``, every switch port's backlog per queue, into ``path``: one
    rtnetlink dump of the port's tc classes per port per sample (``tcstats``), through
    one socket opened here (the switch ports are the root namespace's, as this
    process's are), no process forked."""

    header = ["time_s", "port", "queue", "backlog_bytes"]
    prefix = "queue"

    def __init__(self, fabric: Fabric, path: Path, interval_s: float, t0: float):
        """Each port's index resolved here, so that a port that cannot be read fails
        before any sampling starts."""
        super().__init__(path, interval_s, t0)
        self.ports: dict[str, int] = {}
        for _switch, intf, _mbps in fabric.switch_ports():
            try:
                self.ports[intf] = socket.if_nametoindex(intf)
            except OSError as err:
                raise OSError(f"{intf}: its queues cannot be read: {err.strerror or err}") from err
        self.classes = TcClasses()

    def sample(self, t: float, writer) -> None:
        """Every port read first: a round that fails leaves no part of itself behind."""
        read = {intf: tcstats.queue_backlogs(self._classes(intf, index)) for intf, index in self.ports.items()}
        for intf, backlogs in read.items():
            for queue, backlog in sorted(backlogs.items()):
                writer.writerow([f"{t:.3f}", intf, queue, backlog])

    def _classes(self, intf: str, index: int) -> dict[str, dict]:
        """The port's classes; an OSError if the port is gone (the kernel's dump of an
        index no interface has is empty, as is one of a port without classes)."""
        classes = self.classes.read(index)
        if not classes:
            try:
                gone = socket.if_indextoname(index) != intf
            except OSError:
                gone = True
            if gone:
                raise OSError(f"{intf}: its queues cannot be read: the interface is gone")
        return classes

    def close(self) -> None:
        """Release the rtnetlink socket."""
        self.classes.close()

    def stop(self) -> dict:
        """Stop sampling, release the socket; the summary fields."""
        try:
            return super().stop()
        finally:
            self.close()


class Capture:
    """What the spec's ``capture:`` asks for, started on a live fabric and stopped before it goes down."""

    def __init__(self, options: dict | None, raw: Path, t0: float | None = None):
        """``t0``: the time.monotonic() the run's times count from (as ``cpu.csv``'s);
        None: when the capture starts."""
        self.options, self.raw, self.t0 = options, raw, t0
        self.packets: dict[str, subprocess.Popen] = {}
        self.samplers: list[Sampler] = []
        self.fields: dict = {}

    def start(self, em) -> None:
        if not self.options:
            return
        o = self.options
        t0 = time.monotonic() if self.t0 is None else self.t0
        # Every sampler built (each opens its netlink sockets) before anything starts:
        # a port or host that cannot be read fails the start with nothing left running.
        samplers: list[Sampler] = []
        try:
            if o["queue_interval_s"]:
                samplers.append(QueueSampler(em.fabric, self.raw / QUEUE_OCCUPANCY, o["queue_interval_s"], t0))
            if o["tcp_interval_s"]:
                samplers.append(TcpSampler({h: em.host(h).pid for h in o["hosts"]}, self.raw, o["tcp_interval_s"],
                                           t0))
        except BaseException:
            for sampler in samplers:  # the sockets of those built: none started
                sampler.close()
            raise
        self.samplers = samplers
        for sampler in samplers:
            sampler.start()
        self.packets = start_packet_captures(em, self.raw, o["hosts"], o["snap_bytes"], o["packets"], o["filter"])

    def stop(self) -> None:
        """Stop capturing; a tcpdump that failed (a pcap missing or cut short) is
        reported in ``fields`` as ``capture_errors``."""
        failed = []
        try:
            failed = stop_packet_captures(self.packets)
        finally:  # every sampler stops, and writes what it holds, whatever a tcpdump or another did
            samplers, self.samplers, errors = self.samplers, [], []
            for sampler in samplers:
                try:
                    self.fields = {**self.fields, **sampler.stop()}
                except Exception as err:  # noqa: BLE001 - raised once the others have stopped
                    errors.append(err)
            if errors:
                raise errors[0]
        if failed:
            self.fields = {**self.fields, "capture_errors": failed}
