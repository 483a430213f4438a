"""pass@k and the bootstrap: against brute force and known values."""

import itertools

import numpy as np
import pytest

from nudgerl.algorithms import bootstrap_ci, bootstrap_mean_of_means, mean_pass_at_k, pass_at_k


@pytest.mark.parametrize("n,c,k", [(5, 2, 1), (5, 2, 2), (6, 1, 3), (8, 0, 4), (8, 8, 1), (7, 3, 7)])
def test_pass_at_k_equals_subset_enumeration(n, c, k):
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute)


def test_pass_at_1_is_fraction_correct():
    assert pass_at_k(16, 4, 1) == pytest.approx(0.25)
    assert mean_pass_at_k([(4, 1), (4, 3)], 1) == pytest.approx(0.5)


def test_pass_at_k_rejects_bad_counts():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_bootstrap_interval_brackets_mean_and_shrinks_with_data():
    rng = np.random.default_rng(0)
    small = rng.random(20)
    big = rng.random(2000)
    m, lo, hi = bootstrap_ci(small)
    assert lo <= m <= hi
    _, lo2, hi2 = bootstrap_ci(big)
    assert (hi2 - lo2) < (hi - lo)


def test_bootstrap_constant_data_has_zero_width():
    m, lo, hi = bootstrap_ci(np.full((10, 3), 0.4))
    assert m == pytest.approx(0.4) and lo == pytest.approx(0.4) and hi == pytest.approx(0.4)


def test_mean_of_means_weights_benchmarks_equally():
    m, lo, hi = bootstrap_mean_of_means([np.ones(3), np.zeros(100)])
    assert m == pytest.approx(0.5) and lo == pytest.approx(0.5) and hi == pytest.approx(0.5)
