"""GNN training metrics, computed afterwards from a run's data files (pure functions).

Inputs: the events (``events.jsonl``: hello, flow_start/flow_end, compute,
iteration_end, ...) and OES's decisions (``decisions.jsonl``: when each flow
5-tuple got which rate). Times are the tasks' ``time.time()`` stamps (one clock: all
namespaces share the box).

- Training: iterations (worker 0's), the loss at the first and the last iteration
  (mean over workers), the last and best validation accuracy, time to the target
  accuracy from the moment every task was up, and split at worker 0's first
  iteration end: before it the tasks' start-up (a task says hello before it imports
  torch and DGL and loads its partition, so this part is mostly the box's) and the
  first iteration, after it the iterations that follow; per-iteration time (median of
  worker 0's iteration intervals after the first, which includes start-up), and the
  communication share of iteration time (1 - compute / iteration, over workers).
- Flows: every inter-machine transfer with its bytes, duration, achieved rate and,
  under OES, the time-weighted mean target rate of its 5-tuple over its life.
- Rate updates: OES decision latency (a flow event's time to its batch being
  applied) and apply time, p50/p99 at the nearest rank (each one some decision's).
- The profile (``profile``): what the placement search and the job's model read.

``write_flows`` writes the flows as ``flows.csv``, for either backend; ``binned_host_mbps``
reads it back as each host's Mbit/s over time (the run's report and Fig. 7).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from experiments import store
from experiments.platform.policysync import flow_key
from experiments.stats import percentile
from topologies.units import bytes_to_mbit, mbps_of_bytes


def flows(events: list[dict], decisions: list[dict]) -> list[dict]:
    """Inter-machine transfers in start order, with achieved and (OES) target rates."""
    starts = {e["flow"]: e for e in events if e["kind"] == "flow_start" and e["src"] != e["dst"]}
    ends = {e["flow"]: e["t"] for e in events if e["kind"] == "flow_end"}
    history: dict[tuple, list[tuple[float, float]]] = defaultdict(list)  # 5-tuple -> [(t, Mbit/s)]
    for d in decisions:
        for src, dst, proto, src_port, dst_port, mbps, _policy_id in d["set"]:
            history[(src, dst, proto, src_port, dst_port)].append((d["t"], mbps))
    rows = []
    for fid, e in sorted(starts.items(), key=lambda item: item[1]["t"]):
        end = ends.get(fid)
        duration = None if end is None else max(end - e["t"], 1e-6)
        key = flow_key(e)
        rows.append({"flow": fid, "src": e["src"], "dst": e["dst"], "src_task": e["src_task"],
                     "dst_task": e["dst_task"], "phase": e["phase"], "iteration": e["iteration"],
                     "bytes": e["bytes"], "start_t": e["t"], "duration_s": duration,
                     "achieved_mbps": None if duration is None else mbps_of_bytes(e["bytes"], duration),
                     "target_mbps": None if end is None else _mean_target(history.get(key, []), e["t"], end)})
    return rows


def _mean_target(changes: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Time-weighted mean of a piecewise-constant rate over [start, end]; None if no
    rate was set for any of it. Before the first change inside the window the rate
    is the last one set before it (an idle pair keeps its policy)."""
    weighted, covered = 0.0, 0.0
    for i, (t, mbps) in enumerate(changes):
        t_next = changes[i + 1][0] if i + 1 < len(changes) else float("inf")
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            weighted += mbps * (hi - lo)
            covered += hi - lo
    return weighted / covered if covered else None


