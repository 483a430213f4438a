"""Each figure says what it shows: how many replicates and which seeds (from the records it
plots, never a fixed sentence), every replicate it is given drawn, one look per method (a GRPO
size its own hue, an ablation its own marker), and a legend that names only what is drawn.
Checked on the matplotlib objects and the plotted series (the .json sidecar), not on pixels."""

import json
from argparse import Namespace

import pandas as pd
import pytest

from nudgerl.reporting import figures
from nudgerl.reporting.figure_data import load_curves, load_run_metrics, seed_of_path
from nudgerl.reporting.figure_style import figure_styles, replicates_phrase, seed_sets, seeds_phrase

BENCH = ["aime24", "aime25"]


def _write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _problems(root, method, seed, c, n=4, k=6):
    for b in BENCH:
        _write_jsonl(root / method / f"seed{seed}" / f"{b}.problems.jsonl",
                     [{"id": f"{b}-{i}", "n": n, "c": c} for i in range(k)])


def _metrics(root, method, seed, tokens_per_step, steps=4):
    _write_jsonl(root / method / f"seed{seed}" / "metrics.jsonl",
                 [{"step": s, "cumulative_rollout_tokens": s * tokens_per_step, "reward_mean": 0.1 * s + 0.05 * seed}
                  for s in range(1, steps + 1)])
    return root / method / f"seed{seed}"


def _curve(root, method, seed, solved_by_step):
    """A checkpoint curve: at each step, ``solved`` of 4 problems solved on every sample."""
    rows = [{"step": step, "benchmark": b, "cumulative_rollout_tokens": 100.0 * step, "samples_per_problem": 4,
             "problems": [{"id": f"{b}-{i}", "n": 4, "c": 4 if i < solved else 0} for i in range(4)]}
            for step, solved in solved_by_step.items() for b in BENCH]
    path = root / method / f"seed{seed}" / "curve.jsonl"
    _write_jsonl(path, rows)
    return path


def _texts(fig) -> str:
    """Every title a figure carries (its own, its panels', its legend's), one string."""
    parts = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes),
             *(leg.get_title().get_text() for leg in fig.legends)]
    return " | ".join(" ".join(p.split()) for p in parts if p)


def _drawn_labels(fig) -> set[str]:
    """Labels of the artists drawn with data on any panel (lines, error bars, bars)."""
    labels = set()
    for ax in fig.axes:
        labels |= {ln.get_label() for ln in ax.get_lines() if len(ln.get_xdata())}
        labels |= {c.get_label() for c in ax.containers}
    return labels


def _legend_entries(fig) -> list[str]:
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


# ---------------------------------------------------------------- the phrases


def test_replicate_phrases_name_the_count_and_the_seeds():
    assert replicates_phrase([0]) == "1 replicate (seed 0 only)"
    assert replicates_phrase([2, 0, 1]) == "3 replicates (seeds 0-2)"
    assert replicates_phrase(["seed0", "seed1"]) == "2 replicates (seeds 0, 1)"  # run folder names too
    assert seeds_phrase([0, 1, 2, 5, 7, 8]) == "seeds 0-2, 5, 7, 8"
    # the most common set titles the figure; a method on another says so in its label
    title, suffix = seed_sets({"grpo8": [0, 1, 2], "nudgerl8": [0, 1, 2], "nudgerl8_pdrop0": [0]})
    assert title == "3 replicates (seeds 0-2)" and suffix == {"nudgerl8_pdrop0": ", seed 0 only"}
    assert seed_of_path("results/runs/grpo8/seed3/model") == 3 and seed_of_path("shared/models/base/seed0") == 0
    assert seed_of_path("results/eval/grpo8") is None


def test_a_figure_with_several_grpo_sizes_gives_each_its_own_hue_and_each_variant_its_own_marker():
    methods = ["base", "grpo8", "grpo16", "grpo32", "grpo64", "pope8", "nudgerl8", "grpo8_eps0.28",
               *(f"nudgerl8_{v}" for v in ("pdrop0", "pdrop0.25", "distill0", "random", "topranked"))]
    styles = figure_styles(methods)
    colours = [styles[m]["color"] for m in methods if not styles[m]["hollow"]]
    assert len(set(colours)) == len(colours)  # the four GRPO sizes no longer four blues
    assert styles["grpo8_eps0.28"]["color"] == styles["grpo8"]["color"]  # a variant keeps its run's hue
    variants = [m for m in methods if styles[m]["hollow"]]
    assert len({styles[m]["marker"] for m in variants}) == len(variants)
    # one GRPO size: its usual colour, as in every other figure
    assert figure_styles(["grpo8", "nudgerl8"])["grpo8"]["color"] == figures.method_style("grpo8")["color"]


