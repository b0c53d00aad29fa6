"""One task of a PS-trained job on an emulated host, moving real TCP bytes: a worker
or a parameter server (PS) of the Grouper cojob workload (experiments/cojob/workload.py).

One iteration of a job of W workers and S PSs: every worker pushes ``--bytes`` to
every PS; a PS sends ``--bytes`` back to every worker (pull) once all W pushes of that
iteration arrived; a worker "computes" (sleeps ``--compute-s``) once all S pulls
arrived, then starts the next iteration. Workers run iterations only when the driver
says so (``run_stage``); PSs serve whatever iteration comes. Iterations are numbered
from 0 across the job's stages.

Port plan (the driver knows every flow's 5-tuple before traffic starts, so it can
install per-flow policies first):

- PS p listens on ``--listen``; every worker's ``--ps-addrs`` lists the PSs' listen
  addresses in PS index order.
- Worker w opens one persistent TCP connection to each PS p from source port
  ``--worker-port-base + p`` (SO_REUSEADDR). It carries w's pushes to p and p's pulls
  to w: push = (w's ip, base_w + p) -> (p's ip, listen port of p), pull = the reverse.
- The driver keeps the ports of tasks that share a host disjoint (listen ports and
  every worker's [base, base + S)), below the kernel's ephemeral range (32768 by
  default) so that no other connection takes them, and does not reuse a 4-tuple
  within 60 s of its job's stop (the worker closes first, so the worker's side holds
  TIME_WAIT).

Wire format: frames of ``hosts.framing``: a header (kind, iteration, word = stage,
length) and ``length`` bytes. Once after connect, each side sends INTRO (JSON: job,
index, host) and checks the other's, so a wrong port in the plan fails loudly
instead of mixing jobs. DATA is one push or pull; the receiver answers ACK (length =
bytes received) once it has every byte. The sender reports ``flow_end`` when the ACK
arrives, so flow_end - flow_start is the transfer's completion at the receiver (plus
half an RTT), not the time to fill the local socket buffer. A push's stage travels
in its header, and the PS tags its pull with it.

Events (hosts.messages, over the unix socket ``--events``): ``hello``; ``flow_start``
and ``flow_end`` with ``flow`` ("c0j3/w1->p0/i17/push", "c0j3/p0->w1/i17/pull"), ``job``,
``src``, ``dst`` (hosts), ``bytes``, ``phase``, ``iteration``, ``stage``, ``src_port``,
``dst_port`` (TCP ports of the connection in the flow's direction), reported by the
flow's sender; ``iteration_end`` (after the compute sleep) and ``stage_done`` by
workers; ``bye``; ``error``.

Waiting: every wait on a peer is bounded by ``--timeout-s`` without progress
(connect, each receive, each send chunk, a PS's wait for all pushes of an iteration).
Only the waits the driver paces are unbounded: a worker's wait for ``run_stage`` and
a PS's wait for the first byte of the next push; they end on ``stop`` or when the
events socket closes (the driver died). All waits block in the kernel: an idle task
uses no CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import sys
import threading
import time

from hosts import framing
from hosts.channel import Task, spawn
from hosts.framing import Header, PeerError

INTRO, DATA, ACK = 1, 2, 3  # frame kinds; a frame's header word is its stage
CHUNK = 512 * 1024  # bytes per send/recv call: few syscalls per flow, little memory per task
PUSH, PULL = "push", "pull"


def check_header(header: Header, kind: int) -> tuple[int, int, int]:
    """(iteration, stage, length) of a header of ``kind``."""
    if header.kind != kind:
        raise PeerError(f"expected frame kind {kind}, got {header.kind}")
    return header.iteration, header.word, header.length


def send_data(sock: socket.socket, iteration: int, stage: int, nbytes: int, payload: memoryview) -> None:
    """One DATA frame of ``nbytes``, sent from the preallocated ``payload`` chunk repeatedly."""
    framing.send_frame(sock, Header(DATA, iteration, stage, nbytes))
    framing.send_repeated(sock, nbytes, payload)


def send_ack(sock: socket.socket, iteration: int, stage: int, nbytes: int) -> None:
    framing.send_frame(sock, Header(ACK, iteration, stage, nbytes))


def recv_ack(sock: socket.socket, iteration: int, nbytes: int) -> None:
    acked_iteration, _, acked = check_header(framing.recv_header(sock), ACK)
    if (acked_iteration, acked) != (iteration, nbytes):
        raise PeerError(f"ACK of iteration {acked_iteration} for {acked} bytes, "
                        f"expected iteration {iteration} for {nbytes}")


def exchange_intro(sock: socket.socket, job: str, index: int, host: str) -> dict:
    """Send our INTRO, return the peer's; a peer of another job is refused."""
    mine = json.dumps({"job": job, "index": index, "host": host}).encode()
    framing.send_frame(sock, Header(INTRO, 0, 0, len(mine)), mine)
    _, _, length = check_header(framing.recv_header(sock), INTRO)
    peer = json.loads(framing.recv_body(sock, length))
    if peer.get("job") != job:
        raise PeerError(f"peer belongs to job {peer.get('job')!r}, not {job!r}")
    return peer


