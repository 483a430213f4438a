"""The paper's claims per regime: one column per run folder, so no reader takes one regime's
verdict for another's.

Each run folder's claims table (``tables/claims.csv``) was judged by the rule of
:mod:`nudgerl.reporting.claims`; this page only lays the verdicts side by side. A run's regime
is what its own base models measured: the range over its replicates of the unhinted share of
the always-right strategy (``diagnostics/base_models.csv``, the regime gate's figure). The
page is generated (``nudgerl claims-by-regime``) and checked against the run folders
(``--check``), like the results pages.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd

from nudgerl.table_text import markdown_table

RL_WORKS_METHOD = "grpo8"  # the matrix's reference run: does plain RL learn at all on these base models?


def _read_csv(path: Path, what: str) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {what} (run the configuration to its end first)")
    return pd.read_csv(path)


def regime_of(run: Path) -> str:
    """'unhinted share 0.1-1.0 % (5 base models)': the measured range of the run's base models."""
    from nudgerl.reporting.claims import measured_shares, share_range

    return share_range(measured_shares([run / "diagnostics" / "base_models.csv"]))


def rl_works(run: Path, method: str = RL_WORKS_METHOD) -> str:
    """'yes, 3 of 3' when every replicate's ``method`` ends above its own Base (its paired
    interval over problems above 0, ``tables/table1_replicates.csv``); 'no, k of n' otherwise."""
    per = _read_csv(run / "tables" / "table1_replicates.csv", "per-replicate table")
    rows = per[per.method == method]
    if rows.empty:
        return f"{method} not run"
    k, n = int(rows.above_reference.astype(bool).sum()), len(rows)
    return f"{'yes' if k == n else 'no'}, {k} of {n}"


def exploration_runs(run: Path) -> dict[tuple[str, int], bool]:
    """(method, seed) -> whether that run found the rare strategy, from ``tables/exploration.csv``
    (organism runs); empty when the run folder has none."""
    path = run / "tables" / "exploration.csv"
    if not path.is_file():
        return {}
    return {(r.method, int(r.seed)): bool(r.run_found) for r in pd.read_csv(path).itertuples()}


def families_runs(run: Path) -> dict[tuple[str, int], tuple[int, int]]:
    """(method, seed) -> (families found, families) of that run, from ``tables/exploration.csv``
    of a families-task run (column run_families_found); empty for any other run."""
    path = run / "tables" / "exploration.csv"
    if not path.is_file():
        return {}
    table = pd.read_csv(path)
    if "run_families_found" not in table:
        return {}
    return {(r.method, int(r.seed)): (int(r.run_families_found), int(r.families)) for r in table.itertuples()}


def _found(runs: dict[tuple[str, int], bool], method: str, seeds: list[int]) -> list[bool] | None:
    """Found / not-found of ``method`` on each of the claim's ``seeds``; None unless every run is counted."""
    if not all((method, s) in runs for s in seeds):
        return None
    return [bool(runs[method, s]) for s in seeds]


def _cell(group: pd.DataFrame, runs: dict[tuple[str, int], bool],
          families: dict[tuple[str, int], tuple[int, int]] | None = None) -> str:
    """One claim of one run: verdict, then each comparison's difference (pp) and interval with the
    rule's p for / against, and where both methods have exploration-success records for the
    claim's replicates, k of n each and the exact McNemar p (the same replicates on both sides);
    in a families-task run, the families found instead (summed over the replicates, k of F x n each)
    and the two-sided exact sign-flip p of the per-replicate difference."""
    from nudgerl.verdicts import paired_found_p, sign_flip_p

    first = group.iloc[0]
    if first["verdict"] == "not run":
        return "not run"
    seeds = [int(s) for s in str(first["seeds"]).split()]
    parts = []
    for r in group.itertuples():
        part = (f"{100 * r.delta:+.1f} [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}], p = {r.p_for:.2g} / "
                f"{r.p_against:.2g}")
        fa, fb = ([families.get((m, s)) for s in seeds] for m in (r.better, r.worse)) if families else ([None], [None])
        a, b = _found(runs, r.better, seeds), _found(runs, r.worse, seeds)
        if all(fa) and all(fb):
            ka, kb = sum(k for k, _ in fa), sum(k for k, _ in fb)
            slots = sum(f for _, f in fa)
            p = sign_flip_p([x[0] - y[0] for x, y in zip(fa, fb)], "two-sided")
            part += f", families found {ka} of {slots} vs {kb} of {slots} (sign-flip p = {p:.2g})"
        elif a and b:
            part += f", found {sum(a)} of {len(a)} vs {sum(b)} of {len(b)} (McNemar p = {paired_found_p(a, b):.2g})"
        parts.append(part)
    n = int(first["replicates"])
    return f"**{first['verdict']}**: " + "; ".join(parts) + f" ({n} replicate{'s' if n != 1 else ''})"


