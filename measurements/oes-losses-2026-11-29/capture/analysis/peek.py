import sys, numpy as np, pandas as pd
host = sys.argv[1]; k = int(sys.argv[2]); before = float(sys.argv[3]) if len(sys.argv) > 3 else 0.25
H = pd.read_csv(f"holes-{host}.csv"); h = H.iloc[k]
d = pd.read_pickle(f"pkts-{host}.pkl").sort_values("ts", kind="stable")
d = d[d.dst == {"tbh3": "10.0.0.3", "tbh4": "10.0.0.4"}[host]]
w = d[(d.ts > h.t_gap - before) & (d.ts < h.t_gap + 0.08)].copy()
w["rt"] = (w.ts - h.t_gap) * 1e3
w["dt"] = w.ts.diff() * 1e3
w["c"] = w.src.str[-1] + ":" + w.sport.astype(str)
print(h.to_dict())
print(w[["rt", "dt", "c", "plen", "ipid", "tsval", "seq"]].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
