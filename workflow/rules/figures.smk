# The paper's figures, compute accounting and the artifact audit.
# Each figure rule writes <name>.png (in the report), .pdf and .json (the plotted series).



rule curve_eval:
    """Training curves: evaluate a run's checkpoints every eval.curve.every steps (step 0 = base)."""
    input:
        model=model_dir,
        metrics=f"{RESULTS}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
        base=base_model_input,
        benchmarks=expand(f"{DATA}/eval/{{bench}}.jsonl", bench=CURVE_BENCHMARKS),
    output:
        f"{RESULTS}/curves/{{method}}/seed{{seed}}/curve.jsonl",
    params:
        # the whole eval section: `curve` and the evaluate rule's vLLM engine keys (backend,
        # max_model_len, dtype, enforce_eager, gpu_memory_utilization), which curve-eval passes
        # to its one engine
        cfg=model_section("eval"),
        base=base_model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("eval"),
        run_dir=input_run_dir,
        launch=inference_launcher,  # NUDGERL_REQUIRE_CUDA=1 when the job asks for a GPU (nudgerl.hardware)
    threads: rule_threads("curve_eval")
    resources:
        **rule_resources("curve_eval", mem_mb=2000),
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/curve_eval/{{method}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/curve_eval/{{method}}_seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}{params.launch} curve-eval --run-dir {params.run_dir} --base-model {params.base} {params.prompt} "
        "--benchmarks {input.benchmarks} --seed {wildcards.seed} --params {params.cfg:q} --threads {threads} "
        "--out {output} > {log} 2>&1"


