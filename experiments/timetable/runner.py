"""The ``timetable`` workload kind: iperf3 flows and policy changes on a schedule.

Like an experiment in mininet-tests: the fabric comes up, background monitors
(CPU) start, the timetable plays, raw data is collected, the fabric is torn down
(always, also on SIGINT/SIGTERM: ``experiments.platform.run``), then a separate
analysis step turns raw data into ``summary.json`` and plots.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from experiments import store
from experiments.errors import one_line
from experiments.platform import spec as platform_spec
from experiments.platform.cpu import CpuMonitor
from experiments.platform.fidelity import collect_fabric_counters, delayed_changes, fidelity_fields
from experiments.platform.net import Emulation
from experiments.platform.run import run_workload
from experiments.timetable import metrics, plots
from experiments.timetable import spec as spec_mod
from experiments.store import REPO_ROOT
from hosts import traffic, transfer
from topologies.units import mbps_of_bytes

INTERVAL_S = 0.5
GRACE_S = 5.0


def spec_end(spec: dict) -> float:
    """Seconds after the schedule's start by which every flow's processes must have
    ended (a sized flow not done by then failed)."""
    return spec["duration_s"] + GRACE_S + 10


def _policy_of(entry: dict) -> dict:
    return {k: entry[k] for k in spec_mod.POLICY_FIELDS if k in entry}


class TimetableWorkload:
    """iperf3 flows and policy changes on a schedule. ``played`` fills as the run
    goes (so a crash keeps what happened): run-time start of each flow, iperf3
    ports, when each policy change was due and applied, each iperf3 process's exit
    code. Run time counts from ``t0``, when the schedule starts."""

    def __init__(self, spec: dict, run: Path):
        self.spec, self.run_dir, self.raw = spec, run, run / store.RAW
        self.played: dict = {}
        self.t0: float | None = None
        self.em: Emulation | None = None
        self.servers: dict = {}
        self.clients: dict = {}

    def start(self, em: Emulation, events_path: str) -> None:
        self.em = em
        flows = self.spec["flows"]
        ports = {f["name"]: traffic.IPERF_BASE_PORT + i for i, f in enumerate(flows)}
        self.played.update({"starts": {}, "ports": ports, "changes": [], "exit_codes": {}})
        for f in flows:
            if "size_bytes" in f:  # one sized transfer; its report is its own file
                cmd = transfer.recv_cmd(f"{em.fabric.host(f['dst']).ip}:{ports[f['name']]}",
                                        str(self.raw / f"{f['name']}.recv.json"), INTERVAL_S, spec_end(self.spec))
                self.servers[f["name"]] = em.popen(f["dst"], cmd, cwd=REPO_ROOT)
                continue
            with open(self.raw / f"{f['name']}.server.json", "wb") as out:
                cmd = traffic.server_cmd(ports[f["name"]]) + ["-i", f"{INTERVAL_S:g}"]
                self.servers[f["name"]] = em.popen(f["dst"], cmd, stdout=out, stderr=out)
        for host in {f["dst"] for f in flows}:
            em.wait_listening(host, [ports[f["name"]] for f in flows if f["dst"] == host])

    def run(self) -> None:
        em, spec, played = self.em, self.spec, self.played
        flows = spec["flows"]
        ports = played["ports"]
        events = [(f["start_s"], 0, "start", f) for f in flows]
        events += [(c["at_s"], 1, "change", c) for c in spec["policy_changes"]]
        events.sort(key=lambda e: (e[0], e[1]))
        policy_ids: dict[str, int] = {}
        flows_by_name = {f["name"]: f for f in flows}
        t0 = self.t0 = played["t0"] = time.monotonic()
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
            if kind == "change":
                played["changes"].append({"flow": flow["name"], "at_s": at, "applied_s": time.monotonic() - t0})
            if kind == "start" and "size_bytes" in flow:
                cmd = transfer.send_cmd(f"{em.fabric.host(flow['dst']).ip}:{ports[flow['name']]}", flow["size_bytes"],
                                        str(self.raw / f"{flow['name']}.send.json"), spec["tcp_congestion"],
                                        spec_end(spec))
                played["starts"][flow["name"]] = time.monotonic() - t0
                self.clients[flow["name"]] = em.popen(flow["src"], cmd, cwd=REPO_ROOT)
            elif kind == "start":
                with open(self.raw / f"{flow['name']}.client.json", "wb") as out:
                    cmd = traffic.client_cmd(em.fabric.host(flow["dst"]).ip, ports[flow["name"]],
                                             flow["duration_s"], spec["tcp_congestion"]) + ["-i", f"{INTERVAL_S:g}"]
                    played["starts"][flow["name"]] = time.monotonic() - t0
                    self.clients[flow["name"]] = em.popen(flow["src"], cmd, stdout=out, stderr=out)
        deadline = t0 + spec_end(spec)
        for role, procs in (("client", self.clients), ("server", self.servers)):
            for name, proc in procs.items():
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
                    played["exit_codes"][f"{name}.{role}"] = proc.returncode
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    played["exit_codes"][f"{name}.{role}"] = "timed out"

    def stop(self) -> None:
        """iperf3 processes a fault left running (a finished run has none)."""
        for proc in [*self.clients.values(), *self.servers.values()]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def collect(self, em: Emulation) -> list[str]:
        """Raw data kept from the live fabric; each part independently of the others."""
        errors = collect_fabric_counters(em, self.raw)
        try:
            policies = em.client.policies()
        except Exception as err:  # noqa: BLE001 - a missing part must not lose the others
            errors.append(f"policies.json: {one_line(err)}")
        else:
            store.write_json(self.raw / "policies.json", policies)
            self.played["policies"] = policies
        return errors

    def summary_fields(self) -> dict:
        return {}

    def analyse(self, cpu: CpuMonitor, outages: list[dict]) -> dict:
        return analyse(self.spec, self.run_dir, self.played, cpu, outages)


def flow_failures(spec: dict, run: Path, played: dict) -> dict[str, dict]:
    """Flows whose client or server (iperf3, or a sized flow's transfer) failed: exit code (or "timed out"/"not
    started") and the first problem found in their reports."""
    failures = {}
    for f in spec["flows"]:
        name = f["name"]
        if name not in played.get("starts", {}):
            failures[name] = {"exit_code": "not started", "error": "the run ended before the flow started"}
            continue
        codes = {role: played.get("exit_codes", {}).get(f"{name}.{role}", "still running at the end")
                 for role in ("client", "server")}
        tool = "transfer" if "size_bytes" in f else "iperf3"
        problem = next((f"{tool} {role} exit {code}" for role, code in codes.items() if code != 0), None)
        sized = {}  # a sized flow's reports, by role
        for role in ("client", "server"):
            try:
                if "size_bytes" in f:
                    sized[role] = _sized_report(run, name, role)
                    error = sized[role].get("error")
                    problem = problem or (f"{role}: {error}" if error else None)
                else:
                    traffic.read_report((run / store.RAW / f"{name}.{role}.json").read_text())
            except (OSError, ValueError) as err:
                problem = problem or f"{role} report: {err}"
        if not problem and sized and transfer.flow_completion_s(sized["client"], sized["server"]) is None:
            problem = f"received {sized['server'].get('bytes')} of {sized['client'].get('bytes')} bytes"
        if problem:
            failures[name] = {"exit_code": codes["client"] if codes["client"] != 0 else codes["server"],
                              "error": problem}
    return failures


def _sized_report(run: Path, name: str, role: str) -> dict:
    """A sized flow's ``hosts.transfer`` report: the sender's (client) or receiver's (server)."""
    return json.loads((run / store.RAW / f"{name}.{'send' if role == 'client' else 'recv'}.json").read_text())


def _overlaps(a: tuple[float, float], b: tuple[float, float | None]) -> bool:
    return a[0] < (b[1] if b[1] is not None else float("inf")) and b[0] < a[1]


def analyse(spec: dict, run: Path, played: dict, cpu: CpuMonitor, outages: list[dict]) -> dict:
    """Raw data in the run directory -> summary dict (and goodput.csv, tcp.csv, goodput.png).

    A failed flow is a result: it is listed under ``failed_flows`` (and makes the
    run untrustworthy) while every other flow is analysed as usual.
    """
    fab = platform_spec.fabric_of(spec)
    failures = flow_failures(spec, run, played)
    good = [dict(f) for f in spec["flows"] if f["name"] not in failures]
    series, completion = {}, {}
    for f in good:
        start = played["starts"][f["name"]]
        if "size_bytes" in f:
            sent, received = (_sized_report(run, f["name"], role) for role in ("client", "server"))
            series[f["name"]] = transfer.receiver_series(received, start, sent["started_s"])
            completion[f["name"]] = transfer.flow_completion_s(sent, received)
            f["duration_s"] = completion[f["name"]]  # what the goodput windows read: its time on the wire
            continue
        text = (run / store.RAW / f"{f['name']}.server.json").read_text()
        series[f["name"]] = traffic.receiver_series(text, start)
    with open(run / "goodput.csv", "w") as out:
        out.write("time_s,flow,goodput_mbps\n")
        for name, points in series.items():
            for t, mbps in points:
                out.write(f"{t:.3f},{name},{mbps:.3f}\n")
    senders = {f["name"]: traffic.sender_report((run / store.RAW / f"{f['name']}.client.json").read_text(),
                                                played["starts"][f["name"]]) for f in good if f["name"] not in completion}
    store.write_csv(run / "tcp.csv", ({"time_s": round(p.time_s, 3), "flow": name, "retransmits": p.retransmits,
                                       "cwnd_bytes": p.cwnd_bytes, "rtt_ms": round(p.rtt_ms, 3)}
                                      for name, sender in senders.items() for p in sender.intervals),
                    ["time_s", "flow", "retransmits", "cwnd_bytes", "rtt_ms"])
    for f in good:  # a change sets the flow's whole policy: its rate then, None when it sets none or removes it
        f["rate_changes"] = sorted((c["at_s"], None if c["remove"] else c.get("rate_mbps"))
                                   for c in spec["policy_changes"] if c["flow"] == f["name"])
    link_mbps = fab.host_mbps()
    per_host = metrics.host_link_goodput(good, series, link_mbps) if good else {}
    ratios = metrics.link_goodput(per_host)
    summary: dict = {"name": spec["name"], "flows": {}, "failed_flows": failures}
    for f in good:
        if f["name"] in completion:  # its goodput over its whole time, start to last byte
            fct = completion[f["name"]]
            summary["flows"][f["name"]] = {"size_bytes": f["size_bytes"], "fct_s": fct,
                                           "mean_goodput_mbps": mbps_of_bytes(f["size_bytes"], fct)}
            continue
        summary["flows"][f["name"]] = {
            "mean_goodput_mbps": metrics.window_mean(series[f["name"]], f["start_s"] + metrics.SETTLE_S,
                                                     f["start_s"] + f["duration_s"]),
            "retransmits": senders[f["name"]].retransmits}
    windows = {}  # measured intervals, in run time: what a controller outage must not touch
    pri = spec["analysis"].get("priority")
    if pri and pri["high"] in series and pri["low"] in series:
        high, low = by_name(good, pri["high"]), by_name(good, pri["low"])
        overlap = (max(high["start_s"], low["start_s"]), min(high["start_s"] + high["duration_s"],
                                                             low["start_s"] + low["duration_s"]))
        windows["priority"] = overlap
        summary["high_share_while_both"] = metrics.high_share_while_both(series[high["name"]], series[low["name"]],
                                                                         overlap)
        high_end = high["start_s"] + high["duration_s"]
        recovery = summary["low_recovery_s"] = metrics.low_recovery_s(series[low["name"]], high["start_s"], high_end,
                                                                      low["start_s"])
        # the samples low_recovery_s reads after the high flow ends: to the recovery (none: to the low flow's end)
        windows["recovery"] = (high_end, high_end + recovery if recovery is not None
                               else max(high_end, low["start_s"] + low["duration_s"]))
    rl = spec["analysis"].get("rate_limit")
    if rl and rl["flow"] in series:
        flow = by_name(good, rl["flow"])
        limit_at, target = flow["start_s"], flow.get("rate_mbps")
        for c in spec["policy_changes"]:
            if c["flow"] == flow["name"] and "rate_mbps" in c:
                limit_at, target = c["at_s"], c["rate_mbps"]
        later = [c["at_s"] for c in spec["policy_changes"] if c["flow"] == flow["name"] and c["at_s"] > limit_at]
        end = min(later + [flow["start_s"] + flow["duration_s"]])
        windows["rate_limit"] = (limit_at, end)
        summary["rate_limit_target_mbps"] = target
        summary["rate_limit_achieved_mbps"] = metrics.window_mean(series[flow["name"]], limit_at + metrics.SETTLE_S,
                                                                  end)
        summary["rate_limit_mechanism"] = next(
            (p["rate_mechanism"] for p in played.get("policies", []) if p["dst_port"] == played["ports"][flow["name"]]),
            None)
    summary["link_goodput_ratio"] = min(ratios.values()) if ratios else None
    if completion:  # the flow-scheduling figure: mean flow completion time of the sized flows
        summary["mean_fct_s"] = sum(completion.values()) / len(completion)
    reasons = metrics.link_reasons(ratios, spec["fidelity"])
    reasons += [f"flow {name} failed: {fail['error']}" for name, fail in failures.items()]
    summary["policy_changes_delayed"], late = delayed_changes(played.get("changes", []), "flow")
    reasons += late
    judged = []  # an outage counts only where it touched a measured window (or never ended)
    for outage in outages:
        touched = [name for name, window in windows.items() if _overlaps(window, (outage["start_s"], outage["end_s"]))]
        if touched or outage["end_s"] is None:
            judged.append(f"controller outage {outage['start_s']:.1f}-{outage['end_s'] or 'end'} s touched "
                          f"{', '.join(touched) or 'the rest of the run'}")
    summary.update(fidelity_fields(cpu, spec["fidelity"], outages, run / store.RAW, reasons, outage_reasons=judged))
    summary["fidelity"].update(link_goodput_ratios=ratios, host_link_goodput=per_host)
    plots.flow_goodput(series, spec, run / "goodput.png")
    return summary


def by_name(flows: list[dict], name: str) -> dict:
    return next(f for f in flows if f["name"] == name)


def run_spec(spec: dict, out: str | None = None) -> Path:
    """One timetable spec -> one run directory whose summary.json always exists
    (``experiments.platform.run``: a fault still leaves ``completed: false``, the
    error and whatever could be analysed, nothing running, and raises ``RunError``)."""
    return run_workload(spec, out, TimetableWorkload)
