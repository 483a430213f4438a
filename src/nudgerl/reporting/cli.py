"""Subcommands of the report box (workflow/rules/report.smk, base.smk's pages, the audit):
Table 1 and the ablations, per-replicate tables, the paper's claims, compute, the audit.
Every figure's subcommand (report.smk's training_reward too) is in
:mod:`nudgerl.reporting.figure_cli`."""

from __future__ import annotations

import json
from pathlib import Path

from nudgerl.arguments import add_command, json_arg


def cmd_table(args) -> None:
    from nudgerl.io import write_provenance
    from nudgerl.reporting.tables import write_table

    reference = args.reference if args.reference and args.reference != "none" else None
    exploration = None
    if args.exploration_share is not None:
        exploration = {"strategy": args.exploration_strategy, "success_share": args.exploration_share,
                       "confidence": args.exploration_confidence}
    aa = tuple(args.aa) if args.aa else None
    paths = write_table(args.eval_root, args.methods, args.benchmarks, args.seeds, args.out_prefix,
                        title=args.title, n_boot=args.bootstrap_samples, labels=args.labels, reference=reference,
                        exploration=exploration, aa=aa, base_model_seed=args.base_model_seed)
    records = [Path(args.eval_root) / m / f"seed{s}" / f"{b}.{kind}.jsonl"
               for m in dict.fromkeys([*args.methods, *([reference] if reference else []), *(aa or ())])
               for s in args.seeds for b in args.benchmarks
               for kind in ("problems", *(("samples",) if exploration else ()))]
    for path in paths:
        write_provenance(path, {"methods": args.methods, "benchmarks": args.benchmarks, "reference": reference,
                                **({"aa": list(aa)} if aa else {}),
                                **({"exploration": exploration} if exploration else {}),
                                **({"base_model_seed": args.base_model_seed} if args.base_model_seed is not None else {})},
                         {"runs": args.seeds}, records)


def _markdown_page(md: Path, title: str) -> Path:
    """The table's HTML page beside its .md (what `snakemake --report` shows inline)."""
    from nudgerl.reporting.report_pages import write_markdown_page

    return write_markdown_page(md.read_text(), md.with_suffix(".html"), title)


def _problem_records_of(eval_root, methods, seeds, benchmarks) -> list[Path]:
    return [Path(eval_root) / m / f"seed{s}" / f"{b}.problems.jsonl" for m in methods for s in seeds for b in benchmarks]


def _samples_per_problem(eval_root, method, seed) -> int:
    return json.loads((Path(eval_root) / method / f"seed{seed}" / "summary.json").read_text()).get("samples_per_problem")


def cmd_replicate_table(args) -> None:
    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.reporting.tables import render_replicates, replicate_rows

    df = replicate_rows(args.eval_root, args.methods, args.benchmarks, args.seeds, args.reference,
                        n_boot=args.bootstrap_samples)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, render_replicates(df, args.methods, _samples_per_problem(args.eval_root, args.methods[0],
                                                                                    args.seeds[0]), args.reference,
                                            base_model_seed=args.base_model_seed))
    html = _markdown_page(md, "Table 1 per replicate")
    write_provenance(csv, {"methods": args.methods, "benchmarks": args.benchmarks, "reference": args.reference},
                     {"runs": args.seeds}, _problem_records_of(args.eval_root, args.methods, args.seeds,
                                                               args.benchmarks), outputs=[md, html])
    print(md.read_text())


