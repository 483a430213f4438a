"""The claims table: the roles, the verdict over replicates, the A/A column, and paired intervals over
problems and replicates (a description)."""

import json

import numpy as np
import pytest

from nudgerl.algorithms import bootstrap_mean_of_means
from nudgerl.reporting.claims import OURS, build_claims, evaluate_claims, render_markdown
from nudgerl.io import write_jsonl
from nudgerl.reporting.tables import render_replicates, replicate_rows

BENCHES = ["aime24", "apex"]


def test_replicates_are_resampled_together_across_benchmarks():
    # replicate 1 is better on every benchmark: a shared replicate draw moves all benchmarks
    # together, so the Avg interval is as wide as one benchmark's replicate spread
    mats = [np.array([[0.0, 1.0]] * 50), np.array([[0.0, 1.0]] * 50)]
    m, lo, hi = bootstrap_mean_of_means(mats, n_boot=2000)
    assert m == pytest.approx(0.5) and lo == pytest.approx(0.0) and hi == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same replicates"):
        bootstrap_mean_of_means([np.zeros((3, 2)), np.zeros((3, 1))])


ROLES = {"nudgerl": "nudgerl8", "nudgerl_n": 8, "grpo": {"8": "grpo8", "32": "grpo32", "64": "grpo64"},
         "pope": "pope8", "pdrop": [[0.0, "nudgerl8_pdrop0"], [0.5, "nudgerl8"]],
         "distill": [[0.0, "nudgerl8_distill0"], [0.1, "nudgerl8"]],
         "hint_sampling": {"sequential": "nudgerl8", "random": "nudgerl8_random"},
         "eps": [[0.2, "grpo8"], [0.4, "grpo8_eps0.4"]], "seeds": [0, 1, 2], "ablation_seeds": [0]}


def test_roles_map_the_papers_claims_to_run_ids():
    claims = {c.number: c for c in build_claims(ROLES)}
    assert claims[1].comparisons == [("nudgerl8", "grpo32")] and claims[1].seeds == [0, 1, 2]
    assert claims[2].comparisons == [("grpo32", "grpo64")]
    assert claims[4].comparisons == [("nudgerl8", "nudgerl8_pdrop0")] and claims[4].seeds == [0]
    assert claims[5].missing == ["top_ranked"] and claims[5].comparisons == []  # not run: no verdict
    assert claims[7].comparisons == [("nudgerl8", "grpo8"), ("nudgerl8", "grpo8_eps0.4")]


def _write_eval(root, method, seed, pass_rates, n=8):
    for b in BENCHES:
        rows = [{"id": f"{b}-{i:03d}", "n": n, "c": int(round(p * n))} for i, p in enumerate(pass_rates)]
        write_jsonl(root / method / f"seed{seed}" / f"{b}.problems.jsonl", rows)
    (root / method / f"seed{seed}" / "summary.json").write_text(json.dumps({b: {"samples_per_problem": n}
                                                                            for b in BENCHES}))


def _write_run(root, method, seed, tokens):
    path = root / method / f"seed{seed}" / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"step": 40, "cumulative_rollout_tokens": tokens}) + "\n")


SIX = [0, 1, 2, 3, 4, 5]


