"""The study's tables: exploration success on two seed sets, and RL works in the common regime."""

import pandas as pd
import pytest

from nudgerl.config import check_study
from nudgerl.reporting.study import check_seed_sets, render_agreement, render_rl_works, rl_works, seed_set_agreement


def _runs(found: dict[str, list[bool]]) -> pd.DataFrame:
    return pd.DataFrame([{"method": m, "seed": s, "run_found": f} for m, fs in found.items() for s, f in enumerate(fs)])


def test_agreement_counts_each_set_and_tests_them_as_one_binomial():
    runs = _runs({"grpo8": [False] * 4 + [False] * 4,
                  "nudgerl8": [True] * 4 + [False, False, False, True],
                  "grpo64": [True] * 8 + [False] * 8})
    table = seed_set_agreement(runs, [[0, 1, 2, 3], [4, 5, 6, 7]]).set_index("method")
    assert table.loc["grpo8", ["found_a", "replicates_a", "found_b", "replicates_b"]].tolist() == [0, 4, 0, 4]
    assert table.loc["nudgerl8", ["found_a", "found_b"]].tolist() == [4, 1]
    # 4 of 4: exact 95 % interval [0.398, 1]; 1 of 4: [0.0063, 0.806] (descriptions)
    assert table.loc["nudgerl8", "ci_low_a"] == pytest.approx(0.3976, abs=1e-4)
    assert table.loc["nudgerl8", "ci_high_b"] == pytest.approx(0.8059, abs=1e-4)
    # Boschloo's exact test (scipy's reference): 0.047, where Fisher's conditional test gives 0.143
    # (2 x C(5,4)C(3,0)/C(8,4) ...): the more powerful test calls 4 of 4 against 1 of 4 a disagreement
    from scipy import stats

    p = table.loc["nudgerl8", "p_between_sets"]
    assert p == pytest.approx(stats.boschloo_exact([[4, 0], [1, 3]]).pvalue) and p == pytest.approx(0.04723, abs=1e-4)
    assert not table.loc["nudgerl8", "agree"] and table.loc["nudgerl8", "test"] == "Boschloo exact"
    assert table.loc["grpo8", "agree"]
    assert table.loc["grpo8", "p_between_sets"] == pytest.approx(1.0)
    # seeds 8-15 are outside both sets and ignored
    assert table.loc["grpo64", ["found_a", "found_b"]].tolist() == [4, 4]

    big = _runs({"m": [True] * 8 + [False] * 8})
    row = seed_set_agreement(big, [list(range(8)), list(range(8, 16))]).iloc[0]
    assert not row.agree and row.p_between_sets < 0.001  # 8 of 8 against 0 of 8
    md = render_agreement(seed_set_agreement(big, [list(range(8)), list(range(8, 16))]),
                          [list(range(8)), list(range(8, 16))], 0.95)
    assert "| m | 8 of 8 [63, 100] % | 0 of 8 [0, 37] % | **no** |" in md and "0 of 1 methods agree" in md
    # the caption says what 8 a set could detect: from 10 %, 80 % (found_power, exact)
    assert "with 80 % power at 8 replicates a set: 10 % against 80 %, nothing from 50 %" in md


def test_agreement_names_a_missing_run():
    runs = _runs({"grpo8": [True, False, True]})
    with pytest.raises(ValueError, match=r"'grpo8' has no run for seeds \[3\] of seed set b"):
        seed_set_agreement(runs, [[0, 1], [2, 3]])
    with pytest.raises(ValueError, match="column 'run_found' missing"):
        seed_set_agreement(runs.drop(columns="run_found"), [[0], [1]])


def test_seed_sets_must_be_two_disjoint_sets_of_the_run_seeds():
    assert check_seed_sets([[0, 1], [2, 3]], [0, 1, 2, 3]) == []
    assert "share seeds [1]" in " ".join(check_seed_sets([[0, 1], [1, 2]], [0, 1, 2]))
    assert "seeds [9] are not in 'seeds'" in " ".join(check_seed_sets([[0], [9]], [0, 1]))
    assert "exactly two" in " ".join(check_seed_sets([[0]], [0]))


def test_study_config_needs_the_map_its_shares_and_method():
    base = {"seeds": [0, 1], "study": {"seed_sets": [[0], [1]], "common_shares": [0.1]}}
    assert "needs a 'regime_map' section" in " ".join(check_study(base))
    rmap = {"shares": [0.01, 0.1], "methods": ["grpo8", "nudgerl8"], "seeds": [0], "reached": 0.5}
    assert check_study({**base, "regime_map": rmap}) == []
    bad = {**base, "regime_map": rmap, "study": {**base["study"], "common_shares": [0.3], "rl_works_method": "grpo64"}}
    problems = " ".join(check_study(bad))
    assert "'study.common_shares': [0.3] not in" in problems and "'study.rl_works_method': 'grpo64'" in problems


def test_rl_works_needs_every_replicate_above_its_base():
    rows = []
    for share, finals in ((0.03, [0.9, 0.05, 0.8]), (0.1, [0.9, 0.95, 0.8]), (0.003, [0.01, 0.0, 0.02])):
        for seed, final in enumerate(finals):
            rows.append({"share_set": share, "share_measured": share * (1 + seed / 10), "seed": seed,
                         "method": "grpo8", "final_hard_pass@1": final, "base_hard_pass@1": 0.06})
            rows.append({"share_set": share, "share_measured": share, "seed": seed, "method": "nudgerl8",
                         "final_hard_pass@1": 0.9, "base_hard_pass@1": 0.06})
    table = rl_works(pd.DataFrame(rows), [0.03, 0.1], "grpo8")
    assert table.share_set.tolist() == [0.03, 0.1]
    assert table.above_base.tolist() == [2, 3] and table.works.tolist() == [False, True]
    assert table.share_measured_max.tolist() == pytest.approx([0.036, 0.12])
    md = render_rl_works(table)
    assert "| 3 % | 3.0-3.6 | grpo8 | 2 of 3 | **no** | 6 → 90 / 6 → 5 / 6 → 80 |" in md
    with pytest.raises(ValueError, match="no 'grpo8' run at share 0.5"):
        rl_works(pd.DataFrame(rows), [0.5], "grpo8")
