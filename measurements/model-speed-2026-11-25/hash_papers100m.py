"""papers100M model, 2 iterations, DistDGL placement: hash of events/decisions per scheduler."""
import hashlib, json, sys, time
from experiments.gnn import scaled, simulated, search
setting = scaled.SETTINGS["papers100m"]
spec, drawn = scaled.paper_spec(setting, 0)
base = simulated.load_profile(scaled.PROFILE)
profile = scaled.cell_profile(base, spec, setting, "10", 1.0)
trial = search.with_placement(spec, spec["workload"]["placement"]["tasks"])
out = {}
for sched in sys.argv[2].split(","):
    t = time.perf_counter()
    r = simulated.GnnSimulation(trial, profile, 2, sched).run()
    h = hashlib.sha256(json.dumps([r.events, r.decisions, r.end_s, r.frames], sort_keys=True).encode()).hexdigest()[:16]
    out[sched] = h
    print(sched, h, r.end_s, f"{time.perf_counter() - t:.1f}s", flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
