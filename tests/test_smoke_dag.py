"""The real DAG, end to end, on config/smoke.yaml (real Snakemake, real TRL, real grader)."""

import itertools
import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import merged_config

pytestmark = pytest.mark.slow

RESULTS = "results/smoke"  # the smoke config's run folder (run_name: smoke)


def sign_flip_sides(deltas: list[float], shift: float = 0.0) -> tuple[float, float]:
    """(p for, p against) of the exact sign-flip test of mean(deltas + shift) against 0, over
    every one of the 2^n sign patterns (nudgerl.verdicts asks scipy's permutation_test)."""
    d = np.asarray(deltas, dtype=float) + shift
    means = (np.array(list(itertools.product((1, -1), repeat=len(d)))) * d).mean(axis=1)
    return float(np.mean(means >= d.mean() - 1e-9)), float(np.mean(means <= d.mean() + 1e-9))


def rule_verdict(rows: pd.DataFrame, results: Path, alpha: float, min_replicates: int, parity_margin: float,
                 **_) -> str:
    """The verdict rule (docs/methods.md "Verdicts"), written out again, on one claim's rows of
    claims.csv: "not run" where a method of the claim did not run (one row, no comparison), else
    descriptive below the minimum, supported where every comparison's p for is below alpha / 2,
    contradicted where some p against is below alpha / (2 k), else inconclusive. Each row's p
    values are checked against its own replicate deltas (exact over the sign patterns) and its
    methods' evaluations are checked to exist on the claimed seeds."""
    if rows.better.isna().all():
        assert len(rows) == 1 and rows.note.iloc[0].startswith("not in this DAG: "), rows.to_dict("records")
        return "not run"
    n = int(rows.replicates.iloc[0])
    for r in rows.itertuples():
        seeds, deltas = str(r.seeds).split(), [float(x) for x in str(r.replicate_deltas).split()]
        assert len(seeds) == len(deltas) == n == r.n_better == r.n_worse
        assert all((results / "eval" / m / f"seed{s}" / "summary.json").exists() for m in (r.better, r.worse)
                   for s in seeds), (r.better, r.worse, seeds)
        shift = parity_margin if r.kind == "parity" else 0.0  # non-inferiority: the margin moves the deltas
        assert sign_flip_sides(deltas, shift) == (r.p_for, r.p_against), (r.claim, r.better, r.worse, deltas)
    if n < min_replicates:
        return f"descriptive (n = {n})"
    if (rows.p_for < alpha / 2).all():
        return "supported"
    if (rows.p_against < alpha / (2 * len(rows))).any():
        return "contradicted"
    return "inconclusive"


def snakemake(workdir, *args, timeout=900):
    proc = subprocess.run(["snakemake", *args], cwd=workdir, capture_output=True, text=True, timeout=timeout)
    return proc


# smoke_run (conftest.py): the finished smoke DAG in a scratch checkout, shared with
# test_one_checkout.py.


def test_table1_has_base_and_every_grpo_row(smoke_run):
    res = smoke_run / RESULTS
    df = pd.read_csv(res / "tables" / "table1.csv")
    assert set(df.label) == {"Base", "GRPO (N=2)", "GRPO (N=8)", "GRPO (N=16)", "POPE (N=2)", "NudgeRL (N=2)"}
    assert set(df.benchmark) == {"aime24", "aime25", "amc23", "math500", "apex", "avg"}
    assert df["pass@1"].between(0, 1).all() and (df.ci_low <= df["pass@1"]).all()
    assert (df.seeds == 2).all()  # two replicates pooled in every cell
    md = (res / "tables" / "table1.md").read_text()
    assert "| GRPO (N=8) |" in md and "2 replicates (seeds 0, 1;" in md
    # exploration success on each method's Avg row (organism runs): k of n replicates
    avg = df[df.benchmark == "avg"]
    assert (avg.found_replicates == 2).all() and avg.found.between(0, 2).all() and "| Found |" in md
    assert r"\begin{tabular}" in (res / "tables" / "table1.tex").read_text()


