"""Seconds each slow machine's uplink (tbh3, tbh4: 20 Mbit/s) carries no reported flow,
per cell, from the run's first flow start to its last flow end (flows.csv[.gz])."""
import csv
import gzip
import sys
from pathlib import Path


def rows(cell: Path):
    path = cell / "flows.csv"
    opener = open if path.exists() else gzip.open
    with opener(path if path.exists() else cell / "flows.csv.gz", "rt") as f:
        return [r for r in csv.DictReader(f) if r["duration_s"]]  # a flow cut off by the run's end has none


def idle(flows, host):
    spans = sorted((float(r["start_t"]), float(r["start_t"]) + float(r["duration_s"])) for r in flows if r["src"] == host)
    window = (min(float(r["start_t"]) for r in flows), max(float(r["start_t"]) + float(r["duration_s"]) for r in flows))
    busy, end = 0.0, window[0]
    for a, b in spans:
        if b > end:
            busy += b - max(a, end)
            end = b
    return window[1] - window[0] - busy, window[1] - window[0]


for cell in sorted(Path("cells").iterdir()):
    flows = rows(cell)
    parts = []
    for host in ("tbh3", "tbh4"):
        gap, span = idle(flows, host)
        parts.append(f"{host} idle {gap:.1f} s of {span:.0f} s ({1 - gap / span:.0%} busy)")
    print(f"{cell.name}: " + "; ".join(parts))
