"""``trainbed run`` for the ``gnn`` workload kind: one spec -> one run directory.

Bring the fabric up, count the bytes every host hands to its switch, run the
driver (DGL tasks, OES or default scheduling) until training ends, read back the
installed rates, tear down, then analyse from the data files
(``experiments.gnn.metrics``). Any fault still leaves ``summary.json`` with
``"completed": false`` and the error (a failed task is named with its machine), the
events heard so far, and nothing running.

Files: ``events.jsonl``, ``decisions.jsonl`` (OES), ``rate_readback.jsonl``,
``flows.csv`` (per transfer: bytes, duration, achieved and target Mbit/s),
``tasks.log`` (the tasks' stderr), ``job/`` (graph partitions and the task config),
``raw/fabric_bytes.json``, ``cpu.csv``, ``profile.json`` (profiling runs).
"""
from __future__ import annotations

import csv
import json
import signal
import time
from pathlib import Path

from experiments import store
from experiments.emulation import spec as emulation_spec
from experiments.emulation.net import Emulation
from experiments.emulation.runner import CpuMonitor, finish_run, terminate_on_signals
from experiments.gnn import metrics
from experiments.gnn.driver import GnnDriver

MAX_READBACK_ERROR = 0.05  # a rate read back further than this from its target makes a run untrustworthy


def host_bytes_into_fabric(em: Emulation) -> dict[str, int]:
    """Per host: bytes its switch port has received from it (the switch end's rx)."""
    out = {}
    for link in em.fabric.host_links():  # the host is end a
        intf = link.intf(link.b)
        out[link.a] = int(Path(f"/sys/class/net/{intf}/statistics/rx_bytes").read_text())
    return out


def run_gnn_spec(spec: dict, out: str | None = None, progress=print) -> Path:
    run = store.start_run(spec, out)
    raw = run / "raw"
    previous = terminate_on_signals()
    cpu = CpuMonitor(time.monotonic())
    outages: list[dict] = []
    error: BaseException | None = None
    started = time.monotonic()
    driver_state: dict = {}
    try:
        with Emulation(emulation_spec.fabric_of(spec), run, options=emulation_spec.options_of(spec)) as em:
            events_path = str(em.record.path.parent / f"{em.run_id}.events.sock")
            em.record.add_file(events_path)
            before = host_bytes_into_fabric(em)
            cpu.start()
            driver = GnnDriver(em, spec, run, events_path, progress=progress)
            try:
                driver.run()
            finally:
                driver.close()
                cpu.stopped.set()
                cpu.join()
                store.write_json(raw / "fabric_bytes.json", {"before": before, "after": host_bytes_into_fabric(em)})
                readbacks = driver.oes.readback_errors if driver.oes is not None else []
                driver_state = {"readback_max_rel_error": max(readbacks, default=None),
                                "readbacks": len(readbacks), "edge_cut_share":
                                driver.config["edge_cut_share"], "placement": driver.tasks}
                store.write_json(raw / "driver.json", driver_state)
                outages = em.controller_outages(started)
    except BaseException as err:  # noqa: BLE001 - recorded in summary.json, re-raised as RunError
        error = err
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    cpu.write_csv(run / "cpu.csv")
    summary = {"name": spec["name"], "scheduler": spec["scheduler"]["name"], "seed": spec["seed"],
               "sync": spec["workload"]["sync"], "placement": spec["workload"]["placement"]["kind"],
               "wall_s": round(time.monotonic() - started, 1)}
    return finish_run(run, summary, error, lambda: analyse(spec, run, cpu, outages))


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def analyse(spec: dict, run: Path, cpu: CpuMonitor, outages: list[dict]) -> dict:
    events = _read_jsonl(run / "events.jsonl")
    decisions = _read_jsonl(run / "decisions.jsonl")
    train = metrics.training(events, spec["workload"]["target_accuracy"])
    transfers = metrics.flows(events, decisions)
    _write_flows(run / "flows.csv", transfers)
    if spec["workload"]["profile"]:
        store.write_json(run / "profile.json", metrics.profile(events))
    fabric_path, state_path = run / "raw" / "fabric_bytes.json", run / "raw" / "driver.json"
    counted = None
    if fabric_path.exists():  # a run that failed early has neither file
        fabric = json.loads(fabric_path.read_text())
        counted = sum(fabric["after"][h] - fabric["before"][h] for h in fabric["before"])
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    rel_error = state.get("readback_max_rel_error")
    idle = cpu.idle_share() if cpu.samples else 1.0
    reasons = []
    if idle < spec["fidelity"]["min_cpu_idle"]:
        reasons.append(f"CPU idle share {idle:.2f} < {spec['fidelity']['min_cpu_idle']:.2f}")
    reasons += [f"controller outage at {o['start_s']:.1f} s" for o in outages]
    if rel_error is not None and rel_error > MAX_READBACK_ERROR:
        reasons.append(f"an installed rate is {rel_error:.1%} off its OES target")
    ratios = [f["achieved_mbps"] / f["target_mbps"] for f in transfers
              if f["target_mbps"] and f["achieved_mbps"] and f["bytes"] >= 100_000]
    return {**train, "reported_transfer_bytes": sum(f["bytes"] for f in transfers),
            "fabric_counted_bytes": counted, "transfers": len(transfers),
            "oes_rate_max_rel_error": rel_error, "rate_readbacks": state.get("readbacks", 0),
            "achieved_over_target_median": round(sorted(ratios)[len(ratios) // 2], 3) if ratios else None,
            "rate_updates": metrics.rate_updates(decisions), "compute_s_per_iteration": metrics.compute_by_task(events),
            "edge_cut_share": state.get("edge_cut_share"), "task_placement": state.get("placement"),
            "cpu_idle_share": idle, "controller_outages": outages,
            "fidelity": {"cpu_idle_share": idle, "untrustworthy_reasons": reasons, "trustworthy": not reasons},
            "trustworthy": not reasons}


def _write_flows(path: Path, rows: list[dict]) -> None:
    fields = ["flow", "src", "dst", "src_task", "dst_task", "phase", "iteration", "bytes", "start_t", "duration_s",
              "achieved_mbps", "target_mbps"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
