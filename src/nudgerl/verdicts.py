"""Verdicts the replicates can carry: every test over replicates, through scipy.stats.

In the organism a run finds the rare strategy or does not, so what decides a comparison of two
methods is how their *replicates* came out, not how many problems each was evaluated on. The
unit of every verdict here is the replicate (one base model, RL seed and sampling seed):

* **A paired comparison** of two methods on the same base models takes each replicate's
  difference d_s = Avg pass@1(a, seed s) - Avg pass@1(b, seed s) and tests it by flipping the
  sign of each d_s (:func:`sign_flip_p`; scipy's ``permutation_test``, exact over all 2^n sign
  patterns up to n = 13). Under "a and b are the same method" every d_s is symmetric about 0.
* **Found / not-found** per replicate: paired arms by the exact McNemar test (a binomial test of
  the discordant replicates, :func:`paired_found_p`); independent arms (two seed sets) by
  Boschloo's exact test (:func:`found_homogeneity_p`).
* **The verdict rule** (:func:`comparison_sides`, :func:`claim_verdict`), fixed in config
  (``report.verdicts``) before any run: a claim "a beats b" (superiority) or "a is as good as b"
  (parity: non-inferiority within ``parity_margin``) is *supported* when every comparison's
  one-sided p in the claimed direction is below alpha / 2, *contradicted* when some comparison's
  one-sided p against it is below alpha / (2 k) (k comparisons, Bonferroni: any one of them may
  contradict), else *inconclusive*. Two one-sided tests at alpha / 2 are the two-sided test at
  alpha, so two identical arms get a verdict at most alpha of the time. Below
  ``min_replicates`` a row is *descriptive (n = k)*: the exact test cannot reach alpha there.
* **Power** (:func:`sign_flip_power`, :func:`found_power`): what a table's replicate count
  detects with 80 % power by this rule, so "inconclusive" is read with what it could have found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

SUPERIORITY = "superiority"
PARITY = "parity"
# Resamples when 2^n sign patterns exceed them (n > 13); below that scipy enumerates every pattern
N_RESAMPLES = 9999


@dataclass(frozen=True)
class VerdictRule:
    """The verdict rule's constants (config ``report.verdicts``), fixed before any run."""

    alpha: float = 0.05
    min_replicates: int = 6
    parity_margin: float = 0.0165

    def __post_init__(self):
        if not 0 < self.alpha < 1:
            raise ValueError(f"config key 'report.verdicts.alpha': {self.alpha} is not in (0, 1)")
        if self.parity_margin < 0:
            raise ValueError(f"config key 'report.verdicts.parity_margin': {self.parity_margin} is negative")
        # a minimum below which the exact test could never reach alpha would let "inconclusive"
        # stand where no result could have been anything else
        if smallest_one_sided_p(self.min_replicates) >= self.alpha / 2:
            raise ValueError(
                f"config key 'report.verdicts.min_replicates': at {self.min_replicates} replicates the smallest "
                f"one-sided sign-flip p is 1/2^{self.min_replicates} = {smallest_one_sided_p(self.min_replicates):.4g}, "
                f"not below alpha/2 = {self.alpha / 2:g}; the smallest minimum that can reach it is "
                f"{min_replicates_for(self.alpha)}")

    @classmethod
    def from_section(cls, section: dict | None) -> "VerdictRule":
        """From config ``report.verdicts`` (its ``aa`` key, the A/A pair, is the plan's business)."""
        return cls(**rule_constants(section))

    def descriptive(self, n: int) -> str:
        return f"descriptive (n = {n})"


def rule_constants(section: dict | None) -> dict:
    """config ``report.verdicts`` less its A/A pair: the rule's own constants, as the rules pass them on."""
    return {k: v for k, v in (section or {}).items() if k != "aa"}


def smallest_one_sided_p(n: int) -> float:
    """The smallest one-sided p an exact sign-flip test over n replicates can give: 1 / 2^n."""
    return 1.0 / 2**n


def min_replicates_for(alpha: float) -> int:
    """The fewest replicates at which the two-sided exact sign-flip test can reach ``alpha``."""
    n = 1
    while smallest_one_sided_p(n) >= alpha / 2:
        n += 1
    return n


