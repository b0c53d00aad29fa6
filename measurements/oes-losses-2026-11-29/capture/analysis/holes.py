"""Sequence holes per TCP connection into tbh3/tbh4 from the receiver captures, and IP-ID gaps.
Output: holes-<host>.csv (one row per hole), conns-<host>.csv (per connection), dups.
A hole: a data segment whose start is above the highest byte seen so far (nxt). Bytes of a hole
are filled later by segments below nxt (retransmissions, or reordering if fast)."""
import sys, json, bisect
import numpy as np, pandas as pd

HOSTIP = {"10.0.0.1": "tbh1", "10.0.0.2": "tbh2", "10.0.0.3": "tbh3", "10.0.0.4": "tbh4"}
MSS = 8948

def label_map():
    """(src host, dst host, sport, dport) of the data direction -> label, from flow_start events
    (src=data sender). Requests travel in the reverse direction of a store->sampler flow."""
    lab = {}
    for line in open("/tmp/oes-capture-run/events.jsonl"):
        e = json.loads(line)
        if e["kind"] == "flow_start" and e["src"] != e["dst"]:
            k = (e["src"], e["dst"], e["src_port"], e["dst_port"])
            lab.setdefault(k, f'{e["src_task"]}->{e["dst_task"]}')
            r = (e["dst"], e["src"], e["dst_port"], e["src_port"])
            lab.setdefault(r, f'{e["dst_task"]}->{e["src_task"]} (requests/acks)')
    return lab

def analyse(host):
    d = pd.read_pickle(f"pkts-{host}.pkl")
    d = d[d.dst.map(HOSTIP) == host]
    lab = label_map()
    holes, conns, extra = [], [], []
    for (src, sport, dport), g in d.groupby(["src", "sport", "dport"], sort=False):
        g = g.sort_values("ts", kind="stable")
        sh = HOSTIP[src]
        name = lab.get((sh, host, sport, dport), f"{sh}:{sport}->{host}:{dport}")
        ts = g.ts.values; seq = g.seq.values.astype(np.int64); pl = g.plen.values; fl = g["flags"].values
        ipid = g.ipid.values.astype(np.int64)
        # IP-ID gaps (all packets of the socket, ordered by arrival)
        did = np.diff(ipid) % 65536
        idgaps = int(np.sum(np.where((did > 1) & (did < 30000), did - 1, 0)))
        idback = int(np.sum((did == 0) | (did >= 30000)))  # repeated/backwards ids: reordering or dup
        syn = np.nonzero(fl & 2)[0]
        base = seq[syn[0]] + 1 if len(syn) else seq[pl > 0][0] if (pl > 0).any() else 0
        # unwrap relative sequence
        rel = (seq - base) % (1 << 32)
        # handle wrap beyond 4 GB: connections here carry < 700 MB, no wrap of rel expected
        nxt = None
        open_holes = []  # list of dicts with [start, end) still missing intervals
        ndata = nrtx = ndup = nreord = 0
        for i in np.nonzero(pl > 0)[0]:
            s = int(rel[i]); e = s + int(pl[i]); t = float(ts[i])
            ndata += 1
            if nxt is None:
                nxt = e; continue
            if s > nxt:
                h = dict(host=host, conn=name, src=sh, sport=int(sport), dport=int(dport), start=nxt, end=s,
                         bytes=s - nxt, t_gap=t, t_prev=float(ts[i - 1]) if i > 0 else np.nan,
                         idgap_at_gap=int((ipid[i] - ipid[i - 1]) % 65536 - 1) if i > 0 else -1,
                         missing=[[nxt, s]], fills=[], t_first_fill=np.nan, t_last_fill=np.nan,
                         fill_pkts=0, seg_after=int(pl[i]))
                holes.append(h); open_holes.append(h)
                nxt = e
                continue
            if e <= nxt:
                # below nxt: fills a hole, or duplicate
                filled = 0
                for h in open_holes:
                    newm = []
                    for a, b in h["missing"]:
                        lo, hi = max(a, s), min(b, e)
                        if lo < hi:
                            filled += hi - lo
                            if not h["fills"]:
                                h["t_first_fill"] = t
                            h["fills"].append(t); h["t_last_fill"] = t; h["fill_pkts"] += 1
                            if a < lo: newm.append([a, lo])
                            if hi < b: newm.append([hi, b])
                        else:
                            newm.append([a, b])
                    h["missing"] = newm
                open_holes = [h for h in open_holes if h["missing"]]
                if filled:
                    nrtx += 1
                else:
                    ndup += 1
                continue
            # s <= nxt < e: new data (possibly overlapping)
            if s < nxt:
                # partial overlap: part may fill holes too
                pass
            nxt = e
        for h in holes:
            pass
        conns.append(dict(host=host, conn=name, src=sh, sport=int(sport), dport=int(dport), pkts=len(g), data_pkts=ndata,
                          data_bytes=int(pl.sum()), holes=sum(1 for h in holes if h["conn"] == name and h["sport"] == sport),
                          fill_pkts=nrtx, dup_pkts=ndup, unfilled=sum(1 for h in open_holes),
                          ipid_gap_pkts=idgaps, ipid_back=idback))
    H = pd.DataFrame(holes)
    if len(H):
        H["missing_left"] = H.missing.map(lambda m: sum(b - a for a, b in m))
        H["segs_est"] = np.ceil(H.bytes / MSS).astype(int)
        H["fill_delay_ms"] = (H.t_first_fill - H.t_gap) * 1e3
        H["gap_first_to_fill_ms"] = H.fill_delay_ms
        H = H.drop(columns=["missing", "fills"])
    C = pd.DataFrame(conns)
    return H, C

if __name__ == "__main__":
    for host in ("tbh3", "tbh4"):
        H, C = analyse(host)
        H.to_csv(f"holes-{host}.csv", index=False); C.to_csv(f"conns-{host}.csv", index=False)
        Cd = C[C.data_pkts > 0]
        print(f"== {host}")
        print(Cd[["conn", "src", "sport", "dport", "data_pkts", "data_bytes", "holes", "fill_pkts", "dup_pkts", "unfilled", "ipid_gap_pkts", "ipid_back"]].to_string(index=False))
        print("holes", len(H), "segments est (ceil bytes/MSS)", int(H.segs_est.sum()), "fill packets", int(H.fill_pkts.sum()),
              "bytes", int(H.bytes.sum()), "unfilled holes", int((H.missing_left > 0).sum()))
        print("fill delay ms quantiles", H.fill_delay_ms.quantile([0, .01, .1, .5, .9, .99, 1]).round(2).to_dict())
        print("hole size segs distribution", H.segs_est.value_counts().sort_index().to_dict())
