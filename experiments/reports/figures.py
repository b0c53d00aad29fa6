"""The plots a run's report draws from its data files, as PNG bytes (embedded in the
page, not written beside the data: the run's own figures stay the kind's).

Each function takes a ``RunData`` and returns ``[(caption, png)]``, empty when the
run lacks the data (a partial run, a kind without that file).
"""
from __future__ import annotations

import io
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from experiments.gnn.metrics import binned_host_mbps  # noqa: E402
from experiments.platform import capture  # noqa: E402
from experiments.reports.rundata import RunData  # noqa: E402
from experiments.store import CPU_SAMPLES, EVENTS, FLOWS, RAW, SUMMARY  # noqa: E402
from topologies.units import bytes_to_mbit  # noqa: E402

Figure = tuple[str, bytes]
QUEUE_OCCUPANCY = f"{RAW}/{capture.QUEUE_OCCUPANCY}"  # the queue sampler's: time_s, port, queue, backlog_bytes
MAX_INCHES = 24  # a timeline of hundreds of jobs stays one readable page tall


def _png(fig) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()


def cpu_idle(data: RunData) -> list[Figure]:
    """The CPU's idle share over the run against the spec's floor: where fidelity was lost."""
    rows = data.read_csv(CPU_SAMPLES)
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(9, 2.8))
    ax.plot([float(r["time_s"]) for r in rows], [float(r["idle_share"]) for r in rows], label="idle")
    lost = [float(r["stolen_share"]) + float(r["throttled_share"]) for r in rows]
    if any(lost):
        ax.plot([float(r["time_s"]) for r in rows], lost, label="stolen + throttled")
    floor = ((data.spec or {}).get("fidelity") or {}).get("min_cpu_idle")
    if floor is not None:
        ax.axhline(floor, color="red", linestyle=":", label=f"min_cpu_idle {floor:g}")
    ax.set(xlabel="time [s]", ylabel="share of the CPUs", ylim=(0, 1))
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    return [(f"CPU idle share over the run ({CPU_SAMPLES})", _png(fig))]


def queue_occupancy(data: RunData) -> list[Figure]:
    """Backlog over time of the busiest queues, from the queue sampler's file."""
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in data.read_csv(QUEUE_OCCUPANCY):
        series[f"{r['port']} q{r['queue']}"].append((float(r["time_s"]), float(r["backlog_bytes"]) / 1e3))
    busiest = sorted((s for s in series.items() if any(v for _, v in s[1])), key=lambda s: -max(v for _, v in s[1]))
    if not busiest:
        return []
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for label, points in busiest[:8]:
        ax.step([t for t, _ in points], [v for _, v in points], where="post", label=label)
    ax.set(xlabel="time [s]", ylabel="backlog [KB]")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    return [(f"Queue occupancy over time, the {min(len(busiest), 8)} busiest queues ({QUEUE_OCCUPANCY})", _png(fig))]


# -- cojob ---------------------------------------------------------------------------

