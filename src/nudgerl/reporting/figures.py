"""How each figure is drawn (matplotlib, Agg): plotted series in, a figure out. One function
per figure (in brackets: its file under ``results/<run>/figures/``; the subcommand that writes
it, in :mod:`nudgerl.reporting.figure_cli`):

- :func:`pass1_curves`: held-out pass@1 against training step, paper Fig. 3 (``training_curves``;
  ``plot-training-curves``);
- :func:`training_reward_curves`: train reward against step and rollout tokens
  (``training_reward.png``; ``plot-curves``);
- :func:`eps_high_scaling` (Fig. 5), :func:`strategy_diversity` (Fig. 1c), :func:`case_study`
  (Fig. 4), :func:`compute_matched`, :func:`regime_map`: each under its own name.

All but :func:`training_reward_curves` return ``(fig, data)``, ``data`` the plotted series as
plain JSON (labels, x, y, 95% intervals) that :func:`save_figure` writes beside the PNG and PDF;
tests check the series rather than pixels. Colours, markers, labels and sizes:
:mod:`nudgerl.reporting.figure_style`; records read into series: :mod:`nudgerl.reporting.figure_data`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nudgerl.io import atomic_write_text
from nudgerl.reporting.figure_data import avg_pass1, curve_points, moving_average, run_rollout_tokens
from nudgerl.reporting.figure_style import (METHOD_COLORS, ONE_COLUMN, TWO_COLUMN, method_style, pyplot,
                                            styled_pyplot)

def save_figure(fig, data: dict, out_prefix: str | Path) -> list[Path]:
    """``<prefix>.png`` (300 dpi), ``<prefix>.pdf`` and ``<prefix>.json`` (the plotted series)."""
    import matplotlib.pyplot as plt

    out = Path(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = out.with_name(out.name + f".{ext}")
        tmp = path.with_name(f".{path.name}.tmp.{ext}")
        fig.savefig(tmp, dpi=300 if ext == "png" else None)
        tmp.replace(path)
        paths.append(path)
    plt.close(fig)
    js = out.with_name(out.name + ".json")
    atomic_write_text(js, json.dumps(data, indent=2))
    return [*paths, js]



def save_png(fig, out: str | Path, dpi: int = 150) -> Path:
    """The figure as one PNG at ``out`` (written beside it, then moved into place)."""
    plt = pyplot()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp" + out.suffix)
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    tmp.replace(out)
    return out


# ---------------------------------------------------------------- training curves (Fig. 3)


def pass1_curves(curves: dict[str, list[dict]], benchmarks: list[str], n_boot: int = 1000):
    """pass@1 on the held-out ``benchmarks`` (their average) at each evaluated checkpoint
    against training step, one line per method (the training_curves figure, paper Fig. 3)."""
    plt = styled_pyplot()
    fig, ax = plt.subplots(figsize=ONE_COLUMN, constrained_layout=True)
    data = {"figure": "training_curves", "x": "training step", "y": "pass@1", "benchmarks": benchmarks,
            "series": []}
    for method, rows in curves.items():
        pts = curve_points(rows, benchmarks, n_boot)
        st = method_style(method)
        x = [p["step"] for p in pts]
        y = [p["pass@1"] for p in pts]
        ax.plot(x, y, color=st["color"], marker=st["marker"], label=st["label"])
        ax.fill_between(x, [p["ci_low"] for p in pts], [p["ci_high"] for p in pts], color=st["color"], alpha=0.15,
                        linewidth=0)
        data["series"].append({"method": method, "label": st["label"], "x": x, "y": y,
                               "ci_low": [p["ci_low"] for p in pts], "ci_high": [p["ci_high"] for p in pts],
                               "cumulative_rollout_tokens": [p["cumulative_rollout_tokens"] for p in pts],
                               "seeds": pts[0]["seeds"], "samples_per_problem": pts[0]["samples_per_problem"]})
    names = "+".join(b.upper() for b in benchmarks)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"pass@1 ({names})")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    return fig, data



# ---------------------------------------------------------------- training reward


def training_reward_curves(runs: list[tuple[str, str, list[dict]]], window: int = 5):
    """Training reward (``window``-step moving average) of each run against optimizer step
    (left) and against cumulative rollout tokens (right), one line per ``(method, seed, rows)``
    of :func:`nudgerl.reporting.figure_data.load_run_metrics` (the training_reward figure).
    matplotlib's default fonts, not the paper's; saved with :func:`save_png`."""
    plt = pyplot()
    fig, (ax_r, ax_t) = plt.subplots(1, 2, figsize=TWO_COLUMN, constrained_layout=True)
    for method, seed, rows in runs:
        steps = [r["step"] for r in rows]
        st = method_style(method)
        color, label = st["color"], f"{st['label']} {seed}"
        ax_r.plot(steps, moving_average([r["reward_mean"] for r in rows], window), color=color, label=label)
        ax_t.plot([r["cumulative_rollout_tokens"] / 1e3 for r in rows],
                  moving_average([r["reward_mean"] for r in rows], window), color=color, label=label)
    ax_r.set_xlabel("training step")
    ax_r.set_ylabel(f"train reward ({window}-step avg)")
    ax_t.set_xlabel("cumulative rollout tokens (thousands)")
    ax_r.legend(fontsize=7, frameon=False)
    for ax in (ax_r, ax_t):
        ax.grid(alpha=0.3)
    return fig


# ---------------------------------------------------------------- eps_high scaling (Fig. 5)


def eps_high_scaling(eval_root: Path, sweep: list[tuple[float, str]], reference: str, reference_eps: float,
                     benchmarks: list[str], seeds: list[int], n_boot: int = 1000):
    """GRPO's average pass@1 against eps_high, with the reference method (NudgeRL at the
    main eps_high) as a horizontal line and band."""
    plt = styled_pyplot()
    fig, ax = plt.subplots(figsize=ONE_COLUMN, constrained_layout=True)
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
    ax.axhspan(ref[1], ref[2], color=rst["color"], alpha=0.12, linewidth=0)
    ax.set_xlabel("eps_high (clip-higher)")
    ax.set_ylabel("average pass@1")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    data = {"figure": "eps_high_scaling", "x": "eps_high", "y": "average pass@1", "benchmarks": benchmarks,
            "seeds": seeds,
            "series": [{"label": st["label"], "methods": [p[1] for p in pts], "x": x, "y": y,
                        "ci_low": [p[3] for p in pts], "ci_high": [p[4] for p in pts]}],
            "reference": {"method": reference, "label": ref_label, "eps_high": reference_eps,
                          "y": ref[0], "ci_low": ref[1], "ci_high": ref[2]}}
    return fig, data


# ---------------------------------------------------------------- strategy diversity (Fig. 1c)


def strategy_diversity(report: dict, n_boot: int = 1000):
    """Distribution over problems of the number of distinct strategies among N naive vs N
    nudged samples; legend carries each condition's mean with a bootstrap interval."""
    from nudgerl.algorithms import bootstrap_ci

    plt = styled_pyplot()
    fig, ax = plt.subplots(figsize=ONE_COLUMN, constrained_layout=True)
    rows = report["problems"]
    if not rows:
        raise ValueError("strategy-diversity report has no problems")
    top = max(max(r["naive_distinct"], r["nudged_distinct"]) for r in rows)
    xs = list(range(0, top + 1))
    data = {"figure": "strategy_diversity", "x": "distinct strategies per problem", "y": "problems",
            "samples_per_condition": report["samples_per_condition"], "problems": len(rows), "series": []}
    width = 0.4
    for i, (key, label, color) in enumerate([("naive", "naive sampling", METHOD_COLORS["grpo16"]),
                                             ("nudged", "nudged (pool hints)", METHOD_COLORS["nudgerl"])]):
        counts = [int(sum(r[f"{key}_distinct"] == x for r in rows)) for x in xs]
        mean, lo, hi = bootstrap_ci(np.array([r[f"{key}_distinct"] for r in rows]), n_boot=n_boot)
        ax.bar([x + (i - 0.5) * width for x in xs], counts, width=width, color=color,
               label=f"{label}: mean {mean:.2f} [{lo:.2f}, {hi:.2f}]")
        data["series"].append({"label": label, "x": xs, "y": counts, "mean": mean, "ci_low": lo, "ci_high": hi})
    ax.set_ylim(0, 1.35 * max(max(sr["y"]) for sr in data["series"]) + 0.5)  # room for the legend
    ax.set_xticks(xs)
    ax.set_xlabel(f"distinct strategies among {report['samples_per_condition']} samples")
    ax.set_ylabel("problems")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3, axis="y")
    return fig, data


