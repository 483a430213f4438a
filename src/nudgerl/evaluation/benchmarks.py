"""Evaluation: n samples per problem, graded by the one grader; pass@1 and pass@k.

Writes, per benchmark: ``<bench>.samples.jsonl`` (one line per sample), ``<bench>.problems.jsonl``
(n, c and pass@k per problem) and ``<bench>.summary.json``.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nudgerl.algorithms import mean_pass_at_k
from nudgerl.attempts import PLANNED_STOP_EXIT_CODE
from nudgerl.evaluation.grading import DEFAULT_MODE, GradeStats, grade, grading_region
from nudgerl.io import atomic_write_text, write_jsonl
from nudgerl.evaluation.sampling import SamplingParams, chat_prompt, generate
from nudgerl.progress import Progress


def build_prompts(tokenizer, problems: list[dict], template=None, hint: str | None = None) -> list[str]:
    """Chat-formatted prompts. ``template`` (a :class:`nudgerl.data.prompts.PromptTemplate`) gives
    the messages; without one, the organism's prompt with ``hint`` as a full hint line."""
    if template is None:
        from nudgerl.organism.task import prompt_text

        return [chat_prompt(tokenizer, prompt_text(p["problem"], hint)) for p in problems]
    return [tokenizer.apply_chat_template(template.messages(p["problem"], hint), tokenize=False,
                                          add_generation_prompt=True) for p in problems]


def grade_outputs(problems: list[dict], outputs, stats: GradeStats, parse_strategy=None, region=None,
                  grader_mode: str = DEFAULT_MODE):
    """Grade sampled outputs (one list of (text, n_tokens) per problem); returns (sample rows,
    problem rows)."""
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
        for key in ("hard", "family", "rare_strategy"):  # the organism's: what exploration success reads
            if key in p:
                prow[key] = p[key]
        per_problem.append(prow)
    return samples, per_problem


def benchmark_summary(samples: list[dict], per_problem: list[dict], n: int, ks: list[int], grader: dict,
                      seconds: float, grader_mode: str) -> dict:
    """A benchmark's summary from all its sample and problem rows (however they were sampled)."""
    nc = [(r["n"], r["c"]) for r in per_problem]
    summary = {
        "problems": len(per_problem),
        "samples_per_problem": n,
        "pass@k": {str(k): mean_pass_at_k(nc, k) for k in ks if k <= n},
        "generated_tokens": sum(s["tokens"] for s in samples),
        "seconds": seconds,
        "grader": grader,
        "grader_mode": grader_mode,
    }
    summary["pass@1"] = summary["pass@k"]["1"]
    return summary


def evaluate_benchmark(model, tokenizer, problems: list[dict], params: SamplingParams, ks: list[int],
                       parse_strategy=None, hint: str | None = None, progress: bool = False, template=None,
                       grader_mode: str = DEFAULT_MODE):
    """Sample and grade; returns (sample rows, problem rows, summary)."""
    t0 = time.perf_counter()
    prompts = build_prompts(tokenizer, problems, template, hint)
    outputs = generate(model, tokenizer, prompts, params, progress=progress)
    stats = GradeStats()
    samples, per_problem = grade_outputs(problems, outputs, stats, parse_strategy, grading_region(template),
                                         grader_mode)
    summary = benchmark_summary(samples, per_problem, params.n, ks, stats.as_dict(), time.perf_counter() - t0,
                                grader_mode)
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


# Exit code of an evaluation that stopped itself before its time budget ran out, its finished
# chunks saved: the trainer's planned stop's, so the rule's retry resumes it (nudgerl.attempts).
STOPPED_EXIT_CODE = PLANNED_STOP_EXIT_CODE
# Seconds this evaluation process may run (set by the workflow's launcher inside a Slurm job:
# the job's time limit less a lead for Snakemake and the final writes; PlanResources).
BUDGET_VAR = "NUDGERL_EVAL_BUDGET_S"


class EvaluationStopped(Exception):
    """Raised between chunks when the next chunk would not end within the time budget; every
    finished chunk is saved and a rerun resumes after it."""


@dataclass
class TimeBudget:
    """Until when (``clock()`` seconds) this process may sample."""

    deadline: float
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def from_env(cls, started: float, environ=None, clock: Callable[[], float] = time.monotonic):
        """The budget :data:`BUDGET_VAR` sets, counted from ``started`` (a ``clock()`` reading at
        the process's start); None when it is unset or empty (no time limit)."""
        import os

        raw = (os.environ if environ is None else environ).get(BUDGET_VAR, "").strip()
        if not raw:
            return None
        try:
            seconds = float(raw)
        except ValueError:
            raise ValueError(f"{BUDGET_VAR}={raw!r}: not a number of seconds") from None
        return cls(started + seconds, clock)

    def fits(self, seconds: float) -> bool:
        return self.clock() + seconds <= self.deadline


