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

import atexit
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

# Long completions are truncated to their tail before parsing: the final answer sits
# at the end, and parse time grows with the input.
MAX_COMPLETION_CHARS = 4000
TIME_LIMIT_SECONDS = 5.0
# Starting a grading process imports sympy; generous, since it is paid once per process.
WORKER_START_SECONDS = 120.0
MAX_WORKERS = 4

OUTCOMES = ("correct", "wrong", "no_answer", "gold_unparsed", "timeout", "error")
_INTEGER = re.compile(r"[-+]?\d+")

GRADER_MODES = ("standard", "authors")
DEFAULT_MODE = "standard"
# Where the authors' system prompt asks for the solution.
SOLUTION_REGION = r"<SOLUTION>(.*?)</SOLUTION>"


class _ModeRegion:
    """The ``region`` a caller gets without naming one: the mode's own (standard: the last
    ``<SOLUTION>`` region, if any; authors: the whole completion)."""

    def __repr__(self) -> str:
        return "MODE_REGION"


MODE_REGION = _ModeRegion()


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
        return _pool().judge(item, time_limit)
    return _judge_under_alarm(item, time_limit)


def answer_text(completion: str, region: str | None) -> tuple[str, bool]:
    """The text a standard grade reads: the last match of ``region`` (and True), or the
    whole completion (and False) when there is none."""
    if region:
        found = re.findall(region, completion, flags=re.DOTALL)
        if found:
            return found[-1], True
    return completion, False


# ---------------------------------------------------------------------------------------
# The comparison itself, without any time limit (math-verify's signal-based limits off).


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


def _judge_unbounded(completion: str, gold: str, mode: str = DEFAULT_MODE, region: str | None = None) -> str:
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


def _warm_up_modes() -> None:
    """Every mode's imports and lazily built regexes (math-verify builds them per config)."""
    for mode in GRADER_MODES:
        _judge_unbounded("<SOLUTION>\\boxed{1}</SOLUTION>", "1", mode, SOLUTION_REGION)


# ---------------------------------------------------------------------------------------
# Bounded path 1: in process, main thread, under an interval-timer alarm.


class _Deadline(BaseException):
    """Raised by our alarm; a BaseException so math-verify's ``except Exception`` lets it through."""


@lru_cache(maxsize=1)
def _warm_up() -> None:
    """Import math-verify/sympy and build their lazy regexes once, outside any time limit: an
    alarm that lands inside a first import would time out a valid answer (and could leave
    a module half-imported)."""
    _warm_up_modes()


def _judge_under_alarm(item: tuple, limit: float) -> str:
    _warm_up()
    armed = [False]

    def on_alarm(signum, frame):
        if armed[0]:  # raise at most once, and only while the item is being judged
            armed[0] = False
            raise _Deadline

    outcome = "timeout"
    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_timer = signal.getitimer(signal.ITIMER_REAL)
    t0 = time.monotonic()
    try:
        armed[0] = True
        signal.setitimer(signal.ITIMER_REAL, limit)
        outcome = _judge_unbounded(*item)
        armed[0] = False
    except _Deadline:
        pass  # a deadline hit after the outcome was known keeps that outcome
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer[0] > 0:  # give the caller's own alarm back, less the time we used
            remaining = max(previous_timer[0] - (time.monotonic() - t0), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_timer[1])
    return outcome


# ---------------------------------------------------------------------------------------
# Bounded path 2: persistent grading processes, killed and replaced when an item overruns.
# Plain subprocesses speaking JSON lines on stdin/stdout: they work from any thread, from
# daemonic multiprocessing workers (which may not have multiprocessing children), and do
# not re-import the caller's __main__ the way multiprocessing's spawn does.


class _Worker:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nudgerl.grading", "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )
        self._buffer = b""
        self.ready = False

    def _read_line(self, deadline: float) -> bytes | None:
        """One reply line, or None at the deadline or when the process has gone."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def wait_ready(self) -> None:
        if self.ready:
            return
        line = self._read_line(time.monotonic() + WORKER_START_SECONDS)
        if line is None or json.loads(line) != {"ready": True}:
            self.kill()
            raise RuntimeError(f"grading process did not start within {WORKER_START_SECONDS:.0f} s "
                               f"(exit code {self.proc.poll()}); see its stderr above")
        self.ready = True

    def judge(self, item: tuple, limit: float) -> str:
        self.wait_ready()
        completion, gold, mode, region = item
        request = {"completion": completion, "gold": gold, "mode": mode, "region": region}
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return "error"
        line = self._read_line(time.monotonic() + limit)
        if line is None:
            timed_out = self.proc.poll() is None
            self.kill()
            return "timeout" if timed_out else "error"  # killed by us, or died (e.g. out of memory)
        return json.loads(line)["outcome"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # end of input: the process exits by itself
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _WorkerPool:
    """Up to ``size`` grading processes; a thread borrows one per item."""

    def __init__(self, size: int = MAX_WORKERS):
        self.pid = os.getpid()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []

    def judge(self, item: tuple, limit: float) -> str:
        with self._slots:
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            if worker is None or not worker.alive():
                worker = _Worker()
            try:
                outcome = worker.judge(item, limit)
            except BaseException:
                worker.kill()
                raise
            if not worker.alive():
                worker = _Worker()  # start the replacement now; its start-up overlaps the caller's work
            with self._lock:
                self._idle.append(worker)
            return outcome

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


_POOL: _WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _WorkerPool:
    global _POOL
    with _POOL_LOCK:
        # A forked child must not share its parent's pipes: it starts its own processes.
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = _WorkerPool()
        return _POOL


def shutdown_workers() -> None:
    """Stop the grading processes (they also stop by themselves when this process exits)."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


atexit.register(shutdown_workers)


def _serve() -> None:
    """A grading process: one JSON request per stdin line, one JSON reply per stdout line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the caller's to handle; we stop at end of input
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the replies
    _warm_up_modes()  # imports, and math-verify's lazily built regexes
    replies.write('{"ready": true}\n')
    replies.flush()
    for line in sys.stdin:
        request = json.loads(line)
        outcome = _judge_unbounded(request["completion"], request["gold"], request["mode"], request["region"])
        replies.write(json.dumps({"outcome": outcome}) + "\n")
        replies.flush()


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    _serve()
