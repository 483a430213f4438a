"""Each figure rendered from small records: the plotted series (returned data and the
matplotlib objects) are the expected ones, and the files are written."""

import json

import numpy as np
import pytest

from nudgerl.reporting import figures
from nudgerl.reporting.figure_data import load_curves, load_run_metrics, replicate_bands
from nudgerl.evaluation.curves import checkpoint_models, curve_steps
from nudgerl.evaluation.strategies import distinct_strategies, pick_case_problem

BENCH = ["aime24", "aime25"]


def _problems(root, method, bench, cs, n=4, seed=0):
    d = root / method / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{bench}.problems.jsonl").write_text(
        "".join(json.dumps({"id": f"{bench}-{i}", "n": n, "c": int(c)}) + "\n" for i, c in enumerate(cs)))


def _metrics(root, method, steps, tokens_per_step, seed=0):
    d = root / method / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"step": s, "rollout_tokens": tokens_per_step, "cumulative_rollout_tokens": s * tokens_per_step}
            for s in range(1, steps + 1)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _curve(root, method, rates_by_step, tokens_per_step):
    d = root / method / "seed0"
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for step, rate in rates_by_step.items():
        for b in BENCH:
            c = [4] * int(round(10 * rate)) + [0] * (10 - int(round(10 * rate)))
            rows.append({"step": step, "benchmark": b, "cumulative_rollout_tokens": step * tokens_per_step,
                         "samples_per_problem": 4,
                         "problems": [{"id": f"{b}-{i}", "n": 4, "c": x} for i, x in enumerate(c)]})
    (d / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d / "curve.jsonl"


def _lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def _legend_off_the_axes(fig):
    """The figure's one legend (no legend on any panel) and whether it overlaps no panel."""
    fig.canvas.draw()
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    box = fig.legends[0].get_window_extent()
    return fig.legends[0], all(not box.overlaps(ax.get_window_extent()) for ax in fig.axes)


def test_pass1_curves_series(tmp_path):
    files = [_curve(tmp_path, "grpo8", {0: 0.1, 10: 0.3, 20: 0.5}, 100),
             _curve(tmp_path, "nudgerl8", {0: 0.1, 10: 0.6, 20: 0.8}, 100)]
    fig, data = figures.pass1_curves(load_curves(files), BENCH, n_boot=200)
    series = {s["method"]: s for s in data["series"]}
    assert set(series) == {"grpo8", "nudgerl8"}
    assert series["nudgerl8"]["x"] == [0, 10, 20]
    assert series["nudgerl8"]["y"] == pytest.approx([0.1, 0.6, 0.8])
    assert all(lo <= y <= hi for lo, y, hi in zip(series["grpo8"]["ci_low"], series["grpo8"]["y"],
                                                     series["grpo8"]["ci_high"]))
    lines = _lines_by_label(fig.axes[0])
    assert set(lines) == {"GRPO (N=8)", "NudgeRL (N=8)"}
    np.testing.assert_allclose(lines["NudgeRL (N=8)"].get_ydata(), [0.1, 0.6, 0.8])
    assert lines["NudgeRL (N=8)"].get_color() == figures.method_style("nudgerl8")["color"]
    legend, outside = _legend_off_the_axes(fig)
    assert outside and [t.get_text() for t in legend.get_texts()] == ["GRPO (N=8)", "NudgeRL (N=8)"]
    paths = figures.save_figure(fig, data, tmp_path / "fig" / "training_curves")
    assert [p.suffix for p in paths] == [".png", ".pdf", ".json"]
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[1].read_bytes()[:4] == b"%PDF"
    assert json.loads(paths[2].read_text())["series"][0]["y"] == data["series"][0]["y"]


def _reward_run(root, method, seed, rewards, tokens_per_step=100.0):
    d = root / method / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"step": s, "reward_mean": r, "cumulative_rollout_tokens": s * tokens_per_step * (1 + seed)}
            for s, r in enumerate(rewards, start=1)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_replicate_bands_mean_and_range(tmp_path):
    runs = load_run_metrics([_reward_run(tmp_path, "grpo8", 0, [0.0, 1.0, 1.0]),
                             _reward_run(tmp_path, "nudgerl8", 0, [0.5, 0.5, 0.5]),
                             _reward_run(tmp_path, "grpo8", 1, [1.0, 1.0, 0.0])])
    bands = replicate_bands(runs, window=1)
    assert [b["method"] for b in bands] == ["grpo8", "nudgerl8"] and bands[0]["seeds"] == ["seed0", "seed1"]
    g = bands[0]
    assert g["step"] == [1, 2, 3] and g["mean"] == pytest.approx([0.5, 1.0, 0.5])
    assert g["low"] == [0.0, 1.0, 0.0] and g["high"] == [1.0, 1.0, 1.0]
    assert g["tokens"] == pytest.approx([150.0, 300.0, 450.0])  # mean over the replicates
    assert replicate_bands(runs, window=2)[0]["mean"] == pytest.approx([0.5, 0.75, 0.75])


