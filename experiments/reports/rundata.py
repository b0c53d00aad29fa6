"""A run directory as the reports read it: its summary, resolved spec, environment
and kind, the fidelity verdict, and each kind's headline metrics.

Everything here is read from the run's data files, never computed during a run; a
file a partial run lacks is simply absent (``None``, ``[]``), so a failed run still
gets its summary and report.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiments import store
from experiments.errors import SpecError
from experiments.kinds import COLOCATION_KINDS, kind_of
from experiments.platform import cpu
from experiments.results import load_summary, summary_verdict
from experiments.stats import is_number
from experiments.validation import read_yaml


@dataclass(frozen=True)
class RunData:
    path: Path
    summary: dict
    spec: dict | None  # spec.yaml (resolved); None for runs recorded without one
    environment: dict
    kind: str  # a name of ``experiments.kinds.KINDS``, or "unknown"

    @property
    def name(self) -> str:
        return self.summary.get("name") or (self.spec or {}).get("name") or self.path.name

    @property
    def backend(self) -> str:
        device = self.summary.get("device")  # a co-location run's: it has no network backend
        return self.summary.get("backend") or (f"on {device['type']}" if isinstance(device, dict) else "emulated")

    def read_json(self, relative: str):
        """A JSON file of the run (or its ``.gz``), None where absent."""
        path = self.path / relative
        return store.read_json(path) if store.kept(path) else None

    def read_csv(self, relative: str) -> list[dict]:
        """A CSV file of the run, or its ``.gz`` (recorded runs keep ``flows.csv`` compressed); [] where absent."""
        path = self.path / relative
        return store.read_csv(path) if store.kept(path) else []

    def read_jsonl(self, relative: str) -> list:
        """A JSON-lines file, or its ``.gz`` (recorded runs keep events compressed); [] where absent."""
        return store.read_jsonl(self.path / relative, missing_ok=True)


def load(run: str | Path) -> RunData:
    """The run directory ``run``; a garbled file is a one-line SpecError naming it."""
    path = Path(run)
    summary = load_summary(path)
    spec_path = path / store.SPEC
    spec = read_yaml(spec_path, store.SPEC, "run spec") if spec_path.exists() else None
    return RunData(path, summary, spec, store.read_environment(path), _kind(spec, summary))


def _kind(spec: dict | None, summary: dict) -> str:
    """The kind by its spec, as ``trainbed run`` chose it; for a run recorded without
    a spec (older sweep cells), by the fields its summary has."""
    if spec is not None:
        try:
            return kind_of(spec).name
        except SpecError:
            pass
    if summary.get("kind") in COLOCATION_KINDS and "methods" in summary:
        return "colocation"
    if "avg_sct_s" in summary:
        return "cojob"
    if "sync" in summary and "iterations" in summary:
        return "gnn"
    if isinstance(summary.get("flows"), dict):
        return "timetable"
    return "unknown"


# -- the verdict -------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    trustworthy: bool | None  # None: the kind records no fidelity verdict
    reasons: list[str]
    note: str  # what the verdict rests on, one line


def verdict(data: RunData) -> Verdict:
    """The run's ``summary_verdict`` with the note on what it rests on."""
    s = data.summary
    trusted, reasons = summary_verdict(s)
    if trusted is None and data.kind == "colocation":
        note = "co-location runs record no fidelity verdict: read the spreads over repeats"
    elif s.get("backend") == "simulated":
        note = "simulated: a flow-level model, no emulation fidelity to judge"
    else:
        note = _fidelity_note(s)
    return Verdict(trusted, reasons, note)


LOSS_PLACES = {"switch_queues": "at switch queues", "switch_sockets": "at switch receive sockets",
               "switch_internal": "inside the switches",
               "interfaces": "at interfaces", "host_queues": "refused by the senders' own queues"}


