"""The study's own tables (`snakemake study`): does a finding hold across seed sets and regimes?

Two questions the default cannot answer with its few replicates:

* **Seed-set agreement.** Exploration success (k of n replicates found the rare-but-right
  strategy, :mod:`nudgerl.reporting.exploration`) measured on two disjoint sets of seeds. If
  the success probability is a property of the method and regime, not of the machine or the
  seeds, the two sets are one binomial: Boschloo's exact test of set A's k/n against set B's
  (:func:`nudgerl.verdicts.found_homogeneity_p`) decides whether they agree (p >= alpha), and the
  caption says which difference it could have detected with 80 % power (overlapping intervals
  are no test: at 6 replicates a set they almost always overlap). A stand-in for a second
  machine: another machine draws other base models, which is what another seed set is.
* **RL works at all** in a common regime (the regime map's cells where the strategy is not
  rare): every replicate's GRPO run ends above its own base model (step 0 of its curve). In
  the rare regime a run that learns nothing is the phenomenon; here it would be a bug.
"""

from __future__ import annotations

import pandas as pd

from nudgerl.table_text import markdown_table
from nudgerl.verdicts import detectable_rate, exact_interval, found_homogeneity_p


def check_seed_sets(seed_sets: list[list[int]], seeds: list[int], where: str = "study.seed_sets") -> list[str]:
    """Problems with the seed sets: exactly two, disjoint, non-empty, each among ``seeds``."""
    problems = []
    if len(seed_sets) != 2:
        problems.append(f"config key '{where}': needs exactly two seed sets, got {len(seed_sets)}")
    for i, s in enumerate(seed_sets):
        if not s:
            problems.append(f"config key '{where}[{i}]': a seed set is empty")
        missing = sorted(set(s) - set(seeds))
        if missing:
            problems.append(f"config key '{where}[{i}]': seeds {missing} are not in 'seeds' {sorted(seeds)}")
    if len(seed_sets) == 2 and set(seed_sets[0]) & set(seed_sets[1]):
        problems.append(f"config key '{where}': the sets share seeds {sorted(set(seed_sets[0]) & set(seed_sets[1]))}; "
                        "they must be disjoint")
    return problems


def seed_set_agreement(runs: pd.DataFrame, seed_sets: list[list[int]], confidence: float = 0.95,
                       alpha: float = 0.05) -> pd.DataFrame:
    """Per method: k of n found in each seed set, exact intervals, Boschloo's p between the sets, and
    whether they agree (p >= ``alpha``).

    ``runs``: one row per run with columns method, seed, run_found (tables/exploration.csv).
    """
    for column in ("method", "seed", "run_found"):
        if column not in runs.columns:
            raise ValueError(f"exploration runs: column {column!r} missing (columns: {', '.join(runs.columns)})")
    a, b = (set(s) for s in seed_sets)
    out = []
    for method, g in runs.groupby("method", sort=False):
        row = {"method": method}
        for tag, seeds in (("a", a), ("b", b)):
            sub = g[g.seed.isin(seeds)]
            missing = sorted(seeds - set(sub.seed))
            if missing:
                raise ValueError(f"exploration runs: method {method!r} has no run for seeds {missing} of seed set {tag}")
            k, n = int(sub.run_found.astype(bool).sum()), len(sub)
            low, high = exact_interval(k, n, confidence)
            row.update({f"found_{tag}": k, f"replicates_{tag}": n, f"ci_low_{tag}": low, f"ci_high_{tag}": high})
        row["p_between_sets"] = found_homogeneity_p(row["found_a"], row["replicates_a"], row["found_b"],
                                                    row["replicates_b"])
        row["test"] = "Boschloo exact"
        row["agree"] = row["p_between_sets"] >= alpha
        out.append(row)
    return pd.DataFrame(out)


def _detectable(n: int, p1: float, alpha: float) -> str:
    p2 = detectable_rate(n, p1, alpha)
    return f"{100 * p1:.0f} % against {100 * p2:.0f} %" if p2 is not None else f"nothing from {100 * p1:.0f} %"


