"""SFT of the organism's tiny causal LM from scratch: the stand-in for an instruct model.

The SFT corpus makes ``common_difference`` the habit and ``difference_table`` rare when no
hint is given, and follows the hint when one is (``hinted_fraction`` of examples, strategy
drawn uniformly). That yields the paper's regime: the always-right strategy is in the
policy's support but rarely sampled, and a hint naming it unlocks it.

Rare must not mean unpractised: a model that chooses the table unhinted only as often as its
prior says has seen few unhinted table traces, and one replicate executed it right 96 % of
the time when hinted but 19 % when it chose it itself, so RL had nothing to reinforce.
``chosen_fraction`` of the examples are therefore unhinted traces whose strategy choice
(``strategy : <name> .``) is not trained: they teach executing a strategy once chosen
without moving how often it is chosen; and the execution check asks for both, hinted and
chosen-unhinted execution.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from nudgerl.evaluation.sampling import GENERATE_CACHE
from nudgerl.organism import task


@dataclass
class BaseModelConfig:
    seed: int = 0
    examples: int = 30000  # SFT traces in the corpus (cycled until the schedule ends)
    hard_fraction: float = 0.5
    hinted_fraction: float = 0.4
    # Unhinted traces whose strategy choice is masked from the loss (strategy drawn as for hinted
    # examples): execution after an unhinted choice is trained, the choice's frequency is not.
    chosen_fraction: float = 0.0
    # Phase 1 ("pretraining"): every arithmetic fact of the family, drilled this many
    # times for drill_epochs. Phase 2 (SFT on traces) keeps replaying each fact
    # `arithmetic_replay` times so the table is not forgotten.
    arithmetic_drills: int = 25
    drill_epochs: float = 1.0
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
    learning_rate: float = 2e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    # Phase 2 (SFTSchedule): cosine cycles of cycle_steps; the execution check (every
    # strategy's hinted trace reproduced exactly, greedy, on >= check_threshold of
    # check_problems validation problems, every check_every steps) ends training early with
    # a linear anneal of anneal_steps; a cycle without a pass is followed by one at half the
    # peak, up to max_steps (then the failed check is reported and the regime gate decides).
    check_every: int = 50
    check_problems: int = 64
    check_threshold: float = 0.98
    cycle_steps: int = 600
    anneal_steps: int = 100
    max_steps: int = 1500


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
        u = rng.random()
        if u < cfg.hinted_fraction:
            strategy = rng.choices(h_names, h_weights)[0]
            out.append((task.prompt_text(p.text(), task.hint_line(strategy)), task.trace(p.terms, strategy)))
        elif u < cfg.hinted_fraction + cfg.chosen_fraction:
            strategy = rng.choices(h_names, h_weights)[0]
            choice = task.chosen_prefix(strategy)
            out.append((task.prompt_text(p.text()), task.trace(p.terms, strategy)[len(choice) + 1:], choice))
        else:
            strategy = rng.choices(names, weights)[0]
            out.append((task.prompt_text(p.text()), task.trace(p.terms, strategy)))
    out += [task.drill(f) for f in task.arithmetic_facts() for _ in range(cfg.arithmetic_replay)]
    rng.shuffle(out)
    return out


def drill_examples(cfg: BaseModelConfig) -> list[tuple[str, str]]:
    return [task.drill(f) for f in task.arithmetic_facts() for _ in range(cfg.arithmetic_drills)]


def _encode(tokenizer, examples) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of each (user, assistant) pair and its labels: the assistant turn and its end
    token; the prompt is -100 (not trained). A third element, (user, rest, choice), is the
    start of the assistant turn written before ``rest`` and not trained either."""
    seqs, labels = [], []
    for user, assistant, *choice in examples:
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        ) + (choice[0] if choice else "")
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(assistant, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        seqs.append(p_ids + c_ids)
        labels.append([-100] * len(p_ids) + c_ids)
    return seqs, labels


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


def _shuffled_batches(n: int, batch_size: int, gen) -> list:
    """One epoch of i.i.d. batches (as a stack: pop() takes the next).

    Not length-bucketed: a strategy fixes a trace's length, so length-sorted batches are
    nearly pure in one strategy, and those strategy-correlated gradients left the unhinted
    strategy prior miscalibrated by up to 5x (3 % in the data, 0.6 % in the model) and the
    longest trace learned only while the learning rate decayed, a coin flip on float noise.
    """
    import torch

    order = torch.randperm(n, generator=gen).tolist()
    return [order[i : i + batch_size] for i in range(0, n, batch_size)][::-1]


def _pack(lengths: list[int], capacity: int) -> list[list[int]]:
    """First-fit decreasing: positions of ``lengths`` grouped into rows of <= capacity tokens."""
    rows, room = [], []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(capacity - lengths[i])
    return rows


class _Corpus:
    """Encoded examples served as i.i.d. batches of ``batch_size`` examples, epoch after epoch.

    A batch's examples are packed into rows of up to two of the longest example, with
    position ids restarting at each example: transformers then masks attention within each
    example, so the loss is that of the padded batch, with about 40 % fewer tokens computed.
    """

    def __init__(self, tokenizer, examples, batch_size: int, gen):
        self.seqs, self.labels = _encode(tokenizer, examples)
        self.capacity = 2 * max(len(s) for s in self.seqs)
        self.pad = tokenizer.pad_token_id
        self.batch_size, self.gen, self.stack = batch_size, gen, []

    def next_batch(self) -> dict:
        import torch

        if not self.stack:
            self.stack = _shuffled_batches(len(self.seqs), self.batch_size, self.gen)
        picked = self.stack.pop()
        rows = [[picked[j] for j in row] for row in _pack([len(self.seqs[i]) for i in picked], self.capacity)]
        width = max(sum(len(self.seqs[i]) for i in row) for row in rows)
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            at = 0
            for i in row:
                n = len(self.seqs[i])
                ids[r, at : at + n] = torch.tensor(self.seqs[i])
                labels[r, at : at + n] = torch.tensor(self.labels[i])
                positions[r, at : at + n] = torch.arange(n)
                at += n
            positions[r, at:] = torch.arange(width - at)  # padding: a sequence of its own, no labels
        # no attention mask and no cache: the only way transformers reads packed position ids
        return {"input_ids": ids, "labels": labels, "position_ids": positions, "use_cache": False}


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


def execution_check(model, tokenizer, problems: list, batch_size: int = 256, chosen: bool = False) -> dict[str, float]:
    """Per strategy, the share of ``problems`` whose trace the model writes exactly (greedy):
    does it execute each strategy when told to, on problems it never trained on. ``chosen``:
    no hint; the trace's first words (the strategy's choice) are given and the rest is
    checked, i.e. execution once the unhinted policy has chosen the strategy itself."""
    import torch

    was_training = model.training
    model.eval()
    scores = {}
    with torch.no_grad():
        for name in task.STRATEGIES:
            start = task.chosen_prefix(name) if chosen else ""
            prompts = [tokenizer.apply_chat_template([{"role": "user", "content": task.prompt_text(
                p.text(), None if chosen else task.hint_line(name))}], tokenize=False, add_generation_prompt=True)
                + start for p in problems]
            right = 0
            for i in range(0, len(prompts), batch_size):
                enc = tokenizer(prompts[i : i + batch_size], return_tensors="pt", padding=True,
                                padding_side="left", add_special_tokens=False)
                out = model.generate(**enc, max_new_tokens=task.MAX_TRACE_TOKENS, do_sample=False,
                                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                                     **GENERATE_CACHE)
                texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
                right += sum(f"{start} {t.strip()}".strip() == task.trace(p.terms, name)
                             for p, t in zip(problems[i:], texts))
            scores[name] = right / len(problems)
    model.train(was_training)
    return scores


def unhinted_strategy_prior(model, tokenizer, problems: list) -> dict[str, float]:
    """The model's mean probability of each strategy's first word right after "strategy :"
    with no hint: the habit prior the SFT mixture sets (compare unhinted_strategy_weights)."""
    import torch

    first = {n: tokenizer.convert_tokens_to_ids(s.words.split()[0]) for n, s in task.STRATEGIES.items()}
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": task.prompt_text(p.text())}], tokenize=False,
                                             add_generation_prompt=True) + "strategy :" for p in problems]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        probs = torch.softmax(model(**enc).logits[:, -1].float(), dim=-1)
    model.train(was_training)
    return {n: float(probs[:, t].mean()) for n, t in first.items()}


