"""GRPO baseline: TRL's ``GRPOTrainer`` with the project's grader as reward.

Framework glue only: the trainer is TRL's, the reward is :func:`nudgerl.evaluation.grading.grade`,
and a callback writes per-step metrics (reward, zero-variance groups, lengths, rollout
tokens, step time) to ``metrics.jsonl``. Every N uses the same number of *prompts* per
step, so rollout cost grows with N as in the paper.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from nudgerl.io import atomic_write_text
from nudgerl.training.grpo_config import TRL_FIELDS, GRPORunConfig
from nudgerl.training.run_state import (StoppedForTimeLimit, check_continuous, keep_checkpoints_of, last_checkpoint,
                                        main_process_only, metrics_callback, progress_callback, run_inputs,
                                        stop_on_signal, truncate_metrics)


def trl_config(cfg: GRPORunConfig, output_dir: str):
    from trl import GRPOConfig

    from nudgerl.training.estimator_trainer import trl_advantage_options

    kwargs = dict(output_dir=output_dir, **batch_kwargs(cfg, launched_processes()))
    if cfg.use_vllm:
        kwargs.update(vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                      vllm_tensor_parallel_size=cfg.vllm_tensor_parallel_size,
                      vllm_enable_sleep_mode=cfg.vllm_enable_sleep_mode)
        if cfg.max_prompt_length:
            kwargs["vllm_max_model_length"] = cfg.max_prompt_length + cfg.max_completion_length
        if cfg.stop:
            kwargs["generation_kwargs"] = {"stop": list(cfg.stop), "include_stop_str_in_output": True}
    if cfg.gradient_checkpointing is not None:
        kwargs["gradient_checkpointing"] = cfg.gradient_checkpointing
    kwargs.update(importance_sampling_kwargs(cfg))
    kwargs.update({k: getattr(cfg, k) for k in TRL_FIELDS})  # same name in trl.GRPOConfig
    kwargs.update(trl_advantage_options(cfg))  # an estimator TRL computes itself: its options
    kwargs.update(
        warmup_steps=cfg.warmup_ratio,  # transformers 5: a float < 1 is a ratio of max_steps
        top_k=0,
        logging_steps=1,
        save_strategy="steps",
        save_steps=cfg.checkpoint_every,
        save_only_model=False,
        data_seed=cfg.seed,
        run_name=str(Path(output_dir).parent),  # the run folder: the W&B run's name
        use_cpu=not _has_gpu(),
        remove_unused_columns=False,
        dataloader_num_workers=0,
        # no bar (its redraws fill a Slurm log): progress_callback prints step, elapsed and ETA lines
        disable_tqdm=True,
        shuffle_dataset=True,
    )
    kwargs.update(cfg.extra)
    return GRPOConfig(**kwargs)


IMPORTANCE_SAMPLING_KEYS = ("vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
                            "vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min")


def importance_sampling_kwargs(cfg: GRPORunConfig) -> dict:
    """The vLLM importance-sampling options set in the config (the rest keep TRL's defaults).
    TRL applies them only when generating with vLLM."""
    return {k: getattr(cfg, k) for k in IMPORTANCE_SAMPLING_KEYS if getattr(cfg, k) is not None}


def model_init_kwargs(cfg: GRPORunConfig) -> dict:
    """How the trained policy is loaded: bfloat16 under bf16, and the attention kernel when the
    config names one (the policy is built here and handed to TRL, so TRL's own
    model_init_kwargs would not reach it)."""
    kwargs = {"dtype": "bfloat16"} if cfg.bf16 else {}
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    return kwargs


def launched_processes() -> int:
    """How many training processes this job has: ``accelerate launch`` (torchrun) sets
    WORLD_SIZE in each before Python starts, so it is known before any model is loaded."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def batch_kwargs(cfg: GRPORunConfig, world_size: int = 1) -> dict:
    """TRL batch sizes. Organism: the whole generation (prompts_per_step x N rollouts) is
    one optimizer step, split evenly over the world_size processes (one micro-batch each).
    Paper scale (per_device_train_batch_size set, the authors' setting): generation batch =
    prompts_per_step x N, micro-batches of
    per_device_train_batch_size on each of world_size processes, accumulated so that one
    generation gives optimizer_steps_per_generation optimizer steps (N=8: 8 rollouts, 4 per
    micro-batch, accumulation 1, 2 steps; N=64: accumulation 8, 2 steps). The generation
    batch is the same for any world_size: more processes share it, they do not enlarge it."""
    generation = cfg.prompts_per_step * cfg.num_generations
    if cfg.per_device_train_batch_size is None:
        if generation % world_size:
            raise ValueError(
                f"config keys 'grpo.prompts_per_step' x N: the generation batch of {cfg.prompts_per_step} prompts x "
                f"N={cfg.num_generations} = {generation} rollouts does not split evenly over {world_size} processes "
                "(the job's `gpu` resource, config 'resources.gpu.<rule>'); change prompts_per_step or the gpu count")
        return dict(per_device_train_batch_size=generation // world_size, gradient_accumulation_steps=1,
                    steps_per_generation=1)
    per_step = cfg.per_device_train_batch_size * world_size * cfg.optimizer_steps_per_generation
    if generation % per_step:
        raise ValueError(
            f"config keys 'grpo.prompts_per_step', 'grpo.per_device_train_batch_size', "
            f"'grpo.optimizer_steps_per_generation' and the {world_size} processes (the job's `gpu` resource, config "
            f"'resources.gpu.<rule>'): the generation batch {cfg.prompts_per_step} prompts x N={cfg.num_generations} "
            f"= {generation} rollouts is not a multiple of per_device_train_batch_size "
            f"{cfg.per_device_train_batch_size} x {world_size} processes x optimizer_steps_per_generation "
            f"{cfg.optimizer_steps_per_generation} = {per_step}; raise prompts_per_step or lower the others")
    return dict(per_device_train_batch_size=cfg.per_device_train_batch_size,
                gradient_accumulation_steps=generation // per_step, generation_batch_size=generation)


def trackers(cfg: GRPORunConfig) -> list[str]:
    return [t for t in ([cfg.report_to] if isinstance(cfg.report_to, str) else cfg.report_to) if t != "none"]


def tracker_settings(wanted: list[str], environ) -> dict:
    """Environment a tracker needs beyond its folder: W&B's project, and offline mode on a job
    that runs offline (HF_HUB_OFFLINE=1: a compute node without network, where W&B would retry
    its server for minutes); a value the user set is kept."""
    out = {}
    if "wandb" in wanted:
        if "WANDB_PROJECT" not in environ:
            out["WANDB_PROJECT"] = "nudgerl"
        if environ.get("HF_HUB_OFFLINE") == "1" and "WANDB_MODE" not in environ:
            out["WANDB_MODE"] = "offline"
    return out


@contextmanager
def tracking_environment(cfg: GRPORunConfig, run_dir: Path):
    """Trackers write inside the run folder: TensorBoard event files in ``<run>/tensorboard``,
    W&B's run folder (``WANDB_MODE=offline`` keeps it there) in ``<run>/wandb``. transformers'
    callbacks take these places from the environment only; the previous values come back after."""
    from nudgerl.config import check_trackers

    wanted = trackers(cfg)
    missing = check_trackers({"grpo": {"report_to": wanted}})
    if missing:  # a job on another machine than the one that validated the config
        raise RuntimeError(missing[0])
    places = {"TENSORBOARD_LOGGING_DIR": run_dir / "tensorboard" if "tensorboard" in wanted else None,
              "WANDB_DIR": run_dir if "wandb" in wanted else None}
    extra = tracker_settings(wanted, os.environ)
    saved = {k: os.environ.get(k) for k in [*places, *extra]}
    try:
        for key, path in places.items():
            if path is not None:
                Path(path).mkdir(parents=True, exist_ok=True)
                os.environ[key] = str(path)
        os.environ.update(extra)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def gpu_memory_preflight(model_dir: str, cfg: GRPORunConfig, card_bytes: int | None = None):
    """Plan the job's GPU memory (nudgerl.gpu_memory) before the model loads: TRL's colocated
    vLLM engine takes its share of the card for the whole run, beside the policy, its LoRA
    state and activations. Raises GPUMemoryError with the numbers when that cannot fit; None
    (nothing checked) without vLLM, without CUDA, in server mode (the engine is on other GPUs)
    or with tensor parallelism (the weights split over cards)."""
    if not cfg.use_vllm or cfg.vllm_mode != "colocate" or cfg.vllm_tensor_parallel_size != 1:
        return None
    from nudgerl.gpu_memory import preflight_gpu_memory

    main = os.environ.get("RANK", "0") == "0"
    return preflight_gpu_memory(model_dir, cfg.vllm_gpu_memory_utilization,
                                sequence_tokens=(cfg.max_prompt_length or 0) + cfg.max_completion_length,
                                rollouts=cfg.prompts_per_step * cfg.num_generations, colocated_trainer=True,
                                lora=bool(cfg.lora), optimizer=cfg.optim, sleep_mode=cfg.vllm_enable_sleep_mode,
                                where="config grpo.vllm_gpu_memory_utilization, or this model's models[].grpo",
                                card_bytes=card_bytes, log=print if main else (lambda s: None))


def generation_interval(cfg: GRPORunConfig) -> int:
    """Optimizer steps per generation batch: rollout metrics are logged on those steps only."""
    steps = cfg.optimizer_steps_per_generation if cfg.per_device_train_batch_size is not None else 1
    return steps * cfg.num_iterations


def build_trainer(trainer_cls, model_dir: str, train_records: list[dict], cfg, run_dir: Path, callbacks=(),
                  revision: str | None = None, reward_funcs=None, **extra):
    """Shared by GRPO and NudgeRL: dataset, reward (the grader unless ``reward_funcs``), PEFT,
    TRL config. ``model_dir`` is a local model folder or a Hugging Face model id (``revision`` pins it)."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nudgerl.training.rewards import correctness_reward_for

    tokenizer = AutoTokenizer.from_pretrained(model_dir, revision=revision)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, revision=revision, **model_init_kwargs(cfg))
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
        reward_funcs=list(reward_funcs or [correctness_reward_for(cfg.grader_mode)]),
        args=trl_config(cfg, str(run_dir / "checkpoints")),
        train_dataset=dataset,
        peft_config=peft_config,
        callbacks=list(callbacks),
        **extra,
    )


def lora_update_norm(model) -> dict | None:
    """How far LoRA moved the weights: the Frobenius norm of every adapted layer's update
    dW = scaling * B @ A, summed in squares over layers (0 before training: peft starts B
    at zero). None for a model without LoRA layers."""
    import torch

    total, layers = 0.0, 0
    for module in model.modules():
        lora_a, lora_b = getattr(module, "lora_A", None), getattr(module, "lora_B", None)
        if lora_a is None or lora_b is None:
            continue
        for name in lora_a:
            with torch.no_grad():
                delta = (lora_b[name].weight.float() @ lora_a[name].weight.float()) * module.scaling[name]
                total += float(delta.pow(2).sum())
            layers += 1
    return {"layers": layers, "delta_w_frobenius": total ** 0.5} if layers else None


def run_training(trainer_cls, model_dir, train_records, cfg, run_dir: Path, revision: str | None = None,
                 **extra) -> dict:
    """Train (resuming from the last complete checkpoint if one exists), save the final model
    (its provenance sidecar is the caller's: it also covers the report written afterwards)."""
    run_dir = Path(run_dir)
    # A batch shape that does not fit this job's processes fails here, before any model loads,
    # and so does a vLLM share that cannot hold the model beside the trainer on this card.
    batch_kwargs(cfg, launched_processes())
    gpu_memory_preflight(model_dir, cfg)
    if launched_processes() > 1 and not _has_gpu():
        # Several CPU processes (gloo; the tests): accelerate would put rank r on device "cpu:r",
        # and torch.load cannot restore tensors saved under that tag, so resuming the optimizer
        # state from a checkpoint would fail. Plain "cpu" is the same memory.
        os.environ.setdefault("ACCELERATE_TORCH_DEVICE", "cpu")
    run_dir.mkdir(parents=True, exist_ok=True)
    # Live metrics sit beside the checkpoints (kept if the job dies); the declared output
    # metrics.jsonl is copied into place only when training finished.
    metrics_path = run_dir / "checkpoints" / "metrics.jsonl"
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    callback = metrics_callback(metrics_path, cfg, 0.0)
    stop = stop_on_signal(generation_interval(cfg))
    stop.install()  # before the (long) model load: a warning during it stops at the first step
    try:
        with tracking_environment(cfg, run_dir):
            # Built before the run folder is read: the trainer sets up the processes (accelerate
            # state), and only then can the main process alone clean up while the others wait.
            trainer = build_trainer(trainer_cls, model_dir, train_records, cfg, run_dir,
                                    callbacks=[callback, stop, progress_callback()],
                                    revision=revision, **extra)
            acc = trainer.accelerator
            with main_process_only(acc) as main:
                if main:  # removes half-written checkpoints, drops metric rows past the resume step
                    # and first every checkpoint of a run with other inputs (a rerun after a change)
                    keep_checkpoints_of(run_dir / "checkpoints",
                                        run_inputs(trainer_cls, model_dir, train_records, cfg, revision, **extra),
                                        max_steps=getattr(cfg, "max_steps", None))
                    resume = last_checkpoint(run_dir / "checkpoints")
                    callback.rollout_tokens = truncate_metrics(metrics_path, int(resume.rsplit("-", 1)[1]) if resume else 0)
            resume = last_checkpoint(run_dir / "checkpoints", log=lambda s: None)  # every rank: the same answer now
            resume_step = int(resume.rsplit("-", 1)[1]) if resume else 0
            if resume and main:
                # Optimizer, scheduler, data order and RNG states come back from the checkpoint.
                print(f"resuming from checkpoint {resume} at global step {resume_step}", flush=True)
            t0 = time.perf_counter()
            trainer.train(resume_from_checkpoint=resume)
    finally:
        if stop.stopped_at is None:
            stop.uninstall()
        else:
            # On its way out a stopped rank ignores stop signals: torchrun SIGTERMs the other
            # ranks as soon as one exits non-zero, and Python drops its own handlers while
            # shutting down, so a handler would not cover the interpreter's exit.
            stop.ignore()
    acc.wait_for_everyone()  # the main process's last metric row is written
    if stop.stopped_at is not None:
        stopped = StoppedForTimeLimit(stop.stopped_at, str(run_dir / "checkpoints" / f"checkpoint-{stop.stopped_at}"),
                                      stop.signal_name())
        if main:
            print(stopped.message, flush=True)
        raise stopped
    check_continuous(metrics_path, trainer.state.global_step, generation_interval(cfg))
    lora_norm = lora_update_norm(trainer.model) if cfg.lora else None
    if lora_norm is not None and main:
        print(f"LoRA update: ||dW||_F = {lora_norm['delta_w_frobenius']:.6g} over {lora_norm['layers']} layers", flush=True)
    # The model folder is written under a temporary name and renamed into place, so a kill
    # during the save never leaves a half-written model/ behind. Every process calls
    # save_model (under DeepSpeed it gathers the weights from all of them); only the main
    # process writes, removes and renames.
    import shutil

    final_dir = run_dir / "model"
    tmp_dir = run_dir / "model.tmp"
    with main_process_only(acc):
        if main and tmp_dir.exists():
            shutil.rmtree(tmp_dir)
    trainer.save_model(str(tmp_dir))
    with main_process_only(acc):
        if main:
            trainer.processing_class.save_pretrained(str(tmp_dir))
            if final_dir.exists():
                shutil.rmtree(final_dir)
            os.replace(tmp_dir, final_dir)
            atomic_write_text(run_dir / "metrics.jsonl", metrics_path.read_text())
    return {
        "resumed_from_step": resume_step,
        "train_seconds": time.perf_counter() - t0,
        "global_step": trainer.state.global_step,
        "gpus": _gpu_count(),
        "processes": acc.num_processes,
        "config": asdict(cfg),
        **({"lora_update": lora_norm} if lora_norm is not None else {}),
    }


def train_grpo(model_dir: str, train_records: list[dict], cfg: GRPORunConfig, run_dir: Path,
               revision: str | None = None) -> dict:
    from nudgerl.training.estimator_trainer import grpo_trainer

    trainer_cls, extra = grpo_trainer(cfg)
    return run_training(trainer_cls, model_dir, train_records, cfg, run_dir, revision=revision, **extra)
