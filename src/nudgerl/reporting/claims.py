"""The paper's claims beside ours: one row per claim, a verdict by a rule fixed in config.

Each claim is a set of comparisons "A beats B" (superiority) or "A is as good as B" (parity)
between methods of the DAG. The unit of the verdict is the replicate (:mod:`nudgerl.verdicts`):
per comparison, each replicate's difference of Avg pass@1 (the same base model, problems and
seed on both sides) is tested by a sign-flip permutation test over replicates, and the verdict
is :func:`nudgerl.verdicts.claim_verdict` with the constants of config ``report.verdicts``
(alpha, the minimum replicates for a verdict, the parity margin); below the minimum a row is
"descriptive (n = k)". The paired difference of Avg pass@1 with a 95 % bootstrap interval over
problems and replicates (:func:`nudgerl.algorithms.bootstrap_mean_of_means`) is kept as a
description. Where the run has an A/A pair (the same method twice on the same base models), each
row gives the A/A difference on its replicates and its spread, and marks an effect inside it.
Nothing here looks at which way the numbers went: the comparisons and the rule were written
before the first full run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from nudgerl.reporting.tables import method_label, paired_avg_difference, replicate_avg
from nudgerl.table_text import markdown_table
from nudgerl.verdicts import PARITY, SUPERIORITY, VerdictRule, aa_spread, claim_verdict, comparison_sides, inside_aa


@dataclass
class Claim:
    number: int
    text: str
    paper: str  # the paper's numbers (Qwen3-4B, Avg pass@1); OURS for a claim the paper does not make
    comparisons: list[tuple[str, str]]  # (claimed better, claimed worse) method ids
    seeds: list[int]
    missing: list[str] = field(default_factory=list)  # roles the DAG did not run
    kind: str = SUPERIORITY  # parity: "as good as" (non-inferiority within report.verdicts.parity_margin)


# The paper column of a claim that is ours, not the paper's.
OURS = "not the paper's (ours)"

# A base model's measured unhinted share of the always-right strategy (the regime gate's figure).
SHARE = "rare_strategy_share_unhinted"


def measured_shares(paths) -> list[float]:
    """The measured unhinted share of each base model, from a run's ``diagnostics/base_models.csv``
    (one row per replicate) or from diagnosis JSONs (``summary``; the regime map's cells)."""
    shares = []
    for path in map(Path, paths):
        if not path.is_file():
            what = "base-model table" if path.suffix == ".csv" else "base-model diagnosis"
            raise FileNotFoundError(f"{path}: no {what} (run the configuration to its end first)")
        if path.suffix == ".csv":
            models = pd.read_csv(path)
            if SHARE not in models.columns or models[SHARE].isna().all():
                raise ValueError(f"{path}: no column {SHARE!r} with values")
            shares += [float(v) for v in models[SHARE].dropna()]
        else:
            summary = json.loads(path.read_text()).get("summary") or {}
            if summary.get(SHARE) is None:
                raise ValueError(f"{path}: no summary.{SHARE}")
            shares.append(float(summary[SHARE]))
    return shares


def share_range(shares: list[float]) -> str:
    """'unhinted share 0.1-1.0 % (5 base models)': lowest to highest over the replicates."""
    n = len(shares)
    return f"unhinted share {100 * min(shares):.1f}-{100 * max(shares):.1f} % ({n} base model{'' if n == 1 else 's'})"


def _by_value(pairs, value):
    return next((m for v, m in pairs if abs(float(v) - value) < 1e-9), None)


def build_claims(roles: dict) -> list[Claim]:
    """The paper's seven claims in terms of this DAG's method ids.

    ``roles``: ``nudgerl`` (main NudgeRL id), ``nudgerl_n`` (its N), ``grpo`` ({N: id}),
    ``pope`` (id), ``pdrop`` / ``distill`` ([value, id] pairs), ``hint_sampling``
    ({"random": id, "top_ranked": id}), ``eps`` ([eps_high, GRPO id] pairs), ``seeds`` and
    ``ablation_seeds``. "GRPO-32" and "GRPO-64" are GRPO at 4x and 8x NudgeRL's N (the
    paper's N = 8 gives 32 and 64). With ``baselines`` (the field's exploration fixes, ids) on
    ``baseline_seeds`` at N = ``baseline_n``, an eighth claim, ours: NudgeRL beats every one.
    """
    nudge, n = roles["nudgerl"], int(roles["nudgerl_n"])
    grpo = {int(k): v for k, v in roles.get("grpo", {}).items()}
    seeds, abl = list(roles["seeds"]), list(roles.get("ablation_seeds") or roles["seeds"][:1])
    claims = []

    def add(number, text, paper, comparisons, seeds_, needs, kind=SUPERIORITY):
        missing = [name for name, method in needs if method is None]
        claims.append(Claim(number, text, paper, [] if missing else comparisons, seeds_, missing, kind))

    g4, g8 = grpo.get(4 * n), grpo.get(8 * n)
    # a parity claim: the paper's 0.489 vs 0.487 says "as good as", so it is tested as such
    add(1, f"NudgeRL (N={n}) >= GRPO (N={4 * n}) in Avg pass@1, at about 1/4 of the rollouts",
        "0.489 vs 0.487", [(nudge, g4)], seeds, [(f"grpo{4 * n}", g4)], kind=PARITY)
    add(2, f"GRPO (N={8 * n}) < GRPO (N={4 * n}): more rollouts stop helping",
        "0.451 vs 0.487", [(g4, g8)], seeds, [(f"grpo{4 * n}", g4), (f"grpo{8 * n}", g8)])
    add(3, f"NudgeRL (N={n}) > POPE", "0.489 vs 0.467", [(nudge, roles.get("pope"))], seeds,
        [("pope", roles.get("pope"))])
    pdrop = roles.get("pdrop") or []
    best = _by_value(pdrop, 0.5)
    add(4, "p_drop = 0.5 is the best of the p_drop grid", "0 / 0.25 / 0.5 / 0.75: 0.537 / 0.561 / 0.598 / 0.566",
        [(best, m) for _, m in pdrop if m != best], abl, [("p_drop 0.5", best), ("another p_drop", next(
            (m for _, m in pdrop if m != best), None))])
    hs = roles.get("hint_sampling") or {}
    add(5, "random hint sampling > top-ranked", "0.598 vs 0.552", [(hs.get("random"), hs.get("top_ranked"))], abl,
        [("random", hs.get("random")), ("top_ranked", hs.get("top_ranked"))])
    distill = roles.get("distill") or []
    best = _by_value(distill, 0.1)
    add(6, "lambda_distill = 0.1 is the best of the lambda_distill grid", "0 / 0.1 / 0.5: 0.560 / 0.598 / 0.536",
        [(best, m) for _, m in distill if m != best], abl, [("lambda_distill 0.1", best), ("another lambda_distill",
                                                                                        next((m for _, m in distill
                                                                                              if m != best), None))])
    eps = roles.get("eps") or []
    add(7, f"no eps_high lets GRPO (N={n}) reach NudgeRL (N={n})",
        "GRPO's best 0.566 (0.541 at eps_high 0.40) vs NudgeRL 0.598", [(nudge, m) for _, m in eps], abl,
        [("eps_high sweep", eps[0][1] if eps else None)])
    baselines = list(roles.get("baselines") or [])
    if baselines:
        from nudgerl.reporting.tables import method_label

        names = ", ".join(method_label(b).rsplit(" (N=", 1)[0] for b in baselines)
        n_b = int(roles.get("baseline_n", n))
        add(8, f"NudgeRL (N={n}) > every exploration fix of the field at N={n_b} ({names})", OURS,
            [(nudge, b) for b in baselines], list(roles["baseline_seeds"]), [])
    return claims


def rollout_tokens(runs_root, method: str, seeds) -> float:
    """Mean over replicates of a run's cumulative rollout tokens at its last step."""
    total = []
    for s in seeds:
        lines = (Path(runs_root) / method / f"seed{s}" / "metrics.jsonl").read_text().splitlines()
        total.append(json.loads(lines[-1])["cumulative_rollout_tokens"])
    return float(np.mean(total))


def aa_differences(eval_root, aa: dict | None, benchmarks) -> dict[int, float] | None:
    """The A/A pair's per-replicate difference of Avg pass@1 ({seed: a - b}), or None without one.
    ``aa``: {"a": method id, "b": its repeat's id, "seeds": [...]}."""
    if not aa:
        return None
    seeds = list(aa["seeds"])
    d = replicate_avg(eval_root, aa["a"], benchmarks, seeds) - replicate_avg(eval_root, aa["b"], benchmarks, seeds)
    return dict(zip(seeds, map(float, d)))


def _aa_for(aa_d: dict[int, float] | None, seeds: list[int]) -> dict | None:
    """The A/A difference over ``seeds`` and its spread at their count (None where the pair did
    not run on every one of them, or ran on fewer than 2 replicates)."""
    if not aa_d or len(aa_d) < 2 or not all(s in aa_d for s in seeds):
        return None
    return aa_spread(list(aa_d.values()), [aa_d[s] for s in seeds])


def evaluate_claims(claims: list[Claim], eval_root, runs_root, benchmarks, n_boot: int = 2000,
                    regime: str | None = None, rule: VerdictRule | None = None, aa: dict | None = None) -> pd.DataFrame:
    """One row per comparison of every claim (a claim with a missing method: one row, 'not run');
    with ``regime``, every row says which regime's runs it judged (column ``regime``); with ``aa``
    (the run's A/A pair), each row carries the A/A difference and spread on its replicates."""
    rule = rule or VerdictRule()
    aa_d = aa_differences(eval_root, aa, benchmarks)
    rows = []
    for c in claims:
        base = {"claim": c.number, **({"regime": regime} if regime else {}), "text": c.text, "paper": c.paper,
                "kind": c.kind, "replicates": len(c.seeds), "seeds": " ".join(map(str, c.seeds))}
        if c.missing:
            rows.append({**base, "verdict": "not run", "note": "not in this DAG: " + ", ".join(c.missing)})
            continue
        sides, claim_rows = [], []
        noise = _aa_for(aa_d, c.seeds)
        for better, worse in c.comparisons:
            d = replicate_avg(eval_root, better, benchmarks, c.seeds) - replicate_avg(eval_root, worse, benchmarks, c.seeds)
            mean, lo, hi = paired_avg_difference(eval_root, better, worse, benchmarks, c.seeds, n_boot)
            p_for, p_against = comparison_sides(d, c.kind, rule.parity_margin)
            sides.append((p_for, p_against))
            claim_rows.append({**base, "better": better, "worse": worse, "n_better": len(c.seeds),
                               "n_worse": len(c.seeds), "delta": mean, "ci_low": lo, "ci_high": hi,
                               "replicate_deltas": " ".join(f"{x:.4f}" for x in d),
                               "test": ("sign-flip permutation over replicates, non-inferiority within "
                                        f"{100 * rule.parity_margin:g} points" if c.kind == PARITY
                                        else "sign-flip permutation over replicates"),
                               "p_for": p_for, "p_against": p_against,
                               **({k: noise[k] for k in ("aa_mean", "aa_sd", "aa_spread")} if noise else {}),
                               "inside_aa": inside_aa(mean, noise)})
        verdict = claim_verdict(sides, len(c.seeds), rule)
        if c.number == 1:
            ratio = rollout_tokens(runs_root, c.comparisons[0][0], c.seeds) / rollout_tokens(
                runs_root, c.comparisons[0][1], c.seeds)
            claim_rows[0]["note"] = f"rollout tokens {c.comparisons[0][0]} / {c.comparisons[0][1]} = {ratio:.2f}"
            claim_rows[0]["rollout_token_ratio"] = ratio
        rows += [{**r, "verdict": verdict} for r in claim_rows]
    return pd.DataFrame.from_records(rows)


def _p(x) -> str:
    return f"{x:.3g}"


def render_markdown(df: pd.DataFrame, samples: int | None = None, rule: VerdictRule | None = None) -> str:
    """The claims table; with a ``regime`` column, one row per claim and regime, the regimes of a
    claim next to each other (each judged on its own runs only)."""
    rule = rule or VerdictRule()
    regimes = list(dict.fromkeys(df["regime"])) if "regime" in df.columns else [None]
    has_aa = "aa_spread" in df.columns and df["aa_spread"].notna().any()
    lines = [
        "**The paper's claims beside ours. The replicate is the unit of the verdict: per comparison, each "
        "replicate's difference of Avg pass@1 (claimed better minus claimed worse, same base model) is tested by an "
        "exact sign-flip permutation test over replicates; p for / p against: its one-sided p in the claimed "
        f"direction and against it. Verdict (rule fixed in config, alpha = {rule.alpha:g}): supported = every p for "
        f"< {rule.alpha / 2:g}; contradicted = some p against < {rule.alpha / 2:g} / k (k comparisons); "
        f"inconclusive = otherwise; below {rule.min_replicates} replicates a row is descriptive (n = k), since an exact "
        f"test on fewer cannot reach alpha (1/2^{rule.min_replicates - 1} = "
        f"{1 / 2 ** (rule.min_replicates - 1):.3g} >= {rule.alpha / 2:g}). A parity claim (\"as good as\", kind parity) is "
        f"tested for non-inferiority within {100 * rule.parity_margin:g} points. Ours: the paired difference in "
        "percentage points with a 95 % bootstrap interval over problems and replicates"
        + (f", {samples} samples per problem" if samples else "")
        + " (a description; it does not decide the verdict)."
        + (" A/A: the difference between the run's two identical arms on the row's replicates ± its spread "
           "(|A/A mean| + 2 SD / sqrt(n)); an effect inside it is marked (inside A/A)." if has_aa else
           " This run has no A/A pair (config report.verdicts.aa).")
        + "**",
        "",
        *(["Each claim is judged once per regime, on that regime's runs only (the regime: what its base models "
           "measured, the unhinted share of the always-right strategy on the hard problems).", ""]
          if regimes != [None] else []),
    ]
    header = ["#", *(["regime"] if regimes != [None] else []), "claim", "kind", "paper (Qwen3-4B)", "ours",
              "n per arm", "test: p for / p against", "A/A", "verdict"]
    rows = []
    groups = [(number, regime, group[group["regime"] == regime] if regime is not None else group)
              for number, group in df.groupby("claim", sort=True) for regime in regimes]
    for number, regime, group in groups:
        if group.empty:
            continue
        first = group.iloc[0]
        regime_cell = [regime] if regime is not None else []
        if first["verdict"] == "not run":
            rows.append([number, *regime_cell, first["text"], first.get("kind", SUPERIORITY), first["paper"],
                         first["note"], "-", "-", "-", "**not run**"])
            continue
        parts, tests, noise = [], [], []
        for r in group.itertuples():
            inside = " (inside A/A)" if getattr(r, "inside_aa", None) is True else ""
            parts.append(f"{method_label(r.better)} - {method_label(r.worse)}: {100 * r.delta:+.1f} "
                         f"[{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]{inside}")
            tests.append(f"{_p(r.p_for)} / {_p(r.p_against)}")
            spread = getattr(r, "aa_spread", None)
            noise.append("-" if spread is None or pd.isna(spread) else f"{100 * r.aa_mean:+.1f} ± {100 * spread:.1f}")
        if isinstance(first.get("note"), str):
            parts.append(first["note"])
        n = int(first["replicates"])
        # a decided verdict whose effect two identical arms also reach is said so where it is read
        within = first["verdict"] in ("supported", "contradicted") and any(
            getattr(r, "inside_aa", None) is True for r in group.itertuples())
        rows.append([number, *regime_cell, first["text"], first["kind"], first["paper"], "; ".join(parts),
                     f"{n} (seeds {first['seeds']})", f"sign-flip: {'; '.join(tests)}", "; ".join(noise),
                     f"**{first['verdict']}**{' (effect inside A/A)' if within else ''}"])
    lines.append(markdown_table(header, rows))
    return "\n".join(lines) + "\n"
