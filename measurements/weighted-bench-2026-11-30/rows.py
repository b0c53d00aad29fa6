"""The bench's simulator rows on weighted queues, side by side with strict priority in
one run, after the filling's smaller steps (2026-11-29): `python
measurements/weighted-bench-2026-11-30/rows.py` from the checkout's root."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.cojob.bench import simulator_timings  # noqa: E402

for r in simulator_timings():
    print(f"{r['name']:<48} {r['value']:>12.4g} {r['unit']}", flush=True)
