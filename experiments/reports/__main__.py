"""``python -m experiments.reports DIR...``: (re)write the report of each run or sweep
directory (a sweep's holds ``results.csv``) and print its summary. A directory whose
report cannot be written is one line on stderr, the others are still written, and the
exit status is 1."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.errors import one_line
from experiments.reports.run import run_summary, write_run_report
from experiments.reports.sweep import sweep_summary, write_sweep_report
from experiments.store import RESULTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.reports", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="+", help="a run or sweep directory")
    directories = [Path(d) for d in parser.parse_args(argv).dir]
    failed = False
    for directory in directories:
        try:
            if not directory.is_dir():
                raise NotADirectoryError("not a run or sweep directory")
            if (directory / RESULTS).exists():
                write_sweep_report(directory)
                print(sweep_summary(directory), flush=True)
            else:
                write_run_report(directory)
                print(run_summary(directory), flush=True)
        except Exception as err:  # noqa: BLE001 - one line per directory; the others are still written
            print(f"reports: {directory}: {one_line(err)}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