def cojob_timeline(data: RunData) -> list[Figure]:
    """Per cojob and job, the stages it ran (from stage_start to stage_end), when its
    cojob arrived, and where it was killed or finished (events.jsonl)."""
    events = data.read_jsonl(EVENTS)
    kinds = ("cojob_arrival", "stage_start", "stage_end", "job_killed", "job_finished")
    events = [e for e in events if e.get("kind") in kinds]
    starts = [e for e in events if e["kind"] == "stage_start"]
    if not starts:
        return []
    t0 = min(e["t"] for e in events)
    last = max(e["t"] for e in events) - t0
    arrival = {e["cojob"]: e["t"] - t0 for e in events if e["kind"] == "cojob_arrival"}
    ends = {(e["cojob"], e["stage"]): e["t"] - t0 for e in events if e["kind"] == "stage_end"}
    jobs: dict[str, int] = {}  # job -> cojob, in cojob then job order
    for e in sorted(starts, key=lambda e: e["cojob"]):
        for job in e["jobs"]:
            jobs.setdefault(job, e["cojob"])
    row = {job: i for i, job in enumerate(sorted(jobs, key=lambda j: (jobs[j], j)))}
    height = min(0.16 * len(row) + 1.6, MAX_INCHES)
    fig, ax = plt.subplots(figsize=(10, height))
    colors = plt.get_cmap("tab10")
    bars = defaultdict(list)  # color -> rectangles: one collection each (one per bar took ~1 s to draw)
    for e in starts:
        begin = e["t"] - t0
        end = ends.get((e["cojob"], e["stage"]), last)
        for job in e["jobs"]:
            y = row[job]
            bars[e["stage"] % 10].append([(begin, y - 0.4), (end, y - 0.4), (end, y + 0.4), (begin, y + 0.4)])
    for color, rectangles in bars.items():
        ax.add_collection(PolyCollection(rectangles, color=colors(color)))
    ax.autoscale_view()
    for job, cojob in jobs.items():
        if cojob in arrival:
            first = min(e["t"] - t0 for e in starts if job in e["jobs"])
            ax.plot([arrival[cojob], first], [row[job]] * 2, color="grey", linewidth=1)
    for kind, marker, color in (("job_killed", "x", "red"), ("job_finished", "|", "black")):
        marked = [(e["t"] - t0, row[e["job"]]) for e in events if e["kind"] == kind and e["job"] in row]
        if marked:
            ax.scatter([t for t, _ in marked], [r for _, r in marked], marker=marker, color=color, zorder=3,
                       label=kind.replace("_", " "))
    handles, _ = ax.get_legend_handles_labels()
    handles += [Patch(color=colors(stage % 10), label=f"stage {stage}") for stage in sorted({e["stage"] for e in starts})]
    if len(row) <= 60:
        ax.set_yticks(list(row.values()), list(row), fontsize=7)
    else:  # one label per cojob
        firsts = {cojob: min(r for j, r in row.items() if jobs[j] == cojob) for cojob in set(jobs.values())}
        ax.set_yticks(list(firsts.values()), [f"c{c}" for c in firsts], fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="time since the first arrival [s]", ylabel="job")
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(alpha=0.3, axis="x")
    return [("Stage timeline: every job's stages (grey: waiting since its cojob arrived), kills and finishes "
             f"({EVENTS})", _png(fig))]


def cojob_sct(data: RunData) -> list[Figure]:
    """Each stage's completion time (from its cojob's arrival), by cojob."""
    sct = [r for r in data.summary.get("sct_s") or [] if r.get("sct_s") is not None]
    if not sct:
        return []
    cojobs = sorted({r["cojob"] for r in sct})
    stages = sorted({r["stage"] for r in sct})
    width = 0.8 / len(stages)
    fig, ax = plt.subplots(figsize=(min(max(6, 0.25 * len(sct)), 20), 3.8))
    for k in stages:
        points = [(cojobs.index(r["cojob"]) + (k - (len(stages) - 1) / 2) * width, r["sct_s"]) for r in sct
                  if r["stage"] == k]
        ax.bar([x for x, _ in points], [y for _, y in points], width, label=f"stage {k}")
    models = {r["cojob"]: r.get("model", "") for r in sct}
    ax.set_xticks(range(len(cojobs)), [f"c{c} {models[c]}" for c in cojobs], rotation=60 if len(cojobs) > 8 else 0,
                  fontsize=7, ha="right" if len(cojobs) > 8 else "center")
    if data.summary.get("avg_sct_s") is not None:
        ax.axhline(data.summary["avg_sct_s"], color="black", linestyle=":", label="avg SCT")
    ax.set(ylabel="SCT [s]")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(alpha=0.3, axis="y")
    return [(f"Stage completion times (SCT), scheduler {data.summary.get('scheduler', 'n/a')} ({SUMMARY} sct_s)",
             _png(fig))]