rule prune_checkpoints:
    """Delete a finished run's checkpoints but its curve's, once the curve is written (nudgerl prune-checkpoints)."""
    input:
        model=model_dir,
        metrics=f"{RESULTS}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
        curve=prune_curve_input,
    output:
        f"{RESULTS}/runs/{{method}}/seed{{seed}}/checkpoints_pruned.json",
    params:
        run_dir=input_run_dir,
        curve=lambda w, input: f"--curve {input.curve}" if input.curve else "",
        keep=prune_keep_steps,
    localrule: True  # file deletions on the shared file system: no GPU, no allocation
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/prune_checkpoints/{{method}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prune_checkpoints/{{method}}_seed{{seed}}.tsv"
    shell:
        "nudgerl prune-checkpoints --run-dir {params.run_dir} {params.curve} {params.keep} --out {output} > {log} 2>&1"


rule training_curves:
    """pass@1 on the curve benchmarks against training step (paper Fig. 3)."""
    input:
        expand(f"{RESULTS}/curves/{{method}}/seed{{seed}}/curve.jsonl", method=CURVE_METHODS, seed=CURVE_SEEDS,
               allow_missing=True),
    output:
        **figure_report_outputs("training_curves", "training_curves", REPORT_MAIN, "Training curves (Fig. 3)"),
    params:
        benchmarks=CURVE_BENCHMARKS,
        n_boot=N_BOOT,
        prefix=figure_prefix,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/training_curves.log",
    benchmark:
        f"{RESULTS}/benchmarks/training_curves.tsv"
    shell:
        "nudgerl plot-training-curves --curves {input} --benchmarks {params.benchmarks} "
        "--bootstrap-samples {params.n_boot} --out-prefix {params.prefix} > {log} 2>&1"


rule eps_high_scaling:
    """GRPO average pass@1 against eps_high, NudgeRL at the main eps_high as reference (paper Fig. 5)."""
    input:
        expand(f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json",
               method=[*(m for _, m in EPS_SWEEP), NUDGE_MAIN], seed=ABLATION_SEEDS, allow_missing=True),
    output:
        **figure_report_outputs("eps_high_scaling", "eps_high_scaling", REPORT_ABLATIONS,
                                "GRPO eps_high scaling (Fig. 5)"),
    params:
        methods=[m for _, m in EPS_SWEEP],
        eps=[e for e, _ in EPS_SWEEP],
        reference=NUDGE_MAIN,
        reference_eps=EPS_MAIN,
        eval_root=eval_root,
        benchmarks=BENCHMARKS,
        seeds=ABLATION_SEEDS,
        n_boot=N_BOOT,
        prefix=figure_prefix,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/eps_high_scaling.log",
    benchmark:
        f"{RESULTS}/benchmarks/eps_high_scaling.tsv"
    shell:
        "nudgerl plot-eps-high --eval-root {params.eval_root} --sweep-methods {params.methods} --eps-values {params.eps} "
        "--reference {params.reference} --reference-eps {params.reference_eps} --benchmarks {params.benchmarks} "
        "--seeds {params.seeds} --bootstrap-samples {params.n_boot} --out-prefix {params.prefix} > {log} 2>&1"


# Strategies are parsed from organism traces; a real-data labeler is not built yet.
if TASK != "math":

    rule strategy_diversity:
        """Distinct strategies among N naive vs N nudged base-model samples per problem (paper Fig. 1c)."""
        input:
            model=BASE_MODEL.format(seed=BASE_SEEDS[0]),
            train=rules.organism_data.output.train,
            pools=POOLS,
        output:
            data=f"{RESULTS}/diagnostics/strategy_diversity.json",
            **figure_report_outputs("strategy_diversity", "strategy_diversity", REPORT_DIAGNOSTICS,
                                    "Strategy diversity (Fig. 1c)"),
        params:
            cfg=sampling_section("strategy_diversity"),
            nudge=nudge_shape_section(),
            n_boot=N_BOOT,
            prefix=figure_prefix,
        threads: rule_threads("strategy_diversity")
        resources:
            **rule_resources("strategy_diversity", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/strategy_diversity.log",
        benchmark:
            f"{RESULTS}/benchmarks/strategy_diversity.tsv"
        shell:
            "nudgerl strategy-diversity --model {input.model} --train {input.train} --pools {input.pools} "
            "--params {params.cfg:q} --nudge {params.nudge:q} --threads {threads} --bootstrap-samples {params.n_boot} "
            "--out-json {output.data} --out-prefix {params.prefix} > {log} 2>&1"


    rule case_study:
        """One problem, 32 samples each from the GRPO- and the NudgeRL-trained policy (paper Fig. 4)."""
        input:
            models=[f"{RESULTS}/runs/{m}/seed{SEEDS[0]}/model" for m in CASE_METHODS],
            evals=[f"{RESULTS}/eval/{m}/seed{SEEDS[0]}/summary.json" for m in CASE_METHODS],
            benchmarks=benchmark_files(),
        output:
            data=f"{RESULTS}/diagnostics/case_study.json",
            **figure_report_outputs("case_study", "case_study", REPORT_DIAGNOSTICS, "Case study (Fig. 4)"),
        params:
            cfg=sampling_section("case_study"),
            methods=CASE_METHODS,
            eval_dirs=lambda w, input: [os.path.dirname(e) for e in input.evals],
            prefix=figure_prefix,
        threads: rule_threads("case_study")
        resources:
            **rule_resources("case_study", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/case_study.log",
        benchmark:
            f"{RESULTS}/benchmarks/case_study.tsv"
        shell:
            "nudgerl case-study --methods {params.methods} --models {input.models} --eval-dirs {params.eval_dirs} "
            "--benchmarks {input.benchmarks} --params {params.cfg:q} --threads {threads} "
            "--out-json {output.data} --out-prefix {params.prefix} > {log} 2>&1"


rule compute_matched:
    """Every method's pass@1 against the rollout tokens its training generated."""
    input:
        evals=[f"{RESULTS}/eval/{m}/seed{s}/summary.json" for m in EVALUATED for s in RUN_SEEDS[m]],
        metrics=[f"{RESULTS}/runs/{m}/seed{s}/metrics.jsonl" for m in EVALUATED if m != "base" for s in RUN_SEEDS[m]],
        curves=expand(f"{RESULTS}/curves/{{method}}/seed{{seed}}/curve.jsonl", method=CURVE_METHODS, seed=CURVE_SEEDS,
                      allow_missing=True),
    output:
        **figure_report_outputs("compute_matched", "compute_matched", REPORT_MAIN,
                                "Training curves vs rollout tokens (compute-matched)"),
    params:
        methods=EVALUATED,
        eval_root=eval_root,
        runs_root=runs_root,
        benchmarks=BENCHMARKS,
        curve_benchmarks=CURVE_BENCHMARKS,
        run_seeds=run_seeds_section(),
        n_boot=N_BOOT,
        prefix=figure_prefix,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/compute_matched.log",
    benchmark:
        f"{RESULTS}/benchmarks/compute_matched.tsv"
    shell:
        "nudgerl plot-compute-matched --eval-root {params.eval_root} --runs-root {params.runs_root} --methods {params.methods} "
        "--benchmarks {params.benchmarks} --run-seeds {params.run_seeds:q} --curves {input.curves} "
        "--curve-benchmarks {params.curve_benchmarks} --bootstrap-samples {params.n_boot} "
        "--out-prefix {params.prefix} > {log} 2>&1"


if BASELINES:

    rule baselines_figure:
        """The field's exploration fixes beside GRPO and NudgeRL: final pass@1 against the rollout
        tokens each method's training generated, on the baselines' replicates."""
        input:
            evals=[f"{RESULTS}/eval/{m}/seed{s}/summary.json" for m in BASELINE_TABLE_METHODS for s in BASELINE_SEEDS],
            metrics=[f"{RESULTS}/runs/{m}/seed{s}/metrics.jsonl" for m in BASELINE_TABLE_METHODS for s in BASELINE_SEEDS],
        output:
            **figure_report_outputs("baselines", "baselines_figure", REPORT_MAIN,
                                    "The field's exploration fixes: pass@1 vs rollout tokens"),
        params:
            methods=BASELINE_TABLE_METHODS,
            eval_root=eval_root,
            runs_root=runs_root,
            benchmarks=BENCHMARKS,
            seeds=BASELINE_SEEDS,
            n_boot=N_BOOT,
            prefix=figure_prefix,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/baselines_figure.log",
        benchmark:
            f"{RESULTS}/benchmarks/baselines_figure.tsv"
        shell:
            "nudgerl plot-compute-matched --eval-root {params.eval_root} --runs-root {params.runs_root} "
            "--methods {params.methods} --benchmarks {params.benchmarks} --seeds {params.seeds} "
            "--bootstrap-samples {params.n_boot} --out-prefix {params.prefix} > {log} 2>&1"


rule compute_table:
    """Compute accounting of every job that ran: wall/CPU time, peak memory, tokens, GPU-hours."""
    input:
        result_outputs(),
    output:
        csv=f"{RESULTS}/tables/compute.csv",
        html=report(f"{RESULTS}/tables/compute.html", caption="../report/compute.rst", category=REPORT_COMPUTE,
                    labels=report_labels("Compute per job")),
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/compute_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/compute_table.tsv"
    params:
        results=results_root,
        gpus=json.dumps(GPUS_PER_RULE),
    shell:
        "nudgerl compute-table --results {params.results} --gpus-per-rule {params.gpus:q} --out {output.csv} "
        "--html {output.html} > {log} 2>&1"


rule audit:
    """Every table and figure back to its records, checkpoints, data and pools: hashes + dvc status."""
    input:
        result_outputs(),
        f"{RESULTS}/tables/compute.csv",
        PRUNE_MARKERS,  # the audit reads each run's pruned.json: it runs after the prunes
    output:
        txt=f"{RESULTS}/audit/audit.txt",
        html=report(f"{RESULTS}/audit/audit.html", caption="../report/audit.rst", category=REPORT_COMPUTE,
                    labels=report_labels("Artifact audit")),
    resources:
        dvc_lock=1,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/audit.log",
    benchmark:
        f"{RESULTS}/benchmarks/audit.tsv"
    params:
        results=results_root,
        stages=[POOL_DVC_STAGE, ORACLE_DVC_STAGE],  # the DVC stages this config's results used
    shell:
        # from its own inputs only: `snakemake study` rewrites other tables beside it
        "nudgerl audit --results {params.results} --dvc-stages {params.stages} --artifacts {input:q} "
        "--out {output.txt} --html {output.html} > {log} 2>&1"
