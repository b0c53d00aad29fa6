"""Grouper end to end on the real fabric (root): the CI smoke sweep, fair share vs Grouper."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from emulation_checks import assert_nothing_left, netns_inodes

from experiments.cojob import spec as cojob_spec
from experiments.emulation.spec import fabric_of
from experiments.runner import read_spec

pytestmark = pytest.mark.root
REPO = Path(__file__).resolve().parent.parent


def test_smoke_sweep_grouper_beats_fair_share_and_its_decisions_are_on_the_wire(tmp_path, private_state):
    namespaces = netns_inodes()
    out = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "experiments.cli", "sweep", "experiments/sweeps/grouper-smoke.yaml",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {row["scheduler"]: row for row in csv.DictReader((out / "results.csv").open())}
    assert set(rows) == {"fs", "grouper"}
    for row in rows.values():
        assert row["completed"] == "true" and row["trustworthy"] == "true" and row["seed"] == "1", row
    assert float(rows["grouper"]["avg_sct_s"]) < float(rows["fs"]["avg_sct_s"])
    cells = {name: out / "cells" / rows[name]["cell"] for name in rows}
    grouper = json.loads((cells["grouper"] / "summary.json").read_text())
    assert grouper["decisions"] >= 1 and grouper["stages_completed"] == 4
    assert grouper["conformance"]["sampled_packets"] > 200
    assert grouper["conformance"]["dscp_match_share"] >= 0.95
    assert grouper["conformance"]["sender_queue_match_share"] >= 0.8
    # DSCP on the wire: marked packets sat in the scheduled switch queues under Grouper only.
    for name, expect_marked in (("grouper", True), ("fs", False)):
        ports = json.loads((cells[name] / "raw" / "queue_counters.json").read_text())
        marked = sum(queues[str(q)]["bytes"] for queues in ports.values() for q in range(1, 7))
        assert (marked > 1e6) == expect_marked, (name, marked)
    spec = cojob_spec.validate(read_spec(REPO / "experiments/specs/grouper-smoke.yaml"))
    assert_nothing_left(fabric_of(spec), private_state, cells["grouper"], namespaces)
