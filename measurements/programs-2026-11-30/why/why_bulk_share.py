"""Why the iperf3 bulk flow tbh5 -> tbh1 took more of tbh1's downlink on 2026-11-30
than on 2026-11-24 when it shared queue 2 with PyTorch DDP's gloo ring
(programs-2026-11-24/same-queue against programs-2026-11-30/same-queue{,-2}).

Reads only the runs' files (summary.json, spec.yaml, raw/host_bytes.csv,
raw/queue_counters.json, raw/switch_packets.json, raw/programs/*) and writes
why_bulk_share.txt beside itself. Stdlib only; a few hundred KB of CSV.

    nice -n 19 .venv/bin/python measurements/programs-2026-11-30/why/why_bulk_share.py
"""
from __future__ import annotations

import csv
import json
import re
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
M = REPO / "measurements"
RUNS = {  # label: (same-queue run, the same day's lower-queue run: the bulk flow in queue 6)
    "11-24": (M / "programs-2026-11-24/same-queue", M / "programs-2026-11-24/lower-queue"),
    "11-30 #1": (M / "programs-2026-11-30/same-queue", M / "programs-2026-11-30/lower-queue"),
    "11-30 #2": (M / "programs-2026-11-30/same-queue-2", M / "programs-2026-11-30/lower-queue-2"),
}
LINK_MBPS = 100.0
FRAME = 9014          # bytes of a full frame as the host interface counts it (MTU 9000 + 14)
MSS = 8948            # iperf3's Cwnd is in bytes of MSS-sized segments
IDLE_MBPS = 1.0       # a 0.5 s sample in which neither tbh3 nor tbh4 received this much: ring not moving
HOSTS = ["tbh1", "tbh2", "tbh3", "tbh4", "tbh5"]

out: list[str] = []


def say(line: str = "") -> None:
    out.append(line)


def mbps(nbytes: float, seconds: float) -> float:
    return nbytes * 8 / seconds / 1e6 if seconds > 0 else float("nan")


def load_host_bytes(run: Path) -> tuple[list[float], dict[str, list[tuple[int, int]]]]:
    rows = defaultdict(dict)
    with open(run / "raw/host_bytes.csv", newline="") as f:
        for r in csv.DictReader(f):
            rows[float(r["time_s"])][r["host"]] = (int(r["sent_bytes"]), int(r["received_bytes"]))
    times = sorted(t for t in rows if len(rows[t]) == len(HOSTS))
    return times, {h: [rows[t][h] for t in times] for h in HOSTS}


def at(times: list[float], series: list[tuple[int, int]], t: float, k: int) -> float:
    """Counter k (0 sent, 1 received) at time t, linearly interpolated between samples."""
    if t <= times[0]:
        return series[0][k]
    for i in range(1, len(times)):
        if times[i] >= t:
            a, b = times[i - 1], times[i]
            return series[i - 1][k] + (series[i][k] - series[i - 1][k]) * (t - a) / (b - a)
    return series[-1][k]


def iterations(run: Path, t0: float) -> list[dict]:
    rows = []
    with open(run / "raw/programs/ddp/0/iterations.csv", newline="") as f:
        for r in csv.DictReader(f):
            d = {k: float(v) for k, v in r.items()}
            d["start"] = d["start_epoch_s"] - t0
            d["end"] = d["start"] + d["iteration_s"]
            rows.append(d)
    return rows


