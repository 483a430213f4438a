"""Side-by-side performance measurements on the tiny model.

Every figure is a *ratio of two things measured in the same process, interleaved*, because
absolute times on a shared 2-core machine are noise. Ratios are taken on the process's CPU
time (one torch thread, so CPU seconds = the work done, whatever else the machine runs);
wall-clock figures are reported beside them. Used by ``benchmarks/run.py``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _records(n_problems: int, seed: int = 0) -> list[dict]:
    from nudgerl.organism import task

    pool = [s.hint for s in task.STRATEGIES.values()]
    return [
        {"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id, "hints": pool}
        for p in task.training_problems(seed, n_problems, 0.7)
    ]


def random_model(out_dir: Path, config: dict) -> str:
    """A randomly initialised model with the default architecture (when no trained base exists)."""
    import torch

    from nudgerl.organism.base_config import BaseModelConfig
    from nudgerl.organism.base_model import new_model
    from nudgerl.organism.tokenizer import build_tokenizer

    torch.manual_seed(0)
    tok = build_tokenizer()
    arch = {k: config["base_model"][k] for k in ("hidden_size", "intermediate_size", "num_layers", "num_heads")}
    model = new_model(tok, BaseModelConfig(**arch))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return str(out_dir)


def _step_times(trainer_cls, model_dir: str, records, cfg, run_dir: Path, **extra) -> list[tuple[float, float]]:
    """(CPU seconds, wall seconds) of each training step after the first."""
    from transformers import TrainerCallback

    from nudgerl.training.grpo import build_trainer

    times: list[tuple[float, float]] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = (time.process_time(), time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            times.append((time.process_time() - self.t0[0], time.perf_counter() - self.t0[1]))

    trainer = build_trainer(trainer_cls, model_dir, records, cfg, run_dir, callbacks=[StepTimer()], **extra)
    trainer.args.save_strategy = "no"
    trainer.train()
    # The first generation cycle pays one-off set-up; then whole cycles only, since steps
    # that generate and steps that only train alternate (optimizer_steps_per_generation).
    from nudgerl.training.grpo import generation_interval

    every = generation_interval(cfg)
    kept = times[every:]
    return kept[: len(kept) - len(kept) % every]


def nudgerl_step_overhead(model_dir: str, config: dict, work: Path, steps: int = 8, rounds: int = 2) -> dict:
    """Seconds per training step, NudgeRL vs GRPO at the same N and batch (default config)."""
    import torch

    from nudgerl.data.prompts import organism_apply_hint
    from nudgerl.training.grpo_config import GRPORunConfig
    from nudgerl.training.nudgerl import NudgeRLConfig, NudgeRLTrainer
    from trl import GRPOTrainer

    torch.set_num_threads(1)
    nudge_cfg = {k: v for k, v in config["nudgerl"].items() if k != "ablations"}
    nudge = NudgeRLConfig.from_dict(nudge_cfg)
    N = nudge.M * nudge.K
    grpo = dict(config["grpo"], num_generations=N, max_steps=steps + 2, checkpoint_every=10_000)
    cfg = GRPORunConfig.from_dict(grpo)
    # Every completion runs to max_completion_length in both trainers, so the ratio compares
    # equal rollout work (sampled lengths would differ between the runs by chance).
    cfg.extra = {"generation_kwargs": {"min_new_tokens": cfg.max_completion_length}}
    records = _records(cfg.prompts_per_step * (steps + 2))
    grpo_t, nudge_t = [], []
    for r in range(rounds):  # interleaved, so drifting machine load hits both alike
        grpo_t += _step_times(GRPOTrainer, model_dir, records, cfg, work / f"grpo{r}")
        nudge_t += _step_times(NudgeRLTrainer, model_dir, records, cfg, work / f"nudge{r}",
                               nudge=nudge, apply_hint=organism_apply_hint)
    # means, not medians: generating and train-only steps alternate, and both count
    g, n = statistics.mean(t[0] for t in grpo_t), statistics.mean(t[0] for t in nudge_t)
    gw, nw = statistics.mean(t[1] for t in grpo_t), statistics.mean(t[1] for t in nudge_t)
    return {
        "N": N,
        "prompts_per_step": cfg.prompts_per_step,
        "max_completion_length": cfg.max_completion_length,
        "p_drop": nudge.p_drop,
        "lambda_distill": nudge.lambda_distill,
        "steps_timed_each": len(grpo_t),
        "grpo_cpu_s_per_step": round(g, 4),
        "nudgerl_cpu_s_per_step": round(n, 4),
        "ratio": round(n / g, 3),
        "grpo_wall_s_per_step": round(gw, 4),
        "nudgerl_wall_s_per_step": round(nw, 4),
        "wall_ratio": round(nw / gw, 3),
        "target": "<= 1.3",
        "met": n / g <= 1.3,
    }


def _bare_generate(model, tokenizer, prompts: list[str], n: int, batch_size: int, max_new_tokens: int,
                   **generate_kwargs) -> int:
    """The reference: a plain loop of ``model.generate`` calls (transformers' defaults unless
    ``generate_kwargs``); returns generated tokens."""
    import torch

    jobs = [p for p in prompts for _ in range(n)]
    eos, tokens = tokenizer.eos_token_id, 0
    for s in range(0, len(jobs), batch_size):
        enc = tokenizer(jobs[s : s + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, max_new_tokens=max_new_tokens,
                                 pad_token_id=tokenizer.pad_token_id, eos_token_id=eos, **generate_kwargs)
        for ids in gen[:, enc["input_ids"].size(1) :].tolist():
            tokens += ids.index(eos) + 1 if eos in ids else len(ids)
    return tokens


def eval_throughput(model_dir: str, config: dict, n_problems: int = 32, rounds: int = 3) -> dict:
    """Generated tokens/s: the evaluation backend vs a bare generate loop at the same batch,
    and the backend batching many problems' samples vs one problem's samples per call."""
    import torch

    from nudgerl.organism.task import prompt_text
    from nudgerl.evaluation.sampling import GENERATE_CACHE, SamplingParams, chat_prompt, generate, load_policy

    torch.set_num_threads(1)
    model, tok = load_policy(model_dir)
    ev = config["eval"]
    n, batch = ev["samples_per_problem"], ev["batch_size"]
    prompts = [chat_prompt(tok, prompt_text(r["prompt"][0]["content"], None)) for r in _records(n_problems, seed=1)]

    def backend(batch_size: int) -> int:
        out = generate(model, tok, prompts, SamplingParams(n=n, max_new_tokens=ev["max_new_tokens"], batch_size=batch_size))
        return sum(k for outs in out for _, k in outs)

    def bare(**generate_kwargs) -> int:
        torch.manual_seed(0)
        return _bare_generate(model, tok, prompts, n, batch, ev["max_new_tokens"], **generate_kwargs)

    # generated tokens per CPU second; bare_same_cache: the plain loop with the backend's KV
    # cache settings, so backend / bare_same_cache is the wrapper's own overhead
    rates = {"backend": [], "bare": [], "bare_same_cache": [], "backend_per_problem": []}
    runs = [("backend", lambda: backend(batch)), ("bare", bare), ("bare_same_cache", lambda: bare(**GENERATE_CACHE)),
            ("backend_per_problem", lambda: backend(n))]
    bare()  # warm-up: the first generate call in a process pays one-off allocation costs
    for r in range(rounds):
        for name, fn in runs[r % len(runs):] + runs[: r % len(runs)]:  # rotate the order between rounds
            t0 = time.process_time()
            k = fn()
            rates[name].append(k / (time.process_time() - t0))
    med = {k: statistics.median(v) for k, v in rates.items()}
    return {
        "problems": n_problems,
        "samples_per_problem": n,
        "batch_size": batch,
        "tokens_per_cpu_s": {k: round(v, 1) for k, v in med.items()},
        "backend_vs_bare": round(med["backend"] / med["bare"], 3),
        "backend_vs_bare_same_cache": round(med["backend"] / med["bare_same_cache"], 3),
        "batching_gain": round(med["backend"] / med["backend_per_problem"], 2),
        "target": "backend_vs_bare >= 0.9",
        "met": med["backend"] / med["bare"] >= 0.9,
    }


_STARTUP = r"""
import json, sys, time
t0 = time.perf_counter()
kind, model_dir = sys.argv[1], sys.argv[2]
from nudgerl import cli  # what every job imports first
if kind == "train":
    from trl import GRPOTrainer
    from nudgerl.training.grpo import build_trainer
    from nudgerl.training.grpo_config import GRPORunConfig
    t1 = time.perf_counter()
    from nudgerl.organism import task
    recs = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
            for p in task.training_problems(0, 8, 0.7)]
    build_trainer(GRPOTrainer, model_dir, recs, GRPORunConfig(num_generations=8, prompts_per_step=1, max_steps=1),
                  __import__("pathlib").Path(sys.argv[3]))
else:
    from nudgerl.evaluation.benchmarks import evaluate_model
    from nudgerl.evaluation.sampling import load_policy
    t1 = time.perf_counter()
    load_policy(model_dir)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "total_s": t2 - t0,
                  "vllm_imported": "vllm" in sys.modules, "openai_imported": "openai" in sys.modules}))
"""


def job_startup(model_dir: str, work: Path, repeats: int = 2) -> dict:
    """Import and model-load time of a training and an evaluation job, in fresh interpreters."""
    out = {}
    for kind in ("train", "eval"):
        runs = []
        for i in range(repeats):
            proc = subprocess.run([sys.executable, "-c", _STARTUP, kind, model_dir, str(work / f"startup{i}")],
                                  capture_output=True, text=True, check=True, env=_env())
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["total_s"])  # the warm-cache figure; the first pays disk reads
        out[kind] = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in best.items()}
        out[kind]["cold_total_s"] = round(runs[0]["total_s"], 2)
    out["target"] = "total_s <= 10, no vllm/openai import"
    out["met"] = all(out[k]["total_s"] <= 10 and not out[k]["vllm_imported"] and not out[k]["openai_imported"]
                     for k in ("train", "eval"))
    return out


def _env() -> dict:
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
