"""Evaluation: n samples per problem, graded by the one grader; pass@1 and pass@k.

Writes, per benchmark: ``<bench>.samples.jsonl`` (one line per sample), ``<bench>.problems.jsonl``
(n, c and pass@k per problem) and ``<bench>.summary.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from nudgerl.algorithms import mean_pass_at_k
from nudgerl.evaluation.grading import DEFAULT_MODE, GradeStats, grade, grading_region
from nudgerl.io import atomic_write_text, write_jsonl
from nudgerl.evaluation.sampling import SamplingParams, chat_prompt, generate


def build_prompts(tokenizer, problems: list[dict], template=None, hint: str | None = None) -> list[str]:
    """Chat-formatted prompts. ``template`` (a :class:`nudgerl.data.prompts.PromptTemplate`) gives
    the messages; without one, the organism's prompt with ``hint`` as a full hint line."""
    if template is None:
        from nudgerl.organism.task import prompt_text

        return [chat_prompt(tokenizer, prompt_text(p["problem"], hint)) for p in problems]
    return [tokenizer.apply_chat_template(template.messages(p["problem"], hint), tokenize=False,
                                          add_generation_prompt=True) for p in problems]


def evaluate_benchmark(model, tokenizer, problems: list[dict], params: SamplingParams, ks: list[int],
                       parse_strategy=None, hint: str | None = None, progress: bool = False, template=None,
                       grader_mode: str = DEFAULT_MODE):
    """Sample and grade; returns (sample rows, problem rows, summary)."""
    t0 = time.perf_counter()
    prompts = build_prompts(tokenizer, problems, template, hint)
    outputs = generate(model, tokenizer, prompts, params, progress=progress)
    stats = GradeStats()
    region = grading_region(template)
    samples, per_problem = [], []
    for p, outs in zip(problems, outputs):
        c = 0
        for j, (text, n_tok) in enumerate(outs):
            r = grade(text, p["answer"], stats, mode=grader_mode, region=region)
            c += int(r)
            row = {"id": p["id"], "sample": j, "reward": r, "tokens": n_tok, "completion": text}
            if parse_strategy is not None:
                row["strategy"] = parse_strategy(text)
            samples.append(row)
        n = len(outs)
        prow = {"id": p["id"], "n": n, "c": c, "pass@1": c / n}
        if "hard" in p:
            prow["hard"] = p["hard"]
        per_problem.append(prow)
    nc = [(r["n"], r["c"]) for r in per_problem]
    summary = {
        "problems": len(problems),
        "samples_per_problem": params.n,
        "pass@k": {str(k): mean_pass_at_k(nc, k) for k in ks if k <= params.n},
        "generated_tokens": sum(s["tokens"] for s in samples),
        "seconds": time.perf_counter() - t0,
        "grader": stats.as_dict(),
        "grader_mode": grader_mode,
    }
    summary["pass@1"] = summary["pass@k"]["1"]
    return samples, per_problem, summary


RESUME_DIR = ".resume"


def _fingerprint(model_dir: str, problems: list[dict], params: SamplingParams, ks: list[int], template=None,
                 grader_mode: str = DEFAULT_MODE) -> str:
    """What a benchmark's results depend on: the model files (path, size, mtime; the id for a
    hub model), the problems, the prompt template, the grader mode and the sampling
    parameters. A partial result is reused only if it matches."""
    import hashlib
    from dataclasses import asdict

    files = sorted((str(p.relative_to(model_dir)), p.stat().st_size, p.stat().st_mtime_ns)
                   for p in Path(model_dir).rglob("*") if p.is_file() and p.name != "provenance.json")
    key = {"model": files or model_dir, "template": template.to_dict() if template is not None else None,
           "problems": [(p["id"], p["problem"], p["answer"]) for p in problems],
           "params": asdict(params), "ks": list(ks), "grader_mode": grader_mode}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _load_partial(path: Path, fingerprint: str):
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return saved if saved.get("fingerprint") == fingerprint else None


def clear_partials(out_dir: Path) -> None:
    """Remove the per-benchmark partial results once the job's outputs are all written."""
    import shutil

    shutil.rmtree(Path(out_dir) / RESUME_DIR, ignore_errors=True)


def evaluate_model(model_dir: str, benchmarks: dict[str, list[dict]], params: SamplingParams, ks: list[int],
                   out_dir: Path, parse_strategy=None, progress: bool = True, template=None,
                   backend: str = "transformers", revision: str | None = None, backend_kwargs: dict | None = None,
                   log=print, grader_mode: str = DEFAULT_MODE) -> dict:
    """Evaluate every benchmark; resumable. Each finished benchmark is saved (atomically) to
    ``<out_dir>/.resume/<bench>.json`` before the next starts, and a rerun after a kill reuses
    it instead of sampling again. A resume unit is a whole benchmark because each benchmark
    is sampled from one seeded stream: the resumed results equal an unbroken run's."""
    from nudgerl.evaluation.sampling import load_policy

    model, tokenizer = None, None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = {}
    for name, problems in benchmarks.items():
        partial = out_dir / RESUME_DIR / f"{name}.json"
        fingerprint = _fingerprint(model_dir, problems, params, ks, template, grader_mode)
        saved = _load_partial(partial, fingerprint)
        if saved is not None:
            log(f"{name}: resumed from {partial} ({len(saved['problems'])} problems, not sampled again)")
            samples, per_problem, summary = saved["samples"], saved["problems"], saved["summary"]
        else:
            if model is None:
                model, tokenizer = load_policy(model_dir, backend=backend, revision=revision, **(backend_kwargs or {}))
            samples, per_problem, summary = evaluate_benchmark(
                model, tokenizer, problems, params, ks, parse_strategy=parse_strategy, progress=progress,
                template=template, grader_mode=grader_mode,
            )
            atomic_write_text(partial, json.dumps({"fingerprint": fingerprint, "samples": samples,
                                                   "problems": per_problem, "summary": summary}))
        write_jsonl(out_dir / f"{name}.samples.jsonl", samples)
        write_jsonl(out_dir / f"{name}.problems.jsonl", per_problem)
        atomic_write_text(out_dir / f"{name}.summary.json", json.dumps(summary, indent=2))
        summaries[name] = summary
    return summaries
