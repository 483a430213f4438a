"""Batched sampling from a causal LM with transformers ``generate`` (the CPU backend).

Many problems' samples go through one left-padded batch, so a tiny model keeps the CPU
busy instead of paying per-problem overhead. A vLLM backend with the same interface is a
GPU extra (paper scale).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SamplingParams:
    n: int = 16  # samples per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    batch_size: int = 256  # sequences per generate call
    seed: int = 0


def load_policy(model_dir: str, device: str = "cpu"):
    """Load a saved HF model directory (full model, or a PEFT adapter over its base)."""
    from pathlib import Path

    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_dir)
    if (path / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(str(path)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(path))
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    model.to(device).eval()
    return model, tokenizer


def chat_prompt(tokenizer, user: str, system: str | None = None) -> str:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def generate(model, tokenizer, prompts: list[str], params: SamplingParams, progress: bool = False):
    """Sample ``params.n`` completions for each chat-formatted prompt.

    Returns a list (one entry per prompt) of lists of (text, n_tokens).
    """
    import torch
    from tqdm.auto import tqdm

    jobs = [(i, p) for i, p in enumerate(prompts) for _ in range(params.n)]
    out: list[list[tuple[str, int]]] = [[] for _ in prompts]
    torch.manual_seed(params.seed)
    eos = tokenizer.eos_token_id
    bar = tqdm(total=len(jobs), desc="sampling", disable=not progress, unit="sample")
    for start in range(0, len(jobs), params.batch_size):
        chunk = jobs[start : start + params.batch_size]
        enc = tokenizer([p for _, p in chunk], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(
                **enc,
                do_sample=params.temperature > 0,
                temperature=params.temperature if params.temperature > 0 else None,
                top_p=params.top_p if params.temperature > 0 else None,
                top_k=0,
                max_new_tokens=params.max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=eos,
            )
        completions = gen[:, enc["input_ids"].size(1) :]
        for (i, _), ids in zip(chunk, completions.tolist()):
            n_tokens = ids.index(eos) + 1 if eos in ids else len(ids)
            text = tokenizer.decode(ids[:n_tokens], skip_special_tokens=True)
            out[i].append((text, n_tokens))
        bar.update(len(chunk))
    bar.close()
    return out
