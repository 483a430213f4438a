"""Compute accounting: what each job of the DAG cost, from Snakemake's benchmark TSVs and
the training metrics.

Per job: wall seconds (``s``), CPU seconds, peak resident memory (``max_rss``, MB), and
for training runs the rollout tokens (sum of generated completion tokens), the trained
tokens (TRL's ``num_input_tokens_seen``: prompt + completion tokens through the policy-
gradient forward pass; NudgeRL's extra hint-free distillation pass is not counted) and,
on GPUs, GPU-hours = wall hours x GPUs of the run. A training run carried over several jobs
(stopped for the time limit, resumed by a retry) or retried after a failure has one benchmark
row, its last job's; its ``attempts.jsonl`` (nudgerl.attempts) gives every attempt's
seconds (``attempts``, ``attempts_s``), and its GPU-hours count them all. Every other GPU
job (evaluation, checkpoint curves, hint ranking) is charged what it asked the scheduler for:
wall hours x the rule's configured GPUs (config ``resources.gpu``), as Slurm bills it.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from nudgerl.io import attempt_seconds, read_jsonl

COLUMNS = ["rule", "method", "seed", "wall_s", "cpu_s", "max_rss_mb", "rollout_tokens", "trained_tokens",
           "steps", "gpus", "gpu_hours", "attempts", "attempts_s", "benchmark_file"]


def read_benchmark_tsv(path: Path) -> dict:
    """The (last) row of a Snakemake ``benchmark:`` TSV."""
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        raise ValueError(f"{path}: benchmark file has no rows")
    return rows[-1]


def job_resources(tsv: Path, bench_root: Path) -> dict:
    """A job's wall seconds, CPU seconds and peak memory (MB) from its benchmark TSV; for a job
    run in the local job server's forked child, whom Snakemake's records do not see, the CPU
    seconds and peak memory its log ends with are added (nudgerl.job_server.logged_usage)."""
    from nudgerl.job_client import logged_usage

    b = read_benchmark_tsv(tsv)
    out = {"wall_s": _float(b.get("s")), "cpu_s": _float(b.get("cpu_time")), "max_rss_mb": _float(b.get("max_rss"))}
    child = logged_usage(bench_root.parent / "logs" / Path(tsv).relative_to(bench_root).with_suffix(".log"))
    if child:
        out["cpu_s"] = (out["cpu_s"] or 0.0) + child["cpu_s"]
        out["max_rss_mb"] = max(out["max_rss_mb"] or 0.0, child["max_rss_mb"])
    return out


def _float(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _job_of(path: Path, bench_root: Path) -> tuple[str, str | None, int | None]:
    """(rule, method, seed) from results/benchmarks/<rule>[/<method>_seed<k>].tsv."""
    rel = path.relative_to(bench_root)
    if len(rel.parts) == 1:
        return rel.stem, None, None
    rule = rel.parts[0]
    m = re.fullmatch(r"(.+)_seed(\d+)", rel.stem)
    return (rule, m.group(1), int(m.group(2))) if m else (rule, rel.stem, None)


def run_tokens(run_dir: Path) -> dict:
    """Rollout and trained tokens of a finished training run, from its metrics.jsonl."""
    rows = read_jsonl(Path(run_dir) / "metrics.jsonl")
    if not rows:
        return {}
    trained = [r.get("num_tokens") for r in rows if r.get("num_tokens") is not None]
    report = Path(run_dir) / "train_report.json"
    gpus = json.loads(report.read_text()).get("gpus", 0) if report.exists() else 0
    return {"rollout_tokens": sum(r.get("rollout_tokens", 0.0) for r in rows),
            "trained_tokens": max(trained) if trained else None,  # TRL logs it cumulatively
            "steps": max(r["step"] for r in rows), "gpus": gpus}


# Jobs that run while or after the table is made: their benchmark files are (re)written
# later, so a file left by an earlier run would make the table stale the moment it is done
# (the checkpoint prunes run after the curves, beside the table: local file deletions).
NOT_ACCOUNTED = ("compute_table", "audit", "prune_checkpoints")


def compute_table(results: Path, gpus_per_rule: dict[str, int] | None = None) -> list[dict]:
    """One row per benchmarked job under ``results/benchmarks`` (but NOT_ACCOUNTED);
    ``gpus_per_rule``: config ``resources.gpu`` (the GPUs each rule's jobs asked for)."""
    gpus_per_rule = gpus_per_rule or {}
    results = Path(results)
    bench_root = results / "benchmarks"
    rows = []
    for tsv in sorted(bench_root.rglob("*.tsv")):
        rule, method, seed = _job_of(tsv, bench_root)
        if rule in NOT_ACCOUNTED:
            continue
        row = {c: None for c in COLUMNS}
        row.update(rule=rule, method=method, seed=seed, **job_resources(tsv, bench_root), benchmark_file=str(tsv))
        if rule.startswith("train_") and method is not None and seed is not None:
            run_dir = results / "runs" / method / f"seed{seed}"
            tok = run_tokens(run_dir)
            row.update(tok)
            tried = attempt_seconds(run_dir)
            if tried:
                row["attempts"], row["attempts_s"] = tried
            # every attempt's seconds where they were recorded (they exclude each job's start)
            wall = max(row["wall_s"] or 0.0, row["attempts_s"] or 0.0) if row["wall_s"] is not None else None
            if tok.get("gpus") and wall is not None:
                row["gpu_hours"] = wall * tok["gpus"] / 3600
        elif int(gpus_per_rule.get(rule, 0) or 0) >= 1 and row["wall_s"] is not None:
            row["gpus"] = int(gpus_per_rule[rule])
            row["gpu_hours"] = row["wall_s"] * row["gpus"] / 3600
        rows.append(row)
    return rows


def write_compute_csv(results: Path, out: Path, gpus_per_rule: dict[str, int] | None = None) -> list[dict]:
    import pandas as pd

    from nudgerl.io import atomic_write_text

    rows = compute_table(results, gpus_per_rule)
    if not rows:
        raise ValueError(f"{results}/benchmarks has no benchmark TSVs")
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("seed", "steps", "gpus", "attempts"):
        df[col] = df[col].astype("Int64")
    atomic_write_text(out, df.to_csv(index=False))
    return rows
