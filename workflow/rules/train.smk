# Training logs are appended to (>>): a run resumed by a later local invocation keeps the earlier
# lines. Under Slurm each job's log starts afresh; every attempt's seconds and end are in the
# run's attempts.jsonl (nudgerl.attempts).


rule train_grpo:
    """GRPO with N rollouts per prompt (TRL GRPOTrainer); resumes from its last checkpoint."""
    input:
        model=base_model_input,
        regime=regime_input,
        train=TRAIN,
    output:
        model=directory(f"{RESULTS}/runs/grpo{{n}}/seed{{seed}}/model"),
        metrics=f"{RESULTS}/runs/grpo{{n}}/seed{{seed}}/metrics.jsonl",
    params:
        cfg=model_section("grpo", exclude=GRPO_RUN_EXCLUDE),
        model=base_model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("train"),
        launch=launcher,
        run_dir=output_run_dir,
    threads: rule_threads("train_grpo")
    retries: main_process_retries(TRAIN_RETRIES)
    resources:
        **rule_resources("train_grpo", mem_mb=3000),
        attempt=attempt_number,  # the launcher passes it on: only a first attempt retries a failed run
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/train_grpo/grpo{{n}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_grpo/grpo{{n}}_seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}NUDGERL_LOG={log:q} {params.launch} train-grpo --model {params.model} {params.prompt} --train {input.train} --num-generations {wildcards.n} "
        "--seed {wildcards.seed} --params {params.cfg:q} --threads {threads} --out-dir {params.run_dir} "
        ">> {log} 2>&1"


rule train_grpo_repeat:
    """The A/A pair's second arm (config report.verdicts.aa): GRPO-N again on the same base model with
    the RL seed moved by the pair's offset; two identical methods' difference is the noise floor."""
    input:
        model=base_model_input,
        regime=regime_input,
        train=TRAIN,
    output:
        model=directory(f"{RESULTS}/runs/grpo{{n}}_aa/seed{{seed}}/model"),
        metrics=f"{RESULTS}/runs/grpo{{n}}_aa/seed{{seed}}/metrics.jsonl",
    params:
        cfg=model_section("grpo", exclude=GRPO_RUN_EXCLUDE),
        model=base_model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("train"),
        launch=launcher,
        run_dir=output_run_dir,
        rl_seed=lambda w: int(w.seed) + AA_SEED_OFFSET,
    threads: rule_threads("train_grpo")
    retries: main_process_retries(TRAIN_RETRIES)
    resources:
        **rule_resources("train_grpo", mem_mb=3000),
        attempt=attempt_number,  # the launcher passes it on: only a first attempt retries a failed run
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/train_grpo/grpo{{n}}_aa_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_grpo/grpo{{n}}_aa_seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}NUDGERL_LOG={log:q} {params.launch} train-grpo --model {params.model} {params.prompt} --train {input.train} --num-generations {wildcards.n} "
        "--seed {params.rl_seed} --params {params.cfg:q} --threads {threads} --out-dir {params.run_dir} "
        ">> {log} 2>&1"


rule train_nudgerl:
    """NudgeRL: nudged rollouts, inter-intra advantage, hint-free distillation."""
    input:
        model=base_model_input,
        regime=regime_input,
        train=TRAIN,
        pools=nudge_pools,
    output:
        model=directory(f"{RESULTS}/runs/{{method}}/seed{{seed}}/model"),
        metrics=f"{RESULTS}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
    wildcard_constraints:
        method=r"nudgerl\d+(_[a-z0-9.]+)?",
    params:
        cfg=model_section("grpo", exclude=GRPO_RUN_EXCLUDE),
        model=base_model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("nudgerl"),
        launch=launcher,
        nudge=nudge_section,
        run_dir=output_run_dir,
    threads: rule_threads("train_nudgerl")
    retries: main_process_retries(TRAIN_RETRIES)
    resources:
        **rule_resources("train_nudgerl", mem_mb=3000),
        attempt=attempt_number,  # the launcher passes it on: only a first attempt retries a failed run
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/train_nudgerl/{{method}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_nudgerl/{{method}}_seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}NUDGERL_LOG={log:q} {params.launch} train-nudgerl --model {params.model} {params.prompt} --train {input.train} --pools {input.pools} "
        "--seed {wildcards.seed} --params {params.cfg:q} --nudge {params.nudge:q} --threads {threads} "
        "--out-dir {params.run_dir} >> {log} 2>&1"


