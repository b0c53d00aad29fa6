"""``make bench``: the fabric's speed and fidelity figures, measured side by side.

Not a test: it prints each figure next to its target, on this box as it is now
(noisy, 2 cores), and writes every figure to ``results/bench/latest.json`` as a list
of ``{"name", "value", "unit", "target", "ok"}`` whose names stay stable. Where a
change is being judged, the ways compared run one after the other in the same
invocation (``old_*`` / ``wire1500_*`` / ``batch_*`` / ``new_*`` names, ``MODES``).

``--quick`` runs the smaller half (CI-sized).
"""
from __future__ import annotations

import argparse
import json
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from controller.hostnet import netns_cmd, run_tc_batch
from experiments import store
from experiments.benchrows import row, show
from experiments.cojob import bench as bench_grouper
from experiments.gnn import bench as bench_gnn
from experiments.gnn import searchbench as bench_search
from experiments.platform import cpu, netlink, tcstats
from experiments.platform.fidelity import host_tcp_counters, queue_drops, tcp_summary
from experiments.platform.net import Emulation, EmulationOptions
from experiments.platform.sockets import TcpConnections
from experiments.platform.spec import FIDELITY_DEFAULTS
from experiments.platform.tcstats import TcClasses
from experiments.results import load_summary, summary_verdict
from experiments.runner import run_any_spec
from experiments.stats import percentile
from experiments.timetable import spec as spec_mod
from experiments.timetable.metrics import link_reasons, per_second
from experiments.timetable.runner import run_spec
from experiments.validation import read_yaml
from hosts import mesh
from hosts.traffic import receiver_series
from topologies import queues
from topologies.fabric import host_interface, leaf_spine

# The fabrics compared, side by side in one run: ``new`` is the default
# (``EmulationOptions()``); ``old`` the fabric as first built (one ovs-vswitchd,
# hosts handing GSO super-packets to their NICs); ``wire1500`` the default before
# jumbo frames (wire packets of 1500 bytes, two ovs-vswitchd); ``batch`` the default
# before a queue's refusal dropped one packet alone (OVS's own batch sends).
MODES = {"old": EmulationOptions(ovs_instances=1, segmentation="offload", mtu=1500, switch_drop="batch"),
         "wire1500": EmulationOptions(mtu=1500, switch_drop="batch"),
         "batch": EmulationOptions(switch_drop="batch"),
         "new": EmulationOptions()}
ROUNDS = 3  # the box is noisy: each all-to-all runs this many times per mode
GOODPUT_TARGET = 0.93
MESH_PORT = 5600
MESH_SECONDS = 10.0
SETTLE_S = 2.0


def cpu_during(action) -> tuple[dict, object]:
    """The box's CPU shares while ``action`` runs (``cpu.shares``: idle, stolen, this
    process's quota), and its result."""
    dirs = cpu.cgroup_cpu_dirs()
    first = cpu.sample(dirs)
    result = action()
    return cpu.shares(first, cpu.sample(dirs)), result


