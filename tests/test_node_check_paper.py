"""`scripts/gpu-check.sh --paper` (nudgerl.node_check_paper): its sections are config/paper.yaml's
with only the declared overrides, its measured figures follow from the batch timings, and its
projection exits non-zero when a measured throughput puts a run past its resume chain. The
CPU mode runs whole in CI (.ci/run, vLLM CPU venv, without network)."""

import json
import sys

import pytest
import yaml

from conftest import REPO
from nudgerl.node_check import CheckFailed
from nudgerl.node_check_paper import (EXIT_DOES_NOT_FIT, merged_config, measured_figures, paper_sections, report,
                                      run_kind_jobs)
from nudgerl.plan.arguments import EVAL_EXCLUDE, GRPO_RUN_EXCLUDE
from nudgerl.reporting import gpu_hours as cost
from nudgerl.sections import section_for_model

PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
# What the check must take from config/paper.yaml as it stands: the authors' batching, optimizer,
# checkpointing, LoRA and vLLM importance-sampling correction.
PAPER_PATH_KEYS = ("prompts_per_step", "per_device_train_batch_size", "optimizer_steps_per_generation", "optim",
                   "gradient_checkpointing", "lora", "vllm_importance_sampling_mode",
                   "vllm_importance_sampling_clip_max", "learning_rate", "beta", "loss_type", "temperature", "top_p")


def _declared(sections):
    return {o.key: o for o in sections.overrides}


def _assert_only_declared_changes(section: dict, source: dict, prefix: str, declared: dict) -> None:
    for key in set(section) | set(source):
        o = declared.get(f"{prefix}.{key}")
        if o is None:
            assert section.get(key) == source.get(key), f"{prefix}.{key} changed without being declared"
        else:
            assert (o.paper, o.check) == (source.get(key), section[key]), f"{prefix}.{key} declared wrongly: {o}"


@pytest.mark.parametrize("mode", ["cpu", "gpu"])
def test_sections_are_the_papers_with_only_declared_overrides(mode):
    config = merged_config()
    model = "qwen3_4b_instruct"
    sections = paper_sections(config, model, mode, vllm_installed=True, eight_bit_adam=mode == "gpu")
    declared = _declared(sections)
    # as the workflow's rules pass them: the model's own keys (models[].grpo, .eval) over the section's
    grpo_source = {k: v for k, v in section_for_model(config, "grpo", model).items() if k not in GRPO_RUN_EXCLUDE}
    _assert_only_declared_changes(sections.grpo, grpo_source, "grpo", declared)
    eval_source = {k: v for k, v in section_for_model(config, "eval", model).items() if k not in EVAL_EXCLUDE}
    _assert_only_declared_changes(sections.evaluation, eval_source, "eval", declared)
    assert sections.nudge == {k: v for k, v in PAPER["nudgerl"].items() if k != "ablations"}
    # the paper path's keys come from config/paper.yaml itself, not from config.yaml's defaults
    for key in PAPER_PATH_KEYS:
        if f"grpo.{key}" not in declared:
            assert sections.grpo[key] == PAPER["grpo"][key], key
    assert sections.grpo["max_steps"] == 2 * PAPER["grpo"]["optimizer_steps_per_generation"]
    assert sections.num_generations == max(PAPER["grpo"]["group_sizes"])
    assert sections.evaluation["samples_per_problem"] == max(PAPER["eval"]["ks"])
    common = {"grpo.max_steps", "num_generations", "eval.samples_per_problem"}
    if mode == "gpu":  # on a GPU nothing else changes: full lengths, 8-bit AdamW, vLLM colocate
        assert set(declared) == common
        assert sections.grpo["optim"] == "adamw_8bit" and sections.grpo["use_vllm"] is True
        assert sections.evaluation["max_new_tokens"] == PAPER["eval"]["max_new_tokens"]
    else:  # what a CPU lacks, each with its reason
        assert declared["grpo.optim"].check == "adamw_torch" and "bitsandbytes" in declared["grpo.optim"].why
        assert declared["grpo.use_vllm"].check is False
        assert sections.grpo["gradient_checkpointing"] is True
        assert sections.grpo["vllm_importance_sampling_mode"] == PAPER["grpo"]["vllm_importance_sampling_mode"]
        assert sections.grpo["max_completion_length"] < PAPER["grpo"]["max_completion_length"]


