if TASK == "organism":

    rule base_model:
        """SFT a tiny causal LM from scratch: the stand-in for the paper's instruct model."""
        output:
            directory(f"{SHARED}/models/base"),
        params:
            cfg=section("base_model"),
        threads: rule_threads("base_model")
        resources:
            **rule_resources("base_model", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/base_model.log",
        benchmark:
            f"{SHARED}/benchmarks/base_model.tsv"
        shell:
            "nudgerl train-base --params {params.cfg:q} --threads {threads} --out-dir {output} > {log} 2>&1"

    rule diagnose_base:
        """The exploration bottleneck, measured: strategy use and hinted vs unhinted pass@1."""
        input:
            model=rules.base_model.output[0],
            benchmarks=benchmark_files(),
        output:
            f"{RESULTS}/diagnostics/base_model.json",
        params:
            cfg=section("eval", exclude=EVAL_EXCLUDE, seed=0),
        threads: rule_threads("diagnose_base")
        resources:
            **rule_resources("diagnose_base", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/diagnose_base.log",
        benchmark:
            f"{RESULTS}/benchmarks/diagnose_base.tsv"
        shell:
            "nudgerl diagnose --model {input.model} --benchmarks {input.benchmarks} "
            "--params {params.cfg:q} --threads {threads} --out {output} > {log} 2>&1"
