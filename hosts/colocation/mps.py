"""NVIDIA's MPS control daemon for the MPS baselines, private to one run.

The daemon and its clients meet in ``CUDA_MPS_PIPE_DIRECTORY``; giving each run
its own directory means a run starts and stops its own daemon and never talks
to another's. Workers get the directory in their environment before they touch
CUDA (``WorkerPool.env``), so they become MPS clients. Where the daemon cannot
run (no binary, no permission, a GPU in exclusive or prohibited mode, the CPU)
``start`` says why and the baseline runs its schedule as plain processes, which
the run's facts record.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"


@dataclass
class MpsDaemon:
    directory: Path
    binary: str

    @property
    def env(self) -> dict[str, str]:
        """What a client (and the control command) needs to find this daemon."""
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.directory / "pipe"),
                "CUDA_MPS_LOG_DIRECTORY": str(self.directory / "log")}

    def stop(self) -> str | None:
        """Ask the daemon to quit; the error, if it would not (never raised: it runs
        where a run's own error may be on its way out)."""
        try:
            done = subprocess.run([self.binary], input="quit\n", env={**os.environ, **self.env}, capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"{CONTROL} quit: {_reason(err)}"
        return None if done.returncode == 0 else f"{CONTROL} quit: exit {done.returncode} {done.stderr.strip()}"


def _reason(err: OSError | subprocess.TimeoutExpired) -> str:
    return f"no answer in {err.timeout:g} s" if isinstance(err, subprocess.TimeoutExpired) else str(err.strerror)


def start(directory: Path, device_type: str, binary: str | None = None) -> MpsDaemon | str:
    """A running daemon in ``directory``, or the reason there is none."""
    if device_type != "cuda":
        return f"no MPS on {device_type}: worker processes share the device's cores"
    binary = binary or shutil.which(CONTROL)
    if binary is None:
        return f"{CONTROL} not found"
    daemon = MpsDaemon(directory, binary)
    for sub in ("pipe", "log"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([binary, "-d"], env={**os.environ, **daemon.env}, capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{CONTROL} -d: {_reason(err)}"
    if done.returncode != 0:
        return f"{CONTROL} -d: exit {done.returncode} {done.stderr.strip()}".strip()
    return daemon
