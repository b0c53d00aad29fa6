"""The all-reduce analysis of the programs kind (hand-worked numbers), and the example
data-parallel training (hosts/ddp_example.py) as real processes on 127.0.0.1."""
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.programs.allreduce import (
    analyse_iterations,
    read_iterations,
    ring_allreduce_ideal_s,
)
from hosts import ddp_example

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "hosts" / "ddp_example.py"
CSV_HEADER = "iteration,start_epoch_s,compute_s,sync_s,allreduce_s,allreduce_bytes,iteration_s"
# The MLP 64 -> 100 -> 100 -> 10: (64*100 + 100) + (100*100 + 100) + (100*10 + 10).
SMALL_MODEL_PARAMS = 17610


def test_ring_ideal_hand_worked():
    # 2(N-1)/N x bytes x 8 / rate: 1.5 x 12 MB x 8 / 100 Mbit/s.
    assert ring_allreduce_ideal_s(12_000_000, 4, 100) == pytest.approx(1.44)
    assert ring_allreduce_ideal_s(12_000_000, 2, 100) == pytest.approx(0.96)
    assert ring_allreduce_ideal_s(1_000_000, 3, 1000) == pytest.approx(4 / 3 * 8e6 / 1e9)
    assert ring_allreduce_ideal_s(12_000_000, 1, 100) == 0
    with pytest.raises(ValueError, match="link_mbps"):
        ring_allreduce_ideal_s(1, 2, 0)


def row(iteration, start, allreduce_s, iteration_s, nbytes=1_000_000):
    return {"iteration": iteration, "start_epoch_s": start, "compute_s": 0.1, "allreduce_s": allreduce_s,
            "allreduce_bytes": nbytes, "iteration_s": iteration_s}


# Ideal at 4 ranks, 100 Mbit/s, 1 MB: 1.5 x 8e6 / 1e8 = 0.12 s. Iterations 0 and 1 are
# the warm-up (slow on purpose). The busy window 103-104 s overlaps iterations 4
# (102.9-103.5) and 5 (103.5-104.3); 3 ends at 102.9 and 6 starts at 104.3.
ROWS = [row(6, 104.3, 0.32, 1.0), row(0, 100.0, 0.9, 1.0), row(1, 101.0, 0.5, 1.0), row(2, 102.0, 0.24, 0.5),
        row(3, 102.5, 0.12, 0.4), row(4, 102.9, 0.16, 0.6), row(5, 103.5, 0.2, 0.8)]


def test_analysis_hand_worked():
    result = analyse_iterations(ROWS, link_mbps=100, world_size=4, busy_windows=[(103.0, 104.0), (200.0, 210.0)])
    assert result["iterations"] == 7
    assert result["allreduce_bytes"] == 1_000_000
    assert result["allreduce_ideal_s"] == pytest.approx(0.12)
    # all-reduce of iterations 2-6: 0.24, 0.12, 0.16, 0.2, 0.32 -> median 0.2.
    assert result["allreduce_s"] == pytest.approx(0.2)
    assert result["allreduce_over_ideal"] == pytest.approx(0.2 / 0.12)
    # 8 Mbit / each: 33.3, 66.7, 50, 40, 25 -> median 40.
    assert result["allreduce_mbps"] == pytest.approx(40)
    # alone: iterations 2, 3, 6 (0.5, 0.4, 1.0); with the competing flow: 4, 5 (0.6, 0.8).
    assert result["iteration_s_alone"] == pytest.approx(0.5)
    assert result["iterations_alone"] == 3
    assert result["iteration_s_with_competing"] == pytest.approx(0.7)
    assert result["iterations_with_competing"] == 2


def test_analysis_without_one_side():
    alone_only = analyse_iterations(ROWS, 100, 4, busy_windows=[])
    assert alone_only["iteration_s_with_competing"] is None and alone_only["iterations_alone"] == 5
    busy_only = analyse_iterations(ROWS, 100, 4, busy_windows=[(0.0, 1000.0)])
    assert busy_only["iteration_s_alone"] is None and busy_only["iteration_s_with_competing"] == pytest.approx(0.6)


def test_analysis_refuses_what_it_cannot_measure():
    with pytest.raises(ValueError, match="none left after a warm-up of 2"):
        analyse_iterations(ROWS[:2], 100, 4, [])
    with pytest.raises(ValueError, match="allreduce_bytes differ"):
        analyse_iterations(ROWS + [row(7, 105.3, 0.1, 0.5, nbytes=5)], 100, 4, [])
    with pytest.raises(ValueError, match="at least 2 ranks"):
        analyse_iterations(ROWS, 100, 1, [])


def test_read_iterations(tmp_path):
    path = tmp_path / "iterations.csv"
    path.write_text(CSV_HEADER + "\n0,100.5,0.1,0.01,0.25,70440,0.4\n1,100.9,0.1,0.0,0.2,70440,0.35\n")
    rows = read_iterations(path)
    assert rows[1] == {"iteration": 1, "start_epoch_s": 100.9, "compute_s": 0.1, "sync_s": 0.0,
                       "allreduce_s": 0.2, "allreduce_bytes": 70440, "iteration_s": 0.35}


