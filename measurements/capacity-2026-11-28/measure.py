"""The default fabric's all-to-all with the switches' port sockets sized (``sized``,
the default since this log) and at the kernel's default receive buffer (``default``,
as before), side by side: rounds interleaved, the bench's own ``all_to_all``.

    .venv/bin/python measurements/capacity-2026-11-28/measure.py OUT_DIR [ROUNDS]
"""
import json
import sys
from pathlib import Path

from experiments import bench
from experiments.platform.net import Emulation
from topologies.fabric import leaf_spine

CASES = [(6, 100.0), (9, 100.0), (24, 25.0)]
sized = Emulation._size_receive_buffers


def main() -> None:
    out, rounds = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for n_hosts, mbps in CASES:
        per_leaf = n_hosts // 3
        fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=per_leaf, host_mbps=mbps,
                            fabric_mbps=min(1000.0, mbps * per_leaf * 2))
        for i in range(rounds):
            for label in ("default", "sized"):
                Emulation._size_receive_buffers = sized if label == "sized" else (lambda self, instance, ports: None)
                r = bench.all_to_all(bench.MODES["new"], fabric, out / f"a2a-{n_hosts}-{label}-{i}")
                r.update(case=f"{n_hosts}x{mbps:g}", receive_buffers=label, round=i)
                results.append(r)
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
                (out / "runs.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