def test_claims_from_records(tmp_path):
    """Six replicates, each with its own offset (a replicate's base model moves every method): the
    verdicts come from the per-replicate differences; the one-replicate ablation claims are
    descriptive; the A/A pair's difference and spread stand beside every row."""
    ev, runs = tmp_path / "eval", tmp_path / "runs"
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.6, size=40)
    for s in SIX:
        shift = rng.uniform(-0.1, 0.1)  # the replicate's base model
        here = np.clip(base + shift, 0, 1)
        _write_eval(ev, "nudgerl8", s, np.clip(here + 0.3, 0, 1))  # clearly better than GRPO-32
        _write_eval(ev, "grpo32", s, here)
        _write_eval(ev, "grpo64", s, np.clip(here + [0.05, -0.05][s % 2], 0, 1))  # up, down, up ...: inconclusive
        _write_eval(ev, "pope8", s, np.clip(here + 0.5, 0, 1))  # clearly better than NudgeRL: contradicted
        _write_eval(ev, "base", s, here)
        _write_eval(ev, "grpo8", s, here)
        _write_eval(ev, "grpo8_aa", s, np.clip(here + [0.1, -0.1, 0.0][s % 3], 0, 1))  # the A/A pair
        _write_run(runs, "nudgerl8", s, 1000.0)
        _write_run(runs, "grpo32", s, 4000.0)
    for m in ("nudgerl8_pdrop0", "nudgerl8_distill0", "nudgerl8_random", "grpo8_eps0.4"):
        _write_eval(ev, m, 0, base)
    roles = {**ROLES, "seeds": SIX}
    aa = {"a": "grpo8", "b": "grpo8_aa", "seeds": SIX}
    df = evaluate_claims(build_claims(roles), ev, runs, BENCHES, n_boot=500, aa=aa)
    verdict = df.groupby("claim").verdict.first()
    assert verdict[1] == "supported" and verdict[2] == "inconclusive" and verdict[3] == "contradicted"
    assert verdict[4] == "descriptive (n = 1)" and verdict[7] == "descriptive (n = 1)" and verdict[5] == "not run"
    one = df[df.claim == 1].iloc[0]
    assert one.kind == "parity" and "non-inferiority within 1.65 points" in one.test
    assert one.delta == pytest.approx(np.mean([float(x) for x in one.replicate_deltas.split()]), abs=1e-9)
    assert one.p_for == pytest.approx(1 / 64) and one.p_against == pytest.approx(1.0)  # every replicate up
    assert one.rollout_token_ratio == pytest.approx(0.25)
    assert (df[df.claim.isin([1, 2, 3])][["n_better", "n_worse"]] == 6).all().all()
    # the A/A pair: grpo8 - grpo8_aa per replicate is -0.1, +0.1, 0 (clipped at the edges), mean about 0
    assert abs(one.aa_mean) < 0.01 and one.aa_sd == pytest.approx(0.0894, abs=0.01)
    assert one.aa_spread == pytest.approx(abs(one.aa_mean) + 2 * one.aa_sd / np.sqrt(6))
    assert not one.inside_aa and df[df.claim == 2].iloc[0].inside_aa  # +30 points is outside, +0 inside
    md = render_markdown(df, samples=8)
    assert "| 1 |" in md and "**supported**" in md and "not in this DAG: top_ranked" in md and "6 (seeds 0 1 2 3 4 5)" in md
    assert "**descriptive (n = 1)**" in md and "1 (seeds 0)" in md and "sign-flip: 0.0156 / 1" in md
    assert "(inside A/A)" in md and "below 6 replicates a row is descriptive" in md
    row2 = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    assert row2.endswith("| **inconclusive** |")  # inside the A/A spread, but no verdict to mark
    decided = df.copy()
    decided.loc[decided.claim == 2, "verdict"] = "contradicted"
    row2 = next(line for line in render_markdown(decided).splitlines() if line.startswith("| 2 |"))
    assert row2.endswith("| **contradicted** (effect inside A/A) |")
    # without an A/A pair the caption says so and the column is empty
    plain = render_markdown(evaluate_claims(build_claims(roles), ev, runs, BENCHES, n_boot=200), samples=8)
    assert "This run has no A/A pair" in plain and "(inside A/A)" not in plain

    # Table 1's caption gives the same pair: what two identical arms differ by over these replicates
    from nudgerl.reporting.tables import write_table

    md = write_table(ev, ["base", "grpo8", "nudgerl8"], BENCHES, SIX, str(tmp_path / "t1"), "Table 1", n_boot=100,
                     reference="grpo8", aa=("grpo8", "grpo8_aa"))[1].read_text()
    assert (f"A/A: GRPO (N=8) trained and evaluated twice on the same base models (other RL and sampling seeds) "
            f"differs from itself by {100 * one.aa_mean:+.1f} points of Avg pass@1 (SD {100 * one.aa_sd:.1f} per "
            f"replicate; spread ±{100 * one.aa_spread:.1f})") in md
    assert "A/A" not in write_table(ev, ["base", "grpo8"], BENCHES, SIX, str(tmp_path / "t2"), "Table 1",
                                    n_boot=100)[1].read_text()

    per = replicate_rows(ev, ["base", "grpo32", "nudgerl8"], BENCHES, SIX, n_boot=300)
    nud = per[per.method == "nudgerl8"]
    assert nud.above_reference.all() and (per[per.method == "grpo32"].delta == 0).all()
    assert "| NudgeRL (N=8) |" in render_replicates(per, ["base", "grpo32", "nudgerl8"], samples=8)


def test_our_claim_against_the_fields_fixes_where_they_ran(tmp_path):
    """Claim 8 (ours, labelled so) exists only where baselines ran, on their replicates, and
    takes the paper's verdict rule: one fix significantly better than NudgeRL contradicts it."""
    assert 8 not in {c.number for c in build_claims(ROLES)}
    roles = {**ROLES, "baselines": ["dapo8", "passk8"], "baseline_seeds": [0, 1], "baseline_n": 8}
    claim = {c.number: c for c in build_claims(roles)}[8]
    assert claim.comparisons == [("nudgerl8", "dapo8"), ("nudgerl8", "passk8")] and claim.seeds == [0, 1]
    assert claim.paper == OURS and "(DAPO, Pass@k training)" in claim.text
    ev, runs = tmp_path / "eval", tmp_path / "runs"
    base = np.random.default_rng(1).uniform(0.2, 0.6, size=40)
    seeds = list(range(7))  # one of two comparisons contradicts from 7 replicates (1/128 < 0.025 / 2)
    for s in seeds:
        _write_eval(ev, "nudgerl8", s, np.clip(base + 0.2, 0, 1))
        _write_eval(ev, "dapo8", s, base)
        _write_eval(ev, "passk8", s, np.clip(base + 0.4, 0, 1))
    claim.seeds = seeds
    df = evaluate_claims([claim], ev, runs, BENCHES, n_boot=300)
    assert list(df.worse) == ["dapo8", "passk8"] and set(df.verdict) == {"contradicted"}
    claim.seeds = seeds[:2]
    assert set(evaluate_claims([claim], ev, runs, BENCHES, n_boot=100).verdict) == {"descriptive (n = 2)"}
    assert df.delta.iloc[0] > 0.1 > -0.1 > df.delta.iloc[1]
    assert "| 8 | NudgeRL (N=8) > every exploration fix" in render_markdown(df) and OURS in render_markdown(df)


