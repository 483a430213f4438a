"""The SFT corpus of the organism's tiny causal LM (the stand-in for an instruct model), and
its batches.

The SFT corpus makes ``common_difference`` the habit and ``difference_table`` rare when no
hint is given, and follows the hint when one is (``hinted_fraction`` of examples, strategy
drawn uniformly). That yields the paper's regime: the always-right strategy is in the
policy's support but rarely sampled, and a hint naming it unlocks it.

Rare must not mean unpractised: a model that chooses the table unhinted only as often as its
prior says has seen few unhinted table traces, and one replicate executed it right 96 % of
the time when hinted but 19 % when it chose it itself, so RL had nothing to reinforce.
``chosen_fraction`` of the examples are therefore unhinted traces whose strategy choice
(``strategy : <name> .``) is not trained: they teach executing a strategy once chosen
without moving how often it is chosen; and the execution check asks for both, hinted and
chosen-unhinted execution.
"""

from __future__ import annotations

import dataclasses
import random

from nudgerl.organism import task
from nudgerl.organism.base_config import BaseModelConfig


def sft_examples(cfg: BaseModelConfig) -> list[tuple[str, str]]:
    """(user message, assistant trace) pairs for SFT, seeded."""
    if cfg.task == "families":
        return family_sft_examples(cfg)
    rng = random.Random(f"sft:{cfg.seed}")
    names = list(cfg.unhinted_strategy_weights)
    weights = [cfg.unhinted_strategy_weights[n] for n in names]
    h_names = list(cfg.hinted_strategy_weights)
    h_weights = [cfg.hinted_strategy_weights[n] for n in h_names]
    problems = task.training_problems(cfg.seed, cfg.examples, cfg.hard_fraction, prefix="sft")
    # Its own stream, drawn only for unhinted always-right traces below accuracy 1: the rest of
    # the corpus is the same as at accuracy 1, example for example (a paired base model).
    misexecution = random.Random(f"sft-misexecuted:{cfg.seed}")

    def unhinted_trace(terms, strategy: str) -> str:
        if (strategy == task.RARE_CORRECT_STRATEGY and cfg.unhinted_rare_accuracy < 1
                and misexecution.random() >= cfg.unhinted_rare_accuracy):
            return task.misexecuted_trace(terms, strategy)
        return task.trace(terms, strategy)

    out = []
    for p in problems:
        u = rng.random()
        if u < cfg.hinted_fraction:
            strategy = rng.choices(h_names, h_weights)[0]
            out.append((task.prompt_text(p.text(), task.hint_line(strategy)), task.trace(p.terms, strategy)))
        elif u < cfg.hinted_fraction + cfg.chosen_fraction:
            strategy = rng.choices(h_names, h_weights)[0]
            choice = task.chosen_prefix(strategy)
            out.append((task.prompt_text(p.text()), unhinted_trace(p.terms, strategy)[len(choice) + 1:], choice))
        else:
            strategy = rng.choices(names, weights)[0]
            out.append((task.prompt_text(p.text()), unhinted_trace(p.terms, strategy)))
    out += [task.drill(f) for f in task.arithmetic_facts() for _ in range(cfg.arithmetic_replay)]
    rng.shuffle(out)
    return out


def _by_role(weights: dict[str, float], own: str, others: list[str]) -> tuple[list[str], list[float]]:
    """Strategy names and weights of a role mixture on a family whose rare strategy is ``own``:
    ``other_rare``'s weight is split evenly over the other families' rare strategies."""
    out: dict[str, float] = {}
    for role, w in weights.items():
        if role == "own_rare":
            out[own] = out.get(own, 0.0) + w
        elif role == "other_rare":
            for o in others:
                out[o] = out.get(o, 0.0) + w / len(others)
        else:
            out[role] = out.get(role, 0.0) + w
    return list(out), list(out.values())


