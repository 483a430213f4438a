"""The one grader: training reward and evaluation both call :func:`grade`.

Two named modes (config key ``grading.mode``):
- ``standard`` (the default, ours): the answer is read where the prompt asks for it. A
  completion with a ``<SOLUTION>...</SOLUTION>`` region (the authors' templates) is graded
  on its *last* such region, unless the caller passes another ``region`` (a regex with one
  group) or ``region=None`` (the whole completion); without a region, the whole completion.
  A region's text is read like a gold: bare LaTeX (``\\frac{1}{2}``, ``7\\pi``) is math.
- ``authors``: the NudgeRL authors' rule, math-verify's ``parse`` with its default settings
  over the whole completion and over the gold, then ``verify`` (their ``verify.py``, in
  training and evaluation). ``region`` does not apply: their rule reads everything.
  ``benchmarks/grader_modes.py`` measures where the two disagree and which is right.

What counts as correct in the ``standard`` mode (math-verify 0.9.0):
- The gold is parsed first. An integer gold ("16", "016", "-3") is read by expression
  extraction, anything else as LaTeX (``$gold$``, or as given when it is boxed).
- Only the last ``MAX_COMPLETION_CHARS`` of the answer region (of the completion, without
  one) are read; the region itself is found anywhere in the completion. A ``\\boxed{}`` answer
  is preferred over other candidates (even over later unboxed text), and the latest answer
  wins: text before the last ``\\boxed`` is dropped, and math-verify tries matches
  rightmost first. Without a box, "x = 5" or "the answer is 5" is read from the text.
- Comparison is math-verify's: numeric to 6 decimal places, so ``\\frac{1}{2}`` equals
  ``0.5`` (math-verify's choice, and ours: an answer is a number, not a notation) but
  ``0.333`` is not ``\\frac{1}{3}``; ``\\text{13}``, ``30^\\circ``, ``1,000`` and leading
  zeros normalise to the number; ``10\\%`` is 0.1; intervals and sets compare as sets.
- Nothing in a completion is ever executed: math-verify parses LaTeX with a grammar
  (latex2sympy2_extended), and the only text it hands sympy's ``parse_expr`` (which does
  ``eval``) is what its expression regex admits: digits, dots, spaces, ``+-*/^()`` and
  friends, never a name. ``tests/test_grading.py`` feeds it code and shell payloads.

Time limits. math-verify bounds its own work with ``signal.alarm`` and swallows the
time-out (a parse that times out looks like "no answer"), and signals do not work off the
main thread. So we switch math-verify's limits off and bound each whole grade ourselves,
one of two ways:
- on a main thread: in process, under an ``ITIMER_REAL`` alarm (cheap; the default there);
- anywhere else (worker threads, or ``isolate=True``): in a small pool of persistent
  grading processes; an item past its limit has its process killed and replaced. A
  process's start-up (about a second, once) is not part of any item's limit.
Either way a time-out scores 0 and is counted, and the caller's own alarm is restored.
Both modes run under these limits, region extraction included.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from nudgerl.evaluation.answers import (DEFAULT_MODE, GRADER_MODES, MAX_COMPLETION_CHARS, SOLUTION_REGION,
                                        judge_unbounded, warm_up_modes)
# shutdown_workers and WORKER_START_SECONDS belong to the grader's interface (callers stop its processes)
from nudgerl.evaluation.grading_processes import WORKER_START_SECONDS, shutdown_workers, worker_pool  # noqa: F401

TIME_LIMIT_SECONDS = 5.0
OUTCOMES = ("correct", "wrong", "no_answer", "gold_unparsed", "timeout", "error")


class _ModeRegion:
    """The ``region`` a caller gets without naming one: the mode's own (standard: the last
    ``<SOLUTION>`` region, if any; authors: the whole completion)."""

    def __repr__(self) -> str:
        return "MODE_REGION"


MODE_REGION = _ModeRegion()


def answer_region_or_mode(region: str | None):
    """The ``region`` argument of :func:`grade` for a prompt template's answer region: that
    region, or (none named) the grader mode's own."""
    return region or MODE_REGION


def grading_region(template):
    """:func:`answer_region_or_mode` of a prompt template (``nudgerl.data.prompts.PromptTemplate``),
    or of no template (the organism's built-in prompts): the mode's own."""
    return answer_region_or_mode(template.answer_region if template is not None else None)


@dataclass
class GradeStats:
    """Counters a caller keeps across many grades (written to eval summaries as ``grader``).

    ``no_answer``: no answer could be parsed from the completion; ``gold_unparsed``: the
    gold itself did not parse (a data problem); ``timeout``: the item ran past its limit;
    ``error``: math-verify raised, or a grading process died. Each scores 0.
    """

    counts: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, outcome: str) -> None:
        with self._lock:
            self.counts["graded"] += 1
            self.counts[outcome] += 1

    def as_dict(self) -> dict[str, int]:
        return {k: int(self.counts[k]) for k in ("graded", *OUTCOMES)}


