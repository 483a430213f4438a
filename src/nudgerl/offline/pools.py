"""Strategy pools: per training problem, a short list of candidate hints (unverified).

Three backends:
- ``openai``: any OpenAI-compatible endpoint proposes ``n`` numbered keyword hints
  (the paper used gpt-4o-mini, n=5, temperature 0.7, 500 tokens). The key comes from the
  environment variable named in the config and never reaches logs or outputs. ``prompt``
  names the request (:data:`nudgerl.data.prompts.HELPER_PROMPTS`: ``authors_hints`` is the
  authors' text, ``standard_hints`` ours).
- ``organism``: a noisy helper for the model organism that proposes strategies from the
  task's catalogue without knowing which is right (the always-right one only sometimes).
- ``transformers``: a local causal LM (``model``: a folder) as the helper, no network
  (:mod:`nudgerl.offline.local_llm`). A small model rarely writes a clean list of exactly ``n``
  hints, so its answer is started with ``1.`` and the numbered items of ``samples`` answers
  are pooled: each item's first clause, at most ``max_hint_words`` words, distinct.

:func:`build_pools` runs a backend over many problems with a concurrency limit,
appends each finished problem to a ``.partial`` file (so a killed or failed run resumes
and only calls the endpoint for what is missing), and writes the final pool file
atomically with a stats sidecar (calls, tokens, failures).
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from nudgerl.offline.helper_llm import (CountingOpenAI, HelperEndpointConfig, HelperStageError, error_text,
                                        run_per_problem)
from nudgerl.offline.local_llm import LocalHelperBackend
from nudgerl.data.prompts import helper_prompt

_NUMBERED = re.compile(r"^\s*(?:[-*]\s*)?\(?(\d+)[.):]\s*(.*)$")
_MARKDOWN = re.compile(r"(\*\*|__|`|^#+\s*|\*|_(?=\S)|(?<=\S)_)")


class HintParseError(ValueError):
    pass


PoolBuildError = HelperStageError


@dataclass
class PoolConfig(HelperEndpointConfig):
    """A strategy-pool stage's params.yaml section: the helper's keys
    (:class:`~nudgerl.offline.helper_llm.HelperEndpointConfig`) and the pool's own."""

    SECTION: ClassVar[str] = "pools"
    PROMPT_KIND: ClassVar[str] = "hints"
    STATS_KEYS: ClassVar[tuple[str, ...]] = (
        "backend", "n", "seed", "prompt", "base_url", "model", "api_key_env", "temperature", "max_tokens",
        "concurrency", "max_retries", "parse_retries", "timeout", "p_correct", "top_p", "samples", "max_hint_words",
        "threads")

    # the helper's defaults that differ for pools
    prompt: str = "standard_hints"
    temperature: float = 0.7
    samples: int = 4  # transformers backend: answers per problem and try, their numbered items pooled
    # the pool's own
    n: int = 3  # hints per problem
    parse_retries: int = 2  # new samples after a malformed answer
    # organism backend: probability that the always-right strategy is in a problem's pool
    p_correct: float = 0.6
    max_hint_words: int = 12  # transformers backend

    def messages(self, record: dict) -> list[dict]:
        return helper_prompt(self.prompt, "hints").messages(record["problem"], self.n)


def clean_hint(text: str) -> str:
    """Strip markdown emphasis, code ticks, headings and trailing punctuation."""
    text = _MARKDOWN.sub("", text).strip()
    return text.rstrip(".;:").strip()


def parse_numbered_hints(text: str, n: int) -> list[str]:
    """Exactly ``n`` distinct, non-empty hints from a numbered list, or HintParseError."""
    hints = []
    for line in (text or "").splitlines():
        m = _NUMBERED.match(clean_hint(line) if line.strip().startswith(("**", "#")) else line)
        if m:
            hint = clean_hint(m.group(2))
            if hint:
                hints.append(hint)
    if len(hints) != n:
        raise HintParseError(f"expected {n} numbered hints, found {len(hints)}")
    if len({h.lower() for h in hints}) != n:
        raise HintParseError("hints are not distinct")
    return hints


# ---------------------------------------------------------------- backends


class OrganismHintBackend:
    """A noisy helper for the organism: strategy names from the catalogue, unverified."""

    def __init__(self, cfg: PoolConfig):
        from nudgerl.organism import task

        self.cfg = cfg
        if not 1 <= cfg.n <= len(task.STRATEGIES):
            raise ValueError(f"organism pools hold 1..{len(task.STRATEGIES)} hints, got n={cfg.n}")

    def propose(self, record: dict) -> tuple[list[str], dict]:
        """The problem's always-right strategy with probability p_correct, the rest of the
        catalogue (the habit, distractors and, in the families task, the other families'
        strategies) filling the pool."""
        from nudgerl.organism.base_config import record_rare_strategy, record_task

        task, right = record_task(record), record_rare_strategy(record)
        rng = random.Random(f"{self.cfg.seed}:{record['id']}")
        wrong = [s for s in task.STRATEGIES if s != right]
        if rng.random() < self.cfg.p_correct:
            chosen = [right] + rng.sample(wrong, self.cfg.n - 1)
        else:
            chosen = rng.sample(wrong, min(self.cfg.n, len(wrong)))
        rng.shuffle(chosen)
        return [task.STRATEGIES[s].hint for s in chosen], {"calls": 0}