def all_to_all(options: EmulationOptions, fabric, workdir: Path, seconds: float = MESH_SECONDS,
               congestion: str = "bbr") -> dict:
    """Every host sends bulk TCP (``congestion``) to every other (one ``hosts.mesh`` process per host);
    the receiver goodput of each host link over the steady seconds, over its rate, and
    per OVS instance the cores it used and the share of the run its main thread was
    ready but off the CPU (``vswitchd_waited``); ``trustworthy`` when ``verdict`` gives
    no ``untrustworthy_reasons``."""
    names = [h.name for h in fabric.hosts]
    rate = fabric.host_mbps()
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with Emulation(fabric, workdir, options=options) as em:
        up_s = time.monotonic() - started
        start_at = time.time() + 3.0 + 0.02 * len(names)
        addrs = {n: f"{fabric.host(n).ip}:{MESH_PORT}" for n in names}
        cpu_before, wait_before = em.vswitchd_cpu_seconds(), em.vswitchd_cpu_wait_seconds()
        procs = []
        for n in names:
            peers = ",".join(addrs[m] for m in names if m != n)
            procs.append(em.popen(n, [sys.executable, "-m", "hosts.mesh", "--listen", addrs[n], "--peers", peers,
                                      "--duration-s", f"{seconds:g}", "--start-at", f"{start_at:.3f}",
                                      "--congestion", congestion, "--connect-timeout-s", "30",
                                      "--out", str(workdir / f"mesh-{n}.json")]))
        shares, codes = cpu_during(lambda: [p.wait(timeout=seconds + 90) for p in procs])
        vswitchd = [after - before for before, after in zip(cpu_before, em.vswitchd_cpu_seconds())]
        waited = [after - before for before, after in zip(wait_before, em.vswitchd_cpu_wait_seconds())]
        packets = what_packets_did(em)
    ratios, failed = [], sum(code != 0 for code in codes)
    for n in names:
        report = json.loads((workdir / f"mesh-{n}.json").read_text())
        steady = [mbps for t, mbps in mesh.goodput_series(report) if SETTLE_S < t <= seconds - 0.5]
        ratios.append(statistics.fmean(steady) / rate[n] if steady else 0.0)
    elapsed = seconds + 3.0
    reasons = verdict(shares, {host_interface(n): r for n, r in zip(names, ratios)}, failed, len(names))
    return {"min": min(ratios), "median": statistics.median(ratios), "cpu_idle": shares["cpu_idle_share"],
            "cpu_lost": cpu.lost_share(shares), "up_s": up_s,
            "vswitchd_cores": [round(c / elapsed, 3) for c in vswitchd],
            "vswitchd_waited": [round(w / elapsed, 3) for w in waited], "failed": failed, "trustworthy": not reasons,
            "untrustworthy_reasons": reasons,
            "aggregate_mbps": sum(r * rate[n] for r, n in zip(ratios, names)), **packets}


def verdict(shares: dict, link_ratios: dict[str, float], failed: int, processes: int) -> list[str]:
    """Why an all-to-all run cannot be trusted ([] when it can), by a run's own default
    fidelity limits: the box's CPU (``cpu.cpu_reasons`` over ``shares``: idle, steal,
    quota), each host link's goodput ratio (``link_reasons``), and mesh processes that
    failed."""
    return (cpu.cpu_reasons(shares, FIDELITY_DEFAULTS) + link_reasons(link_ratios, FIDELITY_DEFAULTS)
            + ([f"{failed} of {processes} mesh processes failed"] if failed else []))


def print_progress(what: str, r: dict) -> dict:
    """``r``, an ``all_to_all`` result, after one line of progress: the slowest link and the verdict."""
    verdict = "trustworthy" if r["trustworthy"] else f"untrustworthy ({'; '.join(r['untrustworthy_reasons'])})"
    print(f"{what}: slowest link {r['min']:.3f} of its rate, {verdict}", flush=True)
    return r


def what_packets_did(em: Emulation) -> dict:
    """What the queues were handed and what they dropped, after an all-to-all run:
    ``unit_bytes``, the mean size of what the switches sent into their port queues (a
    wire packet, or a GSO super-packet of many); ``queue_drops``, the drops the switch
    ports' queues counted; ``socket_drops``, what the switches' sockets dropped before
    any queue (a port's receive socket full while its switch waited for the CPU);
    ``retransmitted_share``, the hosts' TCP segments sent again (on the wire: ``tcp_summary``'s)
    over all sent; ``segments_per_drop``, retransmitted segments per queue drop (1 when
    a queue drops single wire packets, dozens when it drops super-packets)."""
    balance = em.switch_packet_balance().values()
    sent_packets = sum(s["transmitted"] for s in balance)
    sent_bytes = sum(s["transmitted_bytes"] for s in balance)
    drops = queue_drops(em.port_counters())
    tcp = tcp_summary(host_tcp_counters(em))
    out_segs, retrans = tcp["segments"], tcp["retransmitted_on_wire"]
    return {"unit_bytes": sent_bytes / sent_packets if sent_packets else 0.0, "queue_drops": drops,
            "socket_drops": em.switch_socket_drops(),
            "retransmitted_share": retrans / out_segs if out_segs else 0.0,
            "segments_per_drop": retrans / drops if drops else None}


