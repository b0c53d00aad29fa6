"""Bring an emulated fabric up and down: private OVS, controller, Mininet, queues.

``Emulation`` is the one place where the fabric's data (``topologies``) becomes
real. Invariants:

- Every resource is recorded (``RunRecord``) before or as it is created, so a
  crashed run can be cleaned by its record alone.
- Switches are spread over ``options.ovs_instances`` private OVS instances
  (round-robin in fabric order; "per_switch" gives each its own). A switch's
  Mininet shell is started with its instance's ``OVS_*DIR`` environment, so every
  ovs-vsctl/ovs-ofctl Mininet runs for it reaches its own instance.
- The controller is supervised: if its process exits during the run it is
  started again on the same OpenFlow port, socket and state file, recovers every
  policy from that file, and the switches (fail-secure: they keep forwarding)
  reconnect to it. ``outages`` lists each outage in monotonic time.
- ``stop()`` runs every tear-down step even if an earlier one fails, releases the
  fabric lock last, and raises one ``TeardownError`` naming every failed step.
  It is safe to call twice and after a partial start.
- A port's queue that refuses a packet drops that packet alone, and counts it
  (``switch_drop: "packet"``, ``experiments.platform.ovs``); OVS by itself gives up
  the rest of the packet's send batch too.
- Every OVS instance's one send socket holds all the queues it feeds, full, and
  each port's receive socket what its link brings while the switch waits for the
  CPU (``size_socket_buffers``): only queues drop packets, and they count them.
- The fabric carries IPv4 and ARP only: IPv6 is off on its interfaces, and what the
  switch ports counted before the fabric was up is left out of their balance
  (``switch_packet_balance``), so that a packet a switch took in and neither sent
  on nor dropped where a counter shows it (a queue, a receive socket, the next
  hop's backlog) is one it lost.
- Under a cgroup CPU quota, everything the emulation starts runs on as many CPUs
  as the quota covers (``experiments.platform.cpu.pinned_to_quota``): spread over more, the
  run spends its quota early in each period and is frozen for the rest of it.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from controller.client import ControllerClient, ControllerError
from controller.hostnet import netns_cmd, run_tc_batch, tc_show_cmd
from experiments.errors import TeardownError
from experiments.platform.cpu import pinned_to_quota
from experiments.platform.ovs import KERNEL_BUFFER_FACTOR, PrivateOVS, ovs_env
from experiments.platform.records import RunRecord, clean_record
from experiments.store import REPO_ROOT, write_json
from topologies import queues
from topologies.fabric import HOST_PREFIX_LEN, HOST_SUBNET, Fabric, host_interface

# IPv6 off on the fabric's interfaces: its link-local chatter (router and neighbour
# solicitations, MLD reports) was the switches' packet balance's residue, 8-46 packets
# a Grouper testbed cell: the hosts' counted in and dropped by the tables, the switch ends'
# own counted out.
IPV6_CONF = "/proc/sys/net/ipv6/conf"
# Interface and bridge names are global on the machine: one fabric at a time.
FABRIC_LOCK = "/run/trainbed-fabric.lock"
SUPERVISE_INTERVAL_S = 0.2
MAX_CONTROLLER_RESTARTS = 5


@dataclass(frozen=True)
class EmulationOptions:
    """How the fabric is realised; the defaults are what measured best (docs/emulation.md, "Capacity")."""

    ovs_instances: int | str = 2  # a count, or "per_switch"
    segmentation: str = "wire"  # topologies.queues.SEGMENTATIONS
    mtu: int = queues.MAX_MTU  # every interface of the fabric, host NICs and switch ports alike
    tcp_rto_min_ms: float | None = None  # None: the kernel's 200 ms
    tcp_congestion: str | None = None  # the spec's top-level tcp_congestion; None: the kernel's default
    switch_buffer_bytes: int = queues.LEAF_LIMIT_BYTES  # each switch queue's buffer (bfifo limit)
    queue_weights: tuple[float, ...] | None = None  # queues 1..7 weighted (queues.check_weights); None: strict priority
    switch_drop: str = "packet"  # experiments.platform.ovs.SWITCH_DROPS: what a port queue's refusal drops

    def instances_for(self, switches: list[str]) -> list[list[str]]:
        """Switch names grouped by OVS instance (round-robin, so leaves spread out)."""
        count = len(switches) if self.ovs_instances == "per_switch" else min(int(self.ovs_instances), len(switches))
        return [switches[i::count] for i in range(count)]


DATAPATH_TYPE = "dummy"


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulation:
    def __init__(self, fabric: Fabric, run_dir: str | Path, run_id: str | None = None,
                 options: EmulationOptions | None = None):
        self.fabric = fabric
        self.options = options or EmulationOptions()
        self.run_dir = Path(run_dir)
        self.run_id = run_id or f"tb-{uuid.uuid4().hex[:8]}"
        self.record: RunRecord | None = None
        self.ovs: list[PrivateOVS] = []
        self.ovs_of_switch: dict[str, PrivateOVS] = {}
        self.controller: subprocess.Popen | None = None
        self.client: ControllerClient | None = None
        self.net = None
        self.children: list[subprocess.Popen] = []
        self.socket_path = ""
        self.lock = None
        self.outages: list[dict] = []  # {"start", "end", "restarts", "exit_code"[, "error"]}, time.monotonic()
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._affinity = contextlib.ExitStack()
        self.send_buffers: dict[str, int | None] = {}  # per OVS instance; None: left at the default
        self.receive_buffers: dict[str, int | None] = {}  # per switch port; None: left at the default
        self._balance_at_start: dict[str, dict[str, int]] = {}  # switch_packet_balance counts from here

    # --- bring-up -----------------------------------------------------------------
    def __enter__(self) -> "Emulation":
        try:
            self.start()
        except BaseException:
            try:
                self.stop()
            except TeardownError as err:
                print(f"trainbed: {err}", file=sys.stderr)  # the start error is the one to raise
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.lock = open(FABRIC_LOCK, "a+")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock.close()
            self.lock = None
            raise RuntimeError(f"another trainbed fabric is up on this machine (lock {FABRIC_LOCK}); "
                               "wait for it or run `trainbed clean` if it crashed") from None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Before any process starts, so that every one of them inherits it.
        self._affinity.enter_context(pinned_to_quota())
        self.record = RunRecord(self.run_id, str(self.run_dir))
        ovs_dir = self.record.path.parent / self.run_id
        self.record.set_ovs_dir(str(ovs_dir))
        for i, switches in enumerate(self.options.instances_for([s.name for s in self.fabric.switches])):
            instance = PrivateOVS(ovs_dir / f"ovs{i}", self.options.switch_drop)
            self.record.add_ovs_instance(str(instance.base), switches)
            self.ovs.append(instance)
            self.ovs_of_switch.update({name: instance for name in switches})
            instance.start()
        write_json(self.run_dir / "fabric.json", self.fabric.to_dict())
        # A unix socket path is limited to 108 bytes; the state dir is short.
        self.socket_path = str(self.record.path.parent / f"{self.run_id}.sock")
        self.state_file = self.record.path.parent / f"{self.run_id}.controller-state"  # not *.json: not a run record
        self.record.add_file(str(self.state_file))
        self.of_port = free_tcp_port()
        self.client = ControllerClient(self.socket_path)
        self._start_controller()
        self._start_net()
        self.client.call("register_hosts", pids={h.name: h.pid for h in self.net.hosts})
        self.client.wait_ready(timeout=60)
        self._balance_at_start = self._switch_port_packets()
        self._supervisor = threading.Thread(target=self._supervise, name="controller-supervisor", daemon=True)
        self._supervisor.start()

    def _start_controller(self) -> None:
        """Start the controller process and wait for its management socket."""
        with open(self.run_dir / "controller.log", "ab") as log:
            self.controller = subprocess.Popen(
                [sys.executable, "-m", "controller.main", "--fabric", str(self.run_dir / "fabric.json"),
                 "--socket", self.socket_path, "--of-port", str(self.of_port), "--state", str(self.state_file)],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True)
        self.record.add_process(self.controller.pid, "controller")
        probe = ControllerClient(self.socket_path)  # the run's own client may be busy in another thread
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                if self.controller.poll() is not None:
                    raise RuntimeError(f"controller exited with {self.controller.returncode}; "
                                       f"see {self.run_dir}/controller.log")
                try:
                    probe.call("ping", retry_s=0)
                    return
                except ControllerError:
                    time.sleep(0.1)
        finally:
            probe.close()
        raise RuntimeError("controller did not open its management socket within 30 s")

    def _supervise(self) -> None:
        """Restart the controller whenever it exits before the run stops."""
        while not self._stopping.wait(SUPERVISE_INTERVAL_S):
            if self.controller.poll() is None:
                continue
            outage = {"start": time.monotonic(), "end": None, "restarts": 0,
                      "exit_code": self.controller.returncode}
            self.outages.append(outage)
            while not self._stopping.is_set() and outage["end"] is None:
                # a new controller only once the last one has ended: never two at once
                if self.controller.poll() is not None:
                    if sum(o["restarts"] for o in self.outages) >= MAX_CONTROLLER_RESTARTS:
                        outage["error"] = f"gave up after {MAX_CONTROLLER_RESTARTS} restarts"
                        return
                    outage["restarts"] += 1
                    try:
                        self._start_controller()
                    except (OSError, RuntimeError) as err:
                        outage["error"] = str(err).splitlines()[0]
                        continue
                probe = ControllerClient(self.socket_path)
                try:
                    probe.wait_ready(timeout=30)
                    outage["end"] = time.monotonic()
                except (OSError, RuntimeError) as err:
                    outage["error"] = str(err).splitlines()[0]
                    _end_process(self.controller)  # up but not ready (a switch never installed, or hung): replaced
                finally:
                    probe.close()

    def _start_net(self) -> None:
        from mininet.link import TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        setLogLevel("critical")  # TCLink warns about htb quantum on every link
        self.record.add_links(self.fabric.interface_names())
        self.record.add_bridges([s.name for s in self.fabric.switches])
        net = Mininet(switch=_instance_switch_class(), link=TCLink, controller=None, autoSetMacs=False, build=False)
        self.net = net
        net.addController(_probed_controller_class()("c0", ip="127.0.0.1", port=self.of_port))
        saved = {key: os.environ.get(key) for key in ovs_env(".")}
        try:
            for s in self.fabric.switches:
                os.environ.update(self.ovs_of_switch[s.name].env)  # inherited by the switch's shell
                net.addSwitch(s.name, dpid=f"{s.dpid:016x}", datapath="user", protocols="OpenFlow13",
                              failMode="secure")
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        ipv6 = Path(IPV6_CONF).exists()  # a kernel booted without IPv6 has none to turn off
        for h in self.fabric.hosts:
            host = net.addHost(h.name, ip=f"{h.ip}/{HOST_PREFIX_LEN}", mac=h.mac)
            # the namespace's default, so that its fabric interface (made in it by addLink)
            # comes up without IPv6; its loopback keeps it
            if ipv6:
                subprocess.run(netns_cmd(host.pid, ["sh", "-c", f"echo 1 > {IPV6_CONF}/default/disable_ipv6"]),
                               check=True, capture_output=True)
        for link in self.fabric.links:
            net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, bw=link.mbps)
        if ipv6:  # the switch ends are up since addLink: what they said so far predates _balance_at_start
            for _sw, intf, _mbps in self.fabric.switch_ports():
                Path(f"{IPV6_CONF}/{intf}/disable_ipv6").write_text("1\n")
        net.build()
        for host in net.hosts:
            self.record.add_process(host.pid, f"host {host.name}")
            self.record.add_netns(host.pid)
        net.start()
        self.apply_queue_plan()
        self.size_socket_buffers()

    def apply_queue_plan(self) -> None:
        """The queue plan, applied in one place: every switch port, every host NIC."""
        ports = self.fabric.switch_ports()
        if self.options.mtu != queues.MIN_MTU:
            batch = "".join(" ".join(queues.mtu_cmd(intf, self.options.mtu)[1:]) + "\n" for _sw, intf, _m in ports)
            subprocess.run(["ip", "-batch", "-"], input=batch, text=True, check=True, capture_output=True)
        run_tc_batch([c for _sw, intf, mbps in ports
                      for c in queues.switch_port_cmds(intf, mbps, self.options.switch_buffer_bytes,
                                                       self.options.queue_weights, self.options.mtu)],
                     where="switch ports")
        for link in self.fabric.host_links():
            pid, intf = self.host(link.a).pid, link.intf(link.a)
            for cmd in (queues.host_nic_cmds(intf, self.options.segmentation, self.options.mtu)
                        + queues.host_route_cmds(intf, HOST_SUBNET, self.options.tcp_rto_min_ms,
                                                 self.options.tcp_congestion)):
                subprocess.run(netns_cmd(pid, cmd), check=True, capture_output=True)
            if self.options.segmentation == "wire":
                self._check_one_segment_per_packet(link.a, pid, intf)
            run_tc_batch(queues.host_base_cmds(intf, link.mbps, self.options.queue_weights, self.options.mtu), pid,
                         where=f"host {link.a}")

    @staticmethod
    def _check_one_segment_per_packet(host: str, pid: int, intf: str) -> None:
        """A kernel that ignored ``gso_max_segs`` would hand the host's queues GSO
        super-packets again, silently (measurements/oes-retrans-2026-11-30): refuse."""
        shown = subprocess.run(netns_cmd(pid, ["ip", "-d", "-j", "link", "show", "dev", intf]), check=True,
                               capture_output=True, text=True).stdout
        segs = json.loads(shown)[0].get("gso_max_segs")
        if segs != 1:
            raise RuntimeError(f"emulation.segmentation: wire needs host {host}'s {intf} to take one segment per "
                               f"packet, but it keeps gso_max_segs {segs}: its queues would get GSO super-packets")

    def size_socket_buffers(self, timeout_s: float = 5.0) -> None:
        """Each OVS instance's send socket as deep as the queues it feeds, and each port's
        receive socket as deep as ``queues.switch_receive_buffer_bytes`` of its rate, both
        as asked of the kernel (which keeps ``KERNEL_BUFFER_FACTOR`` times as much)
        (``experiments.platform.ovs``); an instance that has not sent yet is made to send
        one frame first. Where it cannot be done the run goes on, with a warning and
        ``None`` in ``send_buffers`` / ``receive_buffers`` (``ovs_socket_buffers.json``)."""
        ports = self.fabric.switch_ports()
        for instance in self.ovs:
            switches = [s for s, inst in self.ovs_of_switch.items() if inst is instance]
            mine = [(intf, mbps) for sw, intf, mbps in ports if sw in switches]
            nbytes = queues.switch_send_buffer_bytes(len(mine), self.options.switch_buffer_bytes)
            try:
                done = instance.set_send_buffer(nbytes)
                if not done:
                    instance.send_out(switches[0], 1)
                    deadline = time.monotonic() + timeout_s
                    while not done and time.monotonic() < deadline:
                        time.sleep(0.05)
                        done = instance.set_send_buffer(nbytes)
                error = None if done else "its send socket did not appear"
                if done and min(done) < KERNEL_BUFFER_FACTOR * nbytes:
                    error = f"the kernel gave {min(done)} bytes of {KERNEL_BUFFER_FACTOR * nbytes}"
            except (OSError, RuntimeError) as err:
                error = str(err).splitlines()[0]
            self.send_buffers[instance.base.name] = None if error else min(done)
            if error:
                print(f"trainbed: warning: OVS {instance.base.name} keeps the default send buffer ({error}); "
                      "its switches may drop packets no queue counts", file=sys.stderr)
            self._size_receive_buffers(instance, mine)
        write_json(self.run_dir / "ovs_socket_buffers.json",
                   {"send": self.send_buffers, "receive": self.receive_buffers})

    def _size_receive_buffers(self, instance: PrivateOVS, ports: list[tuple[str, float]]) -> None:
        wanted = {intf: queues.switch_receive_buffer_bytes(mbps) for intf, mbps in ports}
        index = {}
        try:
            index = {intf: int(Path(f"/sys/class/net/{intf}/ifindex").read_text()) for intf in wanted}
            got = instance.set_receive_buffers({index[intf]: n for intf, n in wanted.items()})
            error = None
        except (OSError, RuntimeError) as err:
            got, error = {}, str(err).splitlines()[0]
        short = []
        for intf, nbytes in wanted.items():
            size = got.get(index.get(intf))
            self.receive_buffers[intf] = size if size is not None and size >= KERNEL_BUFFER_FACTOR * nbytes else None
            if self.receive_buffers[intf] is None:
                short.append(intf)
        if short:
            why = error or "no socket reads them, or the kernel gave less"
            print(f"trainbed: warning: OVS {instance.base.name} keeps the default receive buffer on "
                  f"{', '.join(short)} ({why}); its switches may drop packets no queue counts", file=sys.stderr)

    # --- use ------------------------------------------------------------------------
    def host(self, name: str):
        return self.net.get(name)

    def popen(self, host: str, args: list[str], **kwargs) -> subprocess.Popen:
        """Start a process in ``host``'s namespace; it is recorded and stopped with the run."""
        proc = self.host(host).popen(args, **kwargs)
        self.children.append(proc)
        self.record.add_process(proc.pid, f"{host}: {args[0]}")
        return proc

    def wait_listening(self, host: str, ports, timeout_s: float = 10.0) -> None:
        """Return once ``host`` has a TCP socket listening on every one of ``ports``: a
        client started before its server listens is refused, and a fixed sleep is a bet
        on the box's load. Raises RuntimeError naming the ports still closed at the deadline."""
        deadline = time.monotonic() + timeout_s
        while True:
            out = subprocess.run(netns_cmd(self.host(host).pid, ["ss", "-Hltn"]), capture_output=True,
                                 text=True).stdout
            listening = {int(f[3].rsplit(":", 1)[1]) for f in map(str.split, out.splitlines()) if len(f) >= 4}
            closed = sorted(set(ports) - listening)
            if not closed:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{host}: nothing listening on TCP port(s) {closed} after {timeout_s:g} s")
            time.sleep(0.02)

    def host_counters(self, host: str, names: Iterable[str]) -> dict[str, int]:
        """``host``'s kernel network counters by nstat's names ("TcpOutSegs",
        "TcpExtTCPTimeouts", "UdpRcvbufErrors", ...): absolute, so in a fresh namespace
        this run's (nstat's history untouched); one the kernel does not have reads 0."""
        out = subprocess.run(netns_cmd(self.host(host).pid, ["nstat", "-asz", "--json"]), capture_output=True,
                             text=True, check=True).stdout
        kernel = json.loads(out)["kernel"]
        return {name: kernel.get(name, 0) for name in names}

    def port_counters(self) -> dict[str, dict[int, dict[str, int]]]:
        """Per switch port, per queue: bytes/packets/dropped from ``tc -s class``."""
        out = {}
        for _sw, intf, _mbps in self.fabric.switch_ports():
            text = subprocess.run(tc_show_cmd(None, "class", intf, stats=True), capture_output=True, text=True).stdout
            out[intf] = queues.queue_counters(text)
        return out

    def host_queue_counters(self) -> dict[str, dict[int, dict[str, int]]]:
        """Per host NIC, per queue: bytes/packets/dropped from ``tc -s class`` in its
        namespace (the hosts' side of ``port_counters``)."""
        out = {}
        for host in self.fabric.hosts:
            cmd = tc_show_cmd(self.host(host.name).pid, "class", host_interface(host.name), stats=True)
            out[host.name] = queues.queue_counters(subprocess.run(cmd, capture_output=True, text=True).stdout)
        return out

    def host_qdisc_counters(self) -> dict[str, dict[str, int] | None]:
        """Per host, its NIC's root qdisc counters (bytes/packets/dropped, ``tc -s
        qdisc`` in its namespace): the drops are the packets its queue plan, per-flow
        rate classes included, refused the host's own stack."""
        out = {}
        for host in self.fabric.hosts:
            cmd = tc_show_cmd(self.host(host.name).pid, "qdisc", host_interface(host.name), stats=True)
            out[host.name] = queues.root_qdisc_counters(subprocess.run(cmd, capture_output=True, text=True,
                                                                       check=True).stdout)
        return out

    def interface_drops(self) -> dict[str, dict[str, int]]:
        """Per fabric interface (hosts' read in their namespaces): the packets the kernel
        dropped on it, received and sent (``ip -s link``'s rx/tx dropped; on a veth, tx
        dropped counts what its peer's receive backlog refused)."""
        where = {link.intf(link.a): self.host(link.a).pid for link in self.fabric.host_links()}
        stats = _link_stats(None)
        for pid in set(where.values()):
            stats |= {name: s for name, s in _link_stats(pid).items() if where.get(name) == pid}
        return {intf: {"rx": stats.get(intf, {}).get("rx", {}).get("dropped", 0),
                       "tx": stats.get(intf, {}).get("tx", {}).get("dropped", 0)}
                for intf in self.fabric.interface_names()}

    def switch_packet_balance(self) -> dict[str, dict[str, int]]:
        """Per switch, since the fabric came up: packets its ports received and
        transmitted and the bytes they transmitted (the kernel's counters of the
        switch-side interfaces), the packets its ports' receive sockets dropped full
        before the switch read them, and those the kernel could not hand to the next
        hop (``transmit_drops``: the peer's backlog full). Once traffic has stopped,
        received less all the others is what the switch lost between reading a packet
        and sending it on, besides its queues' drops (``fidelity.switch_internal_losses``);
        a proxy ARP request in is its reply out (the controller's), and bring-up (the
        interfaces' IPv6 chatter before it was turned off, the frame that opens a
        send socket) is left out."""
        now = self._switch_port_packets()
        return {switch: {k: v - self._balance_at_start.get(switch, {}).get(k, 0) for k, v in counters.items()}
                for switch, counters in now.items()}

    def _switch_port_packets(self) -> dict[str, dict[str, int]]:
        stats = _link_stats(None)
        sockets = {intf: n for instance in self.ovs for intf, n in instance.packet_socket_drops().items()}
        out: dict[str, dict[str, int]] = {}
        for switch, intf, _mbps in self.fabric.switch_ports():
            counters = out.setdefault(switch, dict.fromkeys(("received", "transmitted", "transmitted_bytes",
                                                             "receive_socket_drops", "transmit_drops"), 0))
            counters["received"] += stats.get(intf, {}).get("rx", {}).get("packets", 0)
            counters["transmitted"] += stats.get(intf, {}).get("tx", {}).get("packets", 0)
            counters["transmitted_bytes"] += stats.get(intf, {}).get("tx", {}).get("bytes", 0)
            counters["receive_socket_drops"] += sockets.get(intf, 0)
            counters["transmit_drops"] += stats.get(intf, {}).get("tx", {}).get("dropped", 0)
        return out

    def ovs_reports(self) -> dict[str, dict[str, str]]:
        """Per OVS instance, its own view of the packets: per-port counters with drops
        (``dpctl/show -s``) and its event counters (``coverage/show``), as text."""
        out = {}
        for instance in self.ovs:
            out[instance.base.name] = {name: instance.appctl(*args) for name, args in
                                       (("dpctl", ("dpctl/show", "-s")), ("coverage", ("coverage/show",)))}
        return out

    def vswitchd_cpu_seconds(self) -> list[float]:
        """CPU seconds used so far by each instance's ovs-vswitchd."""
        return [instance.cpu_seconds() for instance in self.ovs]

    def vswitchd_cpu_wait_seconds(self) -> list[float]:
        """Seconds each instance's ovs-vswitchd has waited so far for a CPU."""
        return [instance.cpu_wait_seconds() for instance in self.ovs]

    def switch_send_counts(self) -> dict[str, dict[str, int] | None]:
        """Per OVS instance, the packets it sent and those its ports' queues refused
        (``PrivateOVS.send_counts``; None under ``switch_drop: "batch"``)."""
        return {instance.base.name: instance.send_counts() for instance in self.ovs}

    def switch_socket_drops(self) -> int:
        """Packets dropped so far at the OVS instances' sockets, before any queue."""
        return sum(sum(instance.packet_socket_drops().values()) for instance in self.ovs)

    def controller_outages(self, t0: float) -> list[dict]:
        """Outages in run time (seconds after ``t0``, a time.monotonic()), each with the
        exit status the controller died with (negative: the signal that killed it)."""
        return [{"start_s": round(o["start"] - t0, 3),
                 "end_s": None if o["end"] is None else round(o["end"] - t0, 3),
                 "restarts": o["restarts"], "exit_code": o["exit_code"],
                 **({"error": o["error"]} if "error" in o else {})}
                for o in self.outages]

    # --- tear-down --------------------------------------------------------------------
    def stop(self) -> None:
        errors: list[str] = []

        def step(name: str, action) -> None:
            try:
                action()
            except BaseException as err:  # noqa: BLE001 - every step must run; errors are reported below
                errors.append(f"{name}: {str(err).splitlines()[0] if str(err) else type(err).__name__}")

        self._stopping.set()
        step("controller supervisor", self._join_supervisor)
        step("host processes", self._stop_children)
        step("controller client", self._close_client)
        step("mininet", self._stop_net)
        step("controller", self._stop_controller)
        step("open vswitch", self._stop_ovs)
        step("run record", self._clean_record)
        step("cpu affinity", self._affinity.close)
        step("fabric lock", self._release_lock)
        if errors:
            raise TeardownError("tear-down finished with errors: " + "; ".join(errors))

    def _join_supervisor(self) -> None:
        if self._supervisor is not None:
            self._supervisor.join(timeout=60)
            self._supervisor = None

    def _stop_children(self) -> None:
        children, self.children = self.children, []
        for proc in children:
            if proc.poll() is None:
                proc.kill()
        for proc in children:
            proc.wait(timeout=10)

    def _close_client(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            client.close()

    def _stop_net(self) -> None:
        if self.net is not None:
            net, self.net = self.net, None
            net.stop()

    def _stop_controller(self) -> None:
        if self.controller is None:
            return
        controller, self.controller = self.controller, None
        _end_process(controller)

    def _stop_ovs(self) -> None:
        instances, self.ovs = self.ovs, []
        for instance in instances:
            instance.stop()

    def _clean_record(self) -> None:
        if self.record is None:
            return
        record, self.record = self.record, None
        # Anything the normal path missed (a crash mid-start) goes by the record.
        clean_record(record.data)
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)
        record.close()

    def _release_lock(self) -> None:
        if self.lock is not None:
            lock, self.lock = self.lock, None
            lock.close()  # releases the flock


