"""The results store: one directory per run, and ``results/latest`` at the newest.

A run directory is named ``<UTC timestamp>-<kind>-<spec name>`` under the results
root (``results/`` of the checkout, or ``$TRAINBED_RESULTS``). It holds the
resolved spec (``spec.yaml``), the environment (``environment.json``: versions,
CPUs, load and the checkout's ``git_commit`` and ``git_dirty``), raw logs,
``summary.json`` and plots. Results are data files first, plots second.
"""
from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import os
import platform
import socket
import subprocess
import sys
import time
import traceback
import zlib
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

import yaml

from experiments.errors import SpecError, one_line
from experiments.platform import cpu

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("torch", "torch-geometric", "os-ken", "scapy", "numpy", "numba", "matplotlib", "PyYAML")
# The files that mark a run directory and a sweep directory, by name.
SPEC = "spec.yaml"  # a run's resolved spec, written first
ENVIRONMENT = "environment.json"  # a run's box and code (``environment()``), written as it starts
SUMMARY = "summary.json"  # a run's summary, written last: a directory with one holds a run that ended
SWEEP_RECORD = "sweep.yaml"  # a sweep's record: its base spec and cells in run order, the code it began under
RESULTS = "results.csv"  # a sweep's table: one row per cell that ran
RAW = "raw"  # a run's raw logs: counters, captures, the tools' own reports
CELLS = "cells"  # a sweep's cells, one run directory each
FAILED_CELLS = "failed"  # a sweep's cells set aside when they failed, before a retry
# The data files the kinds' runs share, by name.
EVENTS = "events.jsonl"  # what the run's tasks (or its simulation) reported, with the driver's notes, in order
DECISIONS = "decisions.jsonl"  # the scheduler's decisions
FLOWS = "flows.csv"  # a gnn run's transfers: bytes, duration, achieved and target Mbit/s
CPU_SAMPLES = "cpu.csv"  # an emulated run's CPU shares, a row a second (``CpuMonitor``)


def results_root() -> Path:
    return Path(os.environ.get("TRAINBED_RESULTS", REPO_ROOT / "results"))


def refuse_held_run(out: str | os.PathLike) -> Path:
    """``out`` as a path, refused where it holds a previous run's summary."""
    run = Path(out)
    if (run / SUMMARY).exists():
        raise SpecError("out", f"{run}: already holds a run ({SUMMARY}); choose a new directory")
    return run


def new_run_dir(kind: str, name: str, out: str | os.PathLike | None = None) -> Path:
    """Create and return a fresh run directory (``out`` when given, which must not
    hold a previous run's summary)."""
    if out is not None:
        run = refuse_held_run(out)
        run.mkdir(parents=True, exist_ok=True)
        return run
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    results_root().mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        run = results_root() / (f"{stamp}-{kind}-{name}" + (f"-{n}" if n > 1 else ""))
        try:
            run.mkdir()  # made here or not at all: two runs started in one second get one each
        except FileExistsError:
            continue
        return run


def point_latest(run: Path) -> None:
    """Make ``results/latest`` a symlink to ``run`` (atomically replaced)."""
    root = results_root()
    root.mkdir(parents=True, exist_ok=True)
    link = root / "latest"
    tmp = root / f".latest-{os.getpid()}"
    target = os.path.relpath(run.resolve(), root.resolve())
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target)
    os.replace(tmp, link)


def kept(path: Path) -> Path | None:
    """``path``, or where only ``NAME.gz`` exists (a run kept in measurements/) that; None: neither."""
    path = Path(path)
    packed = path.with_name(path.name + ".gz")
    return path if path.exists() else packed if packed.exists() else None


# The readers below refuse a file they cannot parse (truncated, garbled, not UTF-8) with
# a one-line SpecError naming it, not a decoder's traceback; a missing file stays a
# FileNotFoundError.
def _read_text(path: Path) -> tuple[Path, str]:
    found = kept(path)
    if found is None:
        raise FileNotFoundError(f"no such file: {path} (nor {path.name}.gz)")
    try:
        return found, gzip.decompress(found.read_bytes()).decode() if found.suffix == ".gz" else found.read_text()
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise SpecError(str(found), f"not a whole gzip file ({err})") from None
    except UnicodeDecodeError as err:
        raise SpecError(str(found), f"not UTF-8 text (byte {err.start})") from None


