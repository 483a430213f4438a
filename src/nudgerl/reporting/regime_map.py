"""When does nudging pay? NudgeRL against GRPO over how rare the right strategy is.

Base models are built at a grid of unhinted always-right shares set in the SFT mixture
(:func:`mixture`); each base model's *measured* share (its diagnosis) is what the figure's x
axis shows. Every method is trained on every base model and its checkpoints are evaluated
hint-free on the hard benchmark problems (:mod:`nudgerl.evaluation.curves`). Per run: the final
hard pass@1, and the rollout tokens it needed to first reach a fixed hard pass@1 (None if
it never did). Per cell (share x method): means with 95 % intervals over problems and
replicates, and NudgeRL's paired differences from each GRPO run on the same base models.
The figure is drawn by :func:`nudgerl.reporting.figures.regime_map`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from nudgerl.algorithms import bootstrap_mean_of_means
from nudgerl.io import read_jsonl
from nudgerl.table_text import markdown_table
from nudgerl.verdicts import VerdictRule, claim_verdict, comparison_sides


def mixture(weights: dict[str, float], rare: str, share: float) -> dict[str, float]:
    """The unhinted strategy mixture with ``rare`` at ``share`` and the other strategies scaled
    to 1 - share, keeping their proportions."""
    if not 0 < share < 1:
        raise ValueError(f"config key 'regime_map.shares': {share} is not in (0, 1)")
    others = {k: v for k, v in weights.items() if k != rare}
    total = sum(others.values())
    if total <= 0:
        raise ValueError("base_model.unhinted_strategy_weights: the strategies other than the rare one weigh 0")
    return {**{k: (1 - share) * v / total for k, v in others.items()}, rare: share}


def share_tag(share: float) -> str:
    return f"{share:g}"


def cell_tag(share: float, accuracy: float = 1.0) -> str:
    """A cell's folder name: ``share<s>``, with ``_accuracy<a>`` on the map's second axis (base
    models whose unhinted always-right traces were executed right only ``a`` of the time)."""
    return f"share{share_tag(share)}" + ("" if accuracy == 1 else f"_accuracy{accuracy:g}")


def cell_settings(tag: str) -> tuple[float, float]:
    """(share, accuracy) of a :func:`cell_tag`."""
    share, _, accuracy = tag.removeprefix("share").partition("_accuracy")
    return float(share), float(accuracy) if accuracy else 1.0


def _final_and_reach(curve: list[dict], reached: float) -> tuple[np.ndarray, float, float | None, float]:
    """Per-problem c/n at the last checkpoint, its mean, the rollout tokens at the first
    checkpoint whose mean reaches ``reached`` (None: never), and the run's total tokens."""
    by_step = {}
    for row in curve:
        by_step.setdefault(row["step"], []).append(row)
    steps = sorted(by_step)

    def rates(step):
        probs = sorted((p for r in by_step[step] for p in r["problems"]), key=lambda p: p["id"])
        return np.array([p["c"] / p["n"] for p in probs])

    tokens = {s: by_step[s][0]["cumulative_rollout_tokens"] or 0.0 for s in steps}
    hit = next((s for s in steps if rates(s).mean() >= reached), None)
    final = rates(steps[-1])
    return final, float(final.mean()), (tokens[hit] if hit is not None else None), float(tokens[steps[-1]])


def run_table(root: Path, shares: list[float], methods: list[str], seeds: list[int], reached: float,
              accuracies: list[float] = (1.0,)) -> pd.DataFrame:
    """One row per run: set and measured share (and accuracy after an unhinted choice of the
    always-right strategy), seed, method, final hard pass@1, rollout tokens."""
    rows = []
    for share in shares:
        for accuracy in accuracies:
            cell = Path(root) / cell_tag(share, accuracy)
            for seed in seeds:
                report = json.loads((cell / "diagnostics" / f"seed{seed}.json").read_text())
                diag = report["summary"]
                for method in methods:
                    curve = read_jsonl(cell / "curves" / method / f"seed{seed}.jsonl")
                    _, final, reach, total = _final_and_reach(curve, reached)
                    rows.append({"share_set": share, "share_measured": diag["rare_strategy_share_unhinted"],
                                 "accuracy_set": accuracy,
                                 "accuracy_measured": _accuracy_after_choice(report),
                                 "hinted_rare_pass@1_hard": diag.get("hinted_rare_pass@1_hard"), "seed": seed,
                                 "method": method, "final_hard_pass@1": final,
                                 "base_hard_pass@1": _final_and_reach(curve[:1], reached)[1],
                                 "tokens_to_reach": reach, "reached": reach is not None, "rollout_tokens": total})
    return pd.DataFrame.from_records(rows)


