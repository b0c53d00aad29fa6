"""Fig. 8's mixed testbed: why ETP's pick is slower than DistDGL's placement in the job's
model. Eq. 27's critical path (the cost ETP walks by) and the model's makespan (what
it picks by, among candidates within (1 + gamma) of the least cost) for DistDGL's
placement and for ETP's, and what the critical path is made of."""
import sys
from collections import Counter
from pathlib import Path

import yaml

from controller.schedulers.placement.dag import cost, execution_dag
from controller.schedulers.placement.etp import etp
from experiments.gnn import search, simulated
from experiments.gnn import spec as gnn_spec
from topologies.fabric import simulated_rates

SPEC, PROFILE = sys.argv[1], sys.argv[2]
K = search.WINDOW
raw = yaml.safe_load(Path(SPEC).read_text())
raw["workload"]["placement"] = "distdgl"
with simulated_rates():
    spec = gnn_spec.validate(raw)
profile = simulated.load_profile(PROFILE)
problem = search.problem_from_profile(spec, profile)
makespan = search.makespan(spec, profile, K)


def full(tasks):
    placement = dict(tasks)
    for t, task in problem.tasks.items():
        if task.worker is not None:
            placement[t] = placement[task.worker]
    return placement


found = etp(problem, search.DEFAULT_STEPS, 1, makespan=makespan)
best = min(c.cost for c in found.candidates)
placements = {"DistDGL": full(spec["workload"]["placement"]["tasks"]), "ETP's pick": found.placement}
print(f"ETP: {len(found.candidates)} candidates, least Eq. 27 cost {best / K:.2f} s/iteration")
for name, placement in placements.items():
    c = cost(problem, placement, K)
    dag = execution_dag(problem, placement, K)
    path = dag.critical_path()
    weight = dict(zip(dag.vertices, dag.weights))
    share = Counter()
    for v in path.vertices:
        kind = v[0] if v[0] == "task" else ("ring" if "/ring" in v[1] else problem.tasks[v[1]].kind + "->"
                                             + problem.tasks[v[2]].kind)
        share[kind] += weight[v]
    workers = {t: placement[t] for t in placement if problem.tasks[t].kind == "worker"}
    print(f"{name}: workers {workers}")
    print(f"  Eq. 27 critical path {c.critical_path_s / K:.2f} s/iteration (penalty {c.penalty:g}), "
          f"within the filter: {c.value <= best * 1.1}; of it: "
          + ", ".join(f"{k} {v / K:.2f}" for k, v in share.most_common()))
    tasks = {t: placement[t] for t in spec["workload"]["placement"]["tasks"]}
    for scheduler in ("oes", "default"):
        predicted = simulated.predict(search.with_placement(spec, tasks), profile, K, scheduler)
        print(f"  model, {scheduler}: {predicted:.2f} s/iteration")
