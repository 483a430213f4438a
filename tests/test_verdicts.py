"""The verdict rule over replicates: each test against hand-computed or reference values, the
minimum, parity, and the A/A pair's error rate."""

import itertools

import numpy as np
import pytest

from nudgerl.verdicts import (PARITY, SUPERIORITY, VerdictRule, aa_spread, claim_verdict, comparison_sides,
                              detectable_effect, detectable_rate, exact_interval, found_homogeneity_p, found_power,
                              inside_aa, min_replicates_for, paired_found_p, sign_flip_p, smallest_one_sided_p)

RULE = VerdictRule(alpha=0.05, min_replicates=6, parity_margin=0.0165)


def _enumerated_p(d, alternative):
    """Every sign pattern, counted by hand: the exact sign-flip p a test must reproduce."""
    d = np.asarray(d, dtype=float)
    observed = d.mean()
    means = np.array([np.mean(np.array(s) * d) for s in itertools.product([-1, 1], repeat=d.size)])
    if alternative == "greater":
        return np.mean(means >= observed - 1e-12)
    return np.mean(means <= observed + 1e-12)


@pytest.mark.parametrize("d", [[0.1, 0.2, 0.3, 0.4, 0.5], [0.3, -0.1, 0.25, 0.4, -0.05, 0.6],
                               [0.66, 0.66, -0.66, 0.0, 0.66, 0.1, -0.2, 0.05]])
@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_sign_flip_p_is_the_exact_enumeration(d, alternative):
    assert sign_flip_p(d, alternative) == pytest.approx(_enumerated_p(d, alternative))


def test_sign_flip_reference_values():
    # five replicates all one way: 1 of 32 patterns is as extreme one-sided, 2 of 32 two-sided
    assert sign_flip_p([1, 2, 3, 4, 5], "greater") == pytest.approx(1 / 32)
    assert sign_flip_p([1, 2, 3, 4, 5], "two-sided") == pytest.approx(2 / 32)
    assert smallest_one_sided_p(5) == pytest.approx(0.03125) and smallest_one_sided_p(6) == pytest.approx(0.015625)
    assert min_replicates_for(0.05) == 6 and min_replicates_for(0.01) == 8
    # vectorised: one p per row
    rows = sign_flip_p(np.array([[1, 2, 3, 4, 5], [-1, -2, -3, -4, -5]]), "greater")
    assert rows[0] == pytest.approx(1 / 32) and rows[1] == pytest.approx(1.0)


def test_one_replicate_is_descriptive_and_five_can_never_carry_a_verdict():
    assert claim_verdict([comparison_sides([0.6])], 1, RULE) == "descriptive (n = 1)"
    # five replicates all far apart in the claimed direction: still no verdict by the rule
    sides = comparison_sides([0.6] * 5)
    assert sides[0] == pytest.approx(1 / 32) and claim_verdict([sides], 5, RULE) == "descriptive (n = 5)"
    assert claim_verdict([comparison_sides([0.6] * 6)], 6, RULE) == "supported"
    assert claim_verdict([comparison_sides([-0.6] * 6)], 6, RULE) == "contradicted"
    assert claim_verdict([comparison_sides([0.6, -0.6] * 3)], 6, RULE) == "inconclusive"


def test_zero_of_three_against_three_of_three_is_not_contradicted():
    # NudgeRL found the strategy on none of 3 replicates, its comparison on all 3 (pass@1 ~24 % vs ~90 %)
    d = np.array([0.24, 0.23, 0.25]) - np.array([0.90, 0.88, 0.91])
    assert claim_verdict([comparison_sides(d)], 3, RULE) == "descriptive (n = 3)"
    # Fisher's exact p of 0 of 3 against 3 of 3 is 0.1; the paired McNemar's 0.25: neither below 0.05
    assert paired_found_p([False] * 3, [True] * 3) == pytest.approx(0.25)
    from nudgerl.algorithms import fisher_exact

    assert fisher_exact(0, 3, 3, 3) == pytest.approx(0.1)


