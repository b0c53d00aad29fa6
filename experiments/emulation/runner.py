"""``trainbed run``: one spec -> one run directory.

Like an experiment in mininet-tests: bring the fabric up, start background
monitors (CPU), play the workload (iperf3 flows and policy changes on a
schedule), collect raw data, tear down (always, also on SIGINT/SIGTERM), then a
separate analysis step turns raw data into ``summary.json`` and plots.
"""
from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from experiments import store
from experiments.emulation import metrics, plots
from experiments.emulation import spec as spec_mod
from experiments.emulation.net import Emulation
from hosts import traffic

INTERVAL_S = 0.5
GRACE_S = 5.0


class CpuMonitor(threading.Thread):
    """Samples the box's CPU idle share every second into a list (cpu.csv)."""

    def __init__(self, t0: float):
        super().__init__(daemon=True)
        self.t0 = t0
        self.samples: list[tuple[float, float]] = []
        self.first = store.cpu_times()
        self.last = self.first
        self.stopped = threading.Event()

    def run(self) -> None:
        prev = self.first
        while not self.stopped.wait(1.0):
            now = store.cpu_times()
            self.samples.append((time.monotonic() - self.t0, store.idle_share(prev, now)))
            prev = now
        self.last = store.cpu_times()

    def idle_share(self) -> float:
        return store.idle_share(self.first, self.last)


def _terminate_on_signals():
    def raise_interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    previous = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    return previous


def _policy_of(entry: dict) -> dict:
    return {k: entry[k] for k in ("queue", "rate_mbps", "rate_mechanism") if k in entry}


def play(em: Emulation, spec: dict, raw: Path, t0_wall: list) -> dict:
    """Run the workload; returns per-flow start offsets and the policy ids used."""
    fab = em.fabric
    flows = spec["flows"]
    ports = {f["name"]: traffic.IPERF_BASE_PORT + i for i, f in enumerate(flows)}
    servers = {}
    for f in flows:
        out = open(raw / f"{f['name']}.server.json", "wb")
        cmd = traffic.server_cmd(ports[f["name"]]) + ["-i", f"{INTERVAL_S:g}"]
        servers[f["name"]] = em.popen(f["dst"], cmd, stdout=out, stderr=out)
        out.close()
    time.sleep(0.5)  # servers listening
    events = [(f["start_s"], 0, "start", f) for f in flows]
    events += [(c["at_s"], 1, "change", c) for c in spec["policy_changes"]]
    events.sort(key=lambda e: (e[0], e[1]))
    policy_ids: dict[str, int] = {}
    starts: dict[str, float] = {}
    flows_by_name = {f["name"]: f for f in flows}
    clients = []
    t0 = time.monotonic()
    t0_wall.append(time.time())
    for at, _order, kind, entry in events:
        delay = t0 + at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        flow = flows_by_name[entry["name"] if kind == "start" else entry["flow"]]
        match = {"src": flow["src"], "dst": flow["dst"], "proto": "tcp", "dst_port": ports[flow["name"]]}
        if kind == "change" and entry["remove"]:
            if flow["name"] in policy_ids:
                em.client.remove_policy(policy_ids.pop(flow["name"]))
        elif _policy_of(entry):
            policy_ids[flow["name"]] = em.client.set_policy(**match, **_policy_of(entry))
        if kind == "start":
            out = open(raw / f"{flow['name']}.client.json", "wb")
            cmd = traffic.client_cmd(fab.host(flow["dst"]).ip, ports[flow["name"]], flow["duration_s"],
                                     spec["tcp_congestion"])
            starts[flow["name"]] = time.monotonic() - t0
            clients.append(em.popen(flow["src"], cmd, stdout=out, stderr=out))
            out.close()
    remaining = t0 + spec["duration_s"] + GRACE_S - time.monotonic()
    for proc in clients + list(servers.values()):
        proc.wait(timeout=max(remaining, 1.0) + 10)
    return {"starts": starts, "ports": ports, "policies": em.client.policies()}


