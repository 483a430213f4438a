"""What fits on one GPU: model shapes, cards, and a memory preflight (``nudgerl.gpu_memory``).

A low-level module (the standard library only; torch lazily, in :func:`card_memory_bytes`), so
both the GPU-hour plan (``nudgerl.reporting.gpu_hours``) and the jobs themselves (training,
evaluation) read one set of figures without importing each other.

:func:`gpu_memory_plan` is pure arithmetic: weights, the KV cache vLLM's share leaves, and the
colocated trainer beside it. A GPU job calls :func:`preflight_gpu_memory` before it loads
anything, so a share that cannot hold the model on the card it was given stops within seconds,
with the numbers, instead of as a vLLM error after minutes of loading. The figures are a plan
from the models' config.json, not a measurement: a plan that passes can still run out of memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GB = 1e9       # the plan's unit (datasheets, gpu_hours)
GIB = 2 ** 30  # what torch and nvidia-smi report a card's memory in


@dataclass(frozen=True)
class GPU:
    name: str
    memory_gb: float
    bandwidth_tb_s: float      # HBM bandwidth (datasheet)
    bf16_tflops: float         # dense bf16 (datasheet)


GPUS = {
    "h100": GPU("H100 SXM 80 GB", 80, 3.35, 989),
    "h200": GPU("H200 141 GB", 141, 4.8, 989),
    "a100": GPU("A100 SXM 80 GB", 80, 2.0, 312),
}


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model, from its config.json (the Hub page's figures)."""
    params_b: float   # billions of parameters
    layers: int
    kv_heads: int
    head_dim: int

    @property
    def weight_gb(self) -> float:
        return self.params_b * 2  # bf16

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2  # K and V, bf16


MODEL_SHAPES = {
    # Qwen3-4B-Instruct-2507 config.json: 36 layers, 8 KV heads of 128 (GQA), 4.0 B parameters
    "Qwen/Qwen3-4B-Instruct-2507": ModelShape(4.0, 36, 8, 128),
    # Olmo-3-7B config.json: 32 layers, 32 KV heads of 128 (no GQA: 0.5 MiB of KV a token), 7.3 B
    "allenai/Olmo-3-7B-Instruct-SFT": ModelShape(7.3, 32, 32, 128),
}

# Bytes a parameter takes in a checkpoint, by config.json's dtype (to count parameters from
# the safetensors files' size).
_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def model_shape_from_folder(folder: str | Path) -> ModelShape | None:
    """A local model folder's shape: layers and KV heads from config.json, parameters from the
    size of its safetensors files. None where the folder has no config.json or no safetensors
    (a LoRA adapter, a Hub id): the caller then has no shape to check."""
    folder = Path(folder)
    config_path = folder / "config.json"
    files = sorted(folder.glob("*.safetensors"))
    if not config_path.is_file() or not files:
        return None
    cfg = json.loads(config_path.read_text())
    cfg = cfg.get("text_config", cfg)  # multimodal configs nest the language model's
    try:
        heads = int(cfg["num_attention_heads"])
        head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
        layers = int(cfg["num_hidden_layers"])
    except KeyError as e:
        raise ValueError(f"{config_path}: no {e.args[0]!r}; cannot plan this model's GPU memory") from None
    dtype = str(cfg.get("dtype") or cfg.get("torch_dtype") or "bfloat16")
    params = sum(f.stat().st_size for f in files) / _DTYPE_BYTES.get(dtype, 2)
    return ModelShape(params / 1e9, layers, int(cfg.get("num_key_value_heads") or heads), head_dim)


def kv_cache_tokens(shape: ModelShape, card_gb: float, share: float, overhead_gb: float) -> int:
    """Tokens of KV cache a vLLM engine gets from ``share`` of a card: its share less the
    weights and a fixed allowance (activations, CUDA graphs, allocator); 0 when that is negative."""
    free_gb = card_gb * share - shape.weight_gb - overhead_gb
    return int(max(0.0, free_gb) * GB / shape.kv_bytes_per_token)


