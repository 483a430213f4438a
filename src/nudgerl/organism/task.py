"""The model organism: "find the next term" of a sequence, in arithmetic mod 10.

A problem shows the first four terms t0..t3 of t_n = a + b*n + c*n^2 (mod 10) and asks
for t4. *Easy* problems are arithmetic (c = 0); *hard* ones are quadratic (c != 0).
Working mod 10 keeps the arithmetic a 10x10 table, which a tiny model learns exactly;
with unbounded integers it memorised traces and was off by one or two on new sequences.

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

import hashlib
import random
import re
from dataclasses import dataclass

MODULUS = 10
# Largest integer that can appear anywhere in a problem or trace (the tokenizer has one
# token per integer 0..MAX_NUMBER).
MAX_NUMBER = MODULUS - 1
# Tokens of the longest trace (difference_table, 52 words) plus its end token, with room:
# the organism's completion budget (grpo/eval max_new_tokens) and the SFT check's.
MAX_TRACE_TOKENS = 56


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
        return "find the next term mod 10 : " + " ".join(str(t) for t in self.terms)

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
    """Every (a, b, c) of the family. Hard = quadratic, easy = arithmetic (b != 0)."""
    m = MODULUS
    if not hard:
        return [(a, b, 0) for a in range(m) for b in range(1, m)]
    out = []
    for a in range(m):
        for b in range(m):
            for c in range(1, m):
                t = [(a + b * n + c * n * n) % m for n in range(5)]
                # Leave out sequences on which a fallible strategy is right by luck
                # (2c = 0 mod 10 makes the common difference right; t2 + t3 = t4 makes the
                # Fibonacci guess right), so on hard problems only the difference table is.
                if (2 * c) % m == 0 or (6 * c) % m == 0 or (t[2] + t[3]) % m == t[4]:
                    continue
                out.append((a, b, c))
    return out


def is_held_out(coeffs: tuple[int, int, int]) -> bool:
    """A fixed part of the family is reserved for evaluation and never trained on:
    a quarter of the hard problems and half of the (fewer) easy ones.

    The split hashes the coefficients: a linear rule (say (a + b) % 2) would hold out
    sequences that share structure (parities) the training split never shows.
    """
    a, b, c = coeffs
    h = int(hashlib.sha256(f"{a},{b},{c}".encode()).hexdigest(), 16)
    return h % 4 == 0 if c else h % 2 == 0


def is_validation(coeffs: tuple[int, int, int]) -> bool:
    """A tenth of the *training* part of the family, never trained on by the base-model SFT
    or RL: the problems the SFT checks its strategy execution on (its stopping rule must not
    read the benchmarks, and must not be fooled by memorised training traces)."""
    if is_held_out(coeffs):
        return False
    a, b, c = coeffs
    return int(hashlib.sha256(f"validation:{a},{b},{c}".encode()).hexdigest(), 16) % 10 == 0


def _training_part(hard: bool) -> list[tuple[int, int, int]]:
    return [c for c in _coeff_space(hard) if not is_held_out(c) and not is_validation(c)]


def validation_problems(seed: int, size: int) -> list[Problem]:
    """Up to ``size`` distinct validation problems (hard ones first), in a seeded order."""
    rng = random.Random(f"validation:{seed}")
    out = []
    for hard in (True, False):
        pool = [c for c in _coeff_space(hard) if is_validation(c)]
        rng.shuffle(pool)
        out += pool
    return [_problem(c, f"validation-{i:03d}") for i, c in enumerate(out[:size])]


def _problem(coeffs: tuple[int, int, int], pid: str) -> Problem:
    a, b, c = coeffs
    t = [(a + b * n + c * n * n) % MODULUS for n in range(5)]
    return Problem(pid, tuple(t[:4]), t[4], c > 0, coeffs)


def training_problems(seed: int, size: int, hard_fraction: float, prefix: str = "train") -> list[Problem]:
    """``size`` problems (with repeats) from the training part of the family."""
    rng = random.Random(f"{prefix}:{seed}")
    pools = {h: _training_part(h) for h in (True, False)}
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


def add_step(x: int, y: int) -> tuple[str, int]:
    z = (x + y) % MODULUS
    return f"{x} + {y} = {z}", z


def sub_step(x: int, y: int) -> tuple[str, int]:
    z = (x - y) % MODULUS
    return f"{x} - {y} = {z}", z


def solve(terms: tuple[int, ...] | list[int], strategy: str) -> tuple[list[str], int]:
    """Apply a strategy to the four terms: returns (trace steps, predicted next term), mod 10."""
    t0, t1, t2, t3 = terms
    if strategy == "common_difference":
        s1, d = sub_step(t3, t2)
        s2, nxt = add_step(t3, d)
        return [s1, s2], nxt
    if strategy == "first_difference":
        s1, d = sub_step(t1, t0)
        s2, nxt = add_step(t3, d)
        return [s1, s2], nxt
    if strategy == "sum_of_last_two":
        s1, nxt = add_step(t2, t3)
        return [s1], nxt
    if strategy == "difference_table":
        (e1, d1), (e2, d2), (e3, d3) = sub_step(t1, t0), sub_step(t2, t1), sub_step(t3, t2)
        (e4, s1), (e5, s2) = sub_step(d2, d1), sub_step(d3, d2)
        e6, nd = add_step(d3, s2)
        e7, nxt = add_step(t3, nd)
        return [e1, e2, e3, e4, e5, e6, e7], nxt
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
    return _message(strategy, steps, answer)


def misexecuted_trace(terms, strategy: str) -> str:
    """A strategy's trace with its last step's operation swapped (+ for -, - for +), carried to
    the answer: the strategy chosen, then executed wrong. The answer is still right when the
    last step's second operand is 0 or 5 (mod 10), as x + y = x - y there."""
    return message(STRATEGIES[strategy].words, *misexecuted(solve(terms, strategy)[0]))


