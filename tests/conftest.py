import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0 and shutil.which("ovs-vswitchd") and shutil.which("iperf3"):
        return
    skip = pytest.mark.skip(reason="needs root, Open vSwitch and iperf3 (run `make test` as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Each test keeps its run records and results in its own directories."""
    monkeypatch.setenv("TRAINBED_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("TRAINBED_RESULTS", str(tmp_path / "results"))
    return tmp_path / "state"