def compared_metric(metric: tuple[str, str, str], groups: list[tuple[str, list[float], list[str]]]) -> Figure:
    """A sweep's compared metric per group (scheduler, grid point): the mean over its
    cells as a bar, each cell (seed) as a dot."""
    _, label, unit = metric
    fig, ax = plt.subplots(figsize=(8, min(1.2 + 0.45 * len(groups), MAX_INCHES)))
    colours: dict[str, str] = {}  # one a (part and) scheduler: a group's name before its grid point
    for y, (name, values, _) in enumerate(groups):
        colour = colours.setdefault(name.split(" (")[0], f"C{len(colours) % 10}")
        ax.barh(y, sum(values) / len(values), color=colour, alpha=0.35)
        ax.plot(values, [y] * len(values), "o", color=colour, markersize=4)
    ax.set_yticks(range(len(groups)), [name for name, _, _ in groups], fontsize=8)
    ax.invert_yaxis()  # the table's order, top down
    ax.set(xlabel=f"{label} [{unit}]")
    ax.grid(alpha=0.3, axis="x")
    return f"{label} by scheduler: the mean (bar) and each completed cell (dot)", _png(fig)


# -- gnn -----------------------------------------------------------------------------

def _gnn_t0(events: list[dict], fallback: float) -> float:
    """The first transfer's start: the training's time zero (the graph stores load before)."""
    return min((e["t"] for e in events if e.get("kind") == "flow_start"), default=fallback)


def gnn_bandwidth(data: RunData) -> list[Figure]:
    """Bytes each host sent and received per time bin, every transfer spread evenly
    over its life (flows.csv; ``gnn.metrics.binned_host_mbps``)."""
    flows = [f for f in data.read_csv(FLOWS) if f["duration_s"]]
    if not flows:
        return []
    t0 = _gnn_t0(data.read_jsonl(EVENTS), min(float(f["start_t"]) for f in flows))
    end = max(float(f["start_t"]) + float(f["duration_s"]) for f in flows) - t0
    step = max(end / 120, 0.05)
    sent, received = binned_host_mbps(flows, t0, step)
    bins = len(next(iter(sent.values())))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.5), sharey=True)
    times = [(i + 0.5) * step for i in range(bins)]
    for ax, per_host, title in ((axes[0], sent, "sent"), (axes[1], received, "received")):
        for host in sorted(per_host):
            ax.plot(times, per_host[host], label=host, linewidth=1)
        ax.set(title=title, xlabel="time since the first transfer [s]")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Mbit/s")
    axes[1].legend(fontsize=7, loc="upper right")
    return [(f"Per-host bandwidth of the training's transfers, {step:.2g} s bins ({FLOWS})", _png(fig))]


def gnn_training(data: RunData) -> list[Figure]:
    """Worker 0's loss and validation accuracy against time (events.jsonl; a simulated
    run has no loss)."""
    events = data.read_jsonl(EVENTS)
    points = [e for e in events if e.get("kind") == "iteration_end" and e.get("task") == "worker0"
              and e.get("loss") is not None]
    if not points:
        return []
    t0 = _gnn_t0(events, points[0]["t"])
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.plot([e["t"] - t0 for e in points], [e["loss"] for e in points], color="tab:blue", marker=".")
    ax.set(xlabel="time since the first transfer [s]", ylabel="training loss (worker 0)")
    ax.yaxis.label.set_color("tab:blue")
    evaluated = [e for e in points if e.get("val_accuracy") is not None]
    if evaluated:
        acc = ax.twinx()
        acc.plot([e["t"] - t0 for e in evaluated], [e["val_accuracy"] for e in evaluated], color="tab:orange",
                 marker="o")
        target = ((data.spec or {}).get("workload") or {}).get("target_accuracy")
        if target is not None:
            acc.axhline(target, color="tab:orange", linestyle=":")
        acc.set_ylabel("validation accuracy", color="tab:orange")
        acc.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    return [(f"Training loss and validation accuracy over time ({EVENTS} iteration_end)", _png(fig))]


# -- co-location -----------------------------------------------------------------------

