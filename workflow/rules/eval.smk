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
        cfg=section("eval", exclude=EVAL_EXCLUDE),
        model=model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("eval"),
        out_dir=lambda w, output: os.path.dirname(output.summary),
        launch=inference_launcher,  # NUDGERL_REQUIRE_CUDA=1 when the job asks for a GPU (nudgerl.hardware)
        sampling_seed=run_seed,  # the replicate's; the A/A repeat's moved by its offset
    threads: rule_threads("evaluate")
    resources:
        **rule_resources("evaluate", mem_mb=2000),
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/evaluate/{{method}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate/{{method}}_seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}{params.launch} evaluate --model {params.model} {params.prompt} --benchmarks {input.benchmarks} "
        "--seed {params.sampling_seed} --params {params.cfg:q} --threads {threads} --out-dir {params.out_dir} > {log} 2>&1"
