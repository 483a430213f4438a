"""Found / not-found outcomes: the exact interval and test (nudgerl.algorithms), and the
exploration-success table from evaluation records (nudgerl.reporting.exploration)."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from nudgerl.algorithms import clopper_pearson, fisher_exact
from nudgerl.reporting.exploration import exploration_rows, exploration_table

RARE = "difference_table"


@pytest.mark.parametrize("k, n, low, high", [  # R: binom.test(k, n)$conf.int
    (1, 6, 0.004210745, 0.641234579),
    (3, 8, 0.085233414, 0.755136783),
    (0, 5, 0.0, 0.521823750),
    (5, 5, 0.478176250, 1.0),
])
def test_clopper_pearson_matches_the_exact_binomial_interval(k, n, low, high):
    got = clopper_pearson(k, n)
    assert got == pytest.approx((low, high), abs=1e-8)


@pytest.mark.parametrize("k1, n1, k2, n2, p", [  # R: fisher.test(matrix(c(k1, n1-k1, k2, n2-k2), 2))$p.value
    (1, 6, 6, 6, 0.015151515),   # 1 of 6 against 6 of 6: what the default's replicates must tell apart
    (0, 3, 3, 3, 0.1),           # three replicates cannot reach 0.05 even at 0 of 3 vs 3 of 3
    (3, 6, 3, 6, 1.0),
    (2, 8, 7, 8, 0.040559441),
])
def test_fisher_exact_two_sided(k1, n1, k2, n2, p):
    assert fisher_exact(k1, n1, k2, n2) == pytest.approx(p, abs=1e-8)
    assert fisher_exact(k2, n2, k1, n1) == pytest.approx(p, abs=1e-8)  # symmetric


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="k=4, n=3"):
        clopper_pearson(4, 3)
    with pytest.raises(ValueError, match="2/1"):
        fisher_exact(2, 1, 0, 3)


def _write_run(root: Path, method: str, seed: int, rare_share_hard: float, samples=10):
    d = root / method / f"seed{seed}"
    d.mkdir(parents=True)
    # c of n right: the hard problems right as often as the rare (always-right) strategy is used
    problems = [{"id": f"b-{i}", "hard": hard, "n": samples, "c": round(rare_share_hard * samples) if hard else samples}
                for i, hard in enumerate((True, True, False))]
    (d / "bench.problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in problems))
    rows = []
    for p in problems:
        uses = round(rare_share_hard * samples) if p["hard"] else samples  # easy problems never count
        rows += [{"id": p["id"], "sample": i, "strategy": RARE if i < uses else "common_difference"}
                 for i in range(samples)]
    (d / "bench.samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "summary.json").write_text("{}")


def test_runs_found_or_not_and_the_methods_k_of_n(tmp_path):
    shares = {"grpo8": [0.0, 0.1, 0.9], "nudgerl8": [1.0, 0.6, 0.5]}  # 0.5 is not *more than* half
    for method, per_seed in shares.items():
        for seed, share in enumerate(per_seed):
            _write_run(tmp_path, method, seed, share)
    rows = exploration_rows(tmp_path, list(shares), [0, 1, 2], ["bench"], RARE, 0.5)
    assert list(rows.hard_samples) == [20] * 6  # hard problems only
    assert list(rows.found) == [False, False, True, True, True, False]
    table = exploration_table(rows, "grpo8").set_index("method")
    assert (table.found.to_dict(), table.replicates.to_dict()) == ({"grpo8": 1, "nudgerl8": 2}, {"grpo8": 3, "nudgerl8": 3})
    assert table.loc["nudgerl8", "p_vs_reference"] == pytest.approx(fisher_exact(2, 3, 1, 3))
    assert pd.isna(table.loc["grpo8", "p_vs_reference"])
    assert (table.loc["nudgerl8", "ci_low"], table.loc["nudgerl8", "ci_high"]) == pytest.approx(clopper_pearson(2, 3))


def test_a_sample_without_a_strategy_label_is_named(tmp_path):
    _write_run(tmp_path, "grpo8", 0, 0.5)
    path = tmp_path / "grpo8" / "seed0" / "bench.samples.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    del rows[3]["strategy"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"bench.samples.jsonl: sample b-0/3 has no strategy label"):
        exploration_rows(tmp_path, ["grpo8"], [0], ["bench"], RARE, 0.5)


def test_the_command_writes_table_page_and_provenance(tmp_path):
    for method, share in (("base", 0.0), ("grpo8", 1.0)):
        for seed in (0, 1):
            _write_run(tmp_path / "eval", method, seed, share)
    prefix = tmp_path / "tables" / "exploration"
    subprocess.run([Path(sys.executable).parent / "nudgerl", "exploration-table", "--eval-root", tmp_path / "eval",
                    "--methods", "base", "grpo8", "--benchmarks", "bench", "--seeds", "0", "1", "--reference", "grpo8",
                    "--success-share", "0.5", "--out-prefix", prefix], check=True, capture_output=True)
    df = pd.read_csv(f"{prefix}.csv")
    assert list(df.run_found) == [False, False, True, True] and list(df.found) == [0, 0, 2, 2]
    md = Path(f"{prefix}.md").read_text()
    assert "| Base | 0 of 2 |" in md and "| GRPO (N=8) | 2 of 2 | 100 % [16, 100] |" in md
    assert Path(f"{prefix}.html").is_file()
    record = json.loads(Path(f"{prefix}.csv.provenance.json").read_text())
    assert record["config"]["success_share"] == 0.5


def test_table1_gives_each_method_its_exploration_success(tmp_path):
    """`nudgerl table --exploration-share`: Table 1's Avg rows carry k of n and the exact interval,
    the Markdown and LaTeX tables a Found column; without the option the table is unchanged."""
    for method, per_seed in {"grpo8": [0.0, 0.1, 0.9], "nudgerl8": [1.0, 0.6, 0.5]}.items():
        for seed, share in enumerate(per_seed):
            _write_run(tmp_path / "eval", method, seed, share)
    nudgerl = Path(sys.executable).parent / "nudgerl"
    common = ["table", "--title", "Table 1", "--eval-root", tmp_path / "eval", "--methods", "grpo8", "nudgerl8",
              "--benchmarks", "bench", "--seeds", "0", "1", "2", "--bootstrap-samples", "200", "--reference", "grpo8"]
    subprocess.run([nudgerl, *common, "--exploration-share", "0.5", "--out-prefix", tmp_path / "with"], check=True,
                   capture_output=True)
    subprocess.run([nudgerl, *common, "--out-prefix", tmp_path / "without"], check=True, capture_output=True)
    df = pd.read_csv(tmp_path / "with.csv").set_index(["method", "benchmark"])
    assert (df.at[("grpo8", "avg"), "found"], df.at[("nudgerl8", "avg"), "found"]) == (1, 2)
    assert (df.loc[("nudgerl8", "avg"), ["found_ci_low", "found_ci_high"]].tolist()
            == pytest.approx(clopper_pearson(2, 3)))
    assert df.loc[(slice(None), "bench"), "found"].isna().all()  # per-benchmark rows carry no count
    md = (tmp_path / "with.md").read_text()
    assert "| Method | bench | Avg | Found |" in md and "| 2 of 3 (67 % [9, 99]) |" in md
    assert "more than 50 % of its samples on the hard benchmark problems" in md
    assert r"2 of 3 (67 \% [9, 99])" in (tmp_path / "with.tex").read_text()
    assert "Found" not in (tmp_path / "without.md").read_text()
    assert "found" not in pd.read_csv(tmp_path / "without.csv").columns
    record = json.loads((tmp_path / "with.csv.provenance.json").read_text())
    assert record["config"]["exploration"]["success_share"] == 0.5


def _write_family_run(root: Path, method: str, seed: int, found_families: set, samples=4):
    """Two hard problems per family of FAMILY_STRATEGY: the run uses a family's own strategy on
    all its samples when the family is in ``found_families``, else the habit."""
    d = root / method / f"seed{seed}"
    d.mkdir(parents=True)
    problems = [{"id": f"{f}-{i}", "hard": True, "family": f, "rare_strategy": own}
                for f, own in FAMILY_STRATEGY.items() for i in range(2)]
    problems.append({"id": "easy", "hard": False, "family": "quadratic", "rare_strategy": "difference_table"})
    (d / "bench.problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in problems))
    rows = [{"id": p["id"], "sample": i,
             "strategy": p["rare_strategy"] if p["family"] in found_families or not p["hard"] else "common_difference"}
            for p in problems for i in range(samples)]
    (d / "bench.samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


FAMILY_STRATEGY = {"quadratic": "difference_table", "doubling": "doubled_differences",
                   "interleave": "every_other_term", "tripling": "tripled_differences"}


def test_the_families_task_counts_families_found_per_run_and_tests_them_over_replicates(tmp_path):
    """A run's Found is k of F families; a replicate counts as found only at k = F; the method's
    families are summed and compared with the reference's by the paired sign-flip test."""
    from nudgerl.reporting.exploration import render_markdown
    from nudgerl.verdicts import sign_flip_p

    found = {"grpo8": [set(), {"quadratic"}, set(), {"doubling"}],
             "nudgerl8": [set(FAMILY_STRATEGY), {"quadratic", "tripling"}, {"interleave"}, {"doubling", "tripling"}]}
    for method, per_seed in found.items():
        for seed, fams in enumerate(per_seed):
            _write_family_run(tmp_path, method, seed, fams)
    rows = exploration_rows(tmp_path, list(found), [0, 1, 2, 3], ["bench"], RARE, 0.5)
    assert list(rows.families_found) == [0, 1, 0, 1, 4, 2, 1, 2] and set(rows.families) == {4}
    assert list(rows.found) == [False] * 4 + [True, False, False, False]
    assert list(rows.hard_samples) == [32] * 8  # the easy problem never counts
    assert rows.family_shares.iloc[5] == "doubling 0 / interleave 0 / quadratic 100 / tripling 100"
    table = exploration_table(rows, "grpo8").set_index("method")
    assert table.loc["nudgerl8", ["families_found", "family_slots"]].tolist() == [9, 16]
    assert table.loc["nudgerl8", "families_rate"] == pytest.approx(9 / 16)
    # paired by seed: differences 4, 1, 1, 1 -> all positive; two-sided exact p = 2 / 2^4
    assert table.loc["nudgerl8", "p_families_vs_reference"] == pytest.approx(sign_flip_p([4, 1, 1, 1], "two-sided"))
    assert table.loc["nudgerl8", "p_families_vs_reference"] == pytest.approx(0.125)
    # the t interval over the four replicates' shares 1, .5, .25, .5 (scipy reference: mean .5625, sem .1573)
    assert (table.loc["nudgerl8", "families_ci_low"], table.loc["nudgerl8", "families_ci_high"]) == \
        pytest.approx((0.0619, 1.0), abs=1e-3)
    md = render_markdown(exploration_table(rows, "grpo8"), rows, "grpo8", RARE, 0.5, 0.95)
    assert "| nudgerl8 | 9 of 16 | 4 / 2 / 1 / 2 | 56 % [6, 100] |" in md
    assert "each family's own, on its problems" in md


def test_table1_with_families_names_each_familys_own_strategy(tmp_path):
    """Table 1's Found caption under the families task: each family's own strategy, not the
    configured single label (difference table is the quadratic family's alone)."""
    from nudgerl.reporting.tables import write_table

    for method, fams in (("grpo8", {"quadratic"}), ("nudgerl8", set(FAMILY_STRATEGY))):
        _write_family_run(tmp_path, method, 0, fams)
        path = tmp_path / method / "seed0" / "bench.problems.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "n": 4, "c": 4 * (r["family"] in fams or not r["hard"])}) + "\n"
                                for r in rows))
    paths = write_table(tmp_path, ["grpo8", "nudgerl8"], ["bench"], [0], tmp_path / "t1", "Table 1", n_boot=100,
                        exploration={"strategy": RARE, "success_share": 0.5, "confidence": 0.95})
    md = paths[1].read_text()
    assert "strategy (each family's own, on its family's problems)" in md and "(difference table)" not in md
    assert "families 4 of 4" in md and "families 1 of 4" in md