class WorkerLink:
    """Worker ``args.index``'s connection to PS ``ps_index``; one thread uses it at a time."""

    def __init__(self, args, task: Task, ps_index: int, payload: memoryview):
        self.args, self.task, self.ps_index, self.payload = args, task, ps_index, payload
        self.ps_addr = args.ps_addrs[ps_index]
        self.source_port = args.worker_port_base + ps_index
        self.receive_buffer = memoryview(bytearray(len(payload)))
        self.name = f"w{args.index}<->p{ps_index} {self.ps_addr[0]}:{self.ps_addr[1]}"
        self.sock: socket.socket | None = None
        self.ps_host = ""
        self.local_port = self.ps_port = 0

    def connect(self) -> None:
        """Connect from the planned source port, retrying while the PS is not listening yet."""
        sock = framing.connect(self.ps_addr, self.args.timeout_s, source_port=self.source_port,
                               congestion=self.args.congestion, peer=f"PS {self.ps_index}")
        peer = exchange_intro(sock, self.args.job, self.args.index, self.args.host)
        if peer.get("index") != self.ps_index:
            raise PeerError(f"the peer is PS {peer.get('index')}, expected PS {self.ps_index}")
        self.sock, self.ps_host = sock, peer["host"]
        self.local_port, self.ps_port = sock.getsockname()[1], sock.getpeername()[1]  # as on the wire

    def exchange(self, iteration: int, stage: int) -> None:
        """Push this iteration's partition, then receive its pull."""
        args, nbytes = self.args, self.args.bytes
        push = {"flow": f"{args.job}/w{args.index}->p{self.ps_index}/i{iteration}/{PUSH}", "job": args.job,
                "src": args.host, "dst": self.ps_host, "bytes": nbytes, "phase": PUSH, "iteration": iteration,
                "stage": stage, "src_port": self.local_port, "dst_port": self.ps_port}
        self.task.emit("flow_start", **push)
        send_data(self.sock, iteration, stage, nbytes, self.payload)
        recv_ack(self.sock, iteration, nbytes)
        self.task.emit("flow_end", **push)
        pulled_iteration, _, length = check_header(framing.recv_header(self.sock), DATA)
        if (pulled_iteration, length) != (iteration, nbytes):
            raise PeerError(f"pull of iteration {pulled_iteration} ({length} bytes), "
                            f"expected iteration {iteration} ({nbytes} bytes)")
        framing.recv_discard(self.sock, length, self.receive_buffer)
        send_ack(self.sock, iteration, stage, length)


