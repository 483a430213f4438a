"""TRL reward functions: thin adapters from TRL's call signature to the one grader."""

from __future__ import annotations

from nudgerl.evaluation.grading import DEFAULT_MODE, answer_region_or_mode, check_mode, grade


def completion_text(completion) -> str:
    """TRL passes conversational completions as message lists, plain ones as strings."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if m.get("role") == "assistant")
    return completion


def correctness_reward_for(mode: str = DEFAULT_MODE):
    """The TRL reward function of a grader mode (:data:`nudgerl.evaluation.grading.GRADER_MODES`)."""
    check_mode(mode)

    def correctness_reward(prompts, completions, answer, **kwargs) -> list[float]:
        """1.0 when the completion's final answer matches the gold answer (math-verify).

        A training row may carry ``answer_region`` (its prompt template's regex for where the
        answer is written, e.g. the authors' ``<SOLUTION>...</SOLUTION>``); the grader then
        reads the last such region of the completion (standard mode)."""
        regions = kwargs.get("answer_region") or [None] * len(completions)
        return [grade(completion_text(c), str(a), mode=mode, region=answer_region_or_mode(r))
                for c, a, r in zip(completions, answer, regions)]

    return correctness_reward


correctness_reward = correctness_reward_for(DEFAULT_MODE)
