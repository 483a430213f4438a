"""The one grader: training reward and evaluation both call :func:`grade`.

math-verify parses the gold answer first, then the completion (``\\boxed{}`` preferred,
plain expressions as a fallback; the last answer in the text wins), and compares them
symbolically. Nothing in a completion is ever executed: math-verify parses LaTeX and
expressions with sympy's parser, never ``eval``.

math-verify's own time limits use ``signal.alarm``, which only works on the main thread.
We use them there, and run without them elsewhere (bounded instead by the input cap
``MAX_COMPLETION_CHARS``), so the grader also works inside worker threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

# Long completions are truncated to their tail before parsing: the final answer sits
# at the end, and parse time grows with the input.
MAX_COMPLETION_CHARS = 4000
TIMEOUT_SECONDS = 5


@dataclass
class GradeStats:
    """Counters a caller can keep across many grades (written to eval summaries)."""

    counts: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, int]:
        return {k: int(self.counts[k]) for k in ("graded", "correct", "no_answer", "gold_unparsed", "timeout", "error")}


def _timeout() -> int | None:
    return TIMEOUT_SECONDS if threading.current_thread() is threading.main_thread() else None


def _extraction_configs():
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]


def parse_answer(text: str):
    """The parsed answer(s) of a text (empty list when none is found)."""
    from math_verify import parse

    text = text[-MAX_COMPLETION_CHARS:]
    # The latest boxed answer wins (a model may box an intermediate result first).
    last_box = text.rfind("\\boxed")
    if last_box > 0:
        text = text[last_box:]
    return parse(text, extraction_config=_extraction_configs(), parsing_timeout=_timeout())


def grade(completion: str, gold: str, stats: GradeStats | None = None) -> float:
    """1.0 if the completion's final answer equals ``gold``, else 0.0."""
    from math_verify import verify
    from math_verify.errors import TimeoutException

    stats = stats if stats is not None else GradeStats()
    stats.counts["graded"] += 1
    try:
        gold_parsed = parse_answer(gold if "\\boxed" in gold or "$" in gold else f"${gold}$")
        if not gold_parsed:
            stats.counts["gold_unparsed"] += 1
            return 0.0
        pred = parse_answer(completion)
        if not pred:
            stats.counts["no_answer"] += 1
            return 0.0
        ok = verify(gold_parsed, pred, timeout_seconds=_timeout())
    except TimeoutException:
        stats.counts["timeout"] += 1
        return 0.0
    except Exception:  # a malformed completion must cost a zero reward, never the run
        stats.counts["error"] += 1
        return 0.0
    stats.counts["correct"] += bool(ok)
    return 1.0 if ok else 0.0