def test_a_claim_of_several_comparisons():
    up, flat, down = [0.3] * 6, [0.3, -0.3] * 3, [-0.3] * 6
    assert claim_verdict([comparison_sides(up), comparison_sides(up)], 6, RULE) == "supported"
    assert claim_verdict([comparison_sides(up), comparison_sides(flat)], 6, RULE) == "inconclusive"
    # one comparison against at alpha / 2 / k: at 7 replicates p = 1/128 < 0.025 / 2 ...
    assert claim_verdict([comparison_sides(up + [0.3]), comparison_sides(down + [-0.3])], 7, RULE) == "contradicted"
    # ... at 6 not (1/64 = 0.0156): one of two comparisons needs more replicates to contradict
    assert claim_verdict([comparison_sides(up), comparison_sides(down)], 6, RULE) == "inconclusive"
    with pytest.raises(ValueError):
        claim_verdict([], 6, RULE)


def test_parity_is_non_inferiority_within_the_margin():
    # a - b a little below 0 on every replicate, but within the margin: as good as
    d = np.array([-0.01, -0.005, -0.012, -0.002, -0.008, -0.004])
    assert claim_verdict([comparison_sides(d, SUPERIORITY)], 6, RULE) == "contradicted"  # significantly worse ...
    assert claim_verdict([comparison_sides(d, PARITY, RULE.parity_margin)], 6, RULE) == "supported"  # ... not by more
    # worse by more than the margin on every replicate: contradicted as parity too
    assert claim_verdict([comparison_sides(d - 0.05, PARITY, RULE.parity_margin)], 6, RULE) == "contradicted"
    # the margin is what moves: p for of parity is superiority's p of d + margin
    assert comparison_sides(d, PARITY, 0.0165)[0] == pytest.approx(sign_flip_p(d + 0.0165, "greater"))
    with pytest.raises(ValueError, match="superiority"):
        comparison_sides(d, "equivalence")


def test_the_minimum_must_be_able_to_reach_alpha():
    with pytest.raises(ValueError, match="min_replicates.*smallest minimum that can reach it is 6"):
        VerdictRule(alpha=0.05, min_replicates=5)
    assert VerdictRule.from_section({"alpha": 0.01, "min_replicates": 8, "aa": {"method": "grpo8"}}).min_replicates == 8
    with pytest.raises(ValueError, match="parity_margin"):
        VerdictRule(parity_margin=-0.1)


@pytest.mark.parametrize("n", [6, 12])
def test_an_aa_pair_gets_a_verdict_at_most_alpha_of_the_time(n):
    """Two identical arms on the organism's bimodal outcome (a replicate finds the strategy, ~90 %,
    or not, ~24 %): over 200 simulated replicate sets at alpha 0.05 the rule calls them supported or
    contradicted about 5 % of the time at most (binomial slack: 5 % + 2.3 SE of 200 draws)."""
    rng = np.random.default_rng(20261205)

    def arm(size):
        found = rng.random(size) < 0.6
        return np.where(found, 0.90, 0.24) + rng.normal(0, 0.03, size)

    a, b = arm((200, n)), arm((200, n))
    p_for = sign_flip_p(a - b, "greater")
    p_against = sign_flip_p(a - b, "less")
    verdicts = [claim_verdict([(pf, pa)], n, RULE) for pf, pa in zip(p_for, p_against)]
    decided = np.mean([v in ("supported", "contradicted") for v in verdicts])
    assert decided <= 0.05 + 2.3 * np.sqrt(0.05 * 0.95 / 200)


def test_found_tests_against_reference_values():
    # exact McNemar: 5 replicates found by one arm only, none by the other only: 2 x (1/2)^5
    assert paired_found_p([1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0]) == pytest.approx(0.0625)
    assert paired_found_p([1, 0, 1], [1, 0, 1]) == 1.0
    with pytest.raises(ValueError, match="same replicates"):
        paired_found_p([1, 0], [1])
    # Boschloo never exceeds Fisher's p (it is the more powerful exact test); all alike: 1
    from nudgerl.algorithms import fisher_exact

    for k1, k2 in ((0, 3), (1, 5), (2, 6), (1, 4)):
        assert found_homogeneity_p(k1, 6, k2, 6) <= fisher_exact(k1, 6, k2, 6) + 1e-9
    assert found_homogeneity_p(0, 6, 0, 6) == 1.0 and found_homogeneity_p(6, 6, 6, 6) == 1.0
    # Clopper-Pearson 1 of 4: [0.0063, 0.8059]; 0 of 5: [0, 0.5218]
    assert exact_interval(1, 4) == pytest.approx((0.006309, 0.805880), abs=1e-5)
    assert exact_interval(0, 5) == pytest.approx((0.0, 0.521825), abs=1e-5)


