"""experiments/gnn/scaled.py: a profile of the paper's products setting made from the
headline job's profile (what Figs. 10-11 on the model stand on)."""
from __future__ import annotations

from collections import defaultdict

import pytest

from experiments.gnn import scaled, search, simulated


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
