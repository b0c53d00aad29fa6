"""One task of a distributed GNN training job (DGTP §III-A, Fig. 3) on an emulated host.

Roles, each one process in its machine's namespace (``--task`` names it):

- ``store<m>``: graph store server of machine m, holding METIS partition m (DGL's
  partition format: structure with 1-hop halo, features, labels). Answers a
  sampler's neighbour request for its own nodes with ``dgl.sampling.sample_neighbors``
  (seeded per request from the job seed, iteration, sampler and hop, so training is
  the same whatever the network did) and a feature request with the feature rows
  and labels.
- ``sampler<i>``: serves worker i // S. Per iteration it picks ``batch_size`` distinct
  seeds from its shard of the training nodes (the whole shard when it is smaller), samples L hops (per hop, one request to every
  store that owns frontier nodes; blocks by ``dgl.to_block``), fetches the input
  nodes' features from their owners, and sends the mini-batch (blocks, features,
  labels) to its worker. It runs at most ``prefetch`` iterations ahead of the worker
  (the worker returns a credit per consumed mini-batch).
- ``worker<w>``: GraphSAGE (``dgl.nn.SAGEConv``, mean, len(fanouts) layers) with CPU
  forward/backward on the mini-batches of its S samplers, then synchronisation:
  ``ps`` (gradient shards to every PS, updated parameter shards back) or
  ``allreduce`` (ring: 2(W-1) steps to the next worker, Adam applied locally; all
  workers start from the same seed, so their parameters stay equal). Worker 0 also
  evaluates a fixed validation mini-batch every ``eval_every`` iterations.
- ``ps<p>``: parameter server of shard p of the flat parameter vector; Adam over the
  averaged gradients of all W workers (Adam is elementwise, so one flat tensor is the
  same optimiser as per-parameter ones).

Every task runs when its inputs have arrived (blocking receives); a receiving side
reads each connection in its own thread, so a transfer completes when the network
delivers it, not when the receiver is ready to use it. Transfers between machines
are reported as flows (``hosts.gnn.wire``). Per iteration, tasks also report their
execution time (``compute``: task, iteration, seconds; on a machine of compute
factor f, f times what the step took on this box, ``computed``), and every worker
its loss (``iteration_end``), worker 0's with the validation accuracy on evaluation
iterations.

The run's ``--config`` (JSON written by the driver) holds the job: graph files,
task placement (host, ip, port per task), model and training parameters.
The job ends after ``iterations`` iterations or on the driver's ``stop``.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
import zlib
from dataclasses import dataclass

# One thread per task: many tasks share two cores with the switches, and DGL's
# multithreaded kernels sum in a varying order (training would differ run to run).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402  # after the thread count is fixed

from hosts.channel import Task, spawn
from hosts.framing import PeerClosed, PeerError
from hosts.gnn import PREFETCH, is_eval, task_index, task_kind, wire

SAMPLE_REQ, SAMPLE_REP, FEAT_REQ, FEAT_REP, MINIBATCH, EVALBATCH, CREDIT, GRAD, PARAM, INIT, RING = range(1, 12)


@dataclass(frozen=True)
class Job:
    """The job as every task reads it from the config."""

    cfg: dict

    def __getattr__(self, name):
        try:
            return self.cfg[name]
        except KeyError:
            raise AttributeError(name) from None

    def address(self, task: str) -> tuple[str, int]:
        entry = self.cfg["tasks"][task]
        return entry["ip"], entry["port"]

    def host(self, task: str) -> str:
        return self.cfg["tasks"][task]["host"]

    @property
    def machines(self) -> int:
        return sum(t.startswith("store") for t in self.cfg["tasks"])

    def samplers_of(self, worker: int) -> list[str]:
        s = self.samplers_per_worker
        return [f"sampler{i}" for i in range(worker * s, (worker + 1) * s)]

    def is_eval(self, iteration: int) -> bool:
        return is_eval(iteration, self.eval_every, self.iterations)


def computed(job: Job, task_id: str, started: float) -> float:
    """Seconds of a compute step begun at ``started`` (``time.perf_counter``) on this
    task's machine. A machine of compute factor f computes f times as long as this box:
    the task sleeps (f - 1) x what the step took here, and reports the whole."""
    took = time.perf_counter() - started
    factor = job.cfg["tasks"][task_id].get("compute_factor", 1.0)
    if factor > 1.0:
        time.sleep((factor - 1.0) * took)
    return time.perf_counter() - started


class Reader:
    """Reads a link's frames in a thread into a queue (so the network, not the task's
    readiness, decides when a transfer completes)."""

    def __init__(self, task: Task, link: wire.Link, on_close=None):
        self.link, self.frames = link, queue.Queue()
        self.on_close = on_close
        spawn(task, f"read {link.peer_task}", self._run)

    def _run(self) -> None:
        while True:
            try:
                frame = self.link.recv()
            except (PeerError, OSError) as err:
                self.frames.put(err)
                if self.on_close is not None:
                    self.on_close(self.link, err)
                return
            self.frames.put(frame)

    def get(self, kind: int, iteration: int, timeout_s: float) -> dict:
        try:
            frame = self.frames.get(timeout=timeout_s)
        except queue.Empty:
            raise PeerError(f"nothing from {self.link.peer_task} within {timeout_s:g} s") from None
        if isinstance(frame, Exception):
            raise PeerError(f"{self.link.peer_task}: {frame}")
        got_kind, got_iteration, meta, arrays = frame
        if (got_kind, got_iteration) != (kind, iteration):
            raise PeerError(f"{self.link.peer_task}: expected frame {kind} of iteration {iteration}, "
                            f"got {got_kind} of {got_iteration}")
        return {**meta, **arrays}


# --- graph store -------------------------------------------------------------------
def run_store(job: Job, task: Task) -> None:
    import torch  # pylint: disable=import-outside-toplevel  # heavy; only the roles that need it
    from hosts.gnn.dglenv import import_dgl  # pylint: disable=import-outside-toplevel
    dgl = import_dgl()
    part = task_index(task.task_id)
    graph, node_feats = dgl.distributed.load_partition(job.partition_config, part)[:2]
    start, end = job.node_ranges[part]
    global_ids = graph.ndata[dgl.NID].numpy()
    if not np.array_equal(global_ids[:end - start], np.arange(start, end)):
        raise PeerError(f"partition {part}: inner nodes are not the first local nodes in id order")
    local_of = np.full(job.num_nodes, -1, dtype=np.int64)
    local_of[global_ids] = np.arange(len(global_ids))
    features = node_feats["_N/feat"].numpy()
    labels = node_feats["_N/label"].numpy()
    listener = wire.Listener(job.address(task.task_id), job.timeout_s)
    clients = job.workers * job.samplers_per_worker
    left = [clients]
    lock = threading.Lock()
    # DGL's sampling RNG is per OS thread and dgl.seed reaches only the calling
    # thread's engines as the main thread sets them up (measured: seeded samples in
    # other threads differ run to run), so every sample is drawn here, in the main
    # thread, which the serving threads hand their requests to.
    to_sample: queue.Queue = queue.Queue()

    def sample(seed: int, nodes: np.ndarray, fanout: int) -> tuple[np.ndarray, np.ndarray]:
        done: queue.Queue = queue.Queue(maxsize=1)
        to_sample.put((seed, nodes, fanout, done))
        result = done.get()
        if isinstance(result, Exception):
            raise result
        return result

    def serve(link: wire.Link) -> None:
        while True:
            try:
                kind, iteration, meta, arrays = link.recv()
            except PeerClosed:
                break  # the sampler closed between requests: it is done
            started = time.perf_counter()
            nodes = arrays["nodes"]
            if nodes.size and (nodes.min() < start or nodes.max() >= end):
                raise PeerError(f"{link.peer_task} asked for nodes outside partition {part}")
            if kind == SAMPLE_REQ:
                # One seed per request: the same samples whatever the timing (DGL takes an int32).
                seed = zlib.crc32(f"{job.seed}/{iteration}/{link.peer_task}/{meta['reply_phase']}".encode())
                src, dst = sample(seed & 0x7FFFFFFF, local_of[nodes], meta["fanout"])
                reply = (SAMPLE_REP, {"src": src, "dst": dst}, meta["reply_phase"])
            elif kind == FEAT_REQ:
                rows = nodes - start
                reply = (FEAT_REP, {"feat": features[rows], "label": labels[rows]}, meta["reply_phase"])
            else:
                raise PeerError(f"{link.peer_task}: unexpected frame kind {kind}")
            compute_s = computed(job, task.task_id, started)
            sent = link.send(reply[0], iteration, reply[1], phase=reply[2])
            # Both sizes, local replies and unreported requests included: a model of another
            # placement needs every request round, wherever its ends are.
            task.emit("compute", iteration=iteration, seconds=round(compute_s, 6), peer=link.peer_task,
                      step=reply[2], request_bytes=link.received_bytes, reply_bytes=sent)
        link.close()
        with lock:
            left[0] -= 1
            if left[0] == 0:
                task.finish()

    def accept_all() -> None:
        for _ in range(clients):
            spawn(task, "serve", serve, listener.accept(task))
        listener.close()

    spawn(task, "accept", accept_all)
    while True:  # the last client's close finishes the task
        seed, nodes, fanout, done = to_sample.get()
        try:
            dgl.seed(seed)
            sampled = dgl.sampling.sample_neighbors(graph, torch.from_numpy(nodes), fanout)
            done.put(tuple(global_ids[t.numpy()] for t in sampled.edges()))
        except Exception as err:  # noqa: BLE001 - raised again in the serving thread
            done.put(err)


# --- sampler -----------------------------------------------------------------------
class Sampler:
    def __init__(self, job: Job, task: Task):
        import torch  # pylint: disable=import-outside-toplevel
        from hosts.gnn.dglenv import import_dgl  # pylint: disable=import-outside-toplevel
        self.torch, self.dgl = torch, import_dgl()
        self.job, self.task = job, task
        self.index = task_index(task.task_id)
        self.worker = self.index // job.samplers_per_worker
        ids = np.load(job.ids_path)
        samplers = job.workers * job.samplers_per_worker
        self.shard = ids["train"][self.index::samplers]
        self.val = ids["val"][:job.eval_nodes]
        self.evaluates = self.worker == 0 and self.index % job.samplers_per_worker == 0
        self.rng = np.random.default_rng(job.seed * 1000 + self.index)
        self.range_ends = np.array([end for _, end in job.node_ranges])
        self.stores = [wire.connect(task, job.address(f"store{m}"), f"store{m}", job.timeout_s)
                       for m in range(job.machines)]
        self.to_worker = wire.connect(task, job.address(f"worker{self.worker}"), f"worker{self.worker}",
                                      job.timeout_s)
        self.credits = threading.Semaphore(PREFETCH)
        self.credit_reader = spawn(task, "credits", self._credits)
        self.order = np.empty(0, dtype=np.int64)

    def _credits(self) -> None:
        consumed = 0
        while True:
            try:
                self.to_worker.recv(expect=CREDIT)
            except PeerError as err:
                if consumed == self.job.iterations:
                    return  # the worker closed after its last iteration: it is done
                raise PeerError(f"worker{self.worker} closed after {consumed} of {self.job.iterations} "
                                f"mini-batches ({err})") from None
            consumed += 1
            self.credits.release()

    def seeds(self) -> np.ndarray:
        """``batch_size`` distinct seeds of the shard (the whole shard when it is
        smaller), sorted. At an epoch's end its leftover seeds come first, then seeds
        of the next epoch's order that are not among them (a batch used to drop such
        repeats and come out short)."""
        size = min(self.job.batch_size, self.shard.size)
        if self.order.size >= size:
            batch, self.order = self.order[:size], self.order[size:]
        else:  # a new epoch over this sampler's shard
            leftover, fresh = self.order, self.rng.permutation(self.shard)
            taken = fresh[~np.isin(fresh, leftover)][:size - leftover.size]
            batch, self.order = np.concatenate([leftover, taken]), fresh[~np.isin(fresh, taken)]
        return np.sort(batch)

    def ask_owners(self, kind: int, iteration: int, nodes: np.ndarray, **scalars) -> list[tuple[np.ndarray, dict]]:
        """Send each store its share of ``nodes``; gather the replies concurrently."""
        owner = np.searchsorted(self.range_ends, nodes, side="right")
        asked = []
        for m, store in enumerate(self.stores):
            mine = nodes[owner == m]
            if mine.size:
                store.send(kind, iteration, {"nodes": mine}, **scalars)
                asked.append((m, mine))
        replies: dict[int, dict] = {}

        def receive(m: int) -> None:
            _, _, meta, arrays = self.stores[m].recv(expect=kind + 1)
            replies[m] = {**meta, **arrays}

        threads = [spawn(self.task, f"reply store{m}", receive, m) for m, _ in asked[1:]]
        if asked:
            receive(asked[0][0])
        for thread in threads:
            thread.join()
        return [(mine, replies[m]) for m, mine in asked]

    def sample(self, iteration: int, seeds: np.ndarray, purpose: str = "") -> tuple[dict, list[float]]:
        """The mini-batch of ``seeds`` (arrays for the worker) and the local compute time
        after each round of replies (L hops, then the features); ``purpose`` prefixes the
        phases of its flows (an evaluation batch's are "eval-...")."""
        dgl, torch = self.dgl, self.torch
        rounds = []
        frontier, blocks = seeds, []
        for hop, fanout in enumerate(reversed(self.job.fanouts)):
            replies = self.ask_owners(SAMPLE_REQ, iteration, frontier, fanout=fanout,
                                      reply_phase=f"{purpose}sample{hop}")
            started = time.perf_counter()
            src = np.concatenate([r["src"] for _, r in replies]) if replies else np.empty(0, np.int64)
            dst = np.concatenate([r["dst"] for _, r in replies]) if replies else np.empty(0, np.int64)
            hop_graph = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=self.job.num_nodes)
            block = dgl.to_block(hop_graph, dst_nodes=torch.from_numpy(frontier))
            blocks.insert(0, block)
            frontier = block.srcdata[dgl.NID].numpy()
            rounds.append(computed(self.job, self.task.task_id, started))
        replies = self.ask_owners(FEAT_REQ, iteration, frontier, reply_phase=f"{purpose}feature")
        started = time.perf_counter()
        feat = np.empty((frontier.size, self.job.features), dtype=np.float32)
        label = np.empty(frontier.size, dtype=np.int64)
        order = np.argsort(frontier)
        for nodes, reply in replies:
            where = order[np.searchsorted(frontier[order], nodes)]
            feat[where], label[where] = reply["feat"], reply["label"]
        arrays = {"feat": feat, "label": label[:seeds.size]}  # to_block keeps dst nodes first in src
        sizes = []
        for b, block in enumerate(blocks):
            src, dst = block.edges()
            arrays[f"src{b}"], arrays[f"dst{b}"] = src.numpy(), dst.numpy()
            sizes.append([block.num_src_nodes(), block.num_dst_nodes()])
        rounds.append(computed(self.job, self.task.task_id, started))
        return {"arrays": arrays, "sizes": sizes}, rounds

    def run(self) -> None:
        for iteration in range(self.job.iterations):
            if not self.credits.acquire(timeout=self.job.timeout_s):
                raise PeerError(f"worker{self.worker} took no mini-batch within {self.job.timeout_s:g} s")
            batch, rounds = self.sample(iteration, self.seeds())
            self.to_worker.send(MINIBATCH, iteration, batch["arrays"], phase="minibatch", sizes=batch["sizes"])
            each = {"rounds": [round(s, 6) for s in rounds]}
            if self.evaluates and self.job.is_eval(iteration):
                evaluation, eval_rounds = self.sample(iteration, self.val, "eval-")
                rounds += eval_rounds
                each["eval_rounds"] = [round(s, 6) for s in eval_rounds]
                self.to_worker.send(EVALBATCH, iteration, evaluation["arrays"], phase="evalbatch",
                                    sizes=evaluation["sizes"])
            self.task.emit("compute", iteration=iteration, seconds=round(sum(rounds), 6), **each)
        for link in self.stores:
            link.close()
        # Exit only once the worker closed its end (after its last iteration): a socket
        # closed with an unread credit in it would reset the connection and could
        # discard a mini-batch still on its way.
        self.credit_reader.join(self.job.timeout_s)
        self.task.finish()


