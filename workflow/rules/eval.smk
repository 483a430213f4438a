rule evaluate:
    """n samples per problem on every benchmark; per-sample/per-problem records, pass@k."""
    input:
        model=model_dir,
        benchmarks=benchmark_files(),
    output:
        summary=f"{RESULTS}/eval/{{method}}/seed{{seed}}/summary.json",
        problems=expand(
            f"{RESULTS}/eval/{{method}}/seed{{seed}}/{{bench}}.problems.jsonl", bench=BENCHMARKS, allow_missing=True
        ),
    params:
        cfg=eval_section,  # the eval section at the run's role's samples per problem (eval.samples_per_role)
        model=model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("eval"),
        out_dir=lambda w, output: os.path.dirname(output.summary),
        # NUDGERL_REQUIRE_CUDA=1 when the job asks for a GPU (nudgerl.hardware); under Slurm the time
        # budget it stops in between chunks (exit 75) for a retry to resume (eval.chunk_problems)
        launch=eval_launcher,
        sampling_seed=run_seed,  # the replicate's; the A/A repeat's moved by its offset
    # a planned stop before the time limit (exit 75) is resumed by a retry (config eval_retries)
    retries: main_process_retries(EVAL_RETRIES)
    threads: rule_threads("evaluate")
    resources:
        **rule_resources("evaluate", mem_mb=2000),
        attempt=attempt_number,  # the launcher passes it on: only a first attempt retries a failed evaluation
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/evaluate/{{method}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate/{{method}}_seed{{seed}}.tsv"
    shell:
        # appended to (>>), as the training logs (under Slurm each job's log starts afresh; every
        # attempt's seconds and end are in the evaluation's attempts.jsonl)
        "{params.hub_offline}NUDGERL_LOG={log:q} {params.launch} evaluate --model {params.model} {params.prompt} "
        "--benchmarks {input.benchmarks} --seed {params.sampling_seed} --params {params.cfg:q} --threads {threads} "
        "--out-dir {params.out_dir} >> {log} 2>&1"
