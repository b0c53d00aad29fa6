"""Per cell, the kept sweep's numbers (the plain-Python filling) against a re-run
with the compiled one: python compare_cells.py KEPT/results.csv NEW/results.csv"""
import csv
import statistics
import sys
from collections import defaultdict


def rows(path):
    with open(path) as f:
        return {r["cell"]: r for r in csv.DictReader(f) if r["completed"] == "true"}


kept, new = rows(sys.argv[1]), rows(sys.argv[2])
cells = sorted(set(kept) & set(new))
print(f"cells in both: {len(cells)}")
diff = defaultdict(list)
for c in cells:
    k, n = float(kept[c]["avg_sct_s"]), float(new[c]["avg_sct_s"])
    diff[kept[c]["scheduler"]].append(n / k - 1)
print("avg SCT, re-run over kept - 1, per cell:")
for s, d in diff.items():
    same = sum(1 for x in d if x == 0)
    print(f"  {s:16} cells {len(d):3}  identical {same:3}  median |diff| {statistics.median(abs(x) for x in d):.2%}"
          f"  max |diff| {max(abs(x) for x in d):.2%}")
# Fig. 14's table: each scheduler's mean SCT over 3 seeds, over FS's
print("mean avg SCT over FS's (3 seeds), kept -> re-run:")
for table, name in ((kept, "kept"), (new, "re-run")):
    means = defaultdict(list)
    for c in cells:
        r = table[c]
        means[(float(r["workload.arrivals.workload_factor"]), r["scheduler"])].append(float(r["avg_sct_s"]))
    out = []
    for (w, s), v in sorted(means.items()):
        if s != "fs":
            out.append(f"{w}x {s} {statistics.fmean(v) / statistics.fmean(means[(w, 'fs')]) - 1:+.1%}")
    print(f"  {name}: " + "; ".join(out))
