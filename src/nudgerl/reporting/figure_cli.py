"""Subcommands of the figure boxes (workflow/rules/figures.smk, regime_map.smk, and report.smk's
training_reward): the paper's figures and the regime map, each as <prefix>.png, .pdf and .json
(the plotted series), and the training-reward PNG. Each reads its records
(:mod:`nudgerl.reporting.figure_data`), draws (:mod:`nudgerl.reporting.figures`) and writes the
files with their provenance."""

from __future__ import annotations

import json
from pathlib import Path

from nudgerl.arguments import add_command, add_pool_sampling_arguments, json_arg, set_threads


def _save_figure(fig, data, out_prefix, config, inputs) -> None:
    from nudgerl.reporting.figures import save_figure
    from nudgerl.io import write_provenance

    paths = save_figure(fig, data, out_prefix)
    write_provenance(paths[0], config, {}, inputs, outputs=paths[1:])


def cmd_plot_training_curves(args) -> None:
    from nudgerl.reporting.figure_data import load_curves
    from nudgerl.reporting.figures import pass1_curves

    fig, data = pass1_curves(load_curves(args.curves), args.benchmarks, n_boot=args.bootstrap_samples)
    _save_figure(fig, data, args.out_prefix, {"benchmarks": args.benchmarks}, args.curves)


def cmd_plot_curves(args) -> None:
    from nudgerl.io import write_provenance
    from nudgerl.reporting.figure_data import load_run_metrics
    from nudgerl.reporting.figures import save_png, training_reward_curves

    path = save_png(training_reward_curves(load_run_metrics(args.runs)), args.out)
    write_provenance(path, {"runs": args.runs}, {}, [f"{r}/metrics.jsonl" for r in args.runs])


def cmd_plot_eps_high(args) -> None:
    from nudgerl.reporting.figures import eps_high_scaling

    if len(args.sweep_methods) != len(args.eps_values):
        raise ValueError("--sweep-methods and --eps-values need one value each per run")
    sweep = list(zip(args.eps_values, args.sweep_methods))
    fig, data = eps_high_scaling(Path(args.eval_root), sweep, args.reference, args.reference_eps, args.benchmarks,
                                 args.seeds, n_boot=args.bootstrap_samples)
    inputs = [Path(args.eval_root) / m / f"seed{s}" / f"{b}.problems.jsonl"
              for m in [*args.sweep_methods, args.reference] for s in args.seeds for b in args.benchmarks]
    _save_figure(fig, data, args.out_prefix, {"sweep": sweep, "reference": args.reference}, inputs)


def cmd_strategy_diversity(args) -> None:
    set_threads(args.threads)
    from nudgerl.reporting.figure_data import seed_of_path
    from nudgerl.reporting.figures import strategy_diversity
    from nudgerl.io import atomic_write_text, read_jsonl, read_problems, write_provenance
    from nudgerl.evaluation.strategies import get_labeler
    from nudgerl.evaluation.strategies import strategy_diversity as measure

    p = args.params
    problems = read_problems(args.train)[: p.get("problems", 40)]
    pools = {r["id"]: r["hints"] for r in read_jsonl(args.pools)}
    report = measure(args.model, problems, pools, args.nudge.get("M", 2), args.nudge.get("K", 4), p,
                     get_labeler(p.get("labeler", "organism")), seed=p.get("seed", 0))
    # the one replicate it samples, which the figure's title states: the base model's seed (its
    # folder, .../seed<k>) and the sampling seed
    report.update(base_model_seed=seed_of_path(args.model), sampling_seed=p.get("seed", 0))
    atomic_write_text(args.out_json, json.dumps(report, indent=2))
    write_provenance(args.out_json, {**p, "nudge": args.nudge}, {"sampling": p.get("seed", 0)},
                     [args.model, args.train, args.pools])
    fig, data = strategy_diversity(report, n_boot=args.bootstrap_samples)
    _save_figure(fig, data, args.out_prefix, p, [args.out_json])


