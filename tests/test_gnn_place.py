"""experiments/gnn/search.py and ``trainbed place``: the placement problem built from the
profile of a real run (measurements/gnn-model-2026-11-24/gnn-profile, kept in the
checkout like the other measured runs the tests read), the search end to end, its
determinism, the ``etp`` placement kind resolved at validation, and the one-line
refusals."""
from __future__ import annotations

import copy
import csv
import dataclasses
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from controller.schedulers.placement.dag import path_length
from controller.schedulers.placement.problem import capacity_penalty, check_placement
from experiments import store
from experiments.cli import main
from experiments.errors import SpecError
from experiments.gnn import search, simulated
from experiments.gnn import spec as gnn_spec
from experiments.gnn.simulated import Profile, ProfileError
from experiments.validation import errors_only
from hosts.gnn import task_kind
from tests.test_gnn_simulated import Costs, profile_of

REPO = Path(__file__).resolve().parents[1]
PROFILE_DIR = REPO / "measurements/gnn-model-2026-11-24/gnn-profile"
PROFILE = PROFILE_DIR / "profile.json"
RAW = yaml.safe_load((REPO / "experiments/specs/gnn-hetero-products-ps.yaml").read_text())


def raw_spec(placement=None, iterations: int = 12) -> dict:
    """The headline job (the profile's), fewer iterations to predict, ``placement``'s kind."""
    raw = copy.deepcopy(RAW)
    raw["workload"]["iterations"] = iterations
    if placement is not None:
        raw["workload"]["placement"] = placement
    return raw


@pytest.fixture(scope="module")
def profile() -> Profile:
    return simulated.load_profile(PROFILE)


@pytest.fixture(scope="module")
def spec() -> dict:
    return gnn_spec.validate(raw_spec())


