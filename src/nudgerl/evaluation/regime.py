"""The regime gate: is a replicate's base model in the regime the paper is about?

The paper's argument needs a policy that (1) rarely samples the always-right strategy
without a hint, (2) therefore fails most hard problems, and (3) executes that strategy
when a hint names it. The diagnosis measures all three; the bounds are config (key
``regime``), fixed before any RL run. A base model outside them would make every later
number meaningless, so the gate fails the DAG before any RL job of that replicate starts,
naming the figure, its value and the bound (``gate: false`` reports and carries on).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from nudgerl.io import atomic_write_text

# figure -> (what it measures, where the diagnosis summary keeps it)
FIGURES = {
    "hinted_rare_pass@1_hard": "pass@1 on hard held-out problems, hinted with the always-right strategy",
    "unhinted_pass@1_hard": "pass@1 on hard held-out problems without a hint",
    "rare_strategy_share_unhinted": "share of unhinted samples that use the always-right strategy",
}


class RegimeError(RuntimeError):
    """A base model outside the configured regime; the message names figure, value and bound."""


def check(summary: dict, bounds: dict) -> list[dict]:
    """One row per bounded figure: value, min, max, ok. Unknown figures are an error."""
    rows = []
    for figure, bound in bounds.items():
        if figure not in FIGURES:
            raise ValueError(f"config key 'regime.bounds.{figure}': unknown figure; known: {sorted(FIGURES)}")
        value = summary.get(figure)
        lo, hi = bound.get("min"), bound.get("max")
        ok = value is not None and (lo is None or value >= lo) and (hi is None or value <= hi)
        rows.append({"figure": figure, "value": value, "min": lo, "max": hi, "ok": bool(ok),
                     "measures": FIGURES[figure]})
    return rows


def describe_failure(row: dict) -> str:
    bound = " and ".join(f"{'>=' if k == 'min' else '<='} {row[k]:g}" for k in ("min", "max") if row[k] is not None)
    value = "missing" if row["value"] is None else f"{row['value']:.4f}"
    return f"{row['figure']} = {value}, outside its bound ({bound}): {row['measures']}"


def gate(diagnosis_path: str | Path, regime: dict, out: str | Path) -> dict:
    """Write the verdict to ``out``; raise :class:`RegimeError` if out of regime and the gate is on."""
    diagnosis = json.loads(Path(diagnosis_path).read_text())
    rows = check(diagnosis["summary"], regime.get("bounds", {}))
    failed = [r for r in rows if not r["ok"]]
    verdict = {
        "diagnosis": str(diagnosis_path),
        "seed": diagnosis.get("seed"),
        "in_regime": not failed,
        "gate": bool(regime.get("gate", True)),
        "figures": rows,
        "summary": diagnosis["summary"],
        "sft": diagnosis.get("sft"),
    }
    atomic_write_text(out, json.dumps(verdict, indent=2))
    for r in rows:
        print(f"{'ok ' if r['ok'] else 'OUT'} {r['figure']} = {r['value']}  (min {r['min']}, max {r['max']})")
    if failed and verdict["gate"]:
        # Snakemake deletes a failed job's output, so the gate stays shut on the next run;
        # the rule's log keeps the lines printed above
        raise RegimeError(f"{diagnosis_path}: base model outside the regime, no RL job will start: "
                          + "; ".join(describe_failure(r) for r in failed)
                          + " (fix the base model config, or set regime.gate: false to train anyway)")
    return verdict


def replicate_table(regime_paths: list[str | Path]) -> pd.DataFrame:
    """One row per replicate: its diagnosis figures, SFT check and regime verdict."""
    rows = []
    for path in regime_paths:
        v = json.loads(Path(path).read_text())
        s, sft = v["summary"], v.get("sft") or {}
        rows.append({
            "seed": v.get("seed"),
            "threads": sft.get("threads"),
            "hinted_rare_pass@1_hard": s.get("hinted_rare_pass@1_hard"),
            "unhinted_pass@1_hard": s.get("unhinted_pass@1_hard"),
            "rare_strategy_share_unhinted": s.get("rare_strategy_share_unhinted"),
            "dominant_strategy_share_unhinted": s.get("dominant_strategy_share_unhinted"),
            **{f"hinted_pass@1_hard[{k}]": x for k, x in (s.get("hinted_pass@1_hard") or {}).items()},
            "sft_steps": sft.get("steps"),
            "sft_check_passed_at": sft.get("passed_at_step"),
            "sft_seconds": sft.get("seconds"),
            "in_regime": v["in_regime"],
        })
    return pd.DataFrame.from_records(rows)


def replicate_markdown(df: pd.DataFrame) -> str:
    cols = ["seed", "hinted_rare_pass@1_hard", "unhinted_pass@1_hard", "rare_strategy_share_unhinted",
            "dominant_strategy_share_unhinted", "sft_steps", "sft_check_passed_at", "in_regime"]
    head = ("| seed | hinted always-right pass@1 (hard) | unhinted pass@1 (hard) | unhinted share always-right | "
            "unhinted share habit | SFT steps | check passed at | in regime |")
    lines = [f"**Base models: {len(df)} replicate(s), one SFT seed each; figures from each replicate's diagnosis.**",
             "", head, "|---" * len(cols) + "|"]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            x = r[c]
            cells.append("-" if x is None or (isinstance(x, float) and pd.isna(x)) else
                         ("yes" if x is True else "NO" if x is False else f"{x:.3f}" if isinstance(x, float) else str(x)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