def bench_capacity(workdir: Path, quick: bool) -> list[dict]:
    """All-to-all goodput per host link in every mode, for growing host counts, each
    mode run ``ROUNDS`` times, rounds interleaved so that a noisy minute hits every
    mode alike. Per mode and case: the per-run minimum receiver goodput (the median
    over the runs, and the level that at least two runs reached), trustworthy runs,
    and what the queues were handed and dropped (``what_packets_did``, medians)."""
    cases = [(6, 100.0)] if quick else [(3, 100.0), (6, 100.0), (9, 100.0), (24, 25.0)]
    rows, largest = [], 0.0
    for n_hosts, mbps in cases:
        hosts_per_leaf = n_hosts // 3
        fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=hosts_per_leaf, host_mbps=mbps,
                            fabric_mbps=min(1000.0, mbps * hosts_per_leaf * 2))  # non-blocking
        runs: dict[str, list[dict]] = {label: [] for label in MODES}
        for i in range(ROUNDS):
            for label, options in MODES.items():
                runs[label].append(all_to_all(options, fabric, workdir / f"a2a-{n_hosts}-{label}-{i}"))
                print_progress(f"all-to-all {n_hosts} x {mbps:g} Mbit/s, {label}, round {i + 1} of {ROUNDS}",
                               runs[label][-1])
        for label, results in runs.items():
            base = f"{label}_all_to_all_{n_hosts}x{mbps:g}"
            trusted = sorted((r["min"] for r in results if r["trustworthy"]), reverse=True)
            drops = [r["segments_per_drop"] for r in results if r["segments_per_drop"] is not None]
            rows += [row(f"{base}_min_received", statistics.median(r["min"] for r in results), "of rate",
                         GOODPUT_TARGET),
                     row(f"{base}_min_received_in_2_runs", trusted[1] if len(trusted) > 1 else None, "of rate"),
                     row(f"{base}_median_received", statistics.median(r["median"] for r in results), "of rate"),
                     row(f"{base}_cpu_idle", statistics.median(r["cpu_idle"] for r in results), "share"),
                     row(f"{base}_cpu_lost_share", statistics.median(r["cpu_lost"] for r in results), "share"),
                     row(f"{base}_vswitchd_cores", statistics.median(sum(r["vswitchd_cores"]) for r in results),
                         "cores"),
                     row(f"{base}_vswitchd_waited_share", statistics.median(max(r["vswitchd_waited"]) for r in results),
                         "of wall time"),
                     row(f"{base}_switch_socket_drops", statistics.median(r["socket_drops"] for r in results),
                         "packets"),
                     row(f"{base}_queued_unit_bytes", statistics.median(r["unit_bytes"] for r in results), "bytes"),
                     row(f"{base}_segments_per_drop", statistics.median(drops) if drops else None, "segments"),
                     row(f"{base}_retransmitted_share",
                         statistics.median(r["retransmitted_share"] for r in results), "share"),
                     row(f"{base}_trustworthy_runs", sum(r["trustworthy"] for r in results), f"of {ROUNDS}")]
        default = runs["new"]
        largest = max([largest] + [r["aggregate_mbps"] for r in default if r["trustworthy"]])
        if (n_hosts, mbps) == (6, 100.0):  # the stable names other tools read
            met = sorted((r["min"] for r in default if r["trustworthy"]), reverse=True)
            rows += [row("all_to_all_6x100_min_received", met[1] if len(met) > 1 else None, "of rate",
                         GOODPUT_TARGET),
                     row("all_to_all_6x100_trustworthy", len(met) >= 2)]
    rows.append(row("largest_trustworthy_all_to_all_goodput_mbps", largest, "Mbit/s"))
    return rows