# Bytes a trainable parameter needs beside its weight: a float32 gradient and the optimizer's
# state (AdamW: two float32 moments; bitsandbytes' 8-bit AdamW: two 8-bit moments).
OPTIMIZER_STATE_BYTES = {"adamw_torch": 8, "adamw_torch_fused": 8, "adamw_8bit": 2, "adamw_bnb_8bit": 2,
                         "paged_adamw_8bit": 2, "sgd": 0}
GRAD_BYTES = 4
LORA_TRAINABLE_SHARE = 0.01  # LoRA r=32 on every linear layer of a 4-7 B model: well under 1 % trains


@dataclass(frozen=True)
class MemoryPlan:
    """One GPU job's memory, planned: what the engine and the trainer need of the card."""
    model: str
    card_gb: float
    share: float                # vLLM's gpu_memory_utilization
    weights_gb: float           # bf16, in the engine (and once more in a colocated trainer)
    kv_tokens: int              # the KV cache vLLM's share leaves
    sequence_tokens: int        # one rollout at full length: prompt + completion
    batch_tokens: int           # one generation batch (a group, or an evaluation batch) at full length
    trainer_gb: float           # a colocated trainer beside the engine (0 for inference alone)
    problems: tuple[str, ...]   # the job cannot run
    notes: tuple[str, ...]      # it runs, slower than it could

    @property
    def fits(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        card = f"{self.card_gb:.1f} GB ({self.card_gb * GB / GIB:.1f} GiB) card"
        head = (f"{self.model} on a {card}: vLLM share {self.share:g} = {self.card_gb * self.share:.1f} GB, "
                f"weights {self.weights_gb:.1f} GB, KV cache {self.kv_tokens:,} tokens "
                f"(one rollout {self.sequence_tokens:,}, one batch {self.batch_tokens:,})")
        if self.trainer_gb:
            head += f", colocated trainer ~{self.trainer_gb:.1f} GB"
        return "\n  - ".join([head, *self.problems, *self.notes])


def gpu_memory_plan(shape: ModelShape, card_gb: float, share: float, *, sequence_tokens: int, rollouts: int = 1,
                    model: str = "model", colocated_trainer: bool = False, lora: bool = True,
                    optimizer: str = "adamw_torch", sleep_mode: bool = False, overhead_gb: float = 3.0,
                    activation_gb: float = 10.0) -> MemoryPlan:
    """Plan one GPU job's memory (pure: no torch, no card).

    ``sequence_tokens``: prompt + completion of one rollout (vLLM's max_model_len);
    ``rollouts``: how many the job would like in flight at once (a generation batch).
    ``colocated_trainer``: TRL's colocate mode, the policy training on the same card beside the
    engine. Without ``sleep_mode`` the engine holds its share for the whole run, so the trainer's
    activations must fit beside it; with it (TRL's vllm_enable_sleep_mode) the engine gives its
    share back while the trainer steps, and takes it again, beside the trainer's weights and
    optimizer state, to generate. ``activation_gb``: an allowance for the trainer's activations
    and logits under gradient checkpointing, not a measurement.
    A problem means the job cannot run; a note that it runs with fewer rollouts in flight."""
    if not 0 < share <= 1:
        raise ValueError(f"vLLM gpu_memory_utilization must be in (0, 1], got {share}")
    problems, notes = [], []
    engine_gb = card_gb * share
    kv = kv_cache_tokens(shape, card_gb, share, overhead_gb)
    batch = sequence_tokens * max(1, rollouts)
    if shape.weight_gb + overhead_gb >= engine_gb:
        problems.append(f"vLLM's share {share:g} of the card is {engine_gb:.1f} GB, less than the weights "
                        f"{shape.weight_gb:.1f} GB + {overhead_gb:g} GB engine overhead: raise the share or use a "
                        "larger card")
    elif kv < sequence_tokens:
        problems.append(f"the KV cache left in vLLM's share holds {kv:,} tokens, fewer than one rollout of "
                        f"{sequence_tokens:,} (max_model_len): raise the share or lower the lengths")
    elif kv < batch:
        notes.append(f"{kv // sequence_tokens} of the batch's {max(1, rollouts)} rollouts fit the KV cache at full "
                     f"length at once ({kv:,} of {batch:,} tokens): generation runs in waves")
    trainer_gb = 0.0
    if colocated_trainer:
        trainable = shape.params_b * 1e9 * (LORA_TRAINABLE_SHARE if lora else 1.0)
        state = OPTIMIZER_STATE_BYTES.get(optimizer, 8)
        resident_gb = shape.weight_gb + trainable * (GRAD_BYTES + state) / GB  # kept between steps
        trainer_gb = resident_gb + activation_gb
        # the peak: the engine's share beside the whole trainer, or (sleep mode) beside its
        # resident part while generating and alone the trainer's step, whichever is larger
        peak_gb = max(resident_gb + engine_gb, trainer_gb) if sleep_mode else trainer_gb + engine_gb
        if peak_gb > card_gb:
            problems.append(f"the colocated trainer (~{trainer_gb:.1f} GB: weights, "
                            f"{'LoRA' if lora else 'full'} gradients and {optimizer} state, {activation_gb:g} GB "
                            f"activations) and vLLM's {engine_gb:.1f} GB "
                            f"{'(asleep while the trainer steps) ' if sleep_mode else ''}peak at {peak_gb:.1f} GB, "
                            f"over the card's {card_gb:.1f} GB: lower the share or use a larger card")
    return MemoryPlan(model, card_gb, share, shape.weight_gb, kv, sequence_tokens, batch, trainer_gb,
                      tuple(problems), tuple(notes))


class GPUMemoryError(RuntimeError):
    """A GPU job's planned memory does not fit the card it was given."""


def card_memory_bytes() -> int | None:
    """Total memory of the job's first CUDA device, or None without CUDA (a CPU job: nothing to check)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(0).total_memory)


def preflight_gpu_memory(model_dir: str, share: float, *, sequence_tokens: int, rollouts: int = 1,
                         colocated_trainer: bool = False, lora: bool = True, optimizer: str = "adamw_torch",
                         sleep_mode: bool = False, where: str = "", card_bytes: int | None = None,
                         log=print) -> MemoryPlan | None:
    """Before a GPU job loads anything: plan its memory on the card it has and raise
    :class:`GPUMemoryError` with the numbers when it cannot fit. None (nothing checked) without
    CUDA or when the model folder has no shape to read (an adapter, a Hub id)."""
    card_bytes = card_memory_bytes() if card_bytes is None else card_bytes
    if card_bytes is None:
        return None
    shape = model_shape_from_folder(model_dir)
    if shape is None:
        log(f"GPU memory preflight skipped: {model_dir} has no config.json and safetensors to read a shape from")
        return None
    plan = gpu_memory_plan(shape, card_bytes / GB, share, sequence_tokens=sequence_tokens, rollouts=rollouts,
                           model=str(model_dir), colocated_trainer=colocated_trainer, lora=lora, optimizer=optimizer,
                           sleep_mode=sleep_mode)
    if not plan.fits:
        raise GPUMemoryError(f"GPU memory preflight{' (' + where + ')' if where else ''}: {plan.summary()}")
    log(f"GPU memory preflight: {plan.summary()}")
    return plan


__all__ = ["GPU", "GPUS", "GPUMemoryError", "MODEL_SHAPES", "MemoryPlan", "ModelShape", "card_memory_bytes",
           "gpu_memory_plan", "kv_cache_tokens", "model_shape_from_folder", "preflight_gpu_memory"]
