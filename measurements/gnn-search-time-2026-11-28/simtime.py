"""One 20-iteration simulation of IFS's placement on the tight star, timed under the 320 KB and
the 1.66 MB send backlog alternately (README: why both searches took longer)."""
import time, yaml
from experiments.gnn import search, simulated, searchbench
from experiments.gnn import spec as gnn_spec
from topologies.fabric import simulated_rates
profile = simulated.load_profile(searchbench.PROFILE)
raw = yaml.safe_load(searchbench.TIGHT.read_text()); raw["workload"]["placement"] = "distdgl"
with simulated_rates():
    spec = gnn_spec.validate(raw)
place = search.ifs_placement(spec, profile)
sim = search.makespan(spec, profile)
for rep in range(3):  # alternating, so both backlogs see the same load
    for backlog in (320_000, 1_660_000):
        simulated.SEND_BACKLOG_BYTES = backlog
        t = time.perf_counter(); m = sim(place); t = time.perf_counter() - t
        print(rep, backlog, round(m, 2), f"{t:.2f} s", flush=True)