def _fidelity_note(s: dict) -> str:
    parts = []
    if s.get("cpu_idle_share") is not None:
        window = s.get("cpu_window_s")
        over = f" over {window[0]:g}-{window[1]:g} s, its traffic's window" if window else ""
        parts.append(f"CPU idle {pct(s['cpu_idle_share'])}, stolen or throttled {pct(cpu.lost_share(s))}{over}")
    if s.get("link_goodput_ratio") is not None:
        parts.append(f"link goodput ratio {s['link_goodput_ratio']:.3f}")
    if s.get("switch_loss_share") is not None:
        parts.append(f"switch loss {pct(s['switch_loss_share'], 2)}")
    losses = s.get("packet_losses") or {}
    if any(losses.values()):  # where packets were dropped, by place (none: nothing to say)
        parts.append("packets dropped: " + ", ".join(f"{n:,} {LOSS_PLACES[place]}" for place, n in losses.items()
                                                     if n))
    if s.get("controller_outages"):
        parts.append(f"{len(s['controller_outages'])} controller outage(s)")
    return "; ".join(parts)


# -- headline metrics --------------------------------------------------------------

Row = tuple[str, str]  # (label, value with its unit)


def num(value, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        # by the rounded value: 999.7 at 3 digits is 1000, not "1e+03"
        text = f"{value:.{digits}g}" if abs(float(f"{value:.{digits}g}")) < 10 ** digits else f"{value:.0f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip()


def pct(share, digits: int = 1) -> str:
    return "n/a" if share is None else f"{100 * share:.{digits}f}%"


def _timetable(data: RunData) -> list[Row]:
    s = data.summary
    flows = {f["name"]: f for f in (data.spec or {}).get("flows", [])}
    rows = []
    for name, values in (s.get("flows") or {}).items():
        policy = ", ".join(f"{key} {flows.get(name, {})[key]:g}" for key in ("queue", "host_queue", "rate_mbps")
                           if flows.get(name, {}).get(key) is not None)
        retransmits = values.get("retransmits")
        sized = (f"{values['size_bytes']:,} bytes in {num(values['fct_s'], 's')}, " if values.get("fct_s") is not None
                 else "")
        rows.append((f"flow {name}", f"{sized}{num(values.get('mean_goodput_mbps'), 'Mbit/s')} mean goodput"
                                     + (f", {retransmits} segments retransmitted" if retransmits is not None else "")
                                     + (f" ({policy})" if policy else "")))
    rows += [(f"flow {name}", f"FAILED: {failure.get('error', failure)}")
             for name, failure in (s.get("failed_flows") or {}).items()]
    if s.get("mean_fct_s") is not None:
        rows.append(("mean flow completion time (sized flows)", num(s["mean_fct_s"], "s")))
    priority = ((data.spec or {}).get("analysis") or {}).get("priority") or {"high": "high", "low": "low"}
    if "high_share_while_both" in s:
        rows.append((f"{priority['high']}'s share while both ran", pct(s["high_share_while_both"])))
    if "low_recovery_s" in s:
        rows.append((f"{priority['low']} back to 90% after {priority['high']} ended", num(s["low_recovery_s"], "s")))
    if "rate_limit_target_mbps" in s:
        rows.append(("rate limit achieved", f"{num(s.get('rate_limit_achieved_mbps'), 'Mbit/s')} of "
                                            f"{num(s['rate_limit_target_mbps'], 'Mbit/s')} "
                                            f"({s.get('rate_limit_mechanism') or 'mechanism unknown'})"))
    if s.get("policy_changes_delayed"):
        rows.append(("policy changes delayed", str(len(s["policy_changes_delayed"]))))
    return rows


def _cojob(data: RunData) -> list[Row]:
    s = data.summary
    done, cojobs = s.get("stages_completed"), s.get("cojobs_completed")
    # of what the workload plans (a run cut short never started the rest); older summaries: of what started
    stages = None if done is None else f"{done} of {s.get('stages_planned') or done + (s.get('stages_unfinished') or 0)}"
    cojobs_of = None if cojobs is None else s.get("cojobs_planned") or cojobs + (s.get("cojobs_unfinished") or 0)
    rows = [("scheduler", str(s.get("scheduler", "n/a"))),
            ("avg SCT", num(s.get("avg_sct_s"), "s")),
            ("avg CoJCT", num(s.get("avg_cojct_s"), "s")),
            ("avg JCT", num(s.get("avg_jct_s"), "s")),
            ("avg T90", num(s.get("avg_t90_s"), "s")),
            ("stages done", stages or "n/a"),
            ("cojobs done", "n/a" if cojobs is None else f"{cojobs} of {cojobs_of}"),
            ("scheduling decisions", num(s.get("decisions")))]
    if s.get("simulated_s") is not None:
        rows.append(("simulated time", num(s["simulated_s"], "s")))
    if isinstance(s.get("conformance"), dict) and s["conformance"].get("dscp_match_share") is not None:
        rows.append(("packets in their decided queue", pct(s["conformance"]["dscp_match_share"])))
    return rows


def _gnn(data: RunData) -> list[Row]:
    s = data.summary
    rows = [("training", f"{s.get('sync', 'n/a')} sync, scheduler {s.get('scheduler', 'n/a')}"),
            ("iteration time", f"{num(s.get('iteration_s_median'), 's')} median, "
                               f"{num(s.get('iteration_s_mean'), 's')} mean"
                               + (f", {num(s['predicted_iteration_s'], 's')} predicted by the job's model"
                                  if s.get("predicted_iteration_s") is not None else "")),
            ("iterations", num(s.get("iterations")))]
    simulated = data.backend == "simulated"
    if not simulated:  # the model moves bytes and times compute: it trains no model
        rows += [("epochs", num(s.get("epochs"), digits=2)),
                 ("validation accuracy", f"{pct(s.get('val_accuracy'))} last, {pct(s.get('val_accuracy_best'))} best"),
                 ("training loss", f"{num(s.get('train_loss_first'))} first, {num(s.get('train_loss_last'))} last")]
    rows.append(("communication share of an iteration", pct(s.get("communication_share"))))
    if s.get("time_to_accuracy_s") is not None:
        rows.append(("time to target accuracy", num(s["time_to_accuracy_s"], "s")))
    if s.get("training_s") is not None:
        rows.append(("simulated training time" if simulated else "training time", num(s["training_s"], "s")))
    return rows


# The co-location methods table, as table.md (experiments.colocation.report) and
# report.html both print it: (summary field, header) by the queue's kind, CoGNN Table
# V's measures for training, GNNSched Fig. 5-8's (over QT) for inference, then what
# says whether a method's numbers are clean.
COLOCATION_COLUMNS = {
    "training": [("makespan_s", "makespan (s)"), ("avg_jct_s", "avg JCT (s)"), ("avg_queuing_s", "avg queuing (s)"),
                 ("memory_violations", "memory violations"), ("device_utilization", "device busy"),
                 ("groups", "groups"), ("group_boundary_s", "group boundary (s)"), ("failed", "failed tasks")],
    "inference": [("qos_violation_rate", "QoS violation rate"), ("median_latency_qt", "median latency / QT"),
                  ("p90_latency_qt", "p90 latency / QT"), ("p99_latency_qt", "p99 latency / QT"),
                  ("avg_jct_qt", "avg JCT / QT"), ("avg_queuing_qt", "avg queuing / QT"),
                  ("makespan_s", "makespan (s)"), ("memory_violations", "memory violations"),
                  ("device_utilization", "device busy"), ("group_boundary_s", "group boundary (s)"),
                  ("failed", "failed tasks")]}


def spread(value, sd=None, divisor: float = 1) -> str:
    """A mean over repeats as the co-location tables print it: ``± sd`` where there is
    one (two or more repeats), both over ``divisor`` (60: minutes); "-" for none, as
    the papers' tables."""
    if value is None:
        return "-"
    return num(value / divisor) + (f" ± {num(sd / divisor)}" if sd else "")


def spread_of(row: dict, key: str, divisor: float = 1) -> str:
    """``spread`` of a methods row's field ``key`` with its ``<key>_sd``."""
    return spread(row.get(key), row.get(f"{key}_sd"), divisor)


def colocation_rows(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The methods table: header and a row per method (the primary marked); a column
    no method has is left out (a run recorded before that measure)."""
    methods = summary.get("methods") or {}
    kind = "inference" if summary.get("kind") == "inference" else "training"
    columns = [(key, label) for key, label in COLOCATION_COLUMNS[kind] if any(key in m for m in methods.values())]
    rows = [[method + (" (primary)" if method == summary.get("primary") else ""),
             *(spread_of(m, key) for key, _ in columns)] for method, m in methods.items()]
    return ["method"] + [label for _, label in columns], rows


def _colocation(data: RunData) -> list[Row]:
    s = data.summary
    device = (s.get("device") or {}).get("name", "n/a")
    rows = [("queue", f"{s.get('kind')}: {s.get('tasks')} tasks, {s.get('workers')} workers, "
                      f"{s.get('repeats')} repeat(s) on {device}")]
    primary = (s.get("methods") or {}).get(s.get("primary"))
    if primary:  # every method is in the methods table (``tables``)
        rows += [(f"{s['primary']} (primary) makespan", num(primary.get("makespan_s"), "s")),
                 (f"{s['primary']} (primary) avg JCT", num(primary.get("avg_jct_s"), "s"))]
        if s.get("kind") == "inference":
            rows.append((f"{s['primary']} (primary) QoS violations", pct(primary.get("qos_violation_rate"))))
    return rows


def _programs(data: RunData) -> list[Row]:
    s = data.summary
    programs = s.get("programs") or []
    failed = s.get("failed_programs") or []
    rows = [("programs", f"{len({p['program'] for p in programs})} programs, {len(programs)} processes, "
                         f"{len(failed)} failed")]
    rows += [(f"failed: {f['program']}[{f['rank']}] on {f['host']}",
              f"exit {f['exit_code']}{': ' + f['stderr_tail'] if f.get('stderr_tail') else ''}") for f in failed]
    if s.get("allreduce_over_ideal") is not None:
        rows += [("all-reduce over the ring's ideal", num(s["allreduce_over_ideal"])),
                 ("all-reduce algorithm bandwidth", num(s.get("allreduce_mbps"), "Mbit/s")),
                 ("iteration time alone / with the competing program",
                  f"{num(s.get('iteration_s_alone'), 's')} / {num(s.get('iteration_s_with_competing'), 's')}")]
    return rows


def _generic(data: RunData) -> list[Row]:
    """A kind without its own headline: its top-level numbers."""
    skip = {"wall_s", "cpu_idle_share", "cpu_stolen_share", "cpu_throttled_share", "switch_loss_share"}
    return [(key, num(value)) for key, value in data.summary.items()
            if is_number(value) and key not in skip]


HEADLINES: dict[str, Callable[[RunData], list[Row]]] = {
    "timetable": _timetable, "cojob": _cojob, "gnn": _gnn, "colocation": _colocation, "programs": _programs}


def headline(data: RunData) -> list[Row]:
    rows = HEADLINES.get(data.kind, _generic)(data)
    weights = ((data.spec or {}).get("emulation") or {}).get("queue_weights")
    if weights:  # a run's queue choices read otherwise than under the default strict priority
        rows.append(("queues 1..7", f"weighted {', '.join(f'{w:g}' for w in weights)}, not strict priority"))
    return rows


def tables(data: RunData) -> list[tuple[str, list[str], list[list[str]]]]:
    """A kind's tables beside its headline: (title, header, rows)."""
    if data.kind == "colocation" and data.summary.get("methods"):
        return [("Methods (mean over repeats ± standard deviation)", *colocation_rows(data.summary))]
    return []