def cmd_exploration_table(args) -> None:
    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.reporting.exploration import exploration_rows, exploration_table, render_markdown
    from nudgerl.reporting.tables import method_label

    rows = exploration_rows(args.eval_root, args.methods, args.seeds, args.benchmarks, args.strategy, args.success_share)
    table = exploration_table(rows, args.reference, args.confidence)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    # one CSV row per run, its method's figures beside; a run's own count is run_<name> (found,
    # families_found), never pandas' _x / _y suffixes
    runs = rows.rename(columns={c: f"run_{c}" for c in ("found", "families_found") if c in rows})
    atomic_write_text(csv, table.merge(runs, on="method").to_csv(index=False))
    atomic_write_text(md, render_markdown(table, rows, args.reference, args.strategy, args.success_share,
                                          args.confidence, label=method_label))
    html = _markdown_page(md, "Exploration success")
    samples = [Path(args.eval_root) / m / f"seed{s}" / f"{b}.samples.jsonl"
               for m in args.methods for s in args.seeds for b in args.benchmarks]
    write_provenance(csv, {"methods": args.methods, "benchmarks": args.benchmarks, "reference": args.reference,
                           "strategy": args.strategy, "success_share": args.success_share,
                           "confidence": args.confidence},
                     {"runs": args.seeds}, [*_problem_records_of(args.eval_root, args.methods, args.seeds,
                                                                 args.benchmarks), *samples], outputs=[md, html])
    print(md.read_text())


def cmd_claims(args) -> None:
    import pandas as pd

    from nudgerl.reporting.claims import build_claims, evaluate_claims, measured_shares, render_markdown, share_range
    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.verdicts import VerdictRule

    try:
        rule = VerdictRule.from_section(args.verdicts)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"nudgerl claims: error: --verdicts: {e}")

    # The run's own matrix, then each --cell (a regime map cell judged on its own runs).
    regimes = [{"regime": args.regime, "eval_root": args.eval_root, "runs_root": args.runs_root,
                "roles": args.roles, "diagnoses": args.regime_diagnoses or []}, *(args.cell or [])]
    for i, spec in enumerate(regimes[1:], 1):
        missing = [k for k in ("regime", "eval_root", "runs_root", "roles", "diagnoses") if k not in spec]
        if missing:
            raise SystemExit(f"nudgerl claims: error: --cell number {i} has no key {', '.join(map(repr, missing))}")
    if len(regimes) > 1 and not args.regime:
        raise SystemExit("nudgerl claims: error: --cell needs --regime (the name of the run's own matrix's regime)")
    frames, records, methods = [], [], set()
    for spec in regimes:
        label = None
        if spec["regime"]:
            label = spec["regime"] + (f": {share_range(measured_shares(spec['diagnoses']))}" if spec["diagnoses"] else "")
        claims = build_claims(spec["roles"])
        aa = spec["roles"].get("aa")
        frames.append(evaluate_claims(claims, spec["eval_root"], spec["runs_root"], args.benchmarks,
                                      n_boot=args.bootstrap_samples, regime=label, rule=rule, aa=aa))
        if aa:
            records += _problem_records_of(spec["eval_root"], [aa["a"], aa["b"]], aa["seeds"], args.benchmarks)
        methods |= {m for c in claims for pair in c.comparisons for m in pair}
        records += [p for c in claims for pair in c.comparisons for p in _problem_records_of(
            spec["eval_root"], pair, c.seeds, args.benchmarks)]
        records += [Path(spec["runs_root"]) / m / f"seed{s}" / "metrics.jsonl" for c in claims[:1]
                    for pair in c.comparisons for m in pair for s in c.seeds]
        records += list(spec["diagnoses"])
    df = pd.concat(frames, ignore_index=True)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, render_markdown(df, _samples_per_problem(args.eval_root, args.roles["nudgerl"],
                                                                    args.roles["seeds"][0]), rule))
    html = _markdown_page(md, "The paper's claims beside ours")
    write_provenance(csv, {"roles": args.roles, "methods": sorted(methods), "verdicts": vars(rule),
                           **({"regime": args.regime, "cells": args.cell} if args.cell else {})},
                     {"runs": args.roles["seeds"]}, sorted(set(map(Path, records))), outputs=[md, html])
    print(md.read_text())


def cmd_base_model_table(args) -> None:
    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.evaluation.regime import replicate_markdown, replicate_table

    df = replicate_table(args.regimes)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, df.to_csv(index=False))
    atomic_write_text(md, replicate_markdown(df))
    html = _markdown_page(md, "Base models of the replicates")
    write_provenance(csv, {}, {}, args.regimes, outputs=[md, html])
    print(md.read_text())


