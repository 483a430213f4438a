"""How each figure is drawn (matplotlib, Agg): plotted series in, a figure out. One function
per figure (in brackets: its file under ``results/<run>/figures/``; the subcommand that writes
it, in :mod:`nudgerl.reporting.figure_cli`):

- :func:`pass1_curves`: held-out pass@1 against training step, paper Fig. 3 (``training_curves``;
  ``plot-training-curves``);
- :func:`training_reward_curves`: train reward against step and rollout tokens
  (``training_reward.png``; ``plot-curves``);
- :func:`eps_high_scaling` (Fig. 5), :func:`strategy_diversity` (Fig. 1c), :func:`case_study`
  (Fig. 4), :func:`compute_matched`, :func:`regime_map`: each under its own name.

Every legend is the figure's, outside the panels (:func:`legend_outside`), one entry per
method, and names only what is drawn; a method's line is its mean over the replicates and its
shaded band the interval (95% bootstrap) or, for training reward, the range over replicates,
each replicate a thin faint line. Every figure says in its title (or a panel's) how many
replicates it rests on and which seeds (:func:`state_replicates`, from the records it plots);
a method on other seeds than the rest of its figure says so in its legend label.

All but :func:`training_reward_curves` return ``(fig, data)``, ``data`` the plotted series as
plain JSON (labels, x, y, 95% intervals) that :func:`save_figure` writes beside the PNG and PDF;
tests check the series rather than pixels. Colours, markers, labels and sizes:
:mod:`nudgerl.reporting.figure_style`; records read into series: :mod:`nudgerl.reporting.figure_data`.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np

from nudgerl.io import atomic_write_text
from nudgerl.reporting.figure_data import (avg_pass1, curve_points, curve_replicates, eval_samples_per_problem,
                                           replicate_bands, run_rollout_tokens)
from nudgerl.reporting.tables import method_label, samples_phrase
from nudgerl.reporting.figure_style import (BAND_ALPHA, LEGEND_ROW_IN, METHOD_COLORS, ONE_COLUMN, REPLICATE_ALPHA,
                                            TITLE_ROW_IN, TWO_COLUMN, common_seeds, figure_styles, method_style,
                                            pyplot, replicates_phrase, reward_label, seed_sets, styled_pyplot)

def save_figure(fig, data: dict, out_prefix: str | Path) -> list[Path]:
    """``<prefix>.png`` (300 dpi), ``<prefix>.pdf`` and ``<prefix>.json`` (the plotted series)."""
    import matplotlib.pyplot as plt

    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = out.with_name(out.name + f".{ext}")
        tmp = path.with_name(f".{path.name}.tmp.{ext}")
        # no creation date in the PDF: a rerun on the same records writes the same bytes
        fig.savefig(tmp, dpi=300 if ext == "png" else None, metadata={"CreationDate": None} if ext == "pdf" else None)
        tmp.replace(path)
        paths.append(path)
    plt.close(fig)
    js = out.with_name(out.name + ".json")
    atomic_write_text(js, json.dumps(data, indent=2))
    return [*paths, js]



def save_png(fig, out: str | Path, dpi: int = 200) -> Path:
    """The figure as one PNG at ``out`` (written beside it, then moved into place)."""
    plt = pyplot()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp" + out.suffix)
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    tmp.replace(out)
    return out


def legend_outside(fig, handles, labels, where: str = "top", ncol: int = 1, title: str | None = None):
    """One legend for the whole figure, outside the panels (``where``: "top" above them,
    "bottom" under them, "right" beside them; constrained layout makes room), repeated labels
    dropped so each method has one entry."""
    seen: dict[str, object] = {}
    for h, lab in zip(handles, labels):
        if not lab.startswith("_") and lab not in seen:
            seen[lab] = h
    loc = {"top": "outside upper center", "bottom": "outside lower center", "right": "outside right upper"}[where]
    return fig.legend(list(seen.values()), list(seen), loc=loc, ncol=max(1, min(ncol, len(seen))), frameon=False,
                      title=title, title_fontsize=pyplot().rcParams["legend.fontsize"])


def _figsize(base: tuple[float, float], legend_rows: int, title_rows: int = 0) -> tuple[float, float]:
    """``base`` made taller by the rows of a legend above or under the panels and of the
    figure's title, so the plot area keeps its size."""
    return base[0], base[1] + LEGEND_ROW_IN * legend_rows + TITLE_ROW_IN * title_rows


def state_replicates(where, lines: list[str]) -> str:
    """The title that says which replicates a figure rests on (and what else a reader needs
    before reading it), one entry of ``lines`` a line, on ``where``: a figure (its title, above
    panels with the legend under them) or its one panel (the panel's title, under a legend above
    it: constrained layout puts a figure title over such a legend). Returns the text."""
    text = "\n".join(lines)
    if hasattr(where, "suptitle"):
        where.suptitle(text, fontsize=pyplot().rcParams["axes.titlesize"])
    else:
        where.set_title(text)
    return text


def _wrap(text: str, width: int, keep: list[str] = ()) -> list[str]:
    """``text`` in lines of at most ``width`` characters (a one-column panel's title holds about
    48), no line broken inside a phrase of ``keep`` (a method label: "GRPO" / "(N=8)")."""
    for phrase in keep:
        text = text.replace(phrase, phrase.replace(" ", "\u00a0"))  # textwrap breaks at no non-breaking space
    return [line.replace("\u00a0", " ") for line in textwrap.wrap(text, width)]


