"""The GPU memory plan and preflight (nudgerl.gpu_memory) on config/paper.yaml's real numbers,
the per-model settings (config models[].grpo/eval/ranking) that reach each GPU job, and the
trainer options the paper config turns on (vLLM sleep mode, the attention kernel). CPU only:
the card's size is given where a test needs one."""

import json
import struct
from types import SimpleNamespace

import pytest
import yaml

from conftest import REPO
from nudgerl.config import ConfigError, validate_config
from nudgerl.gpu_memory import (GB, GIB, GPUS, MODEL_SHAPES, GPUMemoryError, gpu_memory_plan, model_shape_from_folder,
                                preflight_gpu_memory)
from nudgerl.sections import section_for_model
from nudgerl.training.grpo_config import GRPORunConfig

PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
QWEN, OLMO = "qwen3_4b_instruct", "olmo3_7b_instruct_sft"
A100_40GB = 40  # GB: the card the paper's Olmo share was never sized for


def _entry(name):
    return next(m for m in PAPER["models"] if m["name"] == name)


def _training_plan(name, card_gb, share=None):
    """The plan of the paper's largest group (N = max group size) for model ``name``, at its
    configured share unless ``share`` is given."""
    g = section_for_model(PAPER, "grpo", name)
    return gpu_memory_plan(MODEL_SHAPES[_entry(name)["path"]], card_gb,
                           g["vllm_gpu_memory_utilization"] if share is None else share,
                           sequence_tokens=g["max_prompt_length"] + g["max_completion_length"],
                           rollouts=g["prompts_per_step"] * max(g["group_sizes"]), model=name,
                           colocated_trainer=True, lora=bool(g.get("lora")), optimizer=g["optim"],
                           sleep_mode=g.get("vllm_enable_sleep_mode", False))


def test_olmo_at_the_old_shared_share_does_not_fit_a_40gb_card():
    """0.3 of a 40 GB card is 12 GB, less than Olmo-3-7B's bf16 weights (14.6 GB): the message
    names the model, the card, the share and the weights."""
    plan = _training_plan(OLMO, A100_40GB, share=PAPER["grpo"]["vllm_gpu_memory_utilization"])
    assert not plan.fits and plan.kv_tokens == 0
    text = plan.summary()
    for number in (OLMO, "40.0 GB", "share 0.3", "12.0 GB", "weights 14.6 GB"):
        assert number in text, text


def test_each_model_fits_an_80gb_card_at_its_configured_share():
    """The paper's per-model shares on the plan's H100 (80 GB): both pass, each holds at least
    one full-length rollout, and each model's share leaves more rollouts in flight than the old
    shared 0.3 did."""
    old = PAPER["grpo"]["vllm_gpu_memory_utilization"]
    for name in (QWEN, OLMO):
        plan = _training_plan(name, GPUS["h100"].memory_gb)
        assert plan.fits, plan.summary()
        assert plan.kv_tokens >= plan.sequence_tokens
        assert plan.share > old
        assert plan.kv_tokens > _training_plan(name, GPUS["h100"].memory_gb, share=old).kv_tokens
    # Olmo without GQA: four times Qwen's KV bytes a token, so a larger share for fewer rollouts
    assert _training_plan(OLMO, 80).share > _training_plan(QWEN, 80).share


def test_olmo_at_its_share_on_a_40gb_card_is_refused_with_the_kv_numbers():
    plan = _training_plan(OLMO, A100_40GB)
    assert not plan.fits
    assert any("fewer than one rollout of 8,192" in p for p in plan.problems), plan.problems


def test_sleep_mode_lets_a_larger_share_fit_beside_the_trainer():
    """Without sleep mode the engine's share and the trainer's activations must fit at once;
    with it, the engine is asleep while the trainer steps."""
    shape = MODEL_SHAPES[_entry(OLMO)["path"]]
    args = dict(sequence_tokens=8192, rollouts=8, colocated_trainer=True, lora=True, optimizer="adamw_8bit")
    awake = gpu_memory_plan(shape, 80, 0.7, sleep_mode=False, **args)
    asleep = gpu_memory_plan(shape, 80, 0.7, sleep_mode=True, **args)
    assert not awake.fits and "over the card's 80.0 GB" in awake.problems[0]
    assert asleep.fits, asleep.summary()


