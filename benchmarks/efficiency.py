"""How close the organism's work runs to its hardware bound, in one process, one torch thread.

    python benchmarks/efficiency.py --quick      # ~1-2 min; the last line holds the ratios
    python benchmarks/efficiency.py              # more repeats; writes benchmarks/efficiency.json

Two ratios, each the CPU time the model's own matrix products need alone over the CPU time the
real work takes (1.0 = nothing but matmuls; the same process, shapes and thread count, timed
alternately, the median of the rounds' ratios):
- **sampling**: `model.generate` as the evaluation backend calls it (static KV cache, top-p
  sampling, `min_new_tokens` so every row decodes `max_completion_length` tokens) on a batch of
  the default's size, against the prefill and per-token decode matmuls of the same batch;
- **training step**: the forward and backward pass of GRPO's policy loss (log-probs of the
  completion tokens, weighted by advantages) over one micro-batch of the default's size,
  against the forward matmuls and their two backward products (input and weight gradients).
Attention's score and value products are left out of the bound (at these lengths they are a
few per cent of the FLOPs), so the ratios are upper estimates of the matmul share.
Plus the **start-up share** of the default: each job's start-up times the jobs per rule, over
the jobs' seconds, from a default run's per-rule records (`benchmarks/results.json`, written by
`benchmarks/run.py`, or `--per-rule FILE`). A job's start-up is a fresh interpreter importing
what a training job imports or, when the config runs jobs through the local job server
(`job_server: true`, nudgerl.job_server), a whole `nudgerl` process that hands its command to a
server started here (both are reported).

The model is the default's shape (config/config.yaml `base_model`, the organism tokenizer's
vocabulary), randomly initialised (speed does not depend on the weights): no run of the
pipeline is needed first; plain torch/transformers calls, timed with the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


def default_shapes(config: dict) -> dict:
    base, grpo, ev = config["base_model"], config["grpo"], config["eval"]
    return {"hidden": base["hidden_size"], "intermediate": base["intermediate_size"], "layers": base["num_layers"],
            "heads": base["num_heads"], "new_tokens": grpo["max_completion_length"],
            "sample_batch": ev["batch_size"], "train_batch": grpo.get("per_device_train_batch_size") or 64,
            "temperature": ev.get("temperature", 1.0), "top_p": ev.get("top_p", 1.0), "prompt_tokens": 32}


def make_model(s: dict):
    from transformers import LlamaConfig, LlamaForCausalLM

    from nudgerl.organism.tokenizer import build_tokenizer

    vocab = len(build_tokenizer())  # the LM head's width is part of the work
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=s["hidden"], intermediate_size=s["intermediate"],
                      num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["heads"],
                      max_position_embeddings=128, tie_word_embeddings=True, pad_token_id=0, bos_token_id=1,
                      eos_token_id=2)
    return LlamaForCausalLM(cfg).eval()


def linear_shapes(model) -> list[tuple[int, int]]:
    """(in, out) of every matmul one token passes through: each layer's projections, the LM head."""
    return [(m.in_features, m.out_features) for m in model.modules() if isinstance(m, torch.nn.Linear)]


def cpu_seconds(fn) -> float:
    """CPU seconds of one call: with one torch thread, the work done, whatever else the (shared,
    virtual) machine runs; wall time there varied 2x between identical calls."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def matmul_pass(shapes, rows: int, backward: bool = False):
    """One pass of `rows` token rows through the matmul shapes, alone: x @ W per shape (and, for a
    backward pass, grad @ W^T and x^T @ grad)."""
    ws = [torch.randn(i, o) for i, o in shapes]
    xs = {i: torch.randn(rows, i) for i, _ in shapes}
    gs = {o: torch.randn(rows, o) for _, o in shapes}

    def run():
        for (i, o), w in zip(shapes, ws):
            torch.mm(xs[i], w)
            if backward:
                torch.mm(gs[o], w.t())
                torch.mm(xs[i].t(), gs[o])

    run()  # warm-up
    return run


def interleaved(work, bound, repeats: int) -> dict:
    """Work and bound timed alternately, `repeats` rounds; the ratio is the median of the rounds'
    bound / work (a slow spell of the machine hits both halves of a round)."""
    rounds = [(cpu_seconds(bound), cpu_seconds(work)) for _ in range(repeats)]
    return {"ratio": statistics.median(b / w for b, w in rounds),
            "ratio_range": [min(b / w for b, w in rounds), max(b / w for b, w in rounds)],
            "seconds": statistics.median(w for _, w in rounds),
            "matmul_seconds": statistics.median(b for b, _ in rounds)}


def sampling_work(model, s: dict):
    """`model.generate` as the evaluation backend calls it, on a batch of the default's size
    (every row decodes `new_tokens`), warmed up; returns the call."""
    B, P, T = s["sample_batch"], s["prompt_tokens"], s["new_tokens"]
    ids = torch.randint(3, model.config.vocab_size, (B, P))

    def generate():
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                           temperature=s["temperature"], top_p=s["top_p"], top_k=0, max_new_tokens=T, min_new_tokens=T, pad_token_id=0, eos_token_id=2,
                           cache_implementation="static", disable_compile=True)

    generate()  # warm-up: the static cache's allocation, first-call dispatch
    return generate


def sampling_ratio(model, s: dict, repeats: int) -> dict:
    B, P, T = s["sample_batch"], s["prompt_tokens"], s["new_tokens"]
    generate = sampling_work(model, s)
    shapes = linear_shapes(model)
    # prefill: B x P rows once; decode: T - 1 steps of B rows (the first new token comes from prefill)
    prefill, decode = matmul_pass(shapes, B * P), matmul_pass(shapes, B)

    def bound():
        prefill()
        for _ in range(T - 1):
            decode()

    out = interleaved(generate, bound, repeats)
    return {**out, "tokens_per_cpu_s": B * T / out["seconds"], "batch": B, "prompt_tokens": P, "new_tokens": T}


def training_work(model, s: dict):
    """The forward and backward pass of GRPO's policy loss over one training micro-batch of the
    default's size, warmed up; returns the call (the model is left in training mode)."""
    B, L, T = s["train_batch"], s["prompt_tokens"] + s["new_tokens"], s["new_tokens"]
    model.train()
    ids = torch.randint(3, model.config.vocab_size, (B, L))
    adv = torch.randn(B)

    def step():
        # GRPO's policy term at beta 0 and one pass per generation (ratio 1): -A * log pi(y | x)
        # over the completion tokens, averaged; then the gradients.
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, -T - 1:-1]
        logps = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, -T:, None]).squeeze(-1)
        (-(adv[:, None] * logps).mean()).backward()

    step()
    return step


