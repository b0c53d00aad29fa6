"""hosts/gnn/task.py as real DGL processes on 127.0.0.1 (three "machines" that differ
by name only), driven by a minimal driver that logs the events."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fake_driver import FakeDriver
from fakes import RecordingSocket

from experiments.gnn.job import prepare

REPO = Path(__file__).resolve().parents[1]
MACHINES = ["h1", "h2", "h3"]


def launch(tmp_path: Path, tasks: dict[str, str], sync: str, workers: int, ps: int, iterations: int,
           timeout_s: float = 60.0, samplers_per_worker: int = 1):
    workload = {"graph": {"shape": "ogbn-products", "nodes": 2000, "avg_degree": 8}, "fanouts": [4, 8],
                "batch_size": 32, "hidden": 32, "lr": 0.01, "iterations": iterations, "eval_every": 3,
                "eval_nodes": 50, "sync": sync, "workers": workers, "samplers_per_worker": samplers_per_worker,
                "ps": ps,
                "profile": False}
    # 127.0.0.1 for every machine; the task ports keep the tasks apart.
    port_base = 24000 + (os.getpid() % 200) * 40
    import experiments.gnn.job as job_mod
    job_mod.TASK_PORT_BASE, saved = port_base, job_mod.TASK_PORT_BASE
    try:
        prepare(workload, tasks, {m: "127.0.0.1" for m in MACHINES}, MACHINES, 1, tmp_path / "job", timeout_s)
    finally:
        job_mod.TASK_PORT_BASE = saved
    events = FakeDriver(str(tmp_path / "events.sock"))
    procs = {task: subprocess.Popen([sys.executable, "-m", "hosts.gnn.task", "--config",
                                     str(tmp_path / "job" / "config.json"), "--task", task,
                                     "--events", str(tmp_path / "events.sock")], cwd=REPO,
                                    stderr=subprocess.PIPE, text=True)
             for task in tasks}
    return events, procs


def wait_all(procs: dict, timeout_s: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    codes = {}
    try:
        for task, proc in procs.items():
            codes[task] = proc.wait(max(0.1, deadline - time.monotonic()))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return codes


def stores() -> dict[str, str]:
    return {f"store{m}": host for m, host in enumerate(MACHINES)}


def wait_for_byes(events: FakeDriver, n_tasks: int) -> None:
    """A task's ``bye`` is the last line on its connection, read in order: once every
    task's has arrived, so has everything the tasks sent."""
    events.wait_for(lambda evs: sum(e["kind"] == "bye" for e in evs) == n_tasks)


def check_flows(events: FakeDriver, n_tasks: int) -> Counter:
    wait_for_byes(events, n_tasks)
    starts = {e["flow"]: e for e in events.of("flow_start")}
    ends = {e["flow"]: e for e in events.of("flow_end")}
    assert len(starts) == len(events.of("flow_start")), "flow ids are unique"
    assert starts.keys() == ends.keys()
    for fid, e in starts.items():
        assert e["src"] != e["dst"] and ends[fid]["bytes"] == e["bytes"] > 0
        assert ends[fid]["t"] >= e["t"]
    return Counter(e["phase"] for e in starts.values())


def test_ps_training_runs_and_reports_every_transfer(tmp_path):
    tasks = {**stores(), "sampler0": "h1", "sampler1": "h2", "worker0": "h2", "worker1": "h3", "ps0": "h1"}
    events, procs = launch(tmp_path, tasks, "ps", workers=2, ps=1, iterations=9)
    codes = wait_all(procs, 150)
    assert all(code == 0 for code in codes.values()), {t: p.stderr.read()[-500:] for t, p in procs.items()}
    phases = check_flows(events, len(tasks))
    # Remote pairs only: sampler0 (h1) <- store1, store2; sampler1 (h2) <- store0, store2; per hop and features.
    assert phases["sample0"] == phases["sample1"] == phases["feature"] == 4 * 9
    assert phases["minibatch"] == 2 * 9  # sampler0 (h1) -> worker0 (h2), sampler1 (h2) -> worker1 (h3)
    assert phases["gradient"] == phases["parameter"] == 2 * 9 and phases["init"] == 1
    assert phases["evalbatch"] == 3  # iterations 2, 5, 8
    ends = sorted(events.of("iteration_end"), key=lambda e: (e["task"], e["iteration"]))
    lead = [e for e in ends if e["task"] == "worker0"]
    assert [e["iteration"] for e in lead] == list(range(9))
    assert lead[-1]["loss"] < lead[0]["loss"]
    assert sum(e["val_accuracy"] is not None for e in lead) == 3
    assert {e["task"] for e in events.of("compute")} == set(tasks)
    assert len(events.of("bye")) == len(tasks)
    check_the_model_reads_the_events(events, tasks)


