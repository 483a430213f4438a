"""The regime gate: is a replicate's base model in the regime the paper is about?

The paper's argument needs a policy that (1) rarely samples the always-right strategy
without a hint, (2) is right when it does sample it (rare *but right*: otherwise RL has
nothing to reinforce), (3) therefore fails most hard problems, and (4) executes that
strategy when a hint names it. The diagnosis measures each on the hard problems RL trains
on, sampled as RL samples them (``diagnostics.diagnose_rl_prompts``), as per-problem counts.

Each figure is a proportion with sampling error, so the gate judges its interval, not its
point value: a figure fails only when its whole interval (``confidence``, clustered by
problem: ``algorithms.clustered_proportion``) lies outside its bound. The verdict file keeps
value, interval, bound and the margin in standard errors. The bounds are config (key
``regime``), fixed before any RL run; a replicate outside them stops the DAG before any of its
RL jobs, naming the figure (``gate: false`` reports and carries on).
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import NormalDist

import pandas as pd

from nudgerl.algorithms import clustered_proportion, margin_in_se
from nudgerl.io import atomic_write_text
from nudgerl.table_text import markdown_table

# figure -> what it measures (counts: the diagnosis's "rl_prompts" block)
FIGURES = {
    "hinted_rare_pass@1_hard": "pass@1 on the hard training problems, hinted with the always-right strategy",
    "unhinted_pass@1_hard": "pass@1 on the hard training problems without a hint",
    "rare_strategy_share_unhinted": "share of unhinted samples (hard training problems) that choose the always-right "
                                    "strategy",
    "rare_strategy_accuracy_unhinted": "accuracy of the always-right strategy when the unhinted policy chooses it "
                                       "(its choice forced, no hint, the rest sampled)",
    "rare_strategy_accuracy_chosen": "accuracy of the unhinted samples that chose the always-right strategy "
                                     "(few samples: the share's count)",
}
DEFAULT_CONFIDENCE = 0.95


class RegimeError(RuntimeError):
    """A base model outside the configured regime; the message names figure, value and bound."""


def _margin(stats: dict, lo, hi) -> float | None:
    """Signed distance inside the bound (positive = inside), in standard errors at the bound;
    the nearer side when there are two."""
    if stats["value"] is None or not stats["n_eff"]:
        return None
    sides = []
    if lo is not None and 0 < lo < 1:
        sides.append(margin_in_se(stats["value"], lo, stats["n_eff"]))
    if hi is not None and 0 < hi < 1:
        sides.append(-margin_in_se(stats["value"], hi, stats["n_eff"]))
    return min(sides) if sides else None


def check(counts: dict, bounds: dict, confidence: float = DEFAULT_CONFIDENCE) -> list[dict]:
    """One row per figure of ``bounds``: value, interval, bound, margin (SE), ok.

    ``counts[figure]``: per-problem ``[k, n]``. A figure fails only when its interval lies
    wholly outside the bound; one with a bound and no samples fails; an empty bound ``{}``
    reports the figure without judging it. Unknown figures are an error."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rows = []
    for figure, bound in bounds.items():
        if figure not in FIGURES:
            raise ValueError(f"config key 'regime.bounds.{figure}': unknown figure; known: {sorted(FIGURES)}")
        lo, hi = bound.get("min"), bound.get("max")
        stats = clustered_proportion(counts.get(figure) or [], z)
        ok = (lo is None and hi is None) or (  # a figure without bound is reported, never failed
            stats["value"] is not None and not (lo is not None and stats["high"] < lo)
            and not (hi is not None and stats["low"] > hi))
        rows.append({"figure": figure, **stats, "min": lo, "max": hi, "confidence": confidence,
                     "margin_se": _margin(stats, lo, hi), "ok": bool(ok), "measures": FIGURES[figure]})
    return rows


def describe_failure(row: dict) -> str:
    bound = " and ".join(f"{'>=' if k == 'min' else '<='} {row[k]:g}" for k in ("min", "max") if row[k] is not None)
    if row["value"] is None:
        return f"{row['figure']} = missing (no samples), outside its bound ({bound}): {row['measures']}"
    return (f"{row['figure']} = {row['value']:.4f} [{row['low']:.4f}, {row['high']:.4f}] ({row['k']} of {row['n']}), "
            f"its {row['confidence']:.0%} interval wholly outside its bound ({bound}): {row['measures']}")