def _lanes(records: list[dict]) -> list[int]:
    """A lane per task such that tasks in one lane never overlap: concurrency as rows."""
    ends: list[float] = []
    lanes = []
    for r in records:
        lane = next((i for i, end in enumerate(ends) if end <= r["start_s"] + 1e-9), len(ends))
        if lane == len(ends):
            ends.append(0.0)
        ends[lane] = r["end_s"]
        lanes.append(lane)
    return lanes


def colocation_timeline(data: RunData) -> list[Figure]:
    """Per method (its first repeat), when each task ran, coloured by its group; a
    failed task hatched (records-<method>.json)."""
    methods = []
    for method in data.summary.get("methods") or {}:
        raw = data.read_json(f"records-{method}.json")
        if raw and raw.get("runs"):
            records = sorted((r for r in raw["runs"][0]["records"] if r.get("start_s") is not None
                              and r.get("end_s") is not None), key=lambda r: r["start_s"])
            if records:
                methods.append((method, records))
    if not methods:
        return []
    lanes = {method: _lanes(records) for method, records in methods}
    heights = [max(lanes[m]) + 1.6 for m, _ in methods]
    fig, axes = plt.subplots(len(methods), 1, figsize=(10, min(0.35 * sum(heights) + 1, MAX_INCHES)), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    colors = plt.get_cmap("tab20")
    for ax, (method, records) in zip(axes[:, 0], methods):
        groups: dict[tuple, int] = {}  # (batch, group) -> colour, in order of first start
        for r, lane in zip(records, lanes[method]):
            group = groups.setdefault((r.get("batch"), r.get("group")), len(groups))
            ax.broken_barh([(r["start_s"], r["end_s"] - r["start_s"])], (lane - 0.4, 0.8), color=colors(group % 20),
                           edgecolor="black", linewidth=0.3, hatch="//" if r.get("error") else None)
            if len(records) <= 30:
                ax.text(r["start_s"], lane, r["task_id"], fontsize=6, va="center")
        makespan = max(r["end_s"] for r in records)
        ax.set_title(f"{method}: makespan {makespan:.3g} s", fontsize=9, loc="left")
        ax.set_yticks(range(max(lanes[method]) + 1))
        ax.set_ylabel("lane", fontsize=8)
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
    axes[-1, 0].set_xlabel("time since the queue started [s]")
    return [("Group and task timeline per method, first repeat: a bar per task, one colour per group, "
             "concurrent tasks on separate lanes, failed tasks hatched (records-<method>.json)", _png(fig))]


def host_bandwidth(data: RunData) -> list[Figure]:
    """Per host, the Mbit/s it sent into and took from the fabric between samples
    (raw/host_bytes.csv, the programs kind's)."""
    by_host: dict[str, list[tuple[float, int, int]]] = defaultdict(list)
    for r in data.read_csv(f"{RAW}/host_bytes.csv"):
        by_host[r["host"]].append((float(r["time_s"]), int(r["sent_bytes"]), int(r["received_bytes"])))
    if not any(len(points) > 1 for points in by_host.values()):
        return []
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.5), sharey=True)
    for ax, column, title in ((axes[0], 1, "sent"), (axes[1], 2, "received")):
        for host, points in sorted(by_host.items()):
            rates = [((a[0] + b[0]) / 2, bytes_to_mbit(b[column] - a[column]) / (b[0] - a[0]))
                     for a, b in zip(points, points[1:]) if b[0] > a[0]]
            ax.plot([t for t, _ in rates], [v for _, v in rates], label=host, linewidth=1)
        ax.set(title=title, xlabel="time [s]")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Mbit/s")
    axes[1].legend(fontsize=7, loc="upper right")
    return [("Per-host bandwidth into and out of the fabric (raw/host_bytes.csv)", _png(fig))]


FIGURES = {"cojob": (cojob_timeline, cojob_sct), "gnn": (gnn_bandwidth, gnn_training),
           "colocation": (colocation_timeline,), "programs": (host_bandwidth,)}
SHARED = (queue_occupancy, cpu_idle)  # any kind, when the run has the file


def for_run(data: RunData) -> list:
    """The figure functions that apply to this run's kind, its own first."""
    return [*FIGURES.get(data.kind, ()), *SHARED]