def _token_axis(ax, tokens_k: list[float]) -> str:
    """A rollout-token x axis (thousands): logarithmic where the tokens span 3x or more, since
    one method at several times the others' tokens (GRPO at large N) squeezes them into a sliver
    of a linear axis. Ticks as plain numbers at 1, 2, 3 and 5 times a power of ten, more where
    the tokens span less than a decade (else it holds two labels), minor ticks unlabelled.
    Returns the scale."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    positive = [t for t in tokens_k if t > 0]
    if not positive or max(positive) < 3 * min(positive):
        return "linear"
    ax.set_xscale("log")
    subs = (1, 2, 3, 5) if max(positive) >= 10 * min(positive) else (1, 1.5, 2, 3, 4, 5, 7)
    ax.xaxis.set_major_locator(LogLocator(subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    return "log"


# ---------------------------------------------------------------- training curves (Fig. 3)


def pass1_curves(curves: dict[str, list[dict]], benchmarks: list[str], n_boot: int = 1000):
    """pass@1 on the held-out ``benchmarks`` (their average) at each evaluated checkpoint
    against training step (the training_curves figure, paper Fig. 3): per method, the mean over
    every replicate its curves hold as a line, with its 95% bootstrap interval (over problems and
    replicates) as a band and, where there are several, each replicate as a thin faint line. The
    title says which replicates (one: "seed 0 only")."""
    plt = styled_pyplot()
    ncol = 2
    styles = figure_styles(list(curves))
    seeds = {m: sorted({r["seed"] for r in rows}) for m, rows in curves.items()}
    replicates, suffix = seed_sets(seeds)
    several = any(len(s) > 1 for s in seeds.values())
    band = ("line: mean over replicates (thin: each one)\nshaded: 95% bootstrap interval over problems and replicates"
            if several else "shaded: 95% bootstrap interval over problems")
    fig, ax = plt.subplots(figsize=_figsize(ONE_COLUMN, 1 + band.count("\n") - (-len(curves) // ncol), title_rows=1),
                           constrained_layout=True)
    data = {"figure": "training_curves", "x": "training step", "y": "pass@1", "benchmarks": benchmarks,
            "series": []}
    for method, rows in curves.items():
        pts = curve_points(rows, benchmarks, n_boot)
        st = styles[method]
        label = st["label"] + suffix.get(method, "")
        # each replicate's own line where there are several: the band is an interval of the mean
        # and does not show how far single runs stray
        reps = curve_replicates(rows, benchmarks) if len(seeds[method]) > 1 else []
        for rep in reps:
            ax.plot(rep["step"], rep["pass@1"], color=st["color"], linewidth=0.5, alpha=REPLICATE_ALPHA,
                    label="_replicate")
        x = [p["step"] for p in pts]
        y = [p["pass@1"] for p in pts]
        ax.plot(x, y, color=st["color"], marker=st["marker"], label=label)
        ax.fill_between(x, [p["ci_low"] for p in pts], [p["ci_high"] for p in pts], color=st["color"],
                        alpha=BAND_ALPHA, linewidth=0)
        data["series"].append({"method": method, "label": label, "x": x, "y": y,
                               "ci_low": [p["ci_low"] for p in pts], "ci_high": [p["ci_high"] for p in pts],
                               "cumulative_rollout_tokens": [p["cumulative_rollout_tokens"] for p in pts],
                               "seeds": seeds[method], "replicates": len(seeds[method]),
                               "replicate_lines": [{"seed": r["seed"], "x": r["step"], "y": r["pass@1"]} for r in reps],
                               "samples_per_problem": pts[0]["samples_per_problem"]})
    names = "+".join(b.upper() for b in benchmarks)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"pass@1 ({names})")
    ax.grid(alpha=0.3)
    data["replicates"] = state_replicates(ax, [f"runs: {replicates}"])
    data["legend"] = band
    legend_outside(fig, *ax.get_legend_handles_labels(), ncol=ncol, title=band)
    return fig, data



# ---------------------------------------------------------------- training reward


def training_reward_curves(runs: list[tuple[str, str, list[dict]]], window: int = 5):
    """Training reward (``window``-step moving average) against optimizer step (left) and
    against cumulative rollout tokens (right), from the ``(method, seed, rows)`` of
    :func:`nudgerl.reporting.figure_data.load_run_metrics` (the training_reward figure): per
    method, its replicates as thin faint lines, their mean as a line and their range (min to
    max) as a band (:func:`nudgerl.reporting.figure_data.replicate_bands`; on the right at the
    replicates' mean tokens). The title says which replicates (one: "seed 0 only"); POPE's label
    says its reward includes its guided prompts. One legend entry per method, under the panels.
    Saved with :func:`save_png`."""
    plt = styled_pyplot()
    bands = replicate_bands(runs, window)
    styles = figure_styles([b["method"] for b in bands])
    replicates, suffix = seed_sets({b["method"]: b["seeds"] for b in bands})
    several = any(len(b["replicates"]) > 1 for b in bands)
    ncol = min(len(bands), 4)
    fig, (ax_r, ax_t) = plt.subplots(1, 2, figsize=_figsize(TWO_COLUMN, 1 - (-len(bands) // ncol), title_rows=1),
                                     constrained_layout=True)
    for b in bands:
        color = styles[b["method"]]["color"]
        for rep in b["replicates"]:
            ax_r.plot(rep["step"], rep["value"], color=color, linewidth=0.5, alpha=REPLICATE_ALPHA, label="_replicate")
            ax_t.plot([t / 1e3 for t in rep["tokens"]], rep["value"], color=color, linewidth=0.5,
                      alpha=REPLICATE_ALPHA, label="_replicate")
        tokens = [t / 1e3 for t in b["tokens"]]
        label = reward_label(b["method"]) + suffix.get(b["method"], "")
        for ax, x in ((ax_r, b["step"]), (ax_t, tokens)):
            if len(b["replicates"]) > 1:  # six methods' bands overlap: lighter than one interval band
                ax.fill_between(x, b["low"], b["high"], color=color, alpha=0.6 * BAND_ALPHA, linewidth=0)
            ax.plot(x, b["mean"], color=color, linewidth=1.6, label=label)
    ax_r.set_xlabel("training step")
    ax_r.set_ylabel(f"train reward ({window}-step avg)")
    ax_t.set_xlabel("cumulative rollout tokens (thousands)")
    for ax in (ax_r, ax_t):
        ax.grid(alpha=0.3)
    state_replicates(fig, [f"runs: {replicates}"])
    legend_outside(fig, *ax_r.get_legend_handles_labels(), where="bottom", ncol=ncol,
                   title="line: mean over replicates (thin lines: each one); band: their range (min to max)"
                   if several else "line: the one replicate's reward (no band)")
    return fig


# ---------------------------------------------------------------- eps_high scaling (Fig. 5)


def eps_high_scaling(eval_root: Path, sweep: list[tuple[float, str]], reference: str, reference_eps: float,
                     benchmarks: list[str], seeds: list[int], n_boot: int = 1000):
    """GRPO's average pass@1 against eps_high, with the reference method (NudgeRL at the
    main eps_high) as a horizontal line and band."""
    plt = styled_pyplot()
    # legend: 2 entries and the counts
    fig, ax = plt.subplots(figsize=_figsize(ONE_COLUMN, 3, title_rows=1), constrained_layout=True)
    pts = sorted((eps, m, *avg_pass1(eval_root, m, benchmarks, seeds, n_boot)) for eps, m in sweep)
    st = method_style(sweep[0][1].split("_")[0])
    x = [p[0] for p in pts]
    y = [p[2] for p in pts]
    ax.errorbar(x, y, yerr=[[p[2] - p[3] for p in pts], [p[4] - p[2] for p in pts]], color=st["color"],
                marker=st["marker"], capsize=2, label=st["label"])
    ref = avg_pass1(eval_root, reference, benchmarks, seeds, n_boot)
    rst = method_style(reference)
    ref_label = f"{rst['label']}, eps_high={reference_eps:g}"
    ax.axhline(ref[0], color=rst["color"], linestyle="--", label=ref_label)
    ax.axhspan(ref[1], ref[2], color=rst["color"], alpha=BAND_ALPHA, linewidth=0)
    ax.set_xlabel("eps_high (clip-higher)")
    ax.set_ylabel("average pass@1")
    ax.grid(alpha=0.3)
    # the sweep's runs may be evaluated at fewer samples than its main value and the reference
    # (eval.samples_per_role): the legend says each point's count
    samples = [eval_samples_per_problem(eval_root, p[1], benchmarks, seeds) for p in pts]
    ref_samples = eval_samples_per_problem(eval_root, reference, benchmarks, seeds)
    phrase = samples_phrase({**{f"eps_high={p[0]:g}": n for p, n in zip(pts, samples)}, ref_label: ref_samples})
    legend_outside(fig, *ax.get_legend_handles_labels(), ncol=1, title=phrase)
    replicates = state_replicates(ax, [f"all runs: {replicates_phrase(seeds)}"])
    data = {"figure": "eps_high_scaling", "x": "eps_high", "y": "average pass@1", "benchmarks": benchmarks,
            "seeds": seeds, "replicates": replicates, "samples": phrase,
            "series": [{"label": st["label"], "methods": [p[1] for p in pts], "x": x, "y": y,
                        "ci_low": [p[3] for p in pts], "ci_high": [p[4] for p in pts],
                        "samples_per_problem": samples}],
            "reference": {"method": reference, "label": ref_label, "eps_high": reference_eps,
                          "y": ref[0], "ci_low": ref[1], "ci_high": ref[2], "samples_per_problem": ref_samples}}
    return fig, data


# ---------------------------------------------------------------- strategy diversity (Fig. 1c)


def diversity_comparison(naive: float, nudged: float) -> tuple[str, str]:
    """How the nudged mean of distinct strategies compares with the naive one ("fewer", "more",
    "as many") and the sentence the figure says it in: the paper's Fig. 1c has nudging raise
    the number, so a run where it lowers it says that it shows the opposite."""
    if nudged < naive:
        return "fewer", (f"Here nudged sampling shows fewer distinct strategies than naive ({nudged:.2f} vs "
                         f"{naive:.2f} on average): the opposite of the paper's Fig. 1c.")
    if nudged > naive:
        return "more", (f"Nudged sampling shows more distinct strategies than naive ({nudged:.2f} vs "
                        f"{naive:.2f} on average), as in the paper's Fig. 1c.")
    return "as many", (f"Nudged and naive sampling show as many distinct strategies ({nudged:.2f} on average); "
                       f"the paper's Fig. 1c has nudging raise it.")


def _diversity_replicate(report: dict) -> str:
    """The one replicate a strategy-diversity report sampled, its base model's seed as
    :mod:`nudgerl.reporting.figure_cli` records it (the sampling seed is in the plotted series)."""
    seed = report.get("base_model_seed")
    return f"1 replicate (base model of seed {seed} only)" if seed is not None else \
        "1 replicate (one base model, its seed not recorded)"


def strategy_diversity(report: dict, n_boot: int = 1000):
    """Distribution over problems of the number of distinct strategies among N naive vs N
    nudged samples; legend carries each condition's mean with a bootstrap interval, the title
    the replicate sampled and how the two means compare (:func:`diversity_comparison`)."""
    from nudgerl.algorithms import bootstrap_ci

    plt = styled_pyplot()
    rows = report["problems"]
    if not rows:
        raise ValueError("strategy-diversity report has no problems")
    means = {key: float(np.mean([r[f"{key}_distinct"] for r in rows])) for key in ("naive", "nudged")}
    direction, sentence = diversity_comparison(means["naive"], means["nudged"])
    title = [_diversity_replicate(report), *_wrap(sentence, 48)]  # a one-column panel's width
    fig, ax = plt.subplots(figsize=_figsize(ONE_COLUMN, 2, title_rows=len(title)), constrained_layout=True)
    top = max(max(r["naive_distinct"], r["nudged_distinct"]) for r in rows)
    xs = list(range(0, top + 1))
    data = {"figure": "strategy_diversity", "x": "distinct strategies per problem", "y": "problems",
            "samples_per_condition": report["samples_per_condition"], "problems": len(rows),
            "base_model_seed": report.get("base_model_seed"), "sampling_seed": report.get("sampling_seed"),
            "nudged_vs_naive": direction, "comparison": sentence, "series": []}
    width = 0.4
    for i, (key, label, color) in enumerate([("naive", "naive sampling", METHOD_COLORS["grpo16"]),
                                             ("nudged", "nudged (pool hints)", METHOD_COLORS["nudgerl"])]):
        counts = [int(sum(r[f"{key}_distinct"] == x for r in rows)) for x in xs]
        mean, lo, hi = bootstrap_ci(np.array([r[f"{key}_distinct"] for r in rows]), n_boot=n_boot)
        ax.bar([x + (i - 0.5) * width for x in xs], counts, width=width, color=color,
               label=f"{label}: mean {mean:.2f} [{lo:.2f}, {hi:.2f}]")
        data["series"].append({"label": label, "x": xs, "y": counts, "mean": mean, "ci_low": lo, "ci_high": hi})
    ax.set_xticks(xs)
    ax.set_xlabel(f"distinct strategies among {report['samples_per_condition']} samples")
    ax.set_ylabel("problems")
    data["title"] = state_replicates(ax, title)
    legend_outside(fig, *ax.get_legend_handles_labels(), ncol=1, title="mean over problems [95% bootstrap interval]")
    ax.grid(alpha=0.3, axis="y")
    return fig, data


# ---------------------------------------------------------------- case study (Fig. 4)


def case_selection(report: dict) -> str:
    """The rule that picked a case study's problem, and the replicate it was picked on, from the
    report's ``selection`` (:mod:`nudgerl.reporting.figure_cli` records it): a picked example is
    no random one, and the figure must say so."""
    sel = report.get("selection") or {}
    seed = sel.get("seed")
    on = f"seed {seed}'s" if seed is not None else "the"
    if sel.get("rule") == "configured":
        return "problem set in the config (report.case_study.problem)"
    if sel.get("rule") == "largest_gain":
        a, b = (method_label(m) for m in sel["methods"])
        kind = "hard problem" if sel.get("hard", True) else "problem"
        return f"picked on {on} evaluation: the {kind} where {b}'s pass@1 most exceeds {a}'s"
    return "how the problem was picked is not recorded"


def case_study(report: dict):
    """One problem: how many of the samples of each trained policy use each strategy, and
    how many of those are correct (dark part of the bar). The title names the problem, the
    replicate whose policies were sampled and the rule that picked it (:func:`case_selection`)."""
    plt = styled_pyplot()
    methods = list(report["methods"])
    seed = (report.get("selection") or {}).get("seed")
    policies = replicates_phrase([seed]) if seed is not None else "replicate not recorded"
    picked_by = [method_label(m) for m in (report.get("selection") or {}).get("methods", [])]
    title = [f"problem {report['problem']['id']}; policies: {policies}",
             *_wrap(case_selection(report), 48, keep=picked_by)]
    fig, ax = plt.subplots(figsize=_figsize(ONE_COLUMN, len(methods) + 1, title_rows=len(title) - 1),
                           constrained_layout=True)
    strategies = sorted({s for m in methods for s in report["methods"][m]["strategy_counts"]})
    width = 0.8 / max(len(methods), 1)
    styles = figure_styles(methods)
    data = {"figure": "case_study", "problem": report["problem"], "samples": report["samples"],
            "selection": report.get("selection"), "x": "strategy", "y": "samples", "series": []}
    for i, m in enumerate(methods):
        st = styles[m]
        rec = report["methods"][m]
        used = [rec["strategy_counts"].get(s, 0) for s in strategies]
        ok = [rec["correct_by_strategy"].get(s, 0) for s in strategies]
        xs = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(strategies))]
        ax.bar(xs, used, width=width, facecolor=st["color"], alpha=0.3, edgecolor=st["color"], linewidth=0.8)
        ax.bar(xs, ok, width=width, color=st["color"],
               label=f"{st['label']}: {rec['correct']}/{report['samples']} correct")
        data["series"].append({"method": m, "label": st["label"], "x": strategies, "y": used, "correct": ok,
                               "total_correct": rec["correct"]})
    ax.set_ylim(0, 1.05 * report["samples"])
    ax.set_xticks(range(len(strategies)))
    ax.set_xticklabels([s.replace("_", "\n") for s in strategies])
    ax.set_ylabel(f"samples (of {report['samples']})")
    data["title"] = state_replicates(ax, title)
    legend_outside(fig, *ax.get_legend_handles_labels(), ncol=1, title="bar: samples using it; solid: correct ones")
    ax.grid(alpha=0.3, axis="y")
    return fig, data


# ---------------------------------------------------------------- compute-matched


def _point(ax, eval_root, runs_root, method, seeds, benchmarks, n_boot, st, label, panel) -> dict:
    """One run's final average pass@1 (mean over ``seeds``, 95% interval) at the rollout tokens
    its training generated, drawn on ``ax``; returns its series."""
    tokens = run_rollout_tokens(runs_root, method, seeds)
    mean, lo, hi = avg_pass1(eval_root, method, benchmarks, seeds, n_boot)
    ax.errorbar([tokens / 1e3], [mean], yerr=[[mean - lo], [hi - mean]], color=st["color"], marker=st["marker"],
                markerfacecolor="white" if st["hollow"] else st["color"], capsize=2, linestyle="none",
                markersize=5 if st["hollow"] else None, label=label)
    return {"method": method, "label": label, "panel": panel, "x": [tokens], "y": [mean], "ci_low": [lo],
            "ci_high": [hi], "seeds": list(seeds), "replicates": replicates_phrase(seeds), "marker": st["marker"],
            "hollow": st["hollow"]}


def _base_line(ax, eval_root, seeds, benchmarks, n_boot, st, label) -> dict:
    """The untrained base model as a dashed level with its interval: it generated no rollout
    tokens, so on a log token axis it has no place as a point."""
    mean, lo, hi = avg_pass1(eval_root, "base", benchmarks, seeds, n_boot)
    ax.axhline(mean, color=st["color"], linestyle="--", linewidth=1.0, label=label)
    ax.axhspan(lo, hi, color=st["color"], alpha=BAND_ALPHA, linewidth=0)
    return {"method": "base", "label": label, "panel": "methods", "drawn": "dashed line", "x": [0.0], "y": [mean],
            "ci_low": [lo], "ci_high": [hi], "seeds": list(seeds), "replicates": replicates_phrase(seeds)}


def _variant_references(variants: list[str], mains: list[str], run_seeds: dict, seeds: tuple) -> list[str]:
    """The runs the variants vary (``nudgerl8`` of ``nudgerl8_pdrop0``, ``grpo8`` of
    ``grpo8_eps0.28``) that have the variants' replicates ``seeds``: drawn beside them on those
    replicates, so that panel compares like with like."""
    mains_of = dict.fromkeys(m.split("_")[0] for m in variants)
    return [m for m in mains_of if m in mains and set(seeds) <= set(run_seeds[m])]


def compute_matched(eval_root: Path, runs_root: Path, methods: list[str], benchmarks: list[str],
                    seeds: list[int] | dict[str, list[int]], curves: dict[str, list[dict]] | None = None,
                    curve_benchmarks: list[str] | None = None, n_boot: int = 1000):
    """Every method's final average pass@1 against the rollout tokens its training generated,
    and (``curves``) the checkpoint curves against cumulative rollout tokens. ``seeds`` is one
    list for every method, or each method's replicates (ablations run on fewer).

    Panels, left to right: the methods (the base model a dashed level), each a mean over its
    replicates; the variants (NudgeRL ablations, eps_high runs; hollow, one marker each), when
    given, beside the runs they vary recomputed on the variants' replicates, since they run on
    fewer; the curves. Each panel's title says which replicates it rests on and a method on
    others says so in its legend label. A token axis spanning 3x or more is logarithmic."""
    run_seeds = seeds if isinstance(seeds, dict) else {m: seeds for m in methods}
    plt = styled_pyplot()
    styles = figure_styles([*methods, *(curves or {})])
    variants = [m for m in methods if styles[m]["hollow"]]
    mains = [m for m in methods if m not in variants]
    main_replicates, main_suffix = seed_sets({m: run_seeds[m] for m in mains})
    variant_replicates, variant_suffix = seed_sets({m: run_seeds[m] for m in variants})
    common_variant_seeds = common_seeds({m: run_seeds[m] for m in variants})
    references = _variant_references(variants, mains, run_seeds, common_variant_seeds)
    extra = [m for m in (curves or {}) if m not in methods]
    panels = 1 + bool(variants) + bool(curves)
    width, height = TWO_COLUMN if panels > 1 else ONE_COLUMN
    ncol = 4 if panels > 1 else 2  # a one-column figure holds two labels a row (the baselines' have ten)
    legend_title = ["markers: mean with 95% bootstrap interval"]
    if "base" in mains:
        legend_title.append("dashed: base model, band its interval")
    if variants:
        legend_title.append("hollow: ablation / eps_high run")
    legend_title = ("; " if panels > 1 else "\n").join(legend_title)
    rows_of_legend = -(-(len(methods) + len(extra)) // ncol) + 1 + legend_title.count("\n")
    # the panels' titles (what, which replicates) take two lines where there are several
    size = _figsize((width, height), rows_of_legend, title_rows=2 if panels > 1 else 1)
    fig, axes = plt.subplots(1, panels, figsize=size, constrained_layout=True, squeeze=False)
    axes = list(axes[0])
    data = {"figure": "compute_matched", "x": "rollout tokens", "y": "average pass@1", "benchmarks": benchmarks,
            "seeds": seeds, "replicates": main_replicates, "series": [], "variant_references": [], "curves": [],
            "panels": [], "legend": legend_title}

    ax = axes.pop(0)
    for m in mains:
        label = styles[m]["label"] + main_suffix.get(m, "")
        if m == "base":
            data["series"].append(_base_line(ax, eval_root, run_seeds[m], benchmarks, n_boot, styles[m], label))
        else:
            data["series"].append(_point(ax, eval_root, runs_root, m, run_seeds[m], benchmarks, n_boot, styles[m],
                                         label, "methods"))
    scale = _token_axis(ax, [s["x"][0] / 1e3 for s in data["series"] if s["method"] != "base"])
    # three panels side by side hold about 30 characters of label each
    token_label = "rollout tokens in training (thousands)" if panels == 1 else "training rollout tokens (k)"
    ax.set_xlabel(token_label)
    ax.set_ylabel("average pass@1 (all benchmarks)")
    ax.set_title(f"methods\n{main_replicates}" if panels > 1 else f"runs: {main_replicates}")
    data["panels"].append({"panel": "methods", "title": ax.get_title(), "x_scale": scale})
    handles, labels = ax.get_legend_handles_labels()

    if variants:
        ax = axes.pop(0)
        for m in references:  # filled, as in the first panel, but on the variants' replicates
            data["variant_references"].append(_point(ax, eval_root, runs_root, m, list(common_variant_seeds),
                                                     benchmarks, n_boot, styles[m], styles[m]["label"], "variants"))
        for m in variants:
            data["series"].append(_point(ax, eval_root, runs_root, m, run_seeds[m], benchmarks, n_boot, styles[m],
                                         styles[m]["label"] + variant_suffix.get(m, ""), "variants"))
        drawn = [s for s in [*data["variant_references"], *data["series"]] if s["panel"] == "variants"]
        scale = _token_axis(ax, [s["x"][0] / 1e3 for s in drawn])
        ax.set_xlabel(token_label)
        kinds = [k for k, here in (("ablations", any("_eps" not in m for m in variants)),
                                   ("eps_high runs", any("_eps" in m for m in variants))) if here]
        ax.set_title(f"{', '.join(kinds)}\n{variant_replicates}")
        data["panels"].append({"panel": "variants", "title": ax.get_title(), "x_scale": scale})
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab

    if curves:
        ax = axes.pop(0)
        curve_seeds = {m: sorted({r["seed"] for r in rows}) for m, rows in curves.items()}
        curve_replicates_phrase, curve_suffix = seed_sets(curve_seeds)
        for m, rows in curves.items():
            st = styles[m]
            pts = curve_points(rows, curve_benchmarks, n_boot)
            x = [(p["cumulative_rollout_tokens"] or 0.0) / 1e3 for p in pts]
            y = [p["pass@1"] for p in pts]
            label = st["label"] + curve_suffix.get(m, "")
            ax.plot(x, y, color=st["color"], marker=st["marker"], label=label)
            ax.fill_between(x, [p["ci_low"] for p in pts], [p["ci_high"] for p in pts], color=st["color"],
                            alpha=BAND_ALPHA, linewidth=0)
            data["curves"].append({"method": m, "label": label, "x": [p["cumulative_rollout_tokens"] for p in pts],
                                   "y": y, "ci_low": [p["ci_low"] for p in pts], "ci_high": [p["ci_high"] for p in pts],
                                   "seeds": curve_seeds[m]})
        ax.set_xlabel("cumulative rollout tokens (k)")
        ax.set_ylabel(f"pass@1 ({'+'.join(b.upper() for b in curve_benchmarks)})")
        ax.set_title(f"checkpoint curves\n{curve_replicates_phrase}")
        data["panels"].append({"panel": "curves", "title": ax.get_title(), "x_scale": "linear"})
        # the curves' methods share the points' colours and markers: their one legend entry
        # serves both panels, and only a method without a point adds one
        h2, l2 = ax.get_legend_handles_labels()
        extra_labels = {d["label"] for d in data["curves"] if d["method"] in extra}
        handles += [h for h, lab in zip(h2, l2) if lab in extra_labels]
        labels += [lab for lab in l2 if lab in extra_labels]
    for a in fig.axes:
        a.grid(alpha=0.3)
    # under the panels, not on them: with the ablation runs the points fill the plot area
    legend_outside(fig, handles, labels, where="bottom", ncol=ncol, title=legend_title)
    return fig, data


# ---------------------------------------------------------------- regime map


def regime_map(runs, cells, reached: float, samples: int):
    """Left: final hard pass@1 against the measured share (every base model a point, cell
    means with intervals). Right: rollout tokens to first reach ``reached``. ``runs`` and
    ``cells``: :func:`nudgerl.reporting.regime_map.run_table` and ``cell_table``."""
    plt = styled_pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=_figsize(TWO_COLUMN, 1, title_rows=1), constrained_layout=True)
    styles, replicates, suffix = _runs_styles(runs)
    data = {"figure": "regime_map", "x": "measured unhinted share of the always-right strategy",
            "y": ["final hint-free pass@1 on hard problems", f"rollout tokens to reach pass@1 {reached:g}"],
            "samples_per_problem": samples, "replicates": int(runs.seed.nunique()),
            "seeds": sorted(int(s) for s in runs.seed.unique()), "series": []}
    missed = False
    for m in runs.method.unique():
        st = {**styles[m], "label": styles[m]["label"] + suffix.get(m, "")}
        sub = runs[runs.method == m]
        per_share = sub.groupby("share_set").share_measured.mean()
        cm = cells[(cells.method == m) & (cells.kind == "pass@1")].set_index("share_set").loc[per_share.index]
        ax.scatter(sub.share_measured, sub["final_hard_pass@1"], color=st["color"], marker=st["marker"], s=10,
                   alpha=0.45, linewidths=0)
        ax.errorbar(per_share.values, cm["mean"].values, yerr=[cm["mean"] - cm.ci_low, cm.ci_high - cm["mean"]],
                    color=st["color"], marker=st["marker"], capsize=2, label=st["label"])
        hit = sub[sub.reached]
        ax2.scatter(hit.share_measured, hit.tokens_to_reach / 1e3, color=st["color"], marker=st["marker"], s=14,
                    label=st["label"])
        miss = sub[~sub.reached]
        if len(miss):
            missed = True
            ax2.scatter(miss.share_measured, miss.rollout_tokens / 1e3, facecolors="none", edgecolors=st["color"],
                        marker=st["marker"], s=14)
        data["series"].append({
            "method": m, "label": st["label"],
            "runs": sub[["share_set", "share_measured", "seed", "final_hard_pass@1", "tokens_to_reach",
                         "rollout_tokens"]].to_dict(orient="records"),
            "cells": {"x": per_share.values.tolist(), "y": cm["mean"].tolist(), "ci_low": cm.ci_low.tolist(),
                      "ci_high": cm.ci_high.tolist()}})
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for a in (ax, ax2):
        a.set_xscale("log")
        # labels at 1-2-5 in percent, minor ticks unlabelled: matplotlib's default labels every
        # minor tick of a map spanning about one decade, and they run into each other
        a.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        a.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:g} %"))
        a.xaxis.set_minor_formatter(NullFormatter())
        a.set_xlabel("unhinted share of the right strategy (measured)")
        a.grid(alpha=0.3)
    ax.set_ylabel("final hint-free pass@1, hard problems")
    ax.set_ylim(-0.02, 1.02)
    ax2.set_yscale("log")
    ax2.set_ylabel(f"rollout tokens to reach pass@1 {reached:g} (k)")
    if missed:  # named only where a run missed it: the legend and titles name only what is drawn
        ax2.set_title("hollow: not reached (total tokens shown)")
    data["title"] = state_replicates(fig, [f"every cell: {replicates}"])
    handles, labels = ax.get_legend_handles_labels()
    legend_outside(fig, handles, labels, where="bottom", ncol=len(labels),
                   title="small: each run; large: cell mean with 95% bootstrap interval")
    return fig, data


def _runs_styles(runs) -> tuple[dict[str, dict], str, dict[str, str]]:
    """A regime-map run table's methods: their styles in one figure (:func:`figure_styles`), the
    replicates most of them rest on, and the legend-label suffix of each on others."""
    methods = list(runs.method.unique())
    replicates, suffix = seed_sets({m: runs[runs.method == m].seed.unique().tolist() for m in methods})
    return figure_styles(methods), replicates, suffix


def regime_map_baselines(runs, cells):
    """One panel per share set: each method's final hard pass@1 (cell mean with interval; small:
    each run) against the rollout tokens its training generated. ``runs`` / ``cells``:
    :func:`nudgerl.reporting.regime_map.run_table` and ``cell_table`` of the baselines' sub-grid."""
    plt = styled_pyplot()
    shares = sorted(runs.share_set.unique())
    methods = list(runs.method.unique())
    width, height = TWO_COLUMN
    rows_of_legend = -(-len(methods) // 4)
    fig, axes = plt.subplots(1, len(shares), figsize=_figsize((width, height), rows_of_legend + 1, title_rows=1),
                             constrained_layout=True, squeeze=False, sharey=True)
    styles, replicates, suffix = _runs_styles(runs)
    data = {"figure": "regime_map_baselines", "x": "rollout tokens generated in training",
            "y": "final hint-free pass@1 on hard problems", "replicates": int(runs.seed.nunique()),
            "seeds": sorted(int(s) for s in runs.seed.unique()), "panels": []}
    for ax, share in zip(axes[0], shares):
        panel = {"share_set": float(share), "series": []}
        sub = runs[runs.share_set == share]
        for m in methods:
            st = {**styles[m], "label": styles[m]["label"] + suffix.get(m, "")}
            r = sub[sub.method == m]
            c = cells[(cells.share_set == share) & (cells.method == m) & (cells.kind == "pass@1")].iloc[0]
            x = r.rollout_tokens.mean() / 1e3
            ax.scatter(r.rollout_tokens / 1e3, r["final_hard_pass@1"], color=st["color"], marker=st["marker"], s=10,
                       alpha=0.45, linewidths=0)
            ax.errorbar([x], [c["mean"]], yerr=[[c["mean"] - c.ci_low], [c.ci_high - c["mean"]]], color=st["color"],
                        marker=st["marker"], capsize=2, linestyle="none", label=st["label"])
            panel["series"].append({"method": m, "label": st["label"], "x": float(r.rollout_tokens.mean()),
                                    "y": float(c["mean"]), "ci_low": float(c.ci_low), "ci_high": float(c.ci_high),
                                    "runs": r[["seed", "final_hard_pass@1", "rollout_tokens"]].to_dict(orient="records")})
        ax.set_title(f"share set {100 * share:g} %")
        ax.set_xlabel("rollout tokens (thousands)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        # GRPO at large N spends several times the others' tokens: on a linear axis they crowd
        panel["x_scale"] = _token_axis(ax, (sub.rollout_tokens / 1e3).tolist())
        data["panels"].append(panel)
    axes[0][0].set_ylabel("final hint-free pass@1, hard problems")
    data["title"] = state_replicates(fig, [f"every cell: {replicates}"])
    handles, labels = axes[0][0].get_legend_handles_labels()
    legend_outside(fig, handles, labels, where="bottom", ncol=4,
                   title="large: mean with 95% bootstrap interval; small: each run")
    return fig, data


def regime_map_accuracy(runs, cells, checkpoints):
    """The map's second axis. Left: final hard pass@1 against the measured accuracy after an
    unhinted choice of the always-right strategy (every base model a point, cell means with
    intervals). Right: mean hard pass@1 over training steps, per method and accuracy set.
    ``runs`` / ``cells`` / ``checkpoints``: :mod:`nudgerl.reporting.regime_map`'s ``run_table``,
    ``cell_table`` and ``checkpoint_table`` of the axis."""
    plt = styled_pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=_figsize(TWO_COLUMN, 1, title_rows=1), constrained_layout=True)
    accuracies = sorted(runs.accuracy_set.unique(), reverse=True)
    dashes = ["-", "--", ":", "-."]
    styles, replicates, suffix = _runs_styles(runs)
    data = {"figure": "regime_map_accuracy",
            "x": ["measured accuracy after an unhinted choice of the always-right strategy", "training step"],
            "y": "hint-free pass@1 on hard problems", "replicates": int(runs.seed.nunique()),
            "seeds": sorted(int(s) for s in runs.seed.unique()), "series": []}
    for m in runs.method.unique():
        st = {**styles[m], "label": styles[m]["label"] + suffix.get(m, "")}
        sub = runs[runs.method == m]
        per_cell = sub.groupby("accuracy_set").accuracy_measured.mean().loc[accuracies]
        cm = cells[(cells.method == m) & (cells.kind == "pass@1")].set_index("accuracy_set").loc[accuracies]
        ax.scatter(sub.accuracy_measured, sub["final_hard_pass@1"], color=st["color"], marker=st["marker"], s=10,
                   alpha=0.45, linewidths=0)
        ax.errorbar(per_cell.values, cm["mean"].values, yerr=[cm["mean"] - cm.ci_low, cm.ci_high - cm["mean"]],
                    color=st["color"], marker=st["marker"], capsize=2, label=st["label"])
        curves = {}
        for i, a in enumerate(accuracies):
            means = checkpoints[(checkpoints.method == m) & (checkpoints.accuracy_set == a)].groupby("step")[
                "hard_pass@1"].mean()
            ax2.plot(means.index, means.values, color=st["color"], linestyle=dashes[i % len(dashes)],
                     marker=st["marker"], markersize=3)
            curves[f"{a:g}"] = {"step": means.index.tolist(), "y": means.values.tolist()}
        data["series"].append({
            "method": m, "label": st["label"],
            "runs": sub[["accuracy_set", "accuracy_measured", "seed", "final_hard_pass@1",
                         "rollout_tokens"]].to_dict(orient="records"),
            "cells": {"x": per_cell.values.tolist(), "y": cm["mean"].tolist(), "ci_low": cm.ci_low.tolist(),
                      "ci_high": cm.ci_high.tolist()},
            "checkpoints": curves})
    ax.set_xlabel("measured accuracy after an unhinted choice")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylabel("final hint-free pass@1, hard problems")
    ax2.set_xlabel("training step")
    ax2.set_title("accuracy set: " + ", ".join(f"{a:g} ({dashes[i % len(dashes)]})" for i, a in enumerate(accuracies)))
    for a in (ax, ax2):
        a.set_ylim(-0.02, 1.02)
        a.grid(alpha=0.3)
    data["title"] = state_replicates(fig, [f"every cell: {replicates}"])
    handles, labels = ax.get_legend_handles_labels()
    legend_outside(fig, handles, labels, where="bottom", ncol=len(labels),
                   title="small: each run; large: cell mean with 95% bootstrap interval")
    return fig, data
