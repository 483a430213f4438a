if TASK == "organism":

    rule organism_data:
        """The organism's training split and five disjoint held-out benchmarks."""
        output:
            train=TRAIN,
            benchmarks=benchmark_files(),
        params:
            cfg=section("organism"),
            task=config["base_model"].get("task", "single_family"),
            out_dir=lambda w, output: os.path.dirname(output.train),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/organism_data.log",
        benchmark:
            f"{SHARED}/benchmarks/organism_data.tsv"
        shell:
            "nudgerl make-data --params {params.cfg:q} --task {params.task} --out-dir {params.out_dir} > {log} 2>&1"

else:

    rule prepare_train:
        """The training problems (DAPO-Math-17k): the configured subset, content-hashed."""
        # A local rule, as prepare_benchmark: a Hugging Face dataset is downloaded on the submit
        # host, which reaches the Hub (compute nodes may not); a local file is read as cheaply there.
        localrule: True
        output:
            TRAIN,
        params:
            spec=data_spec("train"),
            local=local_data_arg(),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/prepare_train.log",
        benchmark:
            f"{SHARED}/benchmarks/prepare_train.tsv"
        shell:
            "nudgerl prepare-data --name train --spec {params.spec:q} {params.local} --out {output} > {log} 2>&1"

    rule prepare_benchmark:
        """One evaluation benchmark (AIME24, AIME25, AMC23, MATH500 level 5, Apex shortlist)."""
        localrule: True  # the Hub download runs on the submit host (see prepare_train)
        output:
            f"{DATA}/eval/{{bench}}.jsonl",
        wildcard_constraints:
            bench="|".join(BENCHMARKS),
        params:
            spec=lambda w: data_spec(w.bench),
            local=local_data_arg(),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/prepare_benchmark/{{bench}}.log",
        benchmark:
            f"{SHARED}/benchmarks/prepare_benchmark/{{bench}}.tsv"
        shell:
            "nudgerl prepare-data --name {wildcards.bench} --spec {params.spec:q} {params.local} "
            "--out {output} > {log} 2>&1"
