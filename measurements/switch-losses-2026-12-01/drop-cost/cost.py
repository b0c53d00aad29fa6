"""What dropping one packet per refusal costs the switches: make bench's all-to-all
(24 hosts x 25 Mbit/s, leaf-spine 3 x 2, BBR) under switch_drop batch and packet,
rounds interleaved; per run the goodput, the switches' cores and drops, as JSON lines.
usage: cost.py OUT_DIR ROUNDS"""
import json
import sys
from pathlib import Path

from experiments.bench import all_to_all
from experiments.platform.net import EmulationOptions
from topologies.fabric import leaf_spine

out, rounds = Path(sys.argv[1]), int(sys.argv[2])
fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=8, host_mbps=25.0, fabric_mbps=400.0)
with open(out / "runs.jsonl", "a") as log:
    for i in range(rounds):
        for mode in ("batch", "packet"):
            r = all_to_all(EmulationOptions(switch_drop=mode), fabric, out / f"a2a-{mode}-{i}")
            r = {"mode": mode, "round": i, **r}
            log.write(json.dumps(r) + "\n")
            log.flush()
            print(mode, i, {k: r[k] for k in ("min", "median", "cpu_idle", "cpu_lost", "vswitchd_cores",
                                              "queue_drops", "retransmitted_share", "trustworthy")}, flush=True)