def render_agreement(table: pd.DataFrame, seed_sets: list[list[int]], confidence: float, label=lambda m: m,
                     alpha: float = 0.05) -> str:
    agree = int(table.agree.sum())
    n = min(len(seed_sets[0]), len(seed_sets[1]))
    lines = [
        f"**Exploration success on two disjoint seed sets: A = seeds {', '.join(map(str, seed_sets[0]))}; "
        f"B = seeds {', '.join(map(str, seed_sets[1]))}. k of n replicates found the rare-but-right strategy, "
        f"{100 * confidence:g} % exact (Clopper-Pearson) intervals; p: Boschloo's exact test of one success "
        f"probability in both sets; they agree when p >= {alpha:g}. {agree} of {len(table)} methods agree. What it "
        f"could detect, with 80 % power at {n} replicates a set: {_detectable(n, 0.1, alpha)}, "
        f"{_detectable(n, 0.5, alpha)}; a smaller difference between the sets would mostly pass as agreement.**",
        "",
    ]
    rows = []
    for r in table.itertuples():
        cells = [f"{getattr(r, f'found_{t}')} of {getattr(r, f'replicates_{t}')} "
                 f"[{100 * getattr(r, f'ci_low_{t}'):.0f}, {100 * getattr(r, f'ci_high_{t}'):.0f}] %" for t in "ab"]
        rows.append([label(r.method), *cells, "yes" if r.agree else "**no**", f"{r.p_between_sets:.3g}"])
    lines.append(markdown_table(["Method", "Set A", "Set B", "Agree", "p"], rows))
    return "\n".join(lines) + "\n"


def rl_works(regime_runs: pd.DataFrame, shares: list[float], method: str) -> pd.DataFrame:
    """Per share: replicates of ``method`` whose final hard pass@1 is above their base model's.

    ``regime_runs``: the regime map's run table (tables/regime_map.csv: share_set, seed, method,
    final_hard_pass@1, base_hard_pass@1).
    """
    out = []
    for share in shares:
        sub = regime_runs[(regime_runs.method == method) & ((regime_runs.share_set - share).abs() < 1e-12)]
        if sub.empty:
            raise ValueError(f"regime map runs: no {method!r} run at share {share:g} "
                             f"(shares: {', '.join(f'{s:g}' for s in sorted(regime_runs.share_set.unique()))})")
        sub = sub.sort_values("seed")
        above = sub["final_hard_pass@1"] > sub["base_hard_pass@1"]
        out.append({"share_set": share, "method": method, "replicates": len(sub), "above_base": int(above.sum()),
                    "works": bool(above.all()),
                    "share_measured_min": float(sub.share_measured.min()),
                    "share_measured_max": float(sub.share_measured.max()),
                    "seeds": " ".join(map(str, sub.seed)),
                    "base_hard_pass@1": " ".join(f"{x:.3f}" for x in sub["base_hard_pass@1"]),
                    "final_hard_pass@1": " ".join(f"{x:.3f}" for x in sub["final_hard_pass@1"])})
    return pd.DataFrame(out)


def render_rl_works(table: pd.DataFrame, label=lambda m: m) -> str:
    lines = [
        "**RL works at all in the common regime: every replicate's run ends above its own base model "
        "(final hard pass@1 against step 0 of its curve, regime map).**",
        "",
    ]
    rows = []
    for r in table.to_dict("records"):
        pairs = " / ".join(f"{100 * float(b):.0f} → {100 * float(f):.0f}"
                           for b, f in zip(str(r["base_hard_pass@1"]).split(), str(r["final_hard_pass@1"]).split()))
        measured = f"{100 * r['share_measured_min']:.1f}-{100 * r['share_measured_max']:.1f}"
        rows.append([f"{100 * r['share_set']:g} %", measured, label(r["method"]),
                     f"{r['above_base']} of {r['replicates']}", "yes" if r["works"] else "**no**", pairs])
    lines.append(markdown_table(["Share set", "Measured share (%)", "Method", "Above its base", "Works",
                                 "Base → final hard pass@1 (%) per seed"], rows))
    return "\n".join(lines) + "\n"
