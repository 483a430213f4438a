"""Oracle solutions for the POPE baseline, cached by DVC exactly like strategy pools.

Backend ``openai``: any OpenAI-compatible endpoint (the authors used deepseek-reasoner,
temperature 0.4, max 16384 tokens, their SOLUTION-format system prompt and ``Problem:
{problem}``, i.e. ``prompt: authors_oracle``, and kept the message content). With
``filter_correct`` each solution is graded by the project's grader and re-sampled, up to
``filter_attempts`` times, until one is right.
Backend ``organism``: the generator's reference trace with the always-right strategy.
Backend ``transformers``: a local model folder (``model``) writes the solutions, no network
(:mod:`nudgerl.offline.local_llm`); with ``filter_correct`` the first of ``samples`` x
``filter_attempts`` samples that grades right is kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from nudgerl.evaluation.grading import grade
from nudgerl.offline.helper_llm import (CountingOpenAI, HelperEndpointConfig, HelperStageError, error_text,
                                        run_per_problem)
from nudgerl.offline.local_llm import LocalHelperBackend
from nudgerl.data.prompts import helper_prompt


class OracleError(ValueError):
    pass


@dataclass
class OracleConfig(HelperEndpointConfig):
    """An oracle stage's params.yaml section: the helper's keys
    (:class:`~nudgerl.offline.helper_llm.HelperEndpointConfig`) and the oracle's own."""

    SECTION: ClassVar[str] = "oracles"
    PROMPT_KIND: ClassVar[str] = "oracle"
    STATS_KEYS: ClassVar[tuple[str, ...]] = (
        "backend", "base_url", "model", "api_key_env", "prompt", "temperature", "max_tokens", "concurrency",
        "max_retries", "timeout", "filter_correct", "filter_attempts", "top_p", "samples", "seed", "threads")

    # the helper's defaults that differ for oracle solutions
    prompt: str = "standard_oracle"
    temperature: float = 0.4
    max_tokens: int = 16384
    timeout: float = 600.0
    samples: int = 1  # transformers backend: solutions per problem and try
    # the oracle's own
    filter_correct: bool = False
    filter_attempts: int = 5

    def messages(self, record: dict) -> list[dict]:
        return helper_prompt(self.prompt, "oracle").messages(record["problem"])


class OrganismOracleBackend:
    def propose(self, record: dict) -> tuple[dict, dict]:
        from nudgerl.organism.base_config import record_rare_strategy, record_task

        if "terms" not in record:
            raise OracleError(f"problem {record['id']!r} has no 'terms': not an organism problem")
        return {"solution": record_task(record).trace(record["terms"], record_rare_strategy(record)), "attempts": 1}, {}


class OpenAIOracleBackend:
    def __init__(self, cfg: OracleConfig):
        if not cfg.model:
            raise ValueError("the openai oracle backend needs 'model'")
        self.cfg = cfg
        self.api = CountingOpenAI(cfg.base_url, cfg.api_key_env, cfg.max_retries, cfg.timeout)

    def propose(self, record: dict) -> tuple[dict, dict]:
        from openai import APIResponseValidationError

        usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        attempts = self.cfg.filter_attempts if self.cfg.filter_correct else 3
        last = None
        for attempt in range(1, attempts + 1):
            try:
                content = self.api.chat(
                    usage,
                    model=self.cfg.model,
                    messages=self.cfg.messages(record),
                    temperature=self.cfg.temperature,
                    max_tokens=self.cfg.max_tokens,
                    **self.cfg.extra,
                )
            except (APIResponseValidationError, ValueError) as e:  # malformed answer: ask again
                last = error_text(e)
                time.sleep(min(2.0, 0.1 * 2**attempt))
                continue
            if not content:
                last = "empty or truncated answer"
                continue
            if self.cfg.filter_correct and grade(content, record["answer"]) != 1.0:
                last = "solution graded wrong"
                continue
            return {"solution": content, "attempts": attempt}, usage
        err = OracleError(f"no usable oracle solution in {attempts} attempts ({last})")
        err.usage = usage
        raise err


class TransformersOracleBackend(LocalHelperBackend):
    """Oracle solutions from a local transformers model (same messages as the openai backend)."""

    def _prompt(self, record: dict) -> str:
        return self.llm.prompt(self.cfg.messages(record))

    def propose(self, record: dict) -> tuple[dict, dict]:
        usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        prompt = self._prompt(record)
        attempts = self.cfg.filter_attempts if self.cfg.filter_correct else 1
        for attempt in range(attempts):
            samples = self.llm.samples_for(record["id"], prompt, self._params(attempt), first_try=attempt == 0)
            for k, v in self.llm.usage(prompt, samples).items():
                usage[k] += v
            for text, _ in samples:
                if text.strip() and (not self.cfg.filter_correct or grade(text, record["answer"]) == 1.0):
                    return {"solution": text, "attempts": attempt + 1}, usage
        err = OracleError(f"no usable oracle solution in {attempts} tries of {self.cfg.samples} samples"
                          + (" (none graded right)" if self.cfg.filter_correct else " (empty)"))
        err.usage = usage
        raise err


def build_oracles(records: list[dict], cfg: OracleConfig, out_path: str | Path) -> dict:
    if cfg.backend == "organism":
        backend = OrganismOracleBackend()
    elif cfg.backend == "openai":
        backend = OpenAIOracleBackend(cfg)
    elif cfg.backend == "transformers":
        backend = TransformersOracleBackend(cfg)
    else:
        raise ValueError(f"unknown oracle backend {cfg.backend!r}; use 'openai', 'organism' or 'transformers'")
    config = cfg.stats_config()
    concurrency = 1 if cfg.backend == "transformers" else cfg.concurrency
    return run_per_problem(records, backend.propose, out_path, concurrency, "oracle solution", config,
                           counter=getattr(backend, "api", None), prefetch=getattr(backend, "prefetch", None))


__all__ = ["OracleConfig", "OracleError", "HelperStageError", "build_oracles"]