def check_the_model_reads_the_events(events: FakeDriver, tasks: dict[str, str]) -> None:
    """What the tasks report is what the job's model needs: every request a store served
    with its sizes, a sampler's compute per round (L hops, then the features), worker 0's
    evaluation; the profile of these events runs the model for the job's spec."""
    from experiments.gnn import metrics, simulated
    from experiments.gnn import spec as gnn_spec
    compute = events.of("compute")
    served = [e for e in compute if e["task"].startswith("store")]
    assert served and all(e["request_bytes"] > 0 and e["reply_bytes"] > 0 and e["step"] for e in served)
    # every round of every sampler is served, local stores included: 3 stores x 3 rounds x 9 iterations
    assert len([e for e in served if not e["step"].startswith("eval-")]) == 2 * 3 * 3 * 9
    rounds = [e for e in compute if e["task"].startswith("sampler")]
    assert all(len(e["rounds"]) == 3 and e["seconds"] == pytest.approx(
        sum(e["rounds"]) + sum(e.get("eval_rounds", [])), abs=1e-5) for e in rounds)
    assert [e["iteration"] for e in rounds if "eval_rounds" in e] == [2, 5, 8]
    assert [e["iteration"] for e in compute if "eval_s" in e] == [2, 5, 8]
    host = {m: f"tbh{k + 1}" for k, m in enumerate(MACHINES)}
    spec = gnn_spec.validate({"name": "task-test", "topology": {"kind": "star", "hosts": 3, "host_mbps": 100},
                              "scheduler": {"name": "oes"}, "workload": {
        "kind": "gnn", "graph": {"shape": "ogbn-products", "nodes": 2000, "avg_degree": 8}, "fanouts": [4, 8],
        "batch_size": 32, "hidden": 32, "lr": 0.01, "iterations": 9, "eval_every": 3, "eval_nodes": 50,
        "workers": 2, "samplers_per_worker": 1, "sync": "ps", "ps": 1,
        "placement": {t: host[m] for t, m in tasks.items() if not t.startswith("store")}}})
    renamed = [{**e, **{k: host[e[k]] for k in ("host", "src", "dst") if e.get(k) in host}} for e in events.events]
    profile = simulated.Profile.parse(metrics.profile(renamed, 9, spec, {"trustworthy": True,
                                                                        "untrustworthy_reasons": []}), "task test")
    assert simulated.predict(spec, profile) > 0


def test_ring_allreduce_sends_2w_minus_2_chunks(tmp_path):
    tasks = {**stores(), "sampler0": "h1", "sampler1": "h2", "sampler2": "h3",
             "worker0": "h1", "worker1": "h2", "worker2": "h3"}
    events, procs = launch(tmp_path, tasks, "allreduce", workers=3, ps=0, iterations=4)
    codes = wait_all(procs, 150)
    assert all(code == 0 for code in codes.values()), {t: p.stderr.read()[-500:] for t, p in procs.items()}
    phases = check_flows(events, len(tasks))
    rings = {p: n for p, n in phases.items() if p.startswith("ring")}
    assert rings == {f"ring{s}": 3 * 4 for s in range(4)}  # 2(W-1) steps, each worker, each iteration
    assert "minibatch" not in phases  # every sampler sits with its worker
    losses = {e["task"]: e["loss"] for e in events.of("iteration_end") if e["iteration"] == 3}
    assert len(losses) == 3