def bench_big_fabric(workdir: Path) -> list[dict]:
    """The Grouper paper's simulation fabric, scaled down in rate: 6 leaves x 6 spines,
    60 hosts at 10 Mbit/s, all-to-all (3,540 flows)."""
    fabric = leaf_spine(spines=6, leaves=6, hosts_per_leaf=10, host_mbps=10.0, fabric_mbps=100.0)
    r = print_progress("all-to-all 60 x 10 Mbit/s",
                       all_to_all(MODES["new"], fabric, workdir / "a2a-60", seconds=12.0))
    return [row("fabric_6x6_60_hosts_bring_up_s", r["up_s"], "s", 60.0, lower_is_better=True),
            row("all_to_all_60x10_min_received", r["min"], "of rate", GOODPUT_TARGET),
            row("all_to_all_60x10_median_received", r["median"], "of rate"),
            row("all_to_all_60x10_cpu_idle", r["cpu_idle"], "share"),
            row("all_to_all_60x10_trustworthy", r["trustworthy"])]


def bench_bring_up_and_policies(workdir: Path) -> list[dict]:
    rows = []
    fabric = leaf_spine(spines=3, leaves=3, hosts_per_leaf=8)
    for label in ("old", "new"):
        em = Emulation(fabric, workdir / f"bringup-{label}", options=MODES[label])
        started = time.monotonic()
        em.__enter__()
        up = time.monotonic() - started
        try:
            if label == "new":
                rows += _policy_latencies(em, fabric)
        finally:
            started = time.monotonic()
            em.stop()
            down = time.monotonic() - started
        rows += [row(f"{label}_bring_up_3x3_24_hosts_s", up, "s", 15.0, lower_is_better=True),
                 row(f"{label}_tear_down_3x3_24_hosts_s", down, "s", 5.0, lower_is_better=True)]
    return rows


def _policy_latencies(em: Emulation, fabric) -> list[dict]:
    """One policy call -> rule in switch (barrier-confirmed), and a 500-flow batch."""
    hosts = [h.name for h in fabric.hosts]
    latencies = []
    for i in range(100):
        src, dst = hosts[i % 24], hosts[(i * 7 + 5) % 24]
        dst = hosts[(i + 1) % 24] if src == dst else dst
        started = time.monotonic()
        em.client.set_policy(src=src, dst=dst, proto="tcp", dst_port=6000 + i, queue=1 + i % 7)
        latencies.append((time.monotonic() - started) * 1000)
    batch = [{"set": {"src": hosts[i % 24], "dst": hosts[(i + 3) % 24], "proto": "tcp", "src_port": 7000 + i,
                      "dst_port": 20000, "queue": 1 + i % 7, "host_queue": 1 + (i + 1) % 7}} for i in range(500)]
    started = time.monotonic()
    em.client.apply(batch)
    batch_ms = (time.monotonic() - started) * 1000
    return [row("policy_call_p99_ms", percentile(latencies, 99, method="exclusive"), "ms", 100.0,
                lower_is_better=True),
            row("policy_call_p50_ms", statistics.median(latencies), "ms"),
            row("decision_500_flows_to_rules_ms", batch_ms, "ms", 1000.0, lower_is_better=True)]


def with_mode(raw: dict, name: str, options: EmulationOptions) -> dict:
    """A copy of spec ``raw`` named ``name``, run on the fabric ``options`` realise."""
    spec = json.loads(json.dumps(raw))
    spec["name"] = name
    spec["emulation"] = {"ovs_instances": options.ovs_instances, "segmentation": options.segmentation,
                         "mtu": options.mtu, "switch_drop": options.switch_drop}
    return spec


