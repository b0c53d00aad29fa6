"""Per-loss table: each sequence hole at tbh3/tbh4 placed at the switch port by the FIFO + htb token model
driven by the observed departures, with the queue's contents at the drop and the run's events/decisions.
Outputs: losses-<host>.csv, losses.csv (both), episodes.csv; prints the aggregates."""
import json, bisect, sys
import numpy as np, pandas as pd
C = 20e6 / 8; B = 150_000; LIMIT = 150_000; FRAME = 9014
HOSTIP = {"tbh3": "10.0.0.3", "tbh4": "10.0.0.4"}
IPHOST = {"10.0.0.%d" % i: "tbh%d" % i for i in range(1, 5)}
RUN = "/tmp/oes-capture-run/"
EPS = 300  # bytes of tokens: a departure with |T-| < EPS waited in the queue

ev = [json.loads(l) for l in open(RUN + "events.jsonl")]
de = [json.loads(l) for l in open(RUN + "decisions.jsonl")]
sys.path.insert(0, "/tmp/oesdrops2"); from holes import label_map
LAB = label_map()

# transfers per connection (data direction): flow_start/flow_end
xfers = {}
for e in ev:
    if e["kind"] == "flow_start" and e["src"] != e["dst"]:
        xfers.setdefault((e["src"], e["dst"], e["src_port"], e["dst_port"]), []).append([e["t"], None, e["bytes"], e["flow"]])
ends = {e["flow"]: e["t"] for e in ev if e["kind"] == "flow_end"}
for k, v in xfers.items():
    for x in v:
        x[1] = ends.get(x[3])
    v.sort()
# installed rate history per connection key (src,dst,sport,dport) and decision trigger windows
rate_hist = {}
stale = []  # (trigger t, applied t, receivers touched)
for dd in de:
    for s in dd["set"]:
        rate_hist.setdefault((s[0], s[1], s[3], s[4]), []).append((dd["t"], s[5]))
    tr = dd["t"] - max(dd["latency_s"])
    stale.append((tr, dd["t"], {s[1] for s in dd["set"]}, dd["t"] - dd["apply_s"]))
stale.sort()
def rate_at(key, t):
    h = rate_hist.get(key)
    if not h: return np.nan
    i = bisect.bisect_right([x[0] for x in h], t) - 1
    return h[i][1] if i >= 0 else np.nan
def rates_into(host, t):
    """installed rates of classes into host at t: {key: mbps} (classes whose last set > 0)"""
    out = {}
    for k, h in rate_hist.items():
        if k[1] == host:
            r = rate_at(k, t)
            if r == r and r > 0: out[k] = r
    return out
def active_xfer(key, t):
    """transfer in progress on connection key at t (started <= t, not ended), and idle before its start"""
    v = xfers.get(key, [])
    cur = None; idle = np.nan
    for i, (t0, t1, b, f) in enumerate(v):
        if t0 <= t and (t1 is None or t1 >= t):
            cur = (t0, t1, b, f)
            prev_end = max((x[1] for x in v[:i] if x[1] is not None), default=None)
            idle = (t0 - prev_end) if prev_end is not None else np.inf
    return cur, idle
compute_req = [e for e in ev if e["kind"] == "compute" and "peer" in e]