def training_ratio(model, s: dict, repeats: int) -> dict:
    B, L = s["train_batch"], s["prompt_tokens"] + s["new_tokens"]
    step = training_work(model, s)
    out = interleaved(step, matmul_pass(linear_shapes(model), B * L, backward=True), repeats)
    model.eval()
    return {**out, "tokens_per_cpu_s": B * L / out["seconds"], "batch": B, "sequence_tokens": L}


_STARTUP = """
import time
t0 = time.perf_counter()
# what a training job imports before its work (an evaluation job imports a subset)
import nudgerl.cli
from nudgerl.training.nudgerl import NudgeRLTrainer
from nudgerl.evaluation.benchmarks import evaluate_model
print(time.perf_counter() - t0)
"""


def fresh_startup_s(repeats: int) -> float:
    """A fresh interpreter's imports of a training job (median wall seconds)."""
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", _STARTUP], capture_output=True, text=True, check=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout.split()[-1])
        for _ in range(repeats))


def served_startup_s(repeats: int) -> float:
    """A whole `nudgerl` process that hands a command to the local job server (config
    `job_server`): interpreter start, the client's import, the fork and the child's parse and
    exit; median wall seconds of `nudgerl --help` through a server started here."""
    from nudgerl import job_client

    handle = job_client.start()
    if handle is None:
        raise SystemExit("the job server did not start")
    nudgerl = str(Path(sys.executable).parent / "nudgerl")
    try:
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            proc = subprocess.run([nudgerl, "--help"], capture_output=True, text=True, check=True,
                                  env={**os.environ, "OMP_NUM_THREADS": "1"})
            runs.append(time.perf_counter() - t0)
            assert job_client.USAGE_PREFIX in proc.stderr, "the command did not run in the server's child"
    finally:
        job_client.stop(handle)
    return statistics.median(runs)


def startup_share(per_rule: dict, repeats: int, served: bool) -> dict:
    """Jobs' start-up seconds over jobs' seconds: every job is charged a training job's start-up
    (light table and figure jobs import less: an upper estimate), a fresh interpreter's imports or,
    with the job server, a served process's start (`served`: the config's `job_server`)."""
    fresh = fresh_startup_s(repeats)
    startup = served_startup_s(max(3, repeats)) if served else fresh
    jobs = sum(r["jobs"] for r in per_rule.values())
    seconds = sum(r["wall_s"] for r in per_rule.values())
    return {"share": jobs * startup / seconds, "startup_s": startup, "job_server": served,
            "fresh_interpreter_startup_s": fresh, "jobs": jobs, "job_seconds": seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats (~1-2 min); prints, writes nothing")
    ap.add_argument("--config", default=str(REPO / "config" / "config.yaml"))
    ap.add_argument("--per-rule", default=str(REPO / "benchmarks" / "results.json"),
                    help="a default run's per-rule job counts and seconds (benchmarks/run.py's results.json)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    config = yaml.safe_load(Path(args.config).read_text())
    shapes = default_shapes(config)
    # a sampling call takes seconds, a training step a fraction of one: repeats to match
    repeats = {"sampling": 3, "training": 15, "startup": 2} if args.quick else {"sampling": 7, "training": 40,
                                                                               "startup": 3}
    model = make_model(shapes)
    out = {"shapes": shapes, "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "repeats": repeats, "sampling": sampling_ratio(model, shapes, repeats["sampling"]),
           "training_step": training_ratio(model, shapes, repeats["training"])}
    per_rule_file = Path(args.per_rule)
    if per_rule_file.exists():
        data = json.loads(per_rule_file.read_text())
        per_rule = data.get("default", {}).get("per_rule", data)
        out["startup"] = {**startup_share(per_rule, repeats["startup"], bool(config.get("job_server"))),
                          "per_rule_from": str(per_rule_file)}
    if not args.quick:
        (REPO / "benchmarks" / "efficiency.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    share = f"{out['startup']['share']:.3f}" if "startup" in out else "n/a (no per-rule records)"
    print(f"sampling {out['sampling']['ratio']:.3f} of its matmul bound; training step "
          f"{out['training_step']['ratio']:.3f}; start-up share of the default {share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
