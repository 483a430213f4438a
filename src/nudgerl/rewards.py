"""TRL reward functions: thin adapters from TRL's call signature to the one grader."""

from __future__ import annotations

from .grading import grade


def completion_text(completion) -> str:
    """TRL passes conversational completions as message lists, plain ones as strings."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if m.get("role") == "assistant")
    return completion


def correctness_reward(prompts, completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion's final answer matches the gold answer (math-verify).

    A training row may carry ``answer_region`` (its prompt template's regex for where the
    answer is written, e.g. the authors' ``<SOLUTION>...</SOLUTION>``): the grader then reads
    the last such region of the completion, or the whole completion when it has none."""
    from .prompts import answer_text

    regions = kwargs.get("answer_region") or [None] * len(completions)
    return [grade(answer_text(completion_text(c), r), str(a)) for c, a, r in zip(completions, answer, regions)]
