"""``trainbed run`` for the ``gnn`` workload kind (through ``experiments.platform.run``).

Count the bytes every host hands to its switch, run the driver (DGL tasks, OES or
default scheduling) until training ends, read back the installed rates, collect the
fabric counters, then analyse from the data files (``experiments.gnn.metrics``; the
verdict and ``switch_loss_share`` as every kind's, ``experiments.platform.fidelity``).
Any fault still leaves ``summary.json`` with ``"completed": false`` and the error (a
failed task is named with its machine), the events heard so far, and nothing running.

Files: ``events.jsonl``, ``decisions.jsonl`` (OES), ``rate_readback.jsonl``,
``flows.csv`` (per transfer: bytes, duration, achieved and target Mbit/s),
``tasks.log`` (the tasks' stderr), ``job/`` (graph partitions and the task config),
``raw/fabric_bytes.json``, ``raw/queue_counters.json``, ``raw/switch_packets.json``,
``raw/tcp_counters.json`` (the hosts' TCP account: the summary's ``tcp``),
``cpu.csv``, ``profile.json`` (profiling runs: ``metrics.profile`` with the run's
verdict), ``placement_trace.csv`` (an ``etp`` placement: the search's steps,
``search.write_trace``). The summary's ``predicted_iteration_s`` is the job's model's
(``experiments.gnn.simulated``) for the run's placement and scheduler.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from experiments import store
from experiments.gnn import metrics
from experiments.gnn.driver import GnnDriver
from experiments.platform.cpu import CpuMonitor
from experiments.platform.fidelity import collect_fabric_counters, fidelity_fields, host_bytes
from experiments.platform.net import Emulation
from experiments.platform.run import run_workload
from experiments.stats import percentile

MAX_READBACK_ERROR = 0.05  # a rate read back further than this from its target makes a run untrustworthy
PROFILE_ITERATIONS = 50  # the first iterations a profiling run's profile.json holds


def host_bytes_into_fabric(em: Emulation) -> dict[str, int]:
    """Per host: bytes its switch port has received from it."""
    return {host: sent for host, (sent, _received) in host_bytes(em).items()}


class GnnWorkload:
    """DGL tasks with their driver (OES or default), the bytes hosts sent into the fabric,
    and the fabric's counters."""

    def __init__(self, spec: dict, run: Path, progress=print):
        self.spec, self.run_dir, self.progress = spec, run, progress
        self.driver: GnnDriver | None = None
        self.bytes_before: dict[str, int] = {}
        self.t0 = None  # run times count from the run's start

    def start(self, em: Emulation, events_path: str) -> None:
        placement = self.spec["workload"]["placement"]
        if placement["kind"] == "etp" and "steps" in placement:  # searched, not checked for errors only
            from experiments.gnn import search  # pylint: disable=import-outside-toplevel  # reads the model
            found = search.remembered(self.spec, placement)
            if found is not None:  # the search that resolved the spec here: its step trace
                search.write_trace(self.run_dir / "placement_trace.csv", found)
            else:
                self.progress("placement: as the spec records it (searched by an earlier run: no step trace)")
        self.bytes_before = host_bytes_into_fabric(em)
        self.driver = GnnDriver(em, self.spec, self.run_dir, events_path, progress=self.progress)

    def run(self) -> None:
        self.driver.run()

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.close()

    def collect(self, em: Emulation) -> list[str]:
        """Every counter file; the fabric counters that could not be read, named."""
        raw = self.run_dir / store.RAW
        store.write_json(raw / "fabric_bytes.json", {"before": self.bytes_before, "after": host_bytes_into_fabric(em)})
        unread = collect_fabric_counters(em, raw)
        if self.driver is not None:
            readbacks = self.driver.oes.readback_errors if self.driver.oes is not None else []
            store.write_json(raw / "driver.json", {"readback_max_rel_error": max(readbacks, default=None),
                                                   "readbacks": len(readbacks),
                                                   "edge_cut_share": self.driver.config["edge_cut_share"],
                                                   "placement": self.driver.tasks})
        return unread

    def summary_fields(self) -> dict:
        return {"scheduler": self.spec["scheduler"]["name"], "seed": self.spec["seed"],
                "sync": self.spec["workload"]["sync"], "placement": self.spec["workload"]["placement"]["kind"]}

    def analyse(self, cpu: CpuMonitor, outages: list[dict]) -> dict:
        return analyse(self.spec, self.run_dir, cpu, outages)


