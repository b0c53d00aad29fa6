"""hosts/cojob_task.py as real processes on 127.0.0.1, driven by a fake driver (a unix
socket server that logs events in arrival order and sends commands)."""
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from fake_driver import FakeDriver
from fakes import RecordingSocket

REPO = Path(__file__).resolve().parents[1]
JOB = "c0j3"
NBYTES = 300_000


def free_port_block(n: int) -> int:
    """The first of ``n`` consecutive ports free on 127.0.0.1, below the ephemeral range."""
    for _ in range(200):
        base = random.randrange(20_000, 32_000 - n)
        probes = []
        try:
            for port in range(base, base + n):
                probe = socket.socket()
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise RuntimeError("no free port block")


@pytest.fixture
def harness():
    """A fake driver on a short socket path (unix paths are limited to 108 bytes) and
    a launcher for tasks; every task still running at the end is killed."""
    directory = tempfile.mkdtemp(prefix="tbcj")
    path = os.path.join(directory, "events.sock")
    driver = FakeDriver(path)
    procs: list[subprocess.Popen] = []

    def launch(*args: str, events: str = path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "hosts.cojob_task", "--job", JOB, "--events", events,
                                 "--bytes", str(NBYTES), *args],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    try:
        yield driver, launch
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stderr.close()
        driver.server.close()
        shutil.rmtree(directory)


def start_job(launch, workers: int, ps: int, timeout_s: float = 10.0, compute_s: float = 0.02):
    """PSs listen on base..base+ps-1; worker w's source ports start at base + ps + w*ps."""
    base = free_port_block(ps + workers * ps)
    ps_addrs = ",".join(f"127.0.0.1:{base + p}" for p in range(ps))
    common = ["--workers", str(workers), "--timeout-s", str(timeout_s), "--compute-s", str(compute_s)]
    ps_procs = [launch("--role", "ps", "--index", str(p), "--host", f"ps{p}", "--listen", f"127.0.0.1:{base + p}",
                       *common) for p in range(ps)]
    worker_bases = [base + ps + w * ps for w in range(workers)]
    worker_procs = [launch("--role", "worker", "--index", str(w), "--host", f"wk{w}", "--ps-addrs", ps_addrs,
                           "--worker-port-base", str(worker_bases[w]), *common) for w in range(workers)]
    return ps_procs, worker_procs, base, worker_bases