def cmd_case_study(args) -> None:
    set_threads(args.threads)
    from nudgerl.reporting.figures import case_selection, case_study
    from nudgerl.io import atomic_write_text, read_jsonl, read_problems, write_provenance
    from nudgerl.evaluation.strategies import case_study as sample_case
    from nudgerl.evaluation.strategies import get_labeler, pick_case_problem

    p = args.params
    problems = {q["id"]: q for b in args.benchmarks for q in read_problems(b)}
    pid = p.get("problem")
    rates = {}
    records = []
    for m, root in zip(args.methods, args.eval_dirs):
        rates[m] = {}
        for b in args.benchmarks:
            path = Path(root) / f"{Path(b).stem}.problems.jsonl"
            records.append(path)
            rates[m].update({r["id"]: r["c"] / r["n"] for r in read_jsonl(path)})
    hard = {k for k, q in problems.items() if q.get("hard")}
    if pid is None:
        pid = pick_case_problem(rates, hard, args.methods)
    elif pid not in problems:
        raise KeyError(f"report.case_study.problem {pid!r} is in none of the benchmarks")
    report = sample_case(dict(zip(args.methods, args.models)), problems[pid], p.get("samples", 32), p,
                         get_labeler(p.get("labeler", "organism")), seed=p.get("seed", 0))
    report["selection"] = case_selection_record(args, configured=p.get("problem") is not None, hard=pid in hard)
    report["selected"] = case_selection(report)
    atomic_write_text(args.out_json, json.dumps(report, indent=2))
    write_provenance(args.out_json, p, {"sampling": p.get("seed", 0)}, [*args.models, *args.benchmarks, *records])
    fig, data = case_study(report)
    _save_figure(fig, data, args.out_prefix, p, [args.out_json])


def case_selection_record(args, configured: bool, hard: bool) -> dict:
    """How the case study's problem was picked, for its figure's title: configured, or the
    (hard) problem of the largest evaluation pass@1 gain of ``args.methods[1]`` over
    ``args.methods[0]``; and the replicate (``seed``) whose evaluation picked it and whose
    policies are sampled, read from the folders (``.../seed<k>``)."""
    from nudgerl.reporting.figure_data import seed_of_path

    seeds = {seed_of_path(d) for d in [*args.eval_dirs, *args.models]}
    seed = seeds.pop() if len(seeds) == 1 else None  # policies of two replicates: no one seed to name
    if configured:
        return {"rule": "configured", "seed": seed}
    return {"rule": "largest_gain", "methods": list(args.methods), "hard": hard, "seed": seed}


def cmd_plot_compute_matched(args) -> None:
    from nudgerl.reporting.figure_data import load_curves
    from nudgerl.reporting.figures import compute_matched

    curves = load_curves(args.curves) if args.curves else None
    seeds = args.run_seeds or {m: args.seeds for m in args.methods}
    fig, data = compute_matched(Path(args.eval_root), Path(args.runs_root), args.methods, args.benchmarks, seeds,
                                curves=curves, curve_benchmarks=args.curve_benchmarks, n_boot=args.bootstrap_samples)
    inputs = [Path(args.eval_root) / m / f"seed{s}" / f"{b}.problems.jsonl"
              for m in args.methods for s in seeds[m] for b in args.benchmarks]
    inputs += [Path(args.runs_root) / m / f"seed{s}" / "metrics.jsonl" for m in args.methods if m != "base"
               for s in seeds[m]]
    _save_figure(fig, data, args.out_prefix, {"methods": args.methods}, [*inputs, *(args.curves or [])])


def _regime_map_outputs(args, render_table, draw) -> None:
    """A regime-map grid (``args.grid``) to its table, provenance and figure: ``render_table(runs,
    cells, grid)`` writes the Markdown, ``draw(runs, cells, grid)`` returns (figure, plotted data)."""
    from nudgerl.reporting import regime_map as rm
    from nudgerl.io import atomic_write_text, write_provenance

    g = args.grid
    accuracies = g.get("accuracies", [1.0])  # the map's second axis; 1: the first axis' cells
    runs = rm.run_table(Path(args.root), g["shares"], g["methods"], g["seeds"], g["reached"], accuracies)
    from nudgerl.verdicts import VerdictRule

    cells = rm.cell_table(Path(args.root), g["shares"], g["methods"], g["seeds"], g["reached"], g["reference"],
                          g["against"], n_boot=args.bootstrap_samples, accuracies=accuracies,
                          rule=VerdictRule.from_section(g.get("verdicts")))
    csv, md = Path(args.table_prefix + ".csv"), Path(args.table_prefix + ".md")
    atomic_write_text(csv, runs.to_csv(index=False))
    atomic_write_text(md, render_table(runs, cells, g))
    inputs = [Path(args.root) / rm.cell_tag(sh, a) / sub for sh in g["shares"] for a in accuracies for s in g["seeds"]
              for sub in [f"diagnostics/seed{s}.json", *(f"curves/{m}/seed{s}.jsonl" for m in g["methods"])]]
    write_provenance(csv, g, {"runs": g["seeds"]}, inputs, outputs=[md])
    fig, data = draw(runs, cells, g)
    data["cells"] = cells.to_dict(orient="records")
    _save_figure(fig, data, args.figure_prefix, g, inputs)
    print(md.read_text())


def cmd_regime_map(args) -> None:
    from nudgerl.reporting import figures
    from nudgerl.reporting import regime_map as rm

    _regime_map_outputs(args, lambda runs, cells, g: rm.render_markdown(runs, cells, g["reached"], g["samples"],
                                                                        g["every"]),
                        lambda runs, cells, g: figures.regime_map(runs, cells, g["reached"], g["samples"]))


