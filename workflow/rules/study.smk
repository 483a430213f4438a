# The study (`snakemake study --cores 2 --configfile config/study.yaml`):
# everything the default leaves out, on more replicates. The default's whole matrix on the
# study's seeds (Table 1, claims, ablations and the eps_high sweep on `ablation_seeds`), the
# regime map, and tables of its own: exploration success on two disjoint seed sets, the
# common-regime check that RL works at all, and, with the map's common cells' runs evaluated on
# the benchmarks, the claims judged there too (in tables/claims) and the fixes' Table 1 there.
# Organism only; not part of `all`.
if TASK == "organism" and STUDY:

    rule seed_set_agreement:
        """Exploration success per method on each of two disjoint seed sets; Boschloo's test between them."""
        input:
            f"{RESULTS}/tables/exploration.csv",
        output:
            csv=f"{RESULTS}/tables/seed_set_agreement.csv",
            md=f"{RESULTS}/tables/seed_set_agreement.md",
            html=report(f"{RESULTS}/tables/seed_set_agreement.html", caption="../report/seed_set_agreement.rst",
                        category=REPORT_STUDY, labels=report_labels("Seed-set agreement")),
        params:
            seed_sets=STUDY_SEED_SET_ARGS,
            confidence=EXPLORATION_CONFIDENCE,
            alpha=VERDICT_ALPHA,
            prefix=table_prefix,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/study/seed_set_agreement.log",
        benchmark:
            f"{RESULTS}/benchmarks/study/seed_set_agreement.tsv"
        shell:
            "nudgerl seed-set-agreement --exploration {input} --seed-sets {params.seed_sets} "
            "--confidence {params.confidence} --alpha {params.alpha} --out-prefix {params.prefix} > {log} 2>&1"

    rule rl_works:
        """In the regime map's common cells, every replicate's run ends above its own base model."""
        input:
            f"{RESULTS}/tables/regime_map.csv",
        output:
            csv=f"{RESULTS}/tables/rl_works.csv",
            md=f"{RESULTS}/tables/rl_works.md",
            html=report(f"{RESULTS}/tables/rl_works.html", caption="../report/rl_works.rst",
                        category=REPORT_STUDY, labels=report_labels("RL works (common regime)")),
        params:
            shares=STUDY_COMMON_SHARES,
            method=STUDY_RL_WORKS_METHOD,
            prefix=table_prefix,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/study/rl_works.log",
        benchmark:
            f"{RESULTS}/benchmarks/study/rl_works.tsv"
        shell:
            "nudgerl rl-works --regime-map {input} --shares {params.shares} --method {params.method} "
            "--out-prefix {params.prefix} > {log} 2>&1"

    rule regime_map_evaluate:
        """A common cell's run on every benchmark, as `evaluate` does for the matrix (the cell's claims)."""
        input:
            model=f"{RMAP_CELL}/runs/{{method}}/seed{{seed}}/model",
            benchmarks=benchmark_files(),
        output:
            summary=f"{RMAP_CELL}/eval/{{method}}/seed{{seed}}/summary.json",
            problems=expand(f"{RMAP_CELL}/eval/{{method}}/seed{{seed}}/{{bench}}.problems.jsonl", bench=BENCHMARKS,
                            allow_missing=True),
        wildcard_constraints:
            cell="|".join(STUDY_CLAIM_CELLS) or "none",
        params:
            cfg=section("eval", exclude=EVAL_EXCLUDE),
            prompt=lambda w: prompt_arg("eval"),
            out_dir=lambda w, output: os.path.dirname(output.summary),
        threads: rule_threads("evaluate")
        resources:
            **rule_resources("evaluate", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/{{cell}}/evaluate_{{method}}_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/{{cell}}/evaluate_{{method}}_seed{{seed}}.tsv"
        shell:
            "nudgerl evaluate --model {input.model} {params.prompt} --benchmarks {input.benchmarks} "
            "--seed {wildcards.seed} --params {params.cfg:q} --threads {threads} --out-dir {params.out_dir} > {log} 2>&1"

    rule regime_map_cell_baselines_table:
        """The field's fixes beside GRPO and NudgeRL in a common cell of the map: Avg pass@1 on the benchmarks."""
        input:
            lambda w: expand(f"{RMAP_CELL}/eval/{{method}}/seed{{seed}}/summary.json", cell=w.cell,
                             method=study_cell_table_methods(w.cell), seed=RMAP_BASELINE_SEEDS),
        output:
            csv=f"{RESULTS}/tables/baselines_{{cell}}.csv",
            md=f"{RESULTS}/tables/baselines_{{cell}}.md",
            tex=f"{RESULTS}/tables/baselines_{{cell}}.tex",
            html=report(f"{RESULTS}/tables/baselines_{{cell}}.html", caption="../report/baselines.rst",
                        category=REPORT_STUDY, labels=report_labels(lambda w: f"The field's fixes, {w.cell}")),
        wildcard_constraints:
            cell="|".join(STUDY_CLAIM_CELLS) or "none",
        params:
            methods=lambda w: study_cell_table_methods(w.cell),
            benchmarks=BENCHMARKS,
            seeds=RMAP_BASELINE_SEEDS,
            n_boot=N_BOOT,
            reference=lambda w: study_cell_table_reference(w.cell),
            exploration=TABLE1_EXPLORATION_ARG,
            prefix=table_prefix,
            eval_root=lambda w: f"{RMAP_DIR}/{w.cell}/eval",
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/study/baselines_{{cell}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/study/baselines_{{cell}}.tsv"
        shell:
            "nudgerl table --title 'The field exploration fixes, regime map cell {wildcards.cell}' "
            "--eval-root {params.eval_root} --methods {params.methods} --benchmarks {params.benchmarks} "
            "--seeds {params.seeds} --bootstrap-samples {params.n_boot} --reference {params.reference} "
            "{params.exploration} --out-prefix {params.prefix} > {log} 2>&1"

    rule study:
        """`snakemake study`: the default's outputs on the study's seeds, the regime map, the study's tables."""
        input:
            final_outputs(),
            rules.regime_map.input,
            study_tables(),

else:

    rule study:
        """`snakemake study` without the study's configuration: stops while building the DAG, naming it."""
        input:
            study_needs_its_config,
