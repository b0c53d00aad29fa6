"""hosts.mesh as real processes on 127.0.0.1: a 3-host all-to-all, and a peer that never comes up."""
import json
import socket
import subprocess
import sys
import time

import pytest

from hosts.mesh import goodput_series

INTERVAL_S = 0.5


def free_addresses(count: int) -> list[str]:
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(count)]
    try:
        return [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
    finally:
        for s in sockets:
            s.close()


def start_mesh(out_dir, listen: str, peers: list[str], *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hosts.mesh", "--listen", listen, "--peers", ",".join(peers),
         "--interval-s", str(INTERVAL_S), "--out", str(out_dir / f"{listen.replace(':', '_')}.json"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen], timeout_s: float) -> list[tuple[int, str]]:
    """(exit status, stderr) of every process; kills them all if any is still running or a wait fails."""
    try:
        return [(proc.wait(timeout=timeout_s), proc.stderr.read()) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()


def load_report(out_dir, listen: str) -> dict:
    return json.loads((out_dir / f"{listen.replace(':', '_')}.json").read_text())


def test_three_hosts_send_to_each_other_and_count_every_byte(tmp_path):
    addresses = free_addresses(3)
    start_at = time.time() + 4.0  # three interpreters started and connected, even on a busy box
    procs = [start_mesh(tmp_path, me, [a for a in addresses if a != me],
                        "--duration-s", "2", "--start-at", f"{start_at:.6f}") for me in addresses]
    assert finish(procs, timeout_s=12) == [(0, "")] * 3
    reports = {me: load_report(tmp_path, me) for me in addresses}
    for me, report in reports.items():
        assert report["errors"] == [] and report["host_addr"] == me
        assert report["start_epoch_s"] == pytest.approx(start_at, abs=1e-5)
        peers = {a for a in addresses if a != me}
        assert set(report["received"]) == peers == set(report["sent"])
        for series in report["received"].values():
            assert len(series) >= 4  # 2 s in 0.5 s intervals, plus any tail still arriving
            assert sum(1 for received in series[:4] if received > 0) >= 3
    for sender, report in reports.items():
        for receiver, sent in report["sent"].items():
            assert sent > 0
            assert sent == sum(reports[receiver]["received"][sender])  # the receiver closes only after EOF

    report = reports[addresses[0]]
    series = goodput_series(report)
    assert [t for t, _ in series] == pytest.approx([(i + 1) * INTERVAL_S for i in range(len(series))])
    total_bytes = sum(map(sum, report["received"].values()))
    assert sum(mbps for _, mbps in series) * 1e6 / 8 * INTERVAL_S == pytest.approx(total_bytes)


def test_goodput_series_adds_peers_per_interval():
    report = {"interval_s": 0.5, "received": {"a": [125_000, 0], "b": [62_500, 250_000]}}
    assert goodput_series(report) == [(0.5, 3.0), (1.0, 4.0)]
    assert goodput_series({"interval_s": 0.5, "received": {}}) == []


def test_a_peer_that_never_comes_up_fails_the_others_by_name(tmp_path):
    addresses = free_addresses(3)
    missing = addresses[2]
    procs = [start_mesh(tmp_path, me, [a for a in addresses if a != me],
                        "--duration-s", "2", "--connect-timeout-s", "1") for me in addresses[:2]]
    started = time.monotonic()
    results = finish(procs, timeout_s=10)
    assert time.monotonic() - started < 5  # fails at the connect timeout, not after the run
    for me, (status, stderr) in zip(addresses, results):
        assert status != 0
        assert len(stderr.strip().splitlines()) == 1 and missing in stderr
        assert any(missing in error for error in load_report(tmp_path, me)["errors"])
