"""One sweep cell in a process of its own, as a cluster worker runs it
(``experiments.cluster``)::

    python -m experiments.cellrun WORKER_PID CELL_PICKLE OUT_DIR ERROR_FILE

``CELL_PICKLE`` holds ``(run_cell, spec, emulated)``; the cell runs into ``OUT_DIR``
and an exception it raises is written, as one line, to ``ERROR_FILE``. A process,
not the worker's thread: a runner installs signal handlers (only a main thread
may), a simulation holds the GIL for its whole run, and a process can end with
its worker.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
from pathlib import Path

from experiments.errors import one_line

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def end_with(worker_pid: int) -> None:
    """SIGTERM this process when its worker dies, so that a killed worker's cell
    does not run on (an emulated runner tears its fabric down on SIGTERM)."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != worker_pid:  # the worker died before the signal was armed
        sys.exit(f"{Path(sys.argv[0]).stem}: worker {worker_pid} is gone")


def main(argv: list[str]) -> int:
    worker_pid, cell_pickle, out_dir, error_file = argv
    end_with(int(worker_pid))
    run_cell, spec, emulated = pickle.loads(Path(cell_pickle).read_bytes())
    if emulated:  # what cells killed on this machine left of their fabrics, by their records
        from experiments.platform.records import clean_all
        print(clean_all(), flush=True)
    try:
        run_cell(spec, Path(out_dir))
    except Exception as err:  # noqa: BLE001 - the cell failed; the sweep records why
        Path(error_file).write_text(one_line(err))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