def test_aa_spread_and_inside():
    d_all = [0.1, -0.2, 0.05, 0.3, -0.1, 0.0]
    aa = aa_spread(d_all, d_all[:4])
    sd = np.std(d_all, ddof=1)
    assert aa["aa_mean"] == pytest.approx(np.mean(d_all[:4])) and aa["aa_sd"] == pytest.approx(sd)
    assert aa["aa_spread"] == pytest.approx(abs(np.mean(d_all[:4])) + 2 * sd / 2)
    assert inside_aa(0.1, aa) is True and inside_aa(0.5, aa) is False and inside_aa(0.5, None) is None
    with pytest.raises(ValueError, match="A/A spread"):
        aa_spread([0.1], [0.1])


def test_power_of_the_rule():
    # the exact test's power tracks the paired t-test's textbook figure, (t_.975 + t_.8) / sqrt(n)
    from scipy import stats

    n = 8
    textbook = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) / np.sqrt(n)
    assert detectable_effect(n, RULE) == pytest.approx(textbook, abs=0.12)
    assert detectable_effect(5, RULE) is None  # no verdict at 5
    # 6 against 6 replicates: a rate of 0 is told from 100 % always, 50 % from nothing with 80 % power
    assert found_power(6, 0.0, 6, 1.0, 0.05) == pytest.approx(1.0)
    assert detectable_rate(6, 0.5, 0.05) is None
    # the power is the exact sum over both arms' binomial outcomes: 0 of 6 against 6 of 6 alone rejects
    # at 0.5 vs 1.0 ... with probability (1/2)^6 under (0.5, 1.0), plus the other rejecting tables
    assert found_power(6, 0.5, 6, 1.0, 0.05) >= 0.5 ** 6


@pytest.mark.slow
def test_the_methods_page_power_table_is_what_the_configs_give(tmp_path):
    """docs/methods.md's generated power table matches the configurations (nudgerl power-table
    --doc --check); a planted change to one number fails the check, naming the page."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from conftest import REPO

    nudgerl = Path(sys.executable).parent / "nudgerl"
    ok = subprocess.run([nudgerl, "power-table", "--doc", "docs/methods.md", "--check"], cwd=REPO,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    page = tmp_path / "methods.md"
    shutil.copy(REPO / "docs" / "methods.md", page)
    page.write_text(page.read_text().replace("| 12 | 0.89 |", "| 12 | 0.79 |"))
    configs = [str(REPO / "config" / f) for f in ("config.yaml", "common.yaml", "study.yaml")]
    bad = subprocess.run([nudgerl, "power-table", "--doc", str(page), "--check", "--configs", *configs],
                         cwd=REPO, capture_output=True, text=True)
    assert bad.returncode != 0 and "methods.md's generated block differs" in bad.stderr


def test_the_config_names_a_bad_rule_or_aa_pair():
    from nudgerl.config import check_verdicts

    config = {"seeds": [0, 1, 2], "grpo": {"group_sizes": [2, 8]}, "report": {"verdicts": {"aa": {"seed_offset": 7}}}}
    assert check_verdicts(config) == []
    config["report"]["verdicts"] = {"min_replicates": 4, "aa": {"method": "grpo16"}}
    problems = check_verdicts(config)
    assert any("'report.verdicts.min_replicates'" in p and "is 6" in p for p in problems)
    assert any("'report.verdicts.aa.method': 'grpo16' is not a GRPO run of the matrix (grpo2, grpo8)" in p
               for p in problems)
    assert check_verdicts({"seeds": [0], "grpo": {"group_sizes": [8]}, "report": {"verdicts": {"aa": {}}}}) == [
        "config key 'report.verdicts.aa': an A/A spread needs at least 2 replicates ('seeds')"]
    assert check_verdicts({"seeds": [0], "grpo": {"group_sizes": [8]}, "report": {"verdicts": {"aa": None}}}) == []
