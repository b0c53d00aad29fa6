"""Testbed spec, seed 1: the simulator on the spec's 40 Mbit/s fabric and with fabric links that cannot fill
(host ports only, as itersim). Run from the repository root with .venv/bin/python."""
import time
from experiments.cojob import simulated
from experiments.cojob import metrics as grouper_metrics
from experiments.runner import read_spec
raw = read_spec("experiments/specs/grouper-testbed.yaml")
for fab in (40, 1e6):
    raw["topology"]["fabric_mbps"] = fab
    spec = simulated.validate(raw)
    for sched in ("fs", "grouper", "sincronia", "baraat", "grouper-immediate", "grouper-offline"):
        t=time.time()
        sim = simulated.build_simulation({**spec, "scheduler": {**spec["scheduler"], "name": sched}}, simulated.VARIANTS["iterations+compute"])
        r = sim.run()
        print(fab, sched, grouper_metrics.summarise(r.events, sim.coordinator.workload.to_dict())["avg_sct_s"], round(time.time()-t,2))
