"""The old code's batch-2.0 ETP placement under today's profile and model: its 10-iteration
makespan (what today's ETP judges candidates by) and its steady-state iteration (the cell's)."""
import json, sys
from pathlib import Path
from experiments.gnn import scaled, search, simulated
found = json.loads(Path(sys.argv[1]).read_text())
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
setting = scaled.SETTINGS["products"]
base = simulated.load_profile(scaled.PROFILE)
spec, drawn = scaled.cluster(out, setting, 6)
assert drawn == found["drawn"]
spec["workload"]["iterations"] = max(spec["workload"]["iterations"], scaled.ITERATIONS, scaled.SEARCH_ITERATIONS)
profile = scaled.cell_profile(base, spec, setting, "10", 2.0)
placement = found["placement"]
print("makespan over 10 iterations, today:", search.makespan(spec, profile, scaled.SEARCH_ITERATIONS)(placement))
print("steady s/iteration, today:", scaled.run_cell(spec, profile, placement, "oes", scaled.ITERATIONS))