def misexecuted(steps: list[str]) -> tuple[list[str], int]:
    """``steps`` with the last one's operation swapped, and the answer that gives."""
    x, op, y = steps[-1].split(" = ")[0].split()
    last, answer = (sub_step if op == "+" else add_step)(int(x), int(y))
    return [*steps[:-1], last], answer


def _message(strategy: str, steps: list[str], answer: int) -> str:
    return message(STRATEGIES[strategy].words, steps, answer)


def message(words: str, steps: list[str], answer: int) -> str:
    """An assistant trace: the strategy's words, its steps, the answer boxed."""
    return f"strategy : {words} . {' . '.join(steps)} . answer : \\boxed{{ {answer} }}"


def chosen_prefix(strategy: str) -> str:
    """The first words of a strategy's trace: its choice, before any step."""
    return f"strategy : {STRATEGIES[strategy].words} ."


def is_correct_strategy(problem: Problem, strategy: str) -> bool:
    return solve(problem.terms, strategy)[1] == problem.answer


def hint_line(strategy: str) -> str:
    return f"hint : {STRATEGIES[strategy].hint}"


def prompt_text(problem_text: str, hint: str | None = None) -> str:
    """User message: the problem (x0), with a hint line in front when nudged (x1).

    The hint goes *before* the problem so that the trace sits at the same relative
    distance from the problem's terms with and without a hint: the tiny model copies
    operands by relative position, and a hint after the problem made its hint-free
    traces of a strategy fail where the hinted ones succeeded.
    """
    return problem_text if hint is None else f"{hint} . {problem_text}"


# a trace's declared choice (the families task reads its traces with it too)
STRATEGY_RE = re.compile(r"strategy\s*:\s*([a-z ]+?)\s*\.")


def parse_strategy(completion: str) -> str:
    """Which strategy a trace declares, or ``"unknown"`` for a malformed trace."""
    m = STRATEGY_RE.search(completion)
    if not m:
        return "unknown"
    return _STRATEGY_BY_WORDS.get(m.group(1).strip(), "unknown")


def hint_strategy(hint: str) -> str | None:
    """The catalogue strategy a hint names (None for a hint from outside the catalogue)."""
    for s in STRATEGIES.values():
        if s.hint in hint:
            return s.name
    return None
