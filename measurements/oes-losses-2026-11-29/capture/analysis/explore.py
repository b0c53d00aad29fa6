import pandas as pd
for h in ("tbh3","tbh4"):
    d = pd.read_pickle(f"pkts-{h}.pkl")
    print(h, len(d), d.ts.min(), d.ts.max(), "wirelen max", d.wirelen.max(), "plen max", d.plen.max(), "dscp", d.dscp.value_counts().to_dict())
    d["data"] = d.plen > 0
    g = d.groupby(["src","sport","dst","dport"]).agg(n=("ts","size"), ndata=("data","sum"), bytes=("plen","sum"), t0=("ts","min"), t1=("ts","max"), syn=("flags", lambda f: int(((f & 2) > 0).sum())))
    print(g.to_string())
    print(d.plen.value_counts().head(8).to_dict())
