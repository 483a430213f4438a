"""Table 1 in the paper's layout, from per-problem evaluation records.

Cells are pass@1 in percent: the mean over problems of c/n (and over seeds), with a 95%
bootstrap interval over problems (and seeds when there are several). With a reference
method (GRPO-8 in the pipeline) every other method gets, per benchmark, a paired
sign-flip permutation test over problems (:func:`nudgerl.algorithms.paired_permutation_test`);
cells with p < 0.05 are marked with a dagger. With ``exploration`` (organism runs), a last
column gives each method's exploration success: k of n replicates whose hint-free policy found
the rare-but-right strategy, with its exact interval (:mod:`nudgerl.reporting.exploration`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from nudgerl.algorithms import bootstrap_ci, bootstrap_mean_of_means, paired_permutation_test
from nudgerl.io import atomic_write_text, read_jsonl
from nudgerl.reporting.report_pages import write_markdown_page
from nudgerl.table_text import Latex, latex_escape, latex_table, markdown_table

BENCHMARK_LABELS = {
    "aime24": "AIME24",
    "aime25": "AIME25",
    "amc23": "AMC23",
    "math500": "MATH500",
    "apex": "APEX",
}


# Display names of the field's exploration fixes (config/config.yaml `baselines`); another
# name shows as written.
BASELINE_LABELS = {"dapo": "DAPO", "drgrpo": "Dr. GRPO", "gspo": "GSPO", "cispo": "CISPO",
                   "entropy": "GRPO + entropy bonus", "ngrpo": "NGRPO", "passk": "Pass@k training"}


def method_label(method: str) -> str:
    """Display name of a method id (``grpo16``, ``nudgerl8``, ``nudgerl8_pdrop0.25`` ...)."""
    import re

    if method == "base":
        return "Base"
    if m := re.fullmatch(r"grpo(\d+)", method):
        return f"GRPO (N={m.group(1)})"
    if m := re.fullmatch(r"grpo(\d+)_eps([0-9.]+)", method):
        return f"GRPO (N={m.group(1)}, eps_high={m.group(2)})"
    if m := re.fullmatch(r"(nudgerl|pope)(\d+)(?:_(.+))?", method):
        name = {"nudgerl": "NudgeRL", "pope": "POPE"}[m.group(1)]
        variant = m.group(3)
        if not variant:
            return f"{name} (N={m.group(2)})"
        for prefix, key in (("pdrop", "p_drop"), ("distill", "lambda_distill")):
            if variant.startswith(prefix):
                return f"{name} {key}={variant[len(prefix):]}"
        return f"{name} ({variant.replace('topranked', 'top-ranked')} hints)"
    if m := re.fullmatch(r"([a-z]+)(\d+)", method):  # the field's baselines (config `baselines`)
        return f"{BASELINE_LABELS.get(m.group(1), m.group(1))} (N={m.group(2)})"
    return method


def per_problem_matrix(eval_root: Path, method: str, bench: str, seeds: list[int],
                       return_ids: bool = False):
    """(problems, seeds) matrix of c/n (rows sorted by problem id), and the samples per problem."""
    cols, ids, n = [], None, None
    for s in seeds:
        path = Path(eval_root) / method / f"seed{s}" / f"{bench}.problems.jsonl"
        rows = sorted(read_jsonl(path), key=lambda r: r["id"])
        these = [r["id"] for r in rows]
        if ids is not None and these != ids:
            raise ValueError(f"{path}: problem ids differ from seed {seeds[0]}'s records")
        ids = these
        cols.append([r["c"] / r["n"] for r in rows])
        n = rows[0]["n"] if rows else 0
    if return_ids:
        return np.array(cols).T, n, ids
    return np.array(cols).T, n


def replicate_avg(eval_root, method: str, benchmarks, seeds) -> np.ndarray:
    """Each replicate's Avg pass@1: per seed, the mean over benchmarks of the mean over problems of c/n."""
    return np.mean([per_problem_matrix(eval_root, method, b, seeds)[0].mean(axis=0) for b in benchmarks], axis=0)


def aa_caption(eval_root, aa: tuple[str, str], benchmarks, seeds) -> str:
    """Table 1's sentence on the A/A pair: two identical arms' difference of Avg pass@1 on these
    replicates, its SD per replicate and its spread (:func:`nudgerl.verdicts.aa_spread`)."""
    from nudgerl.verdicts import aa_spread

    a, b = aa
    d = replicate_avg(eval_root, a, benchmarks, seeds) - replicate_avg(eval_root, b, benchmarks, seeds)
    if len(d) < 2:
        return ""
    noise = aa_spread(d, d)
    return (f" A/A: {method_label(a)} trained and evaluated twice on the same base models (other RL and sampling "
            f"seeds) differs from itself by {100 * noise['aa_mean']:+.1f} points of Avg pass@1 (SD "
            f"{100 * noise['aa_sd']:.1f} per replicate; spread ±{100 * noise['aa_spread']:.1f}): an Avg difference "
            f"between two methods inside that is what identical arms reach.")