def grade(completion: str, gold: str, stats: GradeStats | None = None, *, mode: str = DEFAULT_MODE,
          region=MODE_REGION, time_limit: float | None = None, isolate: bool | None = None) -> float:
    """1.0 if the completion's final answer equals ``gold``, else 0.0 (also on a time-out).

    ``mode``: one of :data:`GRADER_MODES` (see the module docstring).
    ``region``: standard mode only: a regex with one group naming where the answer is
    written (its last match is graded), None for the whole completion; by default the last
    ``<SOLUTION>`` region when there is one.
    ``time_limit``: seconds for the whole item (default :data:`TIME_LIMIT_SECONDS`).
    ``isolate``: None picks the in-process path on a main thread and a grading process
    elsewhere; True always uses a grading process (bounds even work that ignores signals).
    """
    outcome = judge(completion, gold, mode=mode, region=region, time_limit=time_limit, isolate=isolate)
    if stats is not None:
        stats.record(outcome)
    return 1.0 if outcome == "correct" else 0.0


def check_mode(mode: str) -> str:
    if mode not in GRADER_MODES:
        raise ValueError(f"unknown grader mode {mode!r}; use one of {list(GRADER_MODES)} (config key 'grading.mode')")
    return mode


def _effective_region(mode: str, region) -> str | None:
    if mode == "authors":
        return None  # the authors' rule reads the whole completion, whatever a template names
    if region is MODE_REGION:
        return SOLUTION_REGION
    if region is not None and re.compile(region, re.DOTALL).groups != 1:
        raise ValueError(f"answer region {region!r} needs exactly one regex group")
    return region


def judge(completion: str, gold: str, *, mode: str = DEFAULT_MODE, region=MODE_REGION,
          time_limit: float | None = None, isolate: bool | None = None) -> str:
    """The outcome of one grade: one of :data:`OUTCOMES`."""
    time_limit = TIME_LIMIT_SECONDS if time_limit is None else float(time_limit)
    if time_limit <= 0:
        raise ValueError(f"time_limit must be positive, got {time_limit}")
    region = _effective_region(check_mode(mode), region)
    completion = str(completion)
    if mode == "standard" and region is None:  # the final answer sits at the end; the tail bounds parse time
        completion = completion[-MAX_COMPLETION_CHARS:]
    item = (completion, str(gold), mode, region)
    on_main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if isolate is False and not on_main:
        raise RuntimeError("in-process grading has a time limit only on the main thread; use isolate=None/True")
    if isolate or not on_main:
        return worker_pool().judge(item, time_limit)
    return _judge_under_alarm(item, time_limit)



# ---------------------------------------------------------------------------------------
# Bounded path 1: in process, main thread, under an interval-timer alarm.


class _Deadline(BaseException):
    """Raised by our alarm; a BaseException so math-verify's ``except Exception`` lets it through."""


@lru_cache(maxsize=1)
def _warm_up() -> None:
    """Import math-verify/sympy and build their lazy regexes once, outside any time limit: an
    alarm that lands inside a first import would time out a valid answer (and could leave
    a module half-imported)."""
    warm_up_modes()


# After the deadline the alarm repeats at this interval until the judge has stopped: a raise
# that lands in a GC callback or a __del__ is printed and dropped by Python, and a one-shot
# alarm would then leave the item running with no limit.
DEADLINE_REPEAT_SECONDS = 0.05


def _judge_under_alarm(item: tuple, limit: float) -> str:
    _warm_up()
    armed = [False]

    def on_alarm(signum, frame):
        if armed[0]:  # raise only while the item is being judged
            raise _Deadline

    def drop_deadline(unraisable):
        # A deadline that lands in a __del__ or a GC callback is handed to sys.unraisablehook,
        # not to us; it is our own signal (the repeat alarm stops the item), not an error of the
        # code it interrupted. Another hook (pytest's) would report it, and a second alarm
        # landing while that hook formats its traceback breaks the hook itself.
        if unraisable.exc_type is not _Deadline:
            previous_hook(unraisable)

    outcome = "timeout"
    previous_hook = sys.unraisablehook
    sys.unraisablehook = drop_deadline
    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_timer = signal.getitimer(signal.ITIMER_REAL)
    t0 = time.monotonic()
    try:
        armed[0] = True
        signal.setitimer(signal.ITIMER_REAL, limit, DEADLINE_REPEAT_SECONDS)
        outcome = judge_unbounded(*item)
        armed[0] = False
    except _Deadline:
        pass  # a deadline hit after the outcome was known keeps that outcome
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        sys.unraisablehook = previous_hook
        if previous_timer[0] > 0:  # give the caller's own alarm back, less the time we used
            remaining = max(previous_timer[0] - (time.monotonic() - t0), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_timer[1])
    return outcome
