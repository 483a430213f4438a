"""The organism's task with several problem families: a rare always-right strategy *per family*.

The single-family task (:mod:`nudgerl.organism.task`) has one rare strategy, right on every
hard problem: one success anywhere moves one shared choice, so plain GRPO pools its exploration
over the whole run. The paper's obstacle is per problem: a strategy rare on *this* problem. Here
each family of sequences (mod 10, first four terms shown, the fifth asked) has its own
always-right strategy, and on a family's hard problems *only* that strategy is right — the
habit, the distractors and the other families' strategies all fail there — so a discovery on
one family solves no other.

========== ============================ ============================= ==========================
family     t_n                          always-right strategy          the question says
========== ============================ ============================= ==========================
quadratic  a + b n + c n^2              difference table               find the next term
doubling   a + b n + c 2^n              doubled differences            continue the sequence
interleave even a + b k, odd e + f k    every other term               what comes next
tripling   a + b n + c 3^n              tripled differences            extend the list
========== ============================ ============================= ==========================

The family is not named: the solver reads it from the question's wording, as a reader tells a
geometry problem from a counting one. Every family generalises an arithmetic sequence, so its
*easy* problems are arithmetic ones in its wording, on which the habit (``common_difference``)
and every family's strategy are right. Its *hard* problems are the rest of the family, minus
any sequence on which a strategy other than the family's is right by luck.

The same module-level names as :mod:`nudgerl.organism.task` (``STRATEGIES``, ``solve``,
``trace``, ``hint_line``, ``training_problems`` ...), so the base-model code takes either.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from nudgerl.organism import task
from nudgerl.organism.task import (
    MAX_NUMBER,
    MODULUS,
    Strategy,
    add_step,
    drill,
    prompt_text,
    sub_step,
)

__all__ = ["MAX_NUMBER", "drill", "prompt_text"]  # shared with the single-family task

# The longest trace (tripled differences: 9 steps, 65 words) plus its end token, with room.
MAX_TRACE_TOKENS = 72

# A hint describes its strategy without a word of the strategy's name, as a helper's hint
# describes an approach ("watch how the gaps change") rather than dictating the solution's first
# words: a hint that names the trace's words lets the model copy its choice from the prompt.
# (One seed's transfer probe each, CHANGELOG.md 2026-12-07, does not tell the two apart.)
STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in [
        Strategy("common_difference", "common difference", "repeat the final step"),
        Strategy("first_difference", "first difference", "reuse the opening step"),
        Strategy("sum_of_last_two", "sum of last two", "combine the final pair"),
        Strategy("difference_table", "difference table", "watch how the gaps change"),
        Strategy("doubled_differences", "doubled differences", "each change of gap doubles"),
        Strategy("every_other_term", "every other term", "compare alternate positions"),
        Strategy("tripled_differences", "tripled differences", "each change of gap triples"),
    ]
}
DOMINANT_STRATEGY = "common_difference"
# The strategies no family makes rare-and-right: the habit and two distractors.
FALLIBLE_STRATEGIES = ("common_difference", "first_difference", "sum_of_last_two")
_STRATEGY_BY_WORDS = {s.words: s.name for s in STRATEGIES.values()}


@dataclass(frozen=True)
class Family:
    name: str
    question: str  # the problem's wording, which is how a solver tells the family
    rare_strategy: str  # right on every problem of the family, rarely chosen unhinted


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("quadratic", "find the next term mod 10 :", "difference_table"),
        Family("doubling", "continue the sequence mod 10 :", "doubled_differences"),
        Family("interleave", "what comes next mod 10 :", "every_other_term"),
        Family("tripling", "extend the list mod 10 :", "tripled_differences"),
    ]
}
RARE_STRATEGIES = tuple(f.rare_strategy for f in FAMILIES.values())


def family_of_strategy(strategy: str) -> str | None:
    """The family whose always-right strategy this is (None for the habit and distractors)."""
    return next((f.name for f in FAMILIES.values() if f.rare_strategy == strategy), None)


@dataclass(frozen=True)
class Problem:
    id: str
    family: str
    terms: tuple[int, int, int, int]
    answer: int
    hard: bool
    params: tuple[int, ...]  # the family's parameters (see _sequence)

    def text(self) -> str:
        return f"{FAMILIES[self.family].question} " + " ".join(str(t) for t in self.terms)

    def to_record(self) -> dict:
        return {
            "id": self.id,
            "problem": self.text(),
            "answer": str(self.answer),
            "hard": self.hard,
            "family": self.family,
            "rare_strategy": FAMILIES[self.family].rare_strategy,
            "terms": list(self.terms),
            "params": list(self.params),
        }


def _sequence(family: str, params: tuple[int, ...]) -> list[int]:
    """t_0..t_4 of a family's sequence (mod 10)."""
    m = MODULUS
    if family == "arithmetic":
        a, b = params
        return [(a + b * n) % m for n in range(5)]
    if family == "quadratic":
        a, b, c = params
        return [(a + b * n + c * n * n) % m for n in range(5)]
    if family == "doubling":
        a, b, c = params
        return [(a + b * n + c * 2**n) % m for n in range(5)]
    if family == "interleave":
        a, b, e, f = params
        return [(a + b * (n // 2)) % m if n % 2 == 0 else (e + f * (n // 2)) % m for n in range(5)]
    if family == "tripling":
        a, b, c = params
        return [(a + b * n + c * 3**n) % m for n in range(5)]
    raise KeyError(f"unknown family {family!r}; known: {sorted(FAMILIES)}")


def _arity(family: str) -> int:
    return 4 if family == "interleave" else 3


def _hard_space(family: str) -> list[tuple[int, ...]]:
    """Every parameter tuple of a family whose sequence only the family's strategy solves.

    Distinct sequences only (parameters that give the same five terms count once)."""
    import itertools

    own = FAMILIES[family].rare_strategy
    seen, out = set(), []
    for params in itertools.product(range(MODULUS), repeat=_arity(family)):
        t = _sequence(family, params)
        if tuple(t) in seen:
            continue
        seen.add(tuple(t))
        if solve(t[:4], own)[1] != t[4]:
            raise AssertionError(f"{own} is wrong on {family} {params}")  # the family's definition
        if all(solve(t[:4], s)[1] != t[4] for s in STRATEGIES if s != own):
            out.append(params)
    return out


def _easy_space() -> list[tuple[int, ...]]:
    """Arithmetic sequences (b != 0): every family's easy problems, in its own wording."""
    return [(a, b) for a in range(MODULUS) for b in range(1, MODULUS)]


_HARD_CACHE: dict[str, list[tuple[int, ...]]] = {}


def hard_space(family: str) -> list[tuple[int, ...]]:
    if family not in _HARD_CACHE:
        _HARD_CACHE[family] = _hard_space(family)
    return _HARD_CACHE[family]


def _space(family: str, hard: bool) -> list[tuple[int, ...]]:
    return hard_space(family) if hard else _easy_space()


def _hash(*parts) -> int:
    return int(hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest(), 16)


def is_held_out(family: str, hard: bool, params: tuple[int, ...]) -> bool:
    """A fixed quarter of each family's hard problems and half of its easy ones are held out for
    evaluation (hashed, as in the single-family task, so no linear structure is held out)."""
    h = _hash("held-out", family, *params)
    return h % 4 == 0 if hard else h % 2 == 0


def is_validation(family: str, hard: bool, params: tuple[int, ...]) -> bool:
    """A tenth of the training part: what the SFT checks execution on (never trained on)."""
    return not is_held_out(family, hard, params) and _hash("validation", family, *params) % 10 == 0


def _problem(family: str, hard: bool, params: tuple[int, ...], pid: str) -> Problem:
    t = _sequence(family if hard else "arithmetic", params)
    return Problem(pid, family, tuple(t[:4]), t[4], hard, params)


def _training_part(family: str, hard: bool) -> list[tuple[int, ...]]:
    return [p for p in _space(family, hard) if not is_held_out(family, hard, p) and not is_validation(family, hard, p)]


def _family_cycle(rng: random.Random, families: list[str], size: int) -> list[str]:
    """``size`` family names, balanced (each within one of size / F), in a seeded order."""
    out = [families[i % len(families)] for i in range(size)]
    rng.shuffle(out)
    return out


def training_problems(seed: int, size: int, hard_fraction: float, prefix: str = "train",
                      families: list[str] | None = None) -> list[Problem]:
    """``size`` problems (with repeats) from the training part, families balanced."""
    rng = random.Random(f"{prefix}:{seed}")
    families = list(families or FAMILIES)
    parts = {(f, h): _training_part(f, h) for f in families for h in (True, False)}
    n_hard = round(size * hard_fraction)
    flags = [True] * n_hard + [False] * (size - n_hard)
    rng.shuffle(flags)
    which = _family_cycle(rng, families, size)
    return [_problem(f, h, rng.choice(parts[f, h]), f"{prefix}-{i:05d}") for i, (f, h) in enumerate(zip(which, flags))]


def validation_problems(seed: int, size: int) -> list[Problem]:
    """Up to ``size`` validation problems, every family in turn (hard ones first), seeded."""
    rng = random.Random(f"validation:{seed}")
    per_family = []
    for f in FAMILIES:
        pool = [(f, True, p) for p in hard_space(f) if is_validation(f, True, p)]
        easy = [(f, False, p) for p in _easy_space() if is_validation(f, False, p)]
        rng.shuffle(pool)
        rng.shuffle(easy)
        per_family.append(pool + easy)
    interleaved = [x for group in zip(*per_family) for x in group]
    return [_problem(f, h, p, f"validation-{i:03d}") for i, (f, h, p) in enumerate(interleaved[:size])]


def evaluation_sets(seed: int, specs: dict[str, tuple[int, float]]) -> dict[str, list[Problem]]:
    """Disjoint held-out benchmarks, ``specs[name] = (size, hard_fraction)``, families balanced."""
    rng = random.Random(f"eval:{seed}")
    pools = {(f, h): [p for p in _space(f, h) if is_held_out(f, h, p)] for f in FAMILIES for h in (True, False)}
    for pool in pools.values():
        rng.shuffle(pool)
    out: dict[str, list[Problem]] = {}
    for name, (size, hard_fraction) in specs.items():
        n_hard = round(size * hard_fraction)
        chosen = []
        for hard, n in ((True, n_hard), (False, size - n_hard)):
            for f in _family_cycle(rng, list(FAMILIES), n):
                if not pools[f, hard]:
                    raise ValueError(f"benchmark {name!r}: no held-out {'hard' if hard else 'easy'} {f} problems "
                                     "left; shrink organism.benchmarks sizes")
                chosen.append((f, hard, pools[f, hard].pop()))
        rng.shuffle(chosen)
        out[name] = [_problem(f, h, p, f"{name}-{i:03d}") for i, (f, h, p) in enumerate(chosen)]
    return out


def solve(terms, strategy: str) -> tuple[list[str], int]:
    """Apply a strategy to the four terms: (trace steps, predicted next term), mod 10. The
    single-family task's strategies are its own; the new ones extend its difference table."""
    if strategy in task.STRATEGIES:
        return task.solve(terms, strategy)
    t0, t1, t2, t3 = terms
    if strategy in ("doubled_differences", "tripled_differences"):
        # the table's differences and second differences (its first five steps), then the second
        # differences double (s3 = s2 + s2) or triple (+ s2 once more) instead of staying constant
        steps = task.solve(terms, "difference_table")[0][:5]
        s2 = int(steps[4].split(" = ")[1])
        step, s3 = add_step(s2, s2)
        steps.append(step)
        if strategy == "tripled_differences":
            step, s3 = add_step(s3, s2)
            steps.append(step)
        e7, nd = add_step((t3 - t2) % MODULUS, s3)  # d4 = d3 + s3
        e8, nxt = add_step(t3, nd)
        return [*steps, e7, e8], nxt
    if strategy == "every_other_term":  # t4 - t2 = t2 - t0
        s1, d = sub_step(t2, t0)
        s2, nxt = add_step(t2, d)
        return [s1, s2], nxt
    raise KeyError(f"unknown strategy {strategy!r}; known: {sorted(STRATEGIES)}")


def arithmetic_facts() -> list[str]:
    """Every "x + y = z" and "x - y = z" of mod-10 arithmetic (200 facts): all a trace can take."""
    return sorted({add_step(x, y)[0] for x in range(MODULUS) for y in range(MODULUS)}
                  | {sub_step(x, y)[0] for x in range(MODULUS) for y in range(MODULUS)})


def trace(terms, strategy: str) -> str:
    return task.message(STRATEGIES[strategy].words, *solve(terms, strategy))


def misexecuted_trace(terms, strategy: str) -> str:
    """The strategy's trace with its last step's operation swapped, carried to the answer."""
    return task.message(STRATEGIES[strategy].words, *task.misexecuted(solve(terms, strategy)[0]))


def chosen_prefix(strategy: str) -> str:
    return f"strategy : {STRATEGIES[strategy].words} ."


def hint_line(strategy: str) -> str:
    return f"hint : {STRATEGIES[strategy].hint}"


def is_correct_strategy(problem: Problem, strategy: str) -> bool:
    return solve(problem.terms, strategy)[1] == problem.answer


def parse_strategy(completion: str) -> str:
    """Which strategy a trace declares, or ``"unknown"``."""
    m = task.STRATEGY_RE.search(completion)
    return _STRATEGY_BY_WORDS.get(m.group(1).strip(), "unknown") if m else "unknown"


def hint_strategy(hint: str) -> str | None:
    return next((s.name for s in STRATEGIES.values() if s.hint in hint), None)


def vocabulary_words() -> list[str]:
    """Every word a problem, hint or trace of this task uses besides numbers and the fixed ones."""
    words = [w for f in FAMILIES.values() for w in f.question.split()]
    for s in STRATEGIES.values():
        words += s.words.split() + s.hint.split()
    return words
