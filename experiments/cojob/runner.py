"""``trainbed run`` for the cojob workload kind (through ``experiments.platform.run``).

Start the background monitors (CPU, a sampled packet capture
on every host link), run the driver until every cojob ended, collect the queue
counters, tear down, then analyse: Grouper's metrics from ``events.jsonl``
(``experiments.cojob.metrics``), the conformance of the packets to the
decisions (``conformance``), and what the simulator backend (``simulated``)
predicts for the same workload and scheduler on the same fabric
(``model_avg_sct_s``, ``sct_over_model``: how much the emulation adds). Like the
timetable runner, any fault still leaves
``summary.json`` with ``"completed": false`` and the error.
"""
from __future__ import annotations

import json
from pathlib import Path

from experiments import store
from experiments.cojob import conformance, simulated
from experiments.cojob import metrics as grouper_metrics
from experiments.cojob import spec as cojob_spec
from experiments.cojob.driver import CojobDriver
from experiments.errors import one_line
from experiments.platform.capture import start_packet_captures, stop_packet_captures
from experiments.platform.cpu import CpuMonitor
from experiments.platform.fidelity import collect_fabric_counters, fidelity_fields
from experiments.platform.net import Emulation
from experiments.platform.run import run_workload

# Packets whose TCP sequence number's low 6 bits are 0. Full segments are 8948 bytes
# (4 x an odd number; 1448 = 8 x odd at MTU 1500), so a connection's sequence numbers
# walk through 16 of the 64 residues: a random quarter of the connections (by their
# initial sequence number) is sampled, at 1 in 16 of its segments, over the whole run.
SAMPLE_FILTER = "tcp and (tcp[7] & 0x3f) == 0"
SAMPLE_LIMIT = 20000
SAMPLE_SNAP_BYTES = 96
SAMPLE_ERRORS = "sample_capture_errors.json"  # raw/: the sampled tcpdumps that failed, when any did


class CojobWorkload:
    """Cojobs with their driver, a sampled packet capture per host, queue counters."""

    def __init__(self, spec: dict, run: Path, progress=print):
        self.spec, self.run_dir, self.progress = spec, run, progress
        self.resolved = cojob_spec.resolve(spec)
        store.write_json(run / grouper_metrics.WORKLOAD_FILE, self.resolved.workload.to_dict())
        self.driver: CojobDriver | None = None
        self.captures: dict = {}  # host -> its sampled tcpdump
        self.t0 = None  # run times count from the run's start

    def start(self, em: Emulation, events_path: str) -> None:
        # A sampled capture of what every host receives (DSCP as the switches left it).
        self.captures = start_packet_captures(em, self.run_dir / store.RAW, [h.name for h in em.fabric.hosts],
                                              SAMPLE_SNAP_BYTES, SAMPLE_LIMIT, SAMPLE_FILTER, prefix="sample")
        self.driver = CojobDriver(em, self.resolved, self.run_dir, events_path, progress=self.progress)

    def run(self) -> None:
        self.driver.run()

    def stop(self) -> None:
        if self.driver is not None:
            self.driver.close()
        failed = stop_packet_captures(self.captures)
        if failed:  # the conformance check reads fewer packets than it was given to read
            store.write_json(self.run_dir / store.RAW / SAMPLE_ERRORS, failed)

    def collect(self, em: Emulation) -> list[str]:
        """Every counter file; the fabric counters that could not be read, named."""
        raw = self.run_dir / store.RAW
        store.write_json(raw / "host_queue_counters.json", em.host_queue_counters())
        unread = collect_fabric_counters(em, raw)
        store.write_json(raw / "ovs_reports.json", em.ovs_reports())
        return unread

    def summary_fields(self) -> dict:
        return {"scheduler": self.spec["scheduler"]["name"], "seed": self.spec["seed"]}

    def analyse(self, cpu: CpuMonitor, outages: list[dict]) -> dict:
        return analyse(self.resolved, self.run_dir, cpu, outages)


def run_cojob_spec(spec: dict, out: str | None = None) -> Path:
    return run_workload(spec, out, CojobWorkload)


def analyse(resolved: cojob_spec.CojobRun, run: Path, cpu: CpuMonitor, outages: list[dict]) -> dict:
    spec = resolved.spec
    events = store.read_jsonl(run / store.EVENTS)
    decisions = store.read_jsonl(run / store.DECISIONS)
    metrics = grouper_metrics.summarise(events, resolved.workload.to_dict())
    check = conformance.check(resolved.fabric, events, decisions, sorted((run / store.RAW).glob("sample-*.pcap")),
                              json.loads((run / store.RAW / "host_queue_counters.json").read_text()))
    if (run / store.RAW / SAMPLE_ERRORS).exists():
        check["sample_capture_errors"] = json.loads((run / store.RAW / SAMPLE_ERRORS).read_text())
    try:
        model_sct, model_error = simulated.model_avg_sct_s(resolved), None
    except Exception as err:  # noqa: BLE001 - the model failing any way must not cost the run its analysis
        model_sct, model_error = None, one_line(err)
    measured = metrics.get("avg_sct_s")
    return {**metrics, "decisions": len(decisions),
            "model_avg_sct_s": model_sct, **({"model_error": model_error} if model_error else {}),
            # the model simulates the whole workload: a run cut short is compared on no stage
            "sct_over_model": (measured / model_sct if measured and model_sct
                               and metrics["stages_completed"] == metrics["stages_planned"] else None),
            "max_apply_s": max((d["apply_s"] for d in decisions), default=None),
            "conformance": check, **fidelity_fields(cpu, spec["fidelity"], outages, run / store.RAW)}

