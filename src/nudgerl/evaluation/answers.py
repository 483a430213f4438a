"""Reading and comparing answers, without any time limit: what :func:`nudgerl.evaluation.grading.grade`
runs under its limits (in process, or in a grading process of :mod:`nudgerl.evaluation.grading_processes`).

math-verify's own signal-based limits are off here; the modes and what counts as correct
are described in :mod:`nudgerl.evaluation.grading`.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

from nudgerl.data.prompts import SOLUTION_REGION

# Long completions are truncated to their tail before parsing: the final answer sits
# at the end, and parse time grows with the input.
MAX_COMPLETION_CHARS = 4000
_INTEGER = re.compile(r"[-+]?\d+")

GRADER_MODES = ("standard", "authors")
DEFAULT_MODE = "standard"


def answer_text(completion: str, region: str | None) -> tuple[str, bool]:
    """The text a standard grade reads: the last match of ``region`` (and True), or the
    whole completion (and False) when there is none."""
    if region:
        found = re.findall(region, completion, flags=re.DOTALL)
        if found:
            return found[-1], True
    return completion, False


class _DroppedTimeoutWarning(logging.Filter):
    """math-verify warns that its limits are off; ours are on, so the warning misleads."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DroppedTimeoutWarning())


def _latex_config():
    from math_verify import LatexExtractionConfig

    return LatexExtractionConfig(boxed_match_priority=0)


@lru_cache(maxsize=4096)
def parse_gold(gold: str) -> tuple:
    """The parsed gold (cached: every rollout of a prompt shares it)."""
    from math_verify import ExprExtractionConfig, parse

    gold = gold.strip()
    if _INTEGER.fullmatch(gold):
        return tuple(parse(gold, extraction_config=[ExprExtractionConfig()], parsing_timeout=None))
    text = gold if "\\boxed" in gold else f"${gold}$"
    return tuple(parse(text, extraction_config=[_latex_config()], parsing_timeout=None))


def parse_answer(text: str) -> list:
    """The parsed final answer of a completion (empty list when none is found)."""
    from math_verify import ExprExtractionConfig, parse

    text = text[-MAX_COMPLETION_CHARS:]
    # The latest boxed answer wins (a model may box an intermediate result first).
    last_box = text.rfind("\\boxed")
    if last_box > 0:
        text = text[last_box:]
    return parse(text, extraction_config=[_latex_config(), ExprExtractionConfig()], parsing_timeout=None)


# A region written as bare math: no math delimiter (an unescaped $, \( or \[, or a box)
# and, once LaTeX commands, \text{...} and environment names are set aside, no word of two or more letters.
_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed")
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|operatorname|begin|end)\s*\{[^{}]*\}")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")


def is_bare_math(text: str) -> bool:
    if _DELIMITED.search(text):
        return False
    return not _WORD.search(_COMMAND.sub(" ", _TEXT_COMMAND.sub(" ", text)))


def parse_region(text: str) -> list:
    """The parsed answer of a region's text. Bare math (``\\frac{1}{2}``, ``(3, \\frac{\\pi}{2})``)
    is read as LaTeX, as a gold is: math-verify finds LaTeX only between delimiters, and
    its plain-text reading of ``7\\pi`` is 7. Anything else (a sentence, a box) as a completion."""
    from math_verify import parse

    if is_bare_math(text) and text.strip():
        found = parse(f"${text.strip()}$", extraction_config=[_latex_config()], parsing_timeout=None)
        if found:
            return found
    return parse_answer(text)


@lru_cache(maxsize=4096)
def _authors_gold(gold: str) -> tuple:
    from math_verify import parse

    return tuple(parse(gold, parsing_timeout=None))


def _authors_outcome(completion: str, gold: str) -> str:
    """The authors' rule: ``verify(parse(gold), parse(completion))`` with math-verify's
    default extraction (their time-outs are signals; ours bound the item instead)."""
    from math_verify import parse, verify

    gold_parsed = _authors_gold(gold)
    if not gold_parsed:
        return "gold_unparsed"
    pred = parse(completion, parsing_timeout=None)
    if not pred:
        return "no_answer"
    return "correct" if verify(list(gold_parsed), pred, timeout_seconds=None) else "wrong"


def judge_unbounded(completion: str, gold: str, mode: str = DEFAULT_MODE, region: str | None = None) -> str:
    from math_verify import verify

    try:
        if mode == "authors":
            return _authors_outcome(completion, gold)
        gold_parsed = parse_gold(gold)
        if not gold_parsed:
            return "gold_unparsed"
        # the region is found in the whole completion (under the time limit), then read from its tail
        text, in_region = answer_text(completion, region)
        text = text[-MAX_COMPLETION_CHARS:]
        pred = parse_region(text) if in_region else parse_answer(text)
        if not pred:
            return "no_answer"
        return "correct" if verify(list(gold_parsed), pred, timeout_seconds=None) else "wrong"
    except Exception:  # a malformed completion must cost a zero reward, never the run
        return "error"


def warm_up_modes() -> None:
    """Every mode's imports and lazily built regexes (math-verify builds them per config)."""
    for mode in GRADER_MODES:
        judge_unbounded("<SOLUTION>\\boxed{1}</SOLUTION>", "1", mode, SOLUTION_REGION)