class SFTSchedule:
    """Learning-rate factor of phase 2, with the execution check in the loop.

    Warm-up, then cosine cycles of ``cycle_steps``. The first check that passes turns the
    rest of the run into a linear anneal of ``anneal_steps`` from the current rate (a run
    that has learned stops early); a cycle that ends without a pass is followed by another at
    half the previous peak (a slow run gets more training), up to ``max_steps``.
    """

    def __init__(self, warmup: int, cycle_steps: int, anneal_steps: int, max_steps: int):
        self.warmup, self.cycle_steps, self.anneal_steps, self.max_steps = warmup, cycle_steps, anneal_steps, max_steps
        self.cycle_start, self.peak, self.anneal = warmup, 1.0, None  # anneal: (first step, factor there)
        self.restarts = 0

    def factor(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        if self.anneal is not None:
            start, f = self.anneal
            return max(0.0, f * (1 - (step - start) / self.anneal_steps))
        if step - self.cycle_start >= self.cycle_steps:  # the cycle ended without a pass
            self.cycle_start, self.peak, self.restarts = step, self.peak / 2, self.restarts + 1
        t = (step - self.cycle_start) / self.cycle_steps
        return self.peak * 0.5 * (1 + math.cos(math.pi * t))

    def passed(self, step: int) -> None:
        if self.anneal is None:
            self.anneal = (step, self.factor(step))

    def done(self, step: int) -> bool:
        if self.anneal is not None:
            return step >= min(self.anneal[0] + self.anneal_steps, self.max_steps)
        return step >= self.max_steps


def _sft_phase(model, tokenizer, cfg: BaseModelConfig, gen, log) -> tuple[list, dict]:
    """Phase 2: SFT on traces, checked every ``check_every`` steps (:class:`SFTSchedule`)."""
    import torch

    corpus = _Corpus(tokenizer, sft_examples(cfg), cfg.batch_size, gen)
    check_set = task.validation_problems(cfg.seed, cfg.check_problems)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    schedule = SFTSchedule(max(1, min(cfg.warmup_steps, cfg.cycle_steps // 10)), cfg.cycle_steps, cfg.anneal_steps,
                           cfg.max_steps)
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
            scores = execution_check(model, tokenizer, check_set)
            chosen = execution_check(model, tokenizer, check_set, chosen=True)
            checks.append({"step": step, "execution": scores, "execution_chosen": chosen})
            log(f"sft step {step} loss {loss.item():.4f} execution {scores} chosen unhinted {chosen} "
                f"({time.perf_counter() - t0:.0f}s)")
            if min(scores.values()) >= cfg.check_threshold and min(chosen.values()) >= cfg.check_threshold:
                passed_at = step
                schedule.passed(step)
        if step % 100 == 0:
            history.append({"phase": "sft", "step": step, "loss": loss.item()})
    history.append({"phase": "sft", "step": step, "loss": loss.item()})
    final = execution_check(model, tokenizer, check_set)
    final_chosen = execution_check(model, tokenizer, check_set, chosen=True)
    check = {
        "threshold": cfg.check_threshold,
        "problems": len(check_set),
        "passed_at_step": passed_at,
        "steps": step,
        "restarts": schedule.restarts,
        "final_execution": final,
        "final_execution_chosen": final_chosen,
        "passed": min(final.values()) >= cfg.check_threshold and min(final_chosen.values()) >= cfg.check_threshold,
        "unhinted_strategy_prior": unhinted_strategy_prior(model, tokenizer, check_set),
        "history": checks,
    }
    log(f"sft done at step {step}: check passed at {passed_at}, final execution {final}, chosen unhinted "
        f"{final_chosen}")
    return history, check


# What phase 1 (the arithmetic drill) depends on, and nothing else: the SFT mixture is not
# among them, so the regime map's base models of one replicate seed share one drilled model.
DRILL_KEYS = ("seed", "arithmetic_drills", "drill_epochs", "batch_size", "learning_rate", "warmup_steps",
              "weight_decay", "hidden_size", "intermediate_size", "num_layers", "num_heads")
DRILL_REPORT = "drill_report.json"
DRILL_RNG = "rng_state.pt"


def drill_config(cfg: BaseModelConfig) -> dict:
    import torch

    return {**{k: getattr(cfg, k) for k in DRILL_KEYS}, "threads": torch.get_num_threads()}


def _fresh_start(cfg: BaseModelConfig):
    import torch

    from nudgerl.organism.tokenizer import build_tokenizer

    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    tokenizer = build_tokenizer()
    return tokenizer, new_model(tokenizer, cfg), gen


def drill_base_model(cfg: BaseModelConfig, out_dir: str | Path, log=print) -> dict:
    """Phase 1 alone, saved with the RNG states phase 2 continues from: a base model built
    from it (:func:`train_base_model` with ``drilled``) equals one built in one go, bit for bit."""
    import torch

    tokenizer, model, gen = _fresh_start(cfg)
    t0 = time.perf_counter()
    history = _drill_phase(model, tokenizer, cfg, gen, log)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    torch.save({"generator": gen.get_state(), "torch": torch.get_rng_state()}, out_dir / DRILL_RNG)
    report = {"drill": drill_config(cfg), "seconds": time.perf_counter() - t0, "loss_history": history}
    (out_dir / DRILL_REPORT).write_text(json.dumps(report, indent=2))
    return report


def _drilled_start(cfg: BaseModelConfig, drilled: Path):
    """Model, tokenizer, generator and drill history where :func:`drill_base_model` left them."""
    import torch
    from transformers import LlamaForCausalLM

    from nudgerl.organism.tokenizer import build_tokenizer

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
    tokenizer = build_tokenizer()
    states = torch.load(drilled / DRILL_RNG)
    gen = torch.Generator()
    gen.set_state(states["generator"])
    torch.set_rng_state(states["torch"])
    model.train()
    return tokenizer, model, gen, report


def train_base_model(cfg: BaseModelConfig, out_dir: str | Path, log=print, drilled: str | Path | None = None) -> dict:
    """Train and save an HF model directory (model, tokenizer, generation config). With
    ``drilled`` (a :func:`drill_base_model` folder of the same seed and drill settings),
    phase 1 is read from there instead of run."""
    t0 = time.perf_counter()
    if drilled is None:
        tokenizer, model, gen = _fresh_start(cfg)
        history = _drill_phase(model, tokenizer, cfg, gen, log)
        drill_seconds = None
    else:
        tokenizer, model, gen, drill = _drilled_start(cfg, Path(drilled))
        history, drill_seconds = drill["loss_history"], drill["seconds"]
        log(f"arithmetic drill read from {drilled} ({drill_seconds:.0f}s when it was run)")
    sft_history, check = _sft_phase(model, tokenizer, cfg, gen, log)
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
        **({"drilled_from": str(drilled), "drill_seconds": drill_seconds} if drilled is not None else {}),
        "execution_check": check,
        "loss_history": history,
    }