def read_jsonl(path: Path, missing_ok: bool = False) -> list:
    """A JSON-lines file (``events.jsonl``, ``decisions.jsonl``), plain or kept gzipped:
    one value a line, blank lines skipped; a missing file is ``[]`` when
    ``missing_ok`` (a run cut short before its driver wrote one)."""
    if missing_ok and kept(path) is None:
        return []
    found, text = _read_text(path)
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as err:
                raise SpecError(str(found), f"line {n}: not JSON ({err})") from None
    return rows


def read_csv(path: Path) -> list[dict]:
    """A CSV file with a header (``flows.csv``, ``results.csv``), plain or kept gzipped: one dict a row."""
    found, text = _read_text(path)
    try:
        return list(csv.DictReader(io.StringIO(text, newline="")))  # quoted line breaks stay in their field
    except csv.Error as err:
        raise SpecError(str(found), f"not CSV ({err})") from None


def read_json(path: Path):
    """A JSON file, plain or kept gzipped."""
    found, text = _read_text(path)
    try:
        return json.loads(text)
    except ValueError as err:
        raise SpecError(str(found), f"not JSON ({err})") from None


def write_csv(path: Path, rows: Iterable[Mapping], columns: Sequence[str]) -> None:
    """``columns`` as the header, then one line a row: a missing or None value
    empty, keys not in ``columns`` left out. Written whole or not at all (a reader
    such as ``trainbed figures`` may look while a sweep writes)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def json_line(row) -> str:
    """One record of a ``.jsonl`` file: compact JSON and a newline."""
    return json.dumps(row, separators=(",", ":")) + "\n"


def write_jsonl(path: Path, rows) -> None:
    with open(path, "w") as out:
        for row in rows:
            out.write(json_line(row))


def write_json(path: Path, data) -> None:
    """Written whole or not at all (a run killed mid-write, then resumed, reads it back)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def box(environment: Mapping) -> str | None:
    """A run's box as ``<host name>/<boot id's first 8 hex digits>``: runs with one label
    ran on one box in one boot; None for a run recorded before boot ids were."""
    boot = environment.get("boot_id")
    return f"{environment.get('machine')}/{boot[:8]}" if isinstance(boot, str) and boot else None


def start_run(spec: dict, out: str | os.PathLike | None = None, kind: str = "run",
              device: dict | None = None) -> Path:
    """A fresh run directory holding the resolved spec and the environment (with
    ``device``, the accelerator a co-location run measures on): how every runner
    begins: ``out`` where given (``new_run_dir``), else ``<stamp>-<kind>-<name>`` (``run``
    on the fabric, which also gets an empty ``raw/`` for its raw logs; ``simulate``;
    ``colocate``)."""
    run = new_run_dir(kind, spec["name"], out)
    write_spec(run, spec)
    write_environment(run, device)
    if kind == "run":
        (run / RAW).mkdir(exist_ok=True)
    return run


def write_environment(run: Path, device: dict | None = None) -> dict:
    """``environment()`` (with ``device`` where given) written as the run's ``environment.json``."""
    env = environment()
    if device is not None:
        env["device"] = device
    write_json(run / ENVIRONMENT, env)
    return env


def read_environment(run: Path, garbled_ok: bool = False) -> dict:
    """A run directory's ``environment.json``; {} when missing (a run that failed before
    writing one). A garbled file, or one that is not a mapping, is a SpecError naming it,
    or {} with ``garbled_ok`` (a sweep's table, a figure's labels, a worker adding its
    address: one bad cell must not stop them)."""
    path = Path(run) / ENVIRONMENT
    if kept(path) is None:
        return {}
    try:
        env = read_json(path)
        if not isinstance(env, dict):
            raise SpecError(str(path), f"not a mapping ({type(env).__name__})")
    except (OSError, SpecError):
        if garbled_ok:
            return {}
        raise
    return env


def record_error(run: Path, summary: dict, error: BaseException) -> None:
    """A fault as every run records it: ``completed: false`` and the error on one line
    in ``summary`` (written by the caller), its traceback in ``traceback.txt``."""
    summary["completed"] = False
    summary["error"] = one_line(error)
    (run / "traceback.txt").write_text("".join(traceback.format_exception(error)))


