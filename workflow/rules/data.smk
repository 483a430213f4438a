rule organism_data:
    """The organism's training split and five disjoint held-out benchmarks."""
    output:
        train=f"{RESULTS}/data/train.jsonl",
        benchmarks=benchmark_files(),
    params:
        cfg=section("organism"),
        out_dir=lambda w, output: os.path.dirname(output.train),
    conda:
        "../envs/nudgerl.yaml"
    log:
        f"{RESULTS}/logs/organism_data.log",
    benchmark:
        f"{RESULTS}/benchmarks/organism_data.tsv"
    shell:
        "nudgerl make-data --params {params.cfg:q} --out-dir {params.out_dir} > {log} 2>&1"