def render(runs: list[str], out: str) -> str:
    """The page comparing the claims of ``runs`` (run folders), as it will stand at ``out``."""
    tables = {r: _read_csv(Path(r) / "tables" / "claims.csv", "claims table") for r in runs}
    for r, table in tables.items():
        if "regime" in table.columns:
            raise ValueError(f"{Path(r) / 'tables' / 'claims.csv'}: judged in several regimes already (column "
                             "'regime'); its own tables/claims.md lays them side by side")
    regimes = {r: regime_of(Path(r)) for r in runs}
    found = {r: exploration_runs(Path(r)) for r in runs}
    families = {r: families_runs(Path(r)) for r in runs}
    command = shlex.join(["nudgerl", "claims-by-regime", "--results", *runs, "--out", out])
    lines = [f"<!-- GENERATED by `nudgerl claims-by-regime`: do not edit by hand; regenerate with `{command}` -->",
             "# The paper's claims per regime", "",
             ("One column per run folder, each judged on its own runs by the claims table's rule over replicates "
              "(an exact sign-flip test of each replicate's difference of Avg pass@1; supported = every p for below "
              "alpha/2, contradicted = some p against below alpha/2 over the comparisons, inconclusive = otherwise, "
              "descriptive (n = k) below the rule's minimum replicates; docs/methods.md, \"Verdicts\"). A cell: the "
              "verdict, each comparison's paired difference of Avg pass@1 (percentage points, claimed better minus "
              "claimed worse) with its 95 % interval over problems and replicates (a description), p for / against, "
              "and the replicates it rests on; where both methods have an exploration-success count (organism runs, "
              "`tables/exploration.csv`), the replicates that found the rare strategy, k of n each, and the exact "
              "McNemar p (the same replicates on both sides); in a families-task run, the families found summed over "
              "the replicates (k of 4 x n each) and the two-sided exact sign-flip p of the per-replicate difference. "
              "A run's regime is what its base models measured: the unhinted share of the always-right "
              "strategy on the hard training problems, lowest to highest over its replicates "
              "(`diagnostics/base_models.csv`). Each run's own page has the comparisons named."), "",
             f"Regenerate and check against the run folders with `{command}` (and `--check`).", ""]
    header = ["#", "claim", "paper (Qwen3-4B)", *(f"`{r}`: {regimes[r]}" for r in runs)]
    rows = [["-", "RL works at all: every replicate's GRPO (N=8) ends above its own Base (paired interval over "
             "problems above 0; `tables/table1_replicates.csv`)", "-", *(rl_works(Path(r)) for r in runs)]]
    numbers = sorted(set().union(*(set(t.claim) for t in tables.values())))
    for number in numbers:
        text = paper = ""
        cells = []
        for r in runs:
            group = tables[r][tables[r].claim == number]
            if group.empty:
                cells.append("not in this run")
                continue
            text, paper = group.iloc[0]["text"], group.iloc[0]["paper"]
            cells.append(_cell(group, found[r], families[r]))
        rows.append([number, text, paper, *cells])
    lines.append(markdown_table(header, rows))
    return "\n".join(lines) + "\n"


def check(runs: list[str], out: str) -> list[str]:
    """What differs between the page at ``out`` and the one the run folders give (empty: none)."""
    page = Path(out)
    if not page.is_file():
        return [f"{out} does not exist"]
    want, have = render(runs, out).splitlines(), page.read_text().splitlines()
    problems = [f"line {i + 1}: page has {h!r}, the runs give {w!r}"
                for i, (w, h) in enumerate(zip(want, have)) if w != h]
    if len(want) != len(have):
        problems.append(f"the page has {len(have)} lines, the runs give {len(want)}")
    return problems
