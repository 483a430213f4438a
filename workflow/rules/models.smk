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
