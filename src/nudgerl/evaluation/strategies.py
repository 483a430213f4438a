"""Which strategies a policy samples: diversity of naive vs nudged samples (paper Fig. 1c)
and a one-problem case study of two trained policies (paper Fig. 4).

A *strategy labeler* maps a problem's completions to strategy labels. On the organism the
trace names its strategy (:func:`organism_labeler`). On real data the paper's route is to
embed solutions and cluster them (or ask the helper LLM); that labeler is **not
implemented yet** — it would plug in here with the same signature.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

# (problem row, completions) -> one strategy label per completion
StrategyLabeler = Callable[[dict, list[str]], list[str]]


def organism_labeler(problem: dict, completions: list[str]) -> list[str]:
    """The organism's traces declare their strategy: ``strategy : difference table . ...``."""
    from nudgerl.organism.families import parse_strategy  # every task's strategy names (a superset)

    return [parse_strategy(c) for c in completions]


LABELERS: dict[str, StrategyLabeler] = {"organism": organism_labeler}


def get_labeler(name: str) -> StrategyLabeler:
    if name not in LABELERS:
        raise ValueError(f"unknown strategy labeler {name!r}; available: {sorted(LABELERS)} "
                         "(embedding + clustering for real data is not implemented)")
    return LABELERS[name]


def distinct_strategies(labels: list[str]) -> int:
    """Number of distinct strategies among one problem's samples; malformed traces
    (``unknown``) are not a strategy."""
    return len({x for x in labels if x != "unknown"})


def _sampling(p: dict, n: int, seed: int):
    from nudgerl.evaluation.sampling import sampling_params

    return sampling_params(p, n, seed=seed)


def strategy_diversity(model_dir: str, problems: list[dict], pools: dict[str, list[str]], M: int, K: int,
                       p: dict, labeler: StrategyLabeler, seed: int = 0) -> dict:
    """Per problem: N = M x K naive samples vs N nudged samples (K per each of the pool's first
    M hints, as NudgeRL's rollouts with p_drop = 0), their strategies and correctness."""
    from nudgerl.evaluation.grading import grade
    from nudgerl.organism.task import prompt_text
    from nudgerl.evaluation.sampling import chat_prompt, generate, load_policy

    model, tokenizer = load_policy(model_dir)
    missing = [q["id"] for q in problems if q["id"] not in pools]
    if missing:
        raise KeyError(f"strategy pools have no hints for problem(s) {missing[:5]}")
    naive_prompts = [chat_prompt(tokenizer, prompt_text(q["problem"])) for q in problems]
    naive = generate(model, tokenizer, naive_prompts, _sampling(p, M * K, seed))
    hinted_jobs = [(i, h) for i, q in enumerate(problems) for h in pools[q["id"]][:M]]
    hinted_prompts = [chat_prompt(tokenizer, prompt_text(problems[i]["problem"], f"hint : {h}")) for i, h in hinted_jobs]
    hinted = generate(model, tokenizer, hinted_prompts, _sampling(p, K, seed + 1))
    nudged: list[list[tuple[str, int]]] = [[] for _ in problems]
    for (i, _), outs in zip(hinted_jobs, hinted):
        nudged[i].extend(outs)
    rows = []
    for q, nv, nd in zip(problems, naive, nudged):
        lab_naive = labeler(q, [t for t, _ in nv])
        lab_nudged = labeler(q, [t for t, _ in nd])
        rows.append({
            "id": q["id"], "hard": q.get("hard"), "hints": pools[q["id"]][:M],
            "naive": lab_naive, "nudged": lab_nudged,
            "naive_distinct": distinct_strategies(lab_naive), "nudged_distinct": distinct_strategies(lab_nudged),
            "naive_correct": sum(grade(t, q["answer"]) > 0 for t, _ in nv),
            "nudged_correct": sum(grade(t, q["answer"]) > 0 for t, _ in nd),
        })
    return {"M": M, "K": K, "samples_per_condition": M * K, "problems": rows}


def pick_case_problem(problem_rates: dict[str, dict[str, float]], hard_ids: set[str], methods: list[str]) -> str:
    """The hard problem where the second method's evaluation pass@1 most exceeds the first's
    (ties: the smallest id). Stated in the figure's caption: a case study, not a sample."""
    a, b = methods
    common = sorted(set(problem_rates[a]) & set(problem_rates[b]) & hard_ids) or \
        sorted(set(problem_rates[a]) & set(problem_rates[b]))
    if not common:
        raise ValueError(f"no problem evaluated for both {a} and {b}")
    return max(common, key=lambda pid: problem_rates[b][pid] - problem_rates[a][pid])  # first (smallest id) on ties


def case_study(models: dict[str, str], problem: dict, n: int, p: dict, labeler: StrategyLabeler,
               seed: int = 0) -> dict:
    """``n`` unhinted samples of one problem from each trained policy: strategy counts and
    successes per strategy."""
    from nudgerl.evaluation.grading import grade
    from nudgerl.organism.task import prompt_text
    from nudgerl.evaluation.sampling import chat_prompt, generate, load_policy

    out = {"problem": {k: problem[k] for k in ("id", "problem", "answer") if k in problem}, "samples": n,
           "methods": {}}
    for method, model_dir in models.items():
        model, tokenizer = load_policy(model_dir)
        texts = [t for t, _ in generate(model, tokenizer, [chat_prompt(tokenizer, prompt_text(problem["problem"]))],
                                        _sampling(p, n, seed))[0]]
        labels = labeler(problem, texts)
        correct = [grade(t, problem["answer"]) > 0 for t in texts]
        out["methods"][method] = {
            "model": model_dir,
            "strategy_counts": dict(sorted(Counter(labels).items())),
            "correct_by_strategy": dict(sorted(Counter(s for s, ok in zip(labels, correct) if ok).items())),
            "correct": int(sum(correct)),
        }
    return out
