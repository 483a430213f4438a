rule train_grpo:
    """GRPO with N rollouts per prompt (TRL GRPOTrainer); resumes from its last checkpoint."""
    input:
        model=rules.base_model.output[0],
        train=rules.organism_data.output.train,
    output:
        model=directory(f"{RESULTS}/runs/grpo{{n}}/seed{{seed}}/model"),
        metrics=f"{RESULTS}/runs/grpo{{n}}/seed{{seed}}/metrics.jsonl",
    params:
        cfg=section("grpo"),
        run_dir=lambda w, output: os.path.dirname(output.metrics),
    threads: THREADS
    resources:
        mem_mb=3000,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/train_grpo/grpo{{n}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_grpo/grpo{{n}}_seed{{seed}}.tsv"
    shell:
        "nudgerl train-grpo --model {input.model} --train {input.train} --num-generations {wildcards.n} "
        "--seed {wildcards.seed} --params {params.cfg:q} --threads {threads} --out-dir {params.run_dir} "
        "> {log} 2>&1"