def cmd_diagnostics_md(args) -> None:
    from nudgerl.evaluation.diagnostics import to_markdown
    from nudgerl.io import atomic_write_text, write_provenance

    md = to_markdown(json.loads(Path(args.input).read_text()))
    atomic_write_text(args.out, md)
    write_provenance(args.out, {}, {}, [args.input])
    if args.html:
        from nudgerl.reporting.report_pages import write_markdown_page

        write_markdown_page(md, args.html, "Base-model diagnosis")
        write_provenance(args.html, {}, {}, [args.input])


def cmd_compute_table(args) -> None:
    from nudgerl.reporting.compute import write_compute_csv
    from nudgerl.io import write_provenance

    rows = write_compute_csv(Path(args.results), Path(args.out), json.loads(args.gpus_per_rule))
    write_provenance(args.out, {}, {}, [r["benchmark_file"] for r in rows])
    if args.html:
        from nudgerl.reporting.report_pages import write_csv_page

        write_csv_page(args.out, args.html, "Compute per job")
        write_provenance(args.html, {}, {}, [args.out])
    print(f"{len(rows)} jobs; wall {sum(r['wall_s'] or 0 for r in rows):.0f} s in total")


def cmd_audit(args) -> None:
    from nudgerl.reporting.audit import audit, result_folders
    from nudgerl.io import atomic_write_text

    if args.results or args.dvc_only:
        folders = [args.results or "results"]
    else:  # every configuration's results folder in this checkout, each audited on its own
        folders = [str(p.relative_to(args.cwd)) for p in result_folders(Path(args.cwd) / "results")]
        if not folders:
            raise SystemExit(f"nudgerl audit: no results folder with tables, figures or diagnostics under "
                             f"{Path(args.cwd) / 'results'}")
    reports = [(f, audit(f, cwd=args.cwd, check_dvc=not args.no_dvc, dvc_stages=args.dvc_stages,
                         check_artifacts=not args.dvc_only, artifacts=args.artifacts)) for f in folders]
    text = "".join(r.text() if len(reports) == 1 else f"== {f}\n{r.text()}" for f, r in reports)
    print(text, end="")
    if args.out:
        atomic_write_text(args.out, text)
    if args.html:
        from nudgerl.reporting.report_pages import write_text_page

        write_text_page(text, args.html, "Artifact audit")
    if not all(r.ok for _, r in reports):
        raise SystemExit(1)


def cmd_results_pages(args) -> None:
    import sys

    from nudgerl.reporting.results_pages import check_page, layout_problems, write_page

    try:
        if args.check_layout:
            problems = layout_problems(args.results, args.out)
        elif args.check:
            problems = check_page(args.results, args.out)
        else:
            print(f"wrote {write_page(args.results, args.out, args.figures_dir)}")
            return
    except FileNotFoundError as e:
        raise SystemExit(f"nudgerl results-pages: error: {e}")
    if problems:
        what = "--check-layout" if args.check_layout else "--check"
        print(f"nudgerl results-pages {what}: {args.out} does not match {args.results}:", file=sys.stderr)
        print("\n".join(f"  {p}" for p in problems), file=sys.stderr)
        raise SystemExit(2)
    print(f"{args.out}: " + ("laid out as the page of" if args.check_layout else
                             "every table block and the provenance line match") + f" {args.results}")


def cmd_prose_numbers(args) -> None:
    import sys

    from nudgerl.reporting.prose_numbers import ProseNumberError, check

    try:
        mismatches, seen = check(Path(args.root), write=args.write)
    except (ProseNumberError, FileNotFoundError) as e:
        raise SystemExit(f"nudgerl prose-numbers: error: {e}")
    if mismatches and not args.write:
        print(f"nudgerl prose-numbers: {len(mismatches)} of {seen} quoted numbers disagree with their sources:",
              file=sys.stderr)
        print("\n".join(f"  {m}" for m in mismatches), file=sys.stderr)
        raise SystemExit(2)
    print(f"{seen} quoted numbers " + (f"read; {len(mismatches)} rewritten from their sources" if args.write
                                       else "match their sources"))


