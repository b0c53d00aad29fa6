"""Clock alignment check: events' flow_start/flow_end (time.time() on the same VM) vs the capture (pcap epoch):
lag from a transfer's flow_start to its connection's first data frame at the receiver after it, and from the last
frame before flow_end to flow_end."""
import json, numpy as np, pandas as pd
RUN = "/tmp/oes-capture-run/"; IP = {"tbh%d" % i: "10.0.0.%d" % i for i in range(1, 5)}
ev = [json.loads(l) for l in open(RUN + "events.jsonl")]
ends = {e["flow"]: e["t"] for e in ev if e["kind"] == "flow_end"}
for h in ("tbh3", "tbh4"):
    d = pd.read_pickle(f"pkts-{h}.pkl"); d = d[d.plen > 0]
    g = {k: v.ts.values for k, v in d.groupby(["src", "sport", "dport"])}
    a, b = [], []
    for e in ev:
        if e["kind"] == "flow_start" and e["dst"] == h and e["src"] != h and e["bytes"] > 100_000:
            ts = g.get((IP[e["src"]], e["src_port"], e["dst_port"]))
            if ts is None: continue
            i = np.searchsorted(ts, e["t"]); 
            if i < len(ts): a.append((ts[i] - e["t"]) * 1e3)
            te = ends.get(e["flow"])
            if te:
                j = np.searchsorted(ts, te) - 1
                b.append((te - ts[j]) * 1e3)
    print(h, "flow_start -> first frame ms q1/10/50/90:", np.percentile(a, [1, 10, 50, 90]).round(2),
          "| last frame -> flow_end ms q1/10/50/90:", np.percentile(b, [1, 10, 50, 90]).round(2), "n", len(a))