def paired_avg_difference(eval_root, a: str, b: str, benchmarks, seeds, n_boot: int = 2000) -> tuple:
    """Avg pass@1 of ``a`` minus ``b`` on the same problems and replicates, with its interval."""
    diffs = []
    for bench in benchmarks:
        ma, _, ids_a = per_problem_matrix(eval_root, a, bench, seeds, return_ids=True)
        mb, _, ids_b = per_problem_matrix(eval_root, b, bench, seeds, return_ids=True)
        if ids_a != ids_b:
            raise ValueError(f"{eval_root}: {a} and {b} were evaluated on different {bench} problems")
        diffs.append(ma - mb)
    return bootstrap_mean_of_means(diffs, n_boot=n_boot)


def build_table(eval_root, methods, benchmarks, seeds, n_boot=2000, reference=None) -> tuple[pd.DataFrame, int]:
    """One row per (method, benchmark) and (method, avg); with ``reference``, paired-test columns
    ``delta_vs_ref``, ``delta_ci_low``, ``delta_ci_high`` and ``p_vs_ref`` (empty for the reference
    itself and for Avg)."""
    records, samples = [], 0
    ref = {}
    if reference:
        for b in benchmarks:
            mat, _, ids = per_problem_matrix(eval_root, reference, b, seeds, return_ids=True)
            ref[b] = (mat, ids)
    for m in methods:
        mats = []
        for b in benchmarks:
            mat, samples, ids = per_problem_matrix(eval_root, m, b, seeds, return_ids=True)
            mats.append(mat)
            mean, lo, hi = bootstrap_ci(mat, n_boot=n_boot)
            rec = {"method": m, "benchmark": b, "pass@1": mean, "ci_low": lo, "ci_high": hi,
                   "problems": mat.shape[0], "seeds": mat.shape[1], "samples": samples}
            if reference and m != reference:
                ref_mat, ref_ids = ref[b]
                if ids != ref_ids:
                    raise ValueError(f"{eval_root}/{m} and {reference} were evaluated on different {b} problems")
                test = paired_permutation_test(mat, ref_mat, n_boot=n_boot)
                rec.update({"reference": reference, "delta_vs_ref": test["delta"], "delta_ci_low": test["ci_low"],
                            "delta_ci_high": test["ci_high"], "p_vs_ref": test["p_value"]})
            records.append(rec)
        mean, lo, hi = bootstrap_mean_of_means(mats, n_boot=n_boot)
        records.append({"method": m, "benchmark": "avg", "pass@1": mean, "ci_low": lo, "ci_high": hi,
                        "problems": sum(x.shape[0] for x in mats), "seeds": len(seeds), "samples": samples})
    return pd.DataFrame.from_records(records), samples


SIGNIFICANCE = 0.05


def replicate_seed_phrase(base_model_seed: int | None = None) -> str:
    """What a replicate's seed sets: its own base model too, or (``base_model_seed``, one base
    model for every replicate) only its RL and sampling."""
    if base_model_seed is None:
        return "each its own base model, RL and sampling seed"
    return f"each its own RL and sampling seed, all from the one base model of seed {base_model_seed}"


def replicates_phrase(seeds, base_model_seed: int | None = None) -> str:
    """'3 replicates (seeds 0, 1, 2; each its own base model, RL and sampling seed)'."""
    n = len(seeds)
    return (f"{n} replicate{'s' if n > 1 else ''} (seed{'s' if n > 1 else ''} {', '.join(map(str, seeds))}; "
            f"{replicate_seed_phrase(base_model_seed)})")


def _cell(row, tex=False) -> str:
    pm = (r"\,[{:.1f}, {:.1f}]" if tex else " [{:.1f}, {:.1f}]").format(100 * row.ci_low, 100 * row.ci_high)
    p = row.get("p_vs_ref")
    mark = ""
    if p is not None and not pd.isna(p) and p < SIGNIFICANCE:
        mark = r"$^\dagger$" if tex else " †"
    return f"{100 * row['pass@1']:.1f}{pm}{mark}"