def gate(diagnosis_path: str | Path, regime: dict, out: str | Path) -> dict:
    """Write the verdict to ``out``; raise :class:`RegimeError` if out of regime and the gate is on."""
    diagnosis = json.loads(Path(diagnosis_path).read_text())
    rl = diagnosis.get("rl_prompts")
    if rl is None:
        raise ValueError(f"{diagnosis_path}: no 'rl_prompts' block; the gate judges the diagnosis on the training "
                         "problems (nudgerl diagnose --train ... --rl-params ...)")
    bounds = regime.get("bounds", {})
    # the diagnosis's other figures are reported with their intervals, without a bound
    reported = {f: {} for f in rl["counts"] if f in FIGURES and f not in bounds}
    rows = check(rl["counts"], {**bounds, **reported}, regime.get("confidence", DEFAULT_CONFIDENCE))
    failed = [describe_failure(r) for r in rows if not r["ok"]]
    sft = diagnosis.get("sft") or {}
    if regime.get("sft_check", True) and "passed_at_step" in sft and sft["passed_at_step"] is None:
        # an SFT that reached its step cap without ever executing every strategy is a failed
        # base model, whatever its figures happen to be on this machine. Judged on the check
        # passing during SFT, not on the check after the anneal: at 0.98 of 64 problems that
        # one is a single problem from failing (3 of 30 families builds that had passed dipped
        # to 62 of 64 on one strategy after it), and what the base model executes when it
        # counts is measured below the bounds above with its interval
        failed.append(f"the base model's SFT ended at step {sft.get('steps')} without passing its execution check "
                      f"(final execution {sft.get('final_execution')})")
    verdict = {
        "diagnosis": str(diagnosis_path),
        "seed": diagnosis.get("seed"),
        "in_regime": not failed,
        "failures": failed,
        "gate": bool(regime.get("gate", True)),
        "figures": rows,
        "rl_prompts": {k: rl[k] for k in ("samples_per_problem", "sampler") if k in rl} | {"problems": len(rl["problems"])},
        "summary": diagnosis["summary"],
        "sft": diagnosis.get("sft"),
    }
    atomic_write_text(out, json.dumps(verdict, indent=2))
    for r in rows:
        value = "no samples" if r["value"] is None else f"{r['value']:.4f} [{r['low']:.4f}, {r['high']:.4f}]"
        margin = "" if r["margin_se"] is None else f", {r['margin_se']:+.1f} SE inside"
        print(f"{'ok ' if r['ok'] else 'OUT'} {r['figure']} = {value}  (min {r['min']}, max {r['max']}{margin})")
    if failed and verdict["gate"]:
        # Snakemake deletes a failed job's output, so the gate stays shut on the next run;
        # the rule's log keeps the lines printed above
        raise RegimeError(f"{diagnosis_path}: base model outside the regime, no RL job will start: "
                          + "; ".join(failed)
                          + " (fix the base model config, or set regime.gate: false to train anyway)")
    return verdict


TABLE_FIGURES = ("hinted_rare_pass@1_hard", "unhinted_pass@1_hard", "rare_strategy_share_unhinted",
                 "rare_strategy_accuracy_unhinted", "rare_strategy_accuracy_chosen")


def replicate_table(regime_paths: list[str | Path]) -> pd.DataFrame:
    """One row per replicate: its figures on the training problems (value, interval, margin),
    its held-out diagnosis, SFT check and regime verdict."""
    rows = []
    for path in regime_paths:
        v = json.loads(Path(path).read_text())
        s, sft = v["summary"], v.get("sft") or {}
        row = {"seed": v.get("seed"), "threads": sft.get("threads")}
        figures = {r["figure"]: r for r in v["figures"]}
        row["confidence"] = next((r.get("confidence") for r in v["figures"]), DEFAULT_CONFIDENCE)
        for f in TABLE_FIGURES:
            r = figures.get(f, {})
            row.update({f: r.get("value"), f"{f}_low": r.get("low"), f"{f}_high": r.get("high"),
                        f"{f}_k": r.get("k"), f"{f}_n": r.get("n"), f"{f}_margin_se": r.get("margin_se")})
        row.update({
            "heldout_hinted_rare_pass@1_hard": s.get("hinted_rare_pass@1_hard"),
            "heldout_unhinted_pass@1_hard": s.get("unhinted_pass@1_hard"),
            "heldout_rare_strategy_share_unhinted": s.get("rare_strategy_share_unhinted"),
            "dominant_strategy_share_unhinted": s.get("dominant_strategy_share_unhinted"),
            "sft_steps": sft.get("steps"),
            "sft_check_passed_at": sft.get("passed_at_step"),
            "sft_attempts": sft.get("attempts") or 1,
            "sft_seconds": sft.get("seconds"),
            "in_regime": v["in_regime"],
        })
        rows.append(row)
    return pd.DataFrame.from_records(rows)


def sft_passed_cell(passed_at, attempts: int = 1, model_seed=None) -> str:
    """The step a base model's SFT check passed at ('-' for never), and which attempt was kept
    where not the first (``base_model.sft_attempts``: the earlier ones reached their cap)."""
    cell = "-" if passed_at is None or pd.isna(passed_at) else str(int(passed_at))
    if attempts > 1:
        cell += f" (attempt {attempts}" + ("" if model_seed is None else f", seed {model_seed}") + ")"
    return cell


def _cell(r, f: str) -> str:
    x = r.get(f)
    if x is None or pd.isna(x):
        return "-"
    margin = r.get(f"{f}_margin_se")
    m = "" if margin is None or pd.isna(margin) else f" ({margin:+.0f} SE)"
    return f"{x:.3f} [{r[f + '_low']:.3f}, {r[f + '_high']:.3f}]{m}"


def replicate_markdown(df: pd.DataFrame, bounds: dict | None = None) -> str:
    header = ["seed", "hinted always-right pass@1", "unhinted pass@1", "unhinted share always-right",
              "its accuracy, chosen unhinted (forced)", "its accuracy, chosen unhinted (sampled)", "SFT steps",
              "check passed at", "in regime"]
    conf = df["confidence"].iloc[0] if len(df) else DEFAULT_CONFIDENCE
    lines = [f"**Base models: {len(df)} replicate(s), one SFT seed each. Figures on the hard training problems, "
             f"sampled as RL samples them: value [{conf:.0%} interval, clustered by problem] (distance inside the "
             "regime bound in standard errors; - where the figure has no bound).**", ""]
    rows = []
    for _, r in df.iterrows():
        r = r.to_dict()
        steps = "-" if r["sft_steps"] is None or pd.isna(r["sft_steps"]) else str(int(r["sft_steps"]))
        passed = sft_passed_cell(r["sft_check_passed_at"], int(r.get("sft_attempts") or 1))
        rows.append([str(r["seed"]), *(_cell(r, f) for f in TABLE_FIGURES), steps, passed,
                     "yes" if r["in_regime"] else "NO"])
    lines.append(markdown_table(header, rows))
    return "\n".join(lines) + "\n"
