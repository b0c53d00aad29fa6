"""Data-parallel training of a small MLP with torch.distributed (gloo, CPU): the example
program to copy for the ``programs`` workload kind.

Every process is one rank. Its identity comes from the environment, in torch's own
convention: ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (rank 0 serves
the rendezvous there), and ``TRAINBED_OUT``, a directory for its files (default: the
working directory). Gloo's own connections use the interface named by
``GLOO_SOCKET_IFNAME`` (read by torch), else the address the machine's hostname
resolves to: on an emulated host, where the hostname resolves to the loopback
address, ``GLOO_SOCKET_IFNAME`` must name the host's interface. Started by hand, for
example two ranks on one machine::

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python hosts/ddp_example.py &
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python hosts/ddp_example.py

Each iteration has DDP's semantics: every rank computes the gradients of its own batch
of synthetic data, the gradients are averaged over the ranks with one all-reduce, and
every rank takes the same SGD step from the same initial parameters (broadcast from
rank 0), so all ranks keep identical parameters. Unlike ``DistributedDataParallel``,
whose hooks all-reduce buckets of gradients while the backward pass still runs, the
gradients live in one flat buffer that is all-reduced once after the backward pass:
the all-reduce is then timed alone, with nothing else on the wire or the CPU. A
barrier before it absorbs the wait for the slowest rank's compute (emulated hosts
share a few cores, so ranks drift apart), which would otherwise count as all-reduce
time on the faster ranks.

Files in ``TRAINBED_OUT``, per rank:

- ``iterations.csv``, one row per iteration, written as it ends: ``iteration``,
  ``start_epoch_s`` (``time.time()``, so a runner on the same box can place it on its
  own timeline), ``compute_s`` (forward and backward), ``sync_s`` (the barrier: the
  wait for the other ranks), ``allreduce_s`` (the all-reduce alone),
  ``allreduce_bytes``, ``iteration_s`` (start to the end of the step).
- ``ddp_result.json`` at the end: rank, world size, parameter count, all-reduce bytes,
  iterations, first and last loss, and ``params_sha256``, a digest of the final
  parameters (equal on every rank when training stayed in step).

Rank 0 prints one summary line at the end. On failure (no peer within ``--timeout-s``,
a peer gone: gloo raises) the rank prints one line to stderr and exits 1; bad
arguments or environment exit 2.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import statistics
import sys
import threading
import time

# Before torch loads: c10d logs every failed connect attempt with a C++ stack trace;
# a failed rank says what went wrong in one line of its own instead.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
import torch
import torch.distributed as dist

INPUT_FEATURES = 64
CLASSES = 10
CSV_COLUMNS = ["iteration", "start_epoch_s", "compute_s", "sync_s", "allreduce_s", "allreduce_bytes", "iteration_s"]


def hidden_width(target_params: int) -> int:
    """The width of the MLP's two hidden layers whose parameter count comes closest to
    ``target_params``: count = h^2 + (INPUT_FEATURES + CLASSES + 2) h + CLASSES."""
    linear = INPUT_FEATURES + CLASSES + 2
    root = (-linear + math.sqrt(linear * linear + 4 * max(target_params - CLASSES, 0))) / 2
    return max(1, round(root))


def build_model(target_params: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    width = hidden_width(target_params)
    return torch.nn.Sequential(
        torch.nn.Linear(INPUT_FEATURES, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, CLASSES))


class SyntheticBatches:
    """Labelled batches from a fixed random linear teacher (the same on every rank), so
    the loss can fall; each rank draws its own inputs, like a sharded data set."""

    def __init__(self, batch: int, seed: int, rank: int):
        self.batch = batch
        self.teacher = torch.randn(INPUT_FEATURES, CLASSES, generator=torch.Generator().manual_seed(seed))
        self.inputs = torch.Generator().manual_seed(seed * 1000 + rank + 1)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(self.batch, INPUT_FEATURES, generator=self.inputs)
        return x, (x @ self.teacher).argmax(dim=1)


def flat_gradients(params: list[torch.nn.Parameter]) -> torch.Tensor:
    """One buffer holding every gradient, each ``p.grad`` a view into it, so that the
    backward pass accumulates straight into what is all-reduced (DDP's
    ``gradient_as_bucket_view``): no copy in or out."""
    flat = torch.zeros(sum(p.numel() for p in params))
    offset = 0
    for p in params:
        p.grad = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


@torch.no_grad()
def sgd_step(params: list[torch.nn.Parameter], lr: float) -> None:
    """Plain SGD, torch.optim.SGD's step without momentum: torch.optim imports
    torch._dynamo when it is built, seconds of start-up per rank on a shared box."""
    for p in params:
        p.add_(p.grad, alpha=-lr)


def params_sha256(params: list[torch.nn.Parameter]) -> str:
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


def identity_from_env() -> tuple[int, int, str]:
    """(rank, world size, init method) from the environment the programs kind sets."""
    missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise ValueError(f"{', '.join(missing)} not set (a rank needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)")
    try:
        rank, world_size, port = (int(os.environ[name]) for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"))
    except ValueError:
        raise ValueError("RANK, WORLD_SIZE and MASTER_PORT must be integers") from None
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK={rank} is outside 0..WORLD_SIZE-1 (WORLD_SIZE={world_size})")
    return rank, world_size, f"tcp://{os.environ['MASTER_ADDR']}:{port}"


def train(args: argparse.Namespace, rank: int, world_size: int, out_dir: str) -> None:
    model = build_model(args.params, args.seed)
    params = list(model.parameters())
    # DDP broadcasts rank 0's parameters at construction; the same here, so a rank
    # whose seed differs still starts in step.
    for p in params:
        dist.broadcast(p.data, src=0)
    grads = flat_gradients(params)
    allreduce_bytes = grads.numel() * grads.element_size()
    batches = SyntheticBatches(args.batch, args.seed, rank)
    loss_fn = torch.nn.CrossEntropyLoss()

    losses, timings = [], []
    with open(os.path.join(out_dir, "iterations.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for iteration in range(args.iterations):
            start_epoch = time.time()
            start = time.perf_counter()
            grads.zero_()
            x, y = batches.next()
            loss = loss_fn(model(x), y)
            loss.backward()
            computed = time.perf_counter()
            dist.barrier()
            synced = time.perf_counter()
            dist.all_reduce(grads)
            reduced = time.perf_counter()
            grads.div_(world_size)
            sgd_step(params, args.lr)
            end = time.perf_counter()
            losses.append(loss.item())
            timings.append((computed - start, reduced - synced, end - start))
            writer.writerow([iteration, f"{start_epoch:.6f}", f"{computed - start:.6f}", f"{synced - computed:.6f}",
                             f"{reduced - synced:.6f}", allreduce_bytes, f"{end - start:.6f}"])
            f.flush()  # a runner (or a post-mortem) sees every finished iteration

    result = {"rank": rank, "world_size": world_size, "parameters": grads.numel(),
              "allreduce_bytes": allreduce_bytes, "iterations": args.iterations,
              "first_loss": losses[0], "last_loss": losses[-1],
              "params_sha256": params_sha256(params)}
    with open(os.path.join(out_dir, "ddp_result.json"), "w") as f:
        json.dump(result, f, indent=1)
    if rank == 0:
        compute, allreduce, iteration = (statistics.median(column) for column in zip(*timings))
        print(f"ddp_example: {world_size} ranks, {args.iterations} iterations, {grads.numel()} parameters "
              f"({allreduce_bytes / 1e6:.1f} MB per all-reduce); median iteration {iteration:.3f} s, "
              f"compute {compute:.3f} s, all-reduce {allreduce:.3f} s "
              f"({allreduce_bytes * 8 / allreduce / 1e6:.1f} Mbit/s); loss {losses[0]:.3f} -> {losses[-1]:.3f}",
              flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--params", type=int, default=3_000_000,
                        help="target parameter count of the MLP (float32: 4 bytes each per all-reduce)")
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per iteration")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads: emulated hosts share the box's few cores")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="bound on the rendezvous and on every collective (gloo's process-group timeout)")
    args = parser.parse_args(argv)
    for name in ("iterations", "params", "batch", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.timeout_s <= 0:
        parser.error("--timeout-s must be positive")
    return args


def fail(rank: int, message: str) -> None:
    print(f"ddp_example rank {rank}: {message}", file=sys.stderr, flush=True)
    os._exit(1)  # without waiting on gloo's threads, which may still wait on a lost peer


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        rank, world_size, init_method = identity_from_env()
    except ValueError as err:
        print(f"ddp_example: {err}", file=sys.stderr)
        sys.exit(2)  # like argparse's usage errors; 1 means training failed
    out_dir = os.environ.get("TRAINBED_OUT") or os.getcwd()
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(args.threads)
    # The store's client retries past its timeout (up to about twice it); the deadline
    # here is the one the user set.
    rendezvous_deadline = threading.Timer(args.timeout_s, fail, (rank, (
        f"no rendezvous of {world_size} ranks at {init_method} within {args.timeout_s:g} s")))
    rendezvous_deadline.start()
    try:
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=args.timeout_s))
        rendezvous_deadline.cancel()
        train(args, rank, world_size, out_dir)
        dist.destroy_process_group()
    except Exception as err:  # noqa: BLE001 - gloo and the store raise several types; each fails the rank
        rendezvous_deadline.cancel()
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
        fail(rank, f"{type(err).__name__}: {first_line}")


if __name__ == "__main__":
    main()