def test_training_reward_one_legend_entry_per_method_outside_the_axes(tmp_path):
    runs = load_run_metrics([_reward_run(tmp_path, m, s, [0.1 * s + 0.2 * i for i in range(6)])
                             for m in ("grpo8", "grpo16", "pope8", "nudgerl8") for s in range(3)])
    fig = figures.training_reward_curves(runs, window=2)
    legend, outside = _legend_off_the_axes(fig)
    # POPE's reward averages its guided (oracle-prefixed) prompts too: its label says so
    assert [t.get_text() for t in legend.get_texts()] == ["GRPO (N=8)", "GRPO (N=16)",
                                                          "POPE (N=8), reward incl. guided prompts", "NudgeRL (N=8)"]
    assert outside
    for ax in fig.axes:  # per method: its mean (labelled) and 3 replicate lines (unlabelled)
        lines = _lines_by_label(ax)
        assert len(lines) == 4 and len(ax.get_lines()) == 4 * 4
        mean = next(b for b in replicate_bands(runs, 2) if b["method"] == "nudgerl8")["mean"]
        np.testing.assert_allclose(lines["NudgeRL (N=8)"].get_ydata(), mean)
    assert fig.get_suptitle() == "runs: 3 replicates (seeds 0-2)"
    assert "band: their range (min to max)" in legend.get_title().get_text()
    assert figures.save_png(fig, tmp_path / "training_reward.png").read_bytes()[:4] == b"\x89PNG"


def test_eps_high_scaling_series_and_reference(tmp_path):
    for m, c in [("grpo8", 1), ("grpo8_eps0.28", 2), ("grpo8_eps0.4", 3), ("nudgerl8", 4)]:
        for b in BENCH:
            _problems(tmp_path, m, b, [c] * 6)
    fig, data = figures.eps_high_scaling(tmp_path, [(0.4, "grpo8_eps0.4"), (0.2, "grpo8"), (0.28, "grpo8_eps0.28")],
                                         "nudgerl8", 0.2, BENCH, [0], n_boot=200)
    s = data["series"][0]
    assert s["x"] == [0.2, 0.28, 0.4] and s["methods"] == ["grpo8", "grpo8_eps0.28", "grpo8_eps0.4"]
    assert s["y"] == pytest.approx([0.25, 0.5, 0.75])
    assert data["reference"]["y"] == pytest.approx(1.0) and data["reference"]["eps_high"] == 0.2
    lines = _lines_by_label(fig.axes[0])
    assert "NudgeRL (N=8), eps_high=0.2" in lines
    np.testing.assert_allclose(lines["NudgeRL (N=8), eps_high=0.2"].get_ydata(), [1.0, 1.0])
    assert _legend_off_the_axes(fig)[1]


def test_strategy_diversity_counts():
    report = {"samples_per_condition": 4, "problems": [
        {"naive_distinct": 1, "nudged_distinct": 2}, {"naive_distinct": 1, "nudged_distinct": 3},
        {"naive_distinct": 2, "nudged_distinct": 3}]}
    fig, data = figures.strategy_diversity(report, n_boot=200)
    naive, nudged = data["series"]
    assert naive["x"] == [0, 1, 2, 3] and naive["y"] == [0, 2, 1, 0] and nudged["y"] == [0, 0, 1, 2]
    assert nudged["mean"] == pytest.approx(8 / 3) and naive["ci_low"] <= naive["mean"] <= naive["ci_high"]
    heights = [round(p.get_height()) for p in fig.axes[0].patches]
    assert heights == [0, 2, 1, 0, 0, 0, 1, 2]
    assert _legend_off_the_axes(fig)[1]
    assert distinct_strategies(["a", "a", "unknown", "b"]) == 2