def _mean(x, axis=-1):
    return np.mean(x, axis=axis)


def sign_flip_p(d: Sequence[float] | np.ndarray, alternative: str = "greater", seed: int = 0) -> np.ndarray | float:
    """One-sided (or two-sided) p of the sign-flip permutation test of mean(d) against 0.

    ``d``: per-replicate paired differences, shape (n,) or (sets, n) (one test per row).
    scipy.stats.permutation_test with ``permutation_type='samples'`` on one sample flips signs;
    exact (every one of the 2^n patterns) for n <= 13, else ``N_RESAMPLES`` random ones.
    """
    x = np.asarray(d, dtype=float)
    if x.shape[-1] < 1:
        raise ValueError("a sign-flip test needs at least one replicate")
    if x.shape[-1] == 1:
        # scipy wants two observations; one replicate's null is +d or -d, each with chance 1/2
        v = x[..., 0]
        greater, less = np.where(v > 0, 0.5, 1.0), np.where(v < 0, 0.5, 1.0)
        p = {"greater": greater, "less": less, "two-sided": np.minimum(1.0, 2 * np.minimum(greater, less))}[alternative]
        return p if p.ndim else float(p)
    res = stats.permutation_test((x,), _mean, permutation_type="samples", vectorized=True, axis=-1,
                                 alternative=alternative, n_resamples=N_RESAMPLES, batch=64,
                                 rng=np.random.default_rng(seed))
    return res.pvalue if np.ndim(res.pvalue) else float(res.pvalue)


def comparison_sides(d: Sequence[float], kind: str = SUPERIORITY, margin: float = 0.0) -> tuple[float, float]:
    """(p for, p against) of one paired comparison "a beats b" (superiority) or "a is as good as b"
    (parity: non-inferiority within ``margin``), from the per-replicate differences d = a - b.

    Superiority: for = P(mean >= observed | d symmetric about 0), against = P(mean <= observed).
    Parity: the same on d + margin (for: a is at most ``margin`` worse; against: a is worse by
    more than ``margin``).
    """
    if kind not in (SUPERIORITY, PARITY):
        raise ValueError(f"a comparison is {SUPERIORITY!r} or {PARITY!r}, not {kind!r}")
    x = np.asarray(d, dtype=float) + (margin if kind == PARITY else 0.0)
    return float(sign_flip_p(x, "greater")), float(sign_flip_p(x, "less"))


def claim_verdict(sides: Sequence[tuple[float, float]], n: int, rule: VerdictRule) -> str:
    """The verdict of a claim of k comparisons, each given as (p for, p against) over n replicates.

    descriptive (n = k) below ``rule.min_replicates``; supported: every p for < alpha / 2;
    contradicted: some p against < alpha / (2 k); inconclusive otherwise.
    """
    if not sides:
        raise ValueError("a claim needs at least one comparison")
    if n < rule.min_replicates:
        return rule.descriptive(n)
    if all(p_for < rule.alpha / 2 for p_for, _ in sides):
        return "supported"
    if any(p_against < rule.alpha / (2 * len(sides)) for _, p_against in sides):
        return "contradicted"
    return "inconclusive"


# ---------------------------------------------------------------- found / not-found


def paired_found_p(found_a: Sequence[bool], found_b: Sequence[bool]) -> float:
    """Two-sided exact McNemar p of found / not-found on the same replicates: a binomial test
    (p = 1/2) of the replicates where exactly one arm found the strategy; 1 when none differ."""
    a, b = np.asarray(found_a, dtype=bool), np.asarray(found_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired found / not-found needs the same replicates: {a.size} vs {b.size}")
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)


@lru_cache(maxsize=None)
def found_homogeneity_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Boschloo exact p: are k1 of n1 and k2 of n2 found one success probability?"""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2) or n1 < 1 or n2 < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1 in both groups, got {k1}/{n1} and {k2}/{n2}")
    if k1 + k2 in (0, n1 + n2):  # every replicate alike: no evidence either way (scipy gives nan)
        return 1.0
    return float(stats.boschloo_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)


def exact_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a success probability from k of n (scipy's binomtest)."""
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


