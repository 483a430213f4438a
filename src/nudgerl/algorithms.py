"""The pipeline's math, as small pure functions in the papers' symbols."""

from __future__ import annotations

from collections.abc import Sequence
import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021, Eq. 1).

    pass@k = 1 - C(n - c, k) / C(n, k), computed as a stable product.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least k samples, got n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(per_problem: Sequence[tuple[int, int]], k: int) -> float:
    """Benchmark pass@k: the mean over problems of pass@k from each (n, c)."""
    if not per_problem:
        raise ValueError("no problems")
    return float(np.mean([pass_at_k(n, c, k) for n, c in per_problem]))


def bootstrap_ci(
    values: np.ndarray, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile (1 - alpha) interval of ``values`` resampled along axis 0.

    ``values`` is (problems,) or (problems, seeds): problems are resampled, and with
    several seeds each resample also draws seeds, so the interval covers both sources.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    rng = np.random.default_rng(seed)
    n_prob, n_seed = x.shape
    rows = rng.integers(0, n_prob, size=(n_boot, n_prob))
    cols = rng.integers(0, n_seed, size=(n_boot, n_seed)) if n_seed > 1 else np.zeros((n_boot, 1), dtype=int)
    means = np.array([x[r][:, c].mean() for r, c in zip(rows, cols)])
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(x.mean()), float(lo), float(hi)


def bootstrap_mean_of_means(
    groups: Sequence[np.ndarray], n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """Average over benchmarks of their mean, with a percentile interval.

    Each group is (problems,) or (problems, replicates). A bootstrap draw resamples the
    problems of every benchmark and, once for all benchmarks, the replicates: a replicate's
    base model is shared by its benchmarks, so its effect must move them together. Applied
    to per-problem differences a - b of two methods it is the paired interval of the Avg.
    """
    rng = np.random.default_rng(seed)
    mats = [np.asarray(g, dtype=float).reshape(len(g), -1) for g in groups]
    n_rep = {m.shape[1] for m in mats}
    if len(n_rep) != 1:
        raise ValueError(f"every benchmark needs the same replicates, got {sorted(n_rep)}")
    (n_rep,) = n_rep
    point = float(np.mean([m.mean() for m in mats]))
    reps = np.zeros(n_boot)
    cols = rng.integers(0, n_rep, size=(n_boot, n_rep)) if n_rep > 1 else np.zeros((n_boot, 1), dtype=int)
    for m in mats:
        rows = rng.integers(0, m.shape[0], size=(n_boot, m.shape[0]))
        reps += np.array([m[r][:, c].mean() for r, c in zip(rows, cols)])
    reps /= len(mats)
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return point, float(lo), float(hi)


# ---------------------------------------------------------------- NudgeRL (arXiv 2605.15726)


def nudge_contexts(M: int, K: int, p_drop: float, rng: np.random.Generator) -> list[int | None]:
    """Contexts of one problem's N = M x K rollouts (paper Sec. 3, "nudging").

    Rollout r is assigned hint r // K (K rollouts per hint); each rollout independently
    drops its hint with probability p_drop, becoming a hint-free rollout (context None).
    """
    if M < 1 or K < 1:
        raise ValueError(f"need M >= 1 and K >= 1, got M={M}, K={K}")
    if not 0.0 <= p_drop <= 1.0:
        raise ValueError(f"p_drop must be in [0, 1], got {p_drop}")
    drop = rng.random(M * K) < p_drop
    return [None if drop[r] else r // K for r in range(M * K)]


def inter_intra_advantages(
    rewards: Sequence[float], contexts: Sequence[int | None], lam: float, normalize: bool = True
) -> np.ndarray:
    """Inter-intra advantage of one problem's group (paper Eq. for A_i, lambda = 1.1).

    Hinted rollout i in context c:  A_i = (r_i - mean_c) + lam * (mean_c - mean_all)
                                          intra-context     inter-context
    Hint-free rollout i:            A_i = r_i - mean_all
    With ``normalize`` (the authors' code): A <- (A - mean(A)) / (std(A) + 1e-5), with the
    population std over the group.
    """
    r = np.asarray(rewards, dtype=float)
    if len(contexts) != len(r):
        raise ValueError(f"{len(r)} rewards but {len(contexts)} contexts")
    mean_all = r.mean()
    adv = np.empty_like(r)
    for i, c in enumerate(contexts):
        if c is None:
            adv[i] = r[i] - mean_all
        else:
            mean_c = np.mean([r[j] for j, cj in enumerate(contexts) if cj == c])
            adv[i] = (r[i] - mean_c) + lam * (mean_c - mean_all)
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-5)
    return adv


def intra_inter_terms(rewards: Sequence[float], contexts: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
    """For logging: per hinted rollout, the intra (r_i - mean_c) and inter (mean_c - mean_all) terms."""
    r = np.asarray(rewards, dtype=float)
    hinted = [i for i, c in enumerate(contexts) if c is not None]
    intra = np.array([r[i] - np.mean([r[j] for j, cj in enumerate(contexts) if cj == contexts[i]]) for i in hinted])
    inter = np.array([r[i] - r.mean() for i in hinted]) - intra
    return intra, inter


def distillation_loss(advantages, seq_logps):
    """Hint-to-hint-free distillation term (paper Eq. for L_distill):

        L_distill = mean_i( -A_i * log pi(y_i | x0) )

    ``seq_logps`` are the per-token *mean* log-probs of each completion under the
    hint-free prompt x0 (as in the authors' code; the paper writes the sequence
    log-prob, whose sum would weight long completions more). Works on numpy arrays
    and torch tensors alike.
    """
    return (-advantages * seq_logps).mean()


# ---------------------------------------------------------------- paired comparison


def paired_permutation_test(
    a: np.ndarray, b: np.ndarray, n_perm: int = 10000, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> dict:
    """Paired test of two methods on the same problems: is mean(a) - mean(b) != 0?

    ``a`` and ``b`` are per-problem pass rates c/n, shape (problems,) or (problems, seeds),
    rows aligned on the same problem ids. Seeds are averaged first, so the unit of pairing
    (and of resampling) is the problem. The null hypothesis (exchangeable method labels
    within each problem) is tested by flipping the sign of each problem's difference
    d_i = a_i - b_i at random; the two-sided p-value is

        p = (1 + #{|mean(s * d)| >= |mean(d)|}) / (1 + n_perm),   s_i in {-1, +1}

    (Phipson & Smyth 2010: never 0). The interval is the percentile bootstrap of mean(d)
    over problems. Returns delta, ci_low, ci_high, p_value, problems.
    """
    a = np.asarray(a, dtype=float).reshape(len(a), -1).mean(axis=1)
    b = np.asarray(b, dtype=float).reshape(len(b), -1).mean(axis=1)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs the same problems: {a.shape[0]} vs {b.shape[0]}")
    if a.size == 0:
        raise ValueError("paired test needs at least one problem")
    d = a - b
    rng = np.random.default_rng(seed)
    observed = d.mean()
    signs = rng.choice([-1.0, 1.0], size=(n_perm, d.size))
    null = np.abs((signs * d).mean(axis=1))
    # a small tolerance: float sums of the same values in another order must count as ties
    p = (1 + np.count_nonzero(null >= abs(observed) - 1e-12)) / (1 + n_perm)
    boot = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return {"delta": float(observed), "ci_low": float(lo), "ci_high": float(hi), "p_value": float(p),
            "problems": int(d.size)}


# ---------------------------------------------------------------- a proportion from clustered counts


def clustered_proportion(counts: Sequence[tuple[int, int]], z: float = 1.96) -> dict:
    """A proportion p = sum k_i / sum n_i from per-problem counts (k_i of n_i), with its interval.

    Samples of one problem are correlated (a problem the model cannot solve fails all of
    them), so the binomial variance p(1-p)/n understates the sampling error. The design
    effect deff = V_cluster / V_binomial, with the ratio estimator's cluster variance

        V_cluster = m/(m-1) * sum_i (k_i - p n_i)^2 / (sum_i n_i)^2     (m problems),

    shrinks n to n_eff = n / max(1, deff), and the Wilson score interval is taken at n_eff:
    the set of b with |p - b| <= z * sqrt(b (1 - b) / n_eff). Problems with n_i = 0 carry no
    information and are dropped.
    """
    kept = [(int(k), int(n)) for k, n in counts if n > 0]
    if any(not 0 <= k <= n for k, n in kept):
        raise ValueError(f"need 0 <= k <= n for every problem, got {[c for c in kept if not 0 <= c[0] <= c[1]][:3]}")
    k_all, n_all, m = sum(k for k, _ in kept), sum(n for _, n in kept), len(kept)
    if n_all == 0:
        return {"value": None, "k": 0, "n": 0, "problems": 0, "n_eff": 0.0, "deff": None, "low": None, "high": None}
    p = k_all / n_all
    v_bin = p * (1 - p) / n_all
    deff = 1.0
    if v_bin > 0 and m > 1:
        v_cluster = m / (m - 1) * sum((k - p * n) ** 2 for k, n in kept) / n_all**2
        deff = max(1.0, v_cluster / v_bin)
    n_eff = n_all / deff
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff**2))
    # at p = 0 or 1 one end equals p in exact arithmetic; keep float rounding from crossing it
    return {"value": p, "k": k_all, "n": n_all, "problems": m, "n_eff": n_eff, "deff": deff,
            "low": float(min(p, max(0.0, centre - half))), "high": float(max(p, min(1.0, centre + half)))}


def margin_in_se(value: float, bound: float, n_eff: float) -> float:
    """Distance of a measured proportion from a bound, in standard errors at the bound:
    (value - bound) / sqrt(bound (1 - bound) / n_eff). The Wilson interval at z lies wholly
    on one side of the bound exactly when |margin| > z, so the gate and the margins table
    use one scale."""
    if not 0 < bound < 1:
        raise ValueError(f"a bound on a proportion must lie in (0, 1), got {bound}")
    return float((value - bound) / np.sqrt(bound * (1 - bound) / n_eff))


# ---------------------------------------------------------------- found / not-found outcomes


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact (Clopper-Pearson 1934) 1 - alpha interval of a success probability from k of n
    (scipy.stats.binomtest's ``proportion_ci(method='exact')``)."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    from nudgerl.verdicts import exact_interval

    return exact_interval(k, n, 1 - alpha)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test (scipy.stats.fisher_exact): are k1 of n1 and k2
    of n2 one success probability?"""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2) or n1 < 1 or n2 < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1 in both groups, got {k1}/{n1} and {k2}/{n2}")
    from scipy import stats

    return float(stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)