def analyse(spec: dict, run: Path, played: dict, cpu: CpuMonitor) -> dict:
    """Raw data in the run directory -> summary dict (and flows.csv)."""
    fab = spec_mod.fabric_of(spec)
    series = {}
    for f in spec["flows"]:
        text = (run / "raw" / f"{f['name']}.server.json").read_text()
        series[f["name"]] = traffic.receiver_series(text, played["starts"].get(f["name"], f["start_s"]))
    with open(run / "flows.csv", "w") as out:
        out.write("time_s,flow,goodput_mbps\n")
        for name, points in series.items():
            for t, mbps in points:
                out.write(f"{t:.3f},{name},{mbps:.3f}\n")
    flows = [dict(f) for f in spec["flows"]]
    for f in flows:
        limits = [c["at_s"] for c in spec["policy_changes"] if c["flow"] == f["name"] and "rate_mbps" in c]
        if limits:
            f["limited_from_s"] = min(limits)
            f["limited_mbps"] = next(c["rate_mbps"] for c in spec["policy_changes"]
                                     if c["flow"] == f["name"] and c["at_s"] == f["limited_from_s"])
    link_mbps = {link.a: link.mbps for link in fab.host_links()}
    per_host = metrics.host_link_goodput(flows, series, link_mbps)
    ratios = metrics.link_goodput(per_host)
    summary: dict = {"name": spec["name"], "flows": {}}
    for f in flows:
        pts = series[f["name"]]
        summary["flows"][f["name"]] = {
            "mean_goodput_mbps": metrics.window_mean(pts, f["start_s"] + metrics.SETTLE_S,
                                                     f["start_s"] + f["duration_s"])}
    pri = spec["analysis"].get("priority")
    if pri:
        high, low = by_name(flows, pri["high"]), by_name(flows, pri["low"])
        overlap = (max(high["start_s"], low["start_s"]), min(high["start_s"] + high["duration_s"],
                                                             low["start_s"] + low["duration_s"]))
        summary["high_share_while_both"] = metrics.high_share_while_both(series[high["name"]], series[low["name"]],
                                                                         overlap)
        summary["low_recovery_s"] = metrics.low_recovery_s(series[low["name"]], high["start_s"],
                                                           high["start_s"] + high["duration_s"], low["start_s"])
    rl = spec["analysis"].get("rate_limit")
    if rl:
        flow = by_name(flows, rl["flow"])
        limit_at, target = flow["start_s"], flow.get("rate_mbps")
        for c in spec["policy_changes"]:
            if c["flow"] == flow["name"] and "rate_mbps" in c:
                limit_at, target = c["at_s"], c["rate_mbps"]
        later = [c["at_s"] for c in spec["policy_changes"] if c["flow"] == flow["name"] and c["at_s"] > limit_at]
        end = min(later + [flow["start_s"] + flow["duration_s"]])
        summary["rate_limit_target_mbps"] = target
        summary["rate_limit_achieved_mbps"] = metrics.window_mean(series[flow["name"]], limit_at + metrics.SETTLE_S,
                                                                  end)
        summary["rate_limit_mechanism"] = next(
            (p["rate_mechanism"] for p in played["policies"] if p["dst_port"] == played["ports"][flow["name"]]), None)
    summary["link_goodput_ratio"] = min(ratios.values()) if ratios else None
    summary["fidelity"] = metrics.fidelity(cpu.idle_share(), ratios, spec["fidelity"]["min_cpu_idle"],
                                           spec["fidelity"]["min_link_goodput_ratio"])
    summary["fidelity"]["host_link_goodput"] = per_host
    summary["trustworthy"] = summary["fidelity"]["trustworthy"]
    summary["cpu_idle_share"] = summary["fidelity"]["cpu_idle_share"]
    plots.flow_goodput(series, spec, run / "goodput.png")
    return summary


def by_name(flows: list[dict], name: str) -> dict:
    return next(f for f in flows if f["name"] == name)


def run_spec(spec: dict, out: str | None = None) -> Path:
    run = store.new_run_dir("run", spec["name"], out)
    store.write_spec(run, spec)
    store.write_json(run / "environment.json", store.environment())
    raw = run / "raw"
    raw.mkdir(exist_ok=True)
    previous = _terminate_on_signals()
    t0_wall: list = []
    try:
        with Emulation(spec_mod.fabric_of(spec), run) as em:
            cpu = CpuMonitor(time.monotonic())
            cpu.start()
            try:
                played = play(em, spec, raw, t0_wall)
            finally:
                cpu.stopped.set()
                cpu.join()
            store.write_json(raw / "queue_counters.json", em.port_counters())
            store.write_json(raw / "policies.json", played["policies"])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    with open(run / "cpu.csv", "w") as f:
        f.write("time_s,idle_share\n" + "".join(f"{t:.2f},{idle:.3f}\n" for t, idle in cpu.samples))
    summary = analyse(spec, run, played, cpu)
    store.write_json(run / "summary.json", summary)
    store.point_latest(run)
    return run


def run_spec_file(path: str, out: str | None = None) -> Path:
    return run_spec(spec_mod.load(path), out)