def bench_fidelity_per_mode(workdir: Path, quick: bool) -> list[dict]:
    """What each mode does to what a workload measures: the priority demo (share of the
    high flow while both run, the low flow's recovery, a host rate limit's error) and,
    unless ``quick``, the Grouper smoke (FS and Grouper, seed 1) and the GNN smoke (OES)."""
    rows = []
    demo = spec_mod.load(Path(__file__).parent / "specs" / "priority-demo.yaml")
    for label, options in MODES.items():
        run = run_spec(with_mode(demo, f"bench-priority-{label}", options), out=str(workdir / f"priority-{label}"))
        summary = load_summary(run)
        change = demo["policy_changes"][0]
        series = receiver_series((run / store.RAW / "low.server.json").read_text(), 0.0)
        samples = [mbps for t, mbps in per_second(series).items() if t >= change["at_s"] + 1]
        target = change["rate_mbps"]
        # low_recovery_s is bimodal under BBR: its policer detection, when it fires on the
        # starved queue, holds the flow at the guaranteed rate (docs/emulation.md, "Known limits")
        rows += [row(f"{label}_high_share_while_both", summary["high_share_while_both"], "share", 0.95),
                 row(f"{label}_low_recovery_s", summary["low_recovery_s"], "s", 2.0, lower_is_better=True),
                 row(f"{label}_rate_limit_mean_error", abs(statistics.fmean(samples) - target) / target, "share",
                     0.05, lower_is_better=True),
                 row(f"{label}_rate_limit_per_second_error",
                     statistics.fmean(abs(s - target) / target for s in samples), "share")]
        if quick:
            continue
        sct = {}
        for scheduler in ("fs", "grouper"):
            raw = read_yaml(bench_grouper.SMOKE)
            raw["scheduler"] = {**raw["scheduler"], "name": scheduler}
            run = run_any_spec(with_mode(raw, f"bench-smoke-{scheduler}-{label}", options),
                               out=str(workdir / f"smoke-{scheduler}-{label}"))
            summary = load_summary(run)
            sct[scheduler] = summary["avg_sct_s"]
            rows += [row(f"{label}_grouper_smoke_{scheduler}_avg_sct_s", sct[scheduler], "s"),
                     row(f"{label}_grouper_smoke_{scheduler}_trustworthy", summary_verdict(summary)[0])]
        rows.append(row(f"{label}_grouper_smoke_grouper_over_fs", sct["grouper"] / sct["fs"], "ratio"))
        raw = read_yaml(bench_gnn.SMOKE)
        raw["scheduler"] = {"name": "oes"}
        run = run_any_spec(with_mode(raw, f"bench-gnn-oes-{label}", options), out=str(workdir / f"gnn-{label}"))
        summary = load_summary(run)
        rows += [row(f"{label}_gnn_smoke_oes_iteration_s", summary["iteration_s_mean"], "s"),
                 row(f"{label}_gnn_smoke_oes_trustworthy", summary_verdict(summary)[0])]
    return rows


TCP_SAMPLER_ROUNDS = 200
TCP_SAMPLER_CONNECTIONS = 4  # a host of a run holds a few; both ends of each are sampled
# Holds loopback connections in a network namespace of its own (run under ``unshare --net``) until its stdin
# closes; prints its server's port once they are up (the bench's and tests/test_platform_sockets.py's).
CONNECTIONS_HOLDER = """
import socket, subprocess, sys
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
server = socket.create_server(("127.0.0.1", 0))
held = []
for _ in range(int(sys.argv[1])):  # each accepted at once: the listen backlog holds few
    held += [socket.create_connection(server.getsockname()), server.accept()[0]]
print(server.getsockname()[1], flush=True)
sys.stdin.read()
"""


