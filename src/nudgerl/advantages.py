"""Group advantage estimators, each a small pure function registered by name.

An estimator maps the rewards of one problem's group of G rollouts (and, for NudgeRL, each
rollout's hint context) to one advantage per rollout. The trainers pick one by name from the
config (``grpo.advantage_estimator``). Where TRL computes an estimator itself, its entry names
the ``trl.GRPOConfig`` options that select it and the trainer passes those options through
(TRL's code runs, not ours); the function is then the written-down math, and a test holds it
equal to TRL's. Symbols: r_i the reward of rollout i, mu and sigma the group's mean and its
Bessel-corrected standard deviation (TRL's ``nanstd``), eps = 1e-4 as TRL adds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

from nudgerl.algorithms import inter_intra_advantages

EPS = 1e-4  # TRL's: A = (r - mu) / (sigma + 1e-4)


@dataclass(frozen=True)
class AdvantageOptions:
    """The estimators' parameters; each reads the ones it needs."""

    k: int = 4  # pass@k: the k of the objective
    lam: float = 1.1  # NudgeRL: weight of the inter-context term
    normalize: bool = True  # NudgeRL: standardise the group's advantages (the authors' code)


@dataclass(frozen=True)
class AdvantageEstimator:
    name: str
    fn: Callable[[np.ndarray, Sequence | None, AdvantageOptions], np.ndarray]
    # The trl.GRPOConfig options under which TRL computes this estimator itself (then the
    # trainer passes them through); None: TRL has no such option and our trainer hook applies fn.
    trl_options: dict | None = None
    needs_contexts: bool = False  # NudgeRL's: every rollout's hint context
    summary: str = ""


ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {}


def register_advantage(name: str, trl_options: dict | None = None, needs_contexts: bool = False):
    def wrap(fn):
        if name in ADVANTAGE_ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} is registered twice")
        summary = (fn.__doc__ or "").strip().splitlines()[0]
        ADVANTAGE_ESTIMATORS[name] = AdvantageEstimator(name, fn, dict(trl_options) if trl_options else None,
                                                        needs_contexts, summary)
        return fn

    return wrap


def get_advantage_estimator(name: str, where: str = "grpo.advantage_estimator") -> AdvantageEstimator:
    try:
        return ADVANTAGE_ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"config key '{where}': unknown advantage estimator {name!r}; "
                         f"registered: {', '.join(sorted(ADVANTAGE_ESTIMATORS))}") from None


def group_advantages(name: str, rewards: Sequence[float], contexts: Sequence | None = None,
                     options: AdvantageOptions = AdvantageOptions()) -> np.ndarray:
    """Advantages of one group by the named estimator."""
    estimator = get_advantage_estimator(name)
    if estimator.needs_contexts and contexts is None:
        raise ValueError(f"advantage estimator {name!r} needs each rollout's hint context")
    return estimator.fn(np.asarray(rewards, dtype=float), contexts, options)


def zero_variance_groups(rewards: Sequence[float], G: int) -> np.ndarray:
    """Per group of G consecutive rollouts: True where every reward is the same (all right or all
    wrong), the groups DAPO's dynamic sampling filters out (no estimator above gives them a
    gradient but NGRPO's)."""
    r = np.asarray(rewards, dtype=float)
    if G < 1 or r.size % G:
        raise ValueError(f"{r.size} rewards are not whole groups of {G}")
    groups = r.reshape(-1, G)
    return groups.max(axis=1) == groups.min(axis=1)


def _sigma(r: np.ndarray) -> float:
    return float(r.std(ddof=1)) if r.size > 1 else 0.0


# ---------------------------------------------------------------- estimators


@register_advantage("grpo", trl_options={"scale_rewards": "group"})
def grpo_advantages(r: np.ndarray, contexts=None, options: AdvantageOptions = AdvantageOptions()) -> np.ndarray:
    """GRPO (Shao et al. 2024): A_i = (r_i - mu) / (sigma + eps)."""
    return (r - r.mean()) / (_sigma(r) + EPS)


@register_advantage("dr_grpo", trl_options={"scale_rewards": "none"})
def dr_grpo_advantages(r: np.ndarray, contexts=None, options: AdvantageOptions = AdvantageOptions()) -> np.ndarray:
    """Dr. GRPO (Liu et al. 2025): A_i = r_i - mu, no division by the group's std (its constant
    length normaliser is TRL's ``loss_type="dr_grpo"``, a loss option, not an advantage)."""
    return r - r.mean()


@register_advantage("ngrpo")
def ngrpo_advantages(r: np.ndarray, contexts=None, options: AdvantageOptions = AdvantageOptions(),
                     r_max: float = 1.0) -> np.ndarray:
    """NGRPO (Nan et al. 2025): mu and sigma over the group plus one virtual rollout of reward r_max.

    R' = {r_1..r_G, r_max};  A_i = (r_i - mean(R')) / (std(R') + eps). An all-wrong group now
    gets a negative advantage (GRPO gives it 0). The paper's asymmetric clipping is TRL's
    ``epsilon`` / ``epsilon_high``, a loss option, not part of the advantage.
    """
    augmented = np.append(r, r_max)
    return (r - augmented.mean()) / (_sigma(augmented) + EPS)


@register_advantage("pass_at_k")
def pass_at_k_advantages(r: np.ndarray, contexts=None, options: AdvantageOptions = AdvantageOptions()) -> np.ndarray:
    """Pass@k training (Chen et al. 2025), analytic form for 0/1 rewards.

    Of G rollouts, G_neg are wrong. The group's pass@k over its k-subsets and its std:
        R = 1 - C(G_neg, k) / C(G, k),     sigma = sqrt(R (1 - R))
    A correct rollout makes every k-subset it is in succeed; a wrong one's k-subsets fail only
    if the other k - 1 are wrong too:
        A_pos = (1 - R) / sigma,     A_neg = (1 - R - C(G_neg - 1, k - 1) / C(G - 1, k - 1)) / sigma
    sigma = 0 (every k-subset succeeds, or none does) gives 0.
    """
    G, k = r.size, options.k
    if not 1 <= k <= G:
        raise ValueError(f"pass@k advantage needs 1 <= k <= G, got k={k}, G={G}")
    if not np.all((r == 0) | (r == 1)):
        raise ValueError(f"pass@k advantage needs 0/1 rewards, got {sorted(set(r.tolist()))[:5]}")
    g_neg = int((r == 0).sum())
    R = 1.0 - comb(g_neg, k) / comb(G, k)
    sigma = np.sqrt(R * (1.0 - R))
    if sigma == 0:
        return np.zeros(G)
    a_pos = (1.0 - R) / sigma
    a_neg = (1.0 - R - comb(g_neg - 1, k - 1) / comb(G - 1, k - 1)) / sigma if g_neg else 0.0
    return np.where(r == 1, a_pos, a_neg)


@register_advantage("nudgerl", needs_contexts=True)
def nudgerl_advantages(r: np.ndarray, contexts, options: AdvantageOptions = AdvantageOptions()) -> np.ndarray:
    """NudgeRL's inter-intra advantage (:func:`nudgerl.algorithms.inter_intra_advantages`)."""
    return inter_intra_advantages(r, contexts, options.lam, options.normalize)
