"""Subcommands of the evaluation boxes (workflow/rules/base.smk, eval.smk, the curve rules):
the base model's diagnosis and regime gate, benchmark evaluation, checkpoint curves."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nudgerl.arguments import add_command, add_job_arguments, json_arg, set_threads
from nudgerl.evaluation import family_cli, transfer_cli
from nudgerl.evaluation.model_arguments import add_model_arguments, prompt_template


def cmd_diagnose(args) -> None:
    set_threads(args.threads)
    from nudgerl.evaluation.diagnostics import diagnose_base
    from nudgerl.io import atomic_write_text, read_problems, write_provenance

    problems = []
    for path in args.benchmarks:
        problems += read_problems(path)
    report = diagnose_base(args.model, problems, args.params)
    report["seed"] = args.params.get("seed", 0)
    inputs = [args.model, *args.benchmarks]
    if args.train:
        if args.rl_params is None:
            raise SystemExit("nudgerl diagnose: --train needs --rl-params (the RL sampler's settings)")
        from nudgerl.evaluation.diagnostics import diagnose_rl_prompts

        report["rl_prompts"] = diagnose_rl_prompts(args.model, read_problems(args.train), args.rl_params)
        report["rl_prompts"]["train"] = args.train
        inputs.append(args.train)
    sft_report = Path(args.model) / "sft_report.json"
    if sft_report.exists():  # the organism's base model: how its SFT ended, beside what it does
        sft = json.loads(sft_report.read_text())
        check = sft.get("execution_check") or {}
        report["sft"] = {"seconds": sft.get("seconds"), "threads": sft.get("threads"),
                         "attempts": len(sft.get("sft_attempts") or [None]), "model_seed": sft.get("model_seed"),
                         **{k: check.get(k) for k in ("steps", "passed_at_step", "passed", "final_execution",
                                                      "unhinted_strategy_prior")}}
    atomic_write_text(args.out, json.dumps(report, indent=2))
    write_provenance(args.out, {"eval": args.params, "rl_prompts": args.rl_params},
                     {"sampling": args.params.get("seed", 0)}, inputs)
    print(json.dumps(report["summary"], indent=2))


def cmd_regime_gate(args) -> None:
    from nudgerl.io import write_provenance
    from nudgerl.evaluation.regime import RegimeError, gate

    try:
        gate(args.diagnosis, args.regime, args.out)
    except RegimeError as e:
        print(f"nudgerl regime-gate: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    write_provenance(args.out, args.regime, {}, [args.diagnosis])


def chunk_size(params: dict) -> int | None:
    """``eval.chunk_problems``: problems per resume chunk (None: a whole benchmark per chunk)."""
    value = params.get("chunk_problems")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SystemExit(f"nudgerl evaluate: eval.chunk_problems must be a whole number >= 1 (problems per "
                         f"resume chunk) or null, not {value!r}")
    return value


def cmd_evaluate(args) -> None:
    import time

    from nudgerl.attempts import guarded_attempt

    started = time.monotonic()  # the time budget counts the model's load too
    set_threads(args.threads)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # only the planned stop is retried; a retry of a failed evaluation refuses (nudgerl.attempts)
    with guarded_attempt(out):
        _evaluate(args, out, started)


def _evaluate(args, out: Path, started: float) -> None:
    from nudgerl.evaluation.benchmarks import (STOPPED_EXIT_CODE, EvaluationStopped, TimeBudget, clear_partials,
                                               evaluate_model)
    from nudgerl.evaluation.sampling import sampling_params, vllm_engine_kwargs
    from nudgerl.io import atomic_write_text, read_problems, write_provenance
    from nudgerl.organism.families import parse_strategy  # every task's strategy names (a superset)

    p = args.params
    template = prompt_template(args)
    params = sampling_params(p, p["samples_per_problem"], seed=args.seed,
                             stop=template.stop if template is not None else ())
    benchmarks = {Path(b).stem: read_problems(b) for b in args.benchmarks}
    organism = template is None or template.style == "organism"
    try:
        summaries = evaluate_model(args.model, benchmarks, params, p.get("ks", [1]), out,
                                   parse_strategy=parse_strategy if organism else None, template=template,
                                   backend=p.get("backend", "transformers"), revision=args.revision,
                                   backend_kwargs=vllm_engine_kwargs(p), grader_mode=args.grader_mode,
                                   chunk_problems=chunk_size(p), budget=TimeBudget.from_env(started))
    except EvaluationStopped as stop:
        # a planned stop, not a failure: the rule's retry (eval_retries) resumes after the saved chunks
        print(f"nudgerl evaluate: {stop}", flush=True)
        raise SystemExit(STOPPED_EXIT_CODE) from None
    atomic_write_text(out / "summary.json", json.dumps(summaries, indent=2))
    write_provenance(out / "summary.json", p, {"sampling": args.seed}, [args.model, *args.benchmarks],
                     outputs=[out / f"{b}.{kind}" for b in benchmarks
                              for kind in ("samples.jsonl", "problems.jsonl", "summary.json")])
    clear_partials(out)  # every output is in place: the resume cache is no longer needed
    print(json.dumps({k: v["pass@1"] for k, v in summaries.items()}, indent=2))


def cmd_curve_eval(args) -> None:
    set_threads(args.threads)
    from nudgerl.evaluation.curves import checkpoint_models, evaluate_checkpoints
    from nudgerl.evaluation.sampling import sampling_params, vllm_engine_kwargs
    from nudgerl.io import read_problems, write_provenance
    from nudgerl.organism.families import parse_strategy  # every task's strategy names (a superset)

    curve = args.params.get("curve", {})
    every = curve.get("every", 10)
    benchmarks = {Path(b).stem: read_problems(b) for b in args.benchmarks}
    sampling = sampling_params(args.params, curve.get("samples", 4), seed=args.seed)
    template = prompt_template(args)
    if template is not None:
        sampling.stop = tuple(template.stop)
    organism = template is None or template.style == "organism"
    evaluate_checkpoints(Path(args.run_dir), args.base_model, benchmarks, every, sampling, Path(args.out),
                         parse_strategy=parse_strategy if organism else None, template=template,
                         revision=args.revision, backend=args.params.get("backend", "transformers"),
                         grader_mode=args.grader_mode, backend_kwargs=vllm_engine_kwargs(args.params))
    models = [m for _, m, _ in checkpoint_models(Path(args.run_dir), args.base_model, every)]
    write_provenance(args.out, args.params, {"sampling": args.seed},
                     [*models, f"{args.run_dir}/metrics.jsonl", *args.benchmarks])


TITLE = "evaluation: diagnosis, regime gate, benchmarks, checkpoint curves"


def register(subparsers) -> None:
    p = add_command(subparsers, "diagnose", cmd_diagnose, "exploration diagnostics of the base model")
    add_job_arguments(p)
    p.add_argument("--model", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--train", help="the training problems: also diagnose on their hard ones, as RL samples them")
    p.add_argument("--rl-params", type=json_arg,
                   help="with --train: samples, temperature, top_p, max_new_tokens, batch_size, seed")
    p.add_argument("--out", required=True)

    p = add_command(subparsers, "regime-gate", cmd_regime_gate,
                    "fail when a base model's diagnosis is outside the regime bounds")
    p.add_argument("--diagnosis", required=True)
    p.add_argument("--regime", type=json_arg, required=True, help="the 'regime' config section as JSON")
    p.add_argument("--out", required=True)

    p = add_command(subparsers, "evaluate", cmd_evaluate, "sample, grade, pass@k")
    add_job_arguments(p)
    p.add_argument("--model", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", required=True)
    add_model_arguments(p)

    p = add_command(subparsers, "curve-eval", cmd_curve_eval,
                    "evaluate a run's intermediate checkpoints (training curves)")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--base-model", required=True, help="the step-0 policy")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--params", type=json_arg, required=True, help="the eval config section as JSON (with curve)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    add_model_arguments(p)

    transfer_cli.register(subparsers)  # transfer-probe, transfer-page
    family_cli.register(subparsers)  # family-split, family-independence, family-independence-page
