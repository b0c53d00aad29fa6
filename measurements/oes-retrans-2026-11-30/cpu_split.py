"""Where the box's CPU goes at 9 x 100 Mbit/s all-to-all with either NIC (as root:
``python measurements/oes-retrans-2026-11-30/cpu_split.py [CONGESTION]`` from the
checkout's root, nothing else running; writes cpu_split[-CONGESTION].jsonl beside
itself). The setup of ``capacity.py`` (BBR unless CONGESTION is given), two rounds
interleaved; per run, the box's CPU seconds by kind (/proc/stat: user, system,
softirq, idle) over the all-to-all and the OVS instances' share (``vswitchd_cores``)."""
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import capacity  # noqa: E402
from experiments.bench import all_to_all  # noqa: E402
from experiments.platform.net import EmulationOptions  # noqa: E402
from topologies.fabric import leaf_spine  # noqa: E402

KINDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_seconds() -> dict:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
    return {kind: int(v) / 100 for kind, v in zip(KINDS, fields)}  # USER_HZ = 100


if __name__ == "__main__":
    work = Path(tempfile.mkdtemp(prefix="cpu-split-"))
    fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=3, host_mbps=100.0, fabric_mbps=600.0)
    congestion = sys.argv[1] if len(sys.argv) > 1 else "bbr"
    with open(HERE / ("cpu_split.jsonl" if congestion == "bbr" else f"cpu_split-{congestion}.jsonl"), "w") as out:
        for i in range(2):
            for label in ("superpackets", "one segment"):
                capacity.use(label)
                before = cpu_seconds()
                r = all_to_all(EmulationOptions(), fabric, work / f"{label.replace(' ', '-')}-{i}", congestion=congestion)
                after = cpu_seconds()
                line = json.dumps({"nic": label, "round": i, "congestion": congestion, "min": round(r["min"], 3),
                                   "aggregate_mbps": round(r["aggregate_mbps"], 1),
                                   "vswitchd_cores": r["vswitchd_cores"],
                                   "cpu_s": {k: round(after[k] - before[k], 1) for k in KINDS}})
                print(line, flush=True)
                out.write(line + "\n")