def _cpu_ms(action) -> float:
    """CPU ms ``action`` cost: this thread's, and that of the children it reaped."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.thread_time()
    action()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return (time.thread_time() - started + children) * 1000


def bench_tcp_sampler() -> list[dict]:
    """CPU per host-sample of the capture's TCP sampler, its two ways side by side on the
    same connections of a namespace of their own (``unshare --net``): ``ss`` forked
    through ``nsenter`` per sample (the sampler's way until 2026-12) and a read of the
    socket ``TcpConnections`` opened once in the namespace (sock_diag netlink). Rounds
    interleave the two, so a noisy moment costs both alike."""
    holder = subprocess.Popen(["unshare", "--net", sys.executable, "-c", CONNECTIONS_HOLDER,
                               str(TCP_SAMPLER_CONNECTIONS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if not holder.stdout.readline().strip().isdigit():
            raise RuntimeError(f"the connections' namespace did not come up (exit {holder.wait()})")
        ns = f"/proc/{holder.pid}/ns/net"  # unshare execs the holder: its PID is the namespace's
        ss = ["nsenter", f"--net={ns}", "ss", "-tinH", "state", "established"]
        conns = TcpConnections(ns)
        try:
            spent = {"ss": 0.0, "sock_diag": 0.0}
            for _ in range(TCP_SAMPLER_ROUNDS):
                spent["ss"] += _cpu_ms(lambda: subprocess.run(ss, stdout=subprocess.DEVNULL, check=True))
                spent["sock_diag"] += _cpu_ms(conns.read)
            seen = len(conns.read())
        finally:
            conns.close()
    finally:
        holder.kill()
        holder.wait()
    if seen != 2 * TCP_SAMPLER_CONNECTIONS:
        raise RuntimeError(f"sock_diag saw {seen} connections, not {2 * TCP_SAMPLER_CONNECTIONS}")
    ss_ms, diag_ms = (spent[way] / TCP_SAMPLER_ROUNDS for way in ("ss", "sock_diag"))
    return [row("tcp_sampler_ss_cpu_ms_per_host_sample", ss_ms, "ms"),
            row("tcp_sampler_sock_diag_cpu_ms_per_host_sample", diag_ms, "ms"),
            row("tcp_sampler_ss_over_sock_diag_cpu", ss_ms / diag_ms, "ratio", 4.0)]


QUEUE_SAMPLER_ROUNDS = 100
QUEUE_SAMPLER_PORTS = 4  # a leaf-spine fabric has tens; the cost is per port per sample
# Holds a network namespace of its own (``unshare --net`` execs it: its PID is the namespace's) until its stdin
# closes; says so once the namespace is made.
QUEUE_PORTS_HOLDER = ["unshare", "--net", "--", "sh", "-c", "echo up && exec cat"]


@contextmanager
def queue_ports(n_ports: int, mbps: float = 1000.0) -> Iterator[tuple[int, list[str]]]:
    """A network namespace of its own, held while the block runs, with ``n_ports``
    ports (``tbq0``, ...: one end of a veth pair each, both ends up), each with a
    switch port's queue plan at ``mbps`` (``queues.switch_port_cmds``), the address
    10.99.<k>.1/24 and a neighbour 10.99.<k>.2 of its own: what is sent there leaves
    through the port's queues (the other end, which has no address, drops it). The
    holder's PID and the ports; the namespace, its interfaces with it, goes when the
    holder is killed (no socket left open in it)."""
    holder = subprocess.Popen(QUEUE_PORTS_HOLDER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "up":
            raise RuntimeError(f"the queue ports' namespace did not come up (exit {holder.wait()})")
        names = [f"tbq{k}" for k in range(n_ports)]
        links = "".join(f"link add {name} type veth peer name {name}p\nlink set dev {name}p up\n"
                        f"addr add 10.99.{k}.1/24 dev {name}\nlink set dev {name} up\n"
                        f"neigh replace 10.99.{k}.2 lladdr 02:00:00:00:99:{k:02x} dev {name} nud permanent\n"
                        for k, name in enumerate(names))
        done = subprocess.run(netns_cmd(holder.pid, ["ip", "-batch", "-"]), input=links, text=True, capture_output=True)
        if done.returncode != 0:
            raise RuntimeError(f"the queue ports could not be made: {done.stderr.strip() or done.returncode}")
        run_tc_batch([cmd for name in names for cmd in queues.switch_port_cmds(name, mbps)], holder.pid,
                     where="queue ports")
        yield holder.pid, names
    finally:
        holder.kill()
        holder.wait()


def _tc_backlogs(port: str) -> dict[int, int]:
    """The queue sampler's way until 2026-12: ``tc -s class show`` forked, its text parsed."""
    return queues.queue_backlogs(subprocess.run(["tc", "-s", "class", "show", "dev", port], capture_output=True,
                                                text=True, check=True).stdout)


def _queue_sampler_cpu(ports: list[str]) -> tuple[dict[str, float], dict[str, dict[int, int]]]:
    """CPU ms each way spent on ``QUEUE_SAMPLER_ROUNDS`` samples of ``ports`` (rounds
    interleaved), and what the netlink way read last, by port."""
    reader = TcClasses()
    try:
        index = {port: socket.if_nametoindex(port) for port in ports}
        spent = {"tc": 0.0, "netlink": 0.0}
        for _ in range(QUEUE_SAMPLER_ROUNDS):
            for port in ports:
                spent["tc"] += _cpu_ms(lambda port=port: _tc_backlogs(port))
            for port in ports:
                spent["netlink"] += _cpu_ms(lambda port=port: tcstats.queue_backlogs(reader.read(index[port])))
        seen = {port: tcstats.queue_backlogs(reader.read(index[port])) for port in ports}
        if seen != {port: _tc_backlogs(port) for port in ports}:
            raise RuntimeError(f"rtnetlink read {seen}, not what tc read")
        return spent, seen
    finally:
        reader.close()


def bench_queue_sampler() -> list[dict]:
    """CPU per port-sample of the capture's queue sampler, its two ways side by side on
    the same ports: ``tc -s class show`` forked per port-sample and its text parsed (the
    sampler's way until 2026-12) and one RTM_GETTCLASS dump over the rtnetlink socket
    ``TcClasses`` holds (``tcstats``), each read to {queue: backlog}. The ports are
    ``queue_ports``' (a switch port's queue plan on veth ports in a namespace of
    their own), read by a thread that entered the namespace, as the sampler reads the
    root namespace's switch ports: tc forked with no ``nsenter``, the socket a plain
    one. Rounds interleave the two, so a noisy moment costs both alike."""
    with queue_ports(QUEUE_SAMPLER_PORTS) as (pid, ports):
        spent, seen = netlink.in_netns(f"/proc/{pid}/ns/net", lambda: _queue_sampler_cpu(ports))
    if any(sorted(backlogs) != list(range(queues.N_QUEUES)) for backlogs in seen.values()):
        raise RuntimeError(f"rtnetlink did not read every port's {queues.N_QUEUES} queues: {seen}")
    samples = QUEUE_SAMPLER_ROUNDS * len(ports)
    tc_ms, netlink_ms = spent["tc"] / samples, spent["netlink"] / samples
    return [row("queue_sampler_tc_cpu_ms_per_port_sample", tc_ms, "ms"),
            row("queue_sampler_netlink_cpu_ms_per_port_sample", netlink_ms, "ms"),
            row("queue_sampler_tc_over_netlink_cpu", tc_ms / netlink_ms, "ratio", 10.0)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the smaller half (CI-sized): capacity at 6 hosts only, no smoke "
                                                                 "emulations, no GNN training, no 60-host fabric")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    out = store.results_root() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trainbed-bench-") as tmp:
        workdir = Path(tmp)
        steps = [lambda: bench_grouper.pda_timings(), lambda: bench_grouper.simulator_timings(),
                 lambda: bench_grouper.simulated_vs_emulated(workdir, emulate_smoke=not args.quick), lambda: bench_bring_up_and_policies(workdir),
                 lambda: bench_capacity(workdir, args.quick), lambda: bench_fidelity_per_mode(workdir, args.quick)]
        steps += [lambda: bench_gnn.rate_update_latency(workdir), bench_search.rows, bench_tcp_sampler,
                  bench_queue_sampler]
        if not args.quick:
            steps += [lambda: bench_gnn.training_side_by_side(workdir), lambda: bench_big_fabric(workdir)]
        for step in steps:
            new_rows = step()
            show(new_rows)
            rows += new_rows
            store.write_json(out / "latest.json", rows)  # a bench stopped halfway keeps what it measured
    print(f"wrote {out / 'latest.json'}")


if __name__ == "__main__":
    main()