@pytest.mark.parametrize("text, message", [
    ("", "empty, expected a header"),
    ("iteration,start_epoch_s,compute_s,allreduce_bytes,iteration_s\n", "no column allreduce_s"),
    (CSV_HEADER + "\n0,100.5,0.1,0.01,abc,70440,0.4\n", "line 2, column allreduce_s: 'abc' is not a number"),
    (CSV_HEADER + "\n0,100.5,0.1,0.01,0.2,7.5,0.4\n", "line 2, column allreduce_bytes: '7.5' is not an integer"),
    (CSV_HEADER + "\n0,100.5,-0.1,0.01,0.2,70440,0.4\n", "line 2, column compute_s: '-0.1' is not a finite"),
    (CSV_HEADER + "\n0,100.5,0.1,0.01,nan,70440,0.4\n", "column allreduce_s: 'nan' is not a finite"),
    (CSV_HEADER + "\n0,100.5,0.1,0.01,0.2,70440\n", "line 2: not 7 cells like the header"),
])
def test_read_iterations_names_file_and_column(tmp_path, text, message):
    path = tmp_path / "iterations.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        read_iterations(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_read_iterations_missing_file(tmp_path):
    with pytest.raises(ValueError, match="nowhere.csv: cannot read"):
        read_iterations(tmp_path / "nowhere.csv")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def launch(tmp_path):
    """Starts ranks of the example on 127.0.0.1 (gloo on the loopback interface only);
    whatever a test leaves running is killed by its own handle."""
    started: list[subprocess.Popen] = []
    port = free_port()

    def start(rank: int, world_size: int, *args: str) -> subprocess.Popen:
        out = tmp_path / f"rank{rank}"
        env = {"PATH": "/usr/bin:/bin", "RANK": str(rank), "WORLD_SIZE": str(world_size),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TRAINBED_OUT": str(out),
               "GLOO_SOCKET_IFNAME": "lo"}
        proc = subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proc.out = out
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_three_ranks_train_in_step(launch):
    iterations = 4
    ranks = [launch(rank, 3, "--iterations", str(iterations), "--params", str(SMALL_MODEL_PARAMS),
                    "--batch", "16", "--timeout-s", "60") for rank in range(3)]
    outputs = [proc.communicate(timeout=120) for proc in ranks]
    assert [proc.returncode for proc in ranks] == [0, 0, 0], [stderr for _, stderr in outputs]
    assert outputs[0][0].startswith("ddp_example: 3 ranks, 4 iterations, 17610 parameters")
    results = []
    for proc in ranks:
        assert (proc.out / "iterations.csv").read_text().splitlines()[0] == CSV_HEADER
        rows = read_iterations(proc.out / "iterations.csv")
        assert [r["iteration"] for r in rows] == list(range(iterations))
        assert {r["allreduce_bytes"] for r in rows} == {4 * SMALL_MODEL_PARAMS}
        result = json.loads((proc.out / "ddp_result.json").read_text())
        assert result["parameters"] == SMALL_MODEL_PARAMS
        results.append(result)
    # Every rank trained on its own data: equal parameters mean the gradients were
    # averaged, and parameters other than the untrained model's that they trained.
    assert len({r["params_sha256"] for r in results}) == 1
    untrained = ddp_example.params_sha256(list(ddp_example.build_model(SMALL_MODEL_PARAMS, 0).parameters()))
    assert results[0]["params_sha256"] != untrained
    analysis = analyse_iterations(read_iterations(ranks[0].out / "iterations.csv"), 1000, 3, [])
    assert analysis["iterations"] == iterations and analysis["allreduce_bytes"] == 4 * SMALL_MODEL_PARAMS


def assert_one_line_failure(proc: subprocess.Popen, rank: int, within_s: float, message: str) -> None:
    _, stderr = proc.communicate(timeout=within_s)
    assert proc.returncode == 1
    assert stderr.strip().splitlines() == [stderr.strip()] and stderr.startswith(f"ddp_example rank {rank}: ")
    assert message in stderr


@pytest.mark.parametrize("rank", [0, 1], ids=["rank0-serving-the-rendezvous", "rank1-finding-none"])
def test_missing_peer_fails_at_the_timeout(launch, rank):
    """One rank of 2 whose peer never starts."""
    timeout_s = 3
    started = time.monotonic()
    alone = launch(rank, 2, "--timeout-s", str(timeout_s))
    # The deadline runs from after torch's import: seconds on a loaded box.
    assert_one_line_failure(alone, rank, within_s=60, message="no rendezvous of 2 ranks at tcp://127.0.0.1:")
    assert time.monotonic() - started >= timeout_s


def test_killed_peer_fails_the_others(launch):
    ranks = [launch(rank, 2, "--iterations", "100000", "--params", str(SMALL_MODEL_PARAMS), "--timeout-s", "20")
             for rank in range(2)]
    deadline = time.monotonic() + 60
    csv_of_rank0 = ranks[0].out / "iterations.csv"
    while not (csv_of_rank0.exists() and len(csv_of_rank0.read_text().splitlines()) > 3):
        assert time.monotonic() < deadline and ranks[0].poll() is None, "rank 0 never got going"
        time.sleep(0.1)
    ranks[1].kill()
    # Within the timeout the ranks were given (gloo notices the closed connection at once).
    assert_one_line_failure(ranks[0], 0, within_s=20, message="Error: ")  # gloo's words vary with what it was doing