# ---------------------------------------------------------------- case study (Fig. 4)


def case_study(report: dict):
    """One problem: how many of the samples of each trained policy use each strategy, and
    how many of those are correct (dark part of the bar)."""
    plt = styled_pyplot()
    fig, ax = plt.subplots(figsize=ONE_COLUMN, constrained_layout=True)
    methods = list(report["methods"])
    strategies = sorted({s for m in methods for s in report["methods"][m]["strategy_counts"]})
    width = 0.8 / max(len(methods), 1)
    data = {"figure": "case_study", "problem": report["problem"], "samples": report["samples"],
            "x": "strategy", "y": "samples", "series": []}
    for i, m in enumerate(methods):
        st = method_style(m)
        rec = report["methods"][m]
        used = [rec["strategy_counts"].get(s, 0) for s in strategies]
        ok = [rec["correct_by_strategy"].get(s, 0) for s in strategies]
        xs = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(strategies))]
        ax.bar(xs, used, width=width, color=st["color"], alpha=0.35, edgecolor=st["color"])
        ax.bar(xs, ok, width=width, color=st["color"],
               label=f"{st['label']}: {rec['correct']}/{report['samples']} correct")
        data["series"].append({"method": m, "label": st["label"], "x": strategies, "y": used, "correct": ok,
                               "total_correct": rec["correct"]})
    ax.set_ylim(0, 1.3 * report["samples"])  # room for the legend
    ax.set_xticks(range(len(strategies)))
    ax.set_xticklabels([s.replace("_", "\n") for s in strategies])
    ax.set_ylabel(f"samples (of {report['samples']})")
    ax.set_title(f"problem {report['problem']['id']}: light = sampled, dark = correct")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3, axis="y")
    return fig, data


