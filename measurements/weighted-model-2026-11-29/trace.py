"""Grouper on the paper's full trace and on the 60-host leaf-spine, strict priority and
two weightings: wall time and average SCT (``python trace.py`` from the checkout's root)."""
import time, sys
from experiments.cojob import simulated, metrics as gm
from experiments.validation import read_yaml
for path in ("experiments/specs/grouper-trace-full.yaml", "experiments/specs/grouper-sim-60.yaml"):
    for w in (None, [2, 1, 1, 1, 1, 1, 1], [64, 32, 16, 8, 4, 2, 1]):
        raw = read_yaml(path); raw.setdefault("emulation", {})["queue_weights"] = w
        spec = simulated.validate(raw); spec["scheduler"]["name"] = "grouper"
        t0 = time.perf_counter()
        sim = simulated.build_simulation(spec, simulated.VARIANTS["iterations+compute"]); res = sim.run()
        s = gm.summarise(res.events, sim.coordinator.workload.to_dict())
        print(path.split("/")[-1], w, "wall %.1f s" % (time.perf_counter() - t0), "avg_sct %.2f" % s["avg_sct_s"], flush=True)