def cmd_front_table(args) -> None:
    import sys

    from nudgerl.reporting.front_table import FrontTableError, update

    try:
        same = update(Path(args.root), check=args.check)
    except (FrontTableError, FileNotFoundError) as e:
        raise SystemExit(f"nudgerl front-table: error: {e}")
    if args.check and not same:
        print("nudgerl front-table --check: README.md's result table is not what docs/results/claims_by_regime.md "
              "gives (regenerate it with `nudgerl front-table`)", file=sys.stderr)
        raise SystemExit(2)
    print("README.md's result table " + ("matches" if same else "rewritten from") + " docs/results/claims_by_regime.md")


def cmd_claims_by_regime(args) -> None:
    import sys

    from nudgerl.io import atomic_write_text
    from nudgerl.reporting.claims_by_regime import check, render

    try:
        if not args.check:
            atomic_write_text(Path(args.out), render(args.results, args.out))
            print(f"wrote {args.out}")
            return
        problems = check(args.results, args.out)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"nudgerl claims-by-regime: error: {e}")
    if problems:
        print(f"nudgerl claims-by-regime --check: {args.out} does not match {' '.join(args.results)}:", file=sys.stderr)
        print("\n".join(f"  {p}" for p in problems), file=sys.stderr)
        raise SystemExit(2)
    print(f"{args.out}: matches {' '.join(args.results)}")


def cmd_power_table(args) -> None:
    """A run's power table (--tables, --claims for the A/A SD), or the methods page's block (--doc)."""
    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.reporting import power
    from nudgerl.verdicts import VerdictRule

    if args.doc:
        import copy

        import yaml
        from snakemake.utils import update_config

        # merged as Snakemake merges --configfile over config/config.yaml (the configs are the workflow's own)
        base = yaml.safe_load(Path(args.configs[0]).read_text())
        configs = {}
        for path in args.configs:
            merged = copy.deepcopy(base)
            if path != args.configs[0]:
                update_config(merged, yaml.safe_load(Path(path).read_text()))
            configs[Path(path).name] = merged
        rule = VerdictRule.from_section(((base.get("report") or {}).get("verdicts")))
        doc = Path(args.doc)
        text = doc.read_text()
        try:
            new = power.replace_block(text, power.doc_block(configs, rule), args.doc)
        except ValueError as e:
            raise SystemExit(f"nudgerl power-table: error: {e}")
        if args.check:
            if new != text:
                raise SystemExit(f"nudgerl power-table --check: {args.doc}'s generated block differs from what "
                                 f"{' '.join(args.configs)} give; regenerate without --check")
            return
        atomic_write_text(doc, new)
        return
    if not args.tables or not args.out_prefix:
        raise SystemExit("nudgerl power-table: error: give --tables and --out-prefix (a run's table), or --doc")
    rule = VerdictRule.from_section(args.verdicts)
    aa_sd = power.aa_sd_of(args.claims) if args.claims else None
    table = power.power_table(args.tables, rule, aa_sd)
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, table.to_csv(index=False))
    atomic_write_text(md, power.render_markdown(table, rule, aa_sd, "this run's A/A pair, tables/claims.csv"))
    html = _markdown_page(md, "What each table can detect")
    write_provenance(csv, {"tables": args.tables, "verdicts": vars(rule)}, {}, [args.claims] if args.claims else [],
                     outputs=[md, html])
    print(md.read_text())


