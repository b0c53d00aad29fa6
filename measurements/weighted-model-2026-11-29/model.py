"""The cojob model (with weighted queues) against the emulated grouper-queues cells:
``python model.py SWEEP_DIR OUT.csv`` from the checkout's root; every cell's spec
simulated as its run's ``model_avg_sct_s`` is (the iterations+compute variant)."""
import sys, time
from pathlib import Path
import pandas as pd, yaml
from experiments.cojob import simulated
from experiments.cojob import spec as cojob_spec
sweep = Path(sys.argv[1])
f = pd.read_csv(sweep / "results.csv")
rows = []
for _, r in f.iterrows():
    spec = yaml.safe_load((sweep / "cells" / r["cell"] / "spec.yaml").read_text())
    t0 = time.perf_counter()
    model = simulated.model_avg_sct_s(cojob_spec.resolve(spec))
    rows.append({"cell": r["cell"], "scheduler": r["scheduler"], "seed": r["seed"],
                 "weights": str(spec["emulation"].get("queue_weights")), "measured_s": r["avg_sct_s"],
                 "model_s": model, "recorded_model_s": r["model_avg_sct_s"], "model_wall_s": time.perf_counter() - t0})
out = pd.DataFrame(rows)
out["measured_over_model"] = out["measured_s"] / out["model_s"]
out.to_csv(sys.argv[2], index=False)
pd.set_option("display.width", 250)
print(out.drop(columns=["cell"]).to_string())
print(out.groupby(["scheduler", "weights"])[["measured_s", "model_s", "measured_over_model"]].mean().to_string())
grouper = out[out.scheduler == "grouper"].pivot(index="seed", columns="weights", values=["measured_s", "model_s"])
for kind in ("measured_s", "model_s"):
    strict = grouper[kind]["None"]
    for weights in grouper[kind].columns.drop("None"):
        change = grouper[kind][weights] / strict - 1
        print(f"grouper {kind} {weights}: mean {100 * (grouper[kind][weights].mean() / strict.mean() - 1):.1f}% "
              f"against strict priority, longer in {(change > 1e-9).sum()} of {len(change)} seeds")
