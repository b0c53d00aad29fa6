"""How much of a PS's barrier is spent waiting, on strict priority, packed against
spread (``python measurements/weights-workload-2026-11-30/slack.py`` from the
checkout's root; the paper's cluster and with testbed arrivals, as factors.py has
them, seeds 1-3, Grouper on strict priority).

A PS's barrier (one iteration's pushes from every worker of a job) ends with its
last push; a push that ends before it was faster than the barrier needed. `slack`:
per barrier, the mean over its early pushes of (last end - the push's end) / (last
end - the barrier's first start), 0 where all end together; averaged over barriers.
Bandwidth an early push took, a queue below could have had at no cost to the
barrier: what a weighted share hands down. Also the time-averaged share of each
port class's capacity in use (host NICs: a host's own ports; the rest: the fabric)."""
import collections
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from experiments.cojob import simulated  # noqa: E402
from experiments.sim import network  # noqa: E402
from factors import spec_for  # noqa: E402

PUSH = simulated.cojob_mod.PUSH


def run(spread: bool, testbed_arrivals: bool, seed: int):
    spec = simulated.validate(spec_for(spread, testbed_arrivals, False, seed, None))
    sim = simulated.build_simulation(spec, simulated.VARIANTS["iterations+compute"])
    pushes = collections.defaultdict(list)  # (job, ps) -> [(start, end, workers)] in end order
    started = {}
    cls = type(sim)
    real_start, real_end, real_deliver = cls.start_flow, cls.flow_end, network.FluidNetwork._deliver

    def start_flow(self, job, phase, w, p, nbytes):
        flow = real_start(self, job, phase, w, p, nbytes)
        if flow is not None and phase == PUSH:
            started[flow] = self.now
        return flow

    def flow_end(self, flow, ended):
        job, phase, w, p = ended
        if flow in started:
            pushes[(job.key, p)].append((started.pop(flow), self.now, len(job.placement.workers)))
        return real_end(self, flow, ended)

    carried = [np.zeros(0)]  # by port index: bytes carried

    def deliver(self, tau):
        dt = tau - getattr(self, "_probe_t", 0.0)
        if dt > 0:
            n = self._gport.shape[1]
            moved = self._rate[:n] * dt
            if len(carried[0]) < len(self._pcap):
                carried[0] = np.concatenate([carried[0], np.zeros(len(self._pcap) - len(carried[0]))])
            for row in self._gport:
                live = row >= 0
                np.add.at(carried[0], row[live], moved[live])
        self._probe_t = tau
        return real_deliver(self, tau)

    cls.start_flow, cls.flow_end, network.FluidNetwork._deliver = start_flow, flow_end, deliver
    try:
        sim.run()
    finally:
        cls.start_flow, cls.flow_end, network.FluidNetwork._deliver = real_start, real_end, real_deliver
    slacks = []
    for ends in pushes.values():
        n = ends[0][2]
        for i in range(0, len(ends) - n + 1, n):
            barrier = ends[i:i + n]
            first, last = min(s for s, _, _ in barrier), max(e for _, e, _ in barrier)
            early = [(last - e) / (last - first) for _, e, _ in barrier if e < last]
            if last > first:
                slacks.append(statistics.mean(early) if early else 0.0)
    net = sim.net
    use = collections.defaultdict(list)
    for name, pid in net._pid.items():
        share = carried[0][pid] / (net._pcap[pid] * net.now) if pid < len(carried[0]) else 0.0
        use["host" if name.startswith("tbh") else "fabric"].append(share)
    return slacks, {k: (len(v), float(np.mean(v)), float(np.max(v))) for k, v in use.items()}, None


if __name__ == "__main__":
    for testbed_arrivals in (False, True):
        for spread in (False, True):
            for seed in (1, 2, 3):
                slacks, use, sample = run(spread, testbed_arrivals, seed)
                print(f"{'spread' if spread else 'packed'}{', testbed arrivals' if testbed_arrivals else ''} "
                      f"seed {seed}: barriers {len(slacks)}, slack mean "
                      f"{statistics.mean(slacks):.3f} median {statistics.median(slacks):.3f}; ports in use "
                      + "; ".join(f"{k} {n} mean {m:.3f} max {x:.3f}" for k, (n, m, x) in use.items()), flush=True)
