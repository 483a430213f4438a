"""The learning-rate schedule of the SFT phase, ended early by the execution check."""

from __future__ import annotations

import math


class SFTSchedule:
    """Learning-rate factor of phase 2, with the execution check in the loop.

    Warm-up, then cosine cycles of ``cycle_steps``. The first check that passes turns the
    rest of the run into a linear anneal of ``anneal_steps`` from the current rate (a run
    that has learned stops early); a cycle that ends without a pass is followed by another at
    ``restart_peak`` times the previous peak (a slow run gets more training), up to ``max_steps``.
    """

    def __init__(self, warmup: int, cycle_steps: int, anneal_steps: int, max_steps: int, restart_peak: float = 0.5):
        self.warmup, self.cycle_steps, self.anneal_steps, self.max_steps = warmup, cycle_steps, anneal_steps, max_steps
        self.restart_peak = restart_peak
        self.cycle_start, self.peak, self.anneal = warmup, 1.0, None  # anneal: (first step, factor there)
        self.restarts = 0

    def factor(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        if self.anneal is not None:
            start, f = self.anneal
            return max(0.0, f * (1 - (step - start) / self.anneal_steps))
        if step - self.cycle_start >= self.cycle_steps:  # the cycle ended without a pass
            self.cycle_start, self.peak, self.restarts = step, self.peak * self.restart_peak, self.restarts + 1
        t = (step - self.cycle_start) / self.cycle_steps
        return self.peak * 0.5 * (1 + math.cos(math.pi * t))

    def passed(self, step: int) -> None:
        if self.anneal is None:
            self.anneal = (step, self.factor(step))

    def done(self, step: int) -> bool:
        if self.anneal is not None:
            return step >= min(self.anneal[0] + self.anneal_steps, self.max_steps)
        return step >= self.max_steps
