"""Context of each port drop (t_drop from losses.py) vs baselines (random instants of the run, and random
instants at which the port had a waited run >= 138 KB, i.e. a possibly full queue). Writes losses_table.csv."""
import json, bisect
import numpy as np, pandas as pd
rng = np.random.default_rng(1)
RUN = "/tmp/oes-capture-run/"; C = 2.5e6
IPHOST = {"10.0.0.%d" % i: "tbh%d" % i for i in range(1, 5)}
ev = [json.loads(l) for l in open(RUN + "events.jsonl")]
de = [json.loads(l) for l in open(RUN + "decisions.jsonl")]
import sys; sys.path.insert(0, "/tmp/oesdrops2"); from holes import label_map
LAB = label_map()
ends = {e["flow"]: e["t"] for e in ev if e["kind"] == "flow_end"}
X = {}  # conn key (src,dst,sport,dport) -> list of (t0,t1,bytes)
for e in ev:
    if e["kind"] == "flow_start" and e["src"] != e["dst"]:
        X.setdefault((e["src"], e["dst"], e["src_port"], e["dst_port"]), []).append((e["t"], ends.get(e["flow"], np.inf), e["bytes"], e["phase"]))
RH = {}
for d in de:
    for s in d["set"]:
        RH.setdefault((s[0], s[1], s[3], s[4]), []).append((d["t"], s[5]))
def rate(k, t):
    h = RH.get(k, [])
    i = bisect.bisect_right([x[0] for x in h], t) - 1
    return h[i][1] if i >= 0 else 0.0   # no class yet: unshaped (counted 0 here, flagged separately)
# decision windows per receiver: (trigger earliest, applied, lowered_any)
W = {"tbh3": [], "tbh4": []}
last = {}
for d in de:
    tr = d["t"] - max(d["latency_s"])
    for h in W:
        ks = [s for s in d["set"] if s[1] == h]
        if ks:
            lowered = any(s[5] < last.get((s[0], s[1], s[3], s[4]), np.inf) for s in ks)
            W[h].append((tr, d["t"], lowered))
    for s in d["set"]:
        last[(s[0], s[1], s[3], s[4])] = s[5]
def features(h, t, dep):
    f = {}
    act = [(k, x) for k, v in X.items() if k[1] == h for x in v if x[0] <= t <= x[1]]
    f["active_conns"] = len({k for k, _ in act})
    f["active_rate_sum"] = sum(rate(k, t) for k in {k for k, _ in act})
    f["active_unshaped"] = sum(1 for k in {k for k, _ in act} if not RH.get(k) or RH[k][0][0] > t)
    # restart: a transfer into h started in [t-100ms, t] on a connection idle >= 50 ms before it
    rs = 0; own = {}
    for k, v in X.items():
        if k[1] != h: continue
        for i, x in enumerate(v):
            if t - 0.1 <= x[0] <= t:
                prev_end = max((y[1] for y in v[:i] if y[1] < x[0]), default=-np.inf)
                busy_before = any(y[0] < x[0] <= y[1] for y in v[:i])
                if not busy_before and x[0] - prev_end >= 0.05:
                    rs += 1; own[k] = True
    f["restart_100ms"] = rs
    f["restart_conns"] = own
    f["stale_60ms"] = any(a <= t and b >= t - 0.06 for a, b, _ in W[h])
    f["stale_lowered_60ms"] = any(a <= t and b >= t - 0.06 and lo for a, b, lo in W[h])
    # pcap: connections with data departing in [t-100ms, t+58ms]; request bytes in the queue window [t, t+58ms]
    ts = dep.ts.values
    i0, i1, i2 = np.searchsorted(ts, [t - 0.1, t, t + 0.058])
    w = dep.iloc[i0:i2]
    wd = w[w.plen > 0]
    f["conns_with_data_158ms"] = wd.groupby(["src", "sport"]).ngroups
    q = dep.iloc[i1:i2]
    f["req_bytes_q"] = int((q.wirelen.values * q.isreq.values).sum())
    return f
rows = []
for h in ("tbh3", "tbh4"):
    dep = pd.read_pickle(f"dep-{h}.pkl")
    dep["key"] = list(zip(dep.src.map(IPHOST), [h] * len(dep), dep.sport, dep.dport))
    dep["isreq"] = [("(requests" in LAB.get(k, "")) and p > 0 for k, p in zip(dep.key, dep.plen)]
    L = pd.read_csv(f"losses-{h}.csv")
    L = L[L.port_consistent]
    for _, r in L.iterrows():
        f = features(h, r.t_drop, dep)
        k = (r.src, h, r.sport, r.dport)
        f["own_restart"] = k in f.pop("restart_conns")
        rows.append(dict(kind="drop", host=h, t=r.t_drop, **f))
    # baselines
    w = np.abs(dep.Tm.values) < 300; Lw = dep.wirelen.values
    run = np.zeros(len(dep)); s = 0.0
    for i in range(len(dep)):
        s = s + Lw[i] if w[i] else 0.0; run[i] = s
    cand = dep.ts.values[(run >= 138e3) & (dep.plen.values > 0)] - 0.058
    t_lo, t_hi = dep.ts.min() + 10, dep.ts.max() - 1
    for kind, ts in (("random", rng.uniform(t_lo, t_hi, 1000)), ("random_full_possible", rng.choice(cand, 1000, replace=False))):
        for t in ts:
            f = features(h, t, dep); f.pop("restart_conns"); rows.append(dict(kind=kind, host=h, t=t, **f))
T = pd.DataFrame(rows)
T.to_csv("context.csv", index=False)
agg = T.groupby(["host", "kind"]).agg(n=("t", "size"), active_conns=("active_conns", "mean"), rate_sum=("active_rate_sum", "mean"),
        rate_sum_ge20=("active_rate_sum", lambda x: (x >= 19.99).mean()), unshaped=("active_unshaped", lambda x: (x > 0).mean()),
        restart=("restart_100ms", lambda x: (x > 0).mean()), own_restart=("own_restart", "mean"),
        stale=("stale_60ms", "mean"), stale_lowered=("stale_lowered_60ms", "mean"), conns_pcap=("conns_with_data_158ms", "mean"),
        req_in_q=("req_bytes_q", lambda x: (x > 0).mean()), req_bytes=("req_bytes_q", "mean"))
pd.set_option("display.width", 250)
print(agg.round(3).to_string())