def iperf_intervals(path: Path) -> tuple[list[dict], dict | None]:
    """The per-second lines of an iperf3 text report, and its closing sender line."""
    unit = {"Bytes": 1, "KBytes": 1024, "MBytes": 1024 ** 2, "GBytes": 1024 ** 3}
    pat = re.compile(r"\]\s+([\d.]+)-([\d.]+)\s+sec\s+([\d.]+) (\w+)\s+([\d.]+) (\w)bits/sec(.*)")
    lines, total, seen = [], None, set()
    for line in path.read_text().splitlines():
        m = pat.search(line)
        if not m:
            continue
        a, b = float(m[1]), float(m[2])
        rest = m[7].split()
        d = {"a": a, "b": b, "bytes": float(m[3]) * unit[m[4]], "mbps": float(m[5]) * (1000 if m[6] == "G" else 1)}
        if rest and rest[0].isdigit():
            d["retr"] = int(rest[0])
        if len(rest) >= 3 and rest[2] in unit:
            d["cwnd_pkts"] = float(rest[1]) * unit[rest[2]] / MSS
        if "sender" in rest or "receiver" in rest:
            if "sender" in rest:
                total = d
            continue
        if (a, b) in seen:  # iperf3 printed the last interval twice when stopped
            continue
        seen.add((a, b))
        lines.append(d)
    return lines, total


def ring_direction(times, hb, t_from, t_to) -> dict[str, str]:
    """For each DDP host, the host whose received rate follows its sent rate most closely
    over the 0.5 s samples in [t_from, t_to] (tbh1's received less tbh5's sent: the
    bulk flow also arrives there)."""
    ddp = HOSTS[:4]
    best = {}
    for s in ddp:
        scores = {}
        for r in ddp:
            if r == s:
                continue
            err = []
            for i in range(1, len(times)):
                if not t_from <= times[i] <= t_to:
                    continue
                dt = times[i] - times[i - 1]
                sent = mbps(hb[s][i][0] - hb[s][i - 1][0], dt)
                recv = mbps(hb[r][i][1] - hb[r][i - 1][1], dt)
                if r == "tbh1":
                    recv -= mbps(hb["tbh5"][i][0] - hb["tbh5"][i - 1][0], dt)
                err.append(abs(sent - recv))
            scores[r] = statistics.mean(err)
        r = min(scores, key=scores.get)
        best[s] = f"{r} (mean |sent - received| {scores[r]:.1f} Mbit/s; next {sorted(scores.values())[1]:.1f})"
    return best


