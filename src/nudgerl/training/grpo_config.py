"""What one GRPO run needs (:class:`GRPORunConfig`), read from the ``grpo`` config section.

Beside :mod:`nudgerl.training.grpo` (the trainer glue), as TRL keeps ``grpo_config.py`` beside
``grpo_trainer.py``; :func:`nudgerl.training.grpo.trl_config` turns it into TRL's ``GRPOConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nudgerl.advantages import get_advantage_estimator
from nudgerl.evaluation.grading import DEFAULT_MODE
from nudgerl.sections import from_section

# Keys of the ``grpo`` section that the workflow reads, not a run: which N to run, the eps_high
# sweep, the checkpoint prune. The rules pass the section (group_sizes included) to every training job.
WORKFLOW_KEYS = ("group_sizes", "epsilon_high_sweep", "epsilon_high_sweep_group_size", "prune_checkpoints")

# Fields passed to trl.GRPOConfig under the same name (trl_config sets the others: batch
# sizes, vLLM engine, warmup_steps from warmup_ratio, save_steps from checkpoint_every, ...).
TRL_FIELDS = ("num_generations", "max_steps", "learning_rate", "lr_scheduler_type", "weight_decay", "temperature",
              "top_p", "max_completion_length", "beta", "epsilon", "epsilon_high", "num_iterations", "loss_type",
              "scale_rewards", "seed", "report_to", "bf16", "optim", "use_vllm", "vllm_mode", "cache_implementation",
              "mask_truncated_completions", "importance_sampling_level", "entropy_coef", "top_entropy_quantile")


# TRL 1.16's losses divided by the batch's loss tokens: the ones DAPO's dynamic sampling reweights.
TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "bnpo")
# DAPO's dynamic sampling as built here: None (off) or "drop" (zero-variance groups leave the
# loss; DAPO itself resamples until the batch is full, which TRL's fixed batches do not allow).
DYNAMIC_SAMPLING = (None, "drop")


@dataclass
class GRPORunConfig:
    """What one GRPO run needs; built from the ``grpo`` config section plus run keys.

    Defaults are config/config.yaml's ``grpo`` values, except the batching (one micro-batch per
    generation, TRL's gradient checkpointing) that small runs built in code rely on: see
    KNOWN_DIFFERENCES in tests/test_config_sections.py."""

    num_generations: int = 8  # N
    prompts_per_step: int = 8
    max_steps: int = 40
    learning_rate: float = 1e-4
    lr_scheduler_type: str = "constant"
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 56
    max_prompt_length: int | None = None
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float = 0.2
    # TRL's mu: optimizer passes over each generation batch. With 1 every update is on-policy
    # (importance ratio == 1), so epsilon/epsilon_high never clip anything.
    num_iterations: int = 1
    loss_type: str = "grpo"
    scale_rewards: str = "group"
    # The options the field's exploration fixes set (TRL 1.16's names and defaults): DAPO's
    # overlong masking, GSPO's sequence-level importance ratio, an entropy bonus and the
    # high-entropy-token share of "Beyond the 80/20 rule".
    mask_truncated_completions: bool = False
    importance_sampling_level: str = "token"
    entropy_coef: float = 0.0
    top_entropy_quantile: float = 1.0
    checkpoint_every: int = 10
    seed: int = 0
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    bf16: bool = False
    optim: str = "adamw_torch"
    lora: dict | None = None  # {"r":..,"alpha":..,"dropout":..,"target_modules":[..]} at paper scale
    # Paper scale (the authors' batching): each generation samples prompts_per_step x N
    # rollouts, trained in micro-batches of per_device_train_batch_size over
    # optimizer_steps_per_generation optimizer steps. None = one micro-batch per step (organism).
    per_device_train_batch_size: int | None = None
    optimizer_steps_per_generation: int = 1
    gradient_checkpointing: bool | None = None  # None: TRL's default
    vllm_gpu_memory_utilization: float = 0.3
    vllm_tensor_parallel_size: int = 1
    # TRL's sleep mode: the colocated engine drops its weights and KV cache while the trainer
    # steps and takes them back to generate, so the trainer's activations can use that memory.
    vllm_enable_sleep_mode: bool = False
    # transformers' attention kernel for the trained policy (None: transformers' choice)
    attn_implementation: str | None = None
    # KV cache of TRL's transformers generation (not vLLM's): "static" pre-allocates prompt +
    # completion instead of concatenating per token (fewer CPU seconds, the same rollouts and
    # weights: tests/test_sampling.py); None: transformers' dynamic cache.
    cache_implementation: str | None = "static"
    # Correction of the vLLM sampler / trained policy mismatch (TRL's options; None: TRL's
    # default, sequence_mask at 3.0). The authors' TRL 0.23 clamped each token's ratio at 2
    # (token_truncate, clip_max 2.0).
    vllm_importance_sampling_correction: bool | None = None
    vllm_importance_sampling_mode: str | None = None
    vllm_importance_sampling_clip_max: float | None = None
    vllm_importance_sampling_clip_min: float | None = None
    # Experiment tracking the TRL way: "none", "tensorboard", "wandb" or a list of them.
    report_to: str | list[str] = "none"
    # None: TRL's own advantage, as scale_rewards sets it. Or a name registered in
    # nudgerl.advantages: one that TRL computes ("grpo", "dr_grpo") sets its TRL options; one
    # that TRL lacks ("ngrpo", "pass_at_k") is applied by our trainer hook. NudgeRL runs use
    # their own ("nudgerl").
    advantage_estimator: str | None = None
    advantage_k: int = 4  # the k of the pass_at_k estimator
    # DAPO's dynamic sampling, as far as TRL's fixed batches allow: "drop" takes the groups whose
    # rollouts all scored alike out of a token-normalised loss (dapo, cispo, bnpo); None: off.
    dynamic_sampling: str | None = None
    grader_mode: str = DEFAULT_MODE  # nudgerl.evaluation.grading.GRADER_MODES: how the reward reads completions
    stop: list[str] = field(default_factory=list)  # generation stop strings (vLLM), from the prompt template
    extra: dict = field(default_factory=dict)  # passed through to trl.GRPOConfig

    def __post_init__(self):
        if self.advantage_estimator is not None:
            get_advantage_estimator(self.advantage_estimator)  # an unknown name fails when the config is read
        if self.advantage_k < 1:
            raise ValueError(f"config key 'grpo.advantage_k': must be >= 1, got {self.advantage_k}")
        if self.dynamic_sampling not in DYNAMIC_SAMPLING:
            raise ValueError(f"config key 'grpo.dynamic_sampling': {self.dynamic_sampling!r} is not 'drop' or null")
        if self.dynamic_sampling and self.loss_type not in TOKEN_NORMALISED_LOSSES:
            # under a per-sequence or constant normaliser a dropped group's rows weigh as before
            raise ValueError(f"config key 'grpo.dynamic_sampling': 'drop' changes only a token-normalised loss "
                             f"(loss_type {' / '.join(TOKEN_NORMALISED_LOSSES)}), not loss_type {self.loss_type!r}")

    @classmethod
    def from_dict(cls, d: dict, section: str = "grpo") -> GRPORunConfig:
        """A run's config from the ``grpo`` section (plus the run keys num_generations, seed,
        grader_mode): an unknown key is an error; the workflow's own keys are skipped."""
        return from_section(cls, d, section, ignore=WORKFLOW_KEYS)
