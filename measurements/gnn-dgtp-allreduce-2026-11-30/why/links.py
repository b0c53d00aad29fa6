"""Per cell of the products ring row (11-28, 11-30): each host link's load, busy/idle
time and delivered rate over the steady window (worker 0's first iteration end to its
last), from flows.csv.gz and events.jsonl.gz; with 11-30's raw counters (switch queue
drops per port, TCP retransmissions and timeouts per sending host).

Adapted from measurements/gnn-dgtp-reddit-allreduce-2026-11-29/why_idle.py (idle = no
reported flow on the link). Run: python3 links.py [--json out.json]
"""
import csv
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # measurements/
DATES = {"11-28": ROOT / "gnn-dgtp-allreduce-2026-11-28/cells", "11-30": ROOT / "gnn-dgtp-allreduce-2026-11-30/cells"}
RATE = {"tbh1": 100e6, "tbh2": 100e6, "tbh3": 20e6, "tbh4": 20e6}
WIRE = 1 + (52 + 14) / (9000 - 52)  # simulated.wire_factor(9000)


def config(name):
    place = "DistDGL" if "distdgl" in name else "ETP"
    pol = "OES" if name.startswith("sched-oes") else "FIFO"
    seed = name.split("seed-")[1][0]
    return place, pol, seed


def load(cell):
    with gzip.open(cell / "flows.csv.gz", "rt") as f:
        flows = [r for r in csv.DictReader(f) if r["duration_s"]]
    with gzip.open(cell / "events.jsonl.gz", "rt") as f:
        events = [json.loads(l) for l in f]
    return flows, events


def union(spans, lo, hi):
    busy, end = 0.0, lo
    for a, b in sorted(spans):
        a, b = max(a, lo), min(b, hi)
        if b > end:
            busy += b - max(a, end)
            end = b
    return busy


def analyse(cell):
    flows, events = load(cell)
    ends = sorted(e["t"] for e in events if e["kind"] == "iteration_end" and e["task"] == "worker0")
    lo, hi = ends[0], ends[-1]
    n = len(ends) - 1
    summary = json.loads((cell / "summary.json").read_text())
    out = {"cell": cell.name, "date": cell.parent.parent.name[-10:], "iters": n, "window_s": hi - lo,
           "iter_s": (hi - lo) / n, "iteration_s_mean": summary["iteration_s_mean"],
           "model_s": summary["predicted_iteration_s"], "placement": summary["task_placement"], "links": {}}
    for h in RATE:
        for d, key in (("up", "src"), ("down", "dst")):
            mine = [r for r in flows if r[key] == h and r["src"] != r["dst"]]
            spans = [(float(r["start_t"]), float(r["start_t"]) + float(r["duration_s"])) for r in mine]
            busy = union(spans, lo, hi)
            # bytes in the window, pro rata for flows crossing its edges
            nbytes = 0.0
            for r, (a, b) in zip(mine, spans):
                inside = max(0.0, min(b, hi) - max(a, lo))
                nbytes += int(r["bytes"]) * (inside / (b - a) if b > a else float(lo <= a <= hi))
            need = nbytes * WIRE * 8 / RATE[h]  # seconds the link needs at its rate
            out["links"][f"{h}-{d}"] = {"busy_s": busy, "idle_s": hi - lo - busy, "need_s": need,
                                        "need_per_iter_s": need / n, "util": need / (hi - lo),
                                        "rate_when_busy": need / busy if busy else None}
    raw = cell / "raw"
    if raw.exists():
        q = json.loads((raw / "queue_counters.json").read_text())
        tcp = json.loads((raw / "tcp_counters.json").read_text())
        port = {f"tbx1-eth{i}": f"tbh{i}" for i in range(1, 5)}
        out["queue"] = {port[p]: {"drops": sum(v["dropped"] for v in qs.values()),
                                  "pkts": sum(v["packets"] for v in qs.values())} for p, qs in q.items()}
        out["tcp"] = {h: {"out": t["TcpOutSegs"], "retrans": t["TcpRetransSegs"], "rto": t["TcpExtTCPTimeouts"],
                          "sack_rec": t["TcpExtTCPSackRecovery"], "tlp": t["TcpExtTCPLossProbes"]}
                      for h, t in tcp.items()}
    return out


def main():
    rows = []
    for date, cells in DATES.items():
        for cell in sorted(cells.iterdir()):
            r = analyse(cell)
            r["date"] = date
            r["place"], r["pol"], r["seed"] = config(cell.name)
            rows.append(r)
    rows.sort(key=lambda r: (r["place"], r["pol"], r["date"], r["seed"]))
    print("date  place   pol  seed iter_s model  over | " + " | ".join(
        f"{l}: need/it idle util vbusy" for l in ("tbh3-up", "tbh4-up", "tbh3-down", "tbh4-down", "tbh1-up", "tbh2-up")))
    for r in rows:
        L = r["links"]
        cols = []
        for l in ("tbh3-up", "tbh4-up", "tbh3-down", "tbh4-down", "tbh1-up", "tbh2-up"):
            x = L[l]
            cols.append(f"{x['need_per_iter_s']:.2f} {x['idle_s']:5.1f} {x['util']:.2f} "
                        f"{(x['rate_when_busy'] or 0):.2f}")
        print(f"{r['date']} {r['place']:7} {r['pol']:4} {r['seed']}  {r['iteration_s_mean']:.3f} {r['model_s']:.3f} "
              f"{r['iteration_s_mean'] / r['model_s'] - 1:+.3f} | " + " | ".join(cols))
    print()
    print("11-30 raw counters: switch egress queue drops/pkts per port (toward host) | TCP retrans/out, RTOs per sender")
    for r in rows:
        if "queue" not in r:
            continue
        q = " ".join(f"{h[-1]}:{v['drops']}/{v['pkts']}({v['drops'] / max(v['pkts'], 1):.1%})" for h, v in r["queue"].items())
        t = " ".join(f"{h[-1]}:{v['retrans'] / v['out']:.1%},rto{v['rto']}" for h, v in r["tcp"].items())
        print(f"{r['place']:7} {r['pol']:4} {r['seed']} | {q} | {t}")
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(rows, indent=1))


main()