def test_replicates_have_their_own_base_models_and_tables(smoke_run):
    res = smoke_run / RESULTS
    weights = [(res / "models" / "base" / f"seed{s}" / "model.safetensors").read_bytes() for s in (0, 1)]
    assert weights[0] != weights[1]  # one SFT seed each
    per = pd.read_csv(res / "tables" / "table1_replicates.csv")
    assert set(per.seed) == {0, 1} and set(per.method) == {"base", "grpo2", "grpo8", "grpo16", "pope2", "nudgerl2"}
    trained = per[per.method != "base"]
    assert trained.delta.notna().all() and (trained.ci_low <= trained.ci_high).all()
    assert "| seed 0 | seed 1 | mean |" in (res / "tables" / "table1_replicates.md").read_text()
    table = pd.read_csv(res / "diagnostics" / "base_models.csv")
    assert list(table.seed) == [0, 1] and not table.in_regime.any()  # the tiny smoke model is out of regime
    verdict = json.loads((res / "diagnostics" / "base_model" / "seed1.regime.json").read_text())
    bounded = {f["figure"] for f in verdict["figures"] if f["min"] is not None or f["max"] is not None}
    assert verdict["gate"] is False and bounded == {
        "hinted_rare_pass@1_hard", "unhinted_pass@1_hard", "rare_strategy_share_unhinted",
        "rare_strategy_accuracy_unhinted"}
    assert "rare_strategy_accuracy_chosen" in {f["figure"] for f in verdict["figures"]}  # reported, no bound
    # every figure judged with its interval, on the hard training problems
    assert all(f["low"] <= f["value"] <= f["high"] for f in verdict["figures"] if f["value"] is not None)
    assert verdict["rl_prompts"]["samples_per_problem"] == 2 and verdict["rl_prompts"]["problems"] > 0
    # the RL and sampling seeds follow the replicate: the two GRPO runs are different runs
    a, b = ((res / "runs" / "grpo8" / f"seed{s}" / "metrics.jsonl").read_text() for s in (0, 1))
    assert a != b


def test_exploration_table_has_every_run(smoke_run):
    res = smoke_run / RESULTS
    df = pd.read_csv(res / "tables" / "exploration.csv")
    assert set(zip(df.method, df.seed)) == {(m, s) for m in ("base", "grpo2", "grpo8", "grpo16", "pope2", "nudgerl2")
                                            for s in (0, 1)}
    assert (df.strategy_share == df.strategy_uses / df.hard_samples).all() and (df.hard_samples > 0).all()
    assert (df.run_found == (df.strategy_share > 0.5)).all()  # config/config.yaml's success_share
    per_method = df.groupby("method").run_found.sum()
    assert (df.set_index("method").found.groupby("method").first() == per_method).all()
    assert (df.ci_low <= df.rate).all() and (df.rate <= df.ci_high).all()
    assert df[df.method == "grpo8"].p_vs_reference.isna().all()  # the reference itself
    assert "| GRPO (N=8) |" in (res / "tables" / "exploration.md").read_text()


