"""``python -m experiments.reports DIR...``: (re)write the report of each run or sweep
directory (a sweep's holds ``results.csv``) and print its summary."""
from __future__ import annotations

import sys
from pathlib import Path

from experiments.reports import publish_run, publish_sweep
from experiments.reports.sweep import RESULTS


def main(argv: list[str] | None = None) -> int:
    directories = [Path(d) for d in (sys.argv[1:] if argv is None else argv)]
    if not directories:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for directory in directories:
        (publish_sweep if (directory / RESULTS).exists() else publish_run)(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
