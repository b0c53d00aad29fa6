"""experiments/gnn/scaled.py: a profile of the paper's products setting made from the
headline job's profile (what Figs. 10-11 on the model stand on)."""
from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest

from experiments.gnn import scaled, search, simulated
from hosts.gnn import task_kind


@pytest.fixture(scope="module")
def base():
    return simulated.load_profile(scaled.PROFILE)


@pytest.fixture(scope="module")
def spec():
    return scaled.paper_spec()[0]


def _replies(profile, n):
    out = defaultdict(int)
    for (sampler, iteration, _step), asked in profile.requests.items():
        if iteration == n:
            out[sampler] += sum(a[2] for a in asked)
    return out


def test_the_paper_setting(spec):
    workload = spec["workload"]
    assert (workload["workers"], workload["samplers_per_worker"], workload["ps"]) == (16, 2, 1)
    assert len([t for t in workload["placement"]["tasks"] if t.startswith("store")]) == 8
    rates = set(spec["topology"]["host_mbps_overrides"].values())
    assert rates <= {20, 40, 100}


@pytest.mark.parametrize("batch", [0.5, 1.0, 2.0])
def test_a_big_sampler_moves_what_its_profiled_one_did_times_the_batch(base, spec, batch):
    big = scaled.scaled_profile(base, spec, batch=batch)
    big.check_job(spec)
    before, after = _replies(base, 3), _replies(big, 3)
    for k in range(32):
        assert after[f"sampler{k}"] == pytest.approx(batch * before[f"sampler{k % 4}"], rel=1e-3)
    assert big.bytes["sampler5", "worker2", "minibatch", 3] == round(batch * base.bytes["sampler1", "worker0",
                                                                                         "minibatch", 3])
    assert big.bytes["worker7", "ps0", "gradient", 3] == base.bytes["worker1", "ps0", "gradient", 3]
    assert big.compute_s["worker7"][3] == pytest.approx(batch * base.compute_s["worker1"][3])
    # the placement search reads it as a job of 8 machines and 57 tasks
    problem = search.problem_from_profile(spec, big)
    assert len(problem.machines) == 8 and len(problem.tasks) == 8 + 32 + 16 + 1
    # a big sampler copies its profiled one's evaluation steps, but only sampler0
    # evaluates (the model's k == 0): the search costs no other sampler's evaluation
    assert any(step.startswith("eval-") for sampler, _n, step in big.requests if sampler == "sampler4")
    evaluating = {t.dst if t.phase.startswith("eval-") else t.src for t in problem.transfers
                  if t.phase.startswith("eval-") or t.phase == "evalbatch"}
    assert evaluating == {"sampler0"}


def test_the_batch_scales_the_training_and_the_traffic_the_evaluation_too(base, spec):
    """Fig. 10's batch factor is a per-sampler batch's; the evaluation's batch is the
    job's eval_nodes: the traffic factor (the graph's) scales it, the batch does not."""
    e = base.evaluations[0]
    plain, doubled, heavier = (scaled.scaled_profile(base, spec, batch=batch, traffic=traffic)
                               for batch, traffic in ((1.0, 1.0), (2.0, 1.0), (1.0, 2.0)))

    def evaluation(profile):
        replies = sum(a[2] for (sampler, n, step), asked in profile.requests.items()
                      if sampler == "sampler0" and n == e and step.startswith("eval-") for a in asked)
        return (replies, profile.bytes["sampler0", "worker0", "evalbatch", e],
                sum(profile.eval_rounds_s["sampler0"][e]), profile.eval_s[e])

    def training(profile):
        return (_replies(profile, 3)["sampler0"], profile.bytes["sampler0", "worker0", "minibatch", 3],
                sum(profile.rounds_s["sampler0"][3]), profile.compute_s["worker0"][3])
    assert evaluation(plain)[0] > 0 and evaluation(plain)[1] > 0
    assert evaluation(doubled) == pytest.approx(evaluation(plain), rel=1e-3)
    assert evaluation(heavier) == pytest.approx([2 * x for x in evaluation(plain)], rel=1e-3)
    for profile in (doubled, heavier):
        assert training(profile) == pytest.approx([2 * x for x in training(plain)], rel=1e-3)
    # the evaluation's requests' store compute follows the same factor
    store_s = {name: sum(a[3] for (sampler, n, step), asked in profile.requests.items()
                         if sampler == "sampler0" and n == e and step.startswith("eval-") for a in asked)
               for name, profile in (("plain", plain), ("doubled", doubled), ("heavier", heavier))}
    assert store_s["doubled"] == pytest.approx(store_s["plain"]) and store_s["heavier"] == pytest.approx(
        2 * store_s["plain"])