def _accuracy_after_choice(report: dict) -> float | None:
    """Right answers when the hint-free completion starts with the always-right strategy's choice,
    pooled over the hard training problems (the RL-prompt diagnosis; None where it did not run)."""
    counts = ((report.get("rl_prompts") or {}).get("counts") or {}).get("rare_strategy_accuracy_unhinted")
    if not counts:
        return None
    return sum(k for k, _ in counts) / sum(n for _, n in counts)


def checkpoint_table(root: Path, share: float, accuracies: list[float], methods: list[str],
                     seeds: list[int]) -> pd.DataFrame:
    """One row per run and checkpoint (step 0: the base model): hint-free hard pass@1 and the
    rollout tokens generated by then, the training length at which a run got anywhere."""
    rows = []
    for accuracy in accuracies:
        cell = Path(root) / cell_tag(share, accuracy)
        for method in methods:
            for seed in seeds:
                curve = read_jsonl(cell / "curves" / method / f"seed{seed}.jsonl")
                for step in sorted({r["step"] for r in curve}):
                    at = [r for r in curve if r["step"] == step]
                    probs = [p for r in at for p in r["problems"]]
                    rows.append({"accuracy_set": accuracy, "method": method, "seed": seed, "step": step,
                                 "rollout_tokens": at[0]["cumulative_rollout_tokens"] or 0.0,
                                 "hard_pass@1": float(np.mean([p["c"] / p["n"] for p in probs]))})
    return pd.DataFrame.from_records(rows)


def _final_matrix(root: Path, share: float, method: str, seeds: list[int], reached: float,
                  accuracy: float = 1.0) -> np.ndarray:
    cell = Path(root) / cell_tag(share, accuracy)
    cols = [_final_and_reach(read_jsonl(cell / "curves" / method / f"seed{s}.jsonl"), reached)[0] for s in seeds]
    return np.stack(cols, axis=1)  # (hard problems, replicates)


def cell_table(root: Path, shares, methods, seeds, reached, reference: str, against: list[str],
               n_boot: int = 2000, accuracies: list[float] = (1.0,), rule: VerdictRule | None = None) -> pd.DataFrame:
    """Per share (and accuracy): every method's mean final hard pass@1 [95 % interval over problems
    and replicates], and ``reference`` (NudgeRL) minus each of ``against`` (GRPO runs), paired; each
    difference's verdict is the claims' rule over replicates (:mod:`nudgerl.verdicts`), the
    interval a description."""
    rule = rule or VerdictRule()
    rows = []
    for share in shares:
        for accuracy in accuracies:
            mats = {m: _final_matrix(root, share, m, seeds, reached, accuracy) for m in methods}
            at = {"share_set": share, "accuracy_set": accuracy}
            for m in methods:
                mean, lo, hi = bootstrap_mean_of_means([mats[m]], n_boot=n_boot)
                rows.append({**at, "method": m, "kind": "pass@1", "mean": mean, "ci_low": lo, "ci_high": hi})
            for other in against:
                d, lo, hi = bootstrap_mean_of_means([mats[reference] - mats[other]], n_boot=n_boot)
                per_replicate = mats[reference].mean(axis=0) - mats[other].mean(axis=0)
                p_for, p_against = comparison_sides(per_replicate)
                rows.append({**at, "method": f"{reference} - {other}", "kind": "paired difference",
                             "mean": d, "ci_low": lo, "ci_high": hi, "replicates": len(seeds), "p_for": p_for,
                             "p_against": p_against,
                             "verdict": claim_verdict([(p_for, p_against)], len(seeds), rule)})
    return pd.DataFrame.from_records(rows)


def _pct(x):
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.1f}"


VERDICT_WORD = {"supported": "better", "contradicted": "worse", "inconclusive": "tie"}


def verdict_word(verdict: str) -> str:
    """better / worse / tie for the rule's verdicts; a descriptive row keeps its words."""
    return VERDICT_WORD.get(verdict, verdict)


# How a paired cell's word is decided, for every caption that uses the words.
WORDS_RULE = ("better / worse / tie = the claims' rule over replicates: an exact sign-flip test of each replicate's "
              "difference, p < alpha/2 one way or the other, else tie; descriptive (n = k) below the rule's minimum "
              "replicates; the interval resamples problems and replicates and only describes")


def _paired(c) -> str:
    """A paired difference's entry: mean [interval] (p for / against, its word)."""
    return (f"{100 * c['mean']:+.1f} [{100 * c.ci_low:+.1f}, {100 * c.ci_high:+.1f}] "
            f"(p = {c.p_for:.2g} / {c.p_against:.2g}, {verdict_word(c.verdict)})")