# ---------------------------------------------------------------- training curves and reward


def test_training_curves_draw_the_mean_of_every_replicate_and_say_which(tmp_path):
    files = [*(_curve(tmp_path, "grpo8", s, {0: 0, 10: s}) for s in range(3)),
             *(_curve(tmp_path, "grpo16", s, {0: 0, 10: 2}) for s in range(3)),
             _curve(tmp_path, "nudgerl8", 0, {0: 0, 10: 4})]
    curves = load_curves(files)
    # GRPO-8's replicates solve 0, 1 and 2 of 4 problems at step 10: the line is their mean
    fig, data = figures.pass1_curves({m: curves[m] for m in ("grpo8", "grpo16")}, BENCH, n_boot=100)
    ax = fig.axes[0]
    mean = next(ln for ln in ax.get_lines() if ln.get_label() == "GRPO (N=8)")
    assert list(mean.get_ydata()) == pytest.approx([0.0, 0.25])
    thin = [ln for ln in ax.get_lines() if ln.get_label() == "_replicate"]
    assert len(thin) == 2 * 3  # every replicate of both methods, drawn
    g8 = data["series"][0]
    assert g8["seeds"] == [0, 1, 2] and [r["y"][-1] for r in g8["replicate_lines"]] == pytest.approx([0, 0.25, 0.5])
    assert "runs: 3 replicates (seeds 0-2)" in _texts(fig) and data["replicates"] == "runs: 3 replicates (seeds 0-2)"
    assert "mean over replicates" in _texts(fig)
    colours = {ln.get_color() for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert len(colours) == 2
    # one seed: no replicate lines, and the figure says it rests on seed 0 only
    fig, data = figures.pass1_curves({"nudgerl8": curves["nudgerl8"]}, BENCH, n_boot=100)
    assert "seed 0 only" in _texts(fig) and data["series"][0]["replicates"] == 1
    assert not [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "_replicate"]
    # a method on fewer replicates than the others says so in its label
    fig, data = figures.pass1_curves(curves, BENCH, n_boot=100)
    assert "NudgeRL (N=8), seed 0 only" in _legend_entries(fig)


def test_training_reward_with_one_seed_says_seed_0_only(tmp_path):
    runs = load_run_metrics([_metrics(tmp_path, m, 0, 100.0) for m in ("grpo8", "grpo16", "pope8", "nudgerl8")])
    fig = figures.training_reward_curves(runs, window=1)
    assert fig.get_suptitle() == "runs: 1 replicate (seed 0 only)"
    assert "no band" in fig.legends[0].get_title().get_text()
    assert not any(ax.collections for ax in fig.axes)  # no range band of a single run
    colours = {ln.get_color() for ln in fig.axes[0].get_lines()}
    assert len(colours) == 4


# ---------------------------------------------------------------- compute-matched and baselines


def _matched_inputs(tmp_path):
    ev, runs = tmp_path / "eval", tmp_path / "runs"
    main = {"base": 0, "grpo8": 1, "grpo32": 2, "nudgerl8": 3}
    ablations = {"nudgerl8_pdrop0": 3, "nudgerl8_pdrop0.25": 2, "nudgerl8_distill0": 4, "nudgerl8_random": 1,
                 "grpo8_eps0.28": 1}
    seeds = {**{m: [0, 1, 2] for m in main}, **{m: [0] for m in ablations}}
    for m, c in {**main, **ablations}.items():
        for s in seeds[m]:
            _problems(ev, m, s, c)
            if m != "base":
                _metrics(runs, m, s, {"grpo32": 1000.0}.get(m, 100.0 + 10 * c))
    return ev, runs, list({**main, **ablations}), seeds


def test_compute_matched_gives_ablations_their_own_panel_and_markers_and_says_which_seeds(tmp_path):
    ev, runs, methods, seeds = _matched_inputs(tmp_path)
    curves = load_curves([_curve(tmp_path / "curves", m, 0, {0: 0, 10: 2}) for m in ("grpo8", "nudgerl8")])
    fig, data = figures.compute_matched(ev, runs, methods, ["aime24"], seeds, curves=curves, curve_benchmarks=BENCH,
                                        n_boot=100)
    methods_ax, variants_ax, curves_ax = fig.axes
    # the means of three replicates and the seed-0 runs are never in one panel; each title says which
    assert methods_ax.get_title() == "methods\n3 replicates (seeds 0-2)"
    assert variants_ax.get_title() == "ablations, eps_high runs\n1 replicate (seed 0 only)"
    assert curves_ax.get_title() == "checkpoint curves\n1 replicate (seed 0 only)"
    variants = [s for s in data["series"] if s["panel"] == "variants"]
    assert {s["method"] for s in variants} == {m for m in methods if "_" in m}
    assert all(s["seeds"] == [0] for s in variants)
    assert len({s["marker"] for s in variants}) == len(variants)  # one marker per ablation
    drawn = {c.get_label(): c[0].get_marker() for c in variants_ax.containers}
    assert len(set(drawn.values())) == len(drawn)
    # beside them the runs they vary, on the same seed 0
    assert [(r["method"], r["seeds"]) for r in data["variant_references"]] == [("nudgerl8", [0]), ("grpo8", [0])]
    # GRPO-32 at ten times the tokens: a log token axis; the seed-0 panel spans less than 3x
    assert [p["x_scale"] for p in data["panels"]] == ["log", "linear", "linear"]
    assert methods_ax.get_xscale() == "log"
    # the base model (0 tokens) is a dashed level, not a point a log axis cannot place
    base = next(s for s in data["series"] if s["method"] == "base")
    assert base["drawn"] == "dashed line" and base["seeds"] == [0, 1, 2]
    entries = _legend_entries(fig)
    assert len(entries) == len(set(entries)) and set(entries) <= _drawn_labels(fig)
    assert "hollow: ablation / eps_high run" in _texts(fig)


def test_the_baselines_figure_names_no_hollow_marker_it_does_not_draw(tmp_path):
    """The baselines figure draws no ablation: its legend used to name hollow markers all the same."""
    ev, runs = tmp_path / "eval", tmp_path / "runs"
    methods = ["grpo8", "grpo32", "nudgerl8", "dapo8", "ngrpo8"]
    for i, m in enumerate(methods):
        for s in (0, 1):
            _problems(ev, m, s, 1 + i % 4)
            _metrics(runs, m, s, 1000.0 if m == "grpo32" else 100.0 + 5 * i)
    fig, data = figures.compute_matched(ev, runs, methods, ["aime24"], [0, 1], n_boot=100)
    assert len(fig.axes) == 1 and "hollow" not in _texts(fig) and "dashed" not in _texts(fig)
    assert fig.axes[0].get_title() == "runs: 2 replicates (seeds 0, 1)"
    assert _legend_entries(fig) == ["GRPO (N=8)", "GRPO (N=32)", "NudgeRL (N=8)", "DAPO (N=8)", "NGRPO (N=8)"]
    assert set(_legend_entries(fig)) <= _drawn_labels(fig)
    assert data["panels"][0]["x_scale"] == "log"  # GRPO-32's 10x tokens would squeeze the others


def _regime_runs(methods, seeds, reached=True, outlier="grpo32", shares=(0.01, 0.03)):
    runs = pd.DataFrame([{"method": m, "share_set": sh, "share_measured": sh, "seed": s, "final_hard_pass@1": 0.8,
                          "tokens_to_reach": 2e4 if reached else None, "reached": reached,
                          "rollout_tokens": (2e5 if m == outlier else 5e4 + 1e3 * i)}
                         for sh in shares for i, m in enumerate(methods) for s in seeds])
    cells = pd.DataFrame([{"method": m, "share_set": sh, "kind": "pass@1", "mean": 0.8, "ci_low": 0.7,
                           "ci_high": 0.9} for sh in shares for m in methods])
    return runs, cells


def test_regime_map_baselines_states_its_replicates_and_spreads_crowded_tokens():
    runs, cells = _regime_runs(["grpo8", "grpo32", "nudgerl8", "dapo8"], [0, 1, 2])
    fig, data = figures.regime_map_baselines(runs, cells)
    assert fig.get_suptitle() == "every cell: 3 replicates (seeds 0-2)" and data["seeds"] == [0, 1, 2]
    assert [ax.get_xscale() for ax in fig.axes] == ["log", "log"] and data["panels"][0]["x_scale"] == "log"
    assert set(_legend_entries(fig)) <= _drawn_labels(fig)


def test_regime_map_names_hollow_markers_only_where_a_run_missed():
    runs, cells = _regime_runs(["grpo8", "nudgerl8"], [0, 1])
    fig, _ = figures.regime_map(runs, cells, reached=0.5, samples=4)
    assert "hollow" not in _texts(fig) and "every cell: 2 replicates (seeds 0, 1)" in _texts(fig)
    runs, cells = _regime_runs(["grpo8", "nudgerl8"], [0, 1], reached=False)
    fig, _ = figures.regime_map(runs, cells, reached=0.5, samples=4)
    assert "hollow: not reached" in _texts(fig)


def test_regime_map_accuracy_states_its_replicates():
    methods, seeds, accuracies = ["grpo8", "nudgerl8"], [0, 1, 2], [1.0, 0.5]
    runs = pd.DataFrame([{"method": m, "accuracy_set": a, "accuracy_measured": a, "seed": s, "final_hard_pass@1": 0.5,
                          "rollout_tokens": 5e4} for m in methods for a in accuracies for s in seeds])
    cells = pd.DataFrame([{"method": m, "accuracy_set": a, "kind": "pass@1", "mean": 0.5, "ci_low": 0.4,
                           "ci_high": 0.6} for m in methods for a in accuracies])
    checkpoints = pd.DataFrame([{"method": m, "accuracy_set": a, "seed": s, "step": st, "hard_pass@1": 0.1 * st}
                                for m in methods for a in accuracies for s in seeds for st in (0, 5)])
    fig, data = figures.regime_map_accuracy(runs, cells, checkpoints)
    assert fig.get_suptitle() == data["title"] == "every cell: 3 replicates (seeds 0-2)" and data["seeds"] == seeds


# ---------------------------------------------------------------- eps_high, diversity, case study


def test_eps_high_scaling_states_its_replicates(tmp_path):
    for m, c in [("grpo8", 1), ("grpo8_eps0.28", 2), ("nudgerl8", 3)]:
        for s in (0, 1):
            _problems(tmp_path, m, s, c)
    fig, data = figures.eps_high_scaling(tmp_path, [(0.2, "grpo8"), (0.28, "grpo8_eps0.28")], "nudgerl8", 0.2, BENCH,
                                         [0, 1], n_boot=100)
    assert fig.axes[0].get_title() == data["replicates"] == "all runs: 2 replicates (seeds 0, 1)"


@pytest.mark.parametrize("nudged, direction, words", [
    (1, "fewer", "fewer distinct strategies than naive (1.00 vs 2.00 on average): the opposite of the paper's Fig. 1c"),
    (3, "more", "more distinct strategies than naive (3.00 vs 2.00 on average), as in the paper's Fig. 1c")])
def test_strategy_diversity_says_which_way_nudging_moved_the_count(nudged, direction, words):
    report = {"samples_per_condition": 4, "base_model_seed": 2, "sampling_seed": 0,
              "problems": [{"naive_distinct": 2, "nudged_distinct": nudged}] * 3}
    fig, data = figures.strategy_diversity(report, n_boot=100)
    assert data["nudged_vs_naive"] == direction and words in data["comparison"]
    title = " ".join(fig.axes[0].get_title().split())
    assert title.startswith("1 replicate (base model of seed 2 only)") and words in title


def test_the_case_study_records_its_pick_rule_and_the_seed_from_the_run_folders():
    from nudgerl.reporting.figure_cli import case_selection_record

    args = Namespace(methods=["grpo8", "nudgerl8"], models=["r/runs/grpo8/seed0/model", "r/runs/nudgerl8/seed0/model"],
                     eval_dirs=["r/eval/grpo8/seed0", "r/eval/nudgerl8/seed0"])
    picked = case_selection_record(args, configured=False, hard=True)
    assert picked == {"rule": "largest_gain", "methods": ["grpo8", "nudgerl8"], "hard": True, "seed": 0}
    assert figures.case_selection({"selection": picked}) == \
        "picked on seed 0's evaluation: the hard problem where NudgeRL (N=8)'s pass@1 most exceeds GRPO (N=8)'s"
    configured = case_selection_record(args, configured=True, hard=True)
    assert configured == {"rule": "configured", "seed": 0}
    assert "report.case_study.problem" in figures.case_selection({"selection": configured})
