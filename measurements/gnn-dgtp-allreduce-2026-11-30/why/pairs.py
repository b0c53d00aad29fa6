"""Bytes per iteration and mean flow duration per (src task -> dst task, phase group) on the
slow machines' links, one cell each placement, 11-28 vs 11-30 FIFO.
Run: python3 pairs.py"""
import csv, gzip
from collections import defaultdict
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]  # measurements/
for date in ("2026-11-28", "2026-11-30"):
    for cell in ("sched-default_seed-1", "sched-default_seed-1_workload.placement-distdgl"):
        with gzip.open(ROOT / f"gnn-dgtp-allreduce-{date}/cells/{cell}/flows.csv.gz", "rt") as f:
            flows = [r for r in csv.DictReader(f) if r["duration_s"] and r["src"] != r["dst"]]
        agg = defaultdict(lambda: [0, 0, 0.0])
        for r in flows:
            ph = r["phase"]
            g = "reply" if ph.startswith("sample") or ph == "feature" else ("eval" if ph.startswith("eval") else ph)
            k = (r["src"], r["dst"], r["src_task"], r["dst_task"], g)
            agg[k][0] += int(r["bytes"]); agg[k][1] += 1; agg[k][2] += float(r["duration_s"])
        print(f"== {date} {cell}")
        for k, (b, n, d) in sorted(agg.items()):
            if "tbh3" in k[:2] or "tbh4" in k[:2]:
                print(f"  {k[0]}>{k[1]} {k[2]:>8}>{k[3]:<8} {k[4]:9} MB/it {b/25/1e6:6.2f}  n {n:4}  mean dur {d/n:6.3f}s  sum dur/it {d/25:5.2f}")
