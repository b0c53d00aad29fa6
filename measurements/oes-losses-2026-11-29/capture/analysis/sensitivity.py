"""Restart-after-idle share at drops vs baselines, for several idle thresholds and windows (context.csv times)."""
import json, numpy as np, pandas as pd
RUN = "/tmp/oes-capture-run/"
ev = [json.loads(l) for l in open(RUN + "events.jsonl")]
ends = {e["flow"]: e["t"] for e in ev if e["kind"] == "flow_end"}
starts = {"tbh3": [], "tbh4": []}
X = {}
for e in ev:
    if e["kind"] == "flow_start" and e["src"] != e["dst"]:
        X.setdefault((e["src"], e["dst"], e["src_port"], e["dst_port"]), []).append((e["t"], ends.get(e["flow"], np.inf)))
for k, v in X.items():
    if k[1] not in starts: continue
    for i, x in enumerate(v):
        prev_end = max((y[1] for y in v[:i] if y[1] < x[0]), default=-np.inf)
        if not any(y[0] < x[0] <= y[1] for y in v[:i]):
            starts[k[1]].append((x[0], x[0] - prev_end))
T = pd.read_csv("context.csv")
out = []
for idle in (0.0, 0.02, 0.05, 0.2, 1.0):
    for win in (0.05, 0.1, 0.2):
        for (h, kind), g in T.groupby(["host", "kind"]):
            s = np.array([t for t, gap in starts[h] if gap >= idle])
            hit = [((s <= t) & (s >= t - win)).any() for t in g.t]
            out.append(dict(idle_ms=idle * 1e3, win_ms=win * 1e3, host=h, kind=kind, share=np.mean(hit)))
P = pd.DataFrame(out).pivot_table(index=["host", "idle_ms", "win_ms"], columns="kind", values="share")
print(P.round(3).to_string())
