"""The ring's stalls against TCP's timeouts, per same-queue run of 2026-11-30 (#1 and #2
at 18:45-19:27, before the programs kind kept the hosts' TCP counters; #3 to #8 at
01:00-02:01 that night, with them). Same rules as why_bulk_share.py (imported):
the window is the iterations with the bulk flow; a stall is a 0.5 s sample in it in
which neither tbh3 nor tbh4 received IDLE_MBPS. Writes stalls.txt beside itself.

    nice -n 19 .venv/bin/python measurements/programs-2026-11-30/why/stalls.py
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from why_bulk_share import IDLE_MBPS, M, iterations, load_host_bytes, mbps  # noqa: E402

RUNS = {f"#{n}": M / f"programs-2026-11-30/same-queue{'' if n == 1 else f'-{n}'}" for n in (1, 2, 3, 4, 5, 6, 7, 8)}


def analyse(run: Path) -> dict:
    s = json.loads((run / "summary.json").read_text())
    times, hb = load_host_bytes(run)
    bulk = next(p for p in s["programs"] if p["program"] == "bulk")
    rows = iterations(run, s["t0_epoch_s"])[2:]
    withb = [r for r in rows if r["start"] < bulk["end_s"] and r["end"] > bulk["start_s"]]
    w0, w1 = withb[0]["start"], withb[-1]["end"]
    stalled, longest, current = 0.0, 0.0, 0.0
    for i in range(1, len(times)):
        a, b = times[i - 1], times[i]
        if a < w0 or b > w1:
            continue
        r3 = mbps(hb["tbh3"][i][1] - hb["tbh3"][i - 1][1], b - a)
        r4 = mbps(hb["tbh4"][i][1] - hb["tbh4"][i - 1][1], b - a)
        if r3 < IDLE_MBPS and r4 < IDLE_MBPS:
            stalled += b - a
            current += b - a
            longest = max(longest, current)
        else:
            current = 0.0
    q = json.loads((run / "raw/queue_counters.json").read_text())
    tcp_file = run / "raw/tcp_counters.json"
    tcp = json.loads(tcp_file.read_text()) if tcp_file.exists() else None
    return {"window": w1 - w0, "iterations": len(withb), "median": statistics.median(r["iteration_s"] for r in withb),
            "allreduce": statistics.median(r["allreduce_s"] for r in withb) / s["allreduce_ideal_s"],
            "stalled": stalled, "longest": longest, "q2_drops": q["tbx1-eth1"]["2"]["dropped"],
            "idle": s["fidelity"]["cpu_idle_share"], "tcp": tcp}


def main() -> None:
    out = ["stalls.py: the ring's stalls (0.5 s samples, neither tbh3 nor tbh4 receiving "
           f"{IDLE_MBPS:g} Mbit/s) and TCP's timeouts, same-queue runs of 2026-11-30;",
           "  median s and AR/ideal (all-reduce over the ring's ideal): medians over the iterations beside the bulk flow", "",
           f"  {'run':4s} {'window s':>8s} {'iters':>5s} {'median s':>8s} {'AR/ideal':>8s} {'stalled s':>9s} {'longest s':>9s} "
           f"{'q2 drops':>8s} {'CPU idle':>8s}  TCP timeouts / fast retransmits (tbh2: DDP into tbh1; tbh5: bulk)"]
    for label, run in RUNS.items():
        r = analyse(run)
        if r["tcp"] is None:
            tcp = "not recorded"
        else:
            tcp = "; ".join(f"{h} {r['tcp'][h].get('TcpExtTCPTimeouts', 0)} / {r['tcp'][h].get('TcpExtTCPFastRetrans', 0)}"
                            for h in ("tbh2", "tbh5"))
        out.append(f"  {label:4s} {r['window']:8.1f} {r['iterations']:5d} {r['median']:8.2f} {r['allreduce']:8.2f} {r['stalled']:9.1f} "
                   f"{r['longest']:9.1f} {r['q2_drops']:8d} {r['idle']:8.2f}  {tcp}")
    text = "\n".join(out) + "\n"
    (Path(__file__).resolve().parent / "stalls.txt").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
