"""TRL reward functions: thin adapters from TRL's call signature to the one grader."""

from __future__ import annotations

from .grading import grade


def completion_text(completion) -> str:
    """TRL passes conversational completions as message lists, plain ones as strings."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if m.get("role") == "assistant")
    return completion


def correctness_reward(prompts, completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion's final answer matches the gold answer (math-verify)."""
    return [grade(completion_text(c), str(a)) for c, a in zip(completions, answer)]