def _tex(text: str) -> Latex:
    """Data text for the LaTeX table (escaped), its dagger as the math-mode mark."""
    return Latex(latex_escape(text).replace("†", r"$^\dagger$"))


def _found_cell(row) -> str:
    """'k of n (rate % [low, high])' of a method's Avg row; with families, '; families k of n F'."""
    cell = (f"{int(row.found)} of {int(row.found_replicates)} ({100 * row.found_rate:.0f} % "
            f"[{100 * row.found_ci_low:.0f}, {100 * row.found_ci_high:.0f}])")
    if "families_found" in row and not pd.isna(row.families_found):
        cell += f"; families {int(row.families_found)} of {int(row.family_slots)}"
    return cell


def add_exploration(df: pd.DataFrame, eval_root, methods, benchmarks, seeds, strategy: str, success_share: float,
                    confidence: float = 0.95) -> pd.DataFrame:
    """Table 1's rows with each method's exploration success on its Avg row: ``found`` (k),
    ``found_replicates`` (n), ``found_rate``, ``found_ci_low`` / ``found_ci_high`` (exact interval)."""
    from nudgerl.reporting.exploration import exploration_rows, exploration_table

    runs = exploration_rows(eval_root, methods, seeds, benchmarks, strategy, success_share)
    success = exploration_table(runs, methods[0], confidence).set_index("method")
    df = df.copy()
    columns = [("found", "found"), ("found_replicates", "replicates"), ("found_rate", "rate"),
               ("found_ci_low", "ci_low"), ("found_ci_high", "ci_high")]
    if "families_found" in success:
        columns += [("families_found", "families_found"), ("family_slots", "family_slots")]
    for col, src in columns:
        df[col] = [success.at[m, src] if b == "avg" else np.nan for m, b in zip(df.method, df.benchmark)]
    return df


def samples_phrase(counts: dict[str, int]) -> str:
    """The caption's samples per problem: one count, or the rows' most common count with the
    rows at another named (eval.samples_per_role evaluates an ablation's variants at fewer samples
    than its main run): "32 samples per problem (128 for NudgeRL-8)"."""
    by_count: dict[int, list[str]] = {}
    for label, n in counts.items():
        by_count.setdefault(int(n), []).append(label)
    if len(by_count) <= 1:
        return f"{next(iter(by_count), 0)} samples per problem"
    common = max(by_count, key=lambda n: (len(by_count[n]), n))
    others = "; ".join(f"{n} for {', '.join(by_count[n])}" for n in sorted(by_count) if n != common)
    return f"{common} samples per problem ({others})"


def render(df: pd.DataFrame, methods, benchmarks, seeds, samples, title="Table 1", labels=None,
           reference=None, exploration: dict | None = None, aa_sentence: str = "",
           base_model_seed: int | None = None) -> tuple[str, str]:
    labels = labels or [method_label(m) for m in methods]
    cols = [BENCHMARK_LABELS.get(b, b) for b in benchmarks] + ["Avg"]
    # each row's own count (build_table's samples column), not one run's: rows may differ
    counts = ({label: df[(df.method == m) & (df.benchmark == "avg")]["samples"].iloc[0]
               for m, label in zip(methods, labels)} if "samples" in df else {"": samples})
    caption = (
        f"{title}: pass@1 (%) with 95% bootstrap interval over problems"
        f"{' and replicates' if len(seeds) > 1 else ''}; {replicates_phrase(seeds, base_model_seed)}, {samples_phrase(counts)}."
    )
    if reference:
        caption += (f" † = differs from {method_label(reference)} on that benchmark (paired sign-flip "
                    f"permutation test over problems, p < {SIGNIFICANCE:g}; p-values in the CSV): a mark over "
                    f"problems within these replicates, no verdict; verdicts are over replicates (the claims).")
    if exploration:
        cols.append("Found")
        # with families each family has its own rare strategy: the configured label is one of them
        strategy = ("each family's own, on its family's problems" if "families_found" in df
                    else exploration['strategy'].replace('_', ' '))
        caption += (f" Found = exploration success: replicates whose hint-free policy uses the rare-but-right "
                    f"strategy ({strategy}) on more than "
                    f"{100 * exploration['success_share']:g} % of its samples on the hard benchmark problems, "
                    f"k of n with a {100 * exploration.get('confidence', 0.95):g} % exact (Clopper-Pearson) "
                    f"interval (tables/exploration has each run's share and Fisher's test)."
                    + (" With families, a replicate counts as found when it found every family, and "
                       "'families k of n' sums the families found over the replicates (tables/exploration: "
                       "per replicate and family)." if "families_found" in df else ""))
    caption += aa_sentence
    rows, trows = [], []
    for m, label in zip(methods, labels):
        sub = df[df.method == m].set_index("benchmark")
        cells = [_cell(sub.loc[b]) for b in [*benchmarks, "avg"]]
        tcells = [Latex(_cell(sub.loc[b], tex=True)) for b in [*benchmarks, "avg"]]
        if exploration:
            cells.append(_found_cell(sub.loc["avg"]))
            tcells.append(_tex(_found_cell(sub.loc["avg"])))
        rows.append([label, *cells])
        trows.append([_tex(label), *tcells])
    md = f"**{caption}**\n\n" + markdown_table(["Method", *cols], rows) + "\n"
    tex = latex_table(["Method", *cols], trows, caption=_tex(caption)) + "\n"
    return md, tex


