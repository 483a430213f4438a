"""The GPU-hour plan (nudgerl.reporting.gpu_hours, `nudgerl.reporting.gpu_hours`): the model's arithmetic on a case
worked by hand, jobs that cannot finish are named, measured figures replace the defaults, and
docs/cluster.md's generated block is what config/paper.yaml gives."""

import json
import math
import subprocess
import sys
from dataclasses import replace

import pytest
import yaml

from conftest import REPO
from nudgerl.reporting import gpu_hours as cost

CONFIG = {
    "models": [{"name": "m", "path": "Qwen/Qwen3-4B-Instruct-2507"}],
    "grpo": {"max_steps": 10, "optimizer_steps_per_generation": 2, "prompts_per_step": 1,
             "max_completion_length": 1000, "vllm_gpu_memory_utilization": 0.3},
    "nudgerl": {"M": 2, "K": 4},
    "train_retries": 2,
    "eval": {"samples_per_problem": 4, "max_new_tokens": 1000, "batch_size": 8},
    "data": {"benchmarks": {"aime24": {}, "apex": {}}, "train": {"size": 10}},
}
TOY_GPU = cost.GPU("toy", memory_gb=100, bandwidth_tb_s=1.6, bf16_tflops=100)
EFF = cost.Efficiency(decode_bandwidth=0.5, train_mfu=0.32, memory_overhead_gb=2, step_overhead_s=5, job_start_s=0,
                      completion_fill=0.5, prompt_tokens=100, eval_memory_utilization=0.5)


def _job(rule, runtime=60, **wildcards):
    return {"rule": rule, "wildcards": {"model": "m", "seed": "0", **wildcards},
            "resources": {"gpu": "1", "runtime": str(runtime)}}


def test_the_engine_and_a_training_job_worked_by_hand():
    shape = cost.MODEL_SHAPES["Qwen/Qwen3-4B-Instruct-2507"]
    assert shape.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2 == 147456
    eng = cost.engine(shape, TOY_GPU, 0.3, EFF)
    # 100 GB x 0.3 - 8 GB of weights - 2 GB overhead = 20 GB of KV cache
    assert eng.kv_tokens == int(20e9 / 147456) == 135633
    assert eng.tokens_per_s_per_seq == pytest.approx(1.6e12 * 0.5 / 8e9) == 100.0
    assert eng.train_tokens_per_s == pytest.approx(100e12 * 0.32 / (8 * 4e9)) == 1000.0
    c = cost.job_cost(_job("train_grpo", runtime=60, n="8"), CONFIG, TOY_GPU, EFF)
    # 5 generation batches of 8 rollouts: all 8 fit at once (135633 // 1100 = 123), one wave of
    # 1000 tokens at 100 tokens/s = 10 s; 8 x (100 + 500) tokens trained at 1000/s = 4.8 s; + 5 s
    assert c.hours * 3600 == pytest.approx(5 * (10 + 4.8 + 5))
    assert c.tokens == 5 * 8 * 500 and c.allowed == 3 and c.chain == 1 and c.fits
    # NudgeRL's M x K rollouts, with the distillation term's second pass; without it, GRPO's cost
    nudge = cost.job_cost(_job("train_nudgerl", method="nudgerl8"), CONFIG, TOY_GPU, EFF)
    assert nudge.hours * 3600 == pytest.approx(5 * (10 + 9.6 + 5))
    plain = cost.job_cost(_job("train_nudgerl", method="nudgerl8_distill0"), CONFIG, TOY_GPU, EFF)
    assert plain.hours == pytest.approx(c.hours)
    # a job's start (model load, vLLM) once per job of the chain
    started = cost.job_cost(_job("train_grpo", runtime=60, n="8"), CONFIG, TOY_GPU, replace(EFF, job_start_s=100))
    assert started.hours * 3600 == pytest.approx(5 * (10 + 4.8 + 5) + 100)


def test_an_evaluation_worked_by_hand():
    c = cost.job_cost(_job("evaluate", method="base"), CONFIG, TOY_GPU, EFF)
    # (30 + 47) problems x 4 samples x 500 tokens; in flight min(batch 8, KV at 600 tokens) = 8
    assert c.tokens == 77 * 4 * 500
    assert c.hours * 3600 == pytest.approx(77 * 4 * 500 / (8 * 100))


def test_jobs_that_cannot_finish_are_named():
    long = {**CONFIG, "grpo": {**CONFIG["grpo"], "max_steps": 20000}}
    c = cost.job_cost(_job("train_grpo", runtime=60, n="64"), long, TOY_GPU, EFF)
    assert not c.fits and c.chain > c.allowed == 3
    # rollouts that do not fit the KV cache at full length at all
    small = cost.GPU("small", memory_gb=30, bandwidth_tb_s=1.6, bf16_tflops=100)
    c = cost.job_cost(_job("train_grpo", n="8"), CONFIG, small, EFF)
    assert math.isinf(c.hours) and not c.fits
    text = cost.render_markdown([c], small, EFF, "toy.yaml")
    assert "**1 jobs cannot finish**" in text and "do not fit the KV cache" in text


