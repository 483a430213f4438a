"""Exploration success: did a run's hint-free policy find the rare-but-right strategy?

In the paper's regime a run either finds the strategy or does not, and pass@1 averaged over
replicates mixes the two. Per run (method x replicate): the share of its evaluation samples
on the hard benchmark problems (those the dominant strategy gets wrong) that use the rare
strategy; the run *found* it when that share exceeds ``success_share`` (config
``exploration``, fixed before any run). Per method: k of n replicates found it, with an exact
Clopper-Pearson interval, and Fisher's exact test of its k/n against the reference method's
(:mod:`nudgerl.algorithms`). Organism runs only: their samples carry a strategy label.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from nudgerl.algorithms import clopper_pearson, fisher_exact
from nudgerl.io import read_jsonl
from nudgerl.table_text import markdown_table


def family_uses(eval_dir: Path, benchmarks, strategy: str) -> dict[str | None, tuple[int, int]]:
    """Per problem family (None: the single-family task's problems, which name none): (samples
    using the family's always-right strategy, samples) on the hard problems of one run's
    evaluation. A problem's own strategy is its row's ``rare_strategy``, else ``strategy``."""
    counts: dict[str | None, list[int]] = {}
    for bench in benchmarks:
        hard = {r["id"]: (r.get("family"), r.get("rare_strategy", strategy))
                for r in read_jsonl(eval_dir / f"{bench}.problems.jsonl") if r.get("hard")}
        for row in read_jsonl(eval_dir / f"{bench}.samples.jsonl"):
            if row["id"] in hard:
                if "strategy" not in row:
                    raise ValueError(f"{eval_dir / f'{bench}.samples.jsonl'}: sample {row['id']}/{row.get('sample')} "
                                     "has no strategy label (exploration success needs organism runs)")
                family, own = hard[row["id"]]
                c = counts.setdefault(family, [0, 0])
                c[0] += row["strategy"] == own
                c[1] += 1
    return {f: (u, n) for f, (u, n) in counts.items()}


def rare_uses(eval_dir: Path, benchmarks, strategy: str) -> tuple[int, int]:
    """(samples using the always-right strategy, samples) on the hard problems of one run's
    evaluation: ``strategy``, or a problem's own where its row names one (the families task)."""
    per = family_uses(eval_dir, benchmarks, strategy).values()
    return sum(u for u, _ in per), sum(n for _, n in per)


def exploration_rows(eval_root, methods, seeds, benchmarks, strategy: str, success_share: float) -> pd.DataFrame:
    """One row per run: method, seed, hard samples, uses of the strategy, its share, found.

    The families task (problems that name their family): each family is found or not by its own
    share (its hard samples' uses of its own strategy), the run's ``families_found`` is k of
    ``families`` (F), ``family_shares`` each family's share, and the run's ``found`` is k = F (its
    hint-free policy uses the right strategy across the board, as a single-family run that found it).
    """
    rows = []
    for method in methods:
        for seed in seeds:
            run = Path(eval_root) / method / f"seed{seed}"
            per = family_uses(run, benchmarks, strategy)
            uses, samples = sum(u for u, _ in per.values()), sum(n for _, n in per.values())
            if samples == 0:
                raise ValueError(f"{run}: no samples on hard problems")
            row = {"method": method, "seed": seed, "hard_samples": samples, "strategy_uses": uses,
                   "strategy_share": uses / samples, "found": uses / samples > success_share}
            if None not in per:  # the families task
                found = {f: u / n > success_share for f, (u, n) in sorted(per.items())}
                row.update(found=all(found.values()), families=len(found), families_found=sum(found.values()),
                           family_shares=" / ".join(f"{f} {100 * u / n:.0f}" for f, (u, n) in sorted(per.items())))
            rows.append(row)
    return pd.DataFrame(rows)


def exploration_table(rows: pd.DataFrame, reference: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per method: found k of n replicates, k/n, its exact interval, Fisher's p against ``reference``.

    With families (``families_found`` in ``rows``): also the families found summed over the
    replicates of F each (``families_found``, ``family_slots``), their mean share per replicate
    with a t interval over replicates (``families_rate``, ``families_ci_low``/``_high``; the
    replicate is the unit, families within one share its base model), and the two-sided exact
    sign-flip p of the per-replicate difference in families found against ``reference``'s, paired
    by seed (``p_families_vs_reference``; :func:`nudgerl.verdicts.sign_flip_p`)."""
    counts = {m: (int(g.found.sum()), len(g)) for m, g in rows.groupby("method", sort=False)}
    if reference not in counts:
        raise ValueError(f"reference method {reference!r} has no runs (methods: {', '.join(counts)})")
    k_ref, n_ref = counts[reference]
    families = "families_found" in rows
    out = []
    for method, (k, n) in counts.items():
        low, high = clopper_pearson(k, n, 1 - confidence)
        out.append({"method": method, "found": k, "replicates": n, "rate": k / n, "ci_low": low, "ci_high": high,
                    "p_vs_reference": None if method == reference else fisher_exact(k, n, k_ref, n_ref)})
        if families:
            out[-1].update(_families_figures(rows, method, reference, confidence))
    return pd.DataFrame(out)


def _families_figures(rows: pd.DataFrame, method: str, reference: str, confidence: float) -> dict:
    import numpy as np
    from scipy import stats

    from nudgerl.verdicts import sign_flip_p

    mine = rows[rows.method == method].set_index("seed")
    share = (mine.families_found / mine.families).to_numpy(dtype=float)
    if len(share) > 1 and share.std(ddof=1) > 0:
        low, high = stats.t.interval(confidence, len(share) - 1, loc=share.mean(), scale=stats.sem(share))
    else:  # one replicate, or all alike: no spread to build an interval from
        low = high = float(share.mean())
    p = None
    if method != reference:
        ref = rows[rows.method == reference].set_index("seed")
        seeds = sorted(set(mine.index) & set(ref.index))
        if seeds:
            d = mine.families_found.loc[seeds].to_numpy(float) - ref.families_found.loc[seeds].to_numpy(float)
            p = float(sign_flip_p(d, "two-sided"))
    return {"families_found": int(mine.families_found.sum()), "family_slots": int(mine.families.sum()),
            "families_rate": float(share.mean()), "families_ci_low": float(np.clip(low, 0, 1)),
            "families_ci_high": float(np.clip(high, 0, 1)), "p_families_vs_reference": p}


def render_markdown(table: pd.DataFrame, rows: pd.DataFrame, reference: str, strategy: str, success_share: float,
                    confidence: float, label=lambda m: m) -> str:
    shares = {m: " / ".join(f"{100 * s:.0f}" for s in g.sort_values("seed").strategy_share)
              for m, g in rows.groupby("method", sort=False)}
    seeds = sorted(rows.seed.unique())
    what = "each family's own, on its problems" if "families_found" in rows else strategy.replace("_", " ")
    lines = [
        f"**Exploration success: runs whose hint-free policy uses the rare-but-right strategy "
        f"({what}) on more than {100 * success_share:g} % of its samples on the hard "
        f"benchmark problems; k of n replicates (seeds {', '.join(map(str, seeds))}), "
        f"{100 * confidence:g} % exact (Clopper-Pearson) interval of the success probability; p: Fisher's exact "
        f"test against {label(reference)}.**",
        "",
    ]
    cells = []
    for r in table.itertuples():
        p = "" if r.p_vs_reference is None or pd.isna(r.p_vs_reference) else f"{r.p_vs_reference:.3g}"
        cells.append([label(r.method), f"{r.found} of {r.replicates}",
                      f"{100 * r.rate:.0f} % [{100 * r.ci_low:.0f}, {100 * r.ci_high:.0f}]", shares[r.method], p])
    lines.append(markdown_table(["Method", "Found", "Success probability", "Share per replicate (%)", "p"], cells))
    if "families_found" in table:
        lines += ["", _families_markdown(table, rows, reference, confidence, label)]
    return "\n".join(lines) + "\n"


def _families_markdown(table: pd.DataFrame, rows: pd.DataFrame, reference: str, confidence: float, label) -> str:
    """The families task's table: per method, families found (k of F per replicate, summed), the
    mean share with its t interval over replicates, each run's per-family shares and the paired
    sign-flip p against the reference."""
    per_run = {m: g.sort_values("seed") for m, g in rows.groupby("method", sort=False)}
    out = []
    for r in table.itertuples():
        g = per_run[r.method]
        p = "" if r.p_families_vs_reference is None or pd.isna(r.p_families_vs_reference) else \
            f"{r.p_families_vs_reference:.3g}"
        out.append([label(r.method), f"{r.families_found} of {r.family_slots}",
                    " / ".join(f"{k}" for k in g.families_found),
                    f"{100 * r.families_rate:.0f} % [{100 * r.families_ci_low:.0f}, {100 * r.families_ci_high:.0f}]",
                    "; ".join(g.family_shares), p])
    f = int(rows.families.max())
    caption = (f"**Families found: a family is found when a run's hint-free policy uses that family's own always-right "
               f"strategy on more than the success share of its samples on the family's hard problems; each run finds "
               f"k of F = {f} (a run counts as found above only at k = F). Mean share per replicate with a "
               f"{100 * confidence:g} % t interval over replicates (the replicate is the unit: families within a run "
               f"share its base model); p: two-sided exact sign-flip test of the per-replicate difference in families "
               f"found against {label(reference)}, paired by seed.**")
    return caption + "\n\n" + markdown_table(
        ["Method", "Families found", "Per replicate", "Mean share", "Share per family (%), per replicate", "p"], out)
