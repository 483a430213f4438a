"""Batched sampling from a causal LM with transformers ``generate`` (the CPU backend).

Many problems' samples go through one left-padded batch, so a tiny model keeps the CPU
busy instead of paying per-problem overhead.

Two backends, one interface: ``load_policy(model, backend=...)`` returns ``(model, tokenizer)``
and ``generate(model, tokenizer, prompts, params)`` returns, per prompt, ``params.n``
``(text, n_tokens)`` pairs. ``transformers`` (CPU, the default) and ``vllm`` (GPU, the
optional ``.[gpu]`` extra: :class:`VLLMPolicy`, LoRA adapters served with a
``LoRARequest`` over their base model). vLLM is imported only when that backend is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

from nudgerl.models import GENERATE_CACHE  # the KV cache generate uses (see there)
from nudgerl.progress import Progress


@dataclass
class SamplingParams:
    n: int = 16  # samples per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    batch_size: int = 256  # sequences per generate call
    seed: int = 0
    stop: tuple[str, ...] = ()  # stop strings (vLLM backend; the authors stop at </SOLUTION> in training)


# What a sampling config section (eval, ranking, the RL-prompt diagnosis, report figures, a
# helper stage) falls back to for a key it does not set: config/config.yaml's values (its eval
# and ranking sections; tests/test_config_sections.py keeps them equal).
SECTION_SAMPLING_DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 56, "batch_size": 512, "seed": 0}


def sampling_params(section, n: int, seed: int | None = None, stop=()) -> SamplingParams:
    """The one way to build :class:`SamplingParams` from a config section: ``temperature``,
    ``top_p``, ``max_new_tokens``, ``batch_size`` and (unless ``seed`` is given) ``seed`` from
    the section, each falling back to :data:`SECTION_SAMPLING_DEFAULTS`. ``n`` is the caller's:
    each section names its sample count differently (samples_per_problem, samples, curve.samples)."""
    d = SECTION_SAMPLING_DEFAULTS
    return SamplingParams(
        n=n,
        temperature=section.get("temperature", d["temperature"]),
        top_p=section.get("top_p", d["top_p"]),
        max_new_tokens=section.get("max_new_tokens", d["max_new_tokens"]),
        batch_size=section.get("batch_size", d["batch_size"]),
        seed=section.get("seed", d["seed"]) if seed is None else seed,
        stop=tuple(stop),
    )


BACKENDS = ("transformers", "vllm")
# Config keys (eval, ranking) passed to the vLLM engine. enforce_eager skips torch.compile and
# CUDA-graph capture: slower decoding, but an engine that starts in seconds (short runs, CPU).
# dtype: vLLM's "auto" downcasts a float32 model (the organism) to 16 bits (bfloat16 on an x86
# CPU); "float32" evaluates it at the precision it was trained in.
VLLM_ENGINE_KEYS = ("max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "enforce_eager", "dtype")


def vllm_engine_kwargs(params: dict) -> dict:
    """The vLLM engine settings a config section sets (the transformers backend ignores them)."""
    return {k: params[k] for k in VLLM_ENGINE_KEYS if k in params}


def load_policy(model_dir: str, device: str = "cpu", backend: str = "transformers", revision: str | None = None,
                **vllm_kwargs):
    """Load a policy: a saved HF model directory (full model, or a PEFT adapter over its
    base) or a Hugging Face model id (with ``revision``)."""
    from pathlib import Path

    if backend == "vllm":
        policy = VLLMPolicy(model_dir, revision=revision, **vllm_kwargs)
        return policy, policy.tokenizer
    if backend != "transformers":
        raise ValueError(f"unknown sampling backend {backend!r}; use one of {BACKENDS}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_dir)
    if (path / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(str(path)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(path), revision=revision)
    tokenizer = AutoTokenizer.from_pretrained(str(path), revision=revision if not path.exists() else None)
    tokenizer.padding_side = "left"
    model.to(device).eval()
    return model, tokenizer


def chat_prompt(tokenizer, user: str, system: str | None = None) -> str:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def generate(model, tokenizer, prompts: list[str], params: SamplingParams, progress: bool = False,
             rng_state=None):
    """Sample ``params.n`` completions for each chat-formatted prompt.

    Returns a list (one entry per prompt) of lists of (text, n_tokens).

    ``rng_state`` (transformers backend): start the random stream at this state (what
    :func:`sampling_rng_state` returned after an earlier call) instead of at ``params.seed``. Sampling a
    list in pieces that each end on a batch boundary, each piece started at the state the one
    before ended in, gives the samples of one call over the whole list. vLLM seeds each
    request from ``params.seed`` and ignores it.

    ``progress``: print a plain line (samples done of all, elapsed, ETA) now and then
    (:class:`nudgerl.progress.Progress`); per batch with transformers, per finished prompt with vLLM.
    """
    if isinstance(model, VLLMPolicy):
        # the plain two-argument call unless progress is asked for (what wrappers of it expect)
        return model.generate(prompts, params, progress=True) if progress else model.generate(prompts, params)
    import torch

    jobs = [(i, p) for i, p in enumerate(prompts) for _ in range(params.n)]
    out: list[list[tuple[str, int]]] = [[] for _ in prompts]
    if rng_state is None:
        torch.manual_seed(params.seed)
    else:
        torch.set_rng_state(rng_state)
    eos = tokenizer.eos_token_id
    # plain lines, no bar: a bar's redraws fill a Slurm log
    report = Progress("samples", len(jobs)) if progress else None
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
                **GENERATE_CACHE,
            )
        completions = gen[:, enc["input_ids"].size(1) :]
        for (i, _), ids in zip(chunk, completions.tolist()):
            n_tokens = ids.index(eos) + 1 if eos in ids else len(ids)
            text = tokenizer.decode(ids[:n_tokens], skip_special_tokens=True)
            out[i].append((text, n_tokens))
        if report is not None:
            report.update(start + len(chunk))
    return out


def sampling_rng_state(model):
    """The random state the next :func:`generate` call on ``model`` would continue from (the
    transformers backend samples on the CPU from torch's global generator); None for vLLM,
    whose requests are seeded each on its own."""
    if isinstance(model, VLLMPolicy):
        return None
    import torch

    return torch.get_rng_state()


def adapter_base(model_dir: str) -> str | None:
    """The base model of a PEFT adapter folder (None for a full model or a hub id)."""
    import json
    from pathlib import Path

    cfg = Path(model_dir) / "adapter_config.json"
    if not cfg.exists():
        return None
    base = json.loads(cfg.read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{cfg}: no base_model_name_or_path; cannot serve the adapter")
    return base


def adapter_rank(model_dir: str) -> int:
    import json
    from pathlib import Path

    return int(json.loads((Path(model_dir) / "adapter_config.json").read_text()).get("r", 16))


# The ranks vLLM's engine accepts as max_lora_rank (vllm/config/lora.py MaxLoRARanks, 0.31).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_max_lora_rank(ranks) -> int:
    """The smallest max_lora_rank vLLM accepts that holds every adapter rank in ``ranks``."""
    top = max(ranks)
    for allowed in VLLM_LORA_RANKS:
        if allowed >= top:
            return allowed
    raise ValueError(f"LoRA rank {top} is above vLLM's largest max_lora_rank {VLLM_LORA_RANKS[-1]}")


def same_model(a: str, b: str) -> bool:
    """Whether two model references name the same model: the same folder (a relative path
    is read from the working directory, as the jobs read it) or the same hub id."""
    import os

    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return a.rstrip("/") == b.rstrip("/")


def check_adapter_base(model_dir: str, base_model: str) -> None:
    """A LoRA adapter served over ``base_model`` must have been trained on it: vLLM would apply
    it to any base of matching shapes and sample from a model that never existed."""
    base = adapter_base(model_dir)
    if base is not None and not same_model(base, base_model):
        raise ValueError(f"{model_dir}: the adapter was trained on {base!r} (adapter_config.json "
                         f"base_model_name_or_path), not on this run's base model {base_model!r}")


class _Discard:
    """A file that drops what is written: where the bar vLLM draws goes."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass


def vllm_progress_bar(progress: Progress):
    """What vLLM's ``generate(use_tqdm=...)`` takes, a tqdm factory, that reports to ``progress``
    instead of drawing. vLLM (0.31) makes two bars: one around the loop that adds the requests
    (quick: left silent) and one it updates with each finished request's sample count (n per
    prompt): that count goes to ``progress``, the drawing to nowhere. A tqdm subclass keeps
    whatever else vLLM reads from its bar (elapsed time, counts) working."""
    from tqdm.std import tqdm

    class LineBar(tqdm):
        def update(self, n=1):
            shown = super().update(n)
            progress.update(self.n)
            return shown

    def make(iterable=None, **kwargs):
        if iterable is not None:
            return tqdm(iterable, disable=True, **kwargs)
        return LineBar(file=_Discard(), **kwargs)

    return make


class VLLMPolicy:
    """The GPU sampling backend: one vLLM engine; a LoRA adapter folder is served over its
    base model with a ``LoRARequest`` (no merge), a full model or hub id directly.

    ``generate`` sends each prompt once with ``n`` samples (vLLM shares the prompt's KV
    cache across them) and returns what the transformers backend returns.
    """

    def __init__(self, model: str, revision: str | None = None, max_model_len: int | None = None,
                 gpu_memory_utilization: float = 0.9, tensor_parallel_size: int = 1, dtype: str = "auto",
                 enforce_eager: bool = False, max_lora_rank: int | None = None, llm=None, lora_request_cls=None,
                 sampling_params_cls=None):
        # llm / *_cls: injected in CPU tests of this glue; None imports vLLM (GPU).
        # max_lora_rank: serve LoRA adapters of up to this rank over ``model`` (a base model),
        # switched with :meth:`serve` (the checkpoint curve: one engine for all checkpoints).
        base = adapter_base(model)
        self.adapter = model if base else None
        self.base = base or model
        if llm is None:
            from vllm import LLM, SamplingParams
            from vllm.lora.request import LoRARequest

            from nudgerl.gpu_memory import preflight_gpu_memory

            if tensor_parallel_size == 1 and max_model_len:
                # a share that cannot hold the model on this card stops here, with the numbers,
                # not as a vLLM error after the weights loaded (no CUDA: nothing is checked)
                preflight_gpu_memory(self.base, gpu_memory_utilization, sequence_tokens=max_model_len,
                                     where="config eval/ranking gpu_memory_utilization, or models[].eval/ranking")
            kwargs = dict(model=self.base, revision=revision, dtype=dtype, max_model_len=max_model_len,
                          gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size,
                          enforce_eager=enforce_eager,
                          enable_lora=self.adapter is not None or max_lora_rank is not None)
            if kwargs["enable_lora"]:
                ranks = [adapter_rank(self.adapter)] if self.adapter is not None else []
                kwargs["max_lora_rank"] = vllm_max_lora_rank(ranks + ([max_lora_rank] if max_lora_rank else []))
            llm = LLM(**kwargs)
            lora_request_cls, sampling_params_cls = LoRARequest, SamplingParams
        self.llm = llm
        self._sampling_params_cls = sampling_params_cls
        self._lora_request_cls = lora_request_cls
        self.lora_request = None
        if self.adapter is not None:
            self.serve(self.adapter)
        self.tokenizer = llm.get_tokenizer()

    def serve(self, adapter: str | None, name: str = "policy", lora_id: int = 1) -> None:
        """Sample from now on from ``adapter`` (a LoRA folder over this engine's base model) or,
        with None, from the base model itself. vLLM keeps a loaded adapter under its
        ``lora_id`` and does not read the folder again for a request with a known id: each
        distinct adapter needs its own id (and name), or it samples from the one loaded before."""
        self.lora_request = self._lora_request_cls(name, lora_id, adapter) if adapter is not None else None

    def generate(self, prompts: list[str], params: SamplingParams, progress: bool = False):
        """``progress``: print plain progress lines of the samples finished (vLLM's bar stays off)."""
        sp = self._sampling_params_cls(
            n=params.n, temperature=params.temperature, top_p=params.top_p if params.temperature > 0 else 1.0,
            max_tokens=params.max_new_tokens, seed=params.seed, stop=list(params.stop) or None,
        )
        use_tqdm = vllm_progress_bar(Progress("samples", len(prompts) * params.n)) if progress else False
        outputs = self.llm.generate(prompts, sp, lora_request=self.lora_request, use_tqdm=use_tqdm)
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} results for {len(prompts)} prompts")
        return [[(o.text, len(o.token_ids)) for o in req.outputs] for req in outputs]
