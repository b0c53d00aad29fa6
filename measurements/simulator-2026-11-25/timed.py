"""One timed run of this checkout's simulator (run from the checkout, PYTHONPATH=it):
  timed.py cojob SCHEDULER SEED     grouper-sim-paper.yaml's cell: wall s, avg SCT, flows
  timed.py trace SCHEDULER          the authors' full trace (grouper-trace-full.yaml, 40 cojobs): the same
  timed.py gnn SCHEDULER ITERATIONS the papers100M setting's model, DistDGL's placement: wall s, end
  timed.py churn QUEUES             bench_network (2,400 flows, 20 ports, 20,000 transfers): us a transfer"""
import sys, time

kind = sys.argv[1]
if kind == "cojob":
    from experiments.cojob.bench import _simulated_s
    wall, summary = _simulated_s("experiments/specs/grouper-sim-paper.yaml", sys.argv[2], int(sys.argv[3]))
    print(f"cojob {sys.argv[2]} seed {sys.argv[3]} wall_s {wall:.1f} avg_sct_s {summary['avg_sct_s']!r} "
          f"flows {summary['flows']}")
elif kind == "trace":
    from experiments.cojob.bench import TRACE_FULL, _simulated_s
    wall, summary = _simulated_s(TRACE_FULL, sys.argv[2])
    print(f"trace {sys.argv[2]} wall_s {wall:.1f} avg_sct_s {summary['avg_sct_s']!r} flows {summary['flows']}")
elif kind == "gnn":
    from experiments.gnn import scaled, search, simulated
    setting = scaled.SETTINGS["papers100m"]
    spec, _ = scaled.paper_spec(setting, 0)
    profile = scaled.cell_profile(simulated.load_profile(scaled.PROFILE), spec, setting, "10", 1.0)
    trial = search.with_placement(spec, spec["workload"]["placement"]["tasks"])
    t = time.perf_counter()
    r = simulated.GnnSimulation(trial, profile, int(sys.argv[3]), sys.argv[2]).run()
    print(f"gnn {sys.argv[2]} iterations {sys.argv[3]} wall_s {time.perf_counter() - t:.1f} end_s {r.end_s!r}")
elif kind == "churn":
    from experiments.sim.network import bench_network
    print(f"churn {sys.argv[2]}q us {1e6 * bench_network(transfers=20000, queues=int(sys.argv[2])):.1f}")
