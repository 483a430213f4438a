"""The claims of several run folders side by side, each column labelled with its base models'
measured regime (nudgerl.reporting.claims_by_regime, `nudgerl claims-by-regime`)."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from nudgerl.reporting.claims_by_regime import check, regime_of, render

CLAIM_1 = "NudgeRL (N=8) >= GRPO (N=32) in Avg pass@1, at about 1/4 of the rollouts"


def _run(root: Path, name: str, shares, claim1: tuple, claim4_verdict: str) -> str:
    run = root / name
    (run / "tables").mkdir(parents=True)
    (run / "diagnostics").mkdir()
    pd.DataFrame({"seed": range(len(shares)), "rare_strategy_share_unhinted": shares}).to_csv(
        run / "diagnostics" / "base_models.csv", index=False)
    verdict, delta, low, high = claim1
    seeds = " ".join(str(s) for s in range(len(shares)))
    rows = [{"claim": 1, "text": CLAIM_1, "paper": "0.489 vs 0.487", "replicates": len(shares), "seeds": seeds,
             "better": "nudgerl8",
             "worse": "grpo32", "delta": delta, "ci_low": low, "ci_high": high, "p_for": 0.0312,
             "p_against": 1.0, "verdict": verdict}]
    if claim4_verdict == "not run":
        rows.append({"claim": 4, "text": "p_drop = 0.5 is the best", "paper": "0.598", "replicates": 1,
                     "seeds": "0", "verdict": "not run", "note": "not in this DAG: p_drop"})
    else:  # two comparisons, one verdict
        rows += [{"claim": 4, "text": "p_drop = 0.5 is the best", "paper": "0.598", "replicates": 1, "seeds": "0",
                  "better": "nudgerl8", "worse": w, "delta": d, "ci_low": d - 0.01, "ci_high": d + 0.01,
                  "p_for": 0.5, "p_against": 1.0, "verdict": claim4_verdict} for w, d in (("nudgerl8_pdrop0", 0.05), ("nudgerl8_pdrop0.75", 0.02))]
    pd.DataFrame(rows).to_csv(run / "tables" / "claims.csv", index=False)
    above = [True] * len(shares) if name == "embedded_common" else [True, False] + [True] * (len(shares) - 2)
    pd.DataFrame([{"seed": s, "method": m, "above_reference": a if m == "grpo8" else ""}
                  for s, a in enumerate(above) for m in ("base", "grpo8")]).to_csv(
        run / "tables" / "table1_replicates.csv", index=False)
    if name == "embedded":  # exploration success: nudgerl8 found on 4 of 5, grpo32 on 1 of 5
        pd.DataFrame([{"method": m, "seed": s, "found": k, "replicates": 5, "run_found": s < k}
                      for m, k in (("nudgerl8", 4), ("grpo32", 1), ("nudgerl8_pdrop0", 1)) for s in range(5)]).to_csv(
            run / "tables" / "exploration.csv", index=False)
    return str(run)


@pytest.fixture
def runs(tmp_path):
    common = _run(tmp_path, "embedded_common", [0.041, 0.036, 0.022], ("descriptive (n = 3)", 0.001, -0.007, 0.013),
                  "descriptive (n = 1)")
    rare = _run(tmp_path, "embedded", [0.008, 0.006, 0.002, 0.004, 0.005],
                ("descriptive (n = 5)", 0.31, 0.12, 0.48), "not run")
    return [common, rare]


def test_each_run_is_a_column_labelled_with_its_measured_regime(runs, tmp_path):
    page = render(runs, str(tmp_path / "page.md"))
    assert regime_of(Path(runs[1])) == "unhinted share 0.2-0.8 % (5 base models)"
    header = next(line for line in page.splitlines() if line.startswith("| # |"))
    assert header.endswith(f"`{runs[0]}`: unhinted share 2.2-4.1 % (3 base models) | "
                           f"`{runs[1]}`: unhinted share 0.2-0.8 % (5 base models) |")
    row1 = next(line for line in page.splitlines() if line.startswith("| 1 |"))
    # found 4 of 5 against 1 of 5 on the same replicates: 3 discordant pairs, all one way: McNemar p = 2/8
    assert ("**descriptive (n = 3)**: +0.1 [-0.7, +1.3], p = 0.031 / 1 (3 replicates) | **descriptive (n = 5)**: "
            "+31.0 [+12.0, +48.0], p = 0.031 / 1, found 4 of 5 vs 1 of 5 (McNemar p = 0.25) (5 replicates) |") in row1
    assert CLAIM_1 in row1
    works = next(line for line in page.splitlines() if line.startswith("| - | RL works"))
    assert works.endswith("| - | yes, 3 of 3 | no, 4 of 5 |")
    row4 = next(line for line in page.splitlines() if line.startswith("| 4 |"))
    assert row4.endswith("| **descriptive (n = 1)**: +5.0 [+4.0, +6.0], p = 0.5 / 1; +2.0 [+1.0, +3.0], p = 0.5 / 1 "
                         "(1 replicate) | not run |")


def test_check_names_the_line_that_differs(runs, tmp_path):
    out = tmp_path / "page.md"
    out.write_text(render(runs, str(out)))
    assert check(runs, str(out)) == []
    out.write_text(out.read_text().replace("**descriptive (n = 5)**: +31.0", "**descriptive (n = 5)**: +35.0"))
    problems = check(runs, str(out))
    assert len(problems) == 1 and problems[0].startswith("line ") and "+35.0" in problems[0]


def test_the_command_writes_checks_and_names_a_missing_table(runs, tmp_path):
    nudgerl = Path(sys.executable).parent / "nudgerl"
    out = tmp_path / "page.md"
    subprocess.run([nudgerl, "claims-by-regime", "--results", *runs, "--out", out], check=True, capture_output=True)
    ok = subprocess.run([nudgerl, "claims-by-regime", "--results", *runs, "--out", out, "--check"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    (Path(runs[1]) / "diagnostics" / "base_models.csv").unlink()
    bad = subprocess.run([nudgerl, "claims-by-regime", "--results", *runs, "--out", out], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "embedded/diagnostics/base_models.csv: no base-model table" in bad.stderr


def test_a_claim_on_one_replicate_counts_that_replicates_runs_only(runs, tmp_path):
    """Claim 4 rests on seed 0: nudgerl8 found on 4 of 5 replicates, but on seed 0 it is 1 of 1."""
    run = Path(runs[0])
    pd.DataFrame([{"method": m, "seed": s, "found": k, "replicates": 3, "run_found": s < k}
                  for m, k in (("nudgerl8", 2), ("nudgerl8_pdrop0", 0)) for s in range(3)]).to_csv(
        run / "tables" / "exploration.csv", index=False)
    row4 = next(line for line in render(runs, str(tmp_path / "p.md")).splitlines() if line.startswith("| 4 |"))
    # nudgerl8_pdrop0.75 has no exploration record: its comparison carries no count
    assert ("+5.0 [+4.0, +6.0], p = 0.5 / 1, found 1 of 1 vs 0 of 1 (McNemar p = 1); +2.0 [+1.0, +3.0], p = 0.5 / 1 "
            "(1 replicate)") in row4


def test_a_run_judged_in_several_regimes_is_not_laid_out_again(runs, tmp_path):
    """The study's claims table has a regime column already: one column per run would mix its
    regimes' verdicts in one cell, so the page refuses it, naming the file."""
    claims = Path(runs[1]) / "tables" / "claims.csv"
    table = pd.read_csv(claims)
    table.insert(1, "regime", "rare")
    table.to_csv(claims, index=False)
    with pytest.raises(ValueError, match=r"embedded/tables/claims.csv: judged in several regimes"):
        render(runs, str(tmp_path / "page.md"))
