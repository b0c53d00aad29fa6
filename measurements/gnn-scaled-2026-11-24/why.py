import re, time, yaml
from experiments.gnn import scaled, simulated, search
from controller.schedulers.placement.etp import etp
base = simulated.load_profile(scaled.PROFILE)
spec = scaled.paper_spec(scaled.SETTINGS["products"])[0]
prof = scaled.scaled_profile(base, spec, batch=1.0)
found = etp(search.problem_from_profile(spec, prof), 2000, 1, makespan=search.makespan(spec, prof, scaled.ITERATIONS))
place = {t: found.placement[t] for t in spec["workload"]["placement"]["tasks"]}
for sch in ("oes", "fair", "default", "mrtf"):
    t = time.perf_counter()
    r = simulated.GnnSimulation(search.with_placement(spec, place), prof, scaled.ITERATIONS, sch).run()
    from experiments.gnn import metrics
    m = metrics.training(r.events, None)
    print(sch, m["iteration_s_mean"], round(time.perf_counter() - t), flush=True)