def test_full_fine_tuning_needs_more_than_lora():
    shape = MODEL_SHAPES[_entry(QWEN)["path"]]
    args = dict(sequence_tokens=8192, colocated_trainer=True, optimizer="adamw_torch")
    lora, full = (gpu_memory_plan(shape, 80, 0.35, lora=flag, **args) for flag in (True, False))
    assert full.trainer_gb > lora.trainer_gb + 40  # 4 B parameters x (4 B gradient + 8 B Adam state)
    assert lora.fits and not full.fits


def test_a_share_outside_0_1_is_an_error():
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        gpu_memory_plan(MODEL_SHAPES[_entry(QWEN)["path"]], 80, 1.5, sequence_tokens=10)


def _model_folder(path, config, params=1000, dtype_bytes=2):
    """A model folder as snapshot_model leaves one: config.json and a safetensors file of the
    right size (a header and zero bytes: only the size is read)."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    header = b"{}"
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header
                                             + bytes(params * dtype_bytes - 8 - len(header)))
    return path


QWEN3_4B_CONFIG = {"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                   "hidden_size": 2560, "dtype": "bfloat16"}


def test_the_shape_is_read_from_a_model_folder(tmp_path):
    shape = model_shape_from_folder(_model_folder(tmp_path / "m", QWEN3_4B_CONFIG, params=5000))
    assert shape.kv_bytes_per_token == 144 * 1024 == MODEL_SHAPES["Qwen/Qwen3-4B-Instruct-2507"].kv_bytes_per_token
    assert shape.params_b * 1e9 == pytest.approx(5000)
    # no head_dim: hidden_size / heads; no KV heads: as many as attention heads (no GQA); float32 files
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "torch_dtype": "float32"}
    shape = model_shape_from_folder(_model_folder(tmp_path / "f32", cfg, params=3000, dtype_bytes=4))
    assert (shape.head_dim, shape.kv_heads) == (16, 4) and shape.params_b * 1e9 == pytest.approx(3000)
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    assert model_shape_from_folder(tmp_path / "adapter") is None
    bad = _model_folder(tmp_path / "bad", {"num_attention_heads": 4, "hidden_size": 64})
    with pytest.raises(ValueError, match=r"bad/config.json.*num_hidden_layers"):
        model_shape_from_folder(bad)


def test_the_preflight_stops_a_job_with_the_numbers_before_it_loads(tmp_path):
    """A folder of Olmo-3-7B's shape (7.3 B parameters, faked by size only: written sparse) on a
    40 GB card at 0.3 is refused; the same on 80 GB at its share passes and is logged."""
    folder = tmp_path / "olmo"
    folder.mkdir()
    cfg = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_size": 4096,
           "dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(cfg))
    with open(folder / "model.safetensors", "wb") as f:
        f.truncate(int(7.3e9 * 2))  # sparse: no disk used
    with pytest.raises(GPUMemoryError, match=r"40.0 GB \(37.3 GiB\) card: vLLM share 0.3 = 12.0 GB"):
        preflight_gpu_memory(str(folder), 0.3, sequence_tokens=8192, card_bytes=int(40 * GB), where="test")
    logged = []
    plan = preflight_gpu_memory(str(folder), section_for_model(PAPER, "grpo", OLMO)["vllm_gpu_memory_utilization"],
                                sequence_tokens=8192, rollouts=8, colocated_trainer=True, card_bytes=int(80 * GB),
                                log=logged.append)
    assert plan.fits and "KV cache 35,095 tokens" in logged[0]


def test_the_preflight_checks_nothing_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine: the card is there to check")
    assert preflight_gpu_memory(str(tmp_path), 0.01, sequence_tokens=10**9) is None


def test_a_training_job_reads_its_models_share_and_is_refused_on_a_small_card(tmp_path):
    """The grpo section as train_grpo's params give it to Olmo's jobs (models[].grpo over grpo):
    TRL's colocated engine on a 40 GB card cannot hold a rollout; the error names the config key."""
    from nudgerl.plan.arguments import grpo_run_section
    from nudgerl.training.grpo import gpu_memory_preflight

    params = json.loads(grpo_run_section(PAPER, model=OLMO))
    cfg = GRPORunConfig.from_dict({**params, "num_generations": 8})
    assert cfg.vllm_gpu_memory_utilization == _entry(OLMO)["grpo"]["vllm_gpu_memory_utilization"]
    folder = _model_folder(tmp_path / "m", QWEN3_4B_CONFIG, params=10)
    with pytest.raises(GPUMemoryError, match="grpo.vllm_gpu_memory_utilization"):
        gpu_memory_preflight(str(folder), cfg, card_bytes=int(cfg.vllm_gpu_memory_utilization * 3.5 * GB))
    assert gpu_memory_preflight(str(folder), cfg, card_bytes=int(80 * GIB)).fits
    # no colocated engine on this card: nothing to plan
    server = GRPORunConfig.from_dict({**params, "vllm_mode": "server"})
    assert gpu_memory_preflight(str(folder), server, card_bytes=1) is None