def _cell_columns(here: pd.DataFrame, methods) -> tuple[list[str], list[str]]:
    """One cell's table entries: each method's pass@1 [interval], and each paired difference
    with its word (better / worse / tie)."""
    from nudgerl.reporting.tables import method_label

    parts = []
    for m in methods:
        c = here[(here.method == m) & (here.kind == "pass@1")].iloc[0]
        parts.append(f"{_pct(c['mean'])} [{_pct(c.ci_low)}, {_pct(c.ci_high)}]")
    paired = []
    for _, c in here[here.kind == "paired difference"].iterrows():
        a, b = c.method.split(" - ")
        paired.append(f"{method_label(a)} - {method_label(b)}: {_paired(c)}")
    return parts, paired


def render_markdown(runs: pd.DataFrame, cells: pd.DataFrame, reached: float, samples: int, every: int) -> str:
    from nudgerl.reporting.tables import method_label

    seeds = sorted(runs.seed.unique())
    replicates = f"{len(seeds)} replicate{'s' if len(seeds) > 1 else ''}"
    lines = [
        f"**Regime map: hint-free pass@1 (%) on the hard benchmark problems at the end of training, against the "
        f"unhinted share of the always-right strategy (set in the SFT mixture; measured by each base model's "
        f"diagnosis). {replicates} per cell (seeds {', '.join(map(str, seeds))}: base model, RL and "
        f"sampling seed), {samples} samples per problem at each checkpoint (every {every} steps); intervals resample "
        f"problems and replicates. Paired: NudgeRL minus GRPO on the same base models and problems, p for / "
        f"against ({WORDS_RULE}).**",
        "",
    ]
    labels = [method_label(m) for m in runs.method.unique()]
    rows = []
    for share, sub in runs.groupby("share_set", sort=True):
        measured = ", ".join(f"{100 * x:.2f}" for x in sub.drop_duplicates("seed").sort_values("seed").share_measured)
        parts, paired = _cell_columns(cells[cells.share_set == share], runs.method.unique())
        rows.append([f"{100 * share:g} %", f"{measured} %", *parts, "; ".join(paired)])
    lines.append(markdown_table(["share set", "share measured (per replicate)", *labels, "paired"], rows))
    lines += ["", f"**Rollout tokens to first reach hard pass@1 >= {reached:g}** (thousands; '-' = not reached within "
                  "training), per replicate:", ""]
    rows = []
    for share, sub in runs.groupby("share_set", sort=True):
        cells_ = []
        for m in runs.method.unique():
            r = sub[sub.method == m].sort_values("seed")
            cells_.append(" / ".join("-" if pd.isna(t) else f"{t / 1e3:.0f}" for t in r.tokens_to_reach))
        rows.append([f"{100 * share:g} %", *cells_])
    lines.append(markdown_table(["share set", *labels], rows))
    return "\n".join(lines) + "\n"


def render_baselines_markdown(runs: pd.DataFrame, cells: pd.DataFrame, reference: str, against: list[str],
                              samples: int, rule: VerdictRule | None = None) -> str:
    """The baselines' sub-grid: per share set and method, final hard pass@1 with its interval and
    the mean rollout tokens; NudgeRL minus each baseline, paired; and per share set the verdict of
    "NudgeRL beats every baseline" by the claims' rule (every paired interval above 0)."""
    from nudgerl.reporting.tables import method_label

    seeds = sorted(runs.seed.unique())
    lines = [
        f"**The field's exploration fixes across the regime map: final hint-free pass@1 (%) on the hard benchmark "
        f"problems [95 % interval over problems and replicates] and rollout tokens generated in training (thousands, "
        f"mean), {len(seeds)} replicate{'s' if len(seeds) != 1 else ''} per cell (seeds {', '.join(map(str, seeds))}), "
        f"every method on the same base models, {samples} samples per problem. {method_label(reference)} minus each "
        f"method, paired, p for / against ({WORDS_RULE}).**",
        "",
    ]
    rows = []
    for share, sub in runs.groupby("share_set", sort=True):
        here = cells[cells.share_set == share]
        for m in runs.method.unique():
            c = here[(here.method == m) & (here.kind == "pass@1")].iloc[0]
            tokens = sub[sub.method == m].rollout_tokens.mean()
            paired = here[(here.method == f"{reference} - {m}") & (here.kind == "paired difference")]
            diff = "" if paired.empty else _paired(paired.iloc[0])
            rows.append([f"{100 * share:g} %", method_label(m),
                         f"{_pct(c['mean'])} [{_pct(c.ci_low)}, {_pct(c.ci_high)}]", f"{tokens / 1e3:.0f}", diff])
    lines.append(markdown_table(["share set", "method", "final hard pass@1", "rollout tokens (k)",
                                 method_label(reference) + " minus it"], rows))
    lines += ["", f"**{method_label(reference)} beats every baseline** (the claims' verdict rule over replicates on "
                  "the paired comparisons above; ours, not the paper's claim):", ""]
    lines.append(markdown_table(["share set", "verdict"],
                                [[f"{100 * share:g} %", f"**{verdict}**"]
                                 for share, verdict in beats_every_baseline(cells, reference, against, rule).items()]))
    return "\n".join(lines) + "\n"


