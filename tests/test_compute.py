"""Compute accounting from Snakemake benchmark TSVs and training metrics."""

import json

import pandas as pd
import pytest

from nudgerl.reporting.compute import write_compute_csv

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def test_compute_csv_rows(tmp_path):
    res = tmp_path / "results"
    (res / "benchmarks" / "train_grpo").mkdir(parents=True)
    (res / "benchmarks" / "base_model.tsv").write_text(HEADER + "226.17\t0:03:46\t705.20\t1\t1\t1\t0\t0\t88\t200.64\n")
    (res / "benchmarks" / "train_grpo" / "grpo8_eps0.28_seed1.tsv").write_text(
        HEADER + "36.0\t0:00:36\t574.97\t1\t1\t1\t0\t0\t90\t30.5\n")
    run = res / "runs" / "grpo8_eps0.28" / "seed1"
    run.mkdir(parents=True)
    rows = [{"step": s, "rollout_tokens": 100.0, "num_tokens": 250.0 * s} for s in (1, 2, 3)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "train_report.json").write_text(json.dumps({"gpus": 2}))
    write_compute_csv(res, res / "tables" / "compute.csv")
    df = pd.read_csv(res / "tables" / "compute.csv").set_index("rule")
    assert df.loc["base_model", "wall_s"] == pytest.approx(226.17)
    assert df.loc["base_model", "max_rss_mb"] == pytest.approx(705.2)
    assert pd.isna(df.loc["base_model", "rollout_tokens"])
    train = df.loc["train_grpo"]
    assert train.method == "grpo8_eps0.28" and train.seed == 1
    assert train.rollout_tokens == 300 and train.trained_tokens == 750 and train.steps == 3
    assert train.gpu_hours == pytest.approx(36.0 * 2 / 3600)
    assert pd.isna(train.attempts)  # no attempt records: the benchmark's seconds


def test_gpu_hours_count_every_attempt_of_a_run(tmp_path):
    """A run over three jobs (two stopped for the time limit, the last finished): the benchmark
    holds the last job's 36 s, the attempt records all three."""
    from nudgerl.io import ATTEMPTS_LOG

    res = tmp_path / "results"
    (res / "benchmarks" / "train_grpo").mkdir(parents=True)
    (res / "benchmarks" / "train_grpo" / "grpo8_seed0.tsv").write_text(HEADER + "36.0\t0:00:36\t5\t1\t1\t1\t0\t0\t90\t30\n")
    run = res / "runs" / "grpo8" / "seed0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "rollout_tokens": 1.0}) + "\n")
    (run / "train_report.json").write_text(json.dumps({"gpus": 1}))
    ends = ["stopped for the time limit", "stopped for the time limit", "finished"]
    (run / ATTEMPTS_LOG).write_text("".join(json.dumps({"attempt": i + 1, "seconds": s, "ended": e}) + "\n"
                                            for i, (s, e) in enumerate(zip([100.0, 100.0, 30.0], ends))) + '{"torn')
    df = pd.read_csv(write_compute_csv(res, res / "compute.csv") and res / "compute.csv")
    train = df.iloc[0]
    assert train.attempts == 3 and train.attempts_s == pytest.approx(230.0)
    assert train.gpu_hours == pytest.approx(230.0 / 3600)


def test_every_gpu_rule_is_charged_its_requested_gpus(tmp_path):
    """An evaluation, a curve and a ranking job have no training report: they are charged wall
    hours x the GPUs their rule asked for; a rule that asked for none (the organism's base
    model) gets no GPU-hours."""
    res = tmp_path / "results"
    for rule, wall in (("evaluate", 7200.0), ("curve_eval", 1800.0), ("rank_hints", 3600.0)):
        (res / "benchmarks" / rule).mkdir(parents=True)
        (res / "benchmarks" / rule / "grpo8_seed0.tsv").write_text(HEADER + f"{wall}\t0\t5\t1\t1\t1\t0\t0\t90\t30\n")
    (res / "benchmarks" / "base_model.tsv").write_text(HEADER + "60.0\t0\t5\t1\t1\t1\t0\t0\t90\t30\n")
    rows = write_compute_csv(res, res / "compute.csv", {"evaluate": 1, "curve_eval": 2, "rank_hints": 1, "base_model": 0})
    hours = {r["rule"]: r["gpu_hours"] for r in rows}
    assert hours == {"evaluate": pytest.approx(2.0), "curve_eval": pytest.approx(1.0), "rank_hints": pytest.approx(1.0),
                     "base_model": None}
    df = pd.read_csv(res / "compute.csv").set_index("rule")
    assert df.loc["curve_eval", "gpus"] == 2 and pd.isna(df.loc["base_model", "gpus"])


def test_a_rerun_does_not_read_the_benchmarks_of_its_own_or_later_jobs(tmp_path):
    """compute_table.tsv and audit.tsv of an earlier run are rewritten after the table is made:
    reading them would leave the new table stale at once (the audit would flag it)."""
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    for rule in ("base_model", "compute_table", "audit"):
        (bench / f"{rule}.tsv").write_text(HEADER + "1.0\t0:00:01\t10\t1\t1\t1\t0\t0\t50\t0.5\n")
    rows = write_compute_csv(tmp_path, tmp_path / "compute.csv")
    assert [r["rule"] for r in rows] == ["base_model"]


def test_empty_benchmarks_is_an_error(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    with pytest.raises(ValueError, match="no benchmark TSVs"):
        write_compute_csv(tmp_path, tmp_path / "compute.csv")
