"""ETP's Fig. 10 batch-2.0 placement on products draw 6 as the code at hand searches it."""
import json, sys
from pathlib import Path
from experiments.gnn import scaled, search, simulated
out, value = Path(sys.argv[1]), float(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
setting = scaled.SETTINGS["products"]
base = simulated.load_profile(scaled.PROFILE)
spec, drawn = scaled.cluster(out, setting, 6)
profile = scaled.cell_profile(base, spec, setting, "10", value)
found = search.etp_placement(spec, profile, 2000, 1, window=scaled.SEARCH_ITERATIONS)
(out / "placement.json").write_text(json.dumps({"drawn": drawn, "placement": found.placement,
                                                "makespan": found.makespan, "candidates": len(found.result.candidates)}))
print(drawn, found.makespan, len(found.result.candidates))
