rule strategy_pools:
    """Per training problem, candidate hints: DVC stage `<pools.stage>@<run_name>` (cached, shareable)."""
    # on the submit host when the helper is an HTTP API (network, no GPU): PlanPaths.helper_calls_api
    localrule: helper_calls_api(POOL_DVC_STAGE)
    input:
        train=TRAIN,
        deps=dvc_stage_deps(POOL_DVC_STAGE),
    output:
        pools=POOLS,
        stats=f"{POOLS}.stats.json",
    params:
        stage=POOL_DVC_STAGE,
        definition=dvc_stage_definition(POOL_DVC_STAGE),
    resources:
        **rule_resources("strategy_pools"),
        dvc_lock=1,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{SHARED}/logs/strategy_pools.log",
    benchmark:
        f"{SHARED}/benchmarks/strategy_pools.tsv"
    shell:
        # DVC re-runs the stage only if params.yaml or the problems changed; otherwise it
        # restores the pools from its cache (dvc.lock's hashes, or its run-cache) without
        # calling the backend.
        "dvc --wait-for-lock repro --single-item {params.stage} > {log} 2>&1"


rule rank_hints:
    """Top-ranked hint sampling: keep each problem's best hints by base-policy pass@k gain."""
    input:
        model=base_model_input,
        train=TRAIN,
        pools=POOLS,
    output:
        RANKED_POOLS,
    params:
        cfg=model_section("ranking"),
        model=base_model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("nudgerl"),
        launch=inference_launcher,  # NUDGERL_REQUIRE_CUDA=1 when the job asks for a GPU (nudgerl.hardware)
    threads: rule_threads("rank_hints")
    resources:
        **rule_resources("rank_hints", mem_mb=2000),
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/rank_hints/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_hints/seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}{params.launch} rank-hints --model {params.model} {params.prompt} --train {input.train} --pools {input.pools} "
        "--params {params.cfg:q} --seed {wildcards.seed} --threads {threads} --out {output} > {log} 2>&1"


rule oracle_solutions:
    """Oracle solutions for POPE: DVC stage `<pope.oracle_stage>@<run_name>` (cached, shareable)."""
    localrule: helper_calls_api(ORACLE_DVC_STAGE)  # as strategy_pools
    input:
        train=TRAIN,
        deps=dvc_stage_deps(ORACLE_DVC_STAGE),
    output:
        oracles=ORACLES,
        stats=f"{ORACLES}.stats.json",
    params:
        stage=ORACLE_DVC_STAGE,
        definition=dvc_stage_definition(ORACLE_DVC_STAGE),
    resources:
        **rule_resources("oracle_solutions"),
        dvc_lock=1,
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{SHARED}/logs/oracle_solutions.log",
    benchmark:
        f"{SHARED}/benchmarks/oracle_solutions.tsv"
    shell:
        "dvc --wait-for-lock repro --single-item {params.stage} > {log} 2>&1"
