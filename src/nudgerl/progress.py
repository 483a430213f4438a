"""Plain progress lines for long jobs: how far, how long so far, how long still.

Progress bars stay off everywhere (tqdm in TRL and vLLM): a Slurm log keeps every redraw of a
bar, one unreadable line of carriage returns. Training and evaluation print instead, now and
then, one line such as::

    progress: step 120/400 (30%), elapsed 0:41:02, ETA 1:35:45

The rule for when (:func:`should_report`) and the estimate (:func:`eta_seconds`) are pure
functions; :class:`Progress` holds the clock and the last line's place for a loop.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

# About this many lines over a whole run by count alone (one per 5%)...
LINES_PER_RUN = 20
# ...and one whenever a unit of work ends this long after the last line: a run of few, long
# steps (a paper GRPO step takes minutes) still reports each of them.
MAX_SILENCE_S = 60.0


def report_interval(total: int, lines: int = LINES_PER_RUN) -> int:
    """Units of work between two lines by count: about ``lines`` lines over ``total`` units."""
    return max(1, total // lines)


def should_report(done: int, total: int, last_reported: int | None, seconds_since_report: float, every: int,
                  max_silence_s: float = MAX_SILENCE_S) -> bool:
    """Whether the line for ``done`` units of ``total`` is due: the first update (nothing
    reported yet: the job shows at once that work started, and at what pace), the last one,
    one that passes a multiple of ``every`` (work may advance by more than one unit: a batch of
    samples), or any once ``max_silence_s`` have passed since the last line."""
    if last_reported is None or done >= total:
        return True
    return done // every > last_reported // every or seconds_since_report >= max_silence_s


def eta_seconds(done: int, total: int, elapsed_s: float, start: int = 0) -> float | None:
    """Seconds left at this run's mean pace: ``elapsed_s`` went into the units ``start``..``done``.
    ``start`` is the work done before this run began (a resumed run's checkpoint step, evaluation
    chunks reused from an earlier attempt): another job spent that time, so it takes no part in
    the pace, and only ``total - done`` is left. None before this run has finished a unit."""
    ran = done - start
    if ran <= 0:
        return None
    return max(0.0, elapsed_s / ran * (total - done))


def clock_text(seconds: float) -> str:
    """H:MM:SS, hours not wrapped at a day (a 30-hour estimate reads 30:00:00)."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def progress_line(what: str, done: int, total: int, elapsed_s: float, eta_s: float | None, detail: str = "") -> str:
    """``progress: step 120/400 (30%), elapsed 0:41:02, ETA 1:35:45``; ``detail`` (what else was
    done, e.g. samples) goes after the percentage."""
    percent = int(100 * done / total) if total else 100
    extra = f", {detail}" if detail else ""
    eta = clock_text(eta_s) if eta_s is not None else "unknown"
    return f"progress: {what} {done}/{total} ({percent}%){extra}, elapsed {clock_text(elapsed_s)}, ETA {eta}"


class Progress:
    """Progress of one loop over ``total`` units, ``start`` of them done before it (a resume).
    :meth:`update` with the units done so far logs a line when :func:`should_report` says so.
    The clock starts at construction or at :meth:`restart` (after a model load, which is not
    part of the pace)."""

    def __init__(self, what: str, total: int, start: int = 0, log: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, every: int | None = None,
                 max_silence_s: float = MAX_SILENCE_S):
        self.what, self.total, self.start = what, total, start
        self.log = log or print
        self.clock = clock
        self.every = every or report_interval(total - start)
        self.max_silence_s = max_silence_s
        self.last_reported: int | None = None
        self.restart()

    def restart(self) -> None:
        self.t0 = self.t_reported = self.clock()

    def skip(self, units: int) -> None:
        """``units`` were done without work in this run (reused results): they count as done,
        not in the pace."""
        self.start += units

    def update(self, done: int, detail: str = "") -> str | None:
        """Log the line for ``done`` units if it is due; returns it (None when not due)."""
        now = self.clock()
        if not should_report(done, self.total, self.last_reported, now - self.t_reported, self.every,
                             self.max_silence_s):
            return None
        elapsed = now - self.t0
        line = progress_line(self.what, done, self.total, elapsed, eta_seconds(done, self.total, elapsed, self.start),
                             detail)
        self.last_reported, self.t_reported = done, now
        self.log(line)
        # a job's stdout is a file (the Slurm or Snakemake log), buffered: the line shows now, not
        # when the buffer fills, whatever ``log`` is (print, or a function that prints)
        sys.stdout.flush()
        return line
