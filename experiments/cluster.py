"""Sweeps on a Dask distributed cluster: ``trainbed sweep SWEEP.yaml --cluster
ADDRESS`` (a running ``dask scheduler``), ``--local N`` (a scheduler and N workers
on this machine), and ``trainbed worker ADDRESS [--fabric] [--cpus K]``.

A worker declares its resources: ``fabric=1`` where it may bring up a fabric (one
per machine, as root), ``cpu=K`` to run K simulated cells at once. An emulated cell
needs ``fabric: 1``, a simulated one ``cpu: 1``. The cells of one group (one seed
and grid point: the schedulers compared) are one task, so they run on one machine,
one after another, and their comparison stays paired. The worker runs each cell in
a process of its own (``experiments.cellrun``) into a temporary directory, adds its
address to the cell's ``environment.json`` (whose ``machine`` is its host name) and
returns the directory as a tarball; the client writes it to ``DIR/cells/<id>/`` and
``run_sweep`` keeps the books as each group lands.

Faults: a worker that dies while running a group has it run again on another
worker by the scheduler, once where the scheduler's ``allowed-failures`` is 1 (as
``--local``'s is; the docs start ``dask scheduler`` so); after that its cells are
recorded as failed, with the reason. A scheduler that goes away stops the sweep with
the cells that landed in ``DIR``; a resume runs the rest. A worker stops (SIGTERM)
the cell whose result nobody will take: its task cancelled (the sweep stopped), or
the worker closing (its scheduler went away); a cell's process also ends with its
worker.
"""
from __future__ import annotations

import io
import logging
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import cloudpickle
from distributed import Client, Nanny, Scheduler, SpecCluster, as_completed, get_worker
from distributed.core import Status
from distributed.scheduler import KilledWorker
from distributed.worker import thread_state

from experiments.errors import SpecError, one_line
from experiments.store import ENVIRONMENT, REPO_ROOT, read_environment, write_json
from experiments.results import cell_dir
from experiments.sweep import Cell, RunCell, Sweep, groups

logger = logging.getLogger("distributed.worker")  # shown where the worker's own lines are
RESOURCE = {"emulated": "fabric", "simulated": "cpu"}  # what one cell of each backend holds on its worker
ALLOWED_FAILURES = 1  # a group whose worker dies runs again once
CONNECT_TIMEOUT_S = 10
CLOSING = (Status.closing, Status.closed, Status.failed)


def run_group(cells: list[tuple[str, dict]], run_cell: RunCell, emulated: bool) -> list[dict]:
    """The task of one group, on a worker: each cell in turn, as ``run_cell(spec,
    dir)`` in a process of its own; per cell ``{"error", "seconds", "files"}``
    (``files``: the run directory as a tar.gz, None where the run left none)."""
    worker, landed = get_worker(), []
    unwanted = unwanted_task(worker)
    for cell_id, spec in cells:
        if unwanted():
            raise RuntimeError(f"stopped before cell {cell_id}: its sweep or scheduler went away")
        landed.append(_run_in_process(cell_id, spec, run_cell, emulated, worker.address, unwanted))
    return landed


def unwanted_task(worker) -> Callable[[], bool]:
    """For the task running in this thread of ``worker``: whether nobody will take its
    result, the worker closing (e.g. its scheduler went away) or the task cancelled
    (its sweep or search stopped)."""
    key = thread_state.key

    def unwanted() -> bool:
        task = worker.state.tasks.get(key)
        return worker.status in CLOSING or task is None or task.state == "cancelled"
    return unwanted


def wait_unless_unwanted(process: subprocess.Popen, unwanted: Callable[[], bool]) -> None:
    """Wait for a task's child process; SIGTERM it, once, when ``unwanted()`` (a
    second signal would cut an emulated runner's tear-down short)."""
    terminated = False
    while True:
        try:
            process.wait(timeout=1)
            return
        except subprocess.TimeoutExpired:
            if unwanted() and not terminated:
                process.terminate()
                terminated = True


