"""Table 1 from evaluation records: values, intervals, all three formats."""

import json

import pandas as pd
import pytest

from nudgerl.reporting.tables import write_table


def _write(root, method, seed, bench, cs, n=4):
    d = root / method / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"{bench}.problems.jsonl", "w") as f:
        for i, c in enumerate(cs):
            f.write(json.dumps({"id": f"{bench}-{i}", "n": n, "c": c}) + "\n")


def test_table1_values_and_formats(tmp_path):
    for seed in (0, 1):
        _write(tmp_path, "base", seed, "aime24", [0, 0, 4, 0])
        _write(tmp_path, "base", seed, "apex", [0, 0, 0, 0])
        _write(tmp_path, "grpo8", seed, "aime24", [4, 4, 4, 2 * seed])
        _write(tmp_path, "grpo8", seed, "apex", [2, 2, 2, 2])
    paths = write_table(tmp_path, ["base", "grpo8"], ["aime24", "apex"], [0, 1], tmp_path / "t" / "table1", "Table 1",
                        n_boot=300)
    df = pd.read_csv(paths[0])
    cell = df[(df.method == "grpo8") & (df.benchmark == "aime24")].iloc[0]
    assert cell["pass@1"] == pytest.approx((3 / 4 + (3 + 0.5) / 4) / 2)
    assert cell.ci_low <= cell["pass@1"] <= cell.ci_high
    avg = df[(df.method == "base") & (df.benchmark == "avg")].iloc[0]
    assert avg["pass@1"] == pytest.approx((0.25 + 0) / 2)
    md = paths[1].read_text()
    assert "| GRPO (N=8) |" in md and "AIME24" in md and "2 replicates (seeds 0, 1; each its own base model, RL and sampling seed), 4 samples per problem" in md
    tex = paths[2].read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and "GRPO (N=8) &" in tex
    # the page the HTML report shows: the markdown table's cells, as an HTML table
    html = paths[3].read_text()
    cells = [c.strip() for c in md.splitlines()[-1].strip("|").split("|")]
    assert paths[3].suffix == ".html" and "<table>" in html and "<th>AIME24</th>" in html
    assert all(f"<td>{c}</td>" in html for c in cells), cells


def test_mismatched_problem_ids_across_seeds_is_an_error(tmp_path):
    _write(tmp_path, "base", 0, "aime24", [0, 1])
    _write(tmp_path, "base", 1, "aime24", [0, 1, 2])
    with pytest.raises(ValueError, match="problem ids differ"):
        write_table(tmp_path, ["base"], ["aime24"], [0, 1], tmp_path / "table1", "Table 1", n_boot=100)


def test_paired_test_marks_a_real_difference_and_not_noise(tmp_path):
    import numpy as np

    rng = np.random.default_rng(1)
    # 40 problems: method a solves 30 more, b none of them; the rest identical
    base = rng.integers(0, 5, size=40)
    better = base.copy()
    better[:30] = 4
    _write(tmp_path, "grpo8", 0, "aime24", [int(x) for x in base])
    _write(tmp_path, "nudgerl8", 0, "aime24", [int(x) for x in better])
    _write(tmp_path, "same", 0, "aime24", [int(x) for x in base])
    paths = write_table(tmp_path, ["grpo8", "nudgerl8", "same"], ["aime24"], [0], tmp_path / "t1", "Table 1",
                        n_boot=300, reference="grpo8")
    df = pd.read_csv(paths[0]).set_index(["method", "benchmark"])
    assert df.loc[("nudgerl8", "aime24"), "p_vs_ref"] < 0.01
    assert df.loc[("nudgerl8", "aime24"), "delta_vs_ref"] > 0
    assert df.loc[("same", "aime24"), "p_vs_ref"] == pytest.approx(1.0)
    assert pd.isna(df.loc[("grpo8", "aime24"), "p_vs_ref"])
    md = paths[1].read_text()
    nudge_line = next(line for line in md.splitlines() if line.startswith("| NudgeRL"))
    same_line = next(line for line in md.splitlines() if line.startswith("| same"))
    assert "†" in nudge_line and "†" not in same_line
    assert "1 replicate (seed 0; each its own base model, RL and sampling seed), 4 samples per problem" in md and "paired sign-flip" in md
    assert r"$^\dagger$" in paths[2].read_text()


def test_paired_test_p_value_matches_exact_enumeration():
    import itertools

    import numpy as np

    from nudgerl.algorithms import paired_permutation_test

    a, b = np.array([1.0, 0.5, 0.75, 0.0, 1.0]), np.array([0.5, 0.5, 0.25, 0.25, 0.5])
    d = a - b
    flips = [np.mean(np.array(s) * d) for s in itertools.product([-1, 1], repeat=len(d))]
    exact = np.mean(np.abs(flips) >= abs(d.mean()) - 1e-12)
    res = paired_permutation_test(a, b, n_perm=20000, seed=3)
    assert res["delta"] == pytest.approx(d.mean())
    assert res["p_value"] == pytest.approx(exact, abs=0.01)
    assert res["ci_low"] <= res["delta"] <= res["ci_high"]
    with pytest.raises(ValueError, match="same problems"):
        paired_permutation_test(a, b[:3])


def test_a_dotted_prefix_keeps_its_dot(tmp_path):
    """A cell's table is named by its share ("baselines_share0.3"): the prefix is not a file name,
    so its ".3" stays and each format is the prefix plus its extension."""
    _write(tmp_path, "base", 0, "aime24", [0, 4])
    paths = write_table(tmp_path, ["base"], ["aime24"], [0], tmp_path / "baselines_share0.3", "Fixes", n_boot=50)
    assert [p.name for p in paths] == [f"baselines_share0.3.{ext}" for ext in ("csv", "md", "tex", "html")]
    assert all(p.exists() for p in paths) and not (tmp_path / "baselines_share0.csv").exists()


def test_captions_say_when_every_replicate_shares_one_base_model(tmp_path):
    """config base_model_seed: the replicates differ in RL and sampling seed only, and Table 1's
    caption and the per-replicate table's (through the CLI the rules call) say which base model."""
    from nudgerl.cli import main

    for seed in (0, 1):
        _write(tmp_path, "base", seed, "aime24", [0, 0, 4, 0])
        _write(tmp_path, "grpo8", seed, "aime24", [4, 4, 4, 2 * seed])
    (tmp_path / "base" / "seed0" / "summary.json").write_text(json.dumps({"samples_per_problem": 4}))
    out = tmp_path / "t"
    assert main(["table", "--eval-root", str(tmp_path), "--methods", "base", "grpo8", "--benchmarks", "aime24",
                 "--seeds", "0", "1", "--title", "Table 1", "--bootstrap-samples", "200",
                 "--base-model-seed", "7", "--out-prefix", str(out / "table1")]) in (0, None)
    md = (out / "table1.md").read_text()
    assert "2 replicates (seeds 0, 1; each its own RL and sampling seed, all from the one base model of seed 7)" in md
    assert "each its own base model" not in md
    assert main(["replicate-table", "--eval-root", str(tmp_path), "--methods", "base", "grpo8", "--benchmarks",
                 "aime24", "--seeds", "0", "1", "--bootstrap-samples", "200", "--base-model-seed", "7",
                 "--out-prefix", str(out / "table1_replicates")]) in (0, None)
    per = (out / "table1_replicates.md").read_text()
    assert "each its own RL and sampling seed, all from the one base model of seed 7" in per
    assert "its own base model" not in per
