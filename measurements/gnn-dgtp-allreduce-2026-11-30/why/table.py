"""The supporting table: per FIFO cell and mean per (placement, date): iteration vs model,
the bottleneck links' utilisation in the model and on the fabric (from model_*.txt, written
by model_links.py), their idle seconds and rate while a flow was on them (fabric), and the
loss counters (11-28: only switch_loss_share = losses inside OVS besides its queues;
11-30: raw queue drops at the slow ports, TCP re-sent share and RTOs by sender class).
Run: python3 table.py"""
import json, re, statistics as st
from collections import defaultdict
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]  # measurements/
txt = "".join(Path(p).read_text() for p in ("model_etp_fifo_s1_1130.txt", "model_etp_fifo.txt", "model_distdgl_fifo.txt"))
cells = {}
for block in re.split(r"\n(?=2026-)", txt.strip()):
    head, *lines = block.splitlines()
    date, cell = head.split(":")[0].split()
    L = {}
    for l in lines:
        m = re.match(r"\s+(\S+)\s+need/it ([\d.]+)\|([\d.]+)\s+idle s\s+([\d.]+)\|\s*([\d.]+) of (\d+)\|(\d+)\s+util ([\d.]+)\|([\d.]+)\s+rate-when-busy ([\d.]+)\|([\d.]+)", l)
        k, *v = m.groups(); L[k] = list(map(float, v))
    cells[(date, cell)] = L
BOTTLE = {"ETP": ("tbh3-up", "tbh4-up"), "DistDGL": ("tbh3-down", "tbh4-up")}
rows = defaultdict(list)
print("date  placement seed  iter  model  over | bottleneck: util model/fabric, idle s, rate-when-busy (fabric) | losses")
for (date, cell), L in sorted(cells.items(), key=lambda x: ("distdgl" in x[0][1], x[0][0], x[0][1])):
    place = "DistDGL" if "distdgl" in cell else "ETP"
    d = ROOT / f"gnn-dgtp-allreduce-{date}/cells/{cell}"
    s = json.loads((d / "summary.json").read_text())
    over = s["iteration_s_mean"] / s["predicted_iteration_s"] - 1
    parts, r = [], {"iter": s["iteration_s_mean"], "model": s["predicted_iteration_s"], "over": over}
    for k in BOTTLE[place]:
        v = L[k]
        parts.append(f"{k} {v[6]:.3f}/{v[7]:.3f} idle {v[2]:.1f}|{v[3]:.1f} rwb {v[8]:.3f}|{v[9]:.3f}")
        (r[k + " util_m"], r[k + " util_f"], r[k + " idle_m"], r[k + " idle"], r[k + " rwb_m"], r[k + " rwb"]) = (v[6], v[7], v[2], v[3], v[8], v[9])
    if (d / "raw").exists():
        q = json.loads((d / "raw/queue_counters.json").read_text())
        t = json.loads((d / "raw/tcp_counters.json").read_text())
        slowq = sum(v["dropped"] for p in ("tbx1-eth3", "tbx1-eth4") for v in q[p].values())
        slowp = sum(v["packets"] + v["dropped"] for p in ("tbx1-eth3", "tbx1-eth4") for v in q[p].values())
        allq = sum(v["dropped"] for p in q.values() for v in p.values())
        fast = sum(t[h]["TcpRetransSegs"] for h in ("tbh1", "tbh2")) / sum(t[h]["TcpOutSegs"] for h in ("tbh1", "tbh2"))
        slow = sum(t[h]["TcpRetransSegs"] for h in ("tbh3", "tbh4")) / sum(t[h]["TcpOutSegs"] for h in ("tbh3", "tbh4"))
        rto_s = sum(t[h]["TcpExtTCPTimeouts"] for h in ("tbh3", "tbh4")); rto_f = sum(t[h]["TcpExtTCPTimeouts"] for h in ("tbh1", "tbh2"))
        loss = (f"queue drops {allq} ({slowq} at slow ports = {slowq / slowp:.1%} of their pkts); re-sent fast {fast:.1%} "
                f"slow {slow:.1%}; RTOs fast {rto_f} slow {rto_s}; internal {s['packet_losses']['switch_internal']}")
        r.update(slowdrop=slowq / slowp, fastre=fast, slowre=slow, rto_s=rto_s, rto_f=rto_f)
    else:
        loss = f"switch_loss_share (inside OVS) {s['switch_loss_share']:.2%}; queue drops, TCP: not kept"
        r.update(internal=s["switch_loss_share"])
    rows[(place, date)].append(r)
    print(f"{date} {place:8} {cell.split('seed-')[1][0]}  {s['iteration_s_mean']:.3f} {s['predicted_iteration_s']:.3f} {over:+.1%} | " + "; ".join(parts) + " | " + loss)
print("\nmeans over seeds")
for (place, date), rs in sorted(rows.items()):
    keys = [k for k in rs[0] if all(k in r for r in rs)]
    print(f"{place:8} {date}: " + ", ".join(f"{k} {st.fmean(r[k] for r in rs):.4g}" + (f"±{st.stdev(r[k] for r in rs):.2g}" if k == "over" else "") for k in keys))