def test_run_kinds_cover_every_gpu_rule_with_the_configs_limits():
    config = merged_config()
    jobs = run_kind_jobs(config, "qwen3_4b_instruct")
    assert {j["rule"] for j in jobs} == set(cost.GPU_RULES)
    grpo_ns = sorted(int(j["wildcards"]["n"]) for j in jobs if j["rule"] == "train_grpo")
    assert grpo_ns == sorted(PAPER["grpo"]["group_sizes"])
    rank = next(j for j in jobs if j["rule"] == "rank_hints")
    assert float(rank["resources"]["runtime"]) == PAPER["resources"]["runtime"]["rank_hints"]


def _rows(period, first_step, longest=100.0, tokens=(1000.0, 3000.0), rollouts=64):
    return [{"step": s, "wall_step_time": period, "step_time": first_step, "completion_length_max": longest,
             "completion_length_mean": longest / 2, "num_tokens": t, "rollouts": rollouts,
             "rollout_tokens": rollouts * longest / 2} for s, t in zip((1, 3), tokens)]


def test_measured_figures_split_a_batch_into_generation_and_training():
    # period 30 s, first step (generation + one step's training) 20 s, 2 steps a batch:
    # one step trains 10 s, generation 10 s, training 20 s
    f = measured_figures(_rows(30.0, 20.0), steps_per_generation=2, waves=2)
    assert (f["batch_generation_s"], f["batch_train_s"]) == pytest.approx((10.0, 20.0))
    assert f["tokens_per_s_per_seq"] == pytest.approx(2 * 100 / 10)   # 2 waves of the 100-token longest
    assert f["train_tokens_per_s"] == pytest.approx(2000 / 20)         # num_tokens between the rows
    assert f["rollout_tokens_per_s"] == pytest.approx(64 * 50 / 30)
    with pytest.raises(CheckFailed, match="cannot be told apart"):
        measured_figures(_rows(30.0, 20.0), steps_per_generation=1, waves=1)


def _result(figures):
    return {"mode": "gpu", "model_name": "qwen3_4b_instruct", "model": "/models/qwen", "eval_backend": "vllm",
            "environment": {"device_name": "NVIDIA H100 80GB HBM3"}, "total_seconds": 1.0,
            "peak_gpu_memory_mib": {"grpo": 50000, "nudgerl": 40000, "evaluate": 70000},
            "nudgerl_rollout_tokens_per_s": 1.0, "eval_tokens_per_s": 1.0, "grpo": figures}


def test_projection_exits_non_zero_when_a_measured_throughput_overruns_the_chain(tmp_path, capsys):
    config = merged_config()
    fast = measured_figures(_rows(30.0, 20.0, longest=6144.0, tokens=(0.0, 200_000.0)), 2, waves=1)
    assert report(_result(fast), tmp_path, "h100", config) == 0
    # the written file is what plan-cost --measured reads, under the paper model's name
    measured = cost.read_measured(str(tmp_path / "measured.json"))
    assert measured["qwen3_4b_instruct"]["tokens_per_s_per_seq"] == pytest.approx(6144 / 10)
    # ~200 times slower decoding (about 2000 s a batch): 250 batches no longer fit 6 jobs of 12 h
    slow = measured_figures(_rows(2000.0, 1990.0, longest=6144.0, tokens=(0.0, 200_000.0)), 2, waves=1)
    assert report(_result(slow), tmp_path, "h100", config) == EXIT_DOES_NOT_FIT
    err = capsys.readouterr().err
    assert "train_grpo grpo64" in err and "6 attempts" in err
    saved = json.loads((tmp_path / "gpu-check.json").read_text())
    assert any(not p["fits"] for p in saved["projection"])


def test_the_script_runs_the_paper_mode_and_gpu_mode_without_cuda_stops_before_any_step(tmp_path):
    import os
    import subprocess

    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu-check.sh"), "--paper", "--mode", "gpu", "--work",
                           str(tmp_path / "check")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": sys.executable})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu-check --paper: FAILED" in proc.stderr and "torch.version.cuda = None" in proc.stderr
    assert not (tmp_path / "check" / "logs").exists()  # no step ran