def test_case_study_bars():
    report = {"problem": {"id": "apex-3"}, "samples": 8,
              "selection": {"rule": "largest_gain", "methods": ["grpo8", "nudgerl8"], "hard": True, "seed": 0},
              "methods": {
        "grpo8": {"strategy_counts": {"common_difference": 8}, "correct_by_strategy": {}, "correct": 0},
        "nudgerl8": {"strategy_counts": {"common_difference": 2, "difference_table": 6},
                     "correct_by_strategy": {"difference_table": 6}, "correct": 6}}}
    fig, data = figures.case_study(report)
    s = {x["method"]: x for x in data["series"]}
    assert s["nudgerl8"]["x"] == ["common_difference", "difference_table"]
    assert s["nudgerl8"]["y"] == [2, 6] and s["nudgerl8"]["correct"] == [0, 6] and s["grpo8"]["y"] == [8, 0]
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == ["GRPO (N=8): 0/8 correct", "NudgeRL (N=8): 6/8 correct"]
    assert _legend_off_the_axes(fig)[1]
    # the problem was picked, not drawn at random: the title says by which rule, on which seed
    title = " ".join(fig.axes[0].get_title().split())
    assert title == data["title"].replace("\n", " ") == (
        "problem apex-3; policies: 1 replicate (seed 0 only) picked on seed 0's evaluation: the hard problem "
        "where NudgeRL (N=8)'s pass@1 most exceeds GRPO (N=8)'s")
    assert data["selection"]["seed"] == 0


def test_compute_matched_points_and_curves(tmp_path):
    ev, runs = tmp_path / "eval", tmp_path / "runs"
    for m, c in [("base", 0), ("grpo8", 2), ("grpo16", 3), ("nudgerl8", 4)]:
        _problems(ev, m, "aime24", [c] * 5)
    _metrics(runs, "grpo8", 10, 100.0)
    _metrics(runs, "grpo16", 10, 200.0)
    _metrics(runs, "nudgerl8", 10, 110.0)
    curves = load_curves([_curve(tmp_path / "curves", "grpo8", {0: 0.0, 10: 0.5}, 100)])
    fig, data = figures.compute_matched(ev, runs, ["base", "grpo8", "grpo16", "nudgerl8"], ["aime24"], [0],
                                        curves=curves, curve_benchmarks=BENCH, n_boot=200)
    pts = {s["method"]: (s["x"][0], s["y"][0]) for s in data["series"]}
    assert pts == {"base": (0.0, 0.0), "grpo8": (1000.0, 0.5), "grpo16": (2000.0, 0.75), "nudgerl8": (1100.0, 1.0)}
    assert data["curves"][0]["x"] == [0, 1000] and data["curves"][0]["y"] == pytest.approx([0.0, 0.5])
    assert len(fig.axes) == 2
    # one legend for both panels, under them (it covered points on the panel)
    legend, outside = _legend_off_the_axes(fig)
    assert outside and [t.get_text() for t in legend.get_texts()] == [
        "Base", "GRPO (N=8)", "GRPO (N=16)", "NudgeRL (N=8)"]


def test_method_styles_are_consistent():
    assert figures.method_style("grpo8")["color"] != figures.method_style("grpo32")["color"]
    assert figures.method_style("grpo8_eps0.28")["color"] == figures.method_style("grpo8")["color"]
    assert figures.method_style("grpo8_eps0.28")["hollow"] and not figures.method_style("grpo8")["hollow"]
    assert figures.method_style("nudgerl8_pdrop0")["color"] == figures.method_style("nudgerl8")["color"]
    assert figures.method_style("grpo8_eps0.28")["label"] == "GRPO (N=8, eps_high=0.28)"


def test_curve_steps_and_missing_checkpoint(tmp_path):
    assert curve_steps(40, 10) == [0, 10, 20, 30, 40]
    assert curve_steps(35, 10) == [0, 10, 20, 30, 35]
    run = tmp_path / "grpo8" / "seed0"
    _metrics(tmp_path, "grpo8", 20, 10.0)
    with pytest.raises(FileNotFoundError, match="checkpoint-10.*multiple of grpo.checkpoint_every"):
        checkpoint_models(run, "base", 10)
    (run / "checkpoints" / "checkpoint-10").mkdir(parents=True)
    (run / "checkpoints" / "checkpoint-10" / "model.safetensors").write_text("x")
    points = checkpoint_models(run, "base", 10)
    assert [(s, t) for s, _, t in points] == [(0, 0.0), (10, 100.0), (20, 200.0)]
    assert points[-1][1].endswith("model")
    # num_iterations = 2: metrics only at generation steps, final model at the trainer's last step
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "cumulative_rollout_tokens": 10.0 * s}) + "\n"
                                               for s in (1, 3, 5)))
    (run / "train_report.json").write_text(json.dumps({"global_step": 6}))
    (run / "checkpoints" / "checkpoint-4").mkdir()
    (run / "checkpoints" / "checkpoint-4" / "model.safetensors").write_text("x")
    assert [(s, t) for s, _, t in checkpoint_models(run, "base", 2 * 2)] == [(0, 0.0), (4, 30.0), (6, 50.0)]


