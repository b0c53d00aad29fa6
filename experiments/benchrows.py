"""A bench figure as data: ``{"name", "value", "unit", "target", "ok"}``, and its printout.

Names are stable (``results/bench/latest.json`` is read by people and scripts); a name
that said something the row did not measure is renamed, and the rename is logged in
the measurement that first carries it (2026-11-25: ``oes_50_flows_start_to_rates_p99_ms``
is ``..._max_ms``, measurements/bench-2026-11-25)."""
from __future__ import annotations


def row(name: str, value, unit: str = "", target=None, lower_is_better: bool = False) -> dict:
    ok = None
    if target is not None and value is not None:
        ok = value <= target if lower_is_better else value >= target
    return {"name": name, "value": value, "unit": unit, "target": target, "ok": ok}


def show(rows: list[dict]) -> None:
    for r in rows:
        value = r["value"]
        text = f"{value:10.3f}" if isinstance(value, float) else f"{str(value):>10}"
        target = "" if r["target"] is None else f"target {r['target']:g}  {'OK' if r['ok'] else 'MISS'}"
        print(f"{r['name']:<52} {text} {r['unit']:<8} {target}", flush=True)