def _run_in_process(cell_id: str, spec: dict, run_cell: RunCell, emulated: bool, address: str,
                    unwanted: Callable[[], bool]) -> dict:
    with tempfile.TemporaryDirectory(prefix="trainbed-cell-") as tmp:
        tmp = Path(tmp)
        out, error_file, cell_pickle = tmp / cell_id, tmp / "error.txt", tmp / "cell.pickle"
        cell_pickle.write_bytes(cloudpickle.dumps((run_cell, spec, emulated)))
        began = time.monotonic()
        with open(tmp / "output.txt", "w+", errors="replace") as output:
            # TRAINBED_RESULTS: the run's results/latest link lands in tmp, not in the worker's checkout
            process = subprocess.Popen([sys.executable, "-m", "experiments.cellrun", str(os.getpid()),
                                        str(cell_pickle), str(out), str(error_file)], cwd=REPO_ROOT,
                                       env={**os.environ, "TRAINBED_RESULTS": str(tmp)}, stdout=output,
                                       stderr=subprocess.STDOUT)
            wait_unless_unwanted(process, unwanted)  # an emulated runner tears its fabric down on SIGTERM
            seconds = time.monotonic() - began
            output.seek(0)
            printed = output.read().strip()
        if printed:  # the run's console summary, in the worker's log (its paths are the temporary ones)
            logger.info("cell %s:\n%s", cell_id, printed)
        last = f" ({printed.splitlines()[-1]})" if printed else ""
        if error_file.exists():
            error = error_file.read_text()
        elif process.returncode < 0:
            error = f"the cell's process was killed by {signal.Signals(-process.returncode).name}{last}"
        elif process.returncode:
            error = f"the cell's process exited with status {process.returncode}{last}"
        else:
            error = None
        environment = read_environment(out, garbled_ok=True)
        if environment:  # a garbled one stays as the cell left it
            write_json(out / ENVIRONMENT, {**environment, "worker": address})
        return {"error": error, "seconds": seconds, "files": _pack(out) if out.is_dir() else None}


def _pack(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:  # level 1: a 2-core worker's time
        tar.add(directory, arcname=".")
    return buffer.getvalue()


def _unpack(files: bytes, directory: Path) -> None:
    directory.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(files), mode="r:gz") as tar:
        tar.extractall(directory, filter="data")


class DaskExecutor:
    """A sweep's cells as tasks on a Dask cluster, one task per group of cells."""

    def __init__(self, client: Client):
        self.client = client

    together = True  # the fabric's cells and the simulator's hold resources of their own

    def slots(self, sweep: Sweep) -> dict[str, int]:
        return {backend: self.slots_of(RESOURCE[backend]) for backend in sweep.backends}

    def slots_of(self, resource: str) -> int:
        """How many tasks holding one ``resource`` the cluster's workers run at once."""
        workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
        return int(sum(worker.get("resources", {}).get(resource, 0) for worker in workers))

    def run(self, cells: list[Cell], directory: Path, runner, started) -> Iterator:
        address = self.client.scheduler.address
        batches = groups(cells)  # a group is one part's: one backend
        futures = {self.client.submit(run_group, [(cell.id, cell.spec) for cell in group], runner(group[0]),
                                      group[0].backend == "emulated", resources={RESOURCE[group[0].backend]: 1},
                                      key=f"{group[0].id}-{uuid.uuid4().hex}"): group
                   for group in batches}  # a key of its own: another sweep may send the same cells
        for backend in sorted({cell.backend for cell in cells}):
            resource, slots = RESOURCE[backend], self.slots_of(RESOURCE[backend])
            waiting = "" if slots else (f"; no worker offers `{resource}` yet: start one with "
                                        f"`trainbed worker {address}{' --fabric' if backend == 'emulated' else ''}`")
            sent = [cell for cell in cells if cell.backend == backend]
            print(f"sent {len(sent)} {backend} cells in {len([g for g in batches if g[0].backend == backend])} "
                  f"groups to {address} ({slots} {resource} slots{waiting})", flush=True)
        for future in as_completed(futures):
            group = futures[future]
            try:
                landed = future.result()
            except KilledWorker as err:
                reason = (f"KilledWorker: the worker running it died, {err.allowed_failures + 1} times "
                          f"(the last {err.last_worker.address})")
                yield from ((cell, reason, None) for cell in group)
                continue
            except Exception as err:  # the group failed on its worker (or the scheduler went away)
                if self.client.status != "running":
                    raise RuntimeError(f"--cluster: lost the Dask scheduler at {address} ({one_line(err)}); the "
                                       f"cells that landed are in {directory}: run again with --out {directory} "
                                       "to finish the rest") from err
                yield from ((cell, one_line(err), None) for cell in group)
                continue
            for cell, outcome in zip(group, landed):
                if outcome["files"] is not None:
                    _unpack(outcome["files"], cell_dir(directory, cell.id))
                yield cell, outcome["error"], outcome["seconds"]