def test_two_stages_then_stop(harness):
    driver, launch = harness
    ps_procs, worker_procs, ps_base, worker_bases = start_job(launch, workers=2, ps=2)
    workers = [f"{JOB}/w0", f"{JOB}/w1"]
    driver.wait_for(lambda events: sum(e["kind"] == "hello" for e in events) == 4)
    stage_of = {}
    for stage, iterations in ((0, 3), (1, 2)):
        for iteration in range(len(stage_of), len(stage_of) + iterations):
            stage_of[iteration] = stage
        driver.send(workers[0], "run_stage", stage=stage, iterations=iterations)
        time.sleep(0.3)  # w1 starts late: the PSs must hold w0's pulls until w1's pushes are in
        driver.send(workers[1], "run_stage", stage=stage, iterations=iterations)
        driver.wait_for(lambda events: sum(e["kind"] == "stage_done" and e["stage"] == stage for e in events) == 2)
    for task in workers:
        driver.send(task, "stop")
    # PSs stop by themselves once all their workers closed.
    assert [proc.wait(10) for proc in worker_procs + ps_procs] == [0, 0, 0, 0]
    driver.wait_for(lambda events: sum(e["kind"] == "bye" for e in events) == 4)

    events = driver.events
    assert not [e for e in events if e["kind"] == "error"]
    flows = [e for e in events if e["kind"] in ("flow_start", "flow_end")]
    assert Counter((e["kind"], e["phase"]) for e in flows) == {
        ("flow_start", "push"): 20, ("flow_end", "push"): 20, ("flow_start", "pull"): 20, ("flow_end", "pull"): 20}
    position = {(e["kind"], e["flow"]): i for i, e in enumerate(events) if "flow" in e}
    assert len(position) == 40 + 40, "flow ids are unique"
    for e in flows:
        assert e["bytes"] == NBYTES and e["job"] == JOB
        assert e["stage"] == stage_of[e["iteration"]]
        if e["kind"] == "flow_end":
            start = events[position["flow_start", e["flow"]]]
            assert position["flow_start", e["flow"]] < position["flow_end", e["flow"]] and start["t"] <= e["t"]
            assert {k: v for k, v in start.items() if k not in ("kind", "t")} == \
                {k: v for k, v in e.items() if k not in ("kind", "t")}
    for w in range(2):
        for p in range(2):
            for iteration in range(5):
                push = events[position["flow_start", f"{JOB}/w{w}->p{p}/i{iteration}/push"]]
                assert (push["task"], push["src"], push["dst"]) == (f"{JOB}/w{w}", f"wk{w}", f"ps{p}")
                assert (push["src_port"], push["dst_port"]) == (worker_bases[w] + p, ps_base + p)
                pull = events[position["flow_start", f"{JOB}/p{p}->w{w}/i{iteration}/pull"]]
                assert (pull["task"], pull["src"], pull["dst"]) == (f"{JOB}/p{p}", f"ps{p}", f"wk{w}")
                assert (pull["src_port"], pull["dst_port"]) == (ps_base + p, worker_bases[w] + p)
                last_push_started = max(events[position["flow_start", f"{JOB}/w{v}->p{p}/i{iteration}/push"]]["t"]
                                        for v in range(2))
                assert pull["t"] >= last_push_started, "a pull starts only once every worker's push is in"
    for task in workers:
        ends = [(e["iteration"], e["stage"]) for e in events if e["kind"] == "iteration_end" and e["task"] == task]
        assert ends == sorted(stage_of.items())
        assert [e["stage"] for e in events if e["kind"] == "stage_done" and e["task"] == task] == [0, 1]
        # A worker computes between iterations: its next push starts after its iteration_end.
        for i, e in enumerate(events):
            if e["kind"] == "iteration_end" and e["task"] == task and e["iteration"] < 4:
                assert all(position["flow_start", f"{task}->p{p}/i{e['iteration'] + 1}/push"] > i for p in range(2))


def test_killed_ps_fails_the_workers(harness):
    driver, launch = harness
    ps_procs, worker_procs, _, _ = start_job(launch, workers=2, ps=2, timeout_s=5, compute_s=0)
    driver.wait_for(lambda events: driver.count("hello") == 4)
    for w in range(2):
        driver.send(f"{JOB}/w{w}", "run_stage", stage=0, iterations=100_000)
    driver.wait_for(lambda events: driver.count("iteration_end") >= 4)
    killed = time.monotonic()
    ps_procs[0].kill()
    assert all(proc.wait(5) != 0 for proc in worker_procs)
    assert time.monotonic() - killed < 3, "a closed connection is noticed at once, not after the timeout"
    driver.wait_for(lambda events: driver.count("error", f"{JOB}/w0") == driver.count("error", f"{JOB}/w1") == 1)


def test_silent_ps_times_out(harness):
    driver, launch = harness
    timeout_s = 1.5
    ps_procs, worker_procs, _, _ = start_job(launch, workers=2, ps=2, timeout_s=timeout_s, compute_s=0)
    driver.wait_for(lambda events: driver.count("hello") == 4)
    for w in range(2):
        driver.send(f"{JOB}/w{w}", "run_stage", stage=0, iterations=100_000)
    driver.wait_for(lambda events: driver.count("iteration_end") >= 4)
    stopped = time.monotonic()
    os.kill(ps_procs[0].pid, signal.SIGSTOP)  # alive, connections open, but silent
    assert all(proc.wait(timeout_s + 5) != 0 for proc in worker_procs)
    assert timeout_s - 0.2 < time.monotonic() - stopped < timeout_s + 4
    driver.wait_for(lambda events: driver.count("error", f"{JOB}/w0") == driver.count("error", f"{JOB}/w1") == 1)
    # A worker blocked on the silent PS times out. A worker already past it may instead
    # see the healthy PS close: that PS's own push barrier timed out waiting for the
    # stuck worker. Either way, no worker waits much beyond the timeout.
    errors = [e["error"] for e in driver.events if e["kind"] == "error" and "/w" in e["task"]]
    assert any("timed out" in error for error in errors), errors
    assert all("timed out" in error or "peer closed" in error or "reset" in error or "Broken pipe" in error
               for error in errors), errors


