"""experiments.stats: the one mean, mean ± sd, paired ratio, CDF and the percentile readings metrics were computed with."""
import random
import statistics

import numpy as np
import pytest

from experiments.stats import METHODS, cdf, is_number, mean, mean_sd, paired_mean_ratio, percentile

FOUR = [4.0, 1.0, 3.0, 2.0]


def test_mean_of_values_and_of_nothing():
    assert mean([1.0, 2.0, 6.0]) == 3.0
    assert mean(x for x in (2, 3)) == 2.5  # any iterable, read once
    assert mean([]) is None


def test_mean_by_numpy_is_np_mean():
    rng = random.Random(3)
    values = [rng.expovariate(1.0) for _ in range(100)]
    assert mean(values, numpy=True) == float(np.mean(values)) and mean([], numpy=True) is None


def test_cdf():
    assert cdf([3.0, 1.0, 2.0]) == [(1.0, 1 / 3), (2.0, 2 / 3), (3.0, 1.0)]
    assert cdf([]) == []


def test_every_method_of_no_values_is_none_and_of_one_is_it():
    for method in METHODS:
        assert percentile([], 90, method=method) is None
        assert percentile(iter(()), 90, method=method) is None
        assert percentile([7.5], 99, method=method) == 7.5


def test_linear_is_between_the_closest_ranks():
    assert percentile(FOUR, 90) == pytest.approx(3.7)  # rank 2.7: 3 + 0.7 * (4 - 3)
    assert percentile(FOUR, 50) == 2.5
    assert percentile(FOUR, 0) == 1.0 and percentile(FOUR, 100) == 4.0


def test_the_ranked_readings_are_values_of_the_list():
    assert percentile(FOUR, 90, method="lower") == 3.0  # rank 2.7 down
    assert percentile(FOUR, 90, method="higher") == 4.0
    assert percentile(FOUR, 50, method="higher") == 3.0  # the upper median
    assert percentile(FOUR, 90, method="nearest") == 4.0
    assert percentile(FOUR, 50, method="nearest") == 3.0  # rank 1.5: ties to the even rank
    assert percentile([1.0, 2.0, 3.0], 25, method="nearest") == 1.0  # rank 0.5: to 0


def test_exclusive_is_statistics_quantiles_and_numpy_is_np_percentile():
    assert percentile(list(range(1, 101)), 99, method="exclusive") == pytest.approx(99.99)  # rank 101 * 0.99
    assert percentile([1.0, 2.0], 99, method="exclusive") == pytest.approx(2.97)  # rank 2.97: past the last
    rng = random.Random(7)
    for n in (2, 3, 10, 99, 100, 257):
        values = [rng.expovariate(1.0) for _ in range(n)]
        assert [percentile(values, q, method="exclusive") for q in range(1, 100)] == statistics.quantiles(values,
                                                                                                          n=100)
        for q in (50, 90, 99):
            assert percentile(values, q, method="numpy") == float(np.percentile(np.array(values), q))
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)


def test_an_unknown_method_is_refused_even_for_no_values():
    with pytest.raises(ValueError, match="^percentile method must be one of linear, numpy, nearest, lower, higher, "
                                         "exclusive, got 'median'$"):
        percentile([], 50, method="median")


def test_a_number_is_an_int_or_float_never_a_bool():
    assert is_number(3) and is_number(0.5) and is_number(float("nan"))
    assert not is_number(True) and not is_number("3") and not is_number(None)


def test_mean_sd_is_the_sample_sd_undefined_below_two_values():
    assert mean_sd([]) == (None, None) and mean_sd([], numpy=True) == (None, None)
    assert mean_sd([2.5]) == (2.5, None) and mean_sd(iter([2.5]), numpy=True) == (2.5, None)
    assert mean_sd([1, 2, 3, 4]) == (2.5, statistics.stdev([1, 2, 3, 4]))  # sqrt(5/3), n - 1
    rng = random.Random(3)
    for n in (2, 3, 7, 50):
        values = [rng.lognormvariate(0, 1) for _ in range(n)]
        exact, numpy = mean_sd(values), mean_sd(values, numpy=True)
        assert exact == (statistics.fmean(values), statistics.stdev(values))
        assert numpy == (float(np.mean(values)), float(np.std(values, ddof=1)))
        assert numpy == pytest.approx(exact, rel=1e-12)  # the readings differ in the last bits at most
        assert mean_sd(reversed(values)) == exact  # exactly rounded sums: no order


def test_paired_mean_ratio_is_a_ratio_of_means_over_the_common_seeds():
    a, b = {1: 2.0, 2: 4.0, 3: 100.0}, {2: 3.0, 1: 1.0, 4: 7.0}
    assert paired_mean_ratio(a, b) == (1.5, 2)  # (2 + 4) / 2 over (1 + 3) / 2; seeds 3 and 4 unpaired
    assert paired_mean_ratio(a, b, exact=True) == (1.5, 2)
    # a ratio of means (2 / 1.5), not the mean of the ratios (1.75)
    assert paired_mean_ratio({1: 1.0, 2: 3.0}, {1: 2.0, 2: 1.0})[0] == pytest.approx(4 / 3)
    assert paired_mean_ratio(a, {4: 1.0}) == (None, 0) and paired_mean_ratio({}, {}, exact=True) == (None, 0)
    assert paired_mean_ratio(a, {1: 0.0, 2: 0.0}) == (None, 2)  # a zero denominator: no ratio


def test_paired_mean_ratio_reads_as_each_figure_kept_its_numbers():
    rng = random.Random(5)
    num = {seed: rng.expovariate(1.0) for seed in range(9, 0, -1)}
    den = {seed: rng.expovariate(1.0) for seed in range(1, 10)}
    assert paired_mean_ratio(num, den)[0] == mean(num.values()) / mean(den[s] for s in num)  # the numerator's order
    assert paired_mean_ratio(num, den, exact=True)[0] == statistics.fmean(num.values()) / statistics.fmean(den.values())
