"""Exploration diagnostics of the organism's base model (the paper's bottleneck, measured).

On held-out problems: unhinted pass@1 overall and on the hard subset, how often each
strategy is sampled (parsed from traces), and pass@1 when hinted with each strategy.
"""

from __future__ import annotations

from collections import Counter

from nudgerl.organism import task

def _condition(model, tokenizer, problems, params, hint):
    from nudgerl.evaluation.benchmarks import evaluate_benchmark

    samples, per_problem, summary = evaluate_benchmark(
        model, tokenizer, problems, params, [1], parse_strategy=task.parse_strategy, hint=hint
    )
    hard_ids = {p["id"] for p in problems if p.get("hard")}
    hard = [r["pass@1"] for r in per_problem if r["id"] in hard_ids]
    easy = [r["pass@1"] for r in per_problem if r["id"] not in hard_ids]
    usage = Counter(s["strategy"] for s in samples)
    total = sum(usage.values())
    correct_by = Counter(s["strategy"] for s in samples if s["reward"] > 0)
    return {
        "pass@1": summary["pass@1"],
        "pass@1_hard": sum(hard) / len(hard) if hard else None,
        "pass@1_easy": sum(easy) / len(easy) if easy else None,
        "strategy_share": {k: usage[k] / total for k in sorted(usage)},
        "strategy_accuracy": {k: correct_by[k] / usage[k] for k in sorted(usage)},
        "samples": total,
        "grader": summary["grader"],
    }


def diagnose_base(model_dir: str, problems: list[dict], p: dict) -> dict:
    from nudgerl.evaluation.sampling import SamplingParams, load_policy

    model, tokenizer = load_policy(model_dir)
    params = SamplingParams(
        n=p.get("samples_per_problem", 16),
        temperature=p.get("temperature", 1.0),
        top_p=p.get("top_p", 1.0),
        max_new_tokens=p.get("max_new_tokens", 64),
        batch_size=p.get("batch_size", 256),
        seed=p.get("seed", 0),
    )
    unhinted = _condition(model, tokenizer, problems, params, None)
    hinted = {
        name: _condition(model, tokenizer, problems, params, task.hint_line(name)) for name in task.STRATEGIES
    }
    rare = task.RARE_CORRECT_STRATEGY
    rare_share = unhinted["strategy_share"].get(rare, 0.0)
    summary = {
        "unhinted_pass@1": unhinted["pass@1"],
        "unhinted_pass@1_hard": unhinted["pass@1_hard"],
        "rare_strategy": rare,
        "rare_strategy_share_unhinted": rare_share,
        "dominant_strategy": task.DOMINANT_STRATEGY,
        "dominant_strategy_share_unhinted": unhinted["strategy_share"].get(task.DOMINANT_STRATEGY, 0.0),
        "hinted_pass@1": {k: v["pass@1"] for k, v in hinted.items()},
        "hinted_pass@1_hard": {k: v["pass@1_hard"] for k, v in hinted.items()},
        "hint_followed": {k: v["strategy_share"].get(k, 0.0) for k, v in hinted.items()},
    }
    summary["hinted_rare_pass@1"] = hinted[rare]["pass@1"]
    summary["hinted_rare_pass@1_hard"] = hinted[rare]["pass@1_hard"]
    return {
        "summary": summary,
        "problems": len(problems),
        "hard_problems": sum(1 for q in problems if q.get("hard")),
        "samples_per_problem": params.n,
        "unhinted": unhinted,
        "hinted": hinted,
    }


def to_markdown(report: dict) -> str:
    """A short human-readable summary of :func:`diagnose_base`'s report."""
    s = report["summary"]
    lines = [
        "# Base-model exploration diagnosis",
        "",
        f"{report['problems']} held-out problems ({report['hard_problems']} hard), "
        f"{report['samples_per_problem']} samples each.",
        "",
        f"- unhinted pass@1: {s['unhinted_pass@1']:.3f} (hard subset: {s['unhinted_pass@1_hard']:.3f})",
        f"- `{s['dominant_strategy']}` (dominant) share of unhinted samples: "
        f"{s['dominant_strategy_share_unhinted']:.3f}",
        f"- `{s['rare_strategy']}` (always right) share of unhinted samples: {s['rare_strategy_share_unhinted']:.3f}",
        "",
        "| hint names | pass@1 | pass@1 (hard) | hint followed |",
        "|---|---|---|---|",
    ]
    for k, v in s["hinted_pass@1"].items():
        lines.append(f"| `{k}` | {v:.3f} | {s['hinted_pass@1_hard'][k]:.3f} | {s['hint_followed'][k]:.3f} |")
    lines += ["", "Whether this is the regime the pipeline trains in: the replicate's `.regime.json` "
              "(bounds in config key `regime`).", ""]
    return "\n".join(lines) + "\n"
