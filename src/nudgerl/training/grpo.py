"""GRPO baseline: TRL's ``GRPOTrainer`` with the project's grader as reward.

Framework glue only: the trainer is TRL's, the reward is :func:`nudgerl.grading.grade`,
and a callback writes per-step metrics (reward, zero-variance groups, lengths, rollout
tokens, step time) to ``metrics.jsonl``. Every N uses the same number of *prompts* per
step, so rollout cost grows with N as in the paper.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..io import atomic_write_text


@dataclass
class GRPORunConfig:
    """What one GRPO run needs; built from the ``grpo`` config section plus run keys."""

    num_generations: int = 8  # N
    prompts_per_step: int = 4
    max_steps: int = 60
    learning_rate: float = 1e-4
    lr_scheduler_type: str = "constant"
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 64
    max_prompt_length: int | None = None
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float = 0.2
    # TRL's mu: optimizer passes over each generation batch. With 1 every update is on-policy
    # (importance ratio == 1), so epsilon/epsilon_high never clip anything.
    num_iterations: int = 1
    loss_type: str = "grpo"
    scale_rewards: str = "group"
    checkpoint_every: int = 20
    seed: int = 0
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    bf16: bool = False
    optim: str = "adamw_torch"
    lora: dict | None = None  # {"r":..,"alpha":..,"dropout":..,"target_modules":[..]} at paper scale
    extra: dict = field(default_factory=dict)  # passed through to trl.GRPOConfig

    @classmethod
    def from_dict(cls, d: dict) -> GRPORunConfig:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def trl_config(cfg: GRPORunConfig, output_dir: str):
    from trl import GRPOConfig

    batch = cfg.prompts_per_step * cfg.num_generations
    kwargs = dict(
        output_dir=output_dir,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_generations=cfg.num_generations,
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_ratio,  # transformers 5: a float < 1 is a ratio of max_steps
        weight_decay=cfg.weight_decay,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=0,
        max_completion_length=cfg.max_completion_length,
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high,
        num_iterations=cfg.num_iterations,
        loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards,
        logging_steps=1,
        save_strategy="steps",
        save_steps=cfg.checkpoint_every,
        save_only_model=False,
        seed=cfg.seed,
        data_seed=cfg.seed,
        report_to="none",
        use_cpu=not _has_gpu(),
        bf16=cfg.bf16,
        optim=cfg.optim,
        use_vllm=cfg.use_vllm,
        vllm_mode=cfg.vllm_mode,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
        shuffle_dataset=True,
    )
    kwargs.update(cfg.extra)
    return GRPOConfig(**kwargs)


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _metrics_callback(path: Path, cfg: GRPORunConfig, resume_tokens: float):
    from transformers import TrainerCallback

    class MetricsToJsonl(TrainerCallback):
        """Appends one JSON line per optimizer step; cumulative rollout tokens included."""

        def __init__(self):
            self.rollout_tokens = resume_tokens
            self.t_last = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "reward" not in logs:
                return
            n_rollouts = cfg.prompts_per_step * cfg.num_generations
            mean_len = float(logs.get("completions/mean_length", 0.0))
            self.rollout_tokens += mean_len * n_rollouts
            now = time.perf_counter()
            row = {
                "step": state.global_step,
                "reward_mean": logs.get("reward"),
                "reward_std": logs.get("reward_std"),
                "frac_zero_variance_groups": logs.get("frac_reward_zero_std"),
                "completion_length_mean": mean_len,
                "rollouts": n_rollouts,
                "rollout_tokens": mean_len * n_rollouts,
                "cumulative_rollout_tokens": self.rollout_tokens,
                "step_time": logs.get("step_time", now - self.t_last),
                "wall_step_time": now - self.t_last,
                "loss": logs.get("loss"),
                "learning_rate": logs.get("learning_rate"),
                # TRL's num_input_tokens_seen: prompt + completion tokens trained on so far
                "num_tokens": logs.get("num_tokens"),
            }
            row.update({k: v for k, v in logs.items() if k.startswith("nudge/")})
            self.t_last = now
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")

    return MetricsToJsonl()


def _last_checkpoint(output_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None


def _truncate_metrics(path: Path, step: int) -> float:
    """Keep metric rows up to ``step`` (a resume re-trains nothing before it)."""
    if not path.exists():
        return 0.0
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    kept = [r for r in rows if r["step"] <= step]
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return kept[-1]["cumulative_rollout_tokens"] if kept else 0.0


def build_trainer(trainer_cls, model_dir: str, train_records: list[dict], cfg, run_dir: Path, callbacks=(), **extra):
    """Shared by GRPO and NudgeRL: dataset, reward, PEFT, TRL config."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..rewards import correctness_reward

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    peft_config = None
    if cfg.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.lora["r"],
            lora_alpha=cfg.lora["alpha"],
            lora_dropout=cfg.lora.get("dropout", 0.0),
            target_modules=cfg.lora.get("target_modules", "all-linear"),
            task_type="CAUSAL_LM",
        )
    dataset = datasets.Dataset.from_list(train_records)
    return trainer_cls(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[correctness_reward],
        args=trl_config(cfg, str(run_dir / "checkpoints")),
        train_dataset=dataset,
        peft_config=peft_config,
        callbacks=list(callbacks),
        **extra,
    )


def run_training(trainer_cls, model_dir, train_records, cfg, run_dir: Path, **extra) -> dict:
    """Train (resuming from the last checkpoint if one exists), save the final model."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # Live metrics sit beside the checkpoints (kept if the job dies); the declared output
    # metrics.jsonl is copied into place only when training finished.
    metrics_path = run_dir / "checkpoints" / "metrics.jsonl"
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    resume = _last_checkpoint(run_dir / "checkpoints")
    resume_step = int(resume.rsplit("-", 1)[1]) if resume else 0
    tokens = _truncate_metrics(metrics_path, resume_step)
    callback = _metrics_callback(metrics_path, cfg, tokens)
    trainer = build_trainer(trainer_cls, model_dir, train_records, cfg, run_dir, callbacks=[callback], **extra)
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume)
    final_dir = run_dir / "model"
    tmp_dir = run_dir / "model.tmp"
    trainer.save_model(str(tmp_dir))
    trainer.processing_class.save_pretrained(str(tmp_dir))
    if final_dir.exists():
        import shutil

        shutil.rmtree(final_dir)
    os.replace(tmp_dir, final_dir)
    atomic_write_text(run_dir / "metrics.jsonl", metrics_path.read_text())
    return {
        "resumed_from_step": resume_step,
        "train_seconds": time.perf_counter() - t0,
        "global_step": trainer.state.global_step,
        "gpus": _gpu_count(),
        "config": asdict(cfg),
    }


def train_grpo(model_dir: str, train_records: list[dict], cfg: GRPORunConfig, run_dir: Path) -> dict:
    from trl import GRPOTrainer

    return run_training(GRPOTrainer, model_dir, train_records, cfg, run_dir)