def _allowed_failures(dask_scheduler) -> int:
    return dask_scheduler.allowed_failures


@contextmanager
def connect(address: str) -> Iterator[DaskExecutor]:
    """``--cluster ADDRESS``: an executor on the Dask scheduler there."""
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as err:
        raise SpecError("--cluster", f"no Dask scheduler answers at {address} ({one_line(err)})") from None
    with client:
        allowed = client.run_on_scheduler(_allowed_failures)
        if allowed != ALLOWED_FAILURES:
            print(f"warning: the scheduler at {address} runs a task whose worker died up to {allowed + 1} times, "
                  f"not {ALLOWED_FAILURES + 1} (start it with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="
                  f"{ALLOWED_FAILURES})", file=sys.stderr, flush=True)
        yield DaskExecutor(client)


@contextmanager
def local(workers: int, backends: set[str]) -> Iterator[DaskExecutor]:
    """``--local N``: a scheduler and N one-slot workers on this machine, on
    127.0.0.1; with emulated cells the first holds the machine's fabric slot, and the
    others (the first too, when it is alone) a CPU for simulated cells."""
    if workers < 1:
        raise SpecError("--local", f"must be at least 1 worker, got {workers}")

    def resources(n: int) -> dict:
        fabric = "emulated" in backends and n == 0
        cpu = "simulated" in backends and (not fabric or workers == 1)
        return {**({"fabric": 1} if fabric else {}), **({"cpu": 1} if cpu else {})}
    options = {"host": "127.0.0.1", "dashboard_address": None}
    specs = {f"local-{n}": {"cls": Nanny, "options": {**options, "nthreads": 1, "silence_logs": logging.WARNING,
                                                     "resources": resources(n)}}
             for n in range(workers)}
    scheduler = {"cls": Scheduler, "options": {**options, "allowed_failures": ALLOWED_FAILURES}}
    with SpecCluster(workers=specs, scheduler=scheduler, silence_logs=logging.WARNING) as cluster, \
            Client(cluster) as client:
        yield DaskExecutor(client)


def worker_command(address: str, fabric: bool, cpus: int | None) -> list[str]:
    """``trainbed worker``: the ``dask worker`` command line with this machine's
    resources; no nanny, so that the worker's pid is the one to stop."""
    if fabric and os.geteuid() != 0:
        raise SpecError("--fabric", "an emulated cell brings up a fabric, which needs root: run the worker as root")
    if cpus is None:  # an emulated cell wants the machine's CPUs to itself
        cpus = 0 if fabric else len(os.sched_getaffinity(0))
    if cpus < 0 or (cpus == 0 and not fabric):
        raise SpecError("--cpus", f"must be at least {0 if fabric else 1}, got {cpus}")
    resources = " ".join([*(["fabric=1"] if fabric else []), *([f"cpu={cpus}"] if cpus else [])])
    return [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny", "--no-dashboard",
            "--nthreads", str(cpus + fabric), "--resources", resources,
            "--name", f"{socket.gethostname()}-{os.getpid()}"]
