"""What a reader sees of a run or a sweep, drawn from its data files afterwards.

A run: ``publish_run(run)`` writes ``report.html`` (self-contained: headline
metrics, the fidelity verdict with its reasons, the kind's plots embedded, the
resolved spec, links to the raw files) and prints the console summary; every
runner's end (``experiments.platform.run.finish_run``) calls it. A sweep:
``publish_sweep(dir)`` does the same from ``results.csv`` and the cells. The data
files stay the result: a report can be rewritten at any time
(``python -m experiments.reports RUN_OR_SWEEP_DIR...``).
"""
from experiments.reports.run import publish_run, run_summary, write_run_report
from experiments.reports.sweep import publish_sweep, sweep_summary, write_sweep_report

__all__ = ["publish_run", "publish_sweep", "run_summary", "sweep_summary", "write_run_report", "write_sweep_report"]
