"""A data-parallel training's all-reduce against the ring all-reduce's ideal time, and
its iteration time with and without a competing flow.

Input: one rank's ``iterations.csv`` as ``hosts/ddp_example.py`` writes it, one row per
iteration with ``iteration``, ``start_epoch_s`` (``time.time()``), ``compute_s``,
``allreduce_s``, ``allreduce_bytes`` and ``iteration_s`` (more columns are kept).
"""
from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from topologies.units import mbps_of_bytes, transfer_s

REQUIRED_COLUMNS = ("iteration", "start_epoch_s", "compute_s", "allreduce_s", "allreduce_bytes", "iteration_s")
INTEGER_COLUMNS = ("iteration", "allreduce_bytes")
# The first iterations pay for connection set-up and first-touch allocations.
WARMUP_ITERATIONS = 2


def ring_allreduce_ideal_s(nbytes: float, world_size: int, link_mbps: float) -> float:
    """The time of a ring all-reduce of ``nbytes`` over ``world_size`` ranks whose links
    run at ``link_mbps``: every rank sends (and receives) 2(N-1)/N of the buffer
    (reduce-scatter, then all-gather), at the link rate, with no latency."""
    if world_size < 1:
        raise ValueError(f"world_size {world_size}: must be at least 1")
    if link_mbps <= 0:
        raise ValueError(f"link_mbps {link_mbps}: must be positive")
    if nbytes < 0:
        raise ValueError(f"nbytes {nbytes}: must not be negative")
    return transfer_s(2 * (world_size - 1) / world_size * nbytes, link_mbps)


def read_iterations(path: str | Path) -> list[dict]:
    """The rows of an ``iterations.csv``, every value a float (``iteration`` and
    ``allreduce_bytes`` ints). Bad input raises ValueError, one line naming the file
    (and the line and column)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None:
                raise ValueError(f"{path}: empty, expected a header with {', '.join(REQUIRED_COLUMNS)}")
            missing = [c for c in REQUIRED_COLUMNS if c not in reader.fieldnames]
            if missing:
                raise ValueError(f"{path}: no column {', '.join(missing)} (header: {', '.join(reader.fieldnames)})")
            return [_parse_row(path, reader.line_num, len(reader.fieldnames), row) for row in reader]
    except OSError as err:
        raise ValueError(f"{path}: cannot read: {err.strerror or err}") from None


def _parse_row(path: str | Path, line: int, columns: int, row: dict) -> dict:
    if None in row or None in row.values():  # DictReader's marks of too many / too few cells
        raise ValueError(f"{path}: line {line}: not {columns} cells like the header")
    parsed = {}
    for column, text in row.items():
        where = f"{path}: line {line}, column {column}"
        try:
            value = int(text) if column in INTEGER_COLUMNS else float(text)
        except ValueError:
            kind = "an integer" if column in INTEGER_COLUMNS else "a number"
            raise ValueError(f"{where}: {text!r} is not {kind}") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{where}: {text!r} is not a finite number >= 0")
        parsed[column] = value
    return parsed


def _overlaps(row: dict, windows: list[tuple[float, float]]) -> bool:
    start, end = row["start_epoch_s"], row["start_epoch_s"] + row["iteration_s"]
    return any(start < window_end and end > window_start for window_start, window_end in windows)


def analyse_iterations(rows: list[dict], link_mbps: float, world_size: int,
                       busy_windows: list[tuple[float, float]]) -> dict:
    """The all-reduce and iteration times of one rank's ``rows`` (as from
    ``read_iterations``), over the iterations after the first ``WARMUP_ITERATIONS``:

    - ``allreduce_over_ideal``: the median all-reduce time over the ring's ideal at
      ``link_mbps`` (the hosts' link rate) for ``world_size`` ranks;
    - ``allreduce_mbps``: the median algorithm bandwidth, bytes x 8 / all-reduce time;
    - ``iteration_s_alone`` / ``iteration_s_with_competing``: the median iteration time
      of the iterations entirely outside every busy window / overlapping one
      (``busy_windows``: (start, end) epochs when a competing flow ran); None when
      there are none, with ``iterations_alone`` / ``iterations_with_competing`` counts;
    - ``iterations`` (all rows), ``allreduce_bytes``, ``allreduce_ideal_s``, ``allreduce_s``.

    Raises ValueError when no iteration is left after the warm-up, when the rows'
    all-reduce sizes differ, or on a world size below 2 (no all-reduce to compare).
    """
    if world_size < 2:
        raise ValueError(f"world_size {world_size}: an all-reduce needs at least 2 ranks")
    for window_start, window_end in busy_windows:
        if window_end < window_start:
            raise ValueError(f"busy window ({window_start}, {window_end}) ends before it starts")
    measured = sorted(rows, key=lambda r: r["iteration"])[WARMUP_ITERATIONS:]
    if not measured:
        raise ValueError(f"{len(rows)} iterations: none left after a warm-up of {WARMUP_ITERATIONS}")
    sizes = sorted({r["allreduce_bytes"] for r in measured})
    if len(sizes) > 1:
        raise ValueError(f"allreduce_bytes differ between iterations: {', '.join(map(str, sizes))}")
    nbytes = sizes[0]
    ideal_s = ring_allreduce_ideal_s(nbytes, world_size, link_mbps)
    allreduce_s = statistics.median(r["allreduce_s"] for r in measured)
    alone = [r["iteration_s"] for r in measured if not _overlaps(r, busy_windows)]
    with_competing = [r["iteration_s"] for r in measured if _overlaps(r, busy_windows)]
    return {
        "iterations": len(rows),
        "allreduce_bytes": nbytes,
        "allreduce_ideal_s": ideal_s,
        "allreduce_s": allreduce_s,
        "allreduce_over_ideal": allreduce_s / ideal_s if ideal_s > 0 else None,
        "allreduce_mbps": statistics.median(
            mbps_of_bytes(nbytes, r["allreduce_s"]) if r["allreduce_s"] > 0 else math.inf for r in measured),
        "iteration_s_alone": statistics.median(alone) if alone else None,
        "iteration_s_with_competing": statistics.median(with_competing) if with_competing else None,
        "iterations_alone": len(alone),
        "iterations_with_competing": len(with_competing),
    }
