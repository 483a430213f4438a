"""Paper scale without a cluster: `snakemake -n --configfile config/paper.yaml --profile
profiles/slurm` builds the whole matrix, and its job counts per rule are the paper's."""

import os
import re
import subprocess

import pytest
import yaml

from conftest import REPO


# profiles/slurm reads the account and partition from the environment
CLUSTER_ENV = {"NUDGERL_SLURM_ACCOUNT": "acct-test", "NUDGERL_SLURM_PARTITION": "gpu-test"}


def dry_run(workdir, *extra):
    # Targets before --configfile: --configfile takes every following positional argument.
    proc = subprocess.run(["snakemake", "all", "-n", "--configfile", "config/paper.yaml", "--profile", "profiles/slurm",
                           *extra], cwd=workdir, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **CLUSTER_ENV})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def job_counts(out: str) -> dict[str, int]:
    table = out.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


@pytest.fixture(scope="module")
def paper_dry_run(tmp_path_factory):
    from conftest import copy_workflow

    workdir = copy_workflow(tmp_path_factory.mktemp("paper"))
    return workdir, dry_run(workdir)


def expected_matrix() -> dict[str, int]:
    """The paper's matrix, counted from config/paper.yaml by hand-written rules."""
    cfg = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    models, seeds = len(cfg["models"]), len(cfg["seeds"])
    nudge, abl = cfg["nudgerl"], cfg["nudgerl"]["ablations"]
    # NudgeRL-8 plus one run per ablation value that differs from the main run's setting
    nudgerl_runs = 1 + sum(v != nudge["p_drop"] for v in abl["p_drop"]) \
        + sum(v != nudge["hint_sampler"] for v in abl["hint_sampling"]) \
        + sum(v != nudge["lambda_distill"] for v in abl["lambda_distill"])
    grpo_runs = len(cfg["grpo"]["group_sizes"])  # N in {8, 16, 32, 64}
    # the eps_high sweep: GRPO-8 at each eps_high except the main one (that is GRPO-8 itself)
    eps_runs = sum(e != cfg["grpo"]["epsilon_high"] for e in cfg["grpo"]["epsilon_high_sweep"])
    # training curves: checkpoints of GRPO at N <= 32 and NudgeRL-8 (Fig. 3)
    curve_runs = sum(n <= 32 for n in cfg["grpo"]["group_sizes"]) + 1
    pope_runs = 1
    per_model = {
        "train_grpo": grpo_runs * seeds,
        "train_grpo_eps": eps_runs * seeds,
        "train_pope": pope_runs * seeds,
        "train_nudgerl": nudgerl_runs * seeds,
        "evaluate": (1 + grpo_runs + eps_runs + pope_runs + nudgerl_runs) * seeds,  # Base + every trained run
        "curve_eval": curve_runs * seeds,
        "rank_hints": 1,  # top-ranked hint sampling: pools ranked by each base policy
        "table1": 1,
        "ablation_table": 3,  # p_drop, hint sampling, lambda_distill
        # figures that need no organism trace parser, the compute table and the audit
        "training_curves": 1,
        "eps_high_scaling": 1,
        "compute_matched": 1,
        "training_reward": 1,
        "compute_table": 1,
        "audit": 1,
    }
    shared = {"prepare_train": 1, "prepare_benchmark": len(cfg["data"]["benchmarks"]), "strategy_pools": 1,
              "oracle_solutions": 1, "all": 1}
    return {**{k: v * models for k, v in per_model.items()}, **shared}


def test_job_counts_are_the_papers_matrix(paper_dry_run):
    _, out = paper_dry_run
    counts = job_counts(out)
    expected = expected_matrix()
    # 2 models x (4 GRPO + 5 eps_high + POPE + NudgeRL + 7 ablation runs), 5 benchmarks
    assert expected["train_nudgerl"] == 16 and expected["train_grpo_eps"] == 10 and expected["prepare_benchmark"] == 5
    assert {k: counts.get(k, 0) for k in expected} == expected
    for organism_rule in ("organism_data", "drilled_model", "base_model", "diagnose_base", "strategy_diversity", "case_study"):
        assert organism_rule not in counts


def test_gpu_resources_and_commands(paper_dry_run):
    _, out = paper_dry_run
    jobs = out.split("\nrule ")[1:]
    gpu_jobs = [j for j in jobs if j.startswith(("train_grpo:", "train_grpo_eps:", "train_nudgerl:", "train_pope:", "evaluate:", "curve_eval:"))]
    assert gpu_jobs
    for job in gpu_jobs:
        assert "gpu=1" in job and "gpu_model=h100" in job and "cpus_per_gpu=8" in job, job[:400]
        assert "slurm_account=acct-test" in job and "slurm_partition=gpu-test" in job and "--gres" not in job
    grpo64 = next(j for j in jobs if "runs/grpo64/seed0/model" in j.split("Shell command:")[0])
    assert "--model Qwen/Qwen3-4B-Instruct-2507 --revision main" in grpo64 or \
        "--model allenai/Olmo-3-7B-Instruct-SFT --revision main" in grpo64
    assert '"name": "authors_grpo"' in grpo64 and '"use_vllm": true' in grpo64
    nudge = next(j for j in jobs if j.startswith("train_nudgerl:") and "runs/nudgerl8/" in j)
    assert '"name": "authors_nudgerl"' in nudge and "pools/pools_dapo.jsonl" in nudge
    ev = next(j for j in jobs if j.startswith("evaluate:"))
    assert '"name": "authors_eval"' in ev and '"temperature": 0.7' in ev and '"samples_per_problem": 128' in ev
    # Per-rule requests live in the config, not in profile lists a command line would replace.
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert "set-resources" not in profile and "set-threads" not in profile
    assert "gres" not in (REPO / "config" / "paper.yaml").read_text()


def _resources(out: str, rule: str, output: str) -> str:
    job = next(j for j in out.split("\nrule ")[1:] if j.startswith(f"{rule}:") and output in j.split("resources:")[0])
    return job.split("resources:", 1)[1].split("\n", 1)[0]


def test_a_command_line_override_changes_only_what_it_names(paper_dry_run):
    workdir, _ = paper_dry_run
    out = dry_run(workdir, "--set-resources", "train_grpo:runtime=100")
    grpo = _resources(out, "train_grpo", "runs/grpo8/seed0/model")
    for kept in ("mem_mb=128000", "gpu=1", "gpu_model=h100", "cpus_per_gpu=8", "slurm_account=acct-test",
                 "slurm_partition=gpu-test"):
        assert kept in grpo, (kept, grpo)
    assert "runtime=100" in grpo and "runtime=2880" not in grpo
    assert "runtime=2880" in _resources(out, "train_nudgerl", "runs/nudgerl8/seed0/model")  # other rules keep theirs


def test_multi_gpu_training_runs_under_accelerate(paper_dry_run):
    workdir, _ = paper_dry_run
    out = dry_run(workdir, "--set-resources", "train_grpo:gpu=4")
    grpo = [j for j in out.split("\nrule ")[1:] if j.startswith("train_grpo:")]
    assert grpo and all("accelerate launch --config_file workflow/accelerate/deepspeed_zero2.yaml "
                        "--num_processes 4 -m nudgerl.cli train-grpo" in j for j in grpo)
    nudge = [j for j in out.split("\nrule ")[1:] if j.startswith("train_nudgerl:")]
    assert all("Shell command: nudgerl train-nudgerl" in j for j in nudge)  # still one GPU