@pytest.mark.parametrize("target", [1.5, 2.5])
def test_the_pmr_is_stretched_to_the_target_keeping_the_total(base, spec, target):
    plain, stretched = scaled.scaled_profile(base, spec), scaled.scaled_profile(base, spec, target_pmr=target)
    assert scaled.pmr(stretched) == pytest.approx(target, rel=0.01)
    total = lambda p: sum(a[2] for asked in p.requests.values() for a in asked)  # noqa: E731
    assert total(stretched) == pytest.approx(total(plain), rel=0.01)


def test_a_pmr_the_stretch_cannot_reach_is_refused_in_one_line(base, spec):
    with pytest.raises(ValueError, match=r"^pmr 3: the stretch would empty the smallest store -> sampler pair "
                                         r"\(at most 2\.79 here\)$"):
        scaled.scaled_profile(base, spec, target_pmr=3.0)


def test_input_nodes_counts_every_hop_from_the_seed():
    assert scaled.input_nodes((5, 10, 15)) == 1 + 15 + 150 + 750
    assert scaled.input_nodes((12, 12, 12)) == 1 + 12 + 144 + 1728
    assert scaled.PAPERS100M_TRAFFIC == pytest.approx(1885 * 128 / (916 * 100))


def test_the_papers100m_setting_is_a_cluster_that_holds_the_job():
    setting = scaled.SETTINGS["papers100m"]
    spec, drawn = scaled.paper_spec(setting)
    workload = spec["workload"]
    assert (workload["workers"], workload["samplers_per_worker"], workload["ps"]) == (20, 4, 1)
    tasks = workload["placement"]["tasks"]
    assert len([t for t in tasks if t.startswith("store")]) == 16 and len(tasks) == 16 + 80 + 20 + 1
    assert set(spec["topology"]["host_mbps_overrides"].values()) <= {20, 40, 100}
    for resource in ("cpus", "memory_gb", "gpus"):  # DistDGL's placement is within every machine
        used = {h: 0.0 for h in workload["machines"]}
        for task, host in tasks.items():
            used[host] += workload["task_resources"][task_kind(task)][resource]
        assert all(used[h] <= m[resource] for h, m in workload["machines"].items())
    # the draws before it cannot hold the job, so the same seed gives the same cluster
    assert scaled.paper_spec(setting, seed=drawn) == (spec, drawn)


def _ends(times):
    return [{"kind": "iteration_end", "task": "worker0", "iteration": n, "t": t} for n, t in enumerate(times)]


def test_the_steady_state_leaves_out_the_drain():
    events = _ends([30.0, 40.0, 50.0, 60.0, 62.0, 63.0]) + [{"kind": "iteration_end", "task": "worker1",
                                                             "iteration": 0, "t": 1.0}]
    assert scaled.PREFETCH == 2
    assert scaled.steady_iteration_s(events) == pytest.approx(10.0)
    with pytest.raises(ValueError, match=r"^3 iterations: a steady state needs at least 4$"):
        scaled.steady_iteration_s(_ends([30.0, 40.0, 41.0]))


def test_cells_written_are_read_back_for_their_setting_only(tmp_path):
    rows = [{"setting": "papers100m", "figure": "10", "batch_factor": 1.0, "design": label, "iteration_s": 2.0 + k,
             "iterations": 8, "etp_steps": 10, "etp_seed": 1, "search_iterations": 4, "candidates": 3}
            for k, (label, _, _) in enumerate(scaled.POLICIES)]
    paths = scaled.write(tmp_path, rows, scaled.SETTINGS["papers100m"])
    assert [p.name for p in paths] == ["figure-10.csv", "figure-10.png", "figure-11.csv"]
    back = scaled.read(tmp_path, scaled.SETTINGS["papers100m"])
    assert [(r["design"], r["batch_factor"], r["iteration_s"]) for r in back] == \
        [(r["design"], 1.0, r["iteration_s"]) for r in rows]
    assert scaled.read(tmp_path, scaled.SETTINGS["products"]) == []
    products = [{**r, "setting": "products", "iteration_s": 9.0} for r in rows]
    scaled.write(tmp_path, products, scaled.SETTINGS["products"])  # another setting's rows stay
    assert len(scaled.read(tmp_path, scaled.SETTINGS["papers100m"])) == len(rows)
    assert [r["iteration_s"] for r in scaled.read(tmp_path, scaled.SETTINGS["products"])] == [9.0] * len(rows)


