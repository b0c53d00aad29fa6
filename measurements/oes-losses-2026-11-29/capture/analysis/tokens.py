"""Port htb token model driven by the observed departures (capture = port output):
T-_i = min(B, T+_{i-1} + C dt), T+_i = T-_i - L_i. A departure with T-_i ~ 0 waited for tokens (it was queued).
Checks that no departure needed negative tokens (model consistent)."""
import numpy as np, pandas as pd
C = 20e6 / 8; B = 150_000
HOSTIP = {"tbh3": "10.0.0.3", "tbh4": "10.0.0.4"}
def departures(host):
    d = pd.read_pickle(f"pkts-{host}.pkl")
    d = d[d.dst == HOSTIP[host]].sort_values("ts", kind="stable").reset_index()
    ts = d.ts.values; L = d.wirelen.values.astype(float)
    Tm = np.empty(len(d)); Tp = np.empty(len(d))
    t = B
    for i in range(len(d)):
        if i:
            t = min(B, t + C * (ts[i] - ts[i - 1]))
        Tm[i] = t; t -= L[i]; Tp[i] = t
    d["Tm"] = Tm; d["Tp"] = Tp
    return d
if __name__ == "__main__":
    for host in ("tbh3", "tbh4"):
        d = departures(host)
        q = np.percentile(d.Tm, [0, 0.1, 1, 5, 25, 50])
        print(host, "tokens before each departure, B: min/0.1%/1%/5%/25%/50%", q.round(0))
        print("  departures that waited for tokens (|T-| < 300 B, i.e. 0.12 ms):", round(float((np.abs(d.Tm) < 300).mean()), 3),
              " below -300 B (model violated):", int((d.Tm < -300).sum()), " below -2000:", int((d.Tm < -2000).sum()))
        d.to_pickle(f"dep-{host}.pkl")