def test_the_problem_from_the_real_profile(spec, profile):
    raw = json.loads(PROFILE.read_text())
    problem = search.problem_from_profile(spec, profile)
    # machines: the spec's capacities, NIC rates from the topology (tbh3, tbh4 at a fifth)
    assert list(problem.machines) == ["tbh1", "tbh2", "tbh3", "tbh4"]
    wire = 1 + (simulated.TCP_IP_HEADERS + simulated.ETHERNET_HEADER) / (9000 - simulated.TCP_IP_HEADERS)
    for host, mbps in (("tbh1", 100), ("tbh2", 100), ("tbh3", 20), ("tbh4", 20)):
        machine = problem.machines[host]
        assert machine.nic_in == machine.nic_out == pytest.approx(mbps * 1e6 / 8 / wire)
        assert dict(machine.capacity) == {"cpu": 8.0, "mem": 32.0, "gpu": 0.0} and machine.speed == 1.0
    # tasks, kinds, demands; stores home on their hosts
    assert {t: task.kind for t, task in problem.tasks.items()} == {
        **{f"store{m}": "store" for m in range(4)}, **{f"sampler{i}": "sampler" for i in range(4)},
        "worker0": "worker", "worker1": "worker", "ps0": "ps"}
    assert [problem.tasks[f"store{m}"].home for m in range(4)] == ["tbh1", "tbh2", "tbh3", "tbh4"]
    assert problem.tasks["worker0"].demand == {"cpu": 1.0, "mem": 3.0, "gpu": 0.0}
    assert problem.tasks["sampler2"].demand == {"cpu": 1.0, "mem": 2.0, "gpu": 0.0}
    # iterations: the model's, max(the job's 12, ETP's window 20); the job evaluates every
    # 5th and its last (4, 9, 11, 14, 19), replaying the profile's evaluations (every 10th) in turn
    count = raw["iterations"]
    assert spec["workload"]["eval_every"] == 5 and search.WINDOW == 20
    assert all(len(task.exec_s) == 20 for task in problem.tasks.values())
    assert problem.tasks["ps0"].exec_s == pytest.approx([raw["compute_s"]["ps0"][n] for n in range(20)])
    eval_at = [n for n, s in enumerate(raw["eval_s"]["worker0"][:count]) if s is not None]
    assert eval_at == [9, 19, 29, 39, 49]
    replayed = dict(zip([4, 9, 11, 14, 19], eval_at))
    for n in range(20):
        evaluation = raw["eval_s"]["worker0"][replayed[n]] if n in replayed else 0.0
        assert problem.tasks["worker0"].exec_s[n] == pytest.approx(raw["compute_s"]["worker0"][n] + evaluation)
        assert problem.tasks["worker1"].exec_s[n] == pytest.approx(raw["compute_s"]["worker1"][n])
    assert problem.tasks["sampler0"].exec_s[4] == pytest.approx(sum(raw["sampler_rounds_s"]["sampler0"][4])
                                                               + sum(raw["sampler_eval_rounds_s"]["sampler0"][9]))
    assert problem.tasks["sampler0"].exec_s[19] == pytest.approx(sum(raw["sampler_rounds_s"]["sampler0"][19])
                                                                + sum(raw["sampler_eval_rounds_s"]["sampler0"][49]))
    assert problem.tasks["sampler1"].exec_s[4] == pytest.approx(sum(raw["sampler_rounds_s"]["sampler1"][4]))
    assert problem.tasks["sampler0"].exec_s[3] == pytest.approx(sum(raw["sampler_rounds_s"]["sampler0"][3]))
    # the job's model replays the same iterations and evaluations over ETP's window
    model = simulated.GnnSimulation(spec, profile, search.WINDOW)
    assert [p for p, _ in model.replayed] == list(range(20)) and model.evaluation == replayed

    def store_s(store, n, evaluated=None):  # the most any sampler's requests to it took
        seen = {}
        for r in raw["requests"]:
            if r["store"] == store and ((r["iteration"] == n and not r["step"].startswith("eval-"))
                                        or (r["iteration"] == evaluated and r["step"].startswith("eval-")
                                            and r["sampler"] == "sampler0")):
                seen[r["sampler"]] = seen.get(r["sampler"], 0.0) + r["compute_s"]
        return max(seen.values())
    assert problem.tasks["store1"].exec_s[3] == pytest.approx(store_s("store1", 3))
    assert problem.tasks["store1"].exec_s[4] == pytest.approx(store_s("store1", 4, evaluated=9))
    assert store_s("store1", 4, evaluated=9) > store_s("store1", 4)
    # transfers: bytes per iteration from the flows; the PS's parameters feed the next iteration
    minibatch = [f["bytes"] for f in sorted(raw["flows"], key=lambda f: f["iteration"])
                 if (f["src_task"], f["dst_task"], f["phase"]) == ("sampler2", "worker1", "minibatch")]
    pair = problem.pairs["sampler2", "worker1"]
    assert [pair.bytes_at(n) for n in range(20)] == pytest.approx(minibatch[:20])  # no evalbatch from sampler2

    def sent(src, dst, n, evaluation):
        return sum(f["bytes"] for f in raw["flows"] if (f["src_task"], f["dst_task"], f["iteration"]) == (src, dst, n)
                   and (f["phase"] == "evalbatch" or f["phase"].startswith("eval-")) == evaluation)
    assert problem.pairs["sampler0", "worker0"].bytes_at(4) == sent("sampler0", "worker0", 4, False) + sent(
        "sampler0", "worker0", 9, True) > sent("sampler0", "worker0", 4, False)
    assert problem.pairs["sampler0", "worker0"].bytes_at(3) == sent("sampler0", "worker0", 3, False)
    # every round, the evaluation's too (the profile's evaluation at 19 replayed at 9)
    assert problem.pairs["store3", "sampler0"].bytes_at(9) == sent("store3", "sampler0", 9, False) + sent(
        "store3", "sampler0", 19, True) > 0
    assert problem.pairs["ps0", "worker0"].lag == 1 and problem.pairs["worker1", "ps0"].lag == 0
    assert ("sampler0", "store3") not in problem.pairs  # requests are left out
    assert ("sampler0", "worker1") not in problem.pairs
    # the profiled (distdgl) placement is a placement of the problem within capacity
    profiled = raw["spec"]["workload"]["placement"]["tasks"]
    check_placement(problem, profiled)
    assert capacity_penalty(problem, profiled) == 0


def test_a_ring_job_gets_its_ring_tasks():
    """A synthetic ring profile (the test helpers' job, two workers on two machines)."""
    raw = {"name": "ring", "topology": {"kind": "star", "hosts": 2, "host_mbps": 100}, "scheduler": {"name": "oes"},
           "workload": {"kind": "gnn", "graph": {"shape": "ogbn-products", "nodes": 1000}, "fanouts": [5],
                        "workers": 2, "samplers_per_worker": 1, "sync": "allreduce", "iterations": 4,
                        "eval_every": 4, "profile": True}}
    spec = gnn_spec.validate(raw)
    problem = search.problem_from_profile(spec, Profile.parse(profile_of(spec, Costs(ring=40_000)), "ring"))
    assert problem.rings == {"worker0": ["worker0/ring0", "worker0/ring1"],
                             "worker1": ["worker1/ring0", "worker1/ring1"]}
    assert problem.pairs["worker0/ring0", "worker1/ring1"].bytes_at(2) == 40_000
    assert not any(task.kind == "ps" for task in problem.tasks.values())
    found = search.etp_placement(spec, Profile.parse(profile_of(spec, Costs()), "ring"), 50, 1)
    assert set(found.placement) == {"store0", "store1", "sampler0", "sampler1", "worker0", "worker1"}


def _within_capacity(spec: dict, tasks: dict) -> None:
    workload = spec["workload"]
    used = {host: {r: 0.0 for r in ("cpus", "memory_gb", "gpus")} for host in workload["machines"]}
    for task, host in tasks.items():
        for r, amount in workload["task_resources"][task_kind(task)].items():
            used[host][r] += amount
    for host, amounts in used.items():
        for r, amount in amounts.items():
            assert amount <= workload["machines"][host][r] + 1e-9, (host, r)