# ---------------------------------------------------------------- compute-matched


def compute_matched(eval_root: Path, runs_root: Path, methods: list[str], benchmarks: list[str],
                    seeds: list[int] | dict[str, list[int]], curves: dict[str, list[dict]] | None = None,
                    curve_benchmarks: list[str] | None = None, n_boot: int = 1000):
    """Left: every method's final average pass@1 against the rollout tokens its training
    generated. Right: the checkpoint curves against cumulative rollout tokens. ``seeds`` is
    one list for every method, or each method's replicates (ablations run on fewer)."""
    run_seeds = seeds if isinstance(seeds, dict) else {m: seeds for m in methods}
    plt = styled_pyplot()
    panels = 2 if curves else 1
    width, height = TWO_COLUMN if panels == 2 else ONE_COLUMN
    rows_of_legend = -(-len(methods) // 5)
    fig, axes = plt.subplots(1, panels, figsize=(width, height + 0.15 * rows_of_legend), constrained_layout=True,
                             squeeze=False)
    ax = axes[0][0]
    data = {"figure": "compute_matched", "x": "rollout tokens", "y": "average pass@1", "benchmarks": benchmarks,
            "seeds": seeds, "series": [], "curves": []}
    for m in methods:
        st = method_style(m)
        tokens = run_rollout_tokens(runs_root, m, run_seeds[m])
        mean, lo, hi = avg_pass1(eval_root, m, benchmarks, run_seeds[m], n_boot)
        ax.errorbar([tokens / 1e3], [mean], yerr=[[mean - lo], [hi - mean]], color=st["color"], marker=st["marker"],
                    markerfacecolor="white" if st["hollow"] else st["color"], capsize=2, linestyle="none",
                    label=st["label"])
        data["series"].append({"method": m, "label": st["label"], "x": [tokens], "y": [mean], "ci_low": [lo],
                               "ci_high": [hi], "seeds": run_seeds[m]})
    ax.set_xlabel("rollout tokens generated in training (thousands)")
    ax.set_ylabel("average pass@1 (all benchmarks)")
    ax.grid(alpha=0.3)
    # under the panels, not on them: with the ablation runs the points fill the plot area
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", frameon=False, fontsize=6,
               ncol=min(len(methods), 5))
    if curves:
        ax2 = axes[0][1]
        for m, rows in curves.items():
            st = method_style(m)
            pts = curve_points(rows, curve_benchmarks, n_boot)
            x = [(p["cumulative_rollout_tokens"] or 0.0) / 1e3 for p in pts]
            y = [p["pass@1"] for p in pts]
            ax2.plot(x, y, color=st["color"], marker=st["marker"], label=st["label"])
            ax2.fill_between(x, [p["ci_low"] for p in pts], [p["ci_high"] for p in pts], color=st["color"],
                             alpha=0.15, linewidth=0)
            data["curves"].append({"method": m, "label": st["label"], "x": [p["cumulative_rollout_tokens"] for p in pts],
                                   "y": y, "ci_low": [p["ci_low"] for p in pts], "ci_high": [p["ci_high"] for p in pts]})
        ax2.set_xlabel("cumulative rollout tokens (thousands)")
        ax2.set_ylabel(f"pass@1 ({'+'.join(b.upper() for b in curve_benchmarks)})")
        ax2.grid(alpha=0.3)
        ax2.legend(frameon=False)
    return fig, data