def test_a_dead_sampler_fails_its_worker_by_name_and_nothing_hangs(tmp_path):
    tasks = {**stores(), "sampler0": "h1", "sampler1": "h2", "worker0": "h2", "worker1": "h3", "ps0": "h1"}
    events, procs = launch(tmp_path, tasks, "ps", workers=2, ps=1, iterations=10_000, timeout_s=20)
    deadline = time.monotonic() + 120
    while not [e for e in events.of("iteration_end") if e["iteration"] >= 2]:
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.2)
    procs["sampler0"].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    codes = wait_all(procs, 60)
    assert time.monotonic() - killed < 40
    assert codes["worker0"] != 0
    errors = {e["task"]: e["error"] for e in events.of("error")}
    assert "sampler0" in errors["worker0"], errors


def test_a_graph_is_partitioned_once_and_reused(tmp_path):
    from experiments.gnn.job import partitioned
    spec = {"shape": "ogbn-products", "nodes": 500, "avg_degree": 6}
    first = partitioned(spec, 2, 3, tmp_path)
    stamp = (first / "meta.json").stat().st_mtime_ns
    again = partitioned(spec, 2, 3, tmp_path)
    assert again == first and (again / "meta.json").stat().st_mtime_ns == stamp
    assert json.loads((first / "meta.json").read_text())["node_ranges"][-1][1] == 500
    assert partitioned({**spec, "nodes": 600}, 2, 3, tmp_path) != first
    assert [p.name for p in (tmp_path / "gnn-graphs").iterdir() if p.name.startswith(".")] == []


def test_training_is_the_same_whatever_the_timing(tmp_path):
    """Two samplers per worker hit every store at once; the samples, and so the losses,
    are still the same run to run (stores seed every sample in one thread)."""
    tasks = {**stores(), "sampler0": "h1", "sampler1": "h2", "sampler2": "h2", "sampler3": "h3",
             "worker0": "h2", "worker1": "h3", "ps0": "h1"}
    runs = []
    for attempt in range(2):
        out = tmp_path / f"run{attempt}"
        out.mkdir()
        events, procs = launch(out, tasks, "ps", workers=2, ps=1, iterations=3, samplers_per_worker=2)
        codes = wait_all(procs, 150)
        assert all(code == 0 for code in codes.values())
        wait_for_byes(events, len(tasks))
        runs.append(([(e["task"], e["iteration"], e["loss"]) for e in sorted(
            events.of("iteration_end"), key=lambda e: (e["task"], e["iteration"]))],
            sorted((e["flow"], e["bytes"]) for e in events.of("flow_start"))))
    assert runs[0] == runs[1]


class FakeTask:
    def __init__(self, task_id: str, host: str):
        self.task_id, self.host, self.events = task_id, host, []

    def emit(self, kind: str, **fields) -> None:
        self.events.append((kind, fields))


def test_frames_on_the_wire_are_the_same_bytes_in_the_same_writes():
    """The bytes and write boundaries of an introduction and two frames, as recorded
    before the transport moved to hosts.framing (with TCP_NODELAY, writes shape the
    packets); the receiver gets the arrays back and reports the flow's end."""
    from hosts import framing
    from hosts.gnn import wire
    sender, receiver = FakeTask("sampler0", "h1"), FakeTask("worker0", "h2")
    with framing.listen(("127.0.0.1", 0), 1, 5) as listener:
        a = RecordingSocket(framing.connect(listener.getsockname(), 5))
        b, _ = framing.accept(listener, 5)
    introduced = []
    intro = threading.Thread(target=lambda: introduced.append(wire._intro(b, receiver)))
    intro.start()
    assert wire._intro(a, sender) == {"task": "worker0", "host": "h2"}
    intro.join()
    out, into = wire.Link(a, sender, "worker0", "h2"), wire.Link(b, receiver, "sampler0", "h1")
    feat, label = np.arange(12, dtype=np.float32).reshape(3, 4), np.array([1, 2, 3], dtype=np.int64)
    got = []
    reader = threading.Thread(target=lambda: got.extend([into.recv(), into.recv()]))
    reader.start()
    total = out.send(5, 9, {"feat": feat, "label": label, "empty": np.zeros(0, np.int64)}, phase="minibatch",
                     sizes=[[3, 2]])
    out.send(7, 9)
    reader.join()
    out.close()
    into.close()
    meta = (b'{"arrays":[["feat","<f4",[3,4]],["label","<i8",[3]],["empty","<i8",[0]]],'
            b'"flow":"sampler0->worker0/i9/minibatch","sizes":[[3,2]]}')
    assert a.writes == [
        bytes.fromhex("00" "00000000" "00000022" "0000000000000000") + b'{"task": "sampler0", "host": "h1"}',
        bytes.fromhex("05" "00000009" "00000081" "0000000000000048") + meta,
        feat.tobytes(), label.tobytes(),
        bytes.fromhex("07" "00000009" "00000019" "0000000000000000") + b'{"arrays":[],"flow":null}']
    assert total == 17 + len(meta) + 72
    (kind, iteration, scalars, arrays), second = got
    assert (kind, iteration, scalars) == (5, 9, {"sizes": [[3, 2]]}) and second == (7, 9, {}, {})
    assert np.array_equal(arrays["feat"], feat) and np.array_equal(arrays["label"], label)
    assert arrays["empty"].shape == (0,)
    assert receiver.events == [("flow_end", {"flow": "sampler0->worker0/i9/minibatch", "bytes": total})]