def cmd_regime_map_baselines(args) -> None:
    from nudgerl.reporting import figures
    from nudgerl.reporting import regime_map as rm

    def draw(runs, cells, g):
        fig, data = figures.regime_map_baselines(runs, cells)
        from nudgerl.verdicts import VerdictRule

        verdicts = rm.beats_every_baseline(cells, g["reference"], g["against"], VerdictRule.from_section(g.get("verdicts")))
        return fig, {**data, "beats_every_baseline": {str(k): v for k, v in verdicts.items()}}

    from nudgerl.verdicts import VerdictRule

    _regime_map_outputs(args, lambda runs, cells, g: rm.render_baselines_markdown(
        runs, cells, g["reference"], g["against"], g["samples"], VerdictRule.from_section(g.get("verdicts"))), draw)


def cmd_regime_map_accuracy(args) -> None:
    from nudgerl.reporting import figures
    from nudgerl.reporting import regime_map as rm

    g = args.grid
    checkpoints = rm.checkpoint_table(Path(args.root), g["shares"][0], g["accuracies"], g["methods"], g["seeds"])
    _regime_map_outputs(args, lambda runs, cells, g: rm.render_accuracy_markdown(
        runs, cells, checkpoints, g["shares"][0], g["samples"]),
        lambda runs, cells, g: figures.regime_map_accuracy(runs, cells, checkpoints))


TITLE = "figures: the paper's figures and the regime map"


def _figure(subparsers, name, fn, help_):
    p = add_command(subparsers, name, fn, help_)
    p.add_argument("--bootstrap-samples", type=int, default=1000)
    p.add_argument("--out-prefix", required=True, help="writes <prefix>.png, .pdf and .json (plotted series)")
    return p


def register(subparsers) -> None:
    p = _figure(subparsers, "plot-training-curves", cmd_plot_training_curves,
                "pass@1 against training step (paper Fig. 3)")
    p.add_argument("--curves", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)

    p = add_command(subparsers, "plot-curves", cmd_plot_curves, "training-reward figure from metrics.jsonl files")
    p.add_argument("--runs", nargs="+", required=True)
    p.add_argument("--out", required=True)

    p = _figure(subparsers, "plot-eps-high", cmd_plot_eps_high, "GRPO pass@1 against eps_high (paper Fig. 5)")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--sweep-methods", nargs="+", required=True)
    p.add_argument("--eps-values", nargs="+", type=float, required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--reference-eps", type=float, required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)

    p = _figure(subparsers, "strategy-diversity", cmd_strategy_diversity,
                "distinct strategies, naive vs nudged (paper Fig. 1c)")
    add_pool_sampling_arguments(p)
    p.add_argument("--nudge", type=json_arg, required=True)
    p.add_argument("--out-json", required=True)

    p = _figure(subparsers, "case-study", cmd_case_study, "one problem, two trained policies' strategies (paper Fig. 4)")
    p.add_argument("--methods", nargs=2, required=True)
    p.add_argument("--models", nargs=2, required=True)
    p.add_argument("--eval-dirs", nargs=2, required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--params", type=json_arg, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-json", required=True)

    p = _figure(subparsers, "plot-compute-matched", cmd_plot_compute_matched,
                "pass@1 against rollout tokens, every method")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--runs-root", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, help="the replicates of every method")
    p.add_argument("--run-seeds", type=json_arg, help="or each method's replicates, as JSON {method: [seeds]}")
    p.add_argument("--curves", nargs="*")
    p.add_argument("--curve-benchmarks", nargs="*")

    for name, fn, help_, grid in [
            ("regime-map", cmd_regime_map, "NudgeRL against GRPO over the unhinted share of the always-right strategy",
             "shares, methods, seeds, reached, samples, every, reference, against (JSON)"),
            ("regime-map-baselines", cmd_regime_map_baselines,
             "the field's exploration fixes in cells of the regime map, beside its methods",
             "the baselines' sub-grid: shares, methods, seeds, reached, samples, reference, against (JSON)"),
            ("regime-map-accuracy", cmd_regime_map_accuracy,
             "the map's second axis: NudgeRL against GRPO over the accuracy of an unhinted choice of the strategy",
             "the axis' grid: shares (one), accuracies (1 first: the map's cell), methods, seeds, reached, samples, "
             "reference, against (JSON)")]:
        p = add_command(subparsers, name, fn, help_)
        p.add_argument("--root", required=True, help="the regime map's folder (share<s>[_accuracy<a>]/diagnostics, curves)")
        p.add_argument("--grid", type=json_arg, required=True, help=grid)
        p.add_argument("--bootstrap-samples", type=int, default=2000)
        p.add_argument("--table-prefix", required=True)
        p.add_argument("--figure-prefix", required=True)