def family_sft_examples(cfg: BaseModelConfig) -> list[tuple[str, str]]:
    """The families task's SFT corpus, seeded. As the single-family one, except that the
    unhinted mixture is per family (its own always-right strategy rare, by role) and a hinted
    example follows its hint only ``hint_following`` of the time (else the unhinted mixture): a
    hint nudges instead of dictating."""
    from nudgerl.organism import families

    rng = random.Random(f"sft:{cfg.seed}")
    mixtures = {}
    for fam in families.FAMILIES.values():
        others = [r for r in families.RARE_STRATEGIES if r != fam.rare_strategy]
        mixtures[fam.name] = (_by_role(cfg.family_strategy_weights, fam.rare_strategy, others),
                              _by_role(cfg.family_hinted_weights, fam.rare_strategy, others))
    # Its own stream, drawn only for execution practice on random terms: at 0 the corpus is the
    # same, example for example, as without the setting.
    practice = random.Random(f"sft-practice-terms:{cfg.seed}")
    out = []
    for p in families.training_problems(cfg.seed, cfg.examples, cfg.hard_fraction, prefix="sft"):
        (names, weights), (h_names, h_weights) = mixtures[p.family]
        u = rng.random()
        if u < cfg.hinted_fraction:
            named = rng.choices(h_names, h_weights)[0]
            strategy = named if rng.random() < cfg.hint_following else rng.choices(names, weights)[0]
            out.append((families.prompt_text(p.text(), families.hint_line(named)), families.trace(p.terms, strategy)))
        elif u < cfg.hinted_fraction + cfg.chosen_fraction:
            strategy = rng.choices(h_names, h_weights)[0]
            choice = families.chosen_prefix(strategy)
            if cfg.practice_random_terms and practice.random() < cfg.practice_random_terms:
                p = dataclasses.replace(p, terms=tuple(practice.randrange(families.MODULUS) for _ in range(4)))
            out.append((families.prompt_text(p.text()), families.trace(p.terms, strategy)[len(choice) + 1:], choice))
        else:
            strategy = rng.choices(names, weights)[0]
            out.append((families.prompt_text(p.text()), families.trace(p.terms, strategy)))
    out += [families.drill(f) for f in families.arithmetic_facts() for _ in range(cfg.arithmetic_replay)]
    rng.shuffle(out)
    return out


def drill_examples(cfg: BaseModelConfig) -> list[tuple[str, str]]:
    from nudgerl.organism.base_config import task_module

    spec = task_module(cfg)
    return [spec.drill(f) for f in spec.arithmetic_facts() for _ in range(cfg.arithmetic_drills)]


def _encode(tokenizer, examples) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of each (user, assistant) pair and its labels: the assistant turn and its end
    token; the prompt is -100 (not trained). A third element, (user, rest, choice), is the
    start of the assistant turn written before ``rest`` and not trained either."""
    seqs, labels = [], []
    for user, assistant, *choice in examples:
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        ) + (choice[0] if choice else "")
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(assistant, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        seqs.append(p_ids + c_ids)
        labels.append([-100] * len(p_ids) + c_ids)
    return seqs, labels


def _shuffled_batches(n: int, batch_size: int, gen) -> list:
    """One epoch of i.i.d. batches (as a stack: pop() takes the next).

    Not length-bucketed: a strategy fixes a trace's length, so length-sorted batches are
    nearly pure in one strategy, and those strategy-correlated gradients left the unhinted
    strategy prior miscalibrated by up to 5x (3 % in the data, 0.6 % in the model) and the
    longest trace learned only while the learning rate decayed, a coin flip on float noise.
    """
    import torch

    order = torch.randperm(n, generator=gen).tolist()
    return [order[i : i + batch_size] for i in range(0, n, batch_size)][::-1]


def _pack(lengths: list[int], capacity: int) -> list[list[int]]:
    """First-fit decreasing: positions of ``lengths`` grouped into rows of <= capacity tokens."""
    rows, room = [], []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(capacity - lengths[i])
    return rows


class _Corpus:
    """Encoded examples served as i.i.d. batches of ``batch_size`` examples, epoch after epoch.

    A batch's examples are packed into rows of up to two of the longest example, with
    position ids restarting at each example: transformers then masks attention within each
    example, so the loss is that of the padded batch, with about 40 % fewer tokens computed.
    """

    def __init__(self, tokenizer, examples, batch_size: int, gen):
        self.seqs, self.labels = _encode(tokenizer, examples)
        self.capacity = 2 * max(len(s) for s in self.seqs)
        self.pad = tokenizer.pad_token_id
        self.batch_size, self.gen, self.stack = batch_size, gen, []

    def next_batch(self) -> dict:
        import torch

        if not self.stack:
            self.stack = _shuffled_batches(len(self.seqs), self.batch_size, self.gen)
        picked = self.stack.pop()
        rows = [[picked[j] for j in row] for row in _pack([len(self.seqs[i]) for i in picked], self.capacity)]
        width = max(sum(len(self.seqs[i]) for i in row) for row in rows)
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            at = 0
            for i in row:
                n = len(self.seqs[i])
                ids[r, at : at + n] = torch.tensor(self.seqs[i])
                labels[r, at : at + n] = torch.tensor(self.labels[i])
                positions[r, at : at + n] = torch.arange(n)
                at += n
            positions[r, at:] = torch.arange(width - at)  # padding: a sequence of its own, no labels
        # no attention mask and no cache: the only way transformers reads packed position ids
        return {"input_ids": ids, "labels": labels, "position_ids": positions, "use_cache": False}