def test_a_samplers_batches_are_full_and_distinct_across_epoch_ends():
    """Every batch has batch_size distinct seeds (the whole shard when smaller), and
    each epoch visits the shard once: its leftover then the next epoch's others."""
    import numpy as np
    from types import SimpleNamespace

    from hosts.gnn.task import Sampler
    for shard_size, batch_size in ((50, 32), (20, 32), (64, 16)):
        sampler = SimpleNamespace(shard=np.arange(100, 100 + shard_size), order=np.empty(0, dtype=np.int64),
                                  rng=np.random.default_rng(7), job=SimpleNamespace(batch_size=batch_size))
        batches = [Sampler.seeds(sampler) for _ in range(12)]
        size = min(batch_size, shard_size)
        assert all(len(b) == size == len(set(b.tolist())) for b in batches), (shard_size, batch_size)
        assert all(set(b.tolist()) <= set(sampler.shard.tolist()) for b in batches)
        counts = Counter(np.concatenate(batches).tolist())  # once an epoch: every seed as often as any, +-1 epoch
        assert set(counts) == set(sampler.shard.tolist()) and max(counts.values()) - min(counts.values()) <= 2


@pytest.mark.parametrize("workers, size", [(2, 7), (3, 10), (4, 5), (5, 23)])
def test_ring_allreduce_leaves_every_worker_the_mean_of_all_gradients(workers, size):
    """Worker.sync_ring's chunk indices, run by threads over in-process links: every
    worker ends with the exact mean (the ring's 2(W-1) steps, reduce-scatter then
    all-gather), whatever the chunk sizes."""
    import queue as queue_mod
    import threading
    from types import SimpleNamespace

    import numpy as np

    from hosts.gnn.task import Worker

    class Link:  # worker i's ring_next is worker i+1's ring_prev
        def __init__(self):
            self.q = queue_mod.Queue()

        def send(self, kind, iteration, payload, phase):
            self.q.put(payload)

        def get(self, kind, iteration, timeout_s):
            return self.q.get(timeout=timeout_s)

    rng = np.random.default_rng(workers * 100 + size)
    grads = [rng.standard_normal(size).astype(np.float32) for _ in range(workers)]
    links = [Link() for _ in range(workers)]
    loaded, failures = {}, []
    ring = []
    for i in range(workers):
        ring.append(SimpleNamespace(
            job=SimpleNamespace(workers=workers, timeout_s=10), index=i, task=SimpleNamespace(fail=failures.append),
            ring_next=links[(i + 1) % workers], ring_prev=links[i], flat=lambda grads, g=grads[i]: g,
            load=lambda values, grads, i=i: loaded.__setitem__(i, values), optimizer=SimpleNamespace(step=lambda: None)))
    threads = [threading.Thread(target=Worker.sync_ring, args=(w, 0)) for w in ring]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert failures == [] and sorted(loaded) == list(range(workers))
    mean = np.mean(grads, axis=0)
    for i in range(workers):
        assert loaded[i] == pytest.approx(mean, abs=1e-6), i
