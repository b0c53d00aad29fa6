"""The weighted filling on random fabrics: ``python fabrics.py`` from the checkout's root.
Each fabric (tests/test_sim_weighted.py's generator; five queues weighted 0.5 to 100)
is filled and checked by the bottleneck conditions; prints the failures, then how many
sweeps the fillings took."""
import random, sys, time
sys.path.insert(0, "tests")
import numpy as np
from test_sim_weighted import _random_fabric, _bottlenecked
from experiments.sim.network import FluidNetwork
from experiments.sim import weighted, network
sweeps=[]
orig = weighted.weighted_filling
def wrap(*a):
    r = orig(*a); sweeps.append(r); return r
network.weighted_filling = wrap
weights = {1: 1.0, 2: 2.0, 3: 7.0, 4: 0.5, 5: 100.0}
t0=time.time(); bad=0
for seed in range(0, 6000, 2):
    rng = random.Random(seed)
    caps, flows = _random_fabric(rng, [1, 2, 3, 4, 5], ports=rng.randint(4, 20), groups=rng.randint(5, 120))
    net = FluidNetwork(caps, weights=weights)
    for f, h in flows: net.add(f, h, 1e12)
    try:
        rates = dict(zip((f for f, _ in flows), net.rates([f for f, _ in flows])))
        _bottlenecked(caps, flows, rates, weights)
    except Exception as e:
        bad+=1; print(seed, type(e).__name__, str(e)[:100])
print("bad", bad, "time", time.time()-t0, "sweeps per filling: max", max(sweeps), "median", np.median(sweeps), "p99", np.percentile(sweeps, 99))