def _write_diagnosis(path, share):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"summary": {"rare_strategy_share_unhinted": share}}))


def test_claims_in_two_regimes_each_on_its_own_runs(tmp_path):
    """`nudgerl claims --regime ... --cell ...` (the study): one row per claim and regime, each
    judged on that regime's runs only, labelled with what its base models measured; a claim whose
    runs a regime does not train is 'not run' there, not borrowed from the other."""
    import subprocess

    import pandas as pd

    rare, common = tmp_path / "rare", tmp_path / "common"
    base = np.random.default_rng(2).uniform(0.2, 0.6, size=40)
    for s in SIX:
        _write_eval(rare / "eval", "nudgerl8", s, np.clip(base + 0.3, 0, 1))  # rare: NudgeRL ahead
        _write_eval(rare / "eval", "grpo32", s, base)
        _write_eval(common / "eval", "nudgerl8", s, base)  # common: GRPO-32 ahead
        _write_eval(common / "eval", "grpo32", s, np.clip(base + 0.3, 0, 1))
        for root in (rare, common):
            _write_run(root / "runs", "nudgerl8", s, 1000.0)
            _write_run(root / "runs", "grpo32", s, 4000.0)
        _write_diagnosis(common / "diagnostics" / f"seed{s}.json", [0.021, 0.03, 0.043, 0.025, 0.03, 0.035][s])
    (tmp_path / "base_models.csv").write_text("seed,rare_strategy_share_unhinted\n" + "".join(
        f"{s},{x}\n" for s, x in zip(SIX, [0.001, 0.004, 0.012, 0.003, 0.002, 0.005])))
    roles = {"nudgerl": "nudgerl8", "nudgerl_n": 8, "grpo": {"32": "grpo32"}, "pope": None, "seeds": SIX}
    cell = {"regime": "common (map)", "eval_root": str(common / "eval"), "runs_root": str(common / "runs"),
            "roles": roles, "diagnoses": [str(common / "diagnostics" / f"seed{s}.json") for s in SIX]}
    args = ["nudgerl", "claims", "--eval-root", str(rare / "eval"), "--runs-root", str(rare / "runs"),
            "--roles", json.dumps(roles), "--benchmarks", *BENCHES, "--bootstrap-samples", "300",
            "--regime", "rare (matrix)", "--regime-diagnoses", str(tmp_path / "base_models.csv"),
            "--cell", json.dumps(cell), "--out-prefix", str(tmp_path / "claims")]
    subprocess.run(args, check=True, capture_output=True, text=True)
    df = pd.read_csv(tmp_path / "claims.csv")
    one = df[df.claim == 1].set_index("regime").verdict
    assert one.to_dict() == {"rare (matrix): unhinted share 0.1-1.2 % (6 base models)": "supported",
                             "common (map): unhinted share 2.1-4.3 % (6 base models)": "contradicted"}
    assert set(df[df.claim == 3].verdict) == {"not run"} and len(df[df.claim == 3]) == 2
    md = (tmp_path / "claims.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| 1 |")]
    assert len(rows) == 2 and "rare (matrix)" in rows[0] and "common (map)" in rows[1]
    assert "| # | regime | claim |" in md

    # a cell without its runs' folders named: a clear error, nothing written
    bad = subprocess.run([*args[:-4], "--cell", json.dumps({k: v for k, v in cell.items() if k != "runs_root"}),
                          "--out-prefix", str(tmp_path / "bad")], capture_output=True, text=True)
    assert bad.returncode != 0 and "--cell number 1 has no key 'runs_root'" in bad.stderr
    assert not (tmp_path / "bad.csv").exists()


def test_share_range_counts_base_models_in_words():
    from nudgerl.reporting.claims import share_range

    assert share_range([0.012]) == "unhinted share 1.2-1.2 % (1 base model)"
    assert share_range([0.001, 0.009]) == "unhinted share 0.1-0.9 % (2 base models)"