def run_gnn_spec(spec: dict, out: str | None = None) -> Path:
    return run_workload(spec, out, GnnWorkload)


def analyse(spec: dict, run: Path, cpu: CpuMonitor, outages: list[dict]) -> dict:
    events = store.read_jsonl(run / store.EVENTS, missing_ok=True)
    decisions = store.read_jsonl(run / store.DECISIONS, missing_ok=True)
    train = metrics.training(events, spec["workload"]["target_accuracy"])
    transfers = metrics.flows(events, decisions)
    metrics.write_flows(run / store.FLOWS, transfers)
    fabric_path, state_path = run / store.RAW / "fabric_bytes.json", run / store.RAW / "driver.json"
    counted = None
    if fabric_path.exists():  # a run that failed early has neither file
        fabric = json.loads(fabric_path.read_text())
        counted = sum(fabric["after"][h] - fabric["before"][h] for h in fabric["before"])
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    rel_error = state.get("readback_max_rel_error")
    readback_reasons = ([f"an installed rate is {rel_error:.1%} off its OES target"]
                        if rel_error is not None and rel_error > MAX_READBACK_ERROR else [])
    ratios = [f["achieved_mbps"] / f["target_mbps"] for f in transfers
              if f["target_mbps"] and f["achieved_mbps"] and f["bytes"] >= 100_000]
    ids = run / "job" / "graph" / "ids.npz"  # the job's training nodes (absent if it never started)
    train_nodes = len(np.load(ids)["train"]) if ids.exists() else 0
    fidelity = fidelity_fields(cpu, spec["fidelity"], outages, run / store.RAW, readback_reasons,
                               cpu_window=metrics.iteration_window(events))
    if spec["workload"]["profile"]:
        store.write_json(run / metrics.PROFILE_FILE, metrics.profile(
            events, min(PROFILE_ITERATIONS, train["iterations"]), spec, fidelity["fidelity"]))
    return {**train, "epochs": metrics.epochs(train.get("iterations"), spec["workload"], train_nodes),
            **prediction(spec, events, fidelity["fidelity"], train["iterations"]),
            "reported_transfer_bytes": sum(f["bytes"] for f in transfers),
            "fabric_counted_bytes": counted, "transfers": len(transfers),
            "oes_rate_max_rel_error": rel_error, "rate_readbacks": state.get("readbacks", 0),
            "achieved_over_target_median": round(percentile(ratios, 50, "higher"), 3) if ratios else None,
            "rate_updates": metrics.rate_updates(decisions), "compute_s_per_iteration": metrics.compute_by_task(events),
            "edge_cut_share": state.get("edge_cut_share"), "task_placement": state.get("placement"), **fidelity}


def prediction(spec: dict, events: list[dict], verdict: dict, iterations: int) -> dict:
    """``predicted_iteration_s``: the job's model (``experiments.gnn.simulated``) for the
    run's placement and scheduler over its iterations, from the spec's
    ``simulation.profile`` or else the run's own events; null, with
    ``prediction_note`` saying why, where the model refuses its profile."""
    from experiments.gnn import simulated  # pylint: disable=import-outside-toplevel  # only at analysis
    try:
        if "simulation" in spec:
            profile = simulated.load_profile(spec["simulation"]["profile"])
        else:
            profile = simulated.Profile.parse(metrics.profile(events, iterations, spec, verdict), "this run's events")
        return {"predicted_iteration_s": simulated.predict(spec, profile, iterations)}
    except simulated.ProfileError as err:
        return {"predicted_iteration_s": None, "prediction_note": str(err)}