def write_table(eval_root, methods, benchmarks, seeds, out_prefix, title, n_boot=2000, labels=None,
                reference=None, exploration: dict | None = None, aa: tuple[str, str] | None = None,
                base_model_seed: int | None = None) -> list[Path]:
    """A results table (Table 1 or an ablation): one row per method, benchmark columns and Avg;
    with ``reference``, a paired test of every other method against it per benchmark; with
    ``exploration`` ({strategy, success_share, confidence}), each method's exploration success;
    with ``aa`` (the A/A pair's two run ids), a caption sentence on what identical arms differ by;
    with ``base_model_seed``, a caption that says every replicate started from that one base model."""
    df, samples = build_table(eval_root, methods, benchmarks, seeds, n_boot=n_boot, reference=reference)
    if exploration:
        df = add_exploration(df, eval_root, methods, benchmarks, seeds, **exploration)
    labels = labels or [method_label(m) for m in methods]
    md, tex = render(df, methods, benchmarks, seeds, samples, title=title, labels=labels, reference=reference,
                     exploration=exploration, aa_sentence=aa_caption(eval_root, aa, benchmarks, seeds) if aa else "",
                     base_model_seed=base_model_seed)
    df.insert(1, "label", [labels[methods.index(m)] for m in df.method])
    # a prefix, not a file name: "baselines_share0.3" keeps its ".3" (Path.with_suffix would drop it)
    paths = [Path(f"{out_prefix}{ext}") for ext in (".csv", ".md", ".tex", ".html")]
    atomic_write_text(paths[0], df.to_csv(index=False))
    atomic_write_text(paths[1], md)
    atomic_write_text(paths[2], tex)
    write_markdown_page(md, paths[3], title)  # what `snakemake --report` shows (a CSV is a download)
    return paths



def replicate_rows(eval_root, methods, benchmarks, seeds, reference="base", n_boot=2000) -> pd.DataFrame:
    """Per replicate and method: Avg pass@1 and its paired difference from ``reference``
    (the same replicate's base model) with a 95 % interval over that replicate's problems."""
    records = []
    for s in seeds:
        for m in methods:
            avg = float(np.mean([per_problem_matrix(eval_root, m, b, [s])[0].mean() for b in benchmarks]))
            rec = {"seed": s, "method": m, "avg_pass@1": avg}
            if m != reference:
                d, lo, hi = paired_avg_difference(eval_root, m, reference, benchmarks, [s], n_boot)
                rec.update({"reference": reference, "delta": d, "ci_low": lo, "ci_high": hi,
                            "above_reference": bool(lo > 0)})
            records.append(rec)
    return pd.DataFrame.from_records(records)


def render_replicates(df: pd.DataFrame, methods, samples: int | None = None, reference="base",
                      base_model_seed: int | None = None) -> str:
    seeds = sorted(df.seed.unique())
    caption = (f"**Table 1 per replicate: Avg pass@1 (%) of each replicate ({replicate_seed_phrase(base_model_seed)}), "
               f"and in brackets its paired difference from {method_label(reference)} of the same replicate "
               f"with a 95 % interval over problems{f'; {samples} samples per problem' if samples else ''}.**")
    rows = []
    for m in methods:
        sub = df[df.method == m].set_index("seed")
        cells = []
        for s in seeds:
            r = sub.loc[s]
            cell = f"{100 * r['avg_pass@1']:.1f}"
            if m != reference:
                cell += f" ({100 * r.delta:+.1f} [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}])"
            cells.append(cell)
        rows.append([method_label(m), *cells, f"{100 * sub['avg_pass@1'].mean():.1f}"])
    header = ["Method", *(f"seed {s}" for s in seeds), "mean"]
    return f"{caption}\n\n" + markdown_table(header, rows) + "\n"