def write_spec(run: Path, resolved: dict) -> None:
    (run / SPEC).write_text(yaml.safe_dump(resolved, sort_keys=False))


def _code(state: dict) -> str:
    return f"commit {state['git_commit'][:12]} ({'dirty' if state['git_dirty'] else 'clean'})"


def utc_now() -> str:
    """The time as every record of this store writes it (``2026-11-29T01:30:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def resumed(record: dict, now: dict) -> list[dict]:
    """``record``'s ``resumes`` with one more: this one's time and code (``git_state``)."""
    return [*(record.get("resumes") or []), {"time_utc": utc_now(), **now}]


def check_same_code(where: str, recorded: dict, now: dict, force: bool) -> None:
    """Resuming ``where`` (a sweep's cells, a co-location run) whose first run recorded
    ``recorded`` (its ``git_state()``) under the checkout's ``now``: refused in one line
    under other code (another commit, or a clean tree that is dirty now) unless
    ``force``, which warns on one line; a state that cannot be told warns too."""
    if recorded.get("git_commit") is None or now.get("git_commit") is None:
        why = now.get("git_note") or recorded.get("git_note") or "no git_commit recorded"
        print(f"warning: cannot tell whether {where} ran under this code: {why}", file=sys.stderr, flush=True)
    elif recorded["git_commit"] != now["git_commit"] or (recorded.get("git_dirty") is False and now["git_dirty"]):
        change = f"{where} was started under {_code(recorded)}, this checkout is {_code(now)}"
        if not force:
            raise SpecError("--out", f"{change}; pass --force to resume it under this code, or choose a new --out")
        print(f"warning: {change}; resuming under this code (--force)", file=sys.stderr, flush=True)


def git_state() -> dict:
    """The checkout's ``git_commit`` and ``git_dirty`` (its tracked files differ from
    that commit); both None outside a git checkout, with ``git_note`` saying why.
    ``safe.directory``: runs are started as root in a checkout owned by someone else;
    no optional locks: another process may be using the index."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "safe.directory=*", "--no-optional-locks", "-C", str(REPO_ROOT), *args],
                              capture_output=True, text=True, timeout=10, check=True).stdout

    try:
        commit = git("rev-parse", "--verify", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except FileNotFoundError:
        note = "git is not installed"
    except subprocess.CalledProcessError as err:
        lines = (err.stderr or "").strip().splitlines()
        note = f"not a git checkout, or one without commits ({lines[0] if lines else f'git exit {err.returncode}'})"
    except (OSError, subprocess.TimeoutExpired) as err:
        note = f"git failed: {err}"
    else:
        return {"git_commit": commit, "git_dirty": dirty}
    return {"git_commit": None, "git_dirty": None, "git_note": f"{REPO_ROOT}: {note}"}


def environment() -> dict:
    """Package versions, kernel, the machine (host name) and its architecture, CPUs
    (count, usable, cgroup quota), the box (boot id, CPU model and clock, memory, a
    fixed loop's time: ``cpu.box_identity``, ``cpu.cpu_loop_ms``), load and the code's
    commit: what a reader needs to judge a run, compare it with runs of other boxes
    and find its code again."""
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    tools = {}
    for tool, args in (("ovs-vswitchd", ["--version"]), ("iperf3", ["--version"])):
        try:
            first = subprocess.run([tool, *args], capture_output=True, text=True, timeout=5).stdout
            tools[tool] = first.splitlines()[0] if first else None
        except (OSError, subprocess.TimeoutExpired):
            tools[tool] = None
    return {
        "python": sys.version.split()[0],
        "packages": versions,
        "tools": tools,
        "kernel": platform.release(),
        "machine": socket.gethostname(),  # which machine ran it: cells of a cluster sweep run on several
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_quota_cores": cpu.quota_cores(cpu.cgroup_cpu_dirs()),
        **cpu.box_identity(),
        "cpu_loop_ms": cpu.cpu_loop_ms(),
        "loadavg": list(os.getloadavg()),
        "time_utc": utc_now(),
        **git_state(),
    }
