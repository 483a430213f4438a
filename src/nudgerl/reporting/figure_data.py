"""The records the figures plot, read into plain series (no matplotlib here; the drawing is
in :mod:`nudgerl.reporting.figures`, the subcommands in :mod:`nudgerl.reporting.figure_cli`).

- checkpoint curves (``results/curves/<method>/seed<k>/curve.jsonl``, written by ``curve-eval``):
  :func:`load_curves`, :func:`curve_points` (pass@1 per step, the mean over replicates, with a
  bootstrap interval), :func:`curve_replicates` (each replicate's own curve);
- evaluation records (``<eval_root>/<method>/seed<k>/<bench>.problems.jsonl``): :func:`avg_pass1`;
- training metrics (``results/runs/<method>/seed<k>/metrics.jsonl``, one row per optimizer
  step, written by every run whatever ``grpo.report_to`` says; TensorBoard event files, when
  asked for, are in ``<run>/tensorboard/`` and not read here): :func:`run_rollout_tokens`,
  :func:`load_run_metrics`, :func:`moving_average`, :func:`replicate_bands` (each method's
  mean over its replicates with their range).

Intervals are percentile bootstraps over problems (and seeds when several), as in the tables.
:func:`seed_of_path` reads the replicate a run, model or evaluation folder belongs to.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from nudgerl.algorithms import bootstrap_mean_of_means
from nudgerl.io import read_jsonl
from nudgerl.reporting.tables import per_problem_matrix


def _pass1_with_ci(mats: list[np.ndarray], n_boot: int) -> tuple[float, float, float]:
    return bootstrap_mean_of_means(mats, n_boot=n_boot)


# ---------------------------------------------------------------- checkpoint curves


def load_curves(curve_files: list[str | Path]) -> dict[str, list[dict]]:
    """Rows of results/curves/<method>/seed<k>/curve.jsonl, grouped by method (seed added)."""
    out: dict[str, list[dict]] = {}
    for f in map(Path, curve_files):
        method, seed = f.parent.parent.name, int(f.parent.name.removeprefix("seed"))
        for r in read_jsonl(f):
            out.setdefault(method, []).append({**r, "seed": seed})
    return out


def seed_of_path(path: str | Path) -> int | None:
    """The replicate of a folder under ``.../seed<k>`` (``results/runs/grpo8/seed0/model``,
    ``shared/models/base/seed2``): its innermost ``seed<k>`` part; None where there is none."""
    for part in reversed(Path(path).parts):
        if found := re.fullmatch(r"seed(\d+)", part):
            return int(found.group(1))
    return None


def curve_points(rows: list[dict], benchmarks: list[str], n_boot: int) -> list[dict]:
    """Per step: mean over benchmarks of pass@1 (problems x seeds: the mean over the replicates),
    interval, rollout tokens, and the seeds it rests on (``seeds``, a list)."""
    points = []
    for step in sorted({r["step"] for r in rows}):
        at = [r for r in rows if r["step"] == step]
        seeds = sorted({r["seed"] for r in at})
        mats = []
        for b in benchmarks:
            cols = []
            for s in seeds:
                match = [r for r in at if r["benchmark"] == b and r["seed"] == s]
                if not match:
                    raise ValueError(f"curve has no {b} records at step {step} for seed {s}")
                probs = sorted(match[0]["problems"], key=lambda p: p["id"])
                cols.append([p["c"] / p["n"] for p in probs])
            mats.append(np.array(cols).T)
        mean, lo, hi = _pass1_with_ci(mats, n_boot)
        tokens = [r["cumulative_rollout_tokens"] for r in at if r.get("cumulative_rollout_tokens") is not None]
        points.append({"step": step, "pass@1": mean, "ci_low": lo, "ci_high": hi,
                       "cumulative_rollout_tokens": float(np.mean(tokens)) if tokens else None,
                       "seeds": seeds, "samples_per_problem": at[0].get("samples_per_problem")})
    return points


def curve_replicates(rows: list[dict], benchmarks: list[str]) -> list[dict]:
    """Each replicate's own curve, in seed order: ``{"seed", "step", "pass@1"}``, pass@1 the mean
    over ``benchmarks`` of the mean over problems (the replicates' mean is
    :func:`curve_points`' line)."""
    out = []
    for seed in sorted({r["seed"] for r in rows}):
        mine = [r for r in rows if r["seed"] == seed and r["benchmark"] in benchmarks]
        steps = sorted({r["step"] for r in mine})
        values = []
        for step in steps:
            at = [r for r in mine if r["step"] == step]
            values.append(float(np.mean([np.mean([p["c"] / p["n"] for p in r["problems"]]) for r in at])))
        out.append({"seed": seed, "step": steps, "pass@1": values})
    return out


# ---------------------------------------------------------------- evaluation records


def avg_pass1(eval_root: Path, method: str, benchmarks: list[str], seeds: list[int], n_boot: int):
    mats = [per_problem_matrix(eval_root, method, b, seeds)[0] for b in benchmarks]
    return _pass1_with_ci(mats, n_boot)


def eval_samples_per_problem(eval_root: Path, method: str, benchmarks: list[str], seeds: list[int]) -> int:
    """The samples per problem ``method`` was evaluated with (eval.samples_per_role: a run's role
    sets it, so two points of one figure may differ)."""
    return per_problem_matrix(eval_root, method, benchmarks[0], seeds)[1]


# ---------------------------------------------------------------- training metrics


def run_rollout_tokens(runs_root: Path, method: str, seeds: list[int]) -> float:
    """Mean over seeds of a run's total rollout tokens (0 for the untrained base model)."""
    if method == "base":
        return 0.0
    totals = []
    for s in seeds:
        rows = read_jsonl(Path(runs_root) / method / f"seed{s}" / "metrics.jsonl")
        totals.append(rows[-1]["cumulative_rollout_tokens"] if rows else 0.0)
    return float(np.mean(totals))


def load_run_metrics(run_dirs: list[str | Path]) -> list[tuple[str, str, list[dict]]]:
    """``(method, seed folder name, metrics.jsonl rows)`` of each run folder
    ``results/runs/<method>/seed<k>``, in the order given."""
    runs = []
    for run in run_dirs:
        rows = read_jsonl(Path(run) / "metrics.jsonl")
        if not rows:
            raise ValueError(f"{run}/metrics.jsonl has no rows")
        runs.append((Path(run).parent.name, Path(run).name, rows))
    return runs


def moving_average(values: list[float], window: int) -> list[float]:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    out, acc = [], []
    for v in values:
        acc.append(v)
        acc = acc[-window:]
        out.append(sum(acc) / len(acc))
    return out


def replicate_bands(runs: list[tuple[str, str, list[dict]]], window: int = 5,
                    key: str = "reward_mean") -> list[dict]:
    """Each method of ``runs`` (:func:`load_run_metrics`), in order of first appearance: the
    ``window``-step moving average of ``key`` of every replicate, and at the steps all its
    replicates logged, their mean with the range (min, max) and the mean cumulative rollout
    tokens. Keys: method, seeds, replicates (seed, step, tokens, value), step, tokens, mean,
    low, high."""
    by_method: dict[str, list[tuple[str, list[dict]]]] = {}
    for method, seed, rows in runs:
        by_method.setdefault(method, []).append((seed, rows))
    out = []
    for method, reps in by_method.items():
        replicates = [{"seed": seed, "step": [r["step"] for r in rows],
                       "tokens": [r["cumulative_rollout_tokens"] for r in rows],
                       "value": moving_average([r[key] for r in rows], window)} for seed, rows in reps]
        steps = sorted(set.intersection(*(set(r["step"]) for r in replicates)))
        at = [{s: i for i, s in enumerate(r["step"])} for r in replicates]
        vals = np.array([[r["value"][ix[s]] for s in steps] for r, ix in zip(replicates, at)]).reshape(len(reps), -1)
        toks = np.array([[r["tokens"][ix[s]] for s in steps] for r, ix in zip(replicates, at)]).reshape(len(reps), -1)
        out.append({"method": method, "seeds": [seed for seed, _ in reps], "replicates": replicates, "step": steps,
                    "tokens": toks.mean(axis=0).tolist(), "mean": vals.mean(axis=0).tolist(),
                    "low": vals.min(axis=0).tolist(), "high": vals.max(axis=0).tolist()})
    return out
