"""Grouper end to end on the real fabric (root): the CI smoke sweep, fair share vs Grouper."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from emulation_checks import CPU_LOST, assert_nothing_left, cpu_was_taken, netns_inodes

from experiments import summary_fields
from experiments.cojob import spec as cojob_spec
from experiments.platform.spec import fabric_of
from experiments.runner import read_spec

pytestmark = pytest.mark.root
REPO = Path(__file__).resolve().parent.parent


def test_smoke_sweep_grouper_beats_fair_share_and_its_decisions_are_on_the_wire(tmp_path, private_state):
    namespaces = netns_inodes()
    fabric = fabric_of(cojob_spec.validate(read_spec(REPO / "experiments/specs/grouper-smoke.yaml")))
    # A second sweep only when a cell says the box took CPU time away (its timing and
    # losses then judge the box, not the emulation); twice: skipped.
    for attempt in range(2):
        out = tmp_path / f"sweep{attempt}"
        proc = subprocess.run([sys.executable, "-m", "experiments.cli", "sweep", "experiments/sweeps/grouper-smoke.yaml",
                               "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        table = list(csv.DictReader((out / "results.csv").open()))
        assert sorted((row["scheduler"], row["seed"]) for row in table) == [
            (scheduler, seed) for scheduler in ("fs", "grouper") for seed in ("1", "2", "4")]
        cell_of = {(row["scheduler"], row["seed"]): out / "cells" / row["cell"] for row in table}
        summaries = {key: json.loads((cell / "summary.json").read_text()) for key, cell in cell_of.items()}
        assert [summary_fields.undeclared(summary, "cojob", "emulated") for summary in summaries.values()] == [
            []] * len(summaries)
        for row in table:
            assert row["completed"] == "true", row
            # trustworthy, or untrustworthy only because the box took CPU time away
            reasons = summaries[(row["scheduler"], row["seed"])]["fidelity"]["untrustworthy_reasons"]
            assert all(r.startswith(CPU_LOST) for r in reasons), row
        # what no shortage of CPU excuses: every Grouper cell decided and ran its stages, nothing is left
        for (name, _), summary in summaries.items():
            if name == "grouper":
                assert summary["decisions"] >= 1 and summary["stages_completed"] == 4, summary
        for cell in cell_of.values():
            assert_nothing_left(fabric, private_state, cell, namespaces)
        taken = next(filter(None, map(cpu_was_taken, summaries.values())), None)
        if not taken:
            break
    else:
        pytest.skip(f"the emulation cannot be judged on this box now: {taken}")

    def total(scheduler, value):
        return sum(value(s) for (name, _), s in summaries.items() if name == scheduler)

    # Fig. 3's logic: the small model's stages go first, so they finish much sooner
    # (measured 0.72-0.76x fair share's a seed), and the average SCT falls (model:
    # -10.1% over seeds 1, 2, 4; measured -8.9 / +1.0 / -6.9% a seed, -5.1% over the
    # three: measurements/grouper-smoke-2026-11-25; TCP's timeouts add noise of a few
    # percent, hence three seeds and their sum).
    def small(s):
        return s["per_model_avg_sct_s"]["deepspeech2"]

    assert total("grouper", small) < 0.9 * total("fs", small)
    assert total("grouper", lambda s: s["avg_sct_s"]) < total("fs", lambda s: s["avg_sct_s"])
    cells = {name: cell_of[(name, "1")] for name in ("fs", "grouper")}
    grouper = summaries[("grouper", "1")]
    # DSCP judged on the packets the three Grouper cells sampled together: a cell's own
    # sample is 189-970 packets (a box's timing decides how many a window catches)
    sampled = [s["conformance"] for (name, _), s in summaries.items() if name == "grouper"]
    packets = sum(c["sampled_packets"] for c in sampled)
    assert packets > 500
    assert sum(c["dscp_match_share"] * c["sampled_packets"] for c in sampled) / packets >= 0.95
    assert grouper["conformance"]["sender_queue_match_share"] >= 0.8
    # The emulation stays near the iteration-level model of the same run (measured
    # 0.93-1.27x; 1.07-1.76x before the switches' send sockets were sized), and TCP's
    # and the switches' counters were read. Every queue drop is one send its switch saw
    # refused, and a switch loses no packet that no counter shows (0.4-1.2% before a
    # refusal dropped one packet alone, 1-6% before the send sockets were sized).
    for (name, seed), summary in summaries.items():
        assert 0.8 < summary["sct_over_model"] < 1.6, summary["sct_over_model"]
        # on the wire: the kernel's count adds the attempts a sender's own queue refused
        assert summary["tcp"]["segments"] > 10_000 and summary["tcp_retransmitted_share"] < 0.2, \
            summary["tcp"]
        # (a closing connection's last packet or two may still be inside a switch: the
        # counters are read as the jobs stop, without the fabric test's settling pause)
        assert summary["packet_losses"]["switch_internal"] <= 2, summary["packet_losses"]
        assert summary["packet_losses"]["switch_sockets"] == 0, summary["packet_losses"]  # sized: only queues drop
        raw = cell_of[(name, seed)] / "raw"
        refused = sum(c["refused"] for c in json.loads((raw / "switch_sends.json").read_text()).values())
        assert refused == summary["packet_losses"]["switch_queues"], (refused, summary["packet_losses"])
    # DSCP on the wire: marked packets sat in the scheduled switch queues under Grouper only.
    for name, expect_marked in (("grouper", True), ("fs", False)):
        ports = json.loads((cells[name] / "raw" / "queue_counters.json").read_text())
        marked = sum(queues[str(q)]["bytes"] for queues in ports.values() for q in range(1, 7))
        assert (marked > 1e6) == expect_marked, (name, marked)
        # A sender's NIC queues are as deep as a NIC's: at a switch buffer's 150 KB they
        # dropped 6-8% of the packets, each loss a 200 ms TCP timeout in a 0.26 s iteration.
        nics = json.loads((cells[name] / "raw" / "host_queue_counters.json").read_text())
        dropped = sum(queue["dropped"] for queues in nics.values() for queue in queues.values())
        sent = sum(queue["packets"] for queues in nics.values() for queue in queues.values())
        assert sent > 10_000 and dropped < 0.005 * sent, (name, dropped, sent)
