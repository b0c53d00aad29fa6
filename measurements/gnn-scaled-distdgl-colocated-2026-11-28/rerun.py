"""Figs. 10-11's DistDGL + OES rows again under DistDGL's co-located placement (545aa56).

    python measurements/gnn-scaled-distdgl-colocated-2026-11-28/rerun.py SETTING OLD NEW

Copies OLD's cluster record and figure CSVs into NEW, then runs only the DistDGL + OES
design of every cell there on the job's model (the same profile, cluster draw and
iterations as OLD's rows), and writes the figures again. The other designs run on
ETP's placement, which DistDGL's rule does not touch (ETP's chain starts from IFS),
so their rows are OLD's. Prints each cell's busiest-NIC floor for DistDGL's
placement (``scaled.nic_floors``' ``distdgl_nic_s``) beside the new iteration time.
"""
import json
import shutil
import sys
import time
from pathlib import Path

from controller.schedulers.placement.problem import nic_seconds
from experiments.gnn import scaled, search, simulated

setting_name, old, new = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
setting = scaled.SETTINGS[setting_name]
new.mkdir(parents=True, exist_ok=True)
for name in ("cluster.json", "figure-10.csv", "figure-11.csv"):
    if (old / name).exists():
        shutil.copy(old / name, new / name)
drawn = json.loads((new / "cluster.json").read_text())[setting.name]
spec, _ = scaled.cluster(new, setting, drawn)
distdgl = spec["workload"]["placement"]["tasks"]
base = simulated.load_profile(scaled.PROFILE)
rows = scaled.read(new, setting)
for row in rows:
    if row["design"] != "DistDGL + OES":
        continue
    figure, value = row["figure"], row[scaled.COLUMNS[row["figure"]]]
    profile = scaled.cell_profile(base, spec, setting, figure, value)
    problem = search.problem_from_profile(spec, profile)
    theirs = {t: distdgl[task.worker] if task.kind == "allreduce" else distdgl[t]
              for t, task in problem.tasks.items()}
    started = time.perf_counter()
    iteration_s = scaled.run_cell(spec, profile, distdgl, "oes", int(row["iterations"]))
    print(f"Fig. {figure} {value}: DistDGL + OES {row['iteration_s']:.3f} -> {iteration_s:.3f} s per iteration "
          f"(busiest NIC floor {nic_seconds(problem, theirs):.2f} s; {time.perf_counter() - started:.0f} s)",
          flush=True)
    row["iteration_s"] = round(iteration_s, 4)
    scaled.write(new, rows, setting)
