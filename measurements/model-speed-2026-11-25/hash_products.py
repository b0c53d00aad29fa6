"""Hash the model's events over several configs: a speed change must keep them byte for byte."""
import hashlib, json, sys, time
from experiments.gnn import scaled, simulated, search
out = {}
t0 = time.perf_counter()
for setting_name, iters in (("products", 6),):
    setting = scaled.SETTINGS[setting_name]
    spec, _ = scaled.paper_spec(setting, 0)
    base = simulated.load_profile(scaled.PROFILE)
    for fig, val in (("10", 1.0), ("11", 2.0)):
        profile = scaled.cell_profile(base, spec, setting, fig, val)
        placements = {"distdgl": spec["workload"]["placement"]["tasks"],
                      "ifs": search.ifs_placement(spec, profile)}
        for pname, pl in placements.items():
            for sched in ("oes", "default", "mrtf", "omcoflow", "fair"):
                trial = search.with_placement(spec, pl)
                r = simulated.GnnSimulation(trial, profile, iters, sched).run()
                h = hashlib.sha256(json.dumps([r.events, r.decisions, r.end_s, r.frames], sort_keys=True).encode()).hexdigest()[:16]
                out[f"{setting_name}/{fig}/{val}/{pname}/{sched}"] = h
                print(f"{setting_name}/{fig}/{val}/{pname}/{sched} {h} {r.end_s:.4f} {time.perf_counter()-t0:.1f}s", flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print("total", time.perf_counter() - t0)
