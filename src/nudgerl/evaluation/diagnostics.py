"""Exploration diagnostics of the organism's base model (the paper's bottleneck, measured).

On held-out problems: unhinted pass@1 overall and on the hard subset, how often each
strategy is sampled (parsed from traces), and pass@1 when hinted with each strategy.

On the prompts RL trains on (:func:`diagnose_rl_prompts`): what RL needs of the base model,
as per-problem counts the regime gate turns into intervals (``nudgerl.evaluation.regime``).
"""

from __future__ import annotations

from collections import Counter

from nudgerl.organism.base_config import record_rare_strategy, record_task
from nudgerl.table_text import markdown_table

def _condition(model, tokenizer, problems, params, hint):
    from nudgerl.evaluation.benchmarks import evaluate_benchmark

    samples, per_problem, summary = evaluate_benchmark(
        model, tokenizer, problems, params, [1], parse_strategy=record_task(problems[0]).parse_strategy, hint=hint
    )
    rare_of = {p["id"]: record_rare_strategy(p) for p in problems}
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
        # each problem's own always-right strategy (one strategy in the single-family task)
        "own_rare_share": sum(s["strategy"] == rare_of[s["id"]] for s in samples) / total,
        "pass@1_by_problem": {r["id"]: r["pass@1"] for r in per_problem},
        "samples": total,
        "grader": summary["grader"],
    }


def diagnose_base(model_dir: str, problems: list[dict], p: dict) -> dict:
    from nudgerl.evaluation.sampling import load_policy, sampling_params

    model, tokenizer = load_policy(model_dir)
    params = sampling_params(p, p.get("samples_per_problem", 16))
    spec = record_task(problems[0])
    unhinted = _condition(model, tokenizer, problems, params, None)
    hinted = {
        name: _condition(model, tokenizer, problems, params, spec.hint_line(name)) for name in spec.STRATEGIES
    }
    rare_of = {q["id"]: record_rare_strategy(q) for q in problems}
    # the families task: "the always-right strategy" is each problem's own, so the share and the
    # hinted pass@1 are taken problem by problem (hinted with that problem's own strategy)
    rare = next(iter(set(rare_of.values()))) if len(set(rare_of.values())) == 1 else "own_family_strategy"
    rare_share = unhinted["own_rare_share"]

    def hinted_own(ids):
        rates = [hinted[rare_of[i]]["pass@1_by_problem"][i] for i in ids]
        return sum(rates) / len(rates) if rates else None

    summary = {
        "unhinted_pass@1": unhinted["pass@1"],
        "unhinted_pass@1_hard": unhinted["pass@1_hard"],
        "rare_strategy": rare,
        "rare_strategy_share_unhinted": rare_share,
        "dominant_strategy": spec.DOMINANT_STRATEGY,
        "dominant_strategy_share_unhinted": unhinted["strategy_share"].get(spec.DOMINANT_STRATEGY, 0.0),
        "hinted_pass@1": {k: v["pass@1"] for k, v in hinted.items()},
        "hinted_pass@1_hard": {k: v["pass@1_hard"] for k, v in hinted.items()},
        "hint_followed": {k: v["strategy_share"].get(k, 0.0) for k, v in hinted.items()},
    }
    summary["hinted_rare_pass@1"] = hinted_own([q["id"] for q in problems])
    summary["hinted_rare_pass@1_hard"] = hinted_own([q["id"] for q in problems if q.get("hard")])
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
        markdown_table(["hint names", "pass@1", "pass@1 (hard)", "hint followed"],
                       [[f"`{k}`", f"{v:.3f}", f"{s['hinted_pass@1_hard'][k]:.3f}", f"{s['hint_followed'][k]:.3f}"]
                        for k, v in s["hinted_pass@1"].items()]),
    ]
    rl = report.get("rl_prompts")
    if rl:
        from nudgerl.algorithms import clustered_proportion
        from nudgerl.evaluation.regime import FIGURES

        lines += ["", f"## What RL needs: {len(rl['problems'])} hard training problems x {rl['samples_per_problem']} "
                  "samples, RL's sampler", ""]
        rows = []
        for figure, counts in rl["counts"].items():
            c = clustered_proportion(counts)
            value = "-" if c["value"] is None else f"{c['value']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"
            rows.append([f"`{figure}`", value, f"{c['k']} of {c['n']}", FIGURES.get(figure, "")])
        lines.append(markdown_table(["figure", "value [95 % interval, clustered by problem]", "k of n",
                                     "what it measures"], rows))
    lines += ["", "Whether this is the regime the pipeline trains in: the replicate's `.regime.json` "
              "(bounds in config key `regime`).", ""]
    return "\n".join(lines) + "\n"


