rule table1:
    """The paper's Table 1: pass@1 per benchmark and Avg: Base, GRPO at each N, POPE, NudgeRL."""
    input:
        expand(f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json", method=METHODS, seed=SEEDS, allow_missing=True),
        expand(f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json", method=REFERENCE, seed=SEEDS, allow_missing=True),
        AA_EVALS,
    output:
        csv=f"{RESULTS}/tables/table1.csv",
        md=f"{RESULTS}/tables/table1.md",
        tex=f"{RESULTS}/tables/table1.tex",
        # the report shows HTML inline (a CSV would only be a download link)
        html=report(
            f"{RESULTS}/tables/table1.html",
            caption="../report/table1.rst",
            category=REPORT_MAIN,
            labels=report_labels("Table 1: pass@1 per benchmark"),
        ),
    params:
        methods=METHODS,
        benchmarks=BENCHMARKS,
        seeds=SEEDS,
        n_boot=N_BOOT,
        reference=REFERENCE,
        exploration=TABLE1_EXPLORATION_ARG,
        aa=TABLE1_AA_ARG,
        base_model=TABLE_BASE_MODEL_ARG,
        prefix=table_prefix,
        eval_root=eval_root,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/table1.log",
    benchmark:
        f"{RESULTS}/benchmarks/table1.tsv"
    shell:
        "nudgerl table --title 'Table 1' --eval-root {params.eval_root} --methods {params.methods} "
        "--benchmarks {params.benchmarks} --seeds {params.seeds} --bootstrap-samples {params.n_boot} "
        "--reference {params.reference} {params.exploration} {params.aa} {params.base_model} "
        "--out-prefix {params.prefix} > {log} 2>&1"


rule training_reward:
    """Training reward against step and against rollout tokens for every GRPO run."""
    input:
        expand(
            f"{RESULTS}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
            method=[*GRPO_METHODS, POPE_METHOD, NUDGE_MAIN],
            seed=SEEDS,
            allow_missing=True,
        ),
    output:
        png=report(
            f"{RESULTS}/figures/training_reward.png",
            caption="../report/training_reward.rst",
            category=REPORT_DIAGNOSTICS,
            labels=report_labels("Training reward"),
        ),
    params:
        runs=lambda w, input: [os.path.dirname(p) for p in input],
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/training_reward.log",
    benchmark:
        f"{RESULTS}/benchmarks/training_reward.tsv"
    shell:
        "nudgerl plot-curves --runs {params.runs} --out {output.png} > {log} 2>&1"


rule diagnostics_report:
    """Expose a replicate's base-model diagnosis in the HTML report."""
    input:
        f"{DIAGNOSIS}.json",
    output:
        md=f"{DIAGNOSIS}.md",
        html=report(
            f"{DIAGNOSIS}.html",
            caption="../report/diagnostics.rst",
            category=REPORT_DIAGNOSTICS,
            labels=report_labels(lambda w: f"Base-model diagnosis, replicate seed {w.seed}"),
        ),
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/diagnostics_report/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/diagnostics_report/seed{{seed}}.tsv"
    shell:
        "nudgerl diagnostics-md --input {input} --out {output.md} --html {output.html} > {log} 2>&1"


rule replicate_table:
    """Table 1's rows per replicate, each with its paired difference from its own Base."""
    input:
        expand(f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json", method=METHODS, seed=SEEDS, allow_missing=True),
    output:
        csv=f"{RESULTS}/tables/table1_replicates.csv",
        md=f"{RESULTS}/tables/table1_replicates.md",
        html=report(f"{RESULTS}/tables/table1_replicates.html", caption="../report/table1_replicates.rst",
                    category=REPORT_MAIN, labels=report_labels("Table 1 per replicate")),
    params:
        methods=METHODS,
        benchmarks=BENCHMARKS,
        seeds=SEEDS,
        n_boot=N_BOOT,
        base_model=TABLE_BASE_MODEL_ARG,
        prefix=table_prefix,
        eval_root=eval_root,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/replicate_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/replicate_table.tsv"
    shell:
        "nudgerl replicate-table --eval-root {params.eval_root} --methods {params.methods} "
        "--benchmarks {params.benchmarks} --seeds {params.seeds} --bootstrap-samples {params.n_boot} "
        "{params.base_model} --out-prefix {params.prefix} > {log} 2>&1"


if TASK != "math":

    rule exploration_table:
        """Per method: k of n replicates whose hint-free policy found the rare-but-right strategy."""
        input:
            expand(f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json", method=METHODS, seed=SEEDS),
        output:
            csv=f"{RESULTS}/tables/exploration.csv",
            md=f"{RESULTS}/tables/exploration.md",
            html=report(f"{RESULTS}/tables/exploration.html", caption="../report/exploration.rst",
                        category=REPORT_MAIN, labels=report_labels("Exploration success")),
        params:
            methods=METHODS,
            benchmarks=BENCHMARKS,
            seeds=SEEDS,
            reference=REFERENCE,
            success_share=EXPLORATION_SHARE,
            confidence=EXPLORATION_CONFIDENCE,
            prefix=table_prefix,
            eval_root=eval_root,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/exploration_table.log",
        benchmark:
            f"{RESULTS}/benchmarks/exploration_table.tsv"
        shell:
            "nudgerl exploration-table --eval-root {params.eval_root} --methods {params.methods} "
            "--benchmarks {params.benchmarks} --seeds {params.seeds} --reference {params.reference} "
            "--success-share {params.success_share} --confidence {params.confidence} "
            "--out-prefix {params.prefix} > {log} 2>&1"


if BASELINES:

    rule baselines_table:
        """The field's exploration fixes (N=8) beside GRPO and the main NudgeRL run, on the baselines' replicates."""
        input:
            expand(f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json", method=BASELINE_TABLE_METHODS,
                   seed=BASELINE_SEEDS, allow_missing=True),
        output:
            csv=f"{RESULTS}/tables/baselines.csv",
            md=f"{RESULTS}/tables/baselines.md",
            tex=f"{RESULTS}/tables/baselines.tex",
            html=report(f"{RESULTS}/tables/baselines.html", caption="../report/baselines.rst",
                        category=REPORT_MAIN, labels=report_labels("The field's exploration fixes")),
        params:
            methods=BASELINE_TABLE_METHODS,
            benchmarks=BENCHMARKS,
            seeds=BASELINE_SEEDS,
            n_boot=N_BOOT,
            reference=REFERENCE,
            exploration=TABLE1_EXPLORATION_ARG,
            base_model=TABLE_BASE_MODEL_ARG,
            prefix=table_prefix,
            eval_root=eval_root,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/baselines_table.log",
        benchmark:
            f"{RESULTS}/benchmarks/baselines_table.tsv"
        shell:
            "nudgerl table --title 'The field exploration fixes' --eval-root {params.eval_root} "
            "--methods {params.methods} --benchmarks {params.benchmarks} --seeds {params.seeds} "
            "--bootstrap-samples {params.n_boot} --reference {params.reference} {params.exploration} "
            "{params.base_model} --out-prefix {params.prefix} > {log} 2>&1"


rule claims:
    """The paper's seven claims beside ours (a verdict each by the rule over replicates, report.verdicts);
    in the study also in the regime map's common cells, each regime judged on its own runs."""
    input:
        evals=claim_evals(),
        metrics=claim_metrics(),
        regimes=study_claim_inputs(),  # [] outside the study
    output:
        csv=f"{RESULTS}/tables/claims.csv",
        md=f"{RESULTS}/tables/claims.md",
        html=report(f"{RESULTS}/tables/claims.html", caption="../report/claims.rst", category=REPORT_MAIN,
                    labels=report_labels("The paper's claims beside ours")),
    params:
        roles=claim_roles_section(),
        benchmarks=BENCHMARKS,
        n_boot=N_BOOT,
        prefix=table_prefix,
        eval_root=eval_root,
        runs_root=runs_root,
        regimes=STUDY_CLAIM_ARGS,
        verdicts=VERDICTS,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/claims.log",
    benchmark:
        f"{RESULTS}/benchmarks/claims.tsv"
    shell:
        "nudgerl claims --eval-root {params.eval_root} --runs-root {params.runs_root} --roles {params.roles:q} "
        "--benchmarks {params.benchmarks} --bootstrap-samples {params.n_boot} --verdicts {params.verdicts:q} "
        "{params.regimes} --out-prefix {params.prefix} > {log} 2>&1"


rule power_table:
    """What each table's replicates can detect by the verdict rule (80 % power); points at the run's A/A SD."""
    input:
        claims=f"{RESULTS}/tables/claims.csv",
    output:
        csv=f"{RESULTS}/tables/power.csv",
        md=f"{RESULTS}/tables/power.md",
        html=report(f"{RESULTS}/tables/power.html", caption="../report/power.rst", category=REPORT_MAIN,
                    labels=report_labels("What each table can detect")),
    params:
        tables=POWER_TABLES,
        verdicts=VERDICTS,
        prefix=table_prefix,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/power_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/power_table.tsv"
    shell:
        "nudgerl power-table --tables {params.tables:q} --verdicts {params.verdicts:q} --claims {input.claims} "
        "--out-prefix {params.prefix} > {log} 2>&1"


rule ablation_table:
    """NudgeRL ablations (p_drop, hint sampling, lambda_distill), one row per variant."""
    input:
        lambda w: expand(
            f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json",
            method=[*(m for m, _ in ABLATIONS[w.ablation]), REFERENCE],
            seed=ABLATION_SEEDS,
            allow_missing=True,
            **w,
        ),
    output:
        csv=f"{RESULTS}/tables/ablation_{{ablation}}.csv",
        md=f"{RESULTS}/tables/ablation_{{ablation}}.md",
        tex=f"{RESULTS}/tables/ablation_{{ablation}}.tex",
        html=report(
            f"{RESULTS}/tables/ablation_{{ablation}}.html",
            caption="../report/ablation.rst",
            category=REPORT_ABLATIONS,
            labels=report_labels(lambda w: ABLATION_TITLES[w.ablation]),
        ),
    params:
        methods=lambda w: [m for m, _ in ABLATIONS[w.ablation]],
        labels=lambda w: [label for _, label in ABLATIONS[w.ablation]],
        title=lambda w: ABLATION_TITLES[w.ablation],
        benchmarks=BENCHMARKS,
        seeds=ABLATION_SEEDS,
        n_boot=N_BOOT,
        reference=REFERENCE,
        base_model=TABLE_BASE_MODEL_ARG,
        prefix=table_prefix,
        eval_root=eval_root,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/ablation_{{ablation}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/ablation_{{ablation}}.tsv"
    shell:
        "nudgerl table --eval-root {params.eval_root} --methods {params.methods} "
        "--labels {params.labels:q} --title {params.title:q} --benchmarks {params.benchmarks} "
        "--seeds {params.seeds} --bootstrap-samples {params.n_boot} --reference {params.reference} "
        "{params.base_model} --out-prefix {params.prefix} > {log} 2>&1"
