"""Does the link rate decide the sign? Grouper on strict priority and on 64 : 32 : ... : 1,
the 60-host spec at 10 and 2.5 Gbit/s and the paper's cluster at 10 and 40 Gbit/s
(``python measurements/weights-why-2026-11-29/bandwidth.py`` from the checkout's root):
a slower network makes a run more network-bound, a faster one less."""
import json
import sys

sys.path.insert(0, "measurements/weights-why-2026-11-29")
import why  # noqa: E402

CASES = [("experiments/specs/grouper-sim-60.yaml", seed, mbps) for seed in (1, 2, 5) for mbps in (10000, 2500)] + \
        [("experiments/specs/grouper-sim-paper.yaml", seed, mbps) for seed in (1, 2, 3) for mbps in (10000, 40000)]


def simulate(path, seed, mbps, weights):
    raw = why.read_yaml(path)
    raw["topology"]["host_mbps"] = raw["topology"]["fabric_mbps"] = mbps
    raw.setdefault("emulation", {})["queue_weights"] = weights
    raw["seed"] = seed
    spec = why.simulated.validate(raw)
    spec["scheduler"]["name"] = "grouper"
    sim = why.simulated.build_simulation(spec, why.simulated.VARIANTS["iterations+compute"])
    res = sim.run()
    return why.gm.summarise(res.events, sim.coordinator.workload.to_dict())["avg_sct_s"]


for path, seed, mbps in CASES:
    strict = simulate(path, seed, mbps, None)
    weighted = simulate(path, seed, mbps, [64, 32, 16, 8, 4, 2, 1])
    print(json.dumps({"spec": path.split("/")[-1], "seed": seed, "mbps": mbps, "strict_avg_sct_s": round(strict, 2),
                      "weighted_avg_sct_s": round(weighted, 2), "change": f"{100 * (weighted / strict - 1):+.1f}%"}),
          flush=True)