def diagnose_rl_prompts(model_dir: str, problems: list[dict], p: dict) -> dict:
    """What RL needs of the base model, on the hard problems it trains on, sampled as RL samples.

    Per problem, as counts ``[k, n]`` (the gate's intervals come from them):

    - ``unhinted_pass@1_hard``: right answers of unhinted samples;
    - ``rare_strategy_share_unhinted``: unhinted samples that choose the always-right strategy;
    - ``rare_strategy_accuracy_chosen``: of those, the right ones (few: n is the share's k);
    - ``rare_strategy_accuracy_unhinted``: right answers when the unhinted completion starts with
      the strategy's choice (``strategy : difference table .``) and the model writes the rest. A
      causal LM's rest depends only on the text before it, so this is the accuracy *when it
      chooses the strategy itself*, measured on every sample instead of on the few that choose it;
    - ``hinted_rare_pass@1_hard``: right answers with the hint that names the strategy.

    ``p``: ``samples`` per problem and the RL sampler's ``temperature``, ``top_p``,
    ``max_new_tokens`` (grpo.max_completion_length), ``batch_size``, ``seed``.
    """
    from nudgerl.evaluation.grading import grade
    from nudgerl.evaluation.sampling import chat_prompt, generate, load_policy, sampling_params

    hard = [q for q in problems if q.get("hard")]
    if not hard:
        raise ValueError("diagnosis on the RL prompts: the training set has no hard problems")
    model, tokenizer = load_policy(model_dir)
    spec = record_task(hard[0])
    rare = {q["id"]: record_rare_strategy(q) for q in hard}  # the families task: each problem's own
    prefix = {i: spec.chosen_prefix(s) for i, s in rare.items()}

    def sample(prompts, offset):
        params = sampling_params(p, p["samples"], seed=p.get("seed", 0) + offset)
        return [[t for t, _ in outs] for outs in generate(model, tokenizer, prompts, params)]

    unhinted = sample([chat_prompt(tokenizer, spec.prompt_text(q["problem"])) for q in hard], 0)
    forced = sample([chat_prompt(tokenizer, spec.prompt_text(q["problem"])) + prefix[q["id"]] for q in hard], 1)
    hinted = sample([chat_prompt(tokenizer, spec.prompt_text(q["problem"], spec.hint_line(rare[q["id"]])))
                     for q in hard], 2)
    counts = {f: [] for f in ("unhinted_pass@1_hard", "rare_strategy_share_unhinted", "rare_strategy_accuracy_chosen",
                              "rare_strategy_accuracy_unhinted", "hinted_rare_pass@1_hard")}
    for q, u, f, h in zip(hard, unhinted, forced, hinted):
        right = [grade(t, q["answer"]) > 0 for t in u]
        chose = [spec.parse_strategy(t) == rare[q["id"]] for t in u]
        counts["unhinted_pass@1_hard"].append([sum(right), len(u)])
        counts["rare_strategy_share_unhinted"].append([sum(chose), len(u)])
        counts["rare_strategy_accuracy_chosen"].append([sum(r and c for r, c in zip(right, chose)), sum(chose)])
        counts["rare_strategy_accuracy_unhinted"].append([sum(grade(f"{prefix[q['id']]} {t}", q["answer"]) > 0
                                                               for t in f),
                                                           len(f)])
        counts["hinted_rare_pass@1_hard"].append([sum(grade(t, q["answer"]) > 0 for t in h), len(h)])
    return {
        "problems": [q["id"] for q in hard],
        "samples_per_problem": p["samples"],
        "sampler": {k: p[k] for k in ("temperature", "top_p", "max_new_tokens")},
        "counts": counts,
        "examples": {"forced": [f"{prefix[hard[0]['id']]} {t}" for t in forced[0][:2]], "unhinted": unhinted[0][:2]},
    }