def analyse(label: str, run: Path, lower: Path) -> dict:
    s = json.loads((run / "summary.json").read_text())
    spec = (run / "spec.yaml").read_text()
    t0 = s["t0_epoch_s"]
    times, hb = load_host_bytes(run)
    bulk = next(p for p in s["programs"] if p["program"] == "bulk")
    b0, b1 = bulk["start_s"], bulk["end_s"]
    ddp_end = max(p["end_s"] for p in s["programs"] if p["program"] == "ddp")
    rows = iterations(run, t0)
    measured = rows[2:]
    alone = [r for r in measured if not (r["start"] < b1 and r["end"] > b0)]
    withb = [r for r in measured if r["start"] < b1 and r["end"] > b0]
    w0, w1 = withb[0]["start"], withb[-1]["end"]         # the iterations with the bulk flow
    nbytes = rows[0]["allreduce_bytes"]
    ring_bytes = 2 * 3 / 4 * nbytes                        # what each ring link carries per all-reduce
    ideal = ring_bytes * 8 / (LINK_MBPS * 1e6)

    def delta(h, k, a, b):
        return at(times, hb[h], b, k) - at(times, hb[h], a, k)

    res = {"label": label, "run": run.relative_to(REPO).as_posix(), "wall": times[-1] - times[0],
           "bulk_span": (b0, b1), "ddp_end": ddp_end, "ideal": ideal, "ring_bytes": ring_bytes,
           "congestion": re.search(r"^tcp_congestion: (\w+)", spec, re.M)[1],
           "iperf_cmd": re.search(r"command: (iperf3 -c .*)", spec)[1]}
    # queue 2's bfifo limit: the spec's switch_buffer_bytes (11-30); 11-24's spec predates the
    # field, and LEAF_LIMIT_BYTES was 150_000 then too (git show c9f4f90:topologies/queues.py)
    m = re.search(r"switch_buffer_bytes: (\d+)", spec)
    res["queue_bytes"] = int(m[1]) if m else 150_000
    # 1. the bulk flow's rate: over the run (the README's number) and while it ran
    res["bulk_run_avg"] = s["host_mbps"]["tbh5"]["sent"]
    res["bulk_active"] = mbps(delta("tbh5", 0, b0, b1), b1 - b0)
    res["bulk_active_share_of_run"] = (b1 - b0) / res["wall"]
    cli, cli_total = iperf_intervals(run / "raw/programs/bulk/0/stdout.txt")
    srv, _ = iperf_intervals(run / "raw/programs/bulk-server/0/stdout.txt")
    res["iperf_total"] = cli_total
    res["srv_goodput"] = mbps(sum(d["bytes"] for d in srv), srv[-1]["b"]) if srv else None
    # 2. tbh1's downlink over the iterations with the bulk flow: who carried what
    T = w1 - w0
    res["W"] = (w0, w1)
    res["tbh1_rx"] = mbps(delta("tbh1", 1, w0, w1), T)
    res["bulk_wire_W"] = mbps(delta("tbh5", 0, w0, w1), T)
    res["ring_W"] = mbps(delta("tbh3", 1, w0, w1), T)   # tbh4 -> tbh3: the ring's progress
    res["tbh2_tx_W"] = mbps(delta("tbh2", 0, w0, w1), T)
    # 3. losses: queue 2 of tbh1's port, the bulk flow's retransmissions, the DDP flow's
    q = json.loads((run / "raw/queue_counters.json").read_text())
    res["q2_drops"] = q["tbx1-eth1"]["2"]["dropped"]
    res["other_drops"] = sum(c["dropped"] for p, v in q.items() for k, c in v.items()) - res["q2_drops"]
    sp = json.loads((run / "raw/switch_packets.json").read_text())["tbx1"]
    res["switch_internal"] = sp["received"] - sp["transmitted"] - sum(
        c["dropped"] for v in q.values() for c in v.values())
    res["bulk_retr"] = cli_total["retr"] if cli_total else sum(d.get("retr", 0) for d in cli)
    res["bulk_frames"] = delta("tbh5", 0, b0, b1) / FRAME
    # the DDP sender into tbh1 re-sends what it lost: its sent bytes over tbh3's (the same
    # ring bytes, on a link that loses nothing), over the iterations with the bulk flow,
    # less the same difference over as long before the bulk flow (a constant offset)
    def extra(a, b):
        return (at(times, hb["tbh2"], b, 0) - at(times, hb["tbh3"], b, 0)) - (
            at(times, hb["tbh2"], a, 0) - at(times, hb["tbh3"], a, 0))
    res["ddp_extra_bytes"] = extra(w0, w1)
    res["ddp_extra_before"] = extra(times[0] + 5, w0)
    res["ddp_retr_frames"] = res["ddp_extra_bytes"] / FRAME
    res["ddp_frames"] = delta("tbh2", 0, w0, w1) / FRAME
    res["ddp_loss"] = res["ddp_retr_frames"] / res["ddp_frames"]
    res["bulk_loss"] = res["bulk_retr"] / res["bulk_frames"]
    lq = json.loads((lower / "raw/queue_counters.json").read_text())
    res["lower_q2_drops"] = lq["tbx1-eth1"]["2"]["dropped"]
    # 4. the ring's stalls: 0.5 s samples inside W where neither tbh3 nor tbh4 received anything
    idle, moving = [], []
    for i in range(1, len(times)):
        a, b = times[i - 1], times[i]
        if a < w0 or b > w1:
            continue
        dt = b - a
        r3 = mbps(hb["tbh3"][i][1] - hb["tbh3"][i - 1][1], dt)
        r4 = mbps(hb["tbh4"][i][1] - hb["tbh4"][i - 1][1], dt)
        sample = {"a": a, "b": b, "dt": dt, "ring": r3,
                  "bulk": mbps(hb["tbh5"][i][0] - hb["tbh5"][i - 1][0], dt),
                  "tbh2": mbps(hb["tbh2"][i][0] - hb["tbh2"][i - 1][0], dt),
                  "tbh1_rx": mbps(hb["tbh1"][i][1] - hb["tbh1"][i - 1][1], dt)}
        (idle if r3 < IDLE_MBPS and r4 < IDLE_MBPS else moving).append(sample)
    stretches = []
    for smp in sorted(idle, key=lambda x: x["a"]):
        if stretches and abs(stretches[-1][1] - smp["a"]) < 1e-6:
            stretches[-1][1] = smp["b"]
        else:
            stretches.append([smp["a"], smp["b"]])
    res["idle_s"] = sum(x["dt"] for x in idle)
    res["moving_s"] = sum(x["dt"] for x in moving)
    res["stretches"] = [(a, b) for a, b in stretches]
    res["long_stalls"] = [(a, b) for a, b in stretches if b - a >= 1.0 - 1e-6]
    # inside the stalls: the 0.5 s samples in which tbh2 sent at most 2 frames (a lone
    # retransmission), and the times of those that carried any
    res["quiet_s"] = sum(x["dt"] for x in idle if x["tbh2"] * x["dt"] * 1e6 / 8 <= 2 * FRAME + 1)
    res["lone_sends"] = []
    for a, b in res["long_stalls"]:
        sends = []  # (sample end, frames tbh2 sent in it), through the first sample after the stall
        for i in range(1, len(times)):
            if a < times[i] <= b + 0.5 + 1e-6:
                nb = hb["tbh2"][i][0] - hb["tbh2"][i - 1][0]
                if nb > 0:
                    sends.append((round(times[i], 1), round(nb / FRAME)))
        res["lone_sends"].append(((a, b), sends))
    # each iteration with the bulk flow: the bulk's and the ring's rate over it, its stalled time
    res["per_iter"] = []
    for r in withb:
        a, b = r["start"], r["end"]
        st = sum(max(0.0, min(b, x["b"]) - max(a, x["a"])) for x in idle)
        res["per_iter"].append((int(r["iteration"]), a, r["iteration_s"], mbps(delta("tbh5", 0, a, b), b - a),
                                mbps(delta("tbh3", 1, a, b), b - a), st))
    # the time between all-reduces on rank 0 (compute, barrier, loop): the DDP connections' idle
    gaps = [rows[i + 1]["start"] - rows[i]["start"] - rows[i]["allreduce_s"]
            for i in range(len(rows) - 1) if rows[i] in withb]
    res["gap_mean"], res["gap_max"] = statistics.mean(gaps), max(gaps)

    def wmean(xs, key):
        return sum(x[key] * x["dt"] for x in xs) / sum(x["dt"] for x in xs) if xs else float("nan")
    res["bulk_idle"], res["bulk_moving"] = wmean(idle, "bulk"), wmean(moving, "bulk")
    res["ring_moving"] = wmean(moving, "ring")
    res["tbh2_idle"], res["tbh2_moving"] = wmean(idle, "tbh2"), wmean(moving, "tbh2")
    res["tbh1rx_idle"] = wmean(idle, "tbh1_rx")
    # 5. iterations against the fair-share model
    res["alone_med"] = statistics.median(r["iteration_s"] for r in alone)
    res["with"] = [r["iteration_s"] for r in withb]
    res["with_med"] = statistics.median(res["with"])
    res["with_mean"] = statistics.mean(res["with"])
    res["overhead_mean"] = statistics.mean(r["compute_s"] + r["sync_s"] for r in withb)
    res["model"] = res["overhead_mean"] + 2 * ideal
    res["long_iters"] = [round(r["iteration_s"], 2) for r in withb if r["iteration_s"] > 2 * res["model"]]
    res["short_med"] = statistics.median([x for x in res["with"] if x <= 2 * res["model"]])
    # iperf's own view of the two regimes: seconds with the bulk near the line rate and 0-1 retransmits
    res["iperf_full_s"] = sum(1 for d in cli if d["mbps"] >= 95 and d.get("retr", 1) == 0)
    res["iperf_retr_per_s"] = res["bulk_retr"] / (cli[-1]["b"] if cli else float("nan"))
    res["cwnd_med"] = statistics.median(d["cwnd_pkts"] for d in cli if "cwnd_pkts" in d)
    full = [d["cwnd_pkts"] for d in cli if "cwnd_pkts" in d and d["mbps"] >= 95]
    shared = [d["cwnd_pkts"] for d in cli if "cwnd_pkts" in d and d["mbps"] < 95]
    res["cwnd_full"] = (statistics.median(full) if full else float("nan"), len(full))
    res["cwnd_shared"] = (statistics.median(shared) if shared else float("nan"), len(shared))
    res["retr_full"] = sum(d.get("retr", 0) for d in cli if d["mbps"] >= 95)
    res["direction"] = ring_direction(times, hb, b0, ddp_end)
    return res


