"""The job's model's send backlog (``simulated.SEND_BACKLOG_BYTES``) against kept runs.

    .venv/bin/python measurements/model-sendbuffer-2026-11-27/sendbuffer.py > OUT

1. Emulated, every kept gnn run: the bytes of a mini-batch still undelivered when its
   send returned, per run and pooled by scheduler. The sampler emits its ``compute`` event right
   after the mini-batch's send returns (``hosts.gnn.task.Sampler.run``; evaluation
   iterations excluded, where an evaluation batch is sent in between); the bytes left
   are the frame's bytes times the share of its transfer (flow_start to flow_end)
   still to come, a constant rate assumed.
2. The model against every run ``tests/test_gnn_model_fidelity.py`` checks (each
   predicted from its job's profile, as the test does) with the backlog at 320 KB (the
   constant until this measurement) and at the pooled OES median of part 1 (the
   constant since): predicted / measured mean iteration - 1.
3. The heterogeneous star of 2026-11-25 (each run from its own events' profile, as
   ``compare``) at 320 KB, 1 MB, 1.5 MB, 2 MB and the constant.
4. Its spread placement under OES, seed 1: the share of the simulated time the
   bottleneck port (tbh3's 20 Mbit/s ingress) carries nothing, and its load.
5. The same port emulated, every spread cell: the payload bytes it carried between
   worker 0's first and 25th iteration ends, over 20 Mbit/s times that window.

``sendbuffer.py PART...`` prints only those parts (all by default).
"""
from __future__ import annotations

import csv
import gzip
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.gnn import simulated  # noqa: E402

CELLS = ROOT / "measurements/gnn-hetero-2026-11-25/cells"
OLD, NEW = 320 * 1024, simulated.SEND_BACKLOG_BYTES
SIZES = (OLD, 1024 * 1024, 1536 * 1024, 2048 * 1024, NEW)


def backlog_at_return(run: Path) -> dict[str, list[float]]:
    events = [json.loads(line) for line in gzip.open(run / "events.jsonl.gz", "rt")]
    starts = {e["flow"]: e for e in events if e["kind"] == "flow_start" and e.get("phase") == "minibatch"}
    ends = {e["flow"]: e["t"] for e in events if e["kind"] == "flow_end"}
    computed = {(e["task"], e["iteration"]): e for e in events if e["kind"] == "compute"
                and e["task"].startswith("sampler")}
    left: dict[str, list[float]] = {}
    for flow, start in starts.items():
        done = computed.get((start["src_task"], start["iteration"]))
        if flow not in ends or done is None or "eval_rounds" in done or start["src"] == start["dst"]:
            continue  # an evaluation iteration's, or a profiling run's same-machine frame (loopback)
        share = max(0.0, 1 - (done["t"] - start["t"]) / (ends[flow] - start["t"]))
        left.setdefault(f"{start['src_task']}->{start['dst_task']} ({start['src']}->{start['dst']})", []).append(
            share * start["bytes"] / 1e3)
    return left


def idle_share(run: Path, backlog: int) -> tuple[float, float]:
    simulated.SEND_BACKLOG_BYTES = backlog
    spec = simulated.read_yaml(run / "spec.yaml", "spec.yaml", "run spec")
    sim = simulated.GnnSimulation(spec, simulated.run_profile(run), 25)
    net, port, capacity = sim.net, "tbh3/in", sim.paths.capacity["tbh3/in"]
    hops, clock, idle, carried = {}, [0.0], [0.0], [0.0]
    add, advance = net.add, net.advance

    def counted_add(flow, path, nbytes):
        hops[flow] = path
        return add(flow, path, nbytes)

    def counted_advance(t):
        load = sum(net.rate(f) for f, path in hops.items() if f in net and any(p == port for p, _ in path))
        carried[0] += load * (t - clock[0])
        if load < 0.01 * capacity:
            idle[0] += t - clock[0]
        clock[0] = t
        delivered = advance(t)
        for flow in delivered:
            hops.pop(flow, None)
        return delivered
    net.add, net.advance = counted_add, counted_advance
    end = sim.run().end_s
    return idle[0] / end, carried[0] / capacity / end


