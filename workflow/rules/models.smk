import re  # rule snapshot_model: model names as literal wildcard patterns


if GGUF_MODELS:

    rule convert_gguf:
        """A real base model shipped as GGUF (models[].gguf), dequantized once into a local
        Hugging Face folder (results/<run_name>/models/<name>) that every later rule loads offline."""
        input:
            gguf_input,
        output:
            directory(f"{SHARED}/models/{{model}}"),
        wildcard_constraints:
            model="|".join(GGUF_MODELS),
        params:
            source=gguf_args,
            dtype=lambda w: MODELS[w.model]["gguf"].get("dtype", "bfloat16"),
        resources:
            **rule_resources("convert_gguf", mem_mb=2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/convert_gguf/{{model}}.log",
        benchmark:
            f"{SHARED}/benchmarks/convert_gguf/{{model}}.tsv"
        shell:
            "nudgerl convert-gguf {params.source} --dtype {params.dtype} --out-dir {output} > {log} 2>&1"


if HUB_MODELS:

    rule snapshot_model:
        """A real base model given as a Hugging Face id (models[].path), downloaded once at its
        pinned revision (models[].revision, default main) into results/<run_name>/models/<name>,
        with the commit it resolved to in the folder's provenance.json. A local rule: it runs on
        the submit host, which reaches the Hub; the GPU jobs on compute nodes load the folder offline."""
        localrule: True
        output:
            directory(f"{SHARED}/models/{{model}}"),
        wildcard_constraints:
            model="|".join(map(re.escape, HUB_MODELS)),
        params:
            source=snapshot_source,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/snapshot_model/{{model}}.log",
        benchmark:
            f"{SHARED}/benchmarks/snapshot_model/{{model}}.tsv"
        shell:
            "nudgerl snapshot-model {params.source} --out-dir {output} > {log} 2>&1"

    rule model_snapshots:
        """Target: every Hub model's snapshot (`snakemake model_snapshots --configfile
        config/paper.yaml --cores 1`, on the submit host before the first cluster run)."""
        localrule: True
        input:
            expand(f"{SHARED}/models/{{model}}", model=list(HUB_MODELS)),
