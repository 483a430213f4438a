"""Evaluation: n samples per problem, graded by the one grader; pass@1 and pass@k.

Writes, per benchmark: ``<bench>.samples.jsonl`` (one line per sample), ``<bench>.problems.jsonl``
(n, c and pass@k per problem) and ``<bench>.summary.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .algorithms import mean_pass_at_k
from .grading import GradeStats, grade
from .io import atomic_write_text, write_jsonl
from .sampling import SamplingParams, chat_prompt, generate


def build_prompts(tokenizer, problems: list[dict], template=None, hint: str | None = None) -> list[str]:
    """Chat-formatted prompts. ``template`` (a :class:`nudgerl.prompts.PromptTemplate`) gives
    the messages; without one, the organism's prompt with ``hint`` as a full hint line."""
    if template is None:
        from .organism.task import prompt_text

        return [chat_prompt(tokenizer, prompt_text(p["problem"], hint)) for p in problems]
    return [tokenizer.apply_chat_template(template.messages(p["problem"], hint), tokenize=False,
                                          add_generation_prompt=True) for p in problems]


def evaluate_benchmark(model, tokenizer, problems: list[dict], params: SamplingParams, ks: list[int],
                       parse_strategy=None, hint: str | None = None, progress: bool = False, template=None):
    """Sample and grade; returns (sample rows, problem rows, summary)."""
    t0 = time.perf_counter()
    prompts = build_prompts(tokenizer, problems, template, hint)
    outputs = generate(model, tokenizer, prompts, params, progress=progress)
    stats = GradeStats()
    samples, per_problem = [], []
    for p, outs in zip(problems, outputs):
        c = 0
        for j, (text, n_tok) in enumerate(outs):
            graded = template.answer_text(text) if template is not None else text
            r = grade(graded, p["answer"], stats)
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
    }
    summary["pass@1"] = summary["pass@k"]["1"]
    return samples, per_problem, summary


def evaluate_model(model_dir: str, benchmarks: dict[str, list[dict]], params: SamplingParams, ks: list[int],
                   out_dir: Path, parse_strategy=None, progress: bool = True, template=None,
                   backend: str = "transformers", revision: str | None = None, backend_kwargs: dict | None = None) -> dict:
    from .sampling import load_policy

    model, tokenizer = load_policy(model_dir, backend=backend, revision=revision, **(backend_kwargs or {}))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = {}
    for name, problems in benchmarks.items():
        samples, per_problem, summary = evaluate_benchmark(
            model, tokenizer, problems, params, ks, parse_strategy=parse_strategy, progress=progress,
            template=template,
        )
        write_jsonl(out_dir / f"{name}.samples.jsonl", samples)
        write_jsonl(out_dir / f"{name}.problems.jsonl", per_problem)
        atomic_write_text(out_dir / f"{name}.summary.json", json.dumps(summary, indent=2))
        summaries[name] = summary
    return summaries
