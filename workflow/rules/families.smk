# The families task's independence check (nudgerl.evaluation.family_independence): GRPO trained
# on one family's problems, every family's own-strategy share before and after. Target
# `family_independence`; configured by `family_independence` (config/families.yaml).
if TASK == "organism" and FAMILY_CHECK:

    rule family_split:
        """One family's problems of the training split."""
        input:
            TRAIN,
        output:
            f"{SHARED}/data/family/{{family}}.jsonl",
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/family_split/{{family}}.log",
        benchmark:
            f"{SHARED}/benchmarks/family_split/{{family}}.tsv"
        shell:
            "nudgerl family-split --train {input} --family {wildcards.family} --out {output} > {log} 2>&1"

    rule train_grpo_one_family:
        """GRPO-N on one family's problems only, on the replicate's base model."""
        input:
            model=base_model_input,
            regime=regime_input,
            train=f"{SHARED}/data/family/{{family}}.jsonl",
        output:
            model=directory(f"{RESULTS}/runs/grpo{{n}}_on_{{family}}/seed{{seed}}/model"),
            metrics=f"{RESULTS}/runs/grpo{{n}}_on_{{family}}/seed{{seed}}/metrics.jsonl",
        params:
            cfg=model_section("grpo", exclude=GRPO_RUN_EXCLUDE),
            model=base_model_arg,
            prompt=lambda w: prompt_arg("train"),
            launch=launcher,
            run_dir=output_run_dir,
        threads: rule_threads("train_grpo")
        retries: main_process_retries(TRAIN_RETRIES)
        resources:
            **rule_resources("train_grpo", mem_mb=3000),
            attempt=attempt_number,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/train_grpo_one_family/grpo{{n}}_on_{{family}}_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/train_grpo_one_family/grpo{{n}}_on_{{family}}_seed{{seed}}.tsv"
        shell:
            "NUDGERL_LOG={log:q} {params.launch} train-grpo --model {params.model} {params.prompt} --train {input.train} "
            "--num-generations {wildcards.n} --seed {wildcards.seed} --params {params.cfg:q} --threads {threads} "
            "--out-dir {params.run_dir} >> {log} 2>&1"

    rule family_independence_check:
        """Every family's own-strategy share on the base model and on the one-family run."""
        input:
            base=BASE_MODEL,
            trained=f"{RESULTS}/runs/grpo{{n}}_on_{{family}}/seed{{seed}}/model",
            train=TRAIN,
        output:
            f"{RESULTS}/diagnostics/family_independence/grpo{{n}}_on_{{family}}/seed{{seed}}.json",
        params:
            rl=lambda w: rl_diagnosis_section(w.seed),
        threads: rule_threads("diagnose_base")
        resources:
            **rule_resources("diagnose_base", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/family_independence/grpo{{n}}_on_{{family}}_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/family_independence/grpo{{n}}_on_{{family}}_seed{{seed}}.tsv"
        shell:
            "nudgerl family-independence --base-model {input.base} --trained-model {input.trained} "
            "--train {input.train} --family {wildcards.family} --rl-params {params.rl:q} --threads {threads} "
            "--out {output} > {log} 2>&1"

    rule family_independence:
        """The check's replicates on one page."""
        input:
            expand(f"{RESULTS}/diagnostics/family_independence/grpo{{n}}_on_{{family}}/seed{{seed}}.json",
                   n=FAMILY_CHECK["num_generations"], family=FAMILY_CHECK["family"], seed=FAMILY_CHECK["seeds"]),
        output:
            f"{RESULTS}/diagnostics/family_independence.md",
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/family_independence.log",
        benchmark:
            f"{RESULTS}/benchmarks/family_independence.tsv"
        shell:
            "nudgerl family-independence-page --results {input} --out {output} > {log} 2>&1"
