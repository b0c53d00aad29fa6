"""For each idle gap (no reported flow out) on a slow host's uplink in the steady window:
the flow into that host that ended last before the gap ended (what the host's sampler or
worker waited for: it unblocked the uplink), by its source host and phase, with its
duration and achieved Mbit/s. Sums gap seconds by the unblocking flow's source; counts
unblocking flows slower than 2 Mbit/s (stalled: a tenth of the slow link).
Run: python3 unblock.py"""
import csv, gzip, json
from collections import defaultdict
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]  # measurements/
DATES = {"11-28": ROOT / "gnn-dgtp-allreduce-2026-11-28/cells", "11-30": ROOT / "gnn-dgtp-allreduce-2026-11-30/cells"}

def load(cell):
    with gzip.open(cell / "flows.csv.gz", "rt") as f:
        flows = [r for r in csv.DictReader(f) if r["duration_s"] and r["src"] != r["dst"]]
    for r in flows:
        r["a"] = float(r["start_t"]); r["b"] = r["a"] + float(r["duration_s"]); r["bytes"] = int(r["bytes"])
    with gzip.open(cell / "events.jsonl.gz", "rt") as f:
        ends = sorted(json.loads(l)["t"] for l in f if '"iteration_end"' in l and '"worker0"' in l)
    return flows, ends[0], ends[-1]

def gaps(spans, lo, hi):
    out, end = [], lo
    for a, b in sorted(spans):
        if a > end:
            out.append((end, min(a, hi)))
        end = max(end, b)
        if end >= hi: break
    if end < hi: out.append((end, hi))
    return [(a, b) for a, b in out if b > a and a < hi]

tot = defaultdict(lambda: defaultdict(float))
for date, cells in DATES.items():
    for cell in sorted(cells.iterdir()):
        if "oes" in cell.name: continue
        flows, lo, hi = load(cell)
        label = ("DistDGL" if "distdgl" in cell.name else "ETP") + " FIFO s" + cell.name.split("seed-")[1][0]
        line = []
        for h in ("tbh3", "tbh4"):
            up = [(r["a"], r["b"]) for r in flows if r["src"] == h]
            into = [r for r in flows if r["dst"] == h]
            by = defaultdict(float); stalled = 0; stall_s = 0.0; n = 0
            for a, b in gaps(up, lo, hi):
                cand = [r for r in into if r["b"] <= b + 0.02]
                if not cand: by["?"] += b - a; continue
                r = max(cand, key=lambda r: r["b"])
                if r["b"] < a - 0.02:  # nothing ended inside the gap: compute/credit wait
                    by["none(compute/credit)"] += b - a; continue
                grp = "reply" if r["phase"].startswith(("sample", "feature", "eval")) else r["phase"]
                src = "slow" if r["src"] in ("tbh3", "tbh4") else "fast"
                by[f"{src}-{grp}"] += b - a; n += 1
                mbps = r["bytes"] * 8 / 1e6 / max(r["b"] - r["a"], 1e-6)
                if mbps < 2: stalled += 1; stall_s += b - a
            line.append(f"{h}-up gaps {n}: " + ", ".join(f"{k} {v:.1f}s" for k, v in sorted(by.items())) +
                        f" [unblocker <2Mbit/s: {stalled}, {stall_s:.1f}s]")
            for k, v in by.items(): tot[(date, label[:-3])][k] += v / 3
        print(f"{date} {label:15} " + " | ".join(line))
print()
for k, v in tot.items():
    print(k, {a: round(b, 1) for a, b in sorted(v.items())}, "(mean per cell, both slow uplinks)")
