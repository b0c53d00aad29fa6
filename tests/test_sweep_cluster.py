"""Sweeps on a Dask cluster, on this box: a `dask scheduler` and `trainbed worker`s on
127.0.0.1 run simulated cells (never a fabric), as the serial sweep would."""
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from experiments import sweep as sweep_mod
from experiments.cli import main
from experiments.cluster import connect, local, run_group
from experiments.errors import SpecError
from experiments.store import REPO_ROOT

SWEEP = REPO_ROOT / "experiments/sweeps/grouper-sim-figures-smoke.yaml"
ONLY = "*workload_factor-0.5"  # 10 cells in 2 groups: seeds 1 and 2, five schedulers each
SEED_1 = "*seed-1_workload.arrivals.workload_factor-0.5"
TIMED = ("cell_s", "wall_s", "box_cpu_loop_ms")  # the columns that differ from run to run


def held_then_simulated(spec, out_dir):
    """The cell ``$HOLD_CELL`` waits, its first ``$HOLDS`` runs, for its worker to be
    killed (``$HOLD_DIR/held-<n>`` names the worker's pid and its own); every other
    run simulates as the sweep does."""
    hold = Path(os.environ["HOLD_DIR"])
    held = len(list(hold.glob("held-*")))
    if out_dir.name == os.environ["HOLD_CELL"] and held < int(os.environ["HOLDS"]):
        (hold / f".held-{held + 1}").write_text(f"{os.getppid()} {os.getpid()}")
        (hold / f".held-{held + 1}").rename(hold / f"held-{held + 1}")
        time.sleep(600)
    return sweep_mod.simulate_with_runner(spec, out_dir)


