"""Top-ranked hint sampling (an ablation): score each pool hint with the base policy.

score(hint) = pass@k with the hint - pass@k without it, both estimated from ``samples``
draws per prompt; each problem keeps its ``keep`` best hints, best first (so the trainer's
``sequential`` sampler then takes the top-ranked ones).
"""

from __future__ import annotations

from nudgerl.algorithms import pass_at_k
from nudgerl.data.prompts import HINT_STYLES
from nudgerl.evaluation.grading import DEFAULT_MODE, grade, grading_region
from nudgerl.evaluation.sampling import chat_prompt, generate, load_policy, sampling_params, vllm_engine_kwargs


def rank_pools(model_dir: str, train: list[dict], pools: list[dict], p: dict, hint_style: str = "organism",
               template=None, revision: str | None = None, grader_mode: str = DEFAULT_MODE) -> list[dict]:
    """``template`` (a PromptTemplate) builds x0/x1 as in training; without one, the organism's."""
    model, tokenizer = load_policy(model_dir, backend=p.get("backend", "transformers"), revision=revision,
                                   **vllm_engine_kwargs(p))
    apply_hint = template.apply_hint if template is not None else HINT_STYLES[hint_style]
    answers = {r["id"]: r["answer"] for r in train}
    params = sampling_params(p, p.get("samples", 16))
    k, keep = p.get("k", 8), p.get("keep", 2)
    prompts, index = [], []  # index[i] = (problem id, hint or None)
    for row in pools:
        if row["id"] not in answers:
            raise KeyError(f"pool row {row['id']!r} has no training problem (answer)")
        messages = template.messages(row["problem"]) if template is not None else [
            {"role": "user", "content": row["problem"]}]
        for hint in [None, *row["hints"]]:
            m = messages if hint is None else apply_hint(messages, hint)
            if template is None:
                prompts.append(chat_prompt(tokenizer, m[-1]["content"]))
            else:
                prompts.append(tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True))
            index.append((row["id"], hint))
    outputs = generate(model, tokenizer, prompts, params, progress=True)
    passk = {}
    region = grading_region(template)
    for (pid, hint), outs in zip(index, outputs):
        c = sum(int(grade(text, answers[pid], mode=grader_mode, region=region)) for text, _ in outs)
        passk[(pid, hint)] = pass_at_k(len(outs), c, k)
    ranked = []
    for row in pools:
        base = passk[(row["id"], None)]
        scores = {h: passk[(row["id"], h)] - base for h in row["hints"]}
        order = sorted(row["hints"], key=lambda h: -scores[h])  # stable: ties keep pool order
        ranked.append({**row, "hints": order[:keep], "scores": scores, "unhinted_pass@k": base})
    return ranked
