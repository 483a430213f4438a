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


@pytest.mark.parametrize("level", [0.95, 0.90])
def test_bootstrap_interval_has_the_level_asked_for(level):
    """On 400 normal values the percentile bootstrap of the mean is the normal interval
    mean +- z sd / sqrt(n), z = norm.ppf(1 - alpha / 2): 1.96 at the tables' 95 %. A 90 % interval
    (z = 1.645, 0.84 of the width) where 95 % is asked is outside the tolerance, and vice versa."""
    from scipy.stats import norm

    x = np.random.default_rng(1).normal(0.3, 1.0, size=400)
    alpha = 1 - level
    half = norm.ppf(1 - alpha / 2) * x.std(ddof=1) / np.sqrt(len(x))
    kwargs = {} if level == 0.95 else {"alpha": alpha}  # 95 %: the default every table relies on
    for name, (m, lo, hi) in [("bootstrap_ci", bootstrap_ci(x, **kwargs)),
                              ("bootstrap_mean_of_means", bootstrap_mean_of_means([x], **kwargs))]:
        assert m == pytest.approx(x.mean())
        ratio = (hi - lo) / (2 * half)
        assert abs(ratio - 1) < 0.06, f"{name}: width {hi - lo:.4f} is {ratio:.3f} of the normal {level:.0%} width"
        assert abs((lo + hi) / 2 - m) < 0.1 * half, f"{name}: interval ({lo:.4f}, {hi:.4f}) not centred on {m:.4f}"


def test_mean_of_means_weights_benchmarks_equally():
    m, lo, hi = bootstrap_mean_of_means([np.ones(3), np.zeros(100)])
    assert m == pytest.approx(0.5) and lo == pytest.approx(0.5) and hi == pytest.approx(0.5)


def test_clustered_proportion_is_wilson_when_problems_are_alike():
    from nudgerl.algorithms import clustered_proportion

    # 24 of 1,280 as one pool: the Wilson score interval (z 1.96), computed by hand
    r = clustered_proportion([(24, 1280)])
    p, n, z = 24 / 1280, 1280, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    assert r["value"] == p and r["deff"] == 1.0
    assert r["low"] == pytest.approx(centre - half) and r["high"] == pytest.approx(centre + half)
    assert r["low"] < 0.02 < r["high"]


def test_clustered_proportion_widens_when_problems_differ():
    from nudgerl.algorithms import clustered_proportion

    even = clustered_proportion([(1, 16)] * 80)  # every problem 1/16
    lumpy = clustered_proportion([(16, 16)] * 5 + [(0, 16)] * 75)  # same pooled 1/16, all in five problems
    assert even["value"] == lumpy["value"] == 1 / 16
    # all-or-nothing problems: the 1,280 samples carry as much as the 80 problems
    assert lumpy["n_eff"] == pytest.approx(79.0)
    assert lumpy["high"] - lumpy["low"] > 2 * (even["high"] - even["low"])
    assert clustered_proportion([(0, 0), (3, 4)])["problems"] == 1  # a problem without samples says nothing
    with pytest.raises(ValueError, match="0 <= k <= n"):
        clustered_proportion([(5, 4)])


def test_margin_in_se_matches_the_wilson_interval():
    from nudgerl.algorithms import clustered_proportion, margin_in_se

    r = clustered_proportion([(24, 1280)])
    # the interval's ends are exactly the bounds 1.96 standard errors (at the bound) away
    assert margin_in_se(r["value"], r["high"], r["n_eff"]) == pytest.approx(-1.96)
    assert margin_in_se(r["value"], r["low"], r["n_eff"]) == pytest.approx(1.96)
    assert margin_in_se(0.9, 0.8, 1600) == pytest.approx(0.1 / (0.16 / 1600) ** 0.5)


@pytest.mark.parametrize("all_right", [False, True])
def test_clustered_proportion_interval_holds_its_value_at_the_ends(all_right):
    from nudgerl.algorithms import clustered_proportion

    r = clustered_proportion([(n if all_right else 0, n) for n in (37, 37, 37, 5, 3, 1792)])
    assert r["low"] <= r["value"] <= r["high"] and r["high"] - r["low"] > 0
    assert (r["high"] if all_right else r["low"]) == r["value"] == (1.0 if all_right else 0.0)
