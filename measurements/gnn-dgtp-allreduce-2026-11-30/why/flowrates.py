"""FIFO cells, 11-28 vs 11-30: achieved rates of the flow classes that cross the slow links,
by path class, mean over seeds: the mini-batches (7.1 MB/it), store replies by path; and the
share of flows that took >= 0.2 s longer than their bytes need at the slower end's rate
(stall signature, an RTO is >= 200 ms). Rates are bytes/duration of the reported flow.
Run: python3 flowrates.py"""
import csv, gzip, statistics as st
from collections import defaultdict
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]  # measurements/
RATE = {"tbh1": 100e6, "tbh2": 100e6, "tbh3": 20e6, "tbh4": 20e6}
res = defaultdict(lambda: defaultdict(list))
for date in ("2026-11-28", "2026-11-30"):
    for cell in sorted((ROOT / f"gnn-dgtp-allreduce-{date}/cells").iterdir()):
        if "oes" in cell.name: continue
        place = "DistDGL" if "distdgl" in cell.name else "ETP"
        with gzip.open(cell / "flows.csv.gz", "rt") as f:
            flows = [r for r in csv.DictReader(f) if r["duration_s"] and r["src"] != r["dst"]]
        per = defaultdict(lambda: [0, 0.0, 0, 0])
        for r in flows:
            s = "slow" if RATE[r["src"]] < 50e6 else "fast"
            d = "slow" if RATE[r["dst"]] < 50e6 else "fast"
            if "slow" not in (s, d): continue
            kind = "minibatch" if r["phase"] == "minibatch" else ("ring" if r["phase"].startswith("ring") else "reply")
            k = f"{kind} {s}->{d}"
            b, dur = int(r["bytes"]), float(r["duration_s"])
            need = b * 8 / min(RATE[r["src"]], RATE[r["dst"]])
            per[k][0] += b; per[k][1] += dur; per[k][2] += 1; per[k][3] += (dur - need >= 0.2)
        for k, (b, dur, n, late) in per.items():
            res[(place, k)][date].append((b * 8 / dur / 1e6, late / n, n))
print(f"{'placement':8} {'class':22} {'11-28 Mbit/s':>14} {'11-30':>8} {'late 11-28':>11} {'11-30':>7}  flows/cell")
for (place, k), by in sorted(res.items()):
    a, b = by.get("2026-11-28", []), by.get("2026-11-30", [])
    f = lambda xs, i: st.fmean(x[i] for x in xs) if xs else float("nan")
    print(f"{place:8} {k:22} {f(a,0):14.2f} {f(b,0):8.2f} {f(a,1):11.1%} {f(b,1):7.1%}  {f(a,2):.0f}/{f(b,2):.0f}")