def test_trainbed_place_writes_the_json(tmp_path, capsys, spec, monkeypatch):
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec()))
    out = tmp_path / "place.json"
    assert main(["place", str(spec_file), "--profile", str(PROFILE), "--steps", "150", "--seed", "2",
                 "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert set(written) == {"placement", "predicted_iteration_s", "search_s", "steps", "makespan_s", "candidates",
                            "critical_path"}
    # why: Eq. 27's critical path of the pick, per iteration, and what it is made of
    path = written["critical_path"]
    problem = search.problem_from_profile(spec, simulated.load_profile(PROFILE))
    assert path["s_per_iteration"] == pytest.approx(
        path_length(problem, problem.with_rings(written["placement"]), search.WINDOW) / search.WINDOW)
    assert sum(path["made_of"].values()) == pytest.approx(path["s_per_iteration"])
    assert list(path["made_of"].values()) == sorted(path["made_of"].values(), reverse=True)
    assert written["steps"] == 150 and written["search_s"] > 0 and written["predicted_iteration_s"] > 0
    assert written["makespan_s"] > 0 and written["candidates"] >= 1
    assert list(written["placement"]) == list(spec["workload"]["placement"]["tasks"])  # every task, in order
    _within_capacity(spec, written["placement"])
    assert written["predicted_iteration_s"] == simulated.predict(
        search.with_placement(spec, written["placement"]), simulated.load_profile(PROFILE))
    shown = capsys.readouterr()
    assert "worker0: " in shown.out and "predicted iteration: " in shown.out and "search: " in shown.out
    assert "Eq. 27's critical path: " in shown.out
    # progress, one line per judged candidate
    assert re.match(r"ETP candidate 1 of \d+: makespan [\d.]+ s over 20 iterations \(search at \d+ s\)\n",
                    shown.err)
    assert main(["place", str(spec_file), "--profile", str(PROFILE), "--steps", "150", "--seed", "2",
                 "--verify-best", "2", "--out", str(out)]) == 0
    assert len(capsys.readouterr().err.splitlines()) == 2 and json.loads(out.read_text())["candidates"] >= 1
    # the default steps (made short: the search's own time is in make bench)
    monkeypatch.setattr(search, "DEFAULT_STEPS", 40)
    assert main(["place", str(spec_file), "--profile", str(PROFILE), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["steps"] == 40
    monkeypatch.chdir(PROFILE_DIR)  # a relative --profile is the caller's: from where it runs
    assert main(["place", str(spec_file), "--profile", "profile.json", "--out", str(out)]) == 0
    # the spec's own placement is not read: a searched one is not searched first
    spec_file.write_text(yaml.safe_dump(raw_spec({"kind": "etp", "profile": str(PROFILE), "steps": 5000})))
    monkeypatch.setattr(search, "searched", lambda *args, **kwargs: pytest.fail("the spec's own search ran"))
    assert main(["place", str(spec_file), "--profile", "profile.json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["steps"] == 40


def test_the_search_is_deterministic_per_seed(spec, profile):
    runs = [search.etp_placement(spec, profile, 150, seed) for seed in (5, 5, 6)]
    assert runs[0].placement == runs[1].placement and runs[0].cost == runs[1].cost
    assert runs[0].makespan == runs[1].makespan
    _within_capacity(spec, runs[2].placement)


def test_the_search_picks_the_candidate_the_model_finishes_first(spec, profile):
    found = search.etp_placement(spec, profile, 300, 3)
    candidates = found.result.candidates
    assert len(candidates) >= 2 and candidates[0].step == -1  # IFS's placement first
    simulate = search.makespan(spec, profile)
    for candidate in candidates[:3]:  # the candidates' makespans are the model's over ETP's window
        trial = search.with_placement(spec, {t: candidate.placement[t] for t in found.placement})
        assert candidate.makespan == simulate(candidate.placement) == simulated.GnnSimulation(
            trial, profile, search.WINDOW).run().end_s
    assert found.makespan == min(c.makespan for c in candidates)
    assert found.placement == {t: next(c for c in candidates if c.makespan == found.makespan).placement[t]
                               for t in found.placement}
    by_cost = search.etp_placement(spec, profile, 300, 3, verify=False)
    assert by_cost.makespan is None and by_cost.cost == min(c.cost for c in by_cost.result.candidates)
    # the same chain either way: only the pick differs
    assert [s.accepted for s in by_cost.result.trace] == [s.accepted for s in found.result.trace]


def _judges(client) -> list[int]:
    """The pids of ``experiments.gnn.judging`` processes that ``client``'s workers started."""
    found = []
    for worker in client.run(os.getpid).values():
        for children in Path(f"/proc/{worker}/task").glob("*/children"):
            for pid in children.read_text().split():
                try:
                    if b"experiments.gnn.judging" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        found.append(int(pid))
                except OSError:  # it ended while we looked
                    pass
    return found


def _fails_first_sleeps_after(first: str):
    """A makespan that fails on the placement of ``first``'s ps0 host and sleeps on any other."""
    def makespan(placement):
        if placement["ps0"] == first:
            raise ValueError(f"no model for {placement['ps0']}")
        time.sleep(600)
    return makespan


def test_candidates_judged_on_a_dask_cluster_give_the_search_judged_here(spec, profile, tmp_path, capsys,
                                                                        monkeypatch):
    """``--local N`` / ``--cluster``: the candidates judged in chunks, each in a process of
    its own on a worker; the same candidates, makespans, trace and pick as judged here.
    A chunk whose model fails fails the search at once, in one line, and the chunks
    still judging are stopped: no process is left."""
    from experiments.cluster import local
    from experiments.gnn import judging
    here = search.etp_placement(spec, profile, 300, 3)
    assert len(here.result.candidates) >= 3  # more candidates than slots: several chunks
    with local(2, {"simulated"}) as executor:
        there = search.etp_placement(spec, profile, 300, 3, mapper=judging.on_cluster(executor.client))
        assert there == dataclasses.replace(here, search_s=there.search_s)
        best = search.etp_placement(spec, profile, 300, 3, verify_best=2, mapper=judging.on_cluster(executor.client))
        assert best == dataclasses.replace(search.etp_placement(spec, profile, 300, 3, verify_best=2),
                                           search_s=best.search_s)

        placements = [c.placement for c in here.result.candidates]
        # the first chunk fails at once; every other chunk sleeps until it is stopped
        broken = _fails_first_sleeps_after(placements[0]["ps0"])
        others = [p for p in placements if p["ps0"] != placements[0]["ps0"]]
        assert others  # some chunk sleeps: the stop below is the mapper's doing
        began = time.monotonic()
        with pytest.raises(RuntimeError, match=r"^judging \d+ ETP candidates: ValueError: no model for \w+$"):
            list(judging.on_cluster(executor.client)(broken, [placements[0], *others]))
        assert time.monotonic() - began < 120  # not after the sleepers' 600 s
        deadline = time.monotonic() + 20  # the sleepers' tasks cancelled: their workers SIGTERM them within a second
        while _judges(executor.client) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _judges(executor.client)
    # and from the command line (the spec file's placement is not read), through the cluster
    original, used = judging.on_cluster, []

    def counted(client):
        used.append(client)
        return original(client)
    monkeypatch.setattr(judging, "on_cluster", counted)
    spec_file, out = tmp_path / "job.yaml", tmp_path / "place.json"
    spec_file.write_text(yaml.safe_dump(raw_spec()))
    assert main(["place", str(spec_file), "--profile", str(PROFILE), "--steps", "300", "--seed", "3",
                 "--local", "2", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["placement"] == here.placement
    assert len(used) == 1
    err = capsys.readouterr().err
    assert f"ETP candidate {len(here.result.candidates)} of {len(here.result.candidates)}: " in err


def test_verify_best_judges_ifs_and_the_least_cost_candidates_after_the_chain(spec, profile):
    lines = []
    found = search.etp_placement(spec, profile, 300, 3, verify_best=3, progress=lines.append)
    everyone = search.etp_placement(spec, profile, 300, 3)
    assert [s.accepted for s in found.result.trace] == [s.accepted for s in everyone.result.trace]
    by_makespan = {tuple(sorted(c.placement.items())): c.makespan for c in everyone.result.candidates}
    first, *rest = everyone.result.candidates
    judged = [first, *sorted(rest, key=lambda c: c.cost)[:2]]
    best = min(judged, key=lambda c: c.makespan)
    assert found.makespan == best.makespan and found.cost == best.cost
    assert found.placement == {t: best.placement[t] for t in found.placement}
    assert by_makespan[tuple(sorted(best.placement.items()))] == found.makespan
    assert len(lines) == 3 and all(line.startswith("ETP candidate ") for line in lines)
    for bad, message in ((-1, r"^verify_best must be an integer >= 0, got -1$"),
                         (True, r"^verify_best must be an integer >= 0, got True$")):
        with pytest.raises(ValueError, match=message):
            search.etp_placement(spec, profile, 10, 3, verify_best=bad)
    with pytest.raises(ValueError, match=r"^verify_best: needs the candidates judged by the model"):
        search.etp_placement(spec, profile, 10, 3, verify=False, verify_best=2)


def test_least_makespan_judges_ifs_and_the_cheapest_and_breaks_ties_by_order():
    from controller.schedulers.placement.etp import Candidate
    found = [Candidate({"t": "ifs"}, 9.0, 9.0, -1), Candidate({"t": "a"}, 5.0, 5.0, 3),
             Candidate({"t": "b"}, 7.0, 7.0, 8), Candidate({"t": "c"}, 4.0, 4.0, 12)]
    spans = {"ifs": 10.0, "a": 30.0, "b": 1.0, "c": 10.0}
    judged = []

    def makespan(placement):
        judged.append(placement["t"])
        return spans[placement["t"]]
    best, span, judged_spans = search.least_makespan(found, makespan, 3)  # b (cost 7): not among the 2 cheapest
    assert (best.placement, span) == ({"t": "ifs"}, 10.0)  # level with c: IFS's, judged first
    assert judged_spans == {-1: 10.0, 12: 10.0, 3: 30.0}  # by the step that found each
    assert judged == ["ifs", "c", "a"]
    assert search.least_makespan(found, makespan, 4)[0].placement == {"t": "b"}
    with pytest.raises(ValueError, match=r"^verify_best must be >= 1, got 0$"):
        search.least_makespan(found, makespan, 0)


def test_the_trace_has_a_row_per_step_and_ifs_first(tmp_path, spec, profile):
    found = search.etp_placement(spec, profile, 100, 1)
    path = tmp_path / "trace.csv"
    search.write_trace(path, found)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 101 and rows[0]["step"] == "-1" and float(rows[0]["makespan"]) > 0
    assert [int(r["step"]) for r in rows[1:]] == list(range(100))
    verified = [r for r in rows[1:] if r["candidate"] == "True"]
    assert all(float(r["makespan"]) > 0 for r in verified)
    assert all(r["makespan"] == "" for r in rows[1:] if r["candidate"] == "False")


def test_the_trace_has_a_makespan_only_where_the_model_judged(tmp_path, spec, profile):
    path = tmp_path / "trace.csv"
    search.write_trace(path, search.etp_placement(spec, profile, 100, 1, verify=False))
    assert all(r["makespan"] == "" for r in csv.DictReader(path.open()))  # judged by cost: none
    bounded = search.etp_placement(spec, profile, 100, 1, verify_best=2)
    search.write_trace(path, bounded)
    filled = {int(r["step"]): float(r["makespan"]) for r in csv.DictReader(path.open()) if r["makespan"]}
    assert filled == dict(bounded.judged) and -1 in filled and len(filled) == min(2, len(bounded.result.candidates))
    assert bounded.makespan == min(filled.values())


def test_the_run_writes_the_trace_of_the_search_that_resolved_its_spec(spec, profile):
    placement = {"kind": "etp", "profile": str(PROFILE), "steps": 120, "seed": 7, "verify_best": 2}
    resolved = gnn_spec.validate(raw_spec(placement))
    known = len(search._found)
    found = search.searched(resolved, resolved["workload"]["placement"])  # what GnnRun.start calls
    assert len(search._found) == known  # remembered: not searched again
    assert found.placement == resolved["workload"]["placement"]["tasks"]


def test_an_ifs_placement_resolves_at_validation(spec, profile):
    resolved = gnn_spec.validate(raw_spec({"kind": "ifs", "profile": str(PROFILE)}))["workload"]["placement"]
    assert resolved["kind"] == "ifs" and set(resolved) == {"kind", "profile", "tasks"}
    assert resolved["tasks"] == search.ifs_placement(spec, profile)
    assert resolved["tasks"] == search.etp_placement(spec, profile, 0, 0).placement  # ETP's start
    _within_capacity(spec, resolved["tasks"])


def test_an_etp_placement_resolves_at_validation(spec, profile, monkeypatch):
    placement = {"kind": "etp", "profile": str(PROFILE.relative_to(REPO)), "steps": 150, "seed": 4}
    resolved = gnn_spec.validate(raw_spec(placement))["workload"]["placement"]
    assert resolved["kind"] == "etp" and resolved["steps"] == 150 and resolved["seed"] == 4
    assert resolved["profile"] == str(PROFILE)
    assert list(resolved["tasks"]) == list(spec["workload"]["placement"]["tasks"])
    found = search.etp_placement(spec, profile, 150, 4)
    assert resolved["tasks"] == found.placement
    assert (resolved["cost"], resolved["makespan_s"], resolved["candidates"]) == (
        found.cost, found.makespan, len(found.result.candidates))
    assert [resolved["tasks"][f"store{m}"] for m in range(4)] == ["tbh1", "tbh2", "tbh3", "tbh4"]
    _within_capacity(spec, resolved["tasks"])
    # tight machines: the search must spread the job, and still keep every capacity
    tight = raw_spec(placement)
    tight["workload"]["machines"] = {h: {"cpus": 3} for h in ("tbh1", "tbh2", "tbh3", "tbh4")}
    resolved_tight = gnn_spec.validate(tight)
    assert len(set(resolved_tight["workload"]["placement"]["tasks"].values())) >= 3
    _within_capacity(resolved_tight, resolved_tight["workload"]["placement"]["tasks"])
    # pick: cost judges the candidates by Eq. 27 (no simulation): the same chain, its own pick
    by_cost = gnn_spec.validate(raw_spec({**placement, "pick": "cost"}))["workload"]["placement"]
    unverified = search.etp_placement(spec, profile, 150, 4, verify=False)
    assert by_cost["pick"] == "cost" and by_cost["makespan_s"] is None and by_cost["cost"] == unverified.cost
    assert by_cost["tasks"] == unverified.placement and resolved["pick"] == "makespan"
    assert resolved["verify_best"] == 0
    bounded = gnn_spec.validate(raw_spec({**placement, "verify_best": 2}))["workload"]["placement"]
    assert bounded["verify_best"] == 2
    assert bounded["tasks"] == search.etp_placement(spec, profile, 150, 4, verify_best=2).placement
    # the default steps and seed (made short: the search's own time is in make bench)
    monkeypatch.setattr(search, "DEFAULT_STEPS", 40)
    short = gnn_spec.validate(raw_spec({"kind": "etp", "profile": str(PROFILE)}))["workload"]["placement"]
    assert (short["steps"], short["seed"]) == (40, 0)


def test_a_resolved_placement_is_run_again_as_it_is_not_searched_again(spec, monkeypatch):
    """A run's spec.yaml holds its placement resolved: validated again, its tasks are the
    placement (checked as an explicit one), the search's record kept, nothing searched."""
    placement = {"kind": "etp", "profile": str(PROFILE), "steps": 30, "seed": 4}
    resolved = gnn_spec.validate(raw_spec(placement))
    section = resolved["workload"]["placement"]
    # the run's start writes the trace of the search that resolved its spec here; of one
    # resolved in another process (its spec.yaml), none
    assert search.remembered(resolved, section).placement == section["tasks"]
    monkeypatch.setattr(search, "_found", {})
    assert search.remembered(resolved, section) is None
    monkeypatch.setattr(search, "searched", lambda *args, **kwargs: pytest.fail("searched again"))
    monkeypatch.setattr(search, "etp_placement", lambda *args, **kwargs: pytest.fail("searched again"))
    assert gnn_spec.validate(resolved) == resolved
    assert gnn_spec.validate(spec) == spec  # distdgl's, resolved
    moved = copy.deepcopy(resolved)
    tasks = moved["workload"]["placement"]["tasks"]
    tasks["worker0"] = "tbh9"
    with pytest.raises(SpecError, match=r"^workload\.placement\.tasks\.worker0: "):
        gnn_spec.validate(moved)
    tasks["worker0"], tasks["store0"] = resolved["workload"]["placement"]["tasks"]["worker0"], "tbh2"
    with pytest.raises(SpecError, match=r"^workload\.placement\.tasks\.store0: stores are fixed \(store0 on tbh1\)"):
        gnn_spec.validate(moved)
    extra = copy.deepcopy(spec)
    extra["workload"]["placement"]["steps"] = 3  # a search's field on distdgl's placement
    with pytest.raises(SpecError, match=r"^workload\.placement\.steps: unknown field"):
        gnn_spec.validate(extra)
    for change, message in ((lambda p: p.pop("profile"), r"^workload\.placement\.profile: is required"),
                            (lambda p: p.update(steps="many"), r"^workload\.placement\.steps: "),
                            (lambda p: p.update(pick="best"), r"^workload\.placement\.pick: must be one of"),
                            (lambda p: p.update(makespan_s=-1), r"^workload\.placement\.makespan_s: ")):
        bad = copy.deepcopy(resolved)
        change(bad["workload"]["placement"])
        with pytest.raises(SpecError, match=message):
            gnn_spec.validate(bad)


def test_an_etp_placement_checked_for_errors_only_is_ifs_and_searches_nothing(spec, profile, monkeypatch):
    """A sweep checks its cells with ``errors_only``: ETP's steps, which start from
    IFS's placement, are left to the run; an infeasible job is still refused."""
    placement = {"kind": "etp", "profile": str(PROFILE), "steps": 150, "seed": 4}
    monkeypatch.setattr(search, "searched", lambda *args, **kwargs: pytest.fail("searched under errors_only"))
    with errors_only():
        resolved = gnn_spec.validate(raw_spec(placement))["workload"]["placement"]
        assert resolved == {"kind": "etp", "profile": str(PROFILE), "tasks": search.ifs_placement(spec, profile)}
        tight = raw_spec(placement)
        tight["workload"]["machines"] = {h: {"cpus": 0.5} for h in ("tbh1", "tbh2", "tbh3", "tbh4")}
        with pytest.raises(SpecError, match=r"^workload\.placement: "):
            gnn_spec.validate(tight)
    with pytest.raises(pytest.fail.Exception, match="searched under errors_only"):
        gnn_spec.validate(raw_spec(placement))  # outside it, the search runs


def _untrustworthy(tmp_path) -> Path:
    raw = json.loads(PROFILE.read_text())
    raw.update(trustworthy=False, untrustworthy_reasons=["CPU idle share 0.03 < 0.05"])
    path = tmp_path / "bad.json"
    store.write_json(path, raw)
    return path


def test_one_line_refusals(tmp_path, capsys, spec):
    bad = _untrustworthy(tmp_path)
    with pytest.raises(ProfileError, match=r"bad\.json: its run was untrustworthy \(CPU idle share 0\.03 < 0\.05\); "
                                           r"profile again$"):
        search.problem_from_profile(spec, bad)
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec()))
    for args, message in (
            (["--profile", str(bad)], r"--profile: .*bad\.json: its run was untrustworthy"),
            (["--profile", str(tmp_path / "none.json")], r"--profile: .*none\.json: cannot read a profile"),
            (["--profile", str(PROFILE), "--steps", "-1"], r"--steps: must be an integer in 0\.\.1,000,000, got '-1'"),
            (["--profile", str(PROFILE), "--steps", "many"], r"--steps: must be an integer in 0\.\.1,000,000, got 'many'"),
            (["--profile", str(PROFILE), "--steps", "1000001"], r"--steps: must be an integer in 0\.\.1,000,000"),
            (["--profile", str(PROFILE), "--seed", "x"], r"--seed: must be an integer >= 0, got 'x'"),
            (["--profile", str(PROFILE), "--seed", "-1"], r"--seed: must be an integer >= 0, got '-1'"),
            (["--profile", str(PROFILE), "--verify-best", "-1"], r"--verify-best: must be an integer >= 0")):
        assert main(["place", str(spec_file), *args]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("trainbed: error: "), err
        assert re.search(message, err), err
    for placement, message in (
            ({"kind": "etp", "profile": str(bad)}, r"^workload\.placement\.profile: .*its run was untrustworthy"),
            ({"kind": "etp", "profile": "none.json"}, r"^workload\.placement\.profile: no such file"),
            ({"kind": "etp", "profile": str(PROFILE), "steps": -1}, r"^workload\.placement\.steps: "),
            ({"kind": "etp", "profile": str(PROFILE), "step": 3}, r"^workload\.placement"),
            ({"kind": "ifs", "profile": str(PROFILE), "steps": 3}, r"^workload\.placement"),
            ({"kind": "etp", "profile": str(PROFILE), "pick": "best"}, r"^workload\.placement\.pick: "),
            ({"kind": "etp", "profile": str(PROFILE), "verify_best": -2}, r"^workload\.placement\.verify_best: "),
            ({"kind": "etp", "profile": str(PROFILE), "pick": "cost", "verify_best": 2},
             r"^workload\.placement\.verify_best: needs pick: makespan"),
            ({"kind": "mcmc", "profile": str(PROFILE)}, r"^workload\.placement\.kind: ")):
        with pytest.raises(SpecError, match=message) as err:
            gnn_spec.validate(raw_spec(placement))
        assert "\n" not in str(err.value)
    other = raw_spec({"kind": "etp", "profile": str(PROFILE)})
    other["workload"]["batch_size"] = 32  # another job than the profiled one
    with pytest.raises(SpecError, match=r"^workload\.placement\.profile: .*workload\.batch_size 64, not 32$"):
        gnn_spec.validate(other)
    cramped = raw_spec({"kind": "etp", "profile": str(PROFILE)})
    cramped["workload"]["machines"] = {h: {"cpus": 2} for h in ("tbh1", "tbh2", "tbh3", "tbh4")}
    with pytest.raises(SpecError, match=r"^workload\.placement: ") as err:  # 11 tasks, 8 CPUs
        gnn_spec.validate(cramped)
    assert "\n" not in str(err.value)


def test_a_compute_factor_is_the_machines_speed_and_the_profiled_times_are_at_speed_1(profile):
    raw = raw_spec()
    raw["workload"]["compute_factor"] = {"tbh2": 4}
    slow = gnn_spec.validate(raw)
    plain_problem = search.problem_from_profile(gnn_spec.validate(raw_spec()), profile)
    problem = search.problem_from_profile(slow, profile)
    assert problem.machines["tbh2"].speed == 0.25 and problem.machines["tbh1"].speed == 1.0
    assert problem.tasks["worker0"].exec_s == plain_problem.tasks["worker0"].exec_s  # profiled at factor 1
    # a profile taken with factor 4 on tbh2: what ran there is divided back to speed 1
    stretched = copy.deepcopy(profile.spec)
    stretched["workload"]["compute_factor"] = {"tbh1": 1.0, "tbh2": 4.0, "tbh3": 1.0, "tbh4": 1.0}
    on_tbh2 = [t for t, h in profile.spec["workload"]["placement"]["tasks"].items() if h == "tbh2"]
    scaled = dataclasses.replace(profile, spec=stretched, compute_s={
        t: [4 * x for x in v] if t in on_tbh2 else v for t, v in profile.compute_s.items()})
    worker = next(t for t in on_tbh2 if t.startswith("worker"))
    assert search.problem_from_profile(slow, scaled).tasks[worker].exec_s == pytest.approx(
        plain_problem.tasks[worker].exec_s, rel=1e-12)


OWN = "tests.gnn_placements"  # the researchers' placements the tests name


def test_a_placement_of_your_own_is_run_on_the_jobs_problem_at_validation(spec, profile):
    """The function gets ETP's problem (from the profile) and its answer is the placement,
    recorded so that the resolved spec runs it again without the function."""
    placement = {"kind": f"{OWN}:ifs_again", "profile": str(PROFILE.relative_to(REPO))}
    resolved = gnn_spec.validate(raw_spec(placement))
    record = resolved["workload"]["placement"]
    assert record == {"kind": f"{OWN}:ifs_again", "profile": str(PROFILE), "tasks": search.ifs_placement(spec, profile)}
    gone = copy.deepcopy(resolved)
    gone["workload"]["placement"]["kind"] = "no_such_module_here:gone"
    assert gnn_spec.validate(gone)["workload"]["placement"]["tasks"] == record["tasks"]
    result = simulated.GnnSimulation(resolved, profile, iterations=3).run()
    assert sum(e["kind"] == "iteration_end" for e in result.events) >= 3


@pytest.mark.parametrize("function, field, says", [
    ("forgets_a_worker", r"workload\.placement\.kind", "forgets_a_worker placed it: placement: task worker0 is "
                                                         "not placed"),
    ("moves_a_store", r"workload\.placement\.kind", "moves_a_store placed it: placement.store0: a store stays on "
                                                      "its home "),
    ("fails", r"workload\.placement\.kind", "fails raised KeyError: 'no machine'"),
    ("as_a_list", r"workload\.placement\.kind", "as_a_list must return {task id: host}, got a list"),
    ("absent", r"workload\.placement\.kind", "absent: cannot import it (AttributeError"),
])
def test_a_placement_of_your_own_that_fails_or_answers_wrong_is_one_line(function, field, says):
    with pytest.raises(SpecError, match=f"^{field}: ") as err:
        gnn_spec.validate(raw_spec({"kind": f"{OWN}:{function}", "profile": str(PROFILE)}))
    assert says in str(err.value) and "\n" not in str(err.value), err.value


def test_a_placement_of_your_own_beyond_a_machines_capacity_is_refused_naming_the_task():
    raw = raw_spec({"kind": f"{OWN}:crowds_the_first", "profile": str(PROFILE)})
    raw["workload"]["task_resources"] = {"worker": {"cpus": 4}}  # two workers fill a machine of 8
    with pytest.raises(SpecError, match=r"^workload\.placement\.\w+: tests.gnn_placements:crowds_the_first placed "
                                        r"it: no room on \w+ for "):
        gnn_spec.validate(raw)


def test_a_placement_of_your_own_is_found_beside_its_spec(tmp_path, monkeypatch):
    (tmp_path / "place_beside.py").write_text(
        "from controller.schedulers.placement.ifs import ifs\n\ndef mine(problem):\n    return ifs(problem)\n")
    raw = raw_spec({"kind": "place_beside:mine", "profile": str(PROFILE)})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(sys, "path", list(sys.path))  # what the read adds goes with the test
    from experiments.kinds import read_spec
    assert gnn_spec.validate(read_spec(tmp_path / "spec.yaml"))["workload"]["placement"]["kind"] == "place_beside:mine"


def test_an_own_rate_policy_that_fails_in_the_placement_search_is_one_line():
    """ETP's candidates are judged by the job's model under the spec's scheduler."""
    raw = raw_spec({"kind": "etp", "profile": str(PROFILE), "steps": 5, "verify_best": 1})
    raw["scheduler"] = {"name": "tests.test_gnn_simulated:divides_by_zero"}
    with pytest.raises(SpecError, match=r"^scheduler\.name: scheduler tests.test_gnn_simulated:divides_by_zero "
                                        r"raised ZeroDivisionError: division by zero$"):
        gnn_spec.validate(raw)


def test_a_placement_of_your_own_in_a_sweeps_grid_is_found_beside_the_sweep_file(tmp_path, monkeypatch):
    """As a sweep's own scheduler names: its module kept with the sweep, wherever the command runs."""
    from experiments import sweep as sweep_mod
    base = raw_spec({"kind": "ifs", "profile": str(PROFILE)}) | {"simulation": {"profile": str(PROFILE)}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "grid_place.py").write_text(
        "from controller.schedulers.placement.ifs import ifs\n\ndef mine(problem):\n    return ifs(problem)\n")
    (tmp_path / "kept" / "sweep.yaml").write_text(yaml.safe_dump(
        {"name": "own", "spec": "../spec.yaml", "backend": "simulated",
         "grid": {"workload.placement.kind": ["ifs", "grid_place:mine"]}}))
    monkeypatch.setattr(sys, "path", list(sys.path))  # what the read adds goes with the test
    monkeypatch.chdir(tmp_path)
    sweep = sweep_mod.load(tmp_path / "kept" / "sweep.yaml")
    cell = next(c for c in sweep.cells if c.overrides["workload.placement.kind"] == "grid_place:mine")
    assert sweep_mod.check_cell(cell)["workload"]["placement"]["kind"] == "grid_place:mine"
