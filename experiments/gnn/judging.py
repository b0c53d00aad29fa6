"""ETP's candidates judged in parallel: ``trainbed place --local N | --cluster ADDRESS``.

The chain reads no makespan (``etp``'s readings), so its candidates are judged after
it, all at once: in chunks of consecutive candidates, each chunk a Dask task that
holds one ``cpu`` slot (the slots simulated sweep cells hold: ``trainbed worker
--cpus K``, or ``--local N``'s workers) and runs the job's model in a process of its
own, which ends with its worker (a simulation holds the GIL: a worker's threads would
judge one candidate at a time). The makespans come back in the candidates' order, so
the search's result and trace are those of judging one after another here.

``python -m experiments.gnn.judging WORKER_PID JOB_PICKLE SPANS_JSON`` is that process:
``JOB_PICKLE`` holds ``(makespan, placements)``; it writes their makespans as a JSON
list, or exits non-zero with one line on stderr.
"""
from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import cloudpickle
from distributed import Client, Future, as_completed, get_worker

from controller.schedulers.placement.etp import Mapper
from experiments.cellrun import end_with
from experiments.cluster import DaskExecutor, unwanted_task, wait_unless_unwanted
from experiments.errors import one_line
from experiments.store import REPO_ROOT

CHUNKS_PER_SLOT = 2  # a slot that finishes early takes another chunk: the slots end closer together


def judge_chunk(makespan, placements: list[dict]) -> list[float]:
    """The task, on a worker: ``makespan`` of each of ``placements`` in a child process."""
    unwanted = unwanted_task(get_worker())
    with tempfile.TemporaryDirectory(prefix="trainbed-judge-") as tmp:
        job, spans, errors = Path(tmp) / "job.pickle", Path(tmp) / "spans.json", Path(tmp) / "stderr.txt"
        job.write_bytes(cloudpickle.dumps((makespan, placements)))
        with open(errors, "w+", errors="replace") as stderr:
            process = subprocess.Popen([sys.executable, "-m", "experiments.gnn.judging", str(os.getpid()), str(job),
                                        str(spans)], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
            wait_unless_unwanted(process, unwanted)
            stderr.seek(0)
            said = stderr.read().strip()
        if process.returncode:
            last = said.splitlines()[-1] if said else f"exit status {process.returncode}"
            raise RuntimeError(f"judging {len(placements)} ETP candidates: {last}")
        return json.loads(spans.read_text())


def on_cluster(client: Client) -> Mapper:
    """A ``Mapper`` (as ``map``) whose makespans are taken on ``client``'s cluster: in
    the candidates' order, and a chunk that fails fails it at once, in one line."""
    executor = DaskExecutor(client)

    def mapper(makespan, placements: Sequence[Mapping[str, str]]) -> Iterator[float]:
        placements = [dict(p) for p in placements]
        if not placements:
            return
        slots = executor.slots_of("cpu")
        if not slots:
            print(f"no worker offers `cpu` yet: start one with `trainbed worker {client.scheduler.address}`",
                  file=sys.stderr, flush=True)
            while not slots:  # the job can go out only once a worker holds it
                time.sleep(1)
                slots = executor.slots_of("cpu")
        size = math.ceil(len(placements) / (slots * CHUNKS_PER_SLOT))
        shared = client.scatter(makespan, broadcast=True, hash=False)  # the job and its profile, once per worker
        futures = [client.submit(judge_chunk, shared, placements[i:i + size], resources={"cpu": 1}, pure=False)
                   for i in range(0, len(placements), size)]
        chunk = {future.key: n for n, future in enumerate(futures)}
        done: dict[int, list[float]] = {}
        following = 0  # the next chunk to give back: the makespans go in the candidates' order
        try:
            for future in as_completed(futures):
                done[chunk[future.key]] = _spans(future, len(placements))
                while following in done:
                    yield from done.pop(following)
                    following += 1
        finally:
            client.cancel(futures)  # a failed or abandoned search leaves nothing judging
    return mapper


def _spans(future: Future, candidates: int) -> list[float]:
    try:
        return future.result()
    except RuntimeError:  # the chunk's own line (``judge_chunk``)
        raise
    except Exception as err:  # the cluster's: a worker died twice (KilledWorker), the scheduler went away, ...
        raise RuntimeError(f"judging {candidates} ETP candidates: {one_line(err)}") from None


def main(argv: list[str]) -> int:
    worker_pid, job, spans = argv
    end_with(int(worker_pid))
    makespan, placements = pickle.loads(Path(job).read_bytes())
    try:
        found = [makespan(placement) for placement in placements]
    except Exception as err:  # noqa: BLE001 - the task reports it as one line
        print(one_line(err), file=sys.stderr)
        return 1
    Path(spans).write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