def test_the_checkpoint_interval_bounds_the_lost_work_and_divides_the_curve():
    # 60 min at 100 s a step fits 36 steps: the largest divisor of 100 that is even (2 steps a
    # generation batch) and at most 36 is 20
    assert cost.checkpoint_interval(100, 60, curve_every=100, generation_steps=2) == 20
    assert cost.checkpoint_interval(100, 60, generation_steps=2) == 36  # no curve: any whole generation
    assert cost.checkpoint_interval(100, 60, generation_steps=5) == 35
    # fast steps: the curve's own interval, never past it
    assert cost.checkpoint_interval(1, 60, curve_every=100, generation_steps=2) == 100
    # a step longer than the target: one generation batch, the least a resume can start from
    assert cost.checkpoint_interval(5000, 60, curve_every=100, generation_steps=2) == 2
    with pytest.raises(ValueError, match="must be positive"):
        cost.checkpoint_interval(0, 60)


def test_the_plan_prints_the_work_a_lost_node_costs_per_run_kind():
    cfg = {**CONFIG, "grpo": {**CONFIG["grpo"], "checkpoint_every": 4}, "eval": {**CONFIG["eval"], "curve": {"every": 4}}}
    costs = [cost.job_cost(_job("train_grpo", n="8"), cfg, TOY_GPU, EFF),
             cost.job_cost(_job("train_nudgerl", method="nudgerl8"), cfg, TOY_GPU, EFF)]
    # a generation batch: 10 s decoding + 4.8 s training + 5 s = 19.8 s over 2 optimizer steps
    assert costs[0].step_s == pytest.approx(19.8 / 2)
    assert cost.lost_hours(costs[0].step_s, 4, EFF) * 3600 == pytest.approx(4 * 9.9)
    text = cost.render_markdown(costs, TOY_GPU, EFF, "toy.yaml", cfg, checkpoint_minutes=0.5)
    # 30 s fits 3 steps of 9.9 s: the largest even divisor of 4 under it is 2
    assert "| m | grpo8 | 10 | 0.0 | 2 | 0.0 |" in text
    assert "| m | train_nudgerl |" in text and "`grpo.checkpoint_every` = 4" in text
    assert "Work a lost node costs" not in cost.render_markdown(costs, TOY_GPU, EFF, "toy.yaml")


def test_measured_figures_replace_the_defaults(tmp_path):
    path = tmp_path / "node-check.json"
    path.write_text(json.dumps({"models": {"m": {"tokens_per_s_per_seq": 50.0}}}))
    measured = cost.read_measured(str(path))
    slow = cost.job_cost(_job("train_grpo", n="8"), CONFIG, TOY_GPU, EFF, measured)
    assert slow.hours * 3600 == pytest.approx(5 * (20 + 4.8 + 5))
    path.write_text(json.dumps({"models": {"m": {"tokens_per_second": 50.0}}}))
    with pytest.raises(ValueError, match=r"models.m: unknown keys \['tokens_per_second'\]"):
        cost.read_measured(str(path))


def test_an_unknown_model_is_a_clear_error():
    cfg = {**CONFIG, "models": [{"name": "m", "path": "someone/Other-3B"}]}
    with pytest.raises(ValueError, match="someone/Other-3B.*MODEL_SHAPES"):
        cost.job_cost(_job("train_grpo", n="8"), cfg, TOY_GPU, EFF)


def test_dry_run_jobs_are_parsed_with_wildcards_and_resources():
    text = ("rule train_grpo:\n    input: a\n    wildcards: model=m, n=16, seed=0\n"
            "    resources: tmpdir=/tmp, gpu=1, runtime=720, attempt=1\n\nlocalrule all:\n    input: b\n")
    jobs = cost.dry_run_jobs(text)
    assert jobs[0] == {"rule": "train_grpo", "wildcards": {"model": "m", "n": "16", "seed": "0"},
                       "resources": {"tmpdir": "/tmp", "gpu": "1", "runtime": "720", "attempt": "1"}}
    assert jobs[1]["rule"] == "all" and cost.plan(jobs, CONFIG, TOY_GPU, EFF)[0].method == "grpo16"


@pytest.mark.slow
def test_the_cluster_page_block_is_what_the_paper_config_gives(tmp_path):
    """docs/cluster.md's plan is generated from config/paper.yaml's dry run; a planted number
    fails the check."""
    cmd = [sys.executable, "-m", "nudgerl.cli", "plan-cost", "--configfile", "config/paper.yaml",
           "--doc", "docs/cluster.md", "--check"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (REPO / "docs" / "cluster.md").read_text()
    block = page.split(cost.BEGIN)[1].split(cost.END)[0]
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    assert f"{len(paper['models'])}" and "**total**" in block
    planted = tmp_path / "cluster.md"
    planted.write_text(page.replace("**total** | | 112 |", "**total** | | 113 |"))
    cmd[cmd.index("docs/cluster.md")] = str(planted)
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "differs" in proc.stderr