def training(events: list[dict], target: float | None) -> dict:
    hellos = [e["t"] for e in events if e["kind"] == "hello"]
    up_t = max(hellos) if hellos else None
    ends = [e for e in events if e["kind"] == "iteration_end"]
    by_worker: dict[str, list[dict]] = defaultdict(list)
    for e in ends:
        by_worker[e["task"]].append(e)
    lead = sorted(by_worker.get("worker0", []), key=lambda e: e["iteration"])
    losses = defaultdict(list)
    for e in ends:
        if e["loss"] is not None:  # a simulated run has no losses
            losses[e["iteration"]].append(e["loss"])
    accuracies = [(e["t"], e["val_accuracy"]) for e in lead if e.get("val_accuracy") is not None]
    reached = next((t for t, acc in accuracies if target is not None and acc >= target), None)
    intervals = [b["t"] - a["t"] for a, b in zip(lead, lead[1:])]
    shares = [1 - e["compute_s"] / (e["compute_s"] + e["wait_s"] + e["sync_s"])
              for e in ends if e["iteration"] > 0 and e["compute_s"] + e["wait_s"] + e["sync_s"] > 0]
    first, last = (min(losses), max(losses)) if losses else (None, None)
    return {
        "iterations": len(lead),
        "train_loss_first": None if first is None else round(statistics.fmean(losses[first]), 4),
        "train_loss_last": None if last is None else round(statistics.fmean(losses[last]), 4),
        "val_accuracy": accuracies[-1][1] if accuracies else None,
        "val_accuracy_best": max((acc for _, acc in accuracies), default=None),
        "time_to_accuracy_s": None if reached is None or up_t is None else round(reached - up_t, 3),
        "first_iteration_s": None if not lead or up_t is None else round(lead[0]["t"] - up_t, 3),
        "time_to_accuracy_after_first_iteration_s": None if reached is None or not lead else round(
            reached - lead[0]["t"], 3),
        "training_s": None if not lead or up_t is None else round(lead[-1]["t"] - up_t, 3),
        "iteration_s_median": round(statistics.median(intervals), 4) if intervals else None,
        "iteration_s_mean": round(statistics.fmean(intervals), 4) if intervals else None,
        "communication_share": round(statistics.fmean(shares), 3) if shares else None,
    }


def iteration_window(events: list[dict]) -> tuple[float, float] | None:
    """Epoch seconds from the first iteration's first work (a transfer's start, or a
    computation's, which a compute report gives as its end less its seconds) to the
    last report of any iteration; None before any. What the run measures lies in it;
    the tasks' start-up (importing torch and DGL, loading partitions) lies before it."""
    starts = [e["t"] for e in events if e["kind"] == "flow_start"]
    starts += [e["t"] - e["seconds"] for e in events if e["kind"] == "compute"]
    ends = [e["t"] for e in events if e["kind"] in ("compute", "flow_end", "iteration_end")]
    return (min(starts), max(ends)) if starts and ends else None


def compute_by_task(events: list[dict]) -> dict[str, float]:
    """Task -> mean execution seconds per iteration (summed over its compute reports)."""
    per = defaultdict(lambda: defaultdict(float))
    for e in events:
        if e["kind"] == "compute":
            per[e["task"]][e["iteration"]] += e["seconds"]
    return {task: round(statistics.fmean(its.values()), 6) for task, its in sorted(per.items())}


def rate_updates(decisions: list[dict]) -> dict:
    latencies = [x for d in decisions for x in d["latency_s"]]
    applies = [d["apply_s"] for d in decisions]
    one = [x for d in decisions if len(d["set"]) == 1 for x in d["latency_s"]]

    def ms(values, q):
        value = percentile(values, q, method="nearest")
        return None if value is None else round(value * 1000, 2)

    return {"decisions": len(decisions), "policies_set": sum(len(d["set"]) for d in decisions),
            "latency_ms_p50": ms(latencies, 50), "latency_ms_p99": ms(latencies, 99),
            "one_flow_latency_ms_p99": ms(one, 99), "apply_ms_p50": ms(applies, 50), "apply_ms_p99": ms(applies, 99),
            "largest_batch": max((len(d["set"]) for d in decisions), default=0)}


PROFILE_FILE = "profile.json"  # a profiling run's ``profile``, in its run directory