def emulated_load(run: Path, port_host: str = "tbh3") -> float:
    events = [json.loads(line) for line in gzip.open(run / "events.jsonl.gz", "rt")]
    ends = [e["t"] for e in events if e["kind"] == "iteration_end" and e["task"] == "worker0"]
    first, last = ends[0], ends[min(24, len(ends) - 1)]
    rows = csv.DictReader(gzip.open(run / "flows.csv.gz", "rt"))
    carried = sum(int(r["bytes"]) for r in rows
                  if r["dst"] == port_host and r["src"] != port_host and first <= float(r["start_t"]) < last)
    return carried * 8 / 20e6 / (last - first)


def main(parts: set[str]) -> None:
    import yaml  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, str(ROOT / "tests"))
    import test_gnn_model_fidelity as fidelity  # pylint: disable=import-outside-toplevel
    if "1" in parts:
        part1(yaml)
    if "2" in parts:
        part2(fidelity)
    if "3" in parts:
        part3()
    if "4" in parts:
        part4()
    if "5" in parts:
        print("\n## 5. emulated, the spread placement: tbh3/in payload load, iterations 1-25")
        for run in sorted(CELLS.glob("*placement-spread")):
            print(f"{run.name}: {emulated_load(run):.3f} of 20 Mbit/s")


def part1(yaml) -> None:
    print("## 1. emulated: KB of a mini-batch undelivered when its send returned (median; pooled: quartiles)")
    pooled: dict[str, list[float]] = {}
    for events in sorted(ROOT.glob("measurements/gnn-*/**/events.jsonl.gz")):
        run = events.parent
        scheduler = yaml.safe_load((run / "spec.yaml").read_text())["scheduler"]["name"]
        kbs = sorted(kb for each in backlog_at_return(run).values() for kb in each)
        if kbs:
            pooled.setdefault(scheduler, []).extend(kbs)
            print(f"{run.relative_to(ROOT)} ({scheduler}): n={len(kbs)} median {statistics.median(kbs):.0f}")
    for scheduler, kbs in sorted(pooled.items()):
        kbs.sort()
        print(f"pooled {scheduler}: n={len(kbs)} median {statistics.median(kbs):.0f} "
              f"(quartiles {kbs[len(kbs) // 4]:.0f}-{kbs[3 * len(kbs) // 4]:.0f})")


def part2(fidelity) -> None:
    print(f"\n## 2. the model against the fidelity test's runs: error at {OLD} and {NEW} bytes")
    errors = {OLD: {}, NEW: {}}
    for run, profile in fidelity.runs().items():
        cells = []
        for backlog in (OLD, NEW):
            simulated.SEND_BACKLOG_BYTES = backlog
            row = simulated.compare(run, profile)
            errors[backlog].setdefault(row["scheduler"], []).append(row["error"])
            cells.append(f"{100 * row['error']:+.1f}%")
        print(f"{run.relative_to(ROOT)} ({row['scheduler']}, {row['placement']}): measured "
              f"{row['measured_iteration_s']:.3f} s; {' -> '.join(cells)}")
    for backlog, by in errors.items():
        for scheduler, each in sorted(by.items()):
            print(f"{backlog} bytes, {scheduler}: n={len(each)} {100 * min(each):+.1f}% .. {100 * max(each):+.1f}%, "
                  f"mean {100 * statistics.fmean(each):+.1f}%")


def part3() -> None:
    print("\n## 3. the heterogeneous star (own profiles): error by backlog")
    for backlog in SIZES:
        simulated.SEND_BACKLOG_BYTES = backlog
        for run in sorted(CELLS.glob("*")):
            row = simulated.compare(run)
            print(f"{backlog} bytes {run.name}: measured {row['measured_iteration_s']:.3f} s, predicted "
                  f"{row['predicted_iteration_s']:.3f} s, {100 * row['error']:+.1f}%")


def part4() -> None:
    print("\n## 4. the model, spread placement under OES, seed 1: tbh3/in idle share and load")
    for backlog in (OLD, NEW):
        idle, load = idle_share(CELLS / "sched-oes_seed-1_workload.placement-spread", backlog)
        print(f"{backlog} bytes: idle {idle:.3f}, load {load:.3f} of 20 Mbit/s (wire bytes)")


if __name__ == "__main__":
    main(set(sys.argv[1:]) or {"1", "2", "3", "4", "5"})
