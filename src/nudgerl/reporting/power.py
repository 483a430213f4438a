"""What each table's replicate count can detect, by the verdict rule (:mod:`nudgerl.verdicts`).

"Inconclusive" means little without it: at 5 replicates the exact sign-flip test cannot reach
alpha at all, and 12 against 12 tells a 50 % success rate from 100 % but not from 90 %. Per
table (its replicates per arm): whether a verdict is possible; the smallest mean difference of
Avg pass@1 the rule calls *better* with 80 % power, in standard deviations of the per-replicate
difference (and in points where a run's A/A pair measured that SD); for a parity claim, the
smallest true difference at which non-inferiority is supported with 80 % power; and for
found / not-found, the smallest success rate Boschloo's exact test tells from 10 % and from 50 %
with 80 % power (arms independent, as two seed sets are; paired arms fare no worse when their
replicates agree more often than chance).
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from nudgerl.table_text import markdown_table
from nudgerl.verdicts import VerdictRule, detectable_effect, detectable_rate

POWER = 0.8
RATE_BASELINES = (0.1, 0.5)


@lru_cache(maxsize=None)
def _effect(n: int, rule: VerdictRule, margin: float = 0.0) -> float | None:
    return detectable_effect(n, rule, POWER, margin)


@lru_cache(maxsize=None)
def _rate(n: int, p1: float, alpha: float) -> float | None:
    return detectable_rate(n, p1, alpha, POWER)


def power_table(tables: list[dict], rule: VerdictRule, aa_sd: float | None = None) -> pd.DataFrame:
    """One row per table: ``tables`` is [{"table": name, "replicates": n per arm}, ...];
    ``aa_sd``: the A/A pair's per-replicate SD of Avg pass@1 (a fraction), to give points."""
    rows = []
    for t in tables:
        n = int(t["replicates"])
        effect = _effect(n, rule)
        row = {"table": t["table"], "replicates": n, "verdict_possible": n >= rule.min_replicates,
               "detectable_sd": effect,
               "detectable_points": None if effect is None or aa_sd is None else 100 * effect * aa_sd}
        if aa_sd:
            parity = _effect(n, rule, rule.parity_margin / aa_sd)
            row["parity_points"] = None if parity is None else 100 * parity * aa_sd
        for p1 in RATE_BASELINES:
            row[f"rate_from_{p1:g}"] = _rate(n, p1, rule.alpha)
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(x, fmt: str, none: str = "none") -> str:
    return none if x is None or pd.isna(x) else fmt.format(x)


def render_markdown(table: pd.DataFrame, rule: VerdictRule, aa_sd: float | None = None,
                    aa_source: str | None = None) -> str:
    has_points = aa_sd is not None
    lines = [
        f"**What each table can detect, by the verdict rule (alpha = {rule.alpha:g}, a verdict from "
        f"{rule.min_replicates} replicates; 80 % power).** Better: the smallest mean per-replicate difference of "
        "Avg pass@1 the exact sign-flip test calls better, in standard deviations (SD) of that difference (simulated "
        "Normal differences, 2,000 replicate sets)"
        + (f", and in points at the A/A pair's measured SD of {100 * aa_sd:.1f} points ({aa_source})" if has_points else
           "; no A/A pair measured the SD here, so no points")
        + (f". Parity: the smallest true difference at which non-inferiority within {100 * rule.parity_margin:g} points "
           "is supported" if has_points else "")
        + ". Found: the smallest success rate Boschloo's exact test tells from 10 % and from 50 % (arms independent). "
          "'none': not even the largest difference on the grid (4 SD; a rate of 100 %) is detected; "
          "'no verdict': fewer replicates than the rule's minimum.",
        "",
    ]
    header = ["table", "replicates per arm", "better: SD",
              *(["better: points", "parity: points"] if has_points else []), "found: from 10 %", "found: from 50 %"]
    rows = []
    for r in table.to_dict("records"):
        verdict = r["verdict_possible"]
        cells = [_fmt(r["detectable_sd"], "{:.2f}") if verdict else "no verdict"]
        if has_points:
            cells += [_fmt(r["detectable_points"], "{:+.1f}") if verdict else "no verdict",
                      _fmt(r.get("parity_points"), "{:+.1f}") if verdict else "no verdict"]
        cells += [_fmt(None if r[f"rate_from_{p:g}"] is None else 100 * r[f"rate_from_{p:g}"], "{:.0f} %")
                  for p in RATE_BASELINES]
        rows.append([r["table"], r["replicates"], *cells])
    lines.append(markdown_table(header, rows))
    return "\n".join(lines) + "\n"


def aa_sd_of(claims_csv) -> float | None:
    """The A/A pair's per-replicate SD of Avg pass@1 from a run's tables/claims.csv (None without one)."""
    claims = pd.read_csv(claims_csv)
    if "aa_sd" not in claims.columns or claims["aa_sd"].isna().all():
        return None
    return float(claims["aa_sd"].dropna().iloc[0])


# The generated block of docs/methods.md (nudgerl power-table --doc ...)
BEGIN = "<!-- BEGIN GENERATED by `nudgerl power-table --doc`: do not edit by hand -->"
END = "<!-- END GENERATED power-table -->"


def config_tables(config: dict) -> list[dict]:
    """The tables a configuration makes and the replicates per arm of each (from the config alone)."""
    from nudgerl.method_ids import baseline_seeds

    seeds, abl = config["seeds"], config.get("ablation_seeds") or config["seeds"][:1]
    tables = [{"table": "Table 1, claims 1-3", "replicates": len(seeds)},
              {"table": "ablations, eps_high sweep (claims 4-7)", "replicates": len(abl)}]
    if baseline_seeds(config):
        tables.append({"table": "the field's fixes (claim 8)", "replicates": len(baseline_seeds(config))})
    rmap = config.get("regime_map")
    if rmap:
        tables.append({"table": "regime map, a cell", "replicates": len(rmap["seeds"])})
        if (rmap.get("baselines") or {}).get("seeds"):
            tables.append({"table": "regime map, the fixes in a cell", "replicates": len(rmap["baselines"]["seeds"])})
        if (rmap.get("accuracy") or {}).get("seeds"):
            tables.append({"table": "regime map, second axis", "replicates": len(rmap["accuracy"]["seeds"])})
    study = config.get("study")
    if study:
        tables.append({"table": "seed-set agreement (one set)", "replicates": min(map(len, study["seed_sets"]))})
    return tables


def doc_block(configs: dict[str, dict], rule: VerdictRule) -> str:
    """The methods page's power table: every configuration's tables, in SD units and success rates
    (machine-independent: no run's measured SD)."""
    rows = []
    for name, config in configs.items():
        for t in config_tables(config):
            rows.append({**t, "table": f"`{name}`: {t['table']}"})
    # one row per replicate count would hide which table it is; the computation is cached per n
    body = render_markdown(power_table(rows, rule), rule)
    return f"{BEGIN}\n{body}{END}"


def replace_block(text: str, block: str, where: str, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with its one generated block (from ``begin`` to ``end``) replaced by ``block``."""
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"{where}: needs one '{begin}' line and one '{end}' line after it")
    return text[:text.index(begin)] + block + text[text.index(end) + len(end):]