def profile(events: list[dict], iterations: int = 50, spec: dict | None = None,
            verdict: dict | None = None) -> dict:
    """The input of the placement search and of the job's model
    (``experiments.gnn.simulated``), over the first ``iterations``:

    - ``compute_s``: per task and iteration its execution seconds (its reports summed);
    - ``flows``: per transfer (task pair, phase, iteration) its bytes, and its
      ``duration_s`` once its end was heard (same-machine ones too in a profiling run);
    - ``requests``: every request a graph store served: ``store``, ``sampler``,
      ``iteration``, ``step`` (the reply's phase), ``request_bytes``, ``reply_bytes``,
      ``compute_s`` (requests and same-machine replies included, whatever the run);
    - ``sampler_rounds_s`` / ``sampler_eval_rounds_s``: per sampler and iteration its
      compute after each round of replies (L hops, then the features), for its training
      and its evaluation batch (null: none that iteration);
    - ``eval_s``: per worker and iteration its evaluation compute (null: none);
    - ``spec``: the run's resolved spec; ``trustworthy`` and ``untrustworthy_reasons``:
      its verdict (``verdict``: the summary's ``fidelity``; null when not given).
    """
    def per_iteration(by_iteration: dict) -> list:
        return [by_iteration.get(i) for i in range(iterations)]

    compute = defaultdict(lambda: defaultdict(float))
    rounds, eval_rounds, eval_s = defaultdict(dict), defaultdict(dict), defaultdict(dict)
    requests = []
    for e in events:
        if e["kind"] != "compute" or e["iteration"] >= iterations:
            continue
        compute[e["task"]][e["iteration"]] += e["seconds"]
        if "step" in e:
            requests.append({"store": e["task"], "sampler": e["peer"], "iteration": e["iteration"], "step": e["step"],
                             "request_bytes": e.get("request_bytes"), "reply_bytes": e.get("reply_bytes"),
                             "compute_s": e["seconds"]})
        for field, into in (("rounds", rounds), ("eval_rounds", eval_rounds), ("eval_s", eval_s)):
            if field in e:
                into[e["task"]][e["iteration"]] = e[field]
    ends = {e["flow"]: e["t"] for e in events if e["kind"] == "flow_end"}
    volumes = [{"src_task": e["src_task"], "dst_task": e["dst_task"], "src": e["src"], "dst": e["dst"],
                "phase": e["phase"], "iteration": e["iteration"], "bytes": e["bytes"],
                "duration_s": None if e["flow"] not in ends else round(ends[e["flow"]] - e["t"], 6)}
               for e in events if e["kind"] == "flow_start" and e["iteration"] < iterations]
    return {"iterations": iterations,
            "compute_s": {task: [round(its.get(i, 0.0), 6) for i in range(iterations)]
                          for task, its in sorted(compute.items())},
            "flows": volumes, "requests": requests,
            "sampler_rounds_s": {task: per_iteration(its) for task, its in sorted(rounds.items())},
            "sampler_eval_rounds_s": {task: per_iteration(its) for task, its in sorted(eval_rounds.items())},
            "eval_s": {task: per_iteration(its) for task, its in sorted(eval_s.items())},
            "spec": spec, "trustworthy": None if verdict is None else verdict["trustworthy"],
            "untrustworthy_reasons": None if verdict is None else verdict["untrustworthy_reasons"]}


def epochs(iterations: int | None, workload: dict, train_nodes: int) -> float | None:
    """Training seeds drawn over the training nodes: every sampler draws ``batch_size``
    seeds an iteration from its shard and every worker consumes all its samplers'
    mini-batches (``hosts/gnn/task.py``)."""
    if not (iterations and train_nodes):
        return None
    return iterations * workload["workers"] * workload["samplers_per_worker"] * workload["batch_size"] / train_nodes


FLOW_FIELDS = ["flow", "src", "dst", "src_task", "dst_task", "phase", "iteration", "bytes", "start_t", "duration_s",
               "achieved_mbps", "target_mbps"]


def binned_host_mbps(rows: list[dict], t0: float, bin_s: float) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(sent, received): host -> Mbit/s of transfer payload in each ``bin_s`` bin from
    ``t0``, from ``flows.csv`` rows, each transfer's bytes spread evenly over its
    duration. A transfer still on the wire when the run ended (no duration: the
    training reached its target) has no known rate and is left out."""
    spans = [(float(r["start_t"]) - t0, max(float(r["duration_s"]), 1e-9), int(r["bytes"]), r["src"], r["dst"])
             for r in rows if r["duration_s"] not in ("", None)]
    bins = int(max((a + d for a, d, *_ in spans), default=0.0) / bin_s) + 1
    sent: dict[str, list[float]] = defaultdict(lambda: [0.0] * bins)
    received: dict[str, list[float]] = defaultdict(lambda: [0.0] * bins)
    for a, d, nbytes, src, dst in spans:
        for k in range(max(int(a / bin_s), 0), min(int((a + d) / bin_s), bins - 1) + 1):
            share = (min(a + d, (k + 1) * bin_s) - max(a, k * bin_s)) / d
            if share > 0:
                sent[src][k] += bytes_to_mbit(share * nbytes) / bin_s
                received[dst][k] += bytes_to_mbit(share * nbytes) / bin_s
    return dict(sent), dict(received)


def write_flows(path: Path, rows: list[dict]) -> None:
    """``flows.csv``: the rows of ``flows``, emulated or simulated."""
    store.write_csv(path, rows, FLOW_FIELDS)