class OpenAIHintBackend:
    """Hints from any OpenAI-compatible chat endpoint."""

    def __init__(self, cfg: PoolConfig):
        if not cfg.model:
            raise ValueError("the openai pool backend needs 'model'")
        self.cfg = cfg
        self.api = CountingOpenAI(cfg.base_url, cfg.api_key_env, cfg.max_retries, cfg.timeout)

    def propose(self, record: dict) -> tuple[list[str], dict]:
        """Hints for one problem. HTTP faults (429/5xx/time-outs) are retried inside the
        client with backoff; malformed, truncated or miscounted answers are re-asked here."""
        from openai import APIResponseValidationError

        usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        last_error = None
        for attempt in range(1 + self.cfg.parse_retries):
            try:
                content = self.api.chat(
                    usage,
                    model=self.cfg.model,
                    messages=self.cfg.messages(record),
                    temperature=self.cfg.temperature,
                    max_tokens=self.cfg.max_tokens,
                    **self.cfg.extra,
                )
                if not content:
                    raise HintParseError("empty or truncated answer")
                return parse_numbered_hints(content, self.cfg.n), usage
            except (HintParseError, APIResponseValidationError, ValueError) as e:  # bad answer: ask again
                last_error = e
                time.sleep(min(2.0, 0.1 * 2**attempt))
        err = HintParseError(f"{error_text(last_error)} (after {usage['calls']} requests)")
        err.usage = usage
        raise err


_CLAUSE_END = re.compile(r"(?<=[.;:!?])\s|\s[-\u2013\u2014]\s|,\s(?:which|where|and then)\b")


def pooled_hints(texts: list[str], n: int, max_words: int) -> list[str]:
    """``n`` distinct hints from the numbered items of several answers (first clause of each,
    at most ``max_words`` words), or HintParseError."""
    hints, seen = [], set()
    for text in texts:
        for line in (text or "").splitlines():
            m = _NUMBERED.match(line)
            if not m:
                continue
            hint = clean_hint(_CLAUSE_END.split(clean_hint(m.group(2)), 1)[0])
            hint = clean_hint(" ".join(hint.split()[:max_words]))
            if len(hint) >= 3 and hint.lower() not in seen:
                seen.add(hint.lower())
                hints.append(hint)
    if len(hints) < n:
        raise HintParseError(f"expected {n} distinct numbered hints, found {len(hints)} in {len(texts)} answers")
    return hints[:n]


class TransformersHintBackend(LocalHelperBackend):
    """Hints from a local transformers model (the same helper prompt as the openai backend)."""

    ASSISTANT_PREFIX = "1."

    def _prompt(self, record: dict) -> str:
        return self.llm.prompt(self.cfg.messages(record), self.ASSISTANT_PREFIX)

    def propose(self, record: dict) -> tuple[list[str], dict]:
        usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        prompt, last = self._prompt(record), None
        for attempt in range(1 + self.cfg.parse_retries):
            samples = self.llm.samples_for(record["id"], prompt, self._params(attempt), first_try=attempt == 0)
            for k, v in self.llm.usage(prompt, samples).items():
                usage[k] += v
            try:
                return pooled_hints([self.ASSISTANT_PREFIX + t for t, _ in samples], self.cfg.n,
                                    self.cfg.max_hint_words), usage
            except HintParseError as e:
                last = e
        err = HintParseError(f"{error_text(last)} (after {usage['calls']} tries)")
        err.usage = usage
        raise err


def make_backend(cfg: PoolConfig):
    if cfg.backend == "transformers":
        return TransformersHintBackend(cfg)
    if cfg.backend == "organism":
        return OrganismHintBackend(cfg)
    if cfg.backend == "openai":
        return OpenAIHintBackend(cfg)
    raise ValueError(f"unknown pool backend {cfg.backend!r}; use 'openai', 'organism' or 'transformers'")


# ---------------------------------------------------------------- driver


def build_pools(records: list[dict], cfg: PoolConfig, out_path: str | Path, backend=None) -> dict:
    """Pools for every record; resumes from ``<out>.partial``; raises naming failed ids."""
    backend = backend or make_backend(cfg)

    def propose(record):
        hints, usage = backend.propose(record)
        return {"hints": hints}, usage

    config = cfg.stats_config()
    # one local model in one process: its problems go one at a time (batched up front)
    concurrency = 1 if cfg.backend == "transformers" else cfg.concurrency
    return run_per_problem(records, propose, out_path, concurrency, "pool", config,
                           counter=getattr(backend, "api", None), prefetch=getattr(backend, "prefetch", None))