def chunk_bounds(n_problems: int, chunk_problems: int | None, samples_per_problem: int, batch_size: int,
                 batch_aligned: bool = True) -> list[tuple[int, int]]:
    """[start, end) problem ranges of a benchmark's resume chunks, about ``chunk_problems``
    problems each (None or 0: one chunk). ``batch_aligned`` (the transformers backend, which
    draws one random stream over batches of ``batch_size`` samples): each chunk is rounded up to
    whole batches, so chunked sampling runs the batches an unchunked run does, from the same
    random states, and gives the same samples. vLLM seeds each problem's request on its own:
    any cut gives the same samples."""
    if not chunk_problems or chunk_problems >= n_problems:
        return [(0, n_problems)]
    step = batch_size // math.gcd(samples_per_problem, batch_size) if batch_aligned else 1
    size = -(-chunk_problems // step) * step
    return [(start, min(start + size, n_problems)) for start in range(0, n_problems, size)]


def _encode_rng(state) -> str | None:
    import base64

    return None if state is None else base64.b64encode(bytes(state.tolist())).decode()


def _decode_rng(text: str | None):
    if text is None:
        return None
    import base64

    import torch

    return torch.tensor(list(base64.b64decode(text)), dtype=torch.uint8)


def _chunk_fingerprint(benchmark_fingerprint: str, bounds: tuple[int, int]) -> str:
    import hashlib

    return hashlib.sha256(f"{benchmark_fingerprint}:{bounds[0]}:{bounds[1]}".encode()).hexdigest()


def _chunk_partial(out_dir: Path, name: str, index: int) -> Path:
    return out_dir / RESUME_DIR / f"{name}.chunk{index:04d}.json"


def evaluate_model(model_dir: str, benchmarks: dict[str, list[dict]], params: SamplingParams, ks: list[int],
                   out_dir: Path, parse_strategy=None, progress: bool = True, template=None,
                   backend: str = "transformers", revision: str | None = None, backend_kwargs: dict | None = None,
                   log=print, grader_mode: str = DEFAULT_MODE, chunk_problems: int | None = None,
                   budget: TimeBudget | None = None) -> dict:
    """Evaluate every benchmark; resumable per chunk of ``chunk_problems`` problems
    (:func:`chunk_bounds`). Each finished chunk is saved (atomically, with the random state it
    ended in) to ``<out_dir>/.resume/<bench>.chunk<k>.json``; a rerun after a kill or a planned
    stop reuses it instead of sampling again, and starts the next chunk from its saved state, so
    the results equal an unbroken run's. With a ``budget``, raises :class:`EvaluationStopped`
    before a chunk that would not end in time (estimated from the seconds per problem of the
    chunks measured so far, here or in an earlier attempt), unless it has sampled none yet.

    ``progress``: log plain progress lines (``log``) of the problems done over all benchmarks, as
    chunks finish; a benchmark sampled in one chunk reports its samples from inside the sampling
    instead (a line per chunk would come only at its end)."""
    from nudgerl.evaluation.sampling import load_policy, sampling_rng_state

    model, tokenizer = None, None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    region = grading_region(template)
    seconds_per_problem = 0.0  # the slowest finished chunk's, the estimate of the next one's cost
    summaries = {}
    report = Progress("problems", sum(len(p) for p in benchmarks.values()), log=log) if progress else None
    done = 0  # problems of all benchmarks
    for name, problems in benchmarks.items():
        fingerprint = _fingerprint(model_dir, problems, params, ks, template, grader_mode)
        bounds = chunk_bounds(len(problems), chunk_problems, params.n, params.batch_size,
                              batch_aligned=backend == "transformers")
        samples, per_problem, grader, seconds = [], [], Counter(), 0.0
        rng = None  # None: the first chunk starts the stream at params.seed
        for index, (start, end) in enumerate(bounds):
            partial = _chunk_partial(out_dir, name, index)
            chunk_fp = _chunk_fingerprint(fingerprint, (start, end))
            saved = _load_partial(partial, chunk_fp)
            resumed = saved is not None
            if resumed:
                log(f"{name}: resumed from {partial} ({end - start} problems, not sampled again)")
                if report is not None:  # done, but not in this attempt's pace
                    report.skip(end - start)
            else:
                # an attempt samples at least one chunk, so a retry always makes progress
                if (budget is not None and model is not None
                        and not budget.fits(seconds_per_problem * (end - start))):
                    raise EvaluationStopped(
                        f"{name}: stopped before problems {start}-{end - 1} (chunk {index + 1} of {len(bounds)}, "
                        f"~{seconds_per_problem * (end - start):.0f} s) for the time budget ({BUDGET_VAR}); "
                        "finished chunks are saved, rerun resumes")
                if model is None:
                    model, tokenizer = load_policy(model_dir, backend=backend, revision=revision,
                                                   **(backend_kwargs or {}))
                    if report is not None:  # the pace is sampling's: a vLLM engine's start is minutes
                        report.restart()
                t0 = time.perf_counter()
                chunk = problems[start:end]
                outputs = generate(model, tokenizer, build_prompts(tokenizer, chunk, template), params,
                                   progress=progress and len(bounds) == 1, rng_state=_decode_rng(rng))
                rng_after = _encode_rng(sampling_rng_state(model))
                stats = GradeStats()
                chunk_samples, chunk_problem_rows = grade_outputs(chunk, outputs, stats, parse_strategy, region,
                                                                   grader_mode)
                saved = {"fingerprint": chunk_fp, "chunk": [start, end], "samples": chunk_samples,
                         "problems": chunk_problem_rows, "grader": stats.as_dict(),
                         "seconds": time.perf_counter() - t0, "rng_state": rng_after}
                atomic_write_text(partial, json.dumps(saved))
            if end > start:
                seconds_per_problem = max(seconds_per_problem, saved["seconds"] / (end - start))
            samples += saved["samples"]
            per_problem += saved["problems"]
            grader.update(saved["grader"])
            seconds += saved["seconds"]
            rng = saved["rng_state"]
            done += end - start
            if report is not None and not resumed:  # reused chunks: no line each, the next sampled one tells
                report.update(done, f"{name} chunk {index + 1}/{len(bounds)}, {done * params.n} samples")
        summary = benchmark_summary(samples, per_problem, params.n, ks, dict(grader), seconds, grader_mode)
        write_jsonl(out_dir / f"{name}.samples.jsonl", samples)
        write_jsonl(out_dir / f"{name}.problems.jsonl", per_problem)
        atomic_write_text(out_dir / f"{name}.summary.json", json.dumps(summary, indent=2))
        summaries[name] = summary
    return summaries
