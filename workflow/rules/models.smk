def gguf_source(name):
    """The GGUF of models[name]: {path} or {package, file} (dtype aside)."""
    return {k: v for k, v in MODELS[name]["gguf"].items() if k != "dtype"}


def gguf_input(wildcards):
    """The GGUF file as the rule's input when it can be found here; [] when its package is
    not installed, so the DAG still builds (the job then fails naming the package)."""
    from nudgerl.models import GGUFSourceError, resolve_gguf

    try:
        return str(resolve_gguf(gguf_source(wildcards.model)))
    except GGUFSourceError:
        return []


def gguf_args(wildcards):
    src = gguf_source(wildcards.model)
    if src.get("path"):
        return f"--gguf {shlex.quote(src['path'])}"
    return f"--package {shlex.quote(src.get('package', ''))} --file {shlex.quote(src.get('file', ''))}"


if GGUF_MODELS:

    rule convert_gguf:
        """A real base model shipped as GGUF (models[].gguf), dequantized once into a local
        Hugging Face folder (results/models/<name>) that every later rule loads offline."""
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
            mem_mb=declared_mem_mb("convert_gguf", 2000),
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{SHARED}/logs/convert_gguf/{{model}}.log",
        benchmark:
            f"{SHARED}/benchmarks/convert_gguf/{{model}}.tsv"
        shell:
            "nudgerl convert-gguf {params.source} --dtype {params.dtype} --out-dir {output} > {log} 2>&1"