class Cluster:
    """A `dask scheduler` and `trainbed worker`s on 127.0.0.1, each a process this
    test started and stops by its pid."""

    def __init__(self, tmp_path: Path, hold_cell: str = "", holds: int = 0):
        self.dir, self.processes = tmp_path / "cluster", []
        (self.dir / "hold").mkdir(parents=True)
        self.env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "HOLD_DIR": str(self.dir / "hold"),
                    "HOLD_CELL": hold_cell, "HOLDS": str(holds),
                    "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1", "DASK_TEMPORARY_DIRECTORY": str(self.dir)}
        self.scheduler = self._start("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                                                   "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                                                   str(self.dir / "scheduler.json")])
        self.address = json.loads(self._wait_for(self.dir / "scheduler.json"))["address"]

    def _start(self, name: str, command: list[str]) -> subprocess.Popen:
        with open(self.dir / f"{name}-{len(self.processes)}.log", "w") as log:  # the process keeps its own copy
            process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def worker(self, *options: str) -> subprocess.Popen:
        return self._start("worker", [str(REPO_ROOT / ".venv/bin/trainbed"), "worker", self.address,
                                      *(options or ("--cpus", "1"))])

    def workers(self, n: int, *options: str) -> list[subprocess.Popen]:
        """``n`` more workers (``trainbed worker`` options, default ``--cpus 1``), once
        the scheduler has them all."""
        from distributed import Client
        started = [self.worker(*options) for _ in range(n)]
        with Client(self.address, timeout=30) as client:
            client.wait_for_workers(len([p for p in self.processes[1:] if p.poll() is None]), timeout=60)
        return started

    def _wait_for(self, path: Path, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while not path.exists():
            assert time.monotonic() < deadline, f"{path} did not appear"
            time.sleep(0.1)
        return path.read_text()

    def held(self, n: int) -> tuple[int, int]:
        """(worker pid, cell process pid) of the cell held the ``n``-th time."""
        worker, cell = self._wait_for(self.dir / "hold" / f"held-{n}").split()
        return int(worker), int(cell)

    def kill(self, pid: int) -> None:
        process = next(p for p in self.processes if p.pid == pid)  # only a process this test started
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    @contextmanager
    def meanwhile(self, action):
        """``action()`` in a thread while the block runs; where it fails, every process
        is stopped (so that the sweep ends) and its error is raised as the block ends."""
        errors = []

        def run():
            try:
                action()
            except BaseException as err:  # noqa: BLE001 - an assertion too: raised as the block ends
                errors.append(err)
                self.stop()
        thread = threading.Thread(target=run)
        thread.start()
        try:
            yield
        finally:
            thread.join()
            if errors:
                raise errors[0]

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


@pytest.fixture
def cluster(tmp_path):
    made = []

    def make(**hold):
        made.append(Cluster(tmp_path, **hold))
        return made[-1]
    yield make
    for one in made:
        one.stop()


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The ``ONLY`` cells run one after another, as today: the reference."""
    out = tmp_path_factory.mktemp("serial") / "sweep"
    sweep_mod.run_any_sweep(SWEEP, out=str(out), only=[ONLY])
    return out


def ends(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def rows(directory: Path) -> dict[str, dict]:
    with open(directory / "results.csv", newline="") as f:
        return {row["cell"]: {k: v for k, v in row.items() if k not in TIMED} for row in csv.DictReader(f)}


def environment(directory: Path, cell: str) -> dict:
    return json.loads((directory / "cells" / cell / "environment.json").read_text())


def files(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


def workers_of_groups(directory: Path, cells) -> list[set[str]]:
    """Per group (seed) of ``cells``, the worker addresses its cells ran on."""
    by_seed: dict[str, set[str]] = {}
    for cell in cells:
        by_seed.setdefault(cell.split("_seed-")[1][0], set()).add(environment(directory, cell)["worker"])
    return list(by_seed.values())


def test_a_cluster_sweep_gives_the_serial_results_with_each_group_on_one_worker(cluster, serial, tmp_path, capsys):
    dask = cluster()
    dask.workers(2)
    out = tmp_path / "out"
    assert main(["sweep", str(SWEEP), "--only", ONLY, "--cluster", dask.address, "--out", str(out)]) == 0
    assert "(2 cpu slots)" in capsys.readouterr().out
    assert rows(out) == rows(serial)
    for cell in rows(serial):
        assert files(out / "cells" / cell) == files(serial / "cells" / cell)  # every file came back
        assert environment(out, cell)["machine"] == socket.gethostname()
    groups = workers_of_groups(out, rows(serial))
    assert [len(workers) for workers in groups] == [1, 1]  # each comparison ran on one worker
    assert len(set.union(*groups)) == 2  # the two groups ran side by side
    assert (out / "report.html").exists()


def test_a_worker_killed_mid_cell_has_its_group_run_again_on_another(cluster, serial, tmp_path):
    held_cell = "sched-sincronia_seed-1_workload.arrivals.workload_factor-0.5"  # its group's third cell
    dask = cluster(hold_cell=held_cell, holds=1)
    dask.workers(2)
    out = tmp_path / "out"

    def kill_the_holder():
        worker, cell_process = dask.held(1)
        dask.kill(worker)
        assert ends(cell_process), "the killed worker's cell process runs on"
    with dask.meanwhile(kill_the_holder), connect(dask.address) as executor:
        result = sweep_mod.run_any_sweep(SWEEP, out=str(out), only=[SEED_1], executor=executor,
                                          run_cell=held_then_simulated)
    assert result.failed == []
    assert rows(out) == {cell: row for cell, row in rows(serial).items() if "seed-1" in cell}
    assert [len(workers) for workers in workers_of_groups(out, rows(out))] == [1]  # the rerun moved the whole group


def test_a_group_whose_workers_die_twice_fails_with_the_reason_and_a_resume_finishes_it(cluster, serial, tmp_path):
    dask = cluster(hold_cell="sched-baraat_seed-1_workload.arrivals.workload_factor-0.5", holds=2)
    dask.workers(2)
    out = tmp_path / "out"

    def kill_both_holders():
        for n in (1, 2):
            dask.kill(dask.held(n)[0])
    with dask.meanwhile(kill_both_holders), connect(dask.address) as executor:
        result = sweep_mod.run_any_sweep(SWEEP, out=str(out), only=[SEED_1], executor=executor,
                                          run_cell=held_then_simulated)
    assert len(result.failed) == 5
    assert all(row["error"].startswith("KilledWorker: the worker running it died, 2 times") for row in result.rows)
    dask.workers(1)
    with connect(dask.address) as executor:
        result = sweep_mod.run_any_sweep(SWEEP, out=str(out), only=[SEED_1], executor=executor,
                                          run_cell=held_then_simulated)
    assert result.failed == []
    assert rows(out) == {cell: row for cell, row in rows(serial).items() if "seed-1" in cell}


def test_a_scheduler_that_goes_away_leaves_the_landed_cells_and_a_resume_finishes(cluster, serial, tmp_path, capsys):
    dask = cluster(hold_cell="sched-fs_seed-2_workload.arrivals.workload_factor-0.5", holds=1)
    dask.workers(2)
    out = tmp_path / "out"

    def kill_the_scheduler_once_seed_1_landed():
        dask.held(1)
        deadline = time.monotonic() + 60
        while not (out / "results.csv").exists() or len(rows(out)) < 5:
            assert time.monotonic() < deadline, "seed 1's cells did not land"
            time.sleep(0.1)
        dask.kill(dask.scheduler.pid)
    with dask.meanwhile(kill_the_scheduler_once_seed_1_landed), \
            pytest.raises(RuntimeError, match=r"^--cluster: lost the Dask scheduler at .*run again with --out"), \
            connect(dask.address) as executor:
        sweep_mod.run_any_sweep(SWEEP, out=str(out), only=[ONLY], executor=executor, run_cell=held_then_simulated)
    assert ends(dask.held(1)[1]), "the held cell runs on without a scheduler"  # its worker stopped it
    landed = rows(out)
    assert sorted(landed) == sorted(cell for cell in rows(serial) if "seed-1" in cell)
    capsys.readouterr()
    assert main(["sweep", str(SWEEP), "--only", ONLY, "--local", "2", "--out", str(out)]) == 0
    assert capsys.readouterr().out.count("already done") == 5
    assert rows(out) == rows(serial)


def test_a_sweep_that_stops_stops_its_running_cell_and_leaves_the_worker_serving(cluster):
    held_cell = "sched-fs_seed-1_workload.arrivals.workload_factor-0.5"
    dask = cluster(hold_cell=held_cell, holds=1)
    worker, = dask.workers(1)
    spec = next(cell.spec for cell in sweep_mod.load(SWEEP).cells if cell.id == held_cell)
    from distributed import Client
    with Client(dask.address, timeout=30) as client:  # the sweep's client, gone as the block ends
        task = client.submit(run_group, [(held_cell, spec)], held_then_simulated, False, resources={"cpu": 1})
        _, cell_process = dask.held(1)
        assert not task.done()
    assert ends(cell_process), "the cell of a sweep that stopped runs on"
    assert worker.poll() is None


def test_local_gives_one_worker_the_fabric_slot_in_an_emulated_sweep_and_none_in_a_simulated_one():
    for n, backends, slots in ((2, {"emulated"}, [{"fabric": 1}, {}]), (2, {"simulated"}, [{"cpu": 1}, {"cpu": 1}]),
                               (2, {"emulated", "simulated"}, [{"cpu": 1}, {"fabric": 1}]),
                               (1, {"emulated", "simulated"}, [{"cpu": 1, "fabric": 1}])):
        with local(n, backends) as executor:
            workers = executor.client.scheduler_info(n_workers=-1)["workers"].values()
            assert sorted((worker["resources"] for worker in workers), key=str) == slots, backends


def test_cluster_options_refuse_bad_input_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("experiments.cluster.CONNECT_TIMEOUT_S", 1)
    for shown in ([], ["--list"], ["--dry-run"]):  # refused by its parser, before anything is read
        with pytest.raises(SystemExit) as exit_:
            main(["sweep", str(SWEEP), "--local", "0", "--out", str(tmp_path / "out"), *shown])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.endswith("error: argument --local: must be at least 1, got 0\n")
    with pytest.raises(SystemExit):
        main(["sweep", str(SWEEP), "--local", "two"])
    assert capsys.readouterr().err.endswith("error: argument --local: must be a whole number, got 'two'\n")
    assert main(["sweep", str(SWEEP), "--cluster", "tcp://127.0.0.1:9", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith("trainbed: error: --cluster: no Dask scheduler answers at "
                                              "tcp://127.0.0.1:9 (")
    assert not (tmp_path / "out").exists()


def test_a_fabric_worker_needs_root_and_a_worker_some_slot(monkeypatch):
    from experiments.cluster import worker_command
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SpecError, match=r"^--fabric: an emulated cell brings up a fabric, which needs root"):
        worker_command("tcp://127.0.0.1:8786", fabric=True, cpus=None)
    with pytest.raises(SpecError, match=r"^--cpus: must be at least 1, got 0$"):
        worker_command("tcp://127.0.0.1:8786", fabric=False, cpus=0)
    command = worker_command("tcp://127.0.0.1:8786", fabric=False, cpus=3)
    assert command[command.index("--resources") + 1] == "cpu=3" and command[command.index("--nthreads") + 1] == "3"


TWO_FLOWS = {"name": "cluster-two-flows", "topology": {"kind": "star", "hosts": 3, "host_mbps": 20}, "duration_s": 8,
             "flows": [{"name": "low", "src": "tbh2", "dst": "tbh1", "queue": 7},
                       {"name": "high", "src": "tbh3", "dst": "tbh1", "start_s": 2, "duration_s": 4, "queue": 1}]}


@pytest.mark.root
def test_emulated_cells_run_on_the_fabric_worker_and_a_killed_one_leaves_no_fabric(cluster, tmp_path, private_state):
    from distributed import Client
    from emulation_checks import netns_inodes, why_records_stay
    namespaces = netns_inodes()
    (tmp_path / "two-flows.yaml").write_text(yaml.safe_dump(TWO_FLOWS))
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({"name": "cluster-emulated", "spec": "two-flows.yaml",
                                          "grid": {"topology.host_mbps": [20, 40]}}))
    dask = cluster()
    fabric_worker, = dask.workers(1, "--fabric")
    dask.workers(1, "--cpus", "1")  # simulation only: no emulated cell may land here
    with Client(dask.address, timeout=30) as client:
        cpu_only = next(address for address, worker in client.scheduler_info(n_workers=-1)["workers"].items()
                        if "fabric" not in worker["resources"])

    def kill_the_fabric_worker_mid_cell():
        deadline = time.monotonic() + 120
        while not list(private_state.glob("*.json")):  # the first cell's run record: its fabric is coming up
            assert time.monotonic() < deadline, "no emulated cell started"
            time.sleep(0.2)
        dask.kill(fabric_worker.pid)
        deadline = time.monotonic() + 60
        while list(private_state.glob("*.json")):  # its cell's process tears the fabric down (SIGTERM)
            assert time.monotonic() < deadline, f"the killed worker's fabric stays up:\n{why_records_stay(private_state)}"
            time.sleep(0.2)
        dask.workers(1, "--fabric")  # the group runs again there
    out = tmp_path / "out"
    with dask.meanwhile(kill_the_fabric_worker_mid_cell), connect(dask.address) as executor:
        result = sweep_mod.run_any_sweep(sweep_file, out=str(out), executor=executor)
    assert result.failed == []
    for row in result.rows:
        cell = out / "cells" / row["cell"]
        assert {"summary.json", "goodput.csv", "fabric.json", "controller.log", "raw"} <= set(files(cell))
        assert environment(out, row["cell"])["worker"] != cpu_only
    assert list(private_state.glob("*.json")) == [], "a run record is left"
    assert netns_inodes() <= namespaces, "host namespaces (or their processes) left behind"


@pytest.mark.root
def test_a_mixed_sweep_sends_emulated_cells_to_the_fabric_worker_and_simulated_ones_to_the_other(
        cluster, tmp_path, private_state):
    from distributed import Client
    from emulation_checks import netns_inodes
    namespaces = netns_inodes()
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({
        "name": "cluster-mixed", "spec": str(REPO_ROOT / "experiments/specs/grouper-smoke.yaml"), "seeds": [1],
        "parts": [{"name": "testbed", "schedulers": ["fs"]},
                  {"name": "model", "backend": "simulated", "schedulers": ["fs", "grouper"],
                   "grid": {"scheduler.period_s": [1.5]}}]}))
    dask = cluster()
    dask.workers(1, "--fabric")
    dask.workers(1, "--cpus", "1")
    with Client(dask.address, timeout=30) as client:
        roles = {address: "fabric" if "fabric" in worker["resources"] else "cpu"
                 for address, worker in client.scheduler_info(n_workers=-1)["workers"].items()}
    out = tmp_path / "out"
    with connect(dask.address) as executor:
        result = sweep_mod.run_any_sweep(sweep_file, out=str(out), executor=executor)
    assert result.failed == []
    ran_on = {row["cell"]: roles[environment(out, row["cell"])["worker"]] for row in result.rows}
    assert ran_on == {"sched-fs_seed-1": "fabric", "sched-fs_seed-1_scheduler.period_s-1.5": "cpu",
                      "sched-grouper_seed-1_scheduler.period_s-1.5": "cpu"}
    # The simulated cells give what the same cells give run here, one after another.
    serial = sweep_mod.run_any_sweep(sweep_file, out=str(tmp_path / "serial"), only=["*period_s*"])
    for row in serial.rows:
        clustered = next(r for r in result.rows if r["cell"] == row["cell"])
        assert clustered["avg_sct_s"] == row["avg_sct_s"] and clustered["avg_jct_s"] == row["avg_jct_s"]
    assert list(private_state.glob("*.json")) == [], "a run record is left"
    assert netns_inodes() <= namespaces, "host namespaces (or their processes) left behind"


def test_local_holds_slots_for_the_backends_of_the_cells_that_will_run(tmp_path, monkeypatch):
    """``--only`` the simulated part of a sweep on both backends: its local workers
    hold no fabric slot (one worker alone would otherwise hold the machine's fabric)."""
    import contextlib

    import yaml

    from tests.test_sweep import write
    smoke = yaml.safe_load((REPO_ROOT / "experiments/specs/grouper-smoke.yaml").read_text())
    path = write(tmp_path, {"schedulers": ["fs"], "seeds": [1], "parts": [
        {"name": "testbed"}, {"name": "model", "backend": "simulated"}]}, base=smoke)
    asked = []

    @contextlib.contextmanager
    def local_asked(workers, backends):
        asked.append((workers, backends))
        raise KeyboardInterrupt  # stop here (trainbed answers 130): what matters is what was asked

    monkeypatch.setattr("experiments.cluster.local", local_asked)
    for only in ("*_backend-simulated", "*"):
        assert main(["sweep", str(path), "--only", only, "--local", "1", "--out", str(tmp_path / "out")]) == 130
    assert asked == [(1, {"simulated"}), (1, {"emulated", "simulated"})]