def run_worker(args, task: Task) -> None:
    stages: queue.Queue[dict] = queue.Queue()

    def on_run_stage(message: dict) -> None:
        if not all(isinstance(message.get(k), int) and message[k] >= 0 for k in ("stage", "iterations")):
            task.fail(f"run_stage needs integer stage and iterations >= 0, got {message}")
        stages.put(message)

    spawn(task, "commands", task.read_commands, on_run_stage)
    payload = memoryview(bytearray(min(args.bytes, CHUNK)))
    links = [WorkerLink(args, task, p, payload) for p in range(len(args.ps_addrs))]
    for thread in [spawn(task, link.name, link.connect) for link in links]:
        thread.join()
    iteration = 0
    while True:
        message = stages.get()
        stage = message["stage"]
        for _ in range(message["iterations"]):
            threads = [spawn(task, link.name, link.exchange, iteration, stage) for link in links]
            for thread in threads:
                thread.join()
            time.sleep(args.compute_s)
            task.emit("iteration_end", job=args.job, iteration=iteration, stage=stage)
            iteration += 1
        task.emit("stage_done", job=args.job, stage=stage)


class PushBarrier:
    """Holds a PS's pulls of an iteration until all W workers' pushes of it arrived.

    A worker pushes iteration i+1 only after its pull of i, so iterations complete in
    order and ``complete_through`` (the last complete iteration) only grows. A worker
    that closed will push nothing more: waiters then fail at once instead of timing out.
    """

    def __init__(self, workers: int, timeout_s: float):
        self.workers, self.timeout_s = workers, timeout_s
        self.condition = threading.Condition()
        self.arrived: dict[int, int] = {}
        self.complete_through = -1
        self.closed = 0

    def arrive(self, iteration: int) -> None:
        with self.condition:
            self.arrived[iteration] = self.arrived.get(iteration, 0) + 1
            if self.arrived[iteration] == self.workers:
                del self.arrived[iteration]
                self.complete_through = iteration
                self.condition.notify_all()
                return
            done = self.condition.wait_for(lambda: self.complete_through >= iteration or self.closed,
                                           self.timeout_s)
            if self.complete_through >= iteration:
                return
            got = self.arrived.get(iteration, 0)
            reason = "a worker closed" if done else f"no more within {self.timeout_s:g} s"
            raise PeerError(f"{got} of {self.workers} pushes of iteration {iteration} arrived, {reason}")

    def close(self) -> None:
        with self.condition:
            self.closed += 1
            self.condition.notify_all()


class PsServer:
    """PS ``args.index``: serves each worker's connection in its own thread."""

    def __init__(self, args, task: Task):
        self.args, self.task = args, task
        self.barrier = PushBarrier(args.workers, args.timeout_s)
        self.payload = memoryview(bytearray(min(args.bytes, CHUNK)))
        self.workers_seen: set[int] = set()
        self.lock = threading.Lock()

    def serve(self) -> None:
        """Accept all W workers (bounded), serve them, finish when every one has closed."""
        listener = framing.listen(self.args.listen, self.args.workers, self.args.timeout_s, self.args.congestion)
        handlers = []
        for _ in range(self.args.workers):
            try:
                conn, peer = framing.accept(listener, self.args.timeout_s)
            except TimeoutError:
                raise PeerError(f"{len(handlers)} of {self.args.workers} workers connected "
                                f"within {self.args.timeout_s:g} s") from None
            handlers.append(spawn(self.task, f"p{self.args.index}<->{peer[0]}:{peer[1]}", self.serve_worker, conn))
        listener.close()
        for handler in handlers:
            handler.join()
        self.task.finish()

    def serve_worker(self, conn: socket.socket) -> None:
        args, nbytes = self.args, self.args.bytes
        worker = exchange_intro(conn, args.job, args.index, args.host)
        index = worker.get("index")
        with self.lock:
            if not (isinstance(index, int) and 0 <= index < args.workers) or index in self.workers_seen:
                raise PeerError(f"worker index {index!r} is out of range or already connected")
            self.workers_seen.add(index)
        local_port, worker_port = conn.getsockname()[1], conn.getpeername()[1]
        receive_buffer = memoryview(bytearray(len(self.payload)))
        expected_iteration = 0
        while (header := self.await_push(conn)) is not None:
            iteration, stage, length = check_header(header, DATA)
            if (iteration, length) != (expected_iteration, nbytes):
                raise PeerError(f"push of iteration {iteration} ({length} bytes), "
                                f"expected iteration {expected_iteration} ({nbytes} bytes)")
            framing.recv_discard(conn, length, receive_buffer)
            send_ack(conn, iteration, stage, length)
            self.barrier.arrive(iteration)
            pull = {"flow": f"{args.job}/p{args.index}->w{index}/i{iteration}/{PULL}", "job": args.job,
                    "src": args.host, "dst": worker["host"], "bytes": nbytes, "phase": PULL,
                    "iteration": iteration, "stage": stage, "src_port": local_port, "dst_port": worker_port}
            self.task.emit("flow_start", **pull)
            send_data(conn, iteration, stage, nbytes, self.payload)
            recv_ack(conn, iteration, nbytes)
            self.task.emit("flow_end", **pull)
            expected_iteration += 1
        self.barrier.close()
        conn.close()

    @staticmethod
    def await_push(conn: socket.socket) -> Header | None:
        """The next push's header, or None when the worker closed between frames. The
        first byte may take as long as the driver waits between stages; the rest is bounded."""
        try:
            return framing.recv_header(conn, paced=True)
        except framing.PeerClosed:
            return None