# ---------------------------------------------------------------- regime map


def regime_map(runs, cells, reached: float, samples: int):
    """Left: final hard pass@1 against the measured share (every base model a point, cell
    means with intervals). Right: rollout tokens to first reach ``reached``. ``runs`` and
    ``cells``: :func:`nudgerl.reporting.regime_map.run_table` and ``cell_table``."""
    plt = styled_pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=TWO_COLUMN, constrained_layout=True)
    data = {"figure": "regime_map", "x": "measured unhinted share of the always-right strategy",
            "y": ["final hint-free pass@1 on hard problems", f"rollout tokens to reach pass@1 {reached:g}"],
            "samples_per_problem": samples, "replicates": int(runs.seed.nunique()), "series": []}
    for m in runs.method.unique():
        st = method_style(m)
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
            ax2.scatter(miss.share_measured, miss.rollout_tokens / 1e3, facecolors="none", edgecolors=st["color"],
                        marker=st["marker"], s=14)
        data["series"].append({
            "method": m, "label": st["label"],
            "runs": sub[["share_set", "share_measured", "seed", "final_hard_pass@1", "tokens_to_reach",
                         "rollout_tokens"]].to_dict(orient="records"),
            "cells": {"x": per_share.values.tolist(), "y": cm["mean"].tolist(), "ci_low": cm.ci_low.tolist(),
                      "ci_high": cm.ci_high.tolist()}})
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_xlabel("measured unhinted share of the always-right strategy")
        a.grid(alpha=0.3)
    ax.set_ylabel("final hint-free pass@1, hard problems")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(frameon=False, fontsize=6)
    ax2.set_yscale("log")
    ax2.set_ylabel(f"rollout tokens to reach pass@1 {reached:g} (k)")
    ax2.set_title("hollow: not reached (total tokens shown)", fontsize=6)
    return fig, data