def main() -> None:
    runs = [analyse(k, *v) for k, v in RUNS.items()]
    grep = subprocess.run(["git", "grep", "-n", "-i", "slow_start_after_idle", "--", "*.py"],
                          cwd=REPO, capture_output=True, text=True).stdout.strip()
    say("why_bulk_share.py: the bulk flow tbh5 -> tbh1 in DDP's queue 2, 11-24 against 11-30 (x2)")
    say(f"runs: {', '.join(r['run'] for r in runs)}")
    say()
    say("== 0. Congestion control (spec.yaml; topologies/queues.py host_route_cmds sets the")
    say("   spec's tcp_congestion as congctl on every host's route, so gloo's sockets use it)")
    for r in runs:
        say(f"  {r['label']:9s} tcp_congestion: {r['congestion']}   bulk: {r['iperf_cmd']}")
    say("  tcp_slow_start_after_idle set anywhere in the repo's .py: "
        + ("yes:\n    " + grep.replace("\n", "\n    ") if grep else "no (the namespaces keep the kernel's default)"))
    say()
    say("== 1. Which DDP host sends into tbh1 (its sent rate matched to another host's received")
    say("   rate over the 0.5 s samples while the bulk flow ran)")
    for r in runs:
        say(f"  {r['label']:9s} " + "; ".join(f"{s} -> {d}" for s, d in r["direction"].items()))
    say("  (11-24: tbh1, tbh3 and tbh4 are matched within 0.5 Mbit/s, so tbh2's peer is tbh1 by elimination;")
    say("  its direct match is blurred there because 13% of what tbh5 sent never reached tbh1)")
    say()
    say("== 2. The bulk flow's rate, Mbit/s")
    say(f"  {'run':9s} {'run-avg':>8s} {'wall s':>7s} {'bulk on s':>9s} {'on/wall':>7s} {'while on':>8s} "
        f"{'iperf goodput':>13s} {'iperf retr':>10s} {'retr/s':>6s} {'cwnd pkts (med)':>15s}")
    for r in runs:
        b0, b1 = r["bulk_span"]
        it = r["iperf_total"]
        say(f"  {r['label']:9s} {r['bulk_run_avg']:8.1f} {r['wall']:7.1f} {b1 - b0:9.1f} "
            f"{r['bulk_active_share_of_run']:7.2f} {r['bulk_active']:8.1f} {it['mbps']:13.1f} "
            f"{r['bulk_retr']:10d} {r['iperf_retr_per_s']:6.1f} {r['cwnd_med']:15.1f}")
    say("  run-avg: summary.json host_mbps (tbh5 sent over the whole run, 40 s of it before the bulk")
    say("  started); while on: tbh5's sent bytes over the bulk flow's own span (host_bytes.csv).")
    say()
    say("== 3. tbh1's downlink over the iterations with the bulk flow (first start to last end)")
    say(f"  {'run':9s} {'window s':>9s} {'tbh1 rx':>7s} {'bulk sent':>9s} {'ring (tbh3 rx)':>14s} {'tbh2 sent':>9s}")
    for r in runs:
        w0, w1 = r["W"]
        say(f"  {r['label']:9s} {w1 - w0:9.1f} {r['tbh1_rx']:7.1f} {r['bulk_wire_W']:9.1f} {r['ring_W']:14.1f} "
            f"{r['tbh2_tx_W']:9.1f}")
    say("  ring: what tbh4 -> tbh3 carried, the ring's progress (every ring link carries the same bytes).")
    say()
    say("== 4. Losses")
    say(f"  {'run':9s} {'q2 drops':>8s} {'other q':>7s} {'in switch':>9s} {'bulk retr':>9s} {'bulk loss':>9s} "
        f"{'DDP re-sent frames':>18s} {'DDP loss':>8s} {'sum/drops':>9s} {'lower-q run q2':>14s}")
    for r in runs:
        say(f"  {r['label']:9s} {r['q2_drops']:8d} {r['other_drops']:7d} {r['switch_internal']:9d} "
            f"{r['bulk_retr']:9d} {r['bulk_loss']:9.3f} {r['ddp_retr_frames']:18.0f} {r['ddp_loss']:8.3f} "
            f"{(r['bulk_retr'] + r['ddp_retr_frames']) / r['q2_drops']:9.2f} {r['lower_q2_drops']:14d}")
    say("  bulk loss: iperf3's retransmits over tbh5's frames sent while on; DDP re-sent frames: tbh2's")
    say("  sent bytes less tbh3's over the window, less that difference before it, / 9014 B;")
    for r in runs:
        say(f"    ({r['label']}: that difference before the window {r['ddp_extra_before'] / 1e6:.2f} MB, "
            f"in it {r['ddp_extra_bytes'] / 1e6:.1f} MB)")
    say("  in switch: received - transmitted - every queue drop (switch_packets.json; 11-30's small")
    say("  negatives are the counters read at slightly different moments: summary.json says 0).")
    for r in runs:
        lost = r["q2_drops"] + max(r["switch_internal"], 0)
        say(f"  {r['label']:9s} re-sent (bulk + DDP) {r['bulk_retr'] + r['ddp_retr_frames']:.0f} against lost "
            f"(q2 + in switch) {lost}: {(r['bulk_retr'] + r['ddp_retr_frames']) / lost:.3f}; bulk's part "
            f"{r['bulk_retr'] / (r['bulk_retr'] + r['ddp_retr_frames']):.2f}, DDP's "
            f"{r['ddp_retr_frames'] / (r['bulk_retr'] + r['ddp_retr_frames']):.2f}")
    say()
    say(f"== 5. The ring's stalls: 0.5 s samples in the window with tbh3 and tbh4 each receiving < {IDLE_MBPS:g} Mbit/s")
    say(f"  {'run':9s} {'stalled s':>9s} {'of window':>9s} {'>=1 s stalls':>12s} {'bulk stalled':>12s} "
        f"{'bulk moving':>11s} {'ring moving':>11s} {'tbh2 sent stalled':>17s} {'tbh1 rx stalled':>15s}")
    for r in runs:
        w0, w1 = r["W"]
        say(f"  {r['label']:9s} {r['idle_s']:9.1f} {r['idle_s'] / (w1 - w0):9.2f} {len(r['long_stalls']):12d} "
            f"{r['bulk_idle']:12.1f} {r['bulk_moving']:11.1f} {r['ring_moving']:11.1f} {r['tbh2_idle']:17.1f} "
            f"{r['tbh1rx_idle']:15.1f}")
    for r in runs:
        say(f"  {r['label']}: stalls >= 1 s (run time, s): "
            + (", ".join(f"{a:.1f}-{b:.1f}" for a, b in r["long_stalls"]) or "none"))
    say(f"  iperf3 seconds at >= 95 Mbit/s with 0 retransmits: "
        + ", ".join(f"{r['label']} {r['iperf_full_s']}" for r in runs))
    for r in runs:
        say(f"  {r['label']}: iperf3 cwnd (median, frames of {MSS} B) in its seconds >= 95 Mbit/s "
            f"{r['cwnd_full'][0]:.1f} (n={r['cwnd_full'][1]}, {r['retr_full']} retransmits in them), "
            f"below {r['cwnd_shared'][0]:.1f} (n={r['cwnd_shared'][1]})")
    say("  stalled samples in which tbh2 sent at most 2 frames (a lone retransmission or nothing): "
        + ", ".join(f"{r['label']} {r['quiet_s']:.1f} s" for r in runs))
    for r in runs:
        for (a, b), sends in r["lone_sends"]:
            if b - a >= 3:
                say(f"  {r['label']} stall {a:.1f}-{b:.1f}: (sample end s, frames tbh2 sent) where it sent any, "
                    f"through the next sample: {sends}")
    say()
    say("== 6. Iterations against the fair-share model")
    say("  model: compute + barrier (mean of the run's iterations with the bulk flow) + 2 x the ring's")
    say(f"  ideal ({runs[0]['ideal']:.3f} s at 100 Mbit/s, so {2 * runs[0]['ideal']:.3f} s at a fair 50)")
    say(f"  {'run':9s} {'alone med':>9s} {'with med':>8s} {'with mean':>9s} {'n':>3s} {'model':>6s} "
        f"{'med/model':>9s} {'mean/model':>10s} {'med w/o >2x model':>17s}  iterations > 2x model (s)")
    for r in runs:
        say(f"  {r['label']:9s} {r['alone_med']:9.2f} {r['with_med']:8.2f} {r['with_mean']:9.2f} {len(r['with']):3d} "
            f"{r['model']:6.2f} {r['with_med'] / r['model']:9.2f} {r['with_mean'] / r['model']:10.2f} "
            f"{r['short_med']:17.2f}  {r['long_iters']}")
    say("  time between all-reduces on rank 0 (compute, barrier, loop; the DDP connections' idle), s: "
        + ", ".join(f"{r['label']} mean {r['gap_mean']:.3f} max {r['gap_max']:.3f}" for r in runs))
    say("  decomposition of the mean iteration: stalled time per iteration + the rest, where the ring")
    say("  moved at the 'ring moving' rate of section 5 (50 Mbit/s would be the fair share)")
    for r in runs:
        n = len(r["with"])
        stall = r["idle_s"] / n
        rest = r["with_mean"] - stall
        say(f"  {r['label']:9s} mean {r['with_mean']:.2f} s = stalled {stall:.2f} + moving/other {rest:.2f}; "
            f"at the moving rate the ring would take {r['ring_bytes'] * 8 / (r['ring_moving'] * 1e6):.2f} s "
            f"+ {r['overhead_mean']:.2f} compute/barrier")
    say("  a second simple model, for the moving phases: a window-limited flow in a full drop-tail queue")
    say("  sends cwnd / RTT; with RTT ~ the delay of a full queue 2 (its bfifo limit at 100 Mbit/s; the base")
    say("  RTT left out: not measured here), the bulk's median cwnd in its seconds below 95 Mbit/s gives")
    for r in runs:
        qdelay = r["queue_bytes"] * 8 / (LINK_MBPS * 1e6)
        pred = r["cwnd_shared"][0] * FRAME * 8 / qdelay / 1e6
        say(f"  {r['label']:9s} queue {r['queue_bytes']} B = {qdelay * 1e3:.1f} ms ({r['queue_bytes'] / FRAME:.1f} frames)")
        say(f"  {r['label']:9s} cwnd {r['cwnd_shared'][0]:.1f} frames -> {pred:.1f} Mbit/s; measured while the ring moved: "
            f"bulk sent {r['bulk_moving']:.1f}, x (1 - bulk loss {r['bulk_loss']:.3f}) = "
            f"{r['bulk_moving'] * (1 - r['bulk_loss']):.1f} delivered; ring {r['ring_moving']:.1f}")
    say()
    say("== 7. Each iteration with the bulk flow: start (run s), length, bulk sent and ring rate over it")
    say("   (Mbit/s), seconds of it with the ring stalled")
    for r in runs:
        say(f"  {r['label']}:")
        for it, a, d, bulk, ring, st in r["per_iter"]:
            say(f"    it {it:2d} at {a:6.1f}  {d:6.2f} s  bulk {bulk:5.1f}  ring {ring:5.1f}  stalled {st:4.1f}")
    (HERE / "why_bulk_share.txt").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