def beats_every_baseline(cells: pd.DataFrame, reference: str, against: list[str],
                         rule: VerdictRule | None = None) -> dict[float, str]:
    """Per share set: the claims' rule over ``reference`` minus each of ``against`` (each
    comparison's (p for, p against) over the cell's replicates)."""
    rule = rule or VerdictRule()
    out = {}
    for share, here in cells.groupby("share_set", sort=True):
        pairs = here[here.method.isin([f"{reference} - {m}" for m in against])]
        out[float(share)] = claim_verdict(list(zip(pairs.p_for, pairs.p_against)), int(pairs.replicates.iloc[0]), rule)
    return out


def render_accuracy_markdown(runs: pd.DataFrame, cells: pd.DataFrame, checkpoints: pd.DataFrame, share: float,
                             samples: int) -> str:
    """The map's second axis: per accuracy set, the measured accuracy after an unhinted choice of
    the always-right strategy and its share, each method's final hard pass@1 and NudgeRL minus
    each GRPO run (paired); then hard pass@1 at every checkpoint, mean over replicates."""
    from nudgerl.reporting.tables import method_label

    seeds = sorted(runs.seed.unique())
    methods = list(runs.method.unique())
    lines = [
        f"**Regime map, second axis: hint-free pass@1 (%) on the hard benchmark problems at the end of training, "
        f"against the accuracy of the always-right strategy when the unhinted policy chooses it (the SFT corpus "
        f"executes that share of its unhinted traces of the strategy right, the rest with a wrong last step; hinted "
        f"traces are all right), at an unhinted share of {100 * share:g} %. Accuracy measured per base model: the "
        f"hint-free completion started with the strategy's first line. {len(seeds)} "
        f"replicate{'s' if len(seeds) != 1 else ''} per cell (seeds {', '.join(map(str, seeds))}), {samples} "
        f"sample{'s' if samples != 1 else ''} per problem at each checkpoint; intervals resample problems and replicates; accuracy set 1 is the map's own "
        f"cell. Paired: NudgeRL minus each method on the same base models, p for / against ({WORDS_RULE}).**",
        "",
    ]
    rows = []
    for accuracy, sub in runs.groupby("accuracy_set", sort=False):
        per_seed = sub.drop_duplicates("seed").sort_values("seed")
        parts, paired = _cell_columns(cells[cells.accuracy_set == accuracy], methods)
        rows.append([f"{accuracy:g}", f"{', '.join(_pct(x) for x in per_seed.accuracy_measured)} %",
                     f"{', '.join(f'{100 * x:.2f}' for x in per_seed.share_measured)} %",
                     f"{', '.join(_pct(x) for x in per_seed['hinted_rare_pass@1_hard'])} %", *parts, "; ".join(paired)])
    lines.append(markdown_table(["accuracy set", "accuracy measured (per replicate)", "share measured", "hinted pass@1",
                                 *(method_label(m) for m in methods), "paired"], rows))
    steps = sorted(checkpoints.step.unique())
    lines += ["", "**Hard pass@1 (%) at each checkpoint** (mean over replicates; step 0 = the base model; rollout "
                  "tokens by the last step in thousands): at what training length a method carries the hinted "
                  "successes to the hint-free policy, if it does.", ""]
    rows = []
    for (accuracy, method), sub in checkpoints.groupby(["accuracy_set", "method"], sort=False):
        means = sub.groupby("step")["hard_pass@1"].mean()
        tokens = sub[sub.step == sub.step.max()].rollout_tokens.mean()
        rows.append([f"{accuracy:g}", method_label(method), *(_pct(means.get(s)) for s in steps),
                     f"{tokens / 1e3:.0f}"])
    lines.append(markdown_table(["accuracy set", "method", *(f"step {s}" for s in steps), "rollout tokens (k)"], rows))
    return "\n".join(lines) + "\n"