def _end_process(process: subprocess.Popen) -> None:
    """Terminate ``process`` (ours) if it still runs, killing it after 5 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _probed_controller_class():
    from mininet.node import RemoteController

    class ProbedController(RemoteController):
        """The os-ken controller, started before Mininet meets it (``_start_controller``
        waited for its management socket; switches retry its OpenFlow port, and
        ``wait_ready`` waits for them). Mininet would probe the port with telnet and
        decode the reply as UTF-8, and an OpenFlow hello is binary: the decode failed
        a run now and then (UnicodeDecodeError at start)."""

        def checkListening(self):
            pass

    return ProbedController


def _instance_switch_class():
    from mininet.node import OVSSwitch

    class InstanceSwitch(OVSSwitch):
        """An OVS switch served by its own private instance (see ``Emulation``).

        Mininet's batch shutdown runs one ovs-vsctl for all switches in the runner's
        environment, which reaches no instance or the wrong one; returning nothing
        makes Mininet stop each switch through its own shell instead. Mininet sets the
        controller's ``max_backoff`` to 1 s, so switches find a restarted controller
        within a second.
        """

        @classmethod
        def batchShutdown(cls, switches, run=None):
            return ()

        def bridgeOpts(self):
            return super().bridgeOpts().replace("datapath_type=netdev", f"datapath_type={DATAPATH_TYPE}")

    return InstanceSwitch


def _link_stats(netns_pid: int | None) -> dict[str, dict]:
    """Interface -> its ``stats64`` (``ip -s -j link show``), here or in ``netns_pid``'s namespace."""
    links = json.loads(subprocess.run(netns_cmd(netns_pid, ["ip", "-s", "-j", "link", "show"]), capture_output=True,
                                      text=True, check=True).stdout)
    return {link["ifname"]: link.get("stats64", {}) for link in links}
