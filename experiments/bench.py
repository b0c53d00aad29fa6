"""``make bench``: the fabric's speed and fidelity figures, measured side by side.

Not a test: it prints each figure next to its target as a ratio, on this box
as it is now (noisy, 2 cores). Figures go in the README.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from experiments.emulation import spec as spec_mod
from experiments.emulation.metrics import per_second
from experiments.emulation.net import Emulation
from experiments.emulation.runner import run_spec
from hosts.traffic import receiver_series
from topologies.fabric import leaf_spine

TARGETS = {"up_s": 15.0, "down_s": 5.0, "policy_p99_ms": 100.0, "goodput_ratio": 0.93, "high_share": 0.95}


def line(name: str, value: float, target: float, unit: str, lower_is_better: bool) -> str:
    ok = value <= target if lower_is_better else value >= target
    ratio = value / target
    return f"{name:<44} {value:9.3f} {unit:<7} target {'<=' if lower_is_better else '>='} {target:g}  " \
           f"ratio {ratio:5.2f}  {'OK' if ok else 'MISS'}"


def bench_bring_up_and_policies(workdir: Path) -> list[str]:
    fabric = leaf_spine(spines=3, leaves=3, hosts_per_leaf=8)
    em = Emulation(fabric, workdir / "bringup")
    t = time.monotonic()
    em.__enter__()
    up = time.monotonic() - t
    try:
        latencies = []
        hosts = [h.name for h in fabric.hosts]
        for i in range(100):
            src, dst = hosts[i % 24], hosts[(i * 7 + 5) % 24]
            if src == dst:
                dst = hosts[(i + 1) % 24]
            t = time.monotonic()
            em.client.set_policy(src=src, dst=dst, proto="tcp", dst_port=6000 + i, queue=1 + i % 7)
            latencies.append((time.monotonic() - t) * 1000)
        # The call returns after the switch's barrier reply; confirm the rules are really there.
        dumped = sum(subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", s.name, "table=0"],
                                    capture_output=True, text=True, env=em.ovs_env_of(s.name)).stdout.count("tp_dst=")
                     for s in fabric.switches)
    finally:
        t = time.monotonic()
        em.stop()
        down = time.monotonic() - t
    p99 = statistics.quantiles(latencies, n=100)[98]
    return [line("bring-up, 3x3 leaf-spine, 24 hosts [s]", up, TARGETS["up_s"], "s", True),
            line("tear-down, same fabric [s]", down, TARGETS["down_s"], "s", True),
            line(f"policy call -> rule in switch, p99 of 100 (p50 {statistics.median(latencies):.1f}) ",
                 p99, TARGETS["policy_p99_ms"], "ms", True),
            f"{'rules visible in ovs-ofctl after the calls':<44} {dumped:9d} of 100"]


def all_to_all_spec(hosts_per_leaf: int, duration: float) -> dict:
    """Every host sends to every other; the fabric links are fast enough (non-blocking
    even if ECMP puts every flow of a leaf on one spine) that only host links bottleneck."""
    fabric_mbps = 100.0 * hosts_per_leaf * 2
    fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=hosts_per_leaf)
    names = [h.name for h in fabric.hosts]
    flows = [{"name": f"{a}-{b}", "src": a, "dst": b} for a in names for b in names if a != b]
    return spec_mod.validate({"name": f"all-to-all-{len(names)}", "duration_s": duration, "flows": flows,
                              "topology": {"kind": "leaf_spine", "spines": 2, "leaves": 3,
                                           "hosts_per_leaf": hosts_per_leaf, "fabric_mbps": fabric_mbps}})


def bench_all_to_all(workdir: Path) -> list[str]:
    out = []
    for hosts_per_leaf in (1, 2):
        spec = all_to_all_spec(hosts_per_leaf, 12)
        run = run_spec(spec, out=str(workdir / spec["name"]))
        summary = json.loads((run / "summary.json").read_text())
        n = len(spec["flows"])
        per_host = summary["fidelity"]["host_link_goodput"]
        for what in ("sent", "received"):
            ratios = [r[what] for r in per_host.values()]
            out.append(line(f"all-to-all, {len(ratios)} hosts, {n} flows: min {what}", min(ratios),
                            TARGETS["goodput_ratio"], "of rate", False) + f"  (median {statistics.median(ratios):.3f})")
        out.append(f"{'':<44} CPU idle {summary['cpu_idle_share']:.2f}, trustworthy {summary['trustworthy']}")
    return out


def bench_priority_and_rate_limits(workdir: Path) -> list[str]:
    out = []
    base = spec_mod.load(Path(__file__).parent / "specs" / "priority-demo.yaml")
    for mechanism in ("host", "meter"):
        spec = json.loads(json.dumps(base))
        spec["name"] = f"bench-priority-{mechanism}"
        spec["policy_changes"][0]["rate_mechanism"] = mechanism
        run = run_spec(spec, out=str(workdir / spec["name"]))
        summary = json.loads((run / "summary.json").read_text())
        change = spec["policy_changes"][0]
        series = receiver_series((run / "raw" / "low.server.json").read_text(), 0.0)
        samples = [mbps for t, mbps in per_second(series).items() if t >= change["at_s"] + 1]
        target = change["rate_mbps"]
        mean_err = abs(statistics.fmean(samples) - target) / target
        per_second_err = statistics.fmean(abs(s - target) / target for s in samples)
        if mechanism == "host":
            out.append(line("high-priority share while both run", summary["high_share_while_both"],
                            TARGETS["high_share"], "", False))
            out.append(f"{'low flow back to 90% after [s]':<44} {summary['low_recovery_s']:9.3f}")
        out.append(f"{'rate limit ' + mechanism + f' (target {target:g} Mbit/s)':<44} mean "
                   f"{statistics.fmean(samples):6.2f} Mbit/s, mean error {mean_err:6.1%}, "
                   f"per-second error {per_second_err:6.1%}")
    return out


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trainbed-bench-") as tmp:
        workdir = Path(tmp)
        lines = bench_bring_up_and_policies(workdir)
        lines += bench_all_to_all(workdir)
        lines += bench_priority_and_rate_limits(workdir)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