def test_the_field_baselines_train_with_their_options_and_get_a_table(smoke_run):
    """Each baseline of config.yaml trained (seed 0) with its options in TRL's own GRPOConfig
    (the job's training_args.bin) or, for an estimator TRL lacks, in the run's config; the
    baselines table sets them beside GRPO-8/16 and NudgeRL."""
    import torch
    import yaml

    from nudgerl.training.grpo_config import TRL_FIELDS

    baselines = yaml.safe_load((smoke_run / "config" / "config.yaml").read_text())["baselines"]["methods"]
    assert len(baselines) == 7
    grpo8 = torch.load(smoke_run / RESULTS / "runs" / "grpo8" / "seed0" / "model" / "training_args.bin",
                       weights_only=False)
    shape = ("num_generations", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps",
             "learning_rate", "seed")
    for name, overrides in baselines.items():
        model = smoke_run / RESULTS / "runs" / f"{name}8" / "seed0" / "model"
        args = torch.load(model / "training_args.bin", weights_only=False)
        assert [getattr(args, k) for k in shape] == [getattr(grpo8, k) for k in shape], name  # GRPO-8's batching
        for key, value in overrides.items():
            if key in TRL_FIELDS:
                assert getattr(args, key) == value, (name, key)
        recorded = json.loads((model / "provenance.json").read_text())["config"]
        assert {k: recorded.get(k) for k in overrides} == overrides, name
    table = pd.read_csv(smoke_run / RESULTS / "tables" / "baselines.csv")
    assert list(dict.fromkeys(table.method)) == ["grpo8", "nudgerl2", *(f"{n}8" for n in baselines)]
    md = (smoke_run / RESULTS / "tables" / "baselines.md").read_text()
    assert "| DAPO (N=8) |" in md and "| Pass@k training (N=8) |" in md
    dapo = [json.loads(line) for line in
            (smoke_run / RESULTS / "runs" / "dapo8" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert all(0 <= r["dynamic_sampling/dropped_groups"] <= 1 for r in dapo)  # DAPO's dynamic sampling ran
    figure = json.loads((smoke_run / RESULTS / "figures" / "baselines.json").read_text())
    assert [s["method"] for s in figure["series"]] == ["grpo8", "nudgerl2", *(f"{n}8" for n in baselines)]
    assert all(s["x"][0] > 0 and s["seeds"] == [0] for s in figure["series"])  # rollout tokens, baseline seeds


def test_claims_table_has_the_papers_seven_claims_and_ours_with_verdicts(smoke_run):
    res = smoke_run / RESULTS
    df = pd.read_csv(res / "tables" / "claims.csv")
    assert sorted(df.claim.unique()) == list(range(1, 9))  # 8: ours, the smoke run trains the baselines
    # 2 and 1 replicates: below the rule's minimum (report.verdicts.min_replicates), no verdict
    assert set(df[df.claim <= 3].verdict) == {"descriptive (n = 2)"}
    # every claim's verdict is the rule's on the table's own numbers, its p values those of its deltas
    rule = merged_config("smoke.yaml")["report"]["verdicts"]
    for claim, rows in df.groupby("claim"):
        assert set(rows.verdict) == {rule_verdict(rows, res, **rule)}, rows.to_dict("records")
    assert set(df[df.claim <= 3].replicates) == {2} and set(df[df.claim >= 4].replicates) == {1}
    # the A/A pair (grpo8 again, seeds + 1000) ran on both replicates: its spread stands beside claims 1-3
    assert df[df.claim <= 3].aa_spread.notna().all() and df[df.claim <= 3].p_for.between(0, 1).all()
    from nudgerl.io import sidecar_path

    seeds = json.loads(sidecar_path(res / "runs" / "grpo8_aa" / "seed1" / "model").read_text())["seeds"]
    assert seeds == {"train": 1001}  # the replicate's base model, RL seed moved by the pair's offset
    assert (res / "eval" / "grpo8_aa" / "seed1" / "summary.json").exists()
    assert df[df.claim == 1].rollout_token_ratio.notna().any()
    assert len(df[df.claim == 8]) == 7 and set(df[df.claim == 8].better) == {"nudgerl2"}
    md = (res / "tables" / "claims.md").read_text()
    assert md.count("\n| ") == 9 and "0.489 vs 0.487" in md and "not the paper's (ours)" in md
    assert "A/A:" in md and "(seeds 0 1)" in md
    power = (res / "tables" / "power.md").read_text()
    assert "| Table 1, claims 1-3 | 2 | no verdict |" in power


def test_training_metrics_and_checkpoints(smoke_run):
    run = smoke_run / RESULTS / "runs" / "grpo8" / "seed0"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # smoke trains 2 optimizer steps per generation batch (for the eps_high sweep): rollout
    # metrics are logged on the step after each generation
    assert [r["step"] for r in rows] == [1, 3]
    for key in ("reward_mean", "frac_zero_variance_groups", "completion_length_mean", "rollout_tokens", "step_time"):
        assert all(r[key] is not None for r in rows), key
    # 2 prompts x N=8 rollouts per generation batch
    assert all(r["rollouts"] == 16 for r in rows)
    assert (run / "checkpoints" / "checkpoint-2").is_dir()
    assert (run / "model" / "config.json").exists()
    assert (run / "model" / "provenance.json").exists()


def test_evaluation_records_and_diagnostics(smoke_run):
    res = smoke_run / RESULTS
    summary = json.loads((res / "eval" / "grpo2" / "seed0" / "summary.json").read_text())
    assert set(summary) == {"aime24", "aime25", "amc23", "math500", "apex"}
    assert set(summary["apex"]["pass@k"]) == {"1", "2"}
    samples = (res / "eval" / "base" / "seed0" / "apex.samples.jsonl").read_text().splitlines()
    assert len(samples) == 4 * 2  # 4 problems x 2 samples
    diag = json.loads((res / "diagnostics" / "base_model" / "seed0.json").read_text())
    from nudgerl.organism import families  # the default's task (config/config.yaml)

    assert set(diag["summary"]["hinted_pass@1"]) == set(families.STRATEGIES)
    assert (res / "figures" / "training_curves.png").stat().st_size > 10_000
    prov = json.loads((res / "tables" / "table1.csv.provenance.json").read_text())
    assert prov["code_version"] and prov["packages"]["trl"] == "1.16.0" and prov["inputs"]


def test_rerun_has_nothing_to_do(smoke_run):
    proc = snakemake(smoke_run, "-n", "--cores", "2", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_lint_passes(smoke_run):
    proc = snakemake(smoke_run, "--lint", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_report_holds_every_declared_result(smoke_run_copy):
    """`snakemake --report` as a user opens it: every file the workflow marks with report()
    (asked from Snakemake, so a result added later is checked too) is embedded byte for byte,
    shown inline (not a download link), captioned and labelled; Table 1 opens the first
    category."""
    smoke_run = smoke_run_copy  # a copy: the report run writes report.html and Snakemake metadata
    from snakemake_report import INLINE, declared_report_files, embedded_bytes, report_entries

    proc = snakemake(smoke_run, "--cores", "1", "--configfile", "config/smoke.yaml", "--report", "report.html")
    assert proc.returncode == 0, proc.stderr[-3000:]
    declared = declared_report_files(smoke_run, "config/smoke.yaml")
    figures = {f"{RESULTS}/figures/{n}.png" for n in ("training_curves", "eps_high_scaling", "strategy_diversity",
                                                      "case_study", "compute_matched", "training_reward")}
    assert {f"{RESULTS}/tables/table1.html", f"{RESULTS}/tables/compute.html", *figures} <= set(declared)
    results, categories = report_entries(smoke_run / "report.html")
    assert set(results) == set(declared)
    for path in declared:
        entry = results[path]
        assert embedded_bytes(entry) == (smoke_run / path).read_bytes(), path
        assert path.endswith(INLINE), f"{path} would only be a download link in the report: add an HTML page"
        assert entry["caption"].strip() and entry["labels"]["Result"], path
    placed = [p for cat in categories.values() for paths in cat.values() for p in paths]
    assert sorted(placed) == sorted(declared)  # each result in exactly one category
    first = sorted(categories)[0]
    assert f"{RESULTS}/tables/table1.html" in [p for paths in categories[first].values() for p in paths]
    table1 = embedded_bytes(results[f"{RESULTS}/tables/table1.html"]).decode()
    assert "<table>" in table1 and "GRPO (N=8)" in table1 and "Table 1: pass@1 (%)" in table1


def test_nudgerl_runs_pools_and_ablation_tables(smoke_run):
    res = smoke_run / RESULTS
    pools = [json.loads(line) for line in (res / "pools" / "pools_organism.jsonl").read_text().splitlines()]
    assert len(pools) == 64 and all(len(p["hints"]) == 3 for p in pools)
    ranked = [json.loads(line) for line in
              (res / "pools" / "pools_organism.ranked.seed0.jsonl").read_text().splitlines()]
    assert all(len(r["hints"]) == 2 and set(r["scores"]) == set(p["hints"]) for r, p in zip(ranked, pools))
    rows = [json.loads(line) for line in (res / "runs" / "nudgerl2" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert all("nudge/frac_hinted" in r and "nudge/distill_loss" in r for r in rows)
    for name, labels in [("pdrop", {"p_drop = 0.5", "p_drop = 1"}),
                         ("hint_sampling", {"sequential (main)", "random", "top-ranked"}),
                         ("distill", {"lambda_distill = 0", "lambda_distill = 0.1"})]:
        df = pd.read_csv(res / "tables" / f"ablation_{name}.csv")
        assert set(df.label) == labels, name
        assert (res / "tables" / f"ablation_{name}.tex").read_text().count(r"\\") >= len(labels)
    # p_drop = 1 drops every hint: no rollout of that run was hinted
    rows = [json.loads(line) for line in
            (res / "runs" / "nudgerl2_pdrop1" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["nudge/frac_hinted"] == 0.0 for r in rows)


def test_five_figures_with_their_series(smoke_run):
    fig = smoke_run / RESULTS / "figures"
    for name in ("training_curves", "eps_high_scaling", "strategy_diversity", "case_study", "compute_matched"):
        assert (fig / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name
        assert (fig / f"{name}.pdf").read_bytes()[:4] == b"%PDF", name
        assert (fig / f"{name}.png.provenance.json").exists(), name
    curves = json.loads((fig / "training_curves.json").read_text())
    # eval.curve.every = 2 with max_steps = 3: base model, checkpoint-2, final model
    assert {s["method"]: s["x"] for s in curves["series"]} == {m: [0, 2, 3] for m in ("grpo2", "grpo8", "grpo16",
                                                                                       "nudgerl2")}
    eps = json.loads((fig / "eps_high_scaling.json").read_text())
    assert eps["series"][0]["methods"] == ["grpo2", "grpo2_eps0.3"] and eps["reference"]["method"] == "nudgerl2"
    div = json.loads((fig / "strategy_diversity.json").read_text())
    assert [s["label"] for s in div["series"]] == ["naive sampling", "nudged (pool hints)"]
    assert all(sum(s["y"]) == 4 for s in div["series"])  # 4 problems
    case = json.loads((fig / "case_study.json").read_text())
    assert [s["method"] for s in case["series"]] == ["grpo8", "nudgerl2"]
    assert all(sum(s["y"]) == 4 for s in case["series"])  # 4 samples each
    matched = json.loads((fig / "compute_matched.json").read_text())
    series = {s["method"]: s for s in matched["series"]}
    assert {"base", "grpo2", "grpo8", "pope2", "nudgerl2", "grpo2_eps0.3"} <= set(series)
    assert series["grpo8"]["seeds"] == [0, 1] and series["nudgerl2_pdrop1"]["seeds"] == [0]
    df = pd.read_csv(smoke_run / RESULTS / "tables" / "table1.csv")
    assert df[df.method == "grpo2"]["p_vs_ref"].notna().sum() == 5 and df[df.method == "grpo8"]["p_vs_ref"].isna().all()


def test_compute_table(smoke_run):
    df = pd.read_csv(smoke_run / RESULTS / "tables" / "compute.csv")
    train = df[df.rule.str.startswith("train_")]
    assert set(train.method) >= {"grpo2", "grpo8", "grpo2_eps0.3", "nudgerl2", "pope2"}
    assert (train.rollout_tokens > 0).all() and (train.trained_tokens > train.rollout_tokens).all()
    assert (df.wall_s > 0).all()
    # every training run's attempts are recorded (nudgerl.attempts): one each here
    assert (train.attempts >= 1).all() and (train.attempts_s > 0).all()
    # Snakemake samples memory while a job runs: jobs under a second may record none
    long_jobs = df[df.rule.str.startswith("train_") | df.rule.isin(["evaluate", "base_model"])]
    assert (long_jobs.max_rss_mb > 0).all()
    assert {"curve_eval", "evaluate", "base_model", "strategy_diversity", "case_study"} <= set(df.rule)
    # The smoke config runs its jobs through the local job server (nudgerl.job_server): every
    # `nudgerl` job's log ends with its forked child's usage, which the table counts (Snakemake's
    # own records see only the job's small client process, ~0.1 CPU s).
    from nudgerl.job_client import logged_usage

    for job in long_jobs.itertuples():
        rule_dir, tsv = Path(job.benchmark_file).parts[-2:]  # <results>/benchmarks/<rule>/<job>.tsv
        log = smoke_run / RESULTS / "logs" / rule_dir / tsv.replace(".tsv", ".log")
        usage = logged_usage(log)
        assert usage is not None, log
        assert job.cpu_s >= usage["cpu_s"] > 0 and job.max_rss_mb >= usage["max_rss_mb"] > 100


def test_audit_passes_then_names_a_hand_edited_record(smoke_run_copy):
    import os

    smoke_run = smoke_run_copy  # a copy: this test hand-edits a result (restored below all the same)
    assert "nudgerl audit: OK" in (smoke_run / RESULTS / "audit" / "audit.txt").read_text()
    proc = subprocess.run(["nudgerl", "audit"], cwd=smoke_run, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = smoke_run / RESULTS / "eval" / "nudgerl2" / "seed0" / "apex.problems.jsonl"
    before, stat = record.read_text(), record.stat()
    rows = [json.loads(line) for line in before.splitlines()]
    rows[0]["c"] = 0 if rows[0]["c"] else rows[0]["n"]  # a hand edit that changes a result
    record.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        proc = subprocess.run(["nudgerl", "audit"], cwd=smoke_run, capture_output=True, text=True)
        assert proc.returncode == 1
        assert f"[modified] {RESULTS}/eval/nudgerl2/seed0/apex.problems.jsonl" in proc.stdout, proc.stdout
    finally:
        record.write_text(before)
        os.utime(record, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_pool_stage_restores_from_dvc_cache(smoke_run_copy):
    # on a copy: re-running the stage rewrites its Snakemake benchmark record, which the shared
    # run's compute table has read (its audit would then call that table stale)
    work = smoke_run_copy
    pools = work / RESULTS / "pools" / "pools_organism.jsonl"
    before = pools.read_text()
    pools.unlink()
    proc = snakemake(work, f"{RESULTS}/pools/pools_organism.jsonl", "--cores", "1", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pools.read_text() == before
    log = (work / RESULTS / "logs" / "strategy_pools.log").read_text()
    # DVC restored the outputs from its cache: the stage command (the backend) did not run.
    assert "is cached - skipping run" in log, log
    assert "Running stage" not in log


def test_pope_run_used_oracle_prefixes(smoke_run):
    res = smoke_run / RESULTS
    from nudgerl.organism import families  # the default's task: each problem's own family's strategy

    oracles = [json.loads(line) for line in (res / "oracles" / "oracles_organism.jsonl").read_text().splitlines()]
    own = {r["id"]: r["rare_strategy"] for r in map(json.loads, (res / "data" / "train.jsonl").read_text().splitlines())}
    assert len(oracles) == 64 and all(
        o["solution"].startswith(f"strategy : {families.STRATEGIES[own[o['id']]].words} .") for o in oracles)
    assert len({own[o["id"]] for o in oracles}) == len(families.FAMILIES)  # every family's strategy
    report = json.loads((res / "runs" / "pope2" / "seed0" / "train_report.json").read_text())
    assert 20 < report["guided_problems"] < 44  # about half of the 64 problems