rule train_pope:
    """POPE baseline: GRPO where guided problems carry an oracle-solution prefix."""
    input:
        model=base_model_input,
        regime=regime_input,
        train=TRAIN,
        oracles=ORACLES,
    output:
        model=directory(f"{RESULTS}/runs/pope{{n}}/seed{{seed}}/model"),
        metrics=f"{RESULTS}/runs/pope{{n}}/seed{{seed}}/metrics.jsonl",
    params:
        cfg=model_section("grpo", exclude=GRPO_RUN_EXCLUDE),
        model=base_model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("pope"),
        launch=launcher,
        pope=pope_section(),
        run_dir=output_run_dir,
    threads: rule_threads("train_pope")
    retries: main_process_retries(TRAIN_RETRIES)
    resources:
        **rule_resources("train_pope", mem_mb=3000),
        attempt=attempt_number,  # the launcher passes it on: only a first attempt retries a failed run
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/train_pope/pope{{n}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_pope/pope{{n}}_seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}NUDGERL_LOG={log:q} {params.launch} train-pope --model {params.model} {params.prompt} --train {input.train} --oracles {input.oracles} "
        "--num-generations {wildcards.n} --seed {wildcards.seed} --params {params.cfg:q} --pope {params.pope:q} "
        "--threads {threads} --out-dir {params.run_dir} >> {log} 2>&1"


rule train_grpo_eps:
    """GRPO eps_high sweep (paper Fig. 5): GRPO-N with a different clip-higher bound."""
    input:
        model=base_model_input,
        regime=regime_input,
        train=TRAIN,
    output:
        model=directory(f"{RESULTS}/runs/grpo{{n}}_eps{{eps}}/seed{{seed}}/model"),
        metrics=f"{RESULTS}/runs/grpo{{n}}_eps{{eps}}/seed{{seed}}/metrics.jsonl",
    params:
        cfg=grpo_eps_section,
        model=base_model_arg,
        hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
        prompt=lambda w: prompt_arg("train"),
        launch=launcher,
        run_dir=output_run_dir,
    threads: rule_threads("train_grpo_eps")
    retries: main_process_retries(TRAIN_RETRIES)
    resources:
        **rule_resources("train_grpo_eps", mem_mb=3000),
        attempt=attempt_number,  # the launcher passes it on: only a first attempt retries a failed run
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/train_grpo/grpo{{n}}_eps{{eps}}_seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_grpo/grpo{{n}}_eps{{eps}}_seed{{seed}}.tsv"
    shell:
        "{params.hub_offline}NUDGERL_LOG={log:q} {params.launch} train-grpo --model {params.model} {params.prompt} --train {input.train} "
        "--num-generations {wildcards.n} --seed {wildcards.seed} --params {params.cfg:q} --threads {threads} "
        "--out-dir {params.run_dir} >> {log} 2>&1"


if BASELINES:

    rule train_baseline:
        """One of the field's exploration fixes: GRPO-N with its options (config `baselines`)."""
        input:
            model=base_model_input,
            regime=regime_input,
            train=TRAIN,
        output:
            model=directory(f"{RESULTS}/runs/{{method}}/seed{{seed}}/model"),
            metrics=f"{RESULTS}/runs/{{method}}/seed{{seed}}/metrics.jsonl",
        wildcard_constraints:
            method="|".join(BASELINES),
        params:
            cfg=baseline_section,
            n=BASELINE_GROUP_SIZE,
            model=base_model_arg,
            hub_offline=HUB_OFFLINE,  # HF_HUB_OFFLINE=1 under task math (PlanPaths.HUB_OFFLINE)
            prompt=lambda w: prompt_arg("train"),
            launch=launcher,
            run_dir=output_run_dir,
        threads: rule_threads("train_baseline")
        retries: main_process_retries(TRAIN_RETRIES)
        resources:
            **rule_resources("train_baseline", mem_mb=3000),
            attempt=attempt_number,  # the launcher passes it on: only a first attempt retries a failed run
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/train_baseline/{{method}}_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/train_baseline/{{method}}_seed{{seed}}.tsv"
        shell:
            "{params.hub_offline}NUDGERL_LOG={log:q} {params.launch} train-grpo --model {params.model} {params.prompt} --train {input.train} "
            "--num-generations {params.n} --seed {wildcards.seed} --params {params.cfg:q} --threads {threads} "
            "--out-dir {params.run_dir} >> {log} 2>&1"
