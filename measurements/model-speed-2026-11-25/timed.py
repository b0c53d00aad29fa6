"""The papers100M setting's model (DistDGL placement), ITERATIONS under SCHEDULER: wall seconds, GC seconds, simulated end."""
import gc, sys, time
from experiments.gnn import scaled, simulated, search
setting = scaled.SETTINGS["papers100m"]
spec, drawn = scaled.paper_spec(setting, 0)
base = simulated.load_profile(scaled.PROFILE)
profile = scaled.cell_profile(base, spec, setting, "10", 1.0)
trial = search.with_placement(spec, spec["workload"]["placement"]["tasks"])
gct = [0.0, 0]
def cb(phase, info):
    if phase == "start": cb.t = time.perf_counter()
    else: gct[0] += time.perf_counter() - cb.t; gct[1] += 1
gc.callbacks.append(cb)
if "off" in sys.argv: gc.disable()
t, cpu = time.time(), time.process_time()
r = simulated.GnnSimulation(trial, profile, int(sys.argv[1]), sys.argv[2]).run()
print("wall", time.time() - t, "cpu", time.process_time() - cpu, "gc_s", gct, "end", r.end_s)