@pytest.mark.parametrize("backend", ["transformers", "vllm"])
def test_curve_refuses_an_adapter_trained_on_another_base(tmp_path, monkeypatch, backend):
    """A LoRA checkpoint names its base in adapter_config.json; served over another base (vLLM
    applies any adapter of matching shapes) it would be a model that never existed. The check
    runs before any model loads (the main venv has no vLLM: an engine start would raise
    ImportError instead)."""
    from nudgerl.evaluation.curves import evaluate_checkpoints
    from nudgerl.evaluation.sampling import SamplingParams

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "grpo8" / "seed0"
    _metrics(tmp_path, "grpo8", 4, 10.0)
    (tmp_path / "base").mkdir()
    for folder, base in [(run / "checkpoints" / "checkpoint-2", "./base"), (run / "model", "other-base")]:
        folder.mkdir(parents=True)
        (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": 8}))
    args = (run, "base", {"b": [{"id": "p", "problem": "1 2 3", "answer": "4"}]}, 2, SamplingParams(n=1),
            tmp_path / "curve.jsonl")
    with pytest.raises(ValueError, match=r"model: the adapter was trained on 'other-base'.*not on .*'base'"):
        evaluate_checkpoints(*args, backend=backend)
    assert not (tmp_path / "curve.jsonl").exists()


def test_case_problem_pick():
    rates = {"grpo8": {"a": 0.5, "b": 0.0, "c": 0.0}, "nudgerl8": {"a": 1.0, "b": 0.75, "c": 0.75}}
    assert pick_case_problem(rates, {"b", "c"}, ["grpo8", "nudgerl8"]) == "b"  # hard only; ties: smallest id
    assert pick_case_problem(rates, set(), ["grpo8", "nudgerl8"]) == "b"


def test_regime_map_share_axis_labels_percent_without_minor_labels():
    """A map spanning about one decade (0.3 % to 3 %): matplotlib's default labels every minor
    tick there, and the labels ran into each other; the axis reads 0.2 %, 0.5 %, 1 %, 2 %."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from nudgerl.reporting import figures

    runs = pd.DataFrame([{"method": m, "share_set": s, "share_measured": s * f, "seed": i,
                          "final_hard_pass@1": 0.5, "tokens_to_reach": 2e4, "rollout_tokens": 5e4, "reached": True}
                         for m in ("grpo8", "nudgerl8") for s in (0.003, 0.01, 0.03) for i, f in enumerate((0.6, 1.2))])
    cells = pd.DataFrame([{"method": m, "kind": "pass@1", "share_set": s, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
                          for m in ("grpo8", "nudgerl8") for s in (0.003, 0.01, 0.03)])
    fig, _ = figures.regime_map(runs, cells, reached=0.5, samples=4)
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        major = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        minor = [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
        assert major and all(label.endswith(" %") for label in major), major
        assert "1 %" in major and not minor, (major, minor)


def test_a_figure_saved_twice_from_the_same_records_is_the_same_bytes(tmp_path):
    """No creation date (or other wall-clock stamp) in the PNG or PDF: a rerun is byte-identical."""
    import time

    for m, c in [("grpo8", 1), ("nudgerl8", 3)]:
        for b in BENCH:
            _problems(tmp_path / "eval", m, b, [c] * 6)
    written = []
    for out in ("first", "second"):
        fig, data = figures.eps_high_scaling(tmp_path / "eval", [(0.2, "grpo8")], "nudgerl8", 0.2, BENCH, [0], n_boot=50)
        written.append(figures.save_figure(fig, data, tmp_path / out / "eps"))
        time.sleep(1.1)  # a date stamp would differ by now (PDF dates have 1 s resolution)
    for a, b in zip(*written):
        assert a.read_bytes() == b.read_bytes(), a.name
