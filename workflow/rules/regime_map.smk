# The regime map (`snakemake regime_map --cores 2`): base models at a grid of unhinted
# always-right shares (SFT mixture), GRPO and NudgeRL trained on each, their checkpoints
# evaluated hint-free on the hard benchmark problems. Organism only; not part of `all`.
# The regime gate is not applied here: the map leaves the default regime on purpose.
if TASK == "organism" and RMAP:

    rule regime_map_hard_problems:
        """The hard problems of the five benchmarks, as one evaluation set."""
        input:
            benchmark_files(),
        output:
            f"{RMAP_DIR}/hard.jsonl",
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/hard_problems.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/hard_problems.tsv"
        shell:
            "nudgerl hard-problems --benchmarks {input} --out {output} > {log} 2>&1"

    rule regime_map_base_model:
        """A base model whose unhinted SFT mixture puts the always-right strategy at `share`
        (phase 1 shared with the default's base model of the seed)."""
        input:
            drilled=DRILLED_MODEL,
        output:
            directory(f"{RMAP_CELL}/models/base/seed{{seed}}"),
        params:
            cfg=regime_map_base_section,
        threads: rule_threads("base_model")
        resources:
            **rule_resources("base_model", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/{{cell}}/base_model_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/{{cell}}/base_model_seed{{seed}}.tsv"
        shell:
            "nudgerl train-base --params {params.cfg:q} --seed {wildcards.seed} --threads {threads} "
            "--drilled {input.drilled} --out-dir {output} > {log} 2>&1"

    rule regime_map_diagnose:
        """The base model's measured share (the map's x axis) and the rest of its diagnosis; on the
        second axis' cells also the RL-prompt diagnosis (its accuracy after an unhinted choice)."""
        input:
            model=f"{RMAP_CELL}/models/base/seed{{seed}}",
            benchmarks=benchmark_files(),
            train=regime_map_diagnosis_train,  # the second axis' cells only
        output:
            f"{RMAP_CELL}/diagnostics/seed{{seed}}.json",
        params:
            cfg=lambda w: section("eval", exclude=EVAL_EXCLUDE, seed=int(w.seed)),
            rl=regime_map_rl_diagnosis_args,
        threads: rule_threads("diagnose_base")
        resources:
            **rule_resources("diagnose_base", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/{{cell}}/diagnose_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/{{cell}}/diagnose_seed{{seed}}.tsv"
        shell:
            "nudgerl diagnose --model {input.model} --benchmarks {input.benchmarks} {params.rl} "
            "--params {params.cfg:q} --threads {threads} --out {output} > {log} 2>&1"

    rule regime_map_train:
        """GRPO-N, a baseline or the main NudgeRL run on one base model of the map (the default's trainers)."""
        input:
            model=f"{RMAP_CELL}/models/base/seed{{seed}}",
            train=TRAIN,
            pools=POOLS,
        output:
            model=directory(f"{RMAP_CELL}/runs/{{method}}/seed{{seed}}/model"),
            metrics=f"{RMAP_CELL}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
        params:
            command=regime_map_train_command,
            cfg=regime_map_train_section,
            run_dir=output_run_dir,
        threads: rule_threads("train_grpo")
        resources:
            **rule_resources("train_grpo", mem_mb=3000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/{{cell}}/{{method}}_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/{{cell}}/{{method}}_seed{{seed}}.tsv"
        shell:
            "nudgerl {params.command} --model {input.model} --train {input.train} --seed {wildcards.seed} "
            "--params {params.cfg:q} --threads {threads} --out-dir {params.run_dir} > {log} 2>&1"

    rule regime_map_curve:
        """The run's checkpoints (and its base model, step 0), hint-free, on the hard problems."""
        input:
            model=f"{RMAP_CELL}/runs/{{method}}/seed{{seed}}/model",
            metrics=f"{RMAP_CELL}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
            base=f"{RMAP_CELL}/models/base/seed{{seed}}",
            hard=f"{RMAP_DIR}/hard.jsonl",
        output:
            f"{RMAP_CELL}/curves/{{method}}/seed{{seed}}.jsonl",
        params:
            cfg=regime_map_curve_section(),
            run_dir=input_run_dir,
        threads: rule_threads("curve_eval")
        resources:
            **rule_resources("curve_eval", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/{{cell}}/curve_{{method}}_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/{{cell}}/curve_{{method}}_seed{{seed}}.tsv"
        shell:
            "nudgerl curve-eval --run-dir {params.run_dir} --base-model {input.base} --benchmarks {input.hard} "
            "--seed {wildcards.seed} --params {params.cfg:q} --threads {threads} --out {output} > {log} 2>&1"

    rule regime_map_figure:
        """The map: final hard pass@1 and rollout tokens to a fixed pass@1, against the measured share."""
        input:
            diagnoses=expand(f"{RMAP_CELL}/diagnostics/seed{{seed}}.json", cell=RMAP_CELLS, seed=RMAP["seeds"]),
            curves=expand(f"{RMAP_CELL}/curves/{{method}}/seed{{seed}}.jsonl", cell=RMAP_CELLS,
                          method=RMAP["methods"], seed=RMAP["seeds"]),
        output:
            csv=report(f"{RESULTS}/tables/regime_map.csv", caption="../report/regime_map.rst", category=REPORT_REGIME_MAP),
            md=f"{RESULTS}/tables/regime_map.md",
            png=report(f"{RESULTS}/figures/regime_map.png", caption="../report/regime_map.rst",
                       category=REPORT_REGIME_MAP),
            pdf=f"{RESULTS}/figures/regime_map.pdf",
            json=f"{RESULTS}/figures/regime_map.json",
        params:
            grid=regime_map_grid_section(),
            root=regime_map_root,  # <root>/share<s>/...: the cells' folder
            n_boot=N_BOOT,
            table=table_prefix,
            figure=figure_prefix,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/regime_map.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/regime_map.tsv"
        shell:
            "nudgerl regime-map --root {params.root} --grid {params.grid:q} --bootstrap-samples {params.n_boot} "
            "--table-prefix {params.table} --figure-prefix {params.figure} > {log} 2>&1"

    if RMAP_BASELINE_OUTPUTS:

        rule regime_map_baselines:
            """The field's exploration fixes in cells of the map, beside the map's methods on the
            same base models: final hard pass@1 against rollout tokens, NudgeRL paired against each."""
            input:
                diagnoses=expand(f"{RMAP_CELL}/diagnostics/seed{{seed}}.json", cell=RMAP_BASELINE_CELLS,
                                 seed=RMAP_BASELINE_SEEDS),
                curves=expand(f"{RMAP_CELL}/curves/{{method}}/seed{{seed}}.jsonl", cell=RMAP_BASELINE_CELLS,
                              method=[*RMAP["methods"], *RMAP_BASELINES], seed=RMAP_BASELINE_SEEDS),
            output:
                csv=report(f"{RESULTS}/tables/regime_map_baselines.csv", caption="../report/regime_map_baselines.rst",
                           category=REPORT_REGIME_MAP),
                md=f"{RESULTS}/tables/regime_map_baselines.md",
                png=report(f"{RESULTS}/figures/regime_map_baselines.png",
                           caption="../report/regime_map_baselines.rst", category=REPORT_REGIME_MAP),
                pdf=f"{RESULTS}/figures/regime_map_baselines.pdf",
                json=f"{RESULTS}/figures/regime_map_baselines.json",
            params:
                grid=regime_map_baselines_grid_section(),
                root=regime_map_root,
                n_boot=N_BOOT,
                table=table_prefix,
                figure=figure_prefix,
            conda:
                "../envs/nudgerl.yaml"
            log:
                f"{RESULTS}/logs/regime_map/regime_map_baselines.log",
            benchmark:
                f"{RESULTS}/benchmarks/regime_map/regime_map_baselines.tsv"
            shell:
                "nudgerl regime-map-baselines --root {params.root} --grid {params.grid:q} "
                "--bootstrap-samples {params.n_boot} --table-prefix {params.table} --figure-prefix {params.figure} "
                "> {log} 2>&1"

    if RMAP_ACCURACY_OUTPUTS:

        rule regime_map_accuracy:
            """The map's second axis: base models at one share whose unhinted always-right traces
            were executed right only some of the time, beside the map's own cell there (accuracy 1):
            final hard pass@1 against the measured accuracy, and hard pass@1 at every checkpoint."""
            input:
                diagnoses=expand(f"{RMAP_CELL}/diagnostics/seed{{seed}}.json",
                                 cell=RMAP_ACCURACY_CELLS,
                                 seed=RMAP_ACCURACY_SEEDS),
                curves=expand(f"{RMAP_CELL}/curves/{{method}}/seed{{seed}}.jsonl",
                              cell=RMAP_ACCURACY_CELLS,
                              method=RMAP["methods"], seed=RMAP_ACCURACY_SEEDS),
            output:
                csv=report(f"{RESULTS}/tables/regime_map_accuracy.csv", caption="../report/regime_map_accuracy.rst",
                           category=REPORT_REGIME_MAP),
                md=f"{RESULTS}/tables/regime_map_accuracy.md",
                png=report(f"{RESULTS}/figures/regime_map_accuracy.png", caption="../report/regime_map_accuracy.rst",
                           category=REPORT_REGIME_MAP),
                pdf=f"{RESULTS}/figures/regime_map_accuracy.pdf",
                json=f"{RESULTS}/figures/regime_map_accuracy.json",
            params:
                grid=regime_map_accuracy_grid_section(),
                root=regime_map_root,
                n_boot=N_BOOT,
                table=table_prefix,
                figure=figure_prefix,
            conda:
                "../envs/nudgerl.yaml"
            log:
                f"{RESULTS}/logs/regime_map/regime_map_accuracy.log",
            benchmark:
                f"{RESULTS}/benchmarks/regime_map/regime_map_accuracy.tsv"
            shell:
                "nudgerl regime-map-accuracy --root {params.root} --grid {params.grid:q} "
                "--bootstrap-samples {params.n_boot} --table-prefix {params.table} --figure-prefix {params.figure} "
                "> {log} 2>&1"

    rule regime_map_audit:
        """The map's artifacts back to their records and base models (as `nudgerl audit` does for the rest)."""
        input:
            rules.regime_map_figure.output,
            RMAP_BASELINE_OUTPUTS,
            RMAP_ACCURACY_OUTPUTS,
        output:
            f"{RESULTS}/audit/regime_map.txt",
        resources:
            dvc_lock=1,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_map/audit.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_map/audit.tsv"
        params:
            results=results_root,
            stages=[POOL_DVC_STAGE],  # this configuration's pool stage (the NudgeRL runs read it)
        shell:
            # from the map's artifacts only: the main audit and tables are written beside it
            "nudgerl audit --results {params.results} --dvc-stages {params.stages} --artifacts {input:q} "
            "--out {output} > {log} 2>&1"

    rule regime_map:
        """`snakemake regime_map --cores 2`: the figure, the table and their audit."""
        input:
            rules.regime_map_figure.output,
            RMAP_BASELINE_OUTPUTS,
            RMAP_ACCURACY_OUTPUTS,
            rules.regime_map_audit.output,

else:

    rule regime_map:
        """`snakemake regime_map` where the map cannot run (another task, or the families task):
        stops while building the DAG, naming why and the command to use."""
        input:
            regime_map_needs_single_family,
