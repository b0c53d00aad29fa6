"""experiments.stats: the one mean and the percentile readings metrics were computed with."""
import random
import statistics

import numpy as np
import pytest

from experiments.stats import METHODS, is_number, mean, percentile

FOUR = [4.0, 1.0, 3.0, 2.0]


def test_mean_of_values_and_of_nothing():
    assert mean([1.0, 2.0, 6.0]) == 3.0
    assert mean(x for x in (2, 3)) == 2.5  # any iterable, read once
    assert mean([]) is None


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
