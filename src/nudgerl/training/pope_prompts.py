"""POPE (Qu et al. 2026, arXiv 2601.18779) as run by the NudgeRL authors: a prefix of an
oracle solution placed in the prompt of "guided" problems.

Pure functions; the trainer is TRL's GRPOTrainer on prompts built here, so the prefix is
part of the prompt and never of the loss.
"""

from __future__ import annotations

import math
import random

GUIDE_INSTRUCTION = (
    "Below is the beginning of a solution. Study it and continue from where it stops; "
    "do not restart the solution."
)


def oracle_prefix(solution: str, tokenizer, prefix_ratio: float = 0.15, max_prefix_tokens: int = 512) -> str:
    """The first min(floor(prefix_ratio * L), max_prefix_tokens) policy tokens of a solution of L tokens."""
    if not 0.0 <= prefix_ratio <= 1.0:
        raise ValueError(f"prefix_ratio must be in [0, 1], got {prefix_ratio}")
    ids = tokenizer(solution, add_special_tokens=False)["input_ids"]
    keep = min(math.floor(prefix_ratio * len(ids)), max_prefix_tokens)
    # the tokens as they are: no special-token dropping or space clean-up (as the authors decode)
    return tokenizer.decode(ids[:keep], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def guided_problems(ids: list[str], guided_fraction: float = 0.5, seed: int = 0) -> dict[str, bool]:
    """Guided or not, decided once per problem with a fixed seed (the authors' choice)."""
    return {i: random.Random(f"pope:{seed}:{i}").random() < guided_fraction for i in ids}


def guided_prompt(tokenizer, problem: str, prefix: str, style: str = "prefill", template=None) -> str:
    """A chat-formatted prompt that carries the oracle prefix.

    ``prefill`` (the organism, which cannot follow instructions): the prefix opens the
    assistant turn, and the policy continues it. ``instruct`` (real chat models): the
    prefix sits in the user turn: in the template's ``guided_user`` turn under its
    ``guided_system`` prompt when it has one (the authors' POPE text, ``authors_pope``),
    otherwise after the template's own turn and an instruction to study it and continue.
    Either way the completion alone is graded: it ends the solution, so its final answer
    is the policy's own.
    """
    if style == "instruct" and template is not None and template.guided_user is not None:
        return tokenizer.apply_chat_template(template.guided_messages(problem, prefix), tokenize=False,
                                             add_generation_prompt=True)
    system = [{"role": "system", "content": template.system}] if template is not None and template.system else []
    if template is not None:  # the template's user turn (e.g. the authors' system prompt + problem)
        problem = template.messages(problem)[-1]["content"]
    if style == "prefill":
        head = tokenizer.apply_chat_template([*system, {"role": "user", "content": problem}], tokenize=False,
                                             add_generation_prompt=True)
        return head + prefix
    if style == "instruct":
        content = f"{problem}\n\n{GUIDE_INSTRUCTION}\n\n{prefix}"
        return tokenizer.apply_chat_template([*system, {"role": "user", "content": content}], tokenize=False,
                                             add_generation_prompt=True)
    raise ValueError(f"unknown POPE prompt style {style!r}; use 'prefill' or 'instruct'")
