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


def rare_uses(eval_dir: Path, benchmarks, strategy: str) -> tuple[int, int]:
    """(samples using the always-right strategy, samples) on the hard problems of one run's
    evaluation: ``strategy``, or a problem's own where its row names one (the families task)."""
    uses = samples = 0
    for bench in benchmarks:
        hard = {r["id"]: r.get("rare_strategy", strategy)
                for r in read_jsonl(eval_dir / f"{bench}.problems.jsonl") if r.get("hard")}
        for row in read_jsonl(eval_dir / f"{bench}.samples.jsonl"):
            if row["id"] in hard:
                if "strategy" not in row:
                    raise ValueError(f"{eval_dir / f'{bench}.samples.jsonl'}: sample {row['id']}/{row.get('sample')} "
                                     "has no strategy label (exploration success needs organism runs)")
                samples += 1
                uses += row["strategy"] == hard[row["id"]]
    return uses, samples


def exploration_rows(eval_root, methods, seeds, benchmarks, strategy: str, success_share: float) -> pd.DataFrame:
    """One row per run: method, seed, hard samples, uses of the strategy, its share, found."""
    rows = []
    for method in methods:
        for seed in seeds:
            uses, samples = rare_uses(Path(eval_root) / method / f"seed{seed}", benchmarks, strategy)
            if samples == 0:
                raise ValueError(f"{Path(eval_root) / method / f'seed{seed}'}: no samples on hard problems")
            rows.append({"method": method, "seed": seed, "hard_samples": samples, "strategy_uses": uses,
                         "strategy_share": uses / samples, "found": uses / samples > success_share})
    return pd.DataFrame(rows)


def exploration_table(rows: pd.DataFrame, reference: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per method: found k of n replicates, k/n, its exact interval, Fisher's p against ``reference``."""
    counts = {m: (int(g.found.sum()), len(g)) for m, g in rows.groupby("method", sort=False)}
    if reference not in counts:
        raise ValueError(f"reference method {reference!r} has no runs (methods: {', '.join(counts)})")
    k_ref, n_ref = counts[reference]
    out = []
    for method, (k, n) in counts.items():
        low, high = clopper_pearson(k, n, 1 - confidence)
        out.append({"method": method, "found": k, "replicates": n, "rate": k / n, "ci_low": low, "ci_high": high,
                    "p_vs_reference": None if method == reference else fisher_exact(k, n, k_ref, n_ref)})
    return pd.DataFrame(out)


def render_markdown(table: pd.DataFrame, rows: pd.DataFrame, reference: str, strategy: str, success_share: float,
                    confidence: float, label=lambda m: m) -> str:
    shares = {m: " / ".join(f"{100 * s:.0f}" for s in g.sort_values("seed").strategy_share)
              for m, g in rows.groupby("method", sort=False)}
    seeds = sorted(rows.seed.unique())
    lines = [
        f"**Exploration success: runs whose hint-free policy uses the rare-but-right strategy "
        f"({strategy.replace('_', ' ')}) on more than {100 * success_share:g} % of its samples on the hard "
        f"benchmark problems; k of n replicates (seeds {', '.join(map(str, seeds))}), "
        f"{100 * confidence:g} % exact (Clopper-Pearson) interval of the success probability; p: Fisher's exact "
        f"test against {label(reference)}.**",
        "",
    ]
    rows = []
    for r in table.itertuples():
        p = "" if r.p_vs_reference is None or pd.isna(r.p_vs_reference) else f"{r.p_vs_reference:.3g}"
        rows.append([label(r.method), f"{r.found} of {r.replicates}",
                     f"{100 * r.rate:.0f} % [{100 * r.ci_low:.0f}, {100 * r.ci_high:.0f}]", shares[r.method], p])
    lines.append(markdown_table(["Method", "Found", "Success probability", "Share per replicate (%)", "p"], rows))
    return "\n".join(lines) + "\n"
