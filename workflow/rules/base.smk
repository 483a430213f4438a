if TASK == "organism":

    rule drilled_model:
        """Phase 1 of the base model: a tiny causal LM from scratch, drilled on arithmetic facts."""
        output:
            directory(DRILLED_MODEL),
        params:
            cfg=drill_section(),
        threads: rule_threads("base_model")
        resources:
            **rule_resources("base_model", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/drilled_model/seed{{seed}}.log",
        benchmark:
            f"{SHARED}/benchmarks/drilled_model/seed{{seed}}.tsv"
        shell:
            "nudgerl drill-base --params {params.cfg:q} --seed {wildcards.seed} --threads {threads} "
            "--out-dir {output} > {log} 2>&1"

    rule base_model:
        """SFT a tiny causal LM (one per replicate): the stand-in for the paper's instruct model."""
        input:
            drilled=DRILLED_MODEL,
        output:
            directory(BASE_MODEL),
        params:
            cfg=section("base_model"),
        threads: rule_threads("base_model")
        resources:
            **rule_resources("base_model", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/base_model/seed{{seed}}.log",
        benchmark:
            f"{SHARED}/benchmarks/base_model/seed{{seed}}.tsv"
        shell:
            "nudgerl train-base --params {params.cfg:q} --seed {wildcards.seed} --threads {threads} "
            "--drilled {input.drilled} --out-dir {output} > {log} 2>&1"

    rule diagnose_base:
        """The exploration bottleneck, measured: strategy use and hinted vs unhinted pass@1 on the
        benchmarks, and what RL needs (the gate's figures) on the hard training problems."""
        input:
            model=BASE_MODEL,
            benchmarks=benchmark_files(),
            train=TRAIN,
        output:
            f"{DIAGNOSIS}.json",
        params:
            cfg=lambda w: section("eval", exclude=EVAL_EXCLUDE, seed=int(w.seed)),
            rl=lambda w: rl_diagnosis_section(w.seed),
        threads: rule_threads("diagnose_base")
        resources:
            **rule_resources("diagnose_base", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/diagnose_base/seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/diagnose_base/seed{{seed}}.tsv"
        shell:
            "nudgerl diagnose --model {input.model} --benchmarks {input.benchmarks} --train {input.train} "
            "--rl-params {params.rl:q} --params {params.cfg:q} --threads {threads} --out {output} > {log} 2>&1"

    rule regime_gate:
        """Stop before any RL job when a replicate's base model is outside the regime (config `regime`)."""
        input:
            f"{DIAGNOSIS}.json",
        output:
            f"{DIAGNOSIS}.regime.json",
        params:
            regime=section("regime"),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/regime_gate/seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/regime_gate/seed{{seed}}.tsv"
        shell:
            # the verdict goes to the terminal too: a stopped run must say which figure failed
            "nudgerl regime-gate --diagnosis {input} --regime {params.regime:q} --out {output} 2>&1 | tee {log}"

    rule transfer_probe:
        """What a policy-gradient step on hinted successes gives the hint-free policy, at first
        order, on one replicate's base model and the hard training problems (the CLI's
        defaults: 8 samples a prompt, the top 20 % of tokens as hint-changed). Not part of `all`:
        target `transfer`."""
        input:
            model=BASE_MODEL,
            train=TRAIN,
        output:
            f"{RESULTS}/diagnostics/transfer/seed{{seed}}.json",
        threads: rule_threads("diagnose_base")
        resources:
            **rule_resources("diagnose_base", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/transfer_probe/seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/transfer_probe/seed{{seed}}.tsv"
        shell:
            "nudgerl transfer-probe --model {input.model} --problems {input.train} --seed {wildcards.seed} "
            "--label 'base model seed{wildcards.seed}' --threads {threads} --out {output} > {log} 2>&1"

    rule transfer:
        """The transfer probe of every base model the replicates start from, on one page."""
        input:
            expand(f"{RESULTS}/diagnostics/transfer/seed{{seed}}.json", seed=BASE_SEEDS),
        output:
            f"{RESULTS}/diagnostics/transfer.md",
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/transfer.log",
        benchmark:
            f"{RESULTS}/benchmarks/transfer.tsv"
        shell:
            "nudgerl transfer-page --probes {input} --out {output} > {log} 2>&1"

    rule base_model_table:
        """The replicates' base-model diagnoses and regime verdicts, one row per base model."""
        input:
            expand(f"{DIAGNOSIS}.regime.json", seed=BASE_SEEDS),
        output:
            csv=f"{RESULTS}/diagnostics/base_models.csv",
            md=f"{RESULTS}/diagnostics/base_models.md",
            html=report(f"{RESULTS}/diagnostics/base_models.html", caption="../report/base_models.rst",
                        category=REPORT_DIAGNOSTICS, labels=report_labels("Base models of the replicates")),
        params:
            prefix=table_prefix,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/base_model_table.log",
        benchmark:
            f"{RESULTS}/benchmarks/base_model_table.tsv"
        shell:
            "nudgerl base-model-table --regimes {input} --out-prefix {params.prefix} > {log} 2>&1"