def test_a_models_keys_replace_the_sections_for_its_jobs_only():
    olmo, qwen = (section_for_model(PAPER, "grpo", m) for m in (OLMO, QWEN))
    assert olmo["vllm_gpu_memory_utilization"] != qwen["vllm_gpu_memory_utilization"]
    assert {k: v for k, v in olmo.items() if k != "vllm_gpu_memory_utilization"} == \
        {k: v for k, v in qwen.items() if k != "vllm_gpu_memory_utilization"}
    assert section_for_model(PAPER, "grpo") == PAPER["grpo"]  # the organism: no model
    assert section_for_model(PAPER, "nudgerl", OLMO) == PAPER["nudgerl"]  # not a per-model section
    with pytest.raises(KeyError, match="models.*'nope'"):
        section_for_model(PAPER, "grpo", "nope")


def test_the_rules_params_carry_the_models_keys(monkeypatch):
    """What train_grpo, evaluate and rank_hints get as --params (PlanArguments.model_section):
    each model's own keys under task math; the organism's params exactly as section() gives."""
    from snakemake.utils import update_config

    from nudgerl.plan.arguments import EVAL_EXCLUDE, GRPO_RUN_EXCLUDE
    from nudgerl.plan.workflow_plan import WorkflowPlan

    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    organism = WorkflowPlan(config).arguments
    assert organism.model_section("grpo", exclude=GRPO_RUN_EXCLUDE)(SimpleNamespace(n="8", seed="0")) \
        == organism.section("grpo", exclude=GRPO_RUN_EXCLUDE)
    update_config(config, yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    config["models"][1]["eval"] = {"gpu_memory_utilization": 0.8}
    args = WorkflowPlan(config).arguments

    def job(model, **more):
        return SimpleNamespace(model=model, seed="0", **more)

    grpo = {m: json.loads(args.model_section("grpo", exclude=GRPO_RUN_EXCLUDE)(job(m))) for m in (QWEN, OLMO)}
    assert {m: g["vllm_gpu_memory_utilization"] for m, g in grpo.items()} == {
        m: _entry(m)["grpo"]["vllm_gpu_memory_utilization"] for m in (QWEN, OLMO)}
    assert not set(GRPO_RUN_EXCLUDE) & set(grpo[OLMO])
    eps = json.loads(args.grpo_eps_section(job(OLMO, eps="0.28")))
    assert eps["epsilon_high"] == 0.28
    assert eps["vllm_gpu_memory_utilization"] == grpo[OLMO]["vllm_gpu_memory_utilization"]
    evals = {m: json.loads(args.model_section("eval", exclude=EVAL_EXCLUDE)(job(m))) for m in (QWEN, OLMO)}
    assert evals[OLMO]["gpu_memory_utilization"] == 0.8 and "gpu_memory_utilization" not in evals[QWEN]
    assert "curve" not in evals[OLMO]


def test_a_models_unknown_or_misplaced_key_names_itself():
    from snakemake.utils import update_config

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    update_config(config, yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    config["models"][0]["grpo"]["learning_rate"] = 1e-3  # a method setting: the same for every model
    with pytest.raises(ConfigError, match=r"learning_rate.*'models\.0\.grpo'"):
        validate_config(config)


def test_the_trainer_gets_sleep_mode_and_the_attention_kernel():
    from nudgerl.training.grpo import model_init_kwargs, trl_config

    g = section_for_model(PAPER, "grpo", QWEN)
    cfg = GRPORunConfig.from_dict({k: v for k, v in g.items() if k != "lora"} | {"num_generations": 8})
    assert cfg.vllm_enable_sleep_mode and cfg.attn_implementation == "sdpa"
    assert trl_config(cfg, "unused").vllm_enable_sleep_mode is True
    assert model_init_kwargs(cfg) == {"dtype": "bfloat16", "attn_implementation": "sdpa"}
    assert model_init_kwargs(GRPORunConfig()) == {}  # the organism: transformers' own choices
    assert trl_config(GRPORunConfig(), "unused").vllm_enable_sleep_mode is False