def analyse(host):
    d = pd.read_pickle(f"dep-{host}.pkl")  # departures with token state
    ts = d.ts.values; L = d.wirelen.values.astype(float); Tm = d.Tm.values
    waited = np.abs(Tm) < EPS
    srcs = d.src.map(IPHOST).values; sport = d.sport.values; dport = d.dport.values; plen = d.plen.values
    ckey = [(s, host, a, b) for s, a, b in zip(srcs, sport, dport)]
    cum = np.r_[0, np.cumsum(L)]  # cum[i] = bytes of departures before i
    # start of each waited run: run_start[i] = first index of the run of waited departures ending at i
    run_start = np.empty(len(d), int); s = 0
    for i in range(len(d)):
        if not waited[i]: s = i + 1
        run_start[i] = s
    H = pd.read_csv(f"holes-{host}.csv")
    x = pd.read_pickle(f"chunks-{host}.pkl")
    x = x.set_index("index")
    rows = []
    for _, h in H.iterrows():
        c = (h.src, host, h.sport, h.dport)
        m = (srcs == h.src) & (sport == h.sport) & (dport == h.dport)
        idx = np.nonzero(m)[0]
        # prev: the first-arriving packet of this connection whose sequence end = hole start; gap packet: first with t = t_gap
        seq_rel = None
        g = d.iloc[idx]
        gi = idx[np.argmin(np.abs(ts[idx] - h.t_gap))]
        # walk back from the gap packet over this connection's data packets to the last one before it
        before = idx[(idx < gi) & (plen[idx] > 0)]
        pi = before[-1] if len(before) else None
        res = dict(host=host, conn=h.conn, src=h.src, sport=h.sport, dport=h.dport, segs=int(h.segs_est), hole_bytes=int(h.bytes),
                   t_gap=h.t_gap, fill_delay_ms=h.fill_delay_ms)
        # chunk membership
        ch_prev = x.chunk.get(d["index"].iloc[pi]) if pi is not None else None
        ch_gap = x.chunk.get(d["index"].iloc[gi])
        res["same_chunk"] = bool(pi is not None and ch_prev == ch_gap)
        res["prev_chunk_frames"] = int((x.chunk[(x.conn == f"{IPHOST_rev(h.src)}:{h.sport}>{h.dport}")] == ch_prev).sum()) if False else np.nan
        # anchor candidates: after prev (tail drop of prev's chunk), or just before the gap packet (head drop of its chunk)
        best = None
        for name, k in (("prev", pi), ("gap", gi - 1 if gi is not None else None)):
            if k is None or k < 0: continue
            # queue at the drop = departures j..k (FIFO, all waited), with LIMIT - FRAME < sum <= LIMIT
            # need waited run covering j..k; k itself must have waited unless it is the packet just before a new chunk
            tot = cum[k + 1] - cum[run_start[k]] if waited[k] else 0.0
            feas = tot > LIMIT - FRAME - 2 * 1514  # a few small packets of slack
            if feas:
                # smallest j with cum[k+1]-cum[j] <= LIMIT
                j = np.searchsorted(cum, cum[k + 1] - LIMIT, side="left")
                j = max(j, run_start[k])
                t_lo = ts[j - 1] if j > 0 else ts[j]; t_hi = ts[j]
                best = best or dict(anchor=name, j=j, k=k, t_drop=0.5 * (t_lo + t_hi), t_drop_err_ms=(t_hi - t_lo) * 500, run_bytes=tot)
            res[f"run_bytes_{name}"] = tot
        if best is None:
            res.update(anchor="none", port_consistent=False)
            rows.append(res); continue
        res.update(anchor=best["anchor"], port_consistent=True, t_drop=best["t_drop"], t_drop_err_ms=best["t_drop_err_ms"],
                   gap_minus_drop_ms=(h.t_gap - best["t_drop"]) * 1e3)
        j, k = best["j"], best["k"]
        # queue contents at the drop, per connection
        qc = {}
        for i in range(j, k + 1):
            qc.setdefault(ckey[i], 0.0); qc[ckey[i]] += L[i]
        res["q_bytes"] = sum(qc.values())
        res["q_conns"] = sum(1 for kk, v in qc.items() if v >= FRAME)
        res["q_top_conn"] = LAB.get(max(qc, key=qc.get), str(max(qc, key=qc.get)))
        res["q_top_share"] = max(qc.values()) / res["q_bytes"]
        res["q_chunks"] = int(x.loc[x.index.isin(d["index"].iloc[j:k + 1])].groupby(["conn", "chunk"]).ngroups)
        res["q_own_bytes"] = qc.get(c, 0.0)
        # requests (sampler->store data into this host) in queue
        res["q_request_bytes"] = sum(v for kk, v in qc.items() if "(requests" in LAB.get(kk, ""))
        # build-up interval: waited run start -> drop
        rs = run_start[k]
        t_q0 = ts[rs - 1] if rs > 0 else ts[rs]
        res["queue_build_ms"] = (best["t_drop"] - t_q0) * 1e3
        # tokens spent just before: back from run start while departures were faster than the rate (tokens)
        i0 = rs - 1
        while i0 > 0 and Tm[i0] > EPS and ts[i0] - ts[i0 - 1] < L[i0 - 1] / C + 1e-3:
            i0 -= 1
        res["tokens_at_burst_start"] = Tm[i0] if i0 >= 0 else np.nan
        t_b0 = ts[i0]
        res["burst_ms"] = (best["t_drop"] - t_b0) * 1e3
        # arrivals over [t_b0, t_drop] = departures i0..k + queue; excess over the rate, per connection vs its installed rate
        dur = best["t_drop"] - t_b0
        arr = {}
        for i in range(i0, k + 1):
            arr.setdefault(ckey[i], 0.0); arr[ckey[i]] += L[i]
        tot_arr = sum(arr.values())
        res["arrived_KB"] = tot_arr / 1e3
        res["excess_KB"] = (tot_arr - C * dur) / 1e3
        rin = rates_into(host, t_b0)
        res["installed_sum_mbps"] = sum(rin.values())
        exc = {kk: v - rin.get(kk, 0.0) * 1e6 / 8 * dur for kk, v in arr.items()}
        top = max(exc, key=exc.get)
        res["excess_top_conn"] = LAB.get(top, str(top)); res["excess_top_KB"] = exc[top] / 1e3
        res["excess_pos_conns"] = sum(1 for v in exc.values() if v > FRAME)
        res["unshaped_arrived_KB"] = sum(v for kk, v in arr.items() if kk not in rin) / 1e3
        # context of the connections in the queue: transfer just started after idle (bucket release), requests
        restart = 0.0; restart_conns = 0; fresh_xfer = 0.0
        for kk, v in qc.items():
            cur, idle = active_xfer(kk, best["t_drop"])
            if cur is not None and best["t_drop"] - cur[0] < 0.15 and idle >= 0.02:
                restart += v; restart_conns += 1
        res["q_restart_bytes"] = restart; res["q_restart_conns"] = restart_conns
        # the lost connection itself
        cur, idle = active_xfer(c, best["t_drop"])
        res["own_xfer"] = cur[3] if cur else None
        res["own_xfer_age_ms"] = (best["t_drop"] - cur[0]) * 1e3 if cur else np.nan
        res["own_idle_before_ms"] = idle * 1e3 if cur else np.nan
        res["own_rate_mbps"] = rate_at(c, best["t_drop"])
        # stale windows: a decision touching this receiver triggered but not yet applied within [t_q0 - 0, t_drop]
        tq = min(t_q0, t_b0)
        st = [s for s in stale if host in s[2] and s[0] <= best["t_drop"] and s[1] >= tq - 0.0]
        res["stale_overlap"] = len(st) > 0
        res["decision_within_100ms"] = any(host in s[2] and 0 <= best["t_drop"] - s[1] <= 0.1 for s in stale)
        rows.append(res)
    return pd.DataFrame(rows)

def IPHOST_rev(h): return {v: k for k, v in IPHOST.items()}[h]

if __name__ == "__main__":
    allr = []
    for host in ("tbh3", "tbh4"):
        R = analyse(host); allr.append(R)
        R.to_csv(f"losses-{host}.csv", index=False)
    R = pd.concat(allr); R.to_csv("losses.csv", index=False)
    for host, g in R.groupby("host"):
        ok = g[g.port_consistent]
        print(f"== {host}: holes {len(g)} ({g.segs.sum()} segs); consistent with a full port queue {len(ok)} ({ok.segs.sum()} segs),"
              f" anchors {ok.anchor.value_counts().to_dict()}, not {len(g)-len(ok)} ({g[~g.port_consistent].segs.sum()} segs)")