def test_a_stopped_run_resumes_without_running_its_done_cells_again(tmp_path, monkeypatch):
    setting = scaled.SETTINGS["products"]
    rows = [{"setting": "products", "figure": "10", "batch_factor": 1.0, "design": label, "iteration_s": 5.0,
             "iterations": 12, "etp_steps": 10, "etp_seed": 1, "search_iterations": 10, "candidates": 2}
            for label, _, _ in scaled.POLICIES]
    scaled.write(tmp_path, rows, setting)

    def no_search(*args, **kwargs):
        raise AssertionError("a done cell was searched again")
    monkeypatch.setattr(scaled.search, "etp_placement", no_search)
    scaled.figures(tmp_path, setting, steps=10, batches=(1.0,), pmrs=())
    assert [(r["design"], r["iteration_s"]) for r in scaled.read(tmp_path, setting)] == \
        [(label, 5.0) for label, _, _ in scaled.POLICIES]
    # a cell kept must be the one these arguments would run: other steps are refused, not mixed in
    with pytest.raises(ValueError, match=r"^etp_steps: .* holds Fig. 10 1 \(ETP seed 1\) with etp_steps 10, "
                                         r"this run asks 2000: "):
        scaled.figures(tmp_path, setting, steps=2000, batches=(1.0,), pmrs=())


def _fake_search(placements):
    """etp_placement's stand-in: seed s finds placement s (the model is not run)."""
    def search_(spec, profile, steps, seed, **kwargs):
        found = SimpleNamespace(candidates=[None] * (seed + 1))
        return SimpleNamespace(result=found, placement=placements[seed])
    return search_


def test_each_etp_seed_is_a_cell_of_its_own_and_the_plot_shows_their_spread(tmp_path, monkeypatch, capsys):
    setting = scaled.SETTINGS["products"]
    searched = []
    monkeypatch.setattr(scaled.search, "etp_placement",
                        lambda *a, **k: searched.append(a[3]) or _fake_search({1: "one", 2: "two", 3: "three"})(*a, **k))
    # a design's iteration: 10 s on DistDGL's placement, on ETP's 20 / 30 / 40 s by seed
    by_placement = {"one": 20.0, "two": 30.0, "three": 40.0}
    monkeypatch.setattr(scaled, "run_cell", lambda spec, profile, placement, scheduler, iterations, progress:
                        by_placement[placement] if isinstance(placement, str) else 10.0)
    scaled.figures(tmp_path, setting, steps=10, seeds=(1, 2), batches=(1.0,), pmrs=())
    assert searched == [1, 2]
    rows = scaled.read(tmp_path, setting)
    dgtp = [(r["etp_seed"], r["iteration_s"], r["candidates"]) for r in rows if r["design"] == "DGTP (ETP + OES)"]
    assert dgtp == [(1, 20.0, "2"), (2, 30.0, "3")]
    assert {r["iteration_s"] for r in rows if r["design"] == "DistDGL + OES"} == {10.0}
    out = capsys.readouterr().out
    assert "Fig. 10 1.0: DGTP (ETP + OES) 25.000 ± 7.071 s per iteration over 2 ETP seeds (20.000-30.000)" in out
    assert "Fig. 10 1.0: DistDGL + OES 10.000 ± 0.000 s per iteration over 2 ETP seeds" in out
    # another seed later: only its cell runs, the done ones are kept
    scaled.figures(tmp_path, setting, steps=10, seeds=(1, 2, 3), batches=(1.0,), pmrs=())
    assert searched == [1, 2, 3]
    assert sorted({r["etp_seed"] for r in scaled.read(tmp_path, setting)}) == [1, 2, 3]
    assert "Fig. 10 1.0 (ETP seed 1): in" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"^seeds: one or more ETP seeds, each once, got 1 1$"):
        scaled.figures(tmp_path, setting, steps=10, seeds=(1, 1), batches=(1.0,), pmrs=())


def test_cells_written_before_the_seed_column_read_as_seed_1(tmp_path):
    (tmp_path / "figure-11.csv").write_text(
        "setting,figure,pmr,design,iteration_s,iterations,etp_steps,search_iterations,candidates,verified\n"
        "products,11,1.5,MRTF,5.0,12,2000,10,4,4\n")
    assert [r["etp_seed"] for r in scaled.read(tmp_path, scaled.SETTINGS["products"])] == [1]


def test_judging_the_best_candidates_needs_the_model(tmp_path):
    with pytest.raises(ValueError, match=r"^verify_best: needs search_iterations >= 1"):
        scaled.figures(tmp_path, scaled.SETTINGS["products"], search_iterations=0, verify_best=3)


