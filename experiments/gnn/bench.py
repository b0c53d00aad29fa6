"""Bench rows for GNN training under OES (``make bench``).

- Rate-update latency on an otherwise idle fabric (4-host star): a flow's start
  report -> OES decision -> its policy applied by the controller (``OesRates``, the
  driver's own path), for one new flow at a time and for 50 flows starting at once.
- The same latency measured during training (the smoke spec under OES), the CPU
  idle share the DGL tasks leave to the switches while they train (over the
  iterations, as the run is judged), and per-iteration time under OES
  and under default scheduling, side by side in one invocation.
"""
from __future__ import annotations

import io
import statistics
import tempfile
import time
from pathlib import Path

from experiments.benchrows import row, show
from experiments.gnn.coordinator import oes_machines
from experiments.gnn.driver import OesRates
from experiments.platform.net import Emulation
from experiments.results import load_summary
from experiments.runner import read_spec, run_any_spec
from experiments.stats import percentile
from topologies.fabric import star

SMOKE = Path(__file__).parent.parent / "specs" / "gnn-oes-smoke.yaml"


def _flow_event(n: int, src: str, dst: str) -> dict:
    return {"kind": "flow_start", "t": time.time(), "flow": f"bench{n}", "src": src, "dst": dst,
            "src_task": f"sender{n}", "dst_task": f"receiver{n}", "iteration": 0,
            "src_port": 30000 + n % 20000, "dst_port": 21000, "bytes": 1_000_000}


def rate_update_latency(workdir: Path) -> list[dict]:
    fabric = star(hosts=4, host_mbps=100)
    machines = oes_machines(fabric)
    hosts = [h.name for h in fabric.hosts]
    one, fifty = [], []
    with Emulation(fabric, workdir / "oes-rates") as em:
        rates = OesRates(em, machines, io.StringIO(), io.StringIO())
        for n in range(100):
            event = _flow_event(n, hosts[n % 4], hosts[(n + 1) % 4])
            rates.on_flow_event(event)
            rates.decide()
            one.append((time.time() - event["t"]) * 1000)
            rates.on_flow_event({**event, "kind": "flow_end", "t": time.time()})
        for rep in range(10):
            # every pair of distinct hosts in turn: the offset to the receiver is 1..3, never 0
            events = [_flow_event(1000 + rep * 50 + i, hosts[i % 4], hosts[(i % 4 + 1 + (i // 4) % 3) % 4])
                      for i in range(50)]
            for e in events:
                rates.on_flow_event(e)
            rates.decide()
            fifty.append((time.time() - events[0]["t"]) * 1000)
            for e in events:
                rates.on_flow_event({**e, "kind": "flow_end", "t": time.time()})
        rates.read_back()
    return [row("oes_one_flow_start_to_rate_p50_ms", statistics.median(one), "ms"),
            row("oes_one_flow_start_to_rate_p99_ms", percentile(one, 99, method="exclusive"), "ms", 20.0,
                 lower_is_better=True),
            row("oes_50_flows_start_to_rates_max_ms", max(fifty), "ms", 100.0, lower_is_better=True),
            row("oes_rate_readback_max_rel_error", max(rates.readback_errors), "share", 0.01, lower_is_better=True)]


def training_side_by_side(workdir: Path) -> list[dict]:
    rows, iteration_s = [], {}
    for scheduler in ("default", "oes"):
        raw = read_spec(SMOKE)
        raw["name"] = f"bench-gnn-{scheduler}"
        raw["scheduler"] = {"name": scheduler}
        run = run_any_spec(raw, str(workdir / raw["name"]))
        summary = load_summary(run)
        iteration_s[scheduler] = summary["iteration_s_mean"]
        rows.append(row(f"gnn_smoke_{scheduler}_cpu_idle_share", summary["cpu_idle_share"], "share", 0.05))
        rows.append(row(f"gnn_smoke_{scheduler}_iteration_s", summary["iteration_s_mean"], "s"))
        if scheduler == "oes":
            updates = summary["rate_updates"]
            rows += [row("gnn_smoke_oes_start_to_rate_p50_ms", updates["latency_ms_p50"], "ms"),
                     row("gnn_smoke_oes_start_to_rate_p99_ms", updates["latency_ms_p99"], "ms", 20.0,
                          lower_is_better=True),
                     row("gnn_smoke_oes_rate_readback_max_rel_error", summary["oes_rate_max_rel_error"], "share",
                          0.01, lower_is_better=True)]
    rows.append(row("gnn_smoke_iteration_oes_over_default", iteration_s["oes"] / iteration_s["default"], "ratio"))
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trainbed-bench-gnn-") as tmp:
        for step in (rate_update_latency, training_side_by_side):
            show(step(Path(tmp)))


if __name__ == "__main__":
    main()
