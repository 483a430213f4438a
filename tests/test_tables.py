"""Table 1 from evaluation records: values, intervals, all three formats."""

import json

import pandas as pd
import pytest

from nudgerl.tables import write_table


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
    assert "| GRPO (N=8) |" in md and "AIME24" in md and "2 seed(s), 4 samples per problem" in md
    tex = paths[2].read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and "GRPO (N=8) &" in tex


def test_mismatched_problem_ids_across_seeds_is_an_error(tmp_path):
    _write(tmp_path, "base", 0, "aime24", [0, 1])
    _write(tmp_path, "base", 1, "aime24", [0, 1, 2])
    with pytest.raises(ValueError, match="problem ids differ"):
        write_table(tmp_path, ["base"], ["aime24"], [0, 1], tmp_path / "table1", "Table 1", n_boot=100)