# ---------------------------------------------------------------- A/A noise floor


def aa_spread(d_all: Sequence[float], d_row: Sequence[float]) -> dict:
    """The noise floor of a comparison on n replicates, from the A/A pair (the same method twice
    on the same base models, other RL and sampling seeds).

    ``d_all``: the pair's per-replicate differences over every replicate it ran on (their SD,
    ``aa_sd``); ``d_row``: those on the comparison's own n replicates (their mean, ``aa_mean``).
    The spread ``aa_mean`` in absolute value + 2 SD / sqrt(n): about the largest mean difference
    two identical arms reach over n replicates 19 times in 20.
    """
    d, row = np.asarray(d_all, dtype=float), np.asarray(d_row, dtype=float)
    if d.size < 2 or row.size < 1:
        raise ValueError(f"an A/A spread needs the pair on >= 2 replicates and the row on >= 1, got {d.size}, {row.size}")
    mean, sd = float(row.mean()), float(d.std(ddof=1))
    return {"aa_mean": mean, "aa_sd": sd, "aa_replicates": int(d.size), "aa_spread": abs(mean) + 2 * sd / np.sqrt(row.size)}


def inside_aa(effect: float, aa: dict | None) -> bool | None:
    """Whether an effect lies inside the A/A spread (None where the run has no A/A pair)."""
    return None if aa is None else bool(abs(effect) <= aa["aa_spread"])


# ---------------------------------------------------------------- power


def sign_flip_power(n: int, effect: float, rule: VerdictRule, margin: float = 0.0, draws: int = 2000,
                    seed: int = 0) -> float:
    """The chance the rule calls a single comparison *supported* when the per-replicate
    differences are Normal(effect, 1) (effect in units of their SD), over ``draws`` simulated
    replicate sets (0 below the rule's minimum). ``margin`` (same units): a parity comparison's
    non-inferiority margin (0: superiority)."""
    if n < rule.min_replicates:
        return 0.0
    d = np.random.default_rng(seed).normal(effect, 1.0, size=(draws, n)) + margin
    p = sign_flip_p(d, "greater")
    return float(np.mean(p < rule.alpha / 2))


def detectable_effect(n: int, rule: VerdictRule, power: float = 0.8, margin: float = 0.0,
                      largest: float = 4.0) -> float | None:
    """The smallest effect (mean per-replicate difference, in its SDs) that the rule calls
    supported with ``power`` over n replicates (``margin``: a parity comparison's, same units;
    then the effect may be negative, down to -margin); None where not even ``largest`` is.
    Bisection on the simulated power, one seed throughout (common random numbers keep it monotone)."""
    lo, hi = -margin, largest
    if sign_flip_power(n, hi, rule, margin) < power:
        return None
    for _ in range(9):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if sign_flip_power(n, mid, rule, margin) >= power else (mid, hi)
    return float(round(hi, 2))


def found_power(n1: int, p1: float, n2: int, p2: float, alpha: float) -> float:
    """The chance Boschloo's two-sided test at ``alpha`` rejects "one success probability" when
    the arms' replicates find the strategy with probabilities p1 and p2 (exact enumeration)."""
    k1, k2 = np.arange(n1 + 1), np.arange(n2 + 1)
    w1, w2 = stats.binom.pmf(k1, n1, p1), stats.binom.pmf(k2, n2, p2)
    total = 0.0
    for a in k1:
        for b in k2:
            if w1[a] * w2[b] > 1e-12 and found_homogeneity_p(int(a), n1, int(b), n2) < alpha:
                total += w1[a] * w2[b]
    return float(total)


def detectable_rate(n: int, p1: float, alpha: float, power: float = 0.8,
                    grid=np.arange(0.05, 1.0001, 0.05)) -> float | None:
    """The smallest success probability p2 > p1 that Boschloo's test tells from p1 with ``power``
    at n replicates per arm; None where not even p2 = 1 does."""
    for p2 in grid:
        if p2 > p1 + 1e-9 and found_power(n, p1, n, float(min(p2, 1.0)), alpha) >= power:
            return float(round(min(p2, 1.0), 2))
    return None
