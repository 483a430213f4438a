"""What the SFT checks while it trains: does the model execute each strategy (hinted, and
once it chose it unhinted), and how often does it choose each one unhinted."""

from __future__ import annotations

from nudgerl.models import GENERATE_CACHE
from nudgerl.organism import task


def greedy_traces(model, tokenizer, problems: list, name: str, batch_size: int = 256, given_choice: bool = False,
                  hinted: bool = True, spec=task) -> tuple[str, list[str]]:
    """The model's greedy traces of strategy ``name`` on ``problems``, ``hinted`` with it or not;
    ``given_choice``: the trace's first words (the strategy's choice) are put in the answer
    first. Returns that start ("" without it) and the traces after it."""
    import torch

    start = spec.chosen_prefix(name) if given_choice else ""
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": spec.prompt_text(
        p.text(), spec.hint_line(name) if hinted else None)}], tokenize=False, add_generation_prompt=True)
        + start for p in problems]
    texts = []
    with torch.no_grad():
        for i in range(0, len(prompts), batch_size):
            enc = tokenizer(prompts[i : i + batch_size], return_tensors="pt", padding=True,
                            padding_side="left", add_special_tokens=False)
            out = model.generate(**enc, max_new_tokens=spec.MAX_TRACE_TOKENS, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                                 **GENERATE_CACHE)
            texts += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return start, texts


def execution_check(model, tokenizer, problems: list, batch_size: int = 256, chosen: bool = False,
                    misexecuted: frozenset[str] = frozenset(), spec=task, choice_after_hint: bool = False
                    ) -> dict[str, float]:
    """Per strategy, the share of ``problems`` whose trace the model writes exactly (greedy):
    does it execute each strategy when told to, on problems it never trained on. ``chosen``:
    no hint; the trace's first words (the strategy's choice) are given and the rest is
    checked, i.e. execution once the unhinted policy has chosen the strategy itself.
    ``misexecuted``: strategies whose corpus also teaches a wrong last step there
    (``unhinted_rare_accuracy`` < 1), so that trace counts as written too. ``spec``: the task
    module. ``choice_after_hint``: hinted, the choice is given too (a hint that only nudges
    leaves the greedy choice to the habit on some problems; execution is what is checked)."""
    was_training = model.training
    model.eval()
    scores = {}
    for name in spec.STRATEGIES:
        start, texts = greedy_traces(model, tokenizer, problems, name, batch_size,
                                     given_choice=chosen or choice_after_hint, hinted=not chosen, spec=spec)
        right = sum(f"{start} {t.strip()}".strip() in (
            spec.trace(p.terms, name), *([spec.misexecuted_trace(p.terms, name)] if name in misexecuted else []))
            for p, t in zip(problems, texts))
        scores[name] = right / len(problems)
    model.train(was_training)
    return scores


def unhinted_strategy_prior(model, tokenizer, problems: list, spec=task, hint: str | None = None) -> dict[str, float]:
    """The model's mean probability of each strategy's first word right after "strategy :"
    with no hint: the habit prior the SFT mixture sets (compare unhinted_strategy_weights).
    ``hint``: the same under that hint line (how far a hint moves the choice)."""
    import torch

    first = {n: tokenizer.convert_tokens_to_ids(s.words.split()[0]) for n, s in spec.STRATEGIES.items()}
    if len(set(first.values())) != len(first):
        raise ValueError("two strategies share a first word: the choice is not one token")
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": spec.prompt_text(p.text(), hint)}],
                                             tokenize=False, add_generation_prompt=True) + "strategy :"
               for p in problems]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        probs = torch.softmax(model(**enc).logits[:, -1].float(), dim=-1)
    model.train(was_training)
    return {n: float(probs[:, t].mean()) for n, t in first.items()}


def family_strategy_prior(model, tokenizer, problems: list, spec) -> dict[str, dict]:
    """Per family (of ``spec``'s families task): the unhinted probability of each strategy's
    choice, and under a hint naming the family's own always-right strategy, its probability
    (``hinted_own``): where the rare choice starts, and how far a hint nudges it."""
    out = {}
    for fam in spec.FAMILIES.values():
        mine = [p for p in problems if p.family == fam.name]
        if not mine:
            continue
        unhinted = unhinted_strategy_prior(model, tokenizer, mine, spec)
        hinted = unhinted_strategy_prior(model, tokenizer, mine, spec, spec.hint_line(fam.rare_strategy))
        out[fam.name] = {"problems": len(mine), "own": fam.rare_strategy, "unhinted": unhinted,
                         "unhinted_own": unhinted[fam.rare_strategy], "hinted_own": hinted[fam.rare_strategy]}
    return out