# --- worker and parameter server ----------------------------------------------------
def _model(job: Job):
    import torch  # pylint: disable=import-outside-toplevel
    from hosts.gnn.dglenv import import_dgl  # pylint: disable=import-outside-toplevel
    dglnn = import_dgl().nn

    class Sage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            widths = [job.features] + [job.hidden] * (len(job.fanouts) - 1) + [job.classes]
            self.layers = torch.nn.ModuleList(dglnn.SAGEConv(a, b, "mean") for a, b in zip(widths, widths[1:]))

        def forward(self, blocks, x):
            for i, (layer, block) in enumerate(zip(self.layers, blocks)):
                x = layer(block, x)
                if i < len(self.layers) - 1:
                    x = torch.relu(x)
            return x

    torch.manual_seed(job.seed)
    return Sage()


def _blocks(dgl, torch, batch: dict) -> list:
    return [dgl.create_block((torch.from_numpy(batch[f"src{b}"]), torch.from_numpy(batch[f"dst{b}"])),
                             num_src_nodes=n_src, num_dst_nodes=n_dst)
            for b, (n_src, n_dst) in enumerate(batch["sizes"])]


def shard_bounds(length: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) of each of ``shards`` nearly equal parts of a flat vector."""
    edges = np.linspace(0, length, shards + 1).round().astype(int)
    return list(zip(edges[:-1], edges[1:]))


class Worker:
    def __init__(self, job: Job, task: Task):
        import torch  # pylint: disable=import-outside-toplevel
        from hosts.gnn.dglenv import import_dgl  # pylint: disable=import-outside-toplevel
        self.torch, self.dgl = torch, import_dgl()
        self.job, self.task = job, task
        self.index = task_index(task.task_id)
        self.model = _model(job)
        self.params = list(self.model.parameters())
        self.size = sum(p.numel() for p in self.params)
        self.optimizer = torch.optim.Adam(self.params, lr=job.lr) if job.sync == "allreduce" else None
        ring = job.sync == "allreduce" and job.workers > 1
        listener = wire.Listener(job.address(task.task_id), job.timeout_s)
        incoming: dict[str, wire.Link] = {}

        def accept_all() -> None:  # in a thread: the ring's workers connect to each other
            for _ in range(job.samplers_per_worker + (1 if ring else 0)):
                link = listener.accept(task)
                incoming[link.peer_task] = link
            listener.close()

        accepting = spawn(task, "accept", accept_all)
        self.ps_links = [wire.connect(task, job.address(f"ps{p}"), f"ps{p}", job.timeout_s) for p in range(job.ps)]
        if ring:
            after = f"worker{(self.index + 1) % job.workers}"
            self.ring_next = wire.connect(task, job.address(after), after, job.timeout_s)
        accepting.join()
        self.samplers = [Reader(task, incoming[name]) for name in job.samplers_of(self.index)]
        if ring:
            before = f"worker{(self.index - 1) % job.workers}"
            self.ring_prev = Reader(task, incoming[before])
        self.ps_readers = [Reader(task, link) for link in self.ps_links]
        self.bounds = shard_bounds(self.size, max(job.ps, 1))

    def flat(self, grads: bool) -> np.ndarray:
        return np.concatenate([(p.grad if grads else p.data).reshape(-1).numpy() for p in self.params])

    def load(self, flat: np.ndarray, grads: bool) -> None:
        offset = 0
        with self.torch.no_grad():
            for p in self.params:
                values = self.torch.from_numpy(np.array(flat[offset:offset + p.numel()])).view_as(p)
                if grads:
                    p.grad = values
                else:
                    p.copy_(values)
                offset += p.numel()

    def sync_ps(self, iteration: int) -> None:
        grads = self.flat(grads=True)
        threads = [spawn(self.task, f"push ps{p}", link.send, GRAD, iteration, {"grad": grads[a:b]}, "gradient")
                   for p, (link, (a, b)) in enumerate(zip(self.ps_links, self.bounds))]
        for thread in threads:
            thread.join()
        shards = [reader.get(PARAM, iteration, self.job.timeout_s)["param"] for reader in self.ps_readers]
        self.load(np.concatenate(shards), grads=False)

    def sync_ring(self, iteration: int) -> None:
        grads = self.flat(grads=True).astype(np.float32)
        workers, me = self.job.workers, self.index
        if workers > 1:
            chunks = [grads[a:b].copy() for a, b in shard_bounds(grads.size, workers)]
            for step in range(2 * (workers - 1)):
                reduce = step < workers - 1
                s = step if reduce else step - (workers - 1)
                send_chunk = (me - s) % workers if reduce else (me + 1 - s) % workers
                recv_chunk = (me - s - 1) % workers if reduce else (me - s) % workers
                sender = spawn(self.task, "ring send", self.ring_next.send, RING, iteration,
                               {"chunk": chunks[send_chunk]}, f"ring{step}")
                got = self.ring_prev.get(RING, iteration, self.job.timeout_s)["chunk"]
                sender.join()
                chunks[recv_chunk] = chunks[recv_chunk] + got if reduce else got.copy()
            grads = np.concatenate(chunks) / workers
        self.load(grads, grads=True)
        self.optimizer.step()

    def run(self) -> None:
        torch, dgl, job = self.torch, self.dgl, self.job
        if self.index == 0:
            flat = self.flat(grads=False)
            for link, (a, b) in zip(self.ps_links, self.bounds):
                link.send(INIT, 0, {"param": flat[a:b]}, phase="init")
        loss_fn = torch.nn.CrossEntropyLoss()
        for iteration in range(job.iterations):
            waited = time.perf_counter()
            batches = [reader.get(MINIBATCH, iteration, job.timeout_s) for reader in self.samplers]
            started = time.perf_counter()
            self.model.train()
            for p in self.params:
                p.grad = None
            loss = sum(loss_fn(self.model(_blocks(dgl, torch, b), torch.from_numpy(b["feat"])),
                               torch.from_numpy(b["label"])) for b in batches) / len(batches)
            loss.backward()
            compute_s = computed(job, self.task.task_id, started)
            for reader in self.samplers:
                reader.link.send(CREDIT, iteration)
            synced = time.perf_counter()
            (self.sync_ps if job.sync == "ps" else self.sync_ring)(iteration)
            sync_s = time.perf_counter() - synced
            accuracy, evaluated = None, {}
            if self.index == 0 and job.is_eval(iteration):
                evaluation = self.samplers[0].get(EVALBATCH, iteration, job.timeout_s)
                eval_started = time.perf_counter()
                self.model.eval()
                with torch.no_grad():
                    logits = self.model(_blocks(dgl, torch, evaluation), torch.from_numpy(evaluation["feat"]))
                accuracy = float((logits.argmax(1).numpy() == evaluation["label"]).mean())
                evaluated["eval_s"] = round(computed(job, self.task.task_id, eval_started), 6)
            self.task.emit("compute", iteration=iteration, seconds=round(compute_s, 6), **evaluated)
            self.task.emit("iteration_end", iteration=iteration, loss=round(loss.item(), 6),
                           val_accuracy=accuracy, compute_s=round(compute_s, 6), sync_s=round(sync_s, 6),
                           wait_s=round(started - waited, 6))
        for reader in self.samplers + self.ps_readers:
            reader.link.close()
        if job.sync == "allreduce" and job.workers > 1:
            self.ring_next.close()
        self.task.finish()


def run_ps(job: Job, task: Task) -> None:
    import torch  # pylint: disable=import-outside-toplevel
    listener = wire.Listener(job.address(task.task_id), job.timeout_s)
    links = {}
    for _ in range(job.workers):
        link = listener.accept(task)
        links[link.peer_task] = link
    listener.close()
    readers = [Reader(task, links[f"worker{w}"]) for w in range(job.workers)]
    param = torch.from_numpy(np.array(readers[0].get(INIT, 0, job.timeout_s)["param"])).requires_grad_()
    optimizer = torch.optim.Adam([param], lr=job.lr)
    for iteration in range(job.iterations):
        grads = [reader.get(GRAD, iteration, job.timeout_s)["grad"] for reader in readers]
        started = time.perf_counter()
        param.grad = torch.from_numpy(np.mean(grads, axis=0, dtype=np.float32))
        optimizer.step()
        values = param.detach().numpy().copy()
        task.emit("compute", iteration=iteration, seconds=round(computed(job, task.task_id, started), 6))
        threads = [spawn(task, f"pull {reader.link.peer_task}", reader.link.send, PARAM, iteration,
                         {"param": values}, "parameter") for reader in readers]
        for thread in threads:
            thread.join()
    for reader in readers:  # exit once every worker closed (see Sampler.run)
        try:
            reader.get(GRAD, job.iterations, job.timeout_s)
        except PeerError:
            pass
    task.finish()


ROLES = {"store": run_store, "sampler": lambda job, task: Sampler(job, task).run(),
         "worker": lambda job, task: Worker(job, task).run(), "ps": run_ps}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hosts.gnn.task", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the job's JSON config (written by the driver)")
    parser.add_argument("--task", required=True, help="task id: store<m>, sampler<i>, worker<w> or ps<p>")
    parser.add_argument("--events", required=True, help="the driver's unix socket")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as f:
        job = Job(json.load(f))
    role = task_kind(args.task)
    if role not in ROLES or args.task not in job.tasks:
        parser.error(f"--task: {args.task!r} is not a task of this job")
    try:
        task = Task(args.events, job.host(args.task), args.task, program="gnn_task")
    except OSError as err:
        sys.exit(f"gnn_task {args.task}: events socket {args.events}: {err}")
    wire.REPORT_LOCAL = bool(job.cfg.get("profile"))
    task.emit("hello", role=role, job="gnn", pid=os.getpid())
    spawn(task, "commands", task.read_commands)
    try:
        import torch  # pylint: disable=import-outside-toplevel
        torch.set_num_threads(1)  # many tasks share two cores with the switches
        ROLES[role](job, task)
    except Exception as err:  # noqa: BLE001 - every failure becomes one `error` line
        task.fail(f"{type(err).__name__}: {err}")


if __name__ == "__main__":
    main()
