"""Port departure structure at each receiver (capture = port output): busy runs and, per hole,
whether a full queue (>= 141 KB backlog, i.e. >= 56 ms of paced departures) is consistent."""
import numpy as np, pandas as pd
C = 20e6 / 8  # B/s
def runs(host):
    d = pd.read_pickle(f"pkts-{host}.pkl").sort_values("ts", kind="stable").reset_index(drop=True)
    ts = d.ts.values; L = d.wirelen.values.astype(float)
    dt = np.diff(ts)
    ser_prev = L[:-1] / C
    # paced: the port sent packet i as soon as its rate allowed after i-1 (tokens exhausted)
    paced = np.abs(dt - ser_prev) <= 1e-4
    fast = dt < ser_prev - 1e-4            # faster than the rate: htb tokens
    busy = paced | fast                    # no idle time between i-1 and i
    return d, ts, L, paced, fast, busy
if __name__ == "__main__":
    for host in ("tbh3", "tbh4"):
        d, ts, L, paced, fast, busy = runs(host)
        # maximal paced runs
        idx = np.nonzero(~paced)[0]
        starts = np.r_[0, idx + 1]; ends = np.r_[idx, len(paced)]  # run of paced transitions starts..ends-1 => packets starts..ends
        lens = ends - starts
        byt = np.array([L[s:e + 1].sum() for s, e in zip(starts, ends)])
        print(host, "paced runs with >= 15 frames of paced spacing:", int((lens >= 15).sum()), " >= 40:", int((lens >= 40).sum()),
              " longest", int(lens.max()), "frames", round(byt.max() / 1e3), "KB")
        np.save(f"paced-{host}.npy", np.c_[starts, ends])
