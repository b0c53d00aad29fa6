"""Upper bound on each frame's wait at the port from its TSval: d - (TSval/1000 + offset), offset = per connection
median over 60-s windows of min(d - TSval/1000). A frame that entered a full port queue waited ~56-60 ms."""
import numpy as np, pandas as pd
def with_wmax(host):
    d = pd.read_pickle(f"dep-{host}.pkl")
    d["o"] = d.ts - d.tsval / 1000.0
    d["w"] = ((d.ts - d.ts.min()) // 60).astype(int)
    off = d[d.tsval >= 0].groupby(["src", "sport", "dport", "w"]).o.min().groupby(level=[0, 1, 2]).median().rename("off")
    d = d.join(off, on=["src", "sport", "dport"])
    d["wmax_ms"] = (d.o - d.off) * 1e3 + 1.0  # +1 ms: TSval is floored to ms
    return d
if __name__ == "__main__":
    for host in ("tbh3", "tbh4"):
        d = with_wmax(host)
        d.to_pickle(f"dep-{host}.pkl")
        data = d[d.plen > 0]
        print(host, "data frames: wmax quantiles ms", np.percentile(data.wmax_ms, [5, 25, 50, 75, 95, 99]).round(1),
              " share >= 55 ms", round(float((data.wmax_ms >= 55).mean()), 3))
