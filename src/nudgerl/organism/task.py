"""The model organism: "find the next term" of an integer sequence.

A problem shows the first four terms t0..t3 of t_n = a + b*n + c*n^2 and asks for t4.
*Easy* problems are arithmetic (c = 0); *hard* ones are quadratic (c >= 1).

Strategies (each a named, step-by-step trace):

- ``common_difference``  next = t3 + (t3 - t2).   The habit. Right only when c = 0.
- ``first_difference``   next = t3 + (t1 - t0).   Common too. Right only when c = 0.
- ``sum_of_last_two``    next = t2 + t3.          A Fibonacci guess. Almost never right.
- ``difference_table``   first and second differences, then extend the table.
                          Rare, and right on every problem.

So, as in the paper, the dominant strategy is fallible (its assumption — a constant
difference — fails on hard problems) and the strategy that is always right is rarely
sampled. A hint line ("hint : use the difference table") names a strategy; the base
model is trained to follow it.

Everything here is pure and seeded; tokens are whitespace-separated words so that the
organism's tokenizer is a plain word-level vocabulary (see ``tokenizer.py``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# Largest integer that can appear anywhere in a problem or trace (the tokenizer has one
# token per integer 0..MAX_NUMBER).
MAX_NUMBER = 160

# The family t_n = a + b n + c n^2: ranges of the coefficients (inclusive).
A_RANGE = (0, 30)
B_RANGE_HARD = (0, 6)
C_RANGE_HARD = (1, 3)
B_RANGE_EASY = (1, 9)


@dataclass(frozen=True)
class Strategy:
    name: str  # identifier used in configs, pools and records
    words: str  # how the trace and the hint name it
    hint: str  # the hint text a helper would propose


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in [
        Strategy("common_difference", "common difference", "use the common difference"),
        Strategy("first_difference", "first difference", "use the first difference"),
        Strategy("sum_of_last_two", "sum of last two", "add the last two terms"),
        Strategy("difference_table", "difference table", "use the difference table"),
    ]
}
DOMINANT_STRATEGY = "common_difference"
RARE_CORRECT_STRATEGY = "difference_table"
_STRATEGY_BY_WORDS = {s.words: s.name for s in STRATEGIES.values()}


@dataclass(frozen=True)
class Problem:
    id: str
    terms: tuple[int, int, int, int]
    answer: int
    hard: bool
    coeffs: tuple[int, int, int]  # (a, b, c) of t_n = a + b n + c n^2

    def text(self) -> str:
        return "find the next term : " + " ".join(str(t) for t in self.terms)

    def to_record(self) -> dict:
        return {
            "id": self.id,
            "problem": self.text(),
            "answer": str(self.answer),
            "hard": self.hard,
            "terms": list(self.terms),
            "coeffs": list(self.coeffs),
        }


def _coeff_space(hard: bool) -> list[tuple[int, int, int]]:
    """Every (a, b, c) of the family. Hard = quadratic, easy = arithmetic."""
    if hard:
        # a + b == 3c is exactly when "sum of last two" lands on t4 by luck; leave those
        # out so that on hard problems only the difference table is right.
        return [
            (a, b, c)
            for a in range(A_RANGE[0], A_RANGE[1] + 1)
            for b in range(B_RANGE_HARD[0], B_RANGE_HARD[1] + 1)
            for c in range(C_RANGE_HARD[0], C_RANGE_HARD[1] + 1)
            if a + b != 3 * c
        ]
    return [
        (a, b, 0)
        for a in range(A_RANGE[0], A_RANGE[1] + 1)
        for b in range(B_RANGE_EASY[0], B_RANGE_EASY[1] + 1)
    ]


def is_held_out(coeffs: tuple[int, int, int]) -> bool:
    """A fixed quarter of the family is reserved for evaluation, never trained on."""
    a, b, c = coeffs
    return (7 * a + 3 * b + c) % 4 == 0


def _problem(coeffs: tuple[int, int, int], pid: str) -> Problem:
    a, b, c = coeffs
    t = [a + b * n + c * n * n for n in range(5)]
    return Problem(pid, tuple(t[:4]), t[4], c > 0, coeffs)


def training_problems(seed: int, size: int, hard_fraction: float, prefix: str = "train") -> list[Problem]:
    """``size`` problems (with repeats) from the training part of the family."""
    rng = random.Random(f"{prefix}:{seed}")
    pools = {h: [c for c in _coeff_space(h) if not is_held_out(c)] for h in (True, False)}
    n_hard = round(size * hard_fraction)
    flags = [True] * n_hard + [False] * (size - n_hard)
    rng.shuffle(flags)
    return [_problem(rng.choice(pools[h]), f"{prefix}-{i:05d}") for i, h in enumerate(flags)]


def evaluation_sets(seed: int, specs: dict[str, tuple[int, float]]) -> dict[str, list[Problem]]:
    """Disjoint held-out benchmarks: ``specs[name] = (size, hard_fraction)``.

    Problems are dealt without replacement from the held-out quarter, so no benchmark
    shares a problem with another or with training.
    """
    rng = random.Random(f"eval:{seed}")
    pools = {h: [c for c in _coeff_space(h) if is_held_out(c)] for h in (True, False)}
    for pool in pools.values():
        rng.shuffle(pool)
    out: dict[str, list[Problem]] = {}
    for name, (size, hard_fraction) in specs.items():
        n_hard = round(size * hard_fraction)
        need = {True: n_hard, False: size - n_hard}
        for h, n in need.items():
            if n > len(pools[h]):
                kind = "hard" if h else "easy"
                raise ValueError(
                    f"benchmark {name!r} needs {n} more {kind} problems but only {len(pools[h])} "
                    f"held-out {kind} problems are left; shrink organism.benchmarks sizes"
                )
        chosen = [(True, pools[True].pop()) for _ in range(need[True])]
        chosen += [(False, pools[False].pop()) for _ in range(need[False])]
        rng.shuffle(chosen)
        out[name] = [_problem(c, f"{name}-{i:03d}") for i, (_, c) in enumerate(chosen)]
    return out


def solve(terms: tuple[int, ...] | list[int], strategy: str) -> tuple[list[str], int]:
    """Apply a strategy to the four terms: returns (trace steps, predicted next term)."""
    t0, t1, t2, t3 = terms
    if strategy == "common_difference":
        d = t3 - t2
        return [f"{t3} - {t2} = {d}", f"{t3} + {d} = {t3 + d}"], t3 + d
    if strategy == "first_difference":
        d = t1 - t0
        return [f"{t1} - {t0} = {d}", f"{t3} + {d} = {t3 + d}"], t3 + d
    if strategy == "sum_of_last_two":
        return [f"{t2} + {t3} = {t2 + t3}"], t2 + t3
    if strategy == "difference_table":
        d1, d2, d3 = t1 - t0, t2 - t1, t3 - t2
        s1, s2 = d2 - d1, d3 - d2
        nd = d3 + s2
        steps = [
            f"{t1} - {t0} = {d1}",
            f"{t2} - {t1} = {d2}",
            f"{t3} - {t2} = {d3}",
            f"{d2} - {d1} = {s1}",
            f"{d3} - {d2} = {s2}",
            f"{d3} + {s2} = {nd}",
            f"{t3} + {nd} = {t3 + nd}",
        ]
        return steps, t3 + nd
    raise KeyError(f"unknown strategy {strategy!r}; known: {sorted(STRATEGIES)}")


def arithmetic_facts() -> list[str]:
    """Every "x op y = z" step any strategy takes on any problem of the family.

    The SFT corpus drills these, standing in for the arithmetic an instruct model already
    knows; without them a tiny model memorises traces and fails on held-out sequences.
    """
    facts = set()
    for hard in (True, False):
        for coeffs in _coeff_space(hard):
            terms = _problem(coeffs, "fact").terms
            for strategy in STRATEGIES:
                facts.update(solve(terms, strategy)[0])
    return sorted(facts)


def drill(fact: str) -> tuple[str, str]:
    """(user, assistant) for one arithmetic fact."""
    lhs, rhs = fact.split(" = ")
    return f"compute : {lhs}", f"{fact} . answer : \\boxed{{ {rhs} }}"


def trace(terms, strategy: str) -> str:
    """The full assistant message for a strategy: named, step by step, answer boxed."""
    steps, answer = solve(terms, strategy)
    body = " . ".join(steps)
    return f"strategy : {STRATEGIES[strategy].words} . {body} . answer : \\boxed{{ {answer} }}"


def is_correct_strategy(problem: Problem, strategy: str) -> bool:
    return solve(problem.terms, strategy)[1] == problem.answer


def hint_line(strategy: str) -> str:
    return f"hint : {STRATEGIES[strategy].hint}"


def prompt_text(problem_text: str, hint: str | None = None) -> str:
    """User message: the problem, plus a hint line when nudged (x1); without it this is x0."""
    return problem_text if hint is None else f"{problem_text} . {hint}"


_STRATEGY_RE = re.compile(r"strategy\s*:\s*([a-z ]+?)\s*\.")


def parse_strategy(completion: str) -> str:
    """Which strategy a trace declares, or ``"unknown"`` for a malformed trace."""
    m = _STRATEGY_RE.search(completion)
    if not m:
        return "unknown"
    return _STRATEGY_BY_WORDS.get(m.group(1).strip(), "unknown")


def hint_strategy(hint: str) -> str | None:
    """The catalogue strategy a hint names (None for a hint from outside the catalogue)."""
    for s in STRATEGIES.values():
        if s.hint in hint:
            return s.name
    return None