def test_missing_events_socket_exits_at_once(harness):
    _, launch = harness
    started = time.monotonic()
    proc = launch("--role", "ps", "--index", "0", "--host", "ps0", "--workers", "1", "--listen", "127.0.0.1:1",
                  events="/nonexistent/events.sock")
    assert proc.wait(5) != 0
    assert time.monotonic() - started < 5
    assert "events socket" in proc.stderr.read()


def test_driver_death_ends_every_task(harness):
    driver, launch = harness
    ps_procs, worker_procs, _, _ = start_job(launch, workers=1, ps=1, compute_s=0)
    driver.wait_for(lambda events: driver.count("hello") == 2)
    driver.send(f"{JOB}/w0", "run_stage", stage=0, iterations=100_000)
    driver.wait_for(lambda events: driver.count("iteration_end") >= 2)
    driver.die()
    assert all(proc.wait(5) != 0 for proc in ps_procs + worker_procs)


def test_ps_stops_on_command_before_any_worker(harness):
    driver, launch = harness
    port = free_port_block(1)
    proc = launch("--role", "ps", "--index", "0", "--host", "ps0", "--workers", "2", "--listen", f"127.0.0.1:{port}")
    driver.wait_for(lambda events: driver.count("hello") == 1)
    driver.send(f"{JOB}/p0", "stop")
    assert proc.wait(5) == 0
    driver.wait_for(lambda events: driver.count("bye") == 1)


def test_frames_on_the_wire_are_the_same_bytes_in_the_same_writes():
    """The bytes and write boundaries of INTRO, DATA and ACK, as recorded before the
    transport moved to hosts.framing (with TCP_NODELAY, writes shape the packets)."""
    from hosts import cojob_task, framing
    a, b = socket.socketpair()
    with a, b:
        for sock in (a, b):  # a side that stops reading fails the other, not hangs the test
            sock.settimeout(10)
        recorded = RecordingSocket(a)
        b.sendall(framing.pack_header(framing.Header(cojob_task.INTRO, 0, 0, 2)) + b"{}")
        with pytest.raises(framing.PeerError, match="peer belongs to job None"):
            cojob_task.exchange_intro(recorded, JOB, 0, "wk0")
        received = []  # (header, body) as the peer read them; asserted below, in the test's thread

        def receive():
            intro = framing.recv_header(b)
            received.append((intro, bytes(framing.recv_body(b, intro.length))))
            data = framing.recv_header(b)
            framing.recv_discard(b, data.length, memoryview(bytearray(cojob_task.CHUNK)))
            received.append((data, None))
            received.append((framing.recv_header(b), None))
        reader = threading.Thread(target=receive, daemon=True)
        reader.start()
        cojob_task.send_data(recorded, 17, 2, 1_300_000, memoryview(bytearray(cojob_task.CHUNK)))
        cojob_task.send_ack(recorded, 17, 2, 1_300_000)
        reader.join(10)
        assert not reader.is_alive()
    intro = b'{"job": "c0j3", "index": 0, "host": "wk0"}'
    assert received == [((cojob_task.INTRO, 0, 0, 42), intro), ((cojob_task.DATA, 17, 2, 1_300_000), None),
                        ((cojob_task.ACK, 17, 2, 1_300_000), None)]
    assert recorded.writes[0] == bytes.fromhex("01" "00000000" "00000000" "000000000000002a") + intro
    assert recorded.writes[1] == bytes.fromhex("02" "00000011" "00000002" "000000000013d620")
    assert [len(w) for w in recorded.writes[2:5]] == [524_288, 524_288, 251_424]
    assert recorded.writes[5] == bytes.fromhex("03" "00000011" "00000002" "000000000013d620")
    assert len(recorded.writes) == 6
