"""Periodic evaluation of a training run's intermediate checkpoints (paper Fig. 3).

Step 0 is the base model, step s the TRL checkpoint ``checkpoints/checkpoint-s`` (every
``eval.curve.every`` steps), and the last step the run's final ``model/``. TRL keeps every
checkpoint (the pipeline sets no ``save_total_limit``), so ``every`` must be a multiple of
``grpo.checkpoint_every`` (checked in preflight).
"""

from __future__ import annotations

import json
from pathlib import Path

from nudgerl.evaluation.grading import DEFAULT_MODE
from nudgerl.io import read_jsonl, write_jsonl


def curve_steps(final_step: int, every: int) -> list[int]:
    """0, every, 2 every, ... below the final step, then the final step."""
    if every < 1:
        raise ValueError(f"eval.curve.every must be >= 1, got {every}")
    return [0, *range(every, final_step, every), final_step] if final_step > 0 else [0]


def checkpoint_models(run_dir: Path, base_model: str, every: int) -> list[tuple[int, str, float]]:
    """(step, model folder, cumulative rollout tokens at that step) for every curve point."""
    run_dir = Path(run_dir)
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    if not metrics:
        raise ValueError(f"{run_dir}/metrics.jsonl has no rows")
    report = run_dir / "train_report.json"
    # with num_iterations > 1 metrics rows exist only at generation steps; the final model
    # sits at the trainer's last optimizer step
    final = json.loads(report.read_text())["global_step"] if report.exists() else max(r["step"] for r in metrics)

    def tokens_at(step):  # rollout tokens generated up to this optimizer step
        return max((r["cumulative_rollout_tokens"] for r in metrics if r["step"] <= step), default=0.0)

    points = []
    for step in curve_steps(final, every):
        if step == 0:
            model, tok = base_model, 0.0
        elif step == final:
            model, tok = str(run_dir / "model"), tokens_at(step)
        else:
            model, tok = str(run_dir / "checkpoints" / f"checkpoint-{step}"), tokens_at(step)
            if not Path(model, "model.safetensors").exists() and not Path(model, "adapter_config.json").exists():
                raise FileNotFoundError(
                    f"{model}: no checkpoint for step {step}; eval.curve.every ({every}) must be a multiple of "
                    f"grpo.checkpoint_every and the run's checkpoints must be kept")
        points.append((step, model, tok))
    return points


def evaluate_checkpoints(run_dir: Path, base_model: str, benchmarks: dict[str, list[dict]], every: int,
                         sampling, out: Path, parse_strategy=None, template=None, revision: str | None = None,
                         backend: str = "transformers", grader_mode: str = DEFAULT_MODE) -> list[dict]:
    """One row per (step, benchmark): per-problem c/n and pass@1. Written as JSONL to ``out``.
    ``template``/``revision``/``backend``/``grader_mode`` as in :func:`nudgerl.evaluation.benchmarks.evaluate_model`."""
    from nudgerl.evaluation.benchmarks import evaluate_benchmark
    from nudgerl.evaluation.sampling import load_policy

    rows = []
    for step, model_dir, tokens in checkpoint_models(run_dir, base_model, every):
        model, tokenizer = load_policy(model_dir, backend=backend, revision=revision if step == 0 else None)
        for bench, problems in benchmarks.items():
            _, per_problem, summary = evaluate_benchmark(model, tokenizer, problems, sampling, [1],
                                                         parse_strategy=parse_strategy, template=template,
                                                         grader_mode=grader_mode)
            rows.append({"step": step, "model": model_dir, "cumulative_rollout_tokens": tokens, "benchmark": bench,
                         "pass@1": summary["pass@1"], "samples_per_problem": sampling.n,
                         "problems": [{"id": r["id"], "n": r["n"], "c": r["c"]} for r in per_problem]})
        print(json.dumps({"step": step, "model": model_dir,
                          **{r["benchmark"]: r["pass@1"] for r in rows if r["step"] == step}}))
    write_jsonl(out, rows)
    return rows
