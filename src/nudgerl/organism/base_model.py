"""SFT of the organism's tiny causal LM from scratch: the stand-in for an instruct model.

The SFT corpus makes ``common_difference`` the habit and ``difference_table`` rare when no
hint is given, and follows the hint when one is (``hinted_fraction`` of examples, strategy
drawn uniformly). That yields the paper's regime: the always-right strategy is in the
policy's support but rarely sampled, and a hint naming it unlocks it.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import task


@dataclass
class BaseModelConfig:
    seed: int = 0
    examples: int = 40000
    hard_fraction: float = 0.5
    hinted_fraction: float = 0.4
    # Phase 1 ("pretraining"): every arithmetic fact of the family, drilled this many
    # times for drill_epochs. Phase 2 (SFT on traces) keeps replaying each fact
    # `arithmetic_replay` times so the table is not forgotten.
    arithmetic_drills: int = 100
    drill_epochs: float = 2.0
    arithmetic_replay: int = 10
    # Which strategy an unhinted trace uses, independently of the problem.
    unhinted_strategy_weights: dict[str, float] = field(
        default_factory=lambda: {
            "common_difference": 0.75,
            "first_difference": 0.17,
            "sum_of_last_two": 0.05,
            "difference_table": 0.03,
        }
    )
    # Which strategy a hinted example names. The always-right strategy has the longest
    # trace, so it gets the most practice; this does not change the unhinted habit.
    hinted_strategy_weights: dict[str, float] = field(
        default_factory=lambda: {
            "common_difference": 0.2,
            "first_difference": 0.15,
            "sum_of_last_two": 0.15,
            "difference_table": 0.5,
        }
    )
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 3
    num_heads: int = 4
    batch_size: int = 64
    epochs: float = 2.0
    learning_rate: float = 2e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01


def sft_examples(cfg: BaseModelConfig) -> list[tuple[str, str]]:
    """(user message, assistant trace) pairs for SFT, seeded."""
    rng = random.Random(f"sft:{cfg.seed}")
    names = list(cfg.unhinted_strategy_weights)
    weights = [cfg.unhinted_strategy_weights[n] for n in names]
    h_names = list(cfg.hinted_strategy_weights)
    h_weights = [cfg.hinted_strategy_weights[n] for n in h_names]
    problems = task.training_problems(cfg.seed, cfg.examples, cfg.hard_fraction, prefix="sft")
    out = []
    for p in problems:
        if rng.random() < cfg.hinted_fraction:
            strategy = rng.choices(h_names, h_weights)[0]
            user = task.prompt_text(p.text(), task.hint_line(strategy))
        else:
            strategy = rng.choices(names, weights)[0]
            user = task.prompt_text(p.text())
        out.append((user, task.trace(p.terms, strategy)))
    out += [task.drill(f) for f in task.arithmetic_facts() for _ in range(cfg.arithmetic_replay)]
    rng.shuffle(out)
    return out


def drill_examples(cfg: BaseModelConfig) -> list[tuple[str, str]]:
    return [task.drill(f) for f in task.arithmetic_facts() for _ in range(cfg.arithmetic_drills)]


def _encode(tokenizer, examples):
    """Token ids and a loss mask that covers the assistant turn (and its end token) only."""
    import torch

    seqs, masks = [], []
    for user, assistant in examples:
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(assistant, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        seqs.append(p_ids + c_ids)
        masks.append([0] * len(p_ids) + [1] * len(c_ids))
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
    loss_mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (s, m) in enumerate(zip(seqs, masks)):
        ids[i, : len(s)] = torch.tensor(s)
        loss_mask[i, : len(m)] = torch.tensor(m, dtype=torch.bool)
        attn[i, : len(s)] = 1
    return ids, attn, loss_mask


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


def _length_bucketed_batches(lengths, batch_size: int, gen) -> list:
    """Shuffled batches of similar-length rows: far less padding than random batches."""
    import torch

    order = torch.randperm(len(lengths), generator=gen).tolist()
    chunk = batch_size * 50
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: lengths[i])
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    perm = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[i] for i in perm]


def _train_phase(model, tokenizer, examples, epochs: float, cfg: BaseModelConfig, gen, log, name: str) -> list:
    import torch

    ids, attn, loss_mask = _encode(tokenizer, examples)
    lengths = attn.sum(1).tolist()
    steps = math.ceil(epochs * len(examples) / cfg.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    warmup = min(cfg.warmup_steps, steps // 10 + 1)

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    model.train()
    t0, history, batches = time.perf_counter(), [], []
    for step in range(steps):
        if not batches:
            batches = _length_bucketed_batches(lengths, cfg.batch_size, gen)
        idx = torch.tensor(batches.pop())
        width = int(attn[idx].sum(1).max())
        b_ids, b_attn, b_mask = ids[idx, :width], attn[idx, :width], loss_mask[idx, :width]
        loss = model(input_ids=b_ids, attention_mask=b_attn, labels=b_ids.masked_fill(~b_mask, -100)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 100 == 0 or step == steps - 1:
            history.append({"phase": name, "step": step, "loss": loss.item()})
            log(f"{name} step {step}/{steps} loss {loss.item():.4f} ({time.perf_counter() - t0:.0f}s)")
    return history


def train_base_model(cfg: BaseModelConfig, out_dir: str | Path, log=print) -> dict:
    """Train and save an HF model directory (model, tokenizer, generation config)."""
    import torch

    from .tokenizer import build_tokenizer

    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    tokenizer = build_tokenizer()
    model = new_model(tokenizer, cfg)
    t0 = time.perf_counter()
    history = _train_phase(model, tokenizer, drill_examples(cfg), cfg.drill_epochs, cfg, gen, log, "arithmetic")
    traces = sft_examples(cfg)
    history += _train_phase(model, tokenizer, traces, cfg.epochs, cfg, gen, log, "sft")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {
        "examples": len(traces),
        "parameters": sum(p.numel() for p in model.parameters()),
        "final_loss": history[-1]["loss"],
        "seconds": time.perf_counter() - t0,
        "loss_history": history,
    }