def test_the_floors_bound_each_cells_placements_by_their_busiest_nic(tmp_path, capsys):
    setting = scaled.SETTINGS["products"]
    scaled.write(tmp_path, [{"setting": "products", "figure": figure, column: value, "design": label,
                             "iteration_s": 5.0, "iterations": 12, "etp_steps": steps, "etp_seed": 1, "search_iterations": 10,
                             "candidates": 2}
                            for figure, column, value, steps in (("10", "batch_factor", 0.5, 200), ("11", "pmr", 2.0, 150))
                            for label, _, _ in scaled.POLICIES], setting)
    rows = scaled.store.read_csv(scaled.nic_floors(tmp_path, setting))
    assert [(r["figure"], float(r["value"]), int(r["etp_steps"]), r["etp_seed"]) for r in rows] == \
        [("10", 0.5, 200, "1"), ("11", 2.0, 150, "1")]
    for r in rows:
        assert 0 < float(r["candidates_least_nic_s"]) <= float(r["ifs_nic_s"])  # IFS's is a candidate
        assert float(r["distdgl_nic_s"]) > 0 and int(r["candidates"]) >= 1
    # Half the batch moves about half the bytes: the busiest NIC's seconds follow.
    assert float(rows[0]["distdgl_nic_s"]) < 0.75 * float(rows[1]["distdgl_nic_s"])
    assert "busiest NIC per iteration: DistDGL's" in capsys.readouterr().out
    # no cells (of this setting): refused, nothing written
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"^out: .*/empty holds no products cells \(figure-10.csv, figure-11.csv\): "
                                         r"run them first, without --floors$"):
        scaled.nic_floors(empty, setting)
    assert list(empty.iterdir()) == []


def test_the_floors_search_the_cells_own_job(tmp_path, monkeypatch):
    """Cells run with more iterations than the default: the floors rebuild the problem of
    their job (as long as its longest simulation), not of the default one."""
    setting = scaled.SETTINGS["products"]
    scaled.write(tmp_path, [{"setting": "products", "figure": "10", "batch_factor": 1.0, "design": label,
                             "iteration_s": 5.0, "iterations": 16, "etp_steps": 20, "etp_seed": 1, "search_iterations": 24,
                             "candidates": 1} for label, _, _ in scaled.POLICIES], setting)
    seen, real = [], search.problem_from_profile
    monkeypatch.setattr(search, "problem_from_profile",
                        lambda spec, profile: seen.append(spec["workload"]["iterations"]) or real(spec, profile))
    scaled.nic_floors(tmp_path, setting)
    assert seen == [24]


def test_a_directory_holds_one_cluster(tmp_path):
    setting = scaled.SETTINGS["products"]
    spec, drawn = scaled.cluster(tmp_path, setting, 0)  # draws 0-5 leave DistDGL a sampler with no room
    assert drawn == 6 and scaled.cluster(tmp_path, setting, 6)[1] == 6  # the same draw again: fine
    with pytest.raises(ValueError, match=r"^--cluster-seed: .* holds the products cluster drawn with seed 6, "
                                         r"seed 7 draws 9: use another directory$"):
        scaled.cluster(tmp_path, setting, 7)


@pytest.mark.parametrize("args, message", [
    (["--iterations", "3"], "--iterations: must be >= 4, got 3 (a steady state needs 4 iterations)"),
    (["--verify-best", "-1"], "--verify-best: must be >= 0, got -1"),
    (["--seeds", "2", "-1"], "--seeds: must be >= 0, got -1"),
    (["--seeds", "2", "2"], "seeds: one or more ETP seeds, each once, got 2 2"),
    (["--search-iterations", "0", "--verify-best", "2"], "verify_best: needs search_iterations >= 1"),
    (["--floors"], "out: TMP/out holds no products cells"),
    (["OUT", "TMP/file/out"], "out: TMP/file/out: TMP/file is a file, not a directory")])
def test_bad_flags_are_one_line_errors_naming_them(tmp_path, capsys, args, message):
    (tmp_path / "file").write_text("")
    args = [a.replace("TMP", str(tmp_path)) for a in args]
    out = args[1] if args[0] == "OUT" else str(tmp_path / "out")
    with pytest.raises(SystemExit) as exit_:
        scaled.main([out, "--batches", "--pmrs", *(args[2:] if args[0] == "OUT" else args)])
    message = message.replace("TMP", str(tmp_path))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and message in err, err