def cmd_plan_cost(args) -> None:
    """GPU-hours of a configuration's DAG (its dry run), per rule and model, and the jobs that
    cannot finish inside their time limit and resume chain (nudgerl.reporting.gpu_hours)."""
    import subprocess

    import yaml

    from nudgerl.io import atomic_write_text, merged_configfiles
    from nudgerl.reporting import gpu_hours as cost
    from nudgerl.tools import tool_command

    # merged as Snakemake merges --configfile over config/config.yaml
    config = merged_configfiles("config/config.yaml", *args.configfile)
    params = yaml.safe_load(Path("params.yaml").read_text())
    pool_hints = int((params.get((config.get("pools") or {}).get("stage"), {}) or {}).get("n", 5))
    proc = subprocess.run([*tool_command("snakemake"), "all", "-n", "--configfile", *args.configfile],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the dry run of {' '.join(args.configfile)} failed:\n{proc.stderr[-3000:]}")
    jobs = cost.dry_run_jobs(proc.stdout + proc.stderr)
    gpu, eff = cost.GPUS[args.gpu], cost.Efficiency()
    costs = cost.plan(jobs, config, gpu, eff, cost.read_measured(args.measured), pool_hints)
    text = cost.render_markdown(costs, gpu, eff, " ".join(args.configfile), config, args.checkpoint_minutes)
    if args.doc:
        doc = Path(args.doc)
        new = cost.replace_block(doc.read_text(), text, args.doc)
        if args.check:
            if new != doc.read_text():
                raise RuntimeError(f"{args.doc}'s generated plan-cost block differs from what "
                                   f"{' '.join(args.configfile)} give; regenerate without --check")
            return
        atomic_write_text(doc, new)
    print(text, end="")


TITLE = "reporting: tables, claims, compute accounting, audit"


def _seed_set(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"nudgerl seed-set-agreement: error: a seed set is comma-separated integers, got {text!r}")


def cmd_seed_set_agreement(args) -> None:
    import pandas as pd

    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.reporting.study import render_agreement, seed_set_agreement
    from nudgerl.reporting.tables import method_label

    seed_sets = [_seed_set(s) for s in args.seed_sets]
    try:
        table = seed_set_agreement(pd.read_csv(args.exploration), seed_sets, args.confidence, args.alpha)
    except ValueError as e:
        raise SystemExit(f"nudgerl seed-set-agreement: error: {args.exploration}: {e}")
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, table.to_csv(index=False))
    atomic_write_text(md, render_agreement(table, seed_sets, args.confidence, label=method_label, alpha=args.alpha))
    html = _markdown_page(md, "Exploration success on two seed sets")
    write_provenance(csv, {"seed_sets": seed_sets, "confidence": args.confidence, "alpha": args.alpha},
                     {"seed_sets": seed_sets}, [args.exploration], outputs=[md, html])
    print(md.read_text())


def cmd_rl_works(args) -> None:
    import pandas as pd

    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.reporting.study import render_rl_works, rl_works
    from nudgerl.reporting.tables import method_label

    try:
        table = rl_works(pd.read_csv(args.regime_map), args.shares, args.method)
    except ValueError as e:
        raise SystemExit(f"nudgerl rl-works: error: {args.regime_map}: {e}")
    csv, md = Path(args.out_prefix + ".csv"), Path(args.out_prefix + ".md")
    atomic_write_text(csv, table.to_csv(index=False))
    atomic_write_text(md, render_rl_works(table, label=method_label))
    html = _markdown_page(md, "RL works at all (common regime)")
    write_provenance(csv, {"shares": args.shares, "method": args.method}, {}, [args.regime_map], outputs=[md, html])
    print(md.read_text())