def run_ps(args, task: Task) -> None:
    spawn(task, "commands", task.read_commands, lambda message: None)
    PsServer(args, task).serve()


def address(text: str) -> tuple[str, int]:
    try:
        return framing.ipv4_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hosts.cojob_task", description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=("worker", "ps"), required=True)
    parser.add_argument("--job", required=True, help="job key, e.g. c0j3")
    parser.add_argument("--index", type=int, required=True, help="worker or PS index within the job")
    parser.add_argument("--host", required=True, help="emulated host name, for events")
    parser.add_argument("--events", required=True, help="the driver's unix socket")
    parser.add_argument("--bytes", type=int, required=True, help="bytes of one push (= one pull)")
    parser.add_argument("--compute-s", type=float, default=0.0, help="worker's compute sleep per iteration")
    parser.add_argument("--workers", type=int, required=True, help="W, workers in the job")
    parser.add_argument("--ps-addrs", type=lambda s: [address(a) for a in s.split(",")],
                        help="worker: every PS's listen ip:port, in PS index order")
    parser.add_argument("--worker-port-base", type=int, help="worker: source port to PS p is this + p")
    parser.add_argument("--listen", type=address, help="PS: ip:port to listen on")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="longest wait on a peer without progress")
    parser.add_argument("--congestion", help="TCP congestion control of every connection (default: the host's)")
    args = parser.parse_args(argv)
    if args.bytes < 1 or args.workers < 1 or args.compute_s < 0 or args.timeout_s <= 0:
        parser.error("--bytes and --workers must be >= 1, --compute-s >= 0, --timeout-s > 0")
    if args.role == "worker":
        if not args.ps_addrs or args.worker_port_base is None:
            parser.error("a worker needs --ps-addrs and --worker-port-base")
        if not (0 < args.worker_port_base and args.worker_port_base + len(args.ps_addrs) <= 65536):
            parser.error("--worker-port-base + number of PSs must fit in 1..65535")
        if not 0 <= args.index < args.workers:
            parser.error(f"--index must be in 0..{args.workers - 1}")
    elif args.listen is None:
        parser.error("a PS needs --listen")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    task_id = f"{args.job}/{'w' if args.role == 'worker' else 'p'}{args.index}"
    try:
        task = Task(args.events, args.host, task_id, program="cojob_task")
    except OSError as err:
        sys.exit(f"cojob_task {task_id}: events socket {args.events}: {err}")
    task.emit("hello", role=args.role, job=args.job, pid=os.getpid())
    try:
        (run_worker if args.role == "worker" else run_ps)(args, task)
    except Exception as err:  # noqa: BLE001 - every failure becomes one `error` line
        task.fail(f"{type(err).__name__}: {err}")


if __name__ == "__main__":
    main()
