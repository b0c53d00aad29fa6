"""Why MRTF leads, re-asked of the model with the measured send backlog: batch 1, the
products setting, DGTP's placement as this run's search finds it (same call and seed
as ``scaled.figures``), only the flow policy changed. Run from the repository root:
``nice -n 19 .venv/bin/python measurements/gnn-scaled-products-2026-11-27/why.py``."""
import time

from experiments.gnn import scaled, search, simulated

setting = scaled.SETTINGS["products"]
base = simulated.load_profile(scaled.PROFILE)
spec = scaled.paper_spec(setting)[0]
profile = scaled.cell_profile(base, spec, setting, "10", 1.0)
found = search.etp_placement(spec, profile, 2000, 1, verify=True, window=scaled.SEARCH_ITERATIONS)
placements = {"DGTP's": found.placement, "DistDGL's": spec["workload"]["placement"]["tasks"]}
for where, placement in placements.items():
    for scheduler in ("oes", "fair", "default", "mrtf", "omcoflow"):
        if where == "DistDGL's" and scheduler == "omcoflow":
            continue
        started = time.perf_counter()
        iteration_s = scaled.run_cell(spec, profile, placement, scheduler)
        print(f"{where} placement, {scheduler}: {iteration_s:.3f} s per iteration "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