def register(subparsers) -> None:
    p = add_command(subparsers, "table", cmd_table, "a results table (Table 1 or an ablation) as csv, md and tex")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--labels", nargs="+", help="row labels, one per method (default: derived from the ids)")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    p.add_argument("--title", required=True)
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--out-prefix", required=True)
    p.add_argument("--reference", help="paired test of every other method against this one (e.g. grpo8)")
    p.add_argument("--exploration-share", type=float,
                   help="add each method's exploration success (organism runs): a run found the rare strategy when "
                        "its share of hard-problem samples exceeds this")
    p.add_argument("--exploration-strategy", default="difference_table", help="the rare-but-right strategy's label")
    p.add_argument("--exploration-confidence", type=float, default=0.95)
    p.add_argument("--aa", nargs=2, metavar=("METHOD", "REPEAT"),
                   help="the A/A pair (config report.verdicts.aa): a caption sentence on what identical arms differ by")
    p.add_argument("--base-model-seed", type=int,
                   help="every replicate started from this one base model (config base_model_seed): the caption says so")

    p = add_command(subparsers, "replicate-table", cmd_replicate_table,
                    "per-replicate Avg pass@1 and paired difference from Base")
    p.add_argument("--base-model-seed", type=int,
                   help="every replicate started from this one base model (config base_model_seed): the caption says so")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    p.add_argument("--reference", default="base")
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--out-prefix", required=True)

    p = add_command(subparsers, "exploration-table", cmd_exploration_table,
                    "replicates whose hint-free policy found the rare strategy (k of n, exact interval)")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--methods", nargs="+", required=True, help="the reference among them")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    p.add_argument("--reference", required=True, help="Fisher's exact test of every other method against it")
    p.add_argument("--strategy", default="difference_table", help="the rare-but-right strategy's label")
    p.add_argument("--success-share", type=float, required=True,
                   help="a run found the strategy when its share of hard-problem samples exceeds this")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--out-prefix", required=True)

    p = add_command(subparsers, "claims", cmd_claims, "the paper's seven claims beside ours, with a verdict each")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--runs-root", required=True)
    p.add_argument("--roles", type=json_arg, required=True, help="method ids of each role (nudgerl.reporting.claims)")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--verdicts", type=json_arg, default={},
                   help="the verdict rule's constants (config report.verdicts: alpha, min_replicates, parity_margin) "
                        "as JSON; the A/A pair comes with --roles (key aa)")
    p.add_argument("--regime", help="the regime of the run's own matrix (e.g. rare); with it every row names its regime")
    p.add_argument("--regime-diagnoses", nargs="+", metavar="PATH",
                   help="the matrix's base-model diagnoses (diagnostics/base_models.csv): the regime's measured share")
    p.add_argument("--cell", type=json_arg, action="append",
                   help="another regime judged on its own runs, as JSON: regime, eval_root, runs_root, roles, "
                        "diagnoses (its base models' diagnosis JSONs); repeatable")
    p.add_argument("--out-prefix", required=True)

    p = add_command(subparsers, "plan-cost", cmd_plan_cost,
                    "GPU-hours of a configuration's DAG before any are spent, and the jobs that cannot finish")
    p.add_argument("--configfile", nargs="+", required=True, help="as for snakemake (over config/config.yaml)")
    p.add_argument("--gpu", default="h100", choices=["h100", "h200", "a100"], help="the card (nudgerl.reporting.gpu_hours.GPUS)")
    p.add_argument("--measured", help="the first-node check's JSON: measured engine figures per model")
    p.add_argument("--doc", help="also rewrite this page's generated plan-cost block (docs/cluster.md)")
    p.add_argument("--check", action="store_true", help="with --doc: fail when the page's block differs")
    p.add_argument("--checkpoint-minutes", type=float, default=60.0,
                   help="training a lost node may cost: the checkpoint interval that bounds it, per run kind")

    p = add_command(subparsers, "power-table", cmd_power_table,
                    "what each table's replicates can detect by the verdict rule (80 % power)")
    p.add_argument("--tables", type=json_arg, help='[{"table": name, "replicates": n per arm}, ...] (a run\'s tables)')
    p.add_argument("--verdicts", type=json_arg, default={}, help="config report.verdicts as JSON")
    p.add_argument("--claims", help="the run's tables/claims.csv: its A/A pair's SD gives points")
    p.add_argument("--out-prefix")
    p.add_argument("--doc", help="instead: rewrite this page's generated power-table block (docs/methods.md)")
    p.add_argument("--configs", nargs="+", default=["config/config.yaml", "config/common.yaml", "config/study.yaml"],
                   help="with --doc: the configurations, each merged over the first")
    p.add_argument("--check", action="store_true", help="with --doc: fail when the page's block differs")

    p = add_command(subparsers, "claims-by-regime", cmd_claims_by_regime,
                    "the claims of several run folders side by side, each labelled with its base models' regime")
    p.add_argument("--results", nargs="+", required=True, help="run folders (results/<run_name>), one column each")
    p.add_argument("--out", required=True, help="the page (e.g. docs/results/claims_by_regime.md)")
    p.add_argument("--check", action="store_true", help="write nothing: exit 2 unless the page matches the runs")

    p = add_command(subparsers, "seed-set-agreement", cmd_seed_set_agreement,
                    "exploration success on two disjoint seed sets: k of n each, Boschloo's test between them")
    p.add_argument("--exploration", required=True, help="a run's tables/exploration.csv (one row per run)")
    p.add_argument("--seed-sets", nargs=2, required=True, metavar="SEEDS", help="two comma-separated seed lists")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--alpha", type=float, default=0.05, help="the sets agree when Boschloo's p >= alpha "
                                                             "(config report.verdicts.alpha)")
    p.add_argument("--out-prefix", required=True)

    p = add_command(subparsers, "rl-works", cmd_rl_works,
                    "in the common regime, every replicate's run ends above its own base model (regime map)")
    p.add_argument("--regime-map", required=True, help="the regime map's run table (tables/regime_map.csv)")
    p.add_argument("--shares", nargs="+", type=float, required=True, help="the common-regime share sets")
    p.add_argument("--method", default="grpo8")
    p.add_argument("--out-prefix", required=True)

    p = add_command(subparsers, "base-model-table", cmd_base_model_table,
                    "every replicate's base-model figures and regime verdict")
    p.add_argument("--regimes", nargs="+", required=True)
    p.add_argument("--out-prefix", required=True)

    p = add_command(subparsers, "diagnostics-md", cmd_diagnostics_md, "base-model diagnosis as a markdown summary")
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--html", help="also as an HTML page here (for snakemake --report)")

    p = add_command(subparsers, "compute-table", cmd_compute_table,
                    "compute accounting of every job (results/<run_name>/tables/compute.csv)")
    p.add_argument("--results", default="results")
    p.add_argument("--out", required=True)
    p.add_argument("--html", help="also as an HTML page here (for snakemake --report)")
    p.add_argument("--gpus-per-rule", default="{}",
                   help="JSON {rule: GPUs its jobs ask for} (config resources.gpu): their GPU-hours")

    p = add_command(subparsers, "audit", cmd_audit, "check every table/figure back to its records, checkpoints, data, pools")
    p.add_argument("--results", default=None,
                   help="one results folder (default: each results/<run_name>[/<model>] in the checkout)")
    p.add_argument("--cwd", default=".", help="workflow root (paths in sidecars are relative to it)")
    p.add_argument("--no-dvc", action="store_true", help="skip `dvc status`")
    p.add_argument("--dvc-only", action="store_true",
                   help="only the DVC stages (of --results' run, default all in dvc.lock): status and origin")
    p.add_argument("--dvc-stages", nargs="+", default=None, help="check only these DVC stages (default: all)")
    p.add_argument("--artifacts", nargs="+", default=None,
                   help="start only from these files' sidecars (a rule's declared inputs; default: every table, "
                        "figure and diagnosis under --results)")
    p.add_argument("--out", help="also write the report here")
    p.add_argument("--html", help="and as an HTML page here (for snakemake --report)")

    p = add_command(subparsers, "prose-numbers", cmd_prose_numbers,
                    "check every number quoted in README.md and docs/ (<!--n:KEY-->) against its source "
                    "(docs/numbers.yaml)")
    p.add_argument("--root", default=".", help="the repository (default: here)")
    p.add_argument("--write", action="store_true", help="put each source's value into the prose instead")

    p = add_command(subparsers, "front-table", cmd_front_table,
                    "README.md's result table (one row per claim) from docs/results/claims_by_regime.md; --check it")
    p.add_argument("--root", default=".", help="the repository (default: here)")
    p.add_argument("--check", action="store_true", help="write nothing: exit 2 unless README.md's table matches")

    p = add_command(subparsers, "results-pages", cmd_results_pages,
                    "one run's Markdown results page (its tables verbatim, provenance); --check it")
    p.add_argument("--results", required=True, help="the run folder, results/<run_name>")
    p.add_argument("--out", required=True, help="the page (docs/results/<run_name>.md)")
    p.add_argument("--figures-dir", help="link the run's figures/*.png to their committed copies here (docs/figures)")
    p.add_argument("--check", action="store_true",
                   help="write nothing: exit 2 unless the page's tables and provenance match the run folder")
    p.add_argument("--check-layout", action="store_true",
                   help="write nothing: exit 2 unless the page has the run's tables in order under the same headings "
                        "and a provenance line (numbers not compared: a page from another machine's run)")
