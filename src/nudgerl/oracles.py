"""Oracle solutions for the POPE baseline, cached by DVC exactly like strategy pools.

Backend ``openai``: any OpenAI-compatible endpoint (the authors used deepseek-reasoner,
temperature 0.4, max 16384 tokens, a standard system prompt, and kept the message
content). With ``filter_correct`` each solution is graded by the project's grader and
re-sampled, up to ``filter_attempts`` times, until one is right.
Backend ``organism``: the generator's reference trace with the always-right strategy.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .grading import grade
from .helper_stage import CountingOpenAI, HelperStageError, config_from_dict, error_text, run_per_problem

SYSTEM_PROMPT = "You are a helpful assistant."


class OracleError(ValueError):
    pass


@dataclass
class OracleConfig:
    backend: str = "organism"  # "openai" | "organism"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    system_prompt: str = SYSTEM_PROMPT
    temperature: float = 0.4
    max_tokens: int = 16384
    concurrency: int = 4
    max_retries: int = 4
    timeout: float = 600.0
    filter_correct: bool = False
    filter_attempts: int = 5
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> OracleConfig:
        return config_from_dict(cls, d, "oracle")


class OrganismOracleBackend:
    def propose(self, record: dict) -> tuple[dict, dict]:
        from .organism import task

        if "terms" not in record:
            raise OracleError(f"problem {record['id']!r} has no 'terms': not an organism problem")
        return {"solution": task.trace(record["terms"], task.RARE_CORRECT_STRATEGY), "attempts": 1}, {}


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
                    messages=[{"role": "system", "content": self.cfg.system_prompt},
                              {"role": "user", "content": record["problem"]}],
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


def build_oracles(records: list[dict], cfg: OracleConfig, out_path: str | Path) -> dict:
    if cfg.backend == "organism":
        backend = OrganismOracleBackend()
    elif cfg.backend == "openai":
        backend = OpenAIOracleBackend(cfg)
    else:
        raise ValueError(f"unknown oracle backend {cfg.backend!r}; use 'openai' or 'organism'")
    config = {k: v for k, v in asdict(cfg).items() if k != "extra"}
    return run_per_problem(records, backend.propose, out_path, cfg.concurrency, "oracle solution", config,
                           counter=getattr(backend, "api", None))


__all__ = ["OracleConfig", "OracleError", "HelperStageError", "build_oracles"]
