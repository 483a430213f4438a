"""SFT of the organism's tiny causal LM from scratch: the stand-in for an instruct model.

Two phases: the arithmetic drill (phase 1, :func:`drill_base_model` runs it alone, saved
with the RNG states phase 2 continues from) and SFT on traces (phase 2), checked as it
trains (:mod:`nudgerl.organism.checks`) under :class:`~nudgerl.organism.sft_schedule.SFTSchedule`.
The corpus is built in :mod:`nudgerl.organism.sft_data`, the settings are
:class:`~nudgerl.organism.base_config.BaseModelConfig`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

# DRILL_KEYS, DRILL_RNG and _encode are not used here: with the other names imported, they keep
# what this module defined before its split importable from it (workflow_plan, tests).
from nudgerl.organism import task
from nudgerl.organism.base_config import (DRILL_KEYS, BaseModelConfig, attempt_seed, drill_config,  # noqa: F401
                                          task_module)
from nudgerl.organism.checks import execution_check, family_strategy_prior, unhinted_strategy_prior
from nudgerl.organism.rng_state import DRILL_RNG, restore_rng_state, save_rng_state  # noqa: F401
from nudgerl.organism.sft_data import _Corpus, _encode, drill_examples, sft_examples  # noqa: F401
from nudgerl.organism.sft_schedule import SFTSchedule


def new_model(tokenizer, cfg: BaseModelConfig):
    from transformers import LlamaConfig, LlamaForCausalLM

    mcfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(mcfg)


def save_random_model(path, cfg: BaseModelConfig, seed: int = 0) -> str:
    """An untrained organism model (``cfg``'s shape, seeded) with its tokenizer and generation
    config, saved at ``path``: the tests' and the paper check's stand-in model."""
    import torch

    from nudgerl.organism.tokenizer import build_tokenizer

    torch.manual_seed(seed)
    tok = build_tokenizer()
    model = new_model(tok, cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _sgd_step(model, opt, sched, batch: dict) -> float:
    import torch

    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def _drill_phase(model, tokenizer, cfg: BaseModelConfig, gen, log) -> list:
    """Phase 1: the arithmetic facts, a fixed number of epochs under a cosine schedule."""
    import torch

    examples = drill_examples(cfg)
    corpus = _Corpus(tokenizer, examples, cfg.batch_size, gen)
    steps = math.ceil(cfg.drill_epochs * len(examples) / cfg.batch_size)
    warmup = min(cfg.warmup_steps, steps // 10 + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, steps - warmup))))
    model.train()
    history, t0 = [], time.perf_counter()
    for step in range(steps):
        loss = _sgd_step(model, opt, sched, corpus.next_batch())
        if step % 100 == 0 or step == steps - 1:
            history.append({"phase": "arithmetic", "step": step, "loss": loss})
            log(f"arithmetic step {step}/{steps} loss {loss:.4f} ({time.perf_counter() - t0:.0f}s)")
    return history


def _sft_phase(model, tokenizer, cfg: BaseModelConfig, gen, log) -> tuple[list, dict]:
    """Phase 2: SFT on traces, checked every ``check_every`` steps (:class:`SFTSchedule`)."""
    import torch

    spec = task_module(cfg)
    corpus = _Corpus(tokenizer, sft_examples(cfg), cfg.batch_size, gen)
    check_set = spec.validation_problems(cfg.seed, cfg.check_problems)
    # a hint that only nudges: the hinted check gives the choice too (execution is checked)
    check = dict(spec=spec, choice_after_hint=cfg.hint_following < 1)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    schedule = SFTSchedule(max(1, min(cfg.warmup_steps, cfg.cycle_steps // 10)), cfg.cycle_steps, cfg.anneal_steps,
                           cfg.max_steps, cfg.restart_peak)
    # chosen unhinted, the always-right strategy's wrong last step is taught too below accuracy 1
    misexecuted = frozenset({task.RARE_CORRECT_STRATEGY} if cfg.unhinted_rare_accuracy < 1 else ())
    model.train()
    history, checks, passed_at, t0 = [], [], None, time.perf_counter()
    step = 0
    while not schedule.done(step):
        for group in opt.param_groups:
            group["lr"] = cfg.learning_rate * schedule.factor(step)
        loss = model(**corpus.next_batch()).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if passed_at is None and step % cfg.check_every == 0:
            scores = execution_check(model, tokenizer, check_set, **check)
            chosen = execution_check(model, tokenizer, check_set, chosen=True, misexecuted=misexecuted, **check)
            checks.append({"step": step, "execution": scores, "execution_chosen": chosen})
            log(f"sft step {step} loss {loss.item():.4f} execution {scores} chosen unhinted {chosen} "
                f"({time.perf_counter() - t0:.0f}s)")
            if min(scores.values()) >= cfg.check_threshold and min(chosen.values()) >= cfg.check_threshold:
                passed_at = step
                schedule.passed(step)
        if step % 100 == 0:
            history.append({"phase": "sft", "step": step, "loss": loss.item()})
    history.append({"phase": "sft", "step": step, "loss": loss.item()})
    final = execution_check(model, tokenizer, check_set, **check)
    final_chosen = execution_check(model, tokenizer, check_set, chosen=True, misexecuted=misexecuted, **check)
    report = {
        "threshold": cfg.check_threshold,
        "problems": len(check_set),
        "passed_at_step": passed_at,
        "steps": step,
        "restarts": schedule.restarts,
        "final_execution": final,
        "final_execution_chosen": final_chosen,
        # the check after the anneal, recorded; the regime gate and sft_attempts read passed_at_step
        "passed": min(final.values()) >= cfg.check_threshold and min(final_chosen.values()) >= cfg.check_threshold,
        "unhinted_strategy_prior": unhinted_strategy_prior(model, tokenizer, check_set, spec),
        **({"family_strategy_prior": family_strategy_prior(model, tokenizer, check_set, spec)}
           if hasattr(spec, "FAMILIES") else {}),
        "history": checks,
    }
    log(f"sft done at step {step}: check passed at {passed_at}, final execution {final}, chosen unhinted "
        f"{final_chosen}")
    return history, report


# In a drilled model's folder: its drill settings (drill_config), seconds and loss history.
DRILL_REPORT = "drill_report.json"


def _fresh_start(cfg: BaseModelConfig):
    import torch

    from nudgerl.organism.tokenizer import task_tokenizer

    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    tokenizer = task_tokenizer(task_module(cfg))
    return tokenizer, new_model(tokenizer, cfg), gen


def drill_base_model(cfg: BaseModelConfig, out_dir: str | Path, log=print) -> dict:
    """Phase 1 alone, saved with the RNG states phase 2 continues from: a base model built
    from it (:func:`train_base_model` with ``drilled``) equals one built in one go, bit for bit."""
    tokenizer, model, gen = _fresh_start(cfg)
    t0 = time.perf_counter()
    history = _drill_phase(model, tokenizer, cfg, gen, log)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    save_rng_state(gen, out_dir)
    report = {"drill": drill_config(cfg), "seconds": time.perf_counter() - t0, "loss_history": history}
    (out_dir / DRILL_REPORT).write_text(json.dumps(report, indent=2))
    return report


def _drilled_start(cfg: BaseModelConfig, drilled: Path):
    """Model, tokenizer, generator and drill history where :func:`drill_base_model` left them."""
    import torch
    from transformers import LlamaForCausalLM

    from nudgerl.organism.tokenizer import task_tokenizer

    report_path = drilled / DRILL_REPORT
    if not report_path.exists():
        raise FileNotFoundError(f"{drilled}: no {DRILL_REPORT}; not a drilled model (nudgerl drill-base writes one)")
    report = json.loads(report_path.read_text())
    want = drill_config(cfg)
    wrong = [f"{k}={report['drill'].get(k)!r} (this base model: {want[k]!r})" for k in want
             if report["drill"].get(k) != want[k]]
    if wrong:
        raise ValueError(f"{report_path}: drilled with other settings: {'; '.join(wrong)}")
    model = LlamaForCausalLM.from_pretrained(drilled, dtype=torch.float32)
    tokenizer = task_tokenizer(task_module(cfg))
    gen = restore_rng_state(drilled)
    model.train()
    return tokenizer, model, gen, report


def train_base_model(cfg: BaseModelConfig, out_dir: str | Path, log=print, drilled: str | Path | None = None) -> dict:
    """Train and save an HF model directory (model, tokenizer, generation config). With
    ``drilled`` (a :func:`drill_base_model` folder of the same seed and drill settings),
    phase 1 of the first attempt is read from there instead of run. Up to ``cfg.sft_attempts``
    builds: one whose SFT ends without passing its check is discarded and the base model is
    built again, drill included, from the next attempt's seed; the last attempt is kept."""
    t0 = time.perf_counter()
    attempts = []
    for attempt in range(1, cfg.sft_attempts + 1):
        run = cfg if attempt == 1 else dataclasses.replace(cfg, seed=attempt_seed(cfg.seed, attempt))
        if attempt == 1 and drilled is not None:
            tokenizer, model, gen, drill = _drilled_start(run, Path(drilled))
            history, drill_seconds = drill["loss_history"], drill["seconds"]
            log(f"arithmetic drill read from {drilled} ({drill_seconds:.0f}s when it was run)")
        else:
            if attempt > 1:
                log(f"attempt {attempt} of {cfg.sft_attempts}: the base model of seed {run.seed}, drill included")
            tokenizer, model, gen = _fresh_start(run)
            history = _drill_phase(model, tokenizer, run, gen, log)
            drill_seconds = None
        sft_history, check = _sft_phase(model, tokenizer, run, gen, log)
        attempts.append({"attempt": attempt, "seed": run.seed, "steps": check["steps"],
                         "passed_at_step": check["passed_at_step"], "passed": check["passed"]})
        if check["passed_at_step"] is not None:  # the check passed during SFT (the regime gate's test)
            break
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    history += sft_history
    return {
        "examples": cfg.examples,
        "parameters": sum(p.numel() for p in model.parameters()),
        "final_loss": history[-1]["loss"],
        "seconds": time.perf_counter() - t0,
        **({"drilled_from": str(drilled), "drill_seconds": drill_seconds}
           if drilled is not None and len(attempts) == 1 else {}),
        # the seed the kept model was built from, and every attempt (the discarded ones' checks)
        "model_seed": run.seed,
        "sft_attempts": attempts,
        "execution_check": check,
        "loss_history": history,
    }
