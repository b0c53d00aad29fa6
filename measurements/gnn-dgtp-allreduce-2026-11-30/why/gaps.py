"""What the slow machines' uplinks wait for when they carry no flow (products ring row,
11-28 vs 11-30, FIFO and OES on both placements).

For each idle gap (no reported flow from the host) on tbh3's and tbh4's uplinks within the
steady window, take the gap's seconds and classify them by what was in flight:
  reply-in: some reported flow INTO that host (a store's reply to its sampler, a
            mini-batch or ring chunk to a worker there) was active at the gap's middle;
  none-in: nothing was flowing into the host (the host waits on compute, a request, or a
           credit from a worker elsewhere).
Also per cell: flows on the slow links that took >= 0.2 s longer than their bytes need at
the link rate while small (< 50 KB: a loss-recovery/RTO signature: an RTO is >= 200 ms),
and the 'stretch' of reply flows into the slow hosts.
Run: python3 gaps.py
"""
import bisect
import csv
import gzip
import json
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # measurements/
DATES = {"11-28": ROOT / "gnn-dgtp-allreduce-2026-11-28/cells", "11-30": ROOT / "gnn-dgtp-allreduce-2026-11-30/cells"}
RATE = {"tbh1": 100e6, "tbh2": 100e6, "tbh3": 20e6, "tbh4": 20e6}


def load(cell):
    with gzip.open(cell / "flows.csv.gz", "rt") as f:
        flows = [r for r in csv.DictReader(f) if r["duration_s"]]
    for r in flows:
        r["a"] = float(r["start_t"])
        r["b"] = r["a"] + float(r["duration_s"])
        r["bytes"] = int(r["bytes"])
    with gzip.open(cell / "events.jsonl.gz", "rt") as f:
        ends = sorted(json.loads(l)["t"] for l in f if '"iteration_end"' in l and '"worker0"' in l)
    return flows, ends[0], ends[-1], len(ends) - 1


def gaps(spans, lo, hi):
    out, end = [], lo
    for a, b in sorted(spans):
        if a > end and a > lo:
            out.append((max(end, lo), min(a, hi)))
        end = max(end, b)
        if end >= hi:
            break
    if end < hi:
        out.append((end, hi))
    return [(a, b) for a, b in out if b > a]


def active(flows, t):
    return [r for r in flows if r["a"] <= t <= r["b"]]


def analyse(cell):
    flows, lo, hi, n = load(cell)
    flows = [r for r in flows if r["src"] != r["dst"]]
    res = {}
    for h in ("tbh3", "tbh4"):
        up = [(r["a"], r["b"]) for r in flows if r["src"] == h]
        into = [r for r in flows if r["dst"] == h]
        cls = defaultdict(float)
        for a, b in gaps(up, lo, hi):
            mid_in = [r for r in into if r["a"] < b and r["b"] > a]  # any overlap with the gap
            if mid_in:
                kinds = {r["phase"].split("-")[0].rstrip("0123456789") if r["phase"] not in ("minibatch",) else "minibatch"
                         for r in mid_in}
                src_slow = any(r["src"] in ("tbh3", "tbh4") for r in mid_in)
                cls["reply-in(slow src)" if src_slow else "reply-in(fast src)"] += b - a
            else:
                cls["none-in"] += b - a
        res[h] = dict(cls)
    # small flows on slow links that took >= 0.2 s more than their bytes need at the link
    slow = []
    for r in flows:
        link = min(RATE[r["src"]], RATE[r["dst"]])
        need = r["bytes"] * 8 / link
        if r["bytes"] < 50_000 and r["b"] - r["a"] - need >= 0.2 and lo <= r["a"] <= hi:
            slow.append(r)
    by_path = defaultdict(int)
    for r in slow:
        by_path[f"{r['src'][-1]}>{r['dst'][-1]}"] += 1
    return res, n, hi - lo, len(slow), dict(by_path)


def main():
    for date, cells in DATES.items():
        for cell in sorted(cells.iterdir()):
            res, n, win, nslow, paths = analyse(cell)
            label = ("DistDGL" if "distdgl" in cell.name else "ETP") + (" OES " if "oes" in cell.name else " FIFO") + \
                " s" + cell.name.split("seed-")[1][0]
            parts = []
            for h, c in res.items():
                parts.append(f"{h}: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(c.items())))
            print(f"{date} {label:16} win {win:6.1f}s | " + " | ".join(parts) + f" | small flows +>=0.2s: {nslow} {paths}")


main()
