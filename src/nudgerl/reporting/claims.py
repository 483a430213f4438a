"""The paper's claims beside ours: one row per claim, a verdict by a rule fixed in code.

Each claim is a set of comparisons "A beats B" between methods of the DAG. For every
comparison the table gives the paired difference of Avg pass@1 (mean over benchmarks of
the per-problem difference, the same problems and replicates on both sides) with a 95 %
bootstrap interval that resamples problems and replicates
(:func:`nudgerl.algorithms.bootstrap_mean_of_means`), and the verdict is
:func:`nudgerl.algorithms.claim_verdict`. Nothing here looks at which way the numbers
went: the comparisons and the rule were written before the first full run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from nudgerl.algorithms import claim_verdict
from nudgerl.reporting.tables import method_label, paired_avg_difference


@dataclass
class Claim:
    number: int
    text: str
    paper: str  # the paper's numbers (Qwen3-4B, Avg pass@1); OURS for a claim the paper does not make
    comparisons: list[tuple[str, str]]  # (claimed better, claimed worse) method ids
    seeds: list[int]
    missing: list[str] = field(default_factory=list)  # roles the DAG did not run


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

    def add(number, text, paper, comparisons, seeds_, needs):
        missing = [name for name, method in needs if method is None]
        claims.append(Claim(number, text, paper, [] if missing else comparisons, seeds_, missing))

    g4, g8 = grpo.get(4 * n), grpo.get(8 * n)
    add(1, f"NudgeRL (N={n}) >= GRPO (N={4 * n}) in Avg pass@1, at about 1/4 of the rollouts",
        "0.489 vs 0.487", [(nudge, g4)], seeds, [(f"grpo{4 * n}", g4)])
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


def evaluate_claims(claims: list[Claim], eval_root, runs_root, benchmarks, n_boot: int = 2000,
                    regime: str | None = None) -> pd.DataFrame:
    """One row per comparison of every claim (a claim with a missing method: one row, 'not run');
    with ``regime``, every row says which regime's runs it judged (column ``regime``)."""
    rows = []
    for c in claims:
        base = {"claim": c.number, **({"regime": regime} if regime else {}), "text": c.text, "paper": c.paper,
                "replicates": len(c.seeds), "seeds": " ".join(map(str, c.seeds))}
        if c.missing:
            rows.append({**base, "verdict": "not run", "note": "not in this DAG: " + ", ".join(c.missing)})
            continue
        intervals, claim_rows = [], []
        for better, worse in c.comparisons:
            mean, lo, hi = paired_avg_difference(eval_root, better, worse, benchmarks, c.seeds, n_boot)
            intervals.append((lo, hi))
            claim_rows.append({**base, "better": better, "worse": worse, "delta": mean, "ci_low": lo, "ci_high": hi})
        verdict = claim_verdict(intervals)
        if c.number == 1:
            ratio = rollout_tokens(runs_root, c.comparisons[0][0], c.seeds) / rollout_tokens(
                runs_root, c.comparisons[0][1], c.seeds)
            claim_rows[0]["note"] = f"rollout tokens {c.comparisons[0][0]} / {c.comparisons[0][1]} = {ratio:.2f}"
            claim_rows[0]["rollout_token_ratio"] = ratio
        rows += [{**r, "verdict": verdict} for r in claim_rows]
    return pd.DataFrame.from_records(rows)


def render_markdown(df: pd.DataFrame, samples: int | None = None) -> str:
    """The claims table; with a ``regime`` column, one row per claim and regime, the regimes of a
    claim next to each other (each judged on its own runs only)."""
    regimes = list(dict.fromkeys(df["regime"])) if "regime" in df.columns else [None]
    lines = [
        "**The paper's claims beside ours. Ours: paired difference of Avg pass@1 (percentage points, claimed "
        "better minus claimed worse) with a 95 % bootstrap interval over problems and replicates"
        + (f", {samples} samples per problem" if samples else "")
        + ". Verdict (rule fixed in code): supported = every interval above 0; contradicted = some interval "
          "below 0; inconclusive = otherwise."
        + (" A row on one replicate resamples problems only: its interval leaves out the run-to-run variance "
           "(whether one RL run leaves its base model's habit within its steps), so its verdict need not hold "
           "on another machine or seed." if (df["replicates"] == 1).any() else "")
        + "**",
        "",
        *(["Each claim is judged once per regime, on that regime's runs only (the regime: what its base models "
           "measured, the unhinted share of the always-right strategy on the hard problems).", ""]
          if regimes != [None] else []),
        "| # | " + ("regime | " if regimes != [None] else "") + "claim | paper (Qwen3-4B) | ours | replicates | verdict |",
        "|---|" + ("---|" if regimes != [None] else "") + "---|---|---|---|---|",
    ]
    groups = [(number, regime, group[group["regime"] == regime] if regime is not None else group)
              for number, group in df.groupby("claim", sort=True) for regime in regimes]
    for number, regime, group in groups:
        if group.empty:
            continue
        first = group.iloc[0]
        if first["verdict"] == "not run":
            ours = first["note"]
        else:
            parts = [f"{method_label(r.better)} - {method_label(r.worse)}: {100 * r.delta:+.1f} "
                     f"[{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]" for r in group.itertuples()]
            if isinstance(first.get("note"), str):
                parts.append(first["note"])
            ours = "; ".join(parts)
        regime_cell = f"{regime} | " if regime is not None else ""
        lines.append(f"| {number} | {regime_cell}{first['text']} | {first['paper']} | {ours} | {first['replicates']} "
                     f"(seeds {first['seeds']}) | **{first['verdict']}** |")
    return "\n".join(lines) + "\n"
