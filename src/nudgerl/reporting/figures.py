"""The paper's figures from the pipeline's records (matplotlib, Agg).

Every figure function returns ``(fig, data)`` where ``data`` is the plotted series as
plain JSON (labels, x, y, 95% intervals): :func:`save_figure` writes it beside the PNG and
PDF, and tests check the series rather than pixels. Methods keep one colour, marker and
label everywhere (:func:`method_style`). Intervals are percentile bootstraps over problems
(and seeds when several), as in the tables.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from nudgerl.algorithms import bootstrap_mean_of_means
from nudgerl.io import atomic_write_text, read_jsonl
from nudgerl.reporting.tables import method_label, per_problem_matrix

# Paper-size figures: one column is ~3.3 in, two columns ~7 in; fonts legible at that size.
ONE_COLUMN = (3.4, 2.6)
TWO_COLUMN = (7.0, 2.8)
RC = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
      "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.4, "lines.markersize": 4}

METHOD_COLORS = {
    "base": "#7f7f7f",
    "grpo8": "#9ecae1",
    "grpo16": "#4292c6",
    "grpo32": "#08519c",
    "grpo64": "#08306b",
    "pope": "#2ca02c",
    "nudgerl": "#d62728",
}
_FAMILY_MARKERS = {"base": "s", "grpo": "o", "pope": "^", "nudgerl": "D"}


def method_style(method: str) -> dict:
    """Colour, marker and label of a method id, the same in every figure.

    GRPO runs get a blue that darkens with N (unknown N: mid blue); eps_high sweep runs and
    NudgeRL ablation variants keep their family's colour with a hollow marker."""
    family = re.match(r"[a-z]+", method).group(0) if re.match(r"[a-z]+", method) else method
    variant = "_" in method
    if family == "grpo":
        n = re.match(r"grpo(\d+)", method)
        color = METHOD_COLORS.get(f"grpo{n.group(1)}" if n else "", "#2171b5")
    else:
        color = METHOD_COLORS.get(family, "#9467bd")
    return {"color": color, "marker": _FAMILY_MARKERS.get(family, "x"), "label": method_label(method),
            "hollow": variant}


def _setup():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(RC)
    return plt


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


def _pass1_with_ci(mats: list[np.ndarray], n_boot: int) -> tuple[float, float, float]:
    return bootstrap_mean_of_means(mats, n_boot=n_boot)


# ---------------------------------------------------------------- training curves (Fig. 3)


def load_curves(curve_files: list[str | Path]) -> dict[str, list[dict]]:
    """Rows of results/curves/<method>/seed<k>/curve.jsonl, grouped by method (seed added)."""
    out: dict[str, list[dict]] = {}
    for f in map(Path, curve_files):
        method, seed = f.parent.parent.name, int(f.parent.name.removeprefix("seed"))
        for r in read_jsonl(f):
            out.setdefault(method, []).append({**r, "seed": seed})
    return out


def curve_points(rows: list[dict], benchmarks: list[str], n_boot: int) -> list[dict]:
    """Per step: mean over benchmarks of pass@1 (problems x seeds), interval, rollout tokens."""
    points = []
    for step in sorted({r["step"] for r in rows}):
        at = [r for r in rows if r["step"] == step]
        seeds = sorted({r["seed"] for r in at})
        mats = []
        for b in benchmarks:
            cols = []
            for s in seeds:
                match = [r for r in at if r["benchmark"] == b and r["seed"] == s]
                if not match:
                    raise ValueError(f"curve has no {b} records at step {step} for seed {s}")
                probs = sorted(match[0]["problems"], key=lambda p: p["id"])
                cols.append([p["c"] / p["n"] for p in probs])
            mats.append(np.array(cols).T)
        mean, lo, hi = _pass1_with_ci(mats, n_boot)
        tokens = [r["cumulative_rollout_tokens"] for r in at if r.get("cumulative_rollout_tokens") is not None]
        points.append({"step": step, "pass@1": mean, "ci_low": lo, "ci_high": hi,
                       "cumulative_rollout_tokens": float(np.mean(tokens)) if tokens else None,
                       "seeds": len(seeds), "samples_per_problem": at[0].get("samples_per_problem")})
    return points


def training_curves(curves: dict[str, list[dict]], benchmarks: list[str], n_boot: int = 1000):
    """pass@1 on ``benchmarks`` (their average) against training step, one line per method."""
    plt = _setup()
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


# ---------------------------------------------------------------- eps_high scaling (Fig. 5)


def avg_pass1(eval_root: Path, method: str, benchmarks: list[str], seeds: list[int], n_boot: int):
    mats = [per_problem_matrix(eval_root, method, b, seeds)[0] for b in benchmarks]
    return _pass1_with_ci(mats, n_boot)


def eps_high_scaling(eval_root: Path, sweep: list[tuple[float, str]], reference: str, reference_eps: float,
                     benchmarks: list[str], seeds: list[int], n_boot: int = 1000):
    """GRPO's average pass@1 against eps_high, with the reference method (NudgeRL at the
    main eps_high) as a horizontal line and band."""
    plt = _setup()
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

    plt = _setup()
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
    plt = _setup()
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


def run_rollout_tokens(runs_root: Path, method: str, seeds: list[int]) -> float:
    """Mean over seeds of a run's total rollout tokens (0 for the untrained base model)."""
    if method == "base":
        return 0.0
    totals = []
    for s in seeds:
        rows = read_jsonl(Path(runs_root) / method / f"seed{s}" / "metrics.jsonl")
        totals.append(rows[-1]["cumulative_rollout_tokens"] if rows else 0.0)
    return float(np.mean(totals))


def compute_matched(eval_root: Path, runs_root: Path, methods: list[str], benchmarks: list[str],
                    seeds: list[int] | dict[str, list[int]], curves: dict[str, list[dict]] | None = None,
                    curve_benchmarks: list[str] | None = None, n_boot: int = 1000):
    """Left: every method's final average pass@1 against the rollout tokens its training
    generated. Right: the checkpoint curves against cumulative rollout tokens. ``seeds`` is
    one list for every method, or each method's replicates (ablations run on fewer)."""
    run_seeds = seeds if isinstance(seeds, dict) else {m: seeds for m in methods}
    plt = _setup()
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
