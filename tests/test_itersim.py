"""The iteration-level simulator of the cojob workload, on cases checkable by hand."""
import json

import pytest

from experiments.cojob import itersim
from experiments.errors import SpecError
from experiments.workloads import cojob as cojob_mod

SMOKE = "experiments/specs/grouper-smoke.yaml"
# 8 Mbit/s = 1e6 bytes/s; at bytes_scale 1 compute seconds scale by 1000/8 = 125.
SCALING = cojob_mod.Scaling(link_mbps=8, bytes_scale=1.0)
RATE = 1e6


def _workload(*cojobs) -> cojob_mod.Workload:
    """cojobs: (cojob id, size MB, testbed compute s, stage iterations, [(workers, ps) per job])."""
    plans, placements = [], {}
    for cojob_id, size_mb, compute_s, stages, jobs in cojobs:
        profile = cojob_mod.ModelProfile(f"m{cojob_id}", size_mb, compute_s)
        job_plans = tuple(cojob_mod.JobPlan(cojob_id, i, len(stages)) for i in range(len(jobs)))
        plans.append(cojob_mod.CojobPlan(cojob_id, profile, tuple(stages), job_plans, cojob_mod.Arrival(at_s=0)))
        for job, (workers, ps) in zip(job_plans, jobs):
            placements[job.key] = cojob_mod.JobPlacement(tuple(workers), tuple(ps))
    return cojob_mod.Workload(tuple(plans), placements, "test")


def test_allocate_shares_a_port_fairly_within_a_queue_and_strictly_across_queues():
    assert itersim.allocate([(("a", 7),), (("a", 7),)], 10.0) == [5.0, 5.0]
    assert itersim.allocate([(("a", 1),), (("a", 2),)], 10.0) == [10.0, 0.0]


def test_allocate_is_max_min_fair_across_ports_and_gives_spare_capacity_away():
    # x crosses a and b; y only a, z only b: each port is split evenly.
    assert itersim.allocate([(("a", 7), ("b", 7)), (("a", 7),), (("b", 7),)], 10.0) == [5.0, 5.0, 5.0]
    # x is starved on a by a higher queue, so z has b to itself.
    assert itersim.allocate([(("a", 2), ("b", 2)), (("a", 1),), (("b", 2),)], 10.0) == [0.0, 10.0, 10.0]


def test_an_ended_flows_share_goes_to_the_flows_left():
    net = itersim.Network(capacity=1000.0)
    net.add(1, (("a", 7),), 1000)
    net.add(2, (("a", 7),), 2000)
    assert net.time_to_next_end() == pytest.approx(2.0)
    assert net.advance(2.0) == [1]
    # flow 2 has 1000 bytes left and now the whole port: 1 s more, not 2.
    assert net.time_to_next_end() == pytest.approx(1.0)


def test_one_job_alone_iterates_at_the_link_rate_with_its_compute():
    # 1 worker, 1 PS: a push of 2e6 bytes (2 s), the pull (2 s), compute 0.008 x 125 = 1 s.
    workload = _workload((0, 2.0, 0.008, (3,), [(["h1"], ["h2"])]))
    result = itersim.simulate(workload, SCALING, "fs")
    assert result.sct_s[(0, 0)] == pytest.approx(3 * (2 + 2 + 1))
    assert result.flow_s == [pytest.approx(2.0)] * 6  # 3 pushes, 3 pulls
    assert result.to_dict()["flow_max_s"] == pytest.approx(2.0)
    # 2 workers x 2 PSs on four hosts: 1e6 bytes per partition, each worker sends two
    # pushes through its port (2 s), each PS two pulls (2 s), then 1 s of compute.
    workload = _workload((0, 2.0, 0.008, (3,), [(["h1", "h2"], ["h3", "h4"])]))
    assert itersim.simulate(workload, SCALING, "fs").sct_s[(0, 0)] == pytest.approx(3 * 5)
    # without compute the same job takes 4 s an iteration; in bulk its bytes move at once
    no_compute = itersim.simulate(workload, SCALING, "fs", variant=itersim.VARIANTS["iterations"])
    assert no_compute.sct_s[(0, 0)] == pytest.approx(3 * 4)
    bulk = itersim.simulate(workload, SCALING, "fs", variant=itersim.VARIANTS["bulk"])
    assert bulk.sct_s[(0, 0)] == pytest.approx(3 * 2)  # push and pull cross different ports


def test_a_same_host_pair_takes_no_time():
    workload = _workload((0, 2.0, 0.0, (2,), [(["h1"], ["h1"])]))
    assert itersim.simulate(workload, SCALING, "fs").sct_s[(0, 0)] == 0


def test_priority_to_the_smaller_stage_halves_its_time_and_costs_the_larger_nothing():
    # A (1e6 bytes) and B (3e6 bytes) between the same two hosts. Fair share: A ends at
    # 2 s (half the link), B at 4 s. Grouper ranks A first: A at 1 s, B still at 4 s.
    workload = _workload((0, 1.0, 0.0, (1,), [(["h1"], ["h2"])]), (1, 3.0, 0.0, (1,), [(["h1"], ["h2"])]))
    bulk = itersim.VARIANTS["bulk"]
    fs = itersim.simulate(workload, SCALING, "fs", variant=bulk)
    grouper = itersim.simulate(workload, SCALING, "grouper", variant=bulk)
    assert (fs.sct_s[(0, 0)], fs.sct_s[(1, 0)]) == (pytest.approx(2.0), pytest.approx(4.0))
    assert (grouper.sct_s[(0, 0)], grouper.sct_s[(1, 0)]) == (pytest.approx(1.0), pytest.approx(4.0))
    assert grouper.decisions >= 1 and fs.decisions == 0


def test_every_scheduler_and_variant_runs_the_smoke_spec_to_the_end_deterministically():
    rows = itersim.run_spec(SMOKE, [1], schedulers=itersim.cojob_spec.SCHEDULERS)
    assert len(rows) == len(itersim.cojob_spec.SCHEDULERS) * len(itersim.VARIANTS)
    for row in rows:  # 2 cojobs x 2 stages, every stage completed, none instantly
        assert [(s["cojob"], s["stage"]) for s in row["stage_sct"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert all(s["sct_s"] > 0 for s in row["stage_sct"])
    assert itersim.run_spec(SMOKE, [1], schedulers=["grouper"]) == [r for r in rows if r["scheduler"] == "grouper"]


def test_the_smoke_workload_is_one_where_grouper_must_beat_fair_share():
    """The emulated CI smoke test asserts Grouper < FS; the model says by how much."""
    by_scheduler = {r["scheduler"]: r["avg_sct_s"]
                    for r in itersim.run_spec(SMOKE, [1], ["fs", "grouper"], ["iterations+compute"])}
    assert by_scheduler["grouper"] < 0.95 * by_scheduler["fs"]


def test_an_unknown_scheduler_is_named_in_the_error():
    with pytest.raises(SpecError, match="scheduler"):
        itersim.simulate(_workload((0, 1.0, 0.0, (1,), [(["h1"], ["h2"])])), SCALING, "sptf")


def test_cli_prints_the_table_and_writes_every_run(tmp_path, capsys):
    out = tmp_path / "sim.json"
    itersim.main([SMOKE, "--seeds", "1", "--schedulers", "fs", "grouper", "--variants", "bulk", "--out", str(out)])
    assert "| bulk | grouper |" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [(r["variant"], r["scheduler"]) for r in data["runs"]] == [("bulk", "fs"), ("bulk", "grouper")]
    assert data["summary"][0]["sct_vs_fs"] == 0
