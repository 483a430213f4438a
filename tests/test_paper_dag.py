"""Paper scale without a cluster: `snakemake -n --configfile config/paper.yaml --profile
profiles/slurm` builds the whole matrix, and its job counts per rule are the paper's."""

import os
import re
import subprocess

import pytest
import yaml

from conftest import REPO

# each test reads a Snakemake dry run of the paper's DAG
pytestmark = pytest.mark.slow


# profiles/slurm reads the account and partition from the environment
CLUSTER_ENV = {"NUDGERL_SLURM_ACCOUNT": "acct-test", "NUDGERL_SLURM_PARTITION": "gpu-test"}
GPU_TYPE_VAR = "NUDGERL_SLURM_GPU_TYPE"  # optional: the cluster's GPU type name
GPU_RULES = ("train_grpo", "train_grpo_eps", "train_baseline", "train_nudgerl", "train_pope", "evaluate", "curve_eval",
             "rank_hints")
TRAIN_RULES = ("train_grpo", "train_grpo_eps", "train_grpo_repeat", "train_baseline", "train_nudgerl", "train_pope")
# The longest a job may ask for: many clusters' partitions cap at 24 h (a request over the cap
# never starts); training runs longer than that are carried across jobs by resume.
MAX_RUNTIME_MIN = 24 * 60


def dry_run(workdir, *extra, **env):
    # Targets before --configfile: --configfile takes every following positional argument.
    # NUDGERL_SLURM_GPU_TYPE only when a test sets it (the developer's shell may have one).
    base = {k: v for k, v in os.environ.items() if k != GPU_TYPE_VAR}
    proc = subprocess.run(["snakemake", "all", "-n", "--configfile", "config/paper.yaml", "--profile", "profiles/slurm",
                           *extra], cwd=workdir, capture_output=True, text=True, timeout=300,
                          env={**base, **CLUSTER_ENV, **env})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def jobs_of(out: str) -> list[dict]:
    """Every job of a dry run: its rule, resources (name -> value as printed) and shell command."""
    jobs = []
    for block in re.split(r"\n(?:local)?rule ", out)[1:]:
        rule = block.split(":", 1)[0]
        res_line = re.search(r"^    resources: (.*)$", block, re.M)
        resources = dict(kv.split("=", 1) for kv in res_line.group(1).split(", ")) if res_line else {}
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        jobs.append({"rule": rule, "resources": resources, "shell": shell.group(1) if shell else "", "text": block})
    return jobs


# Each rule's own `retries` (None: the profile's), read from the workflow Snakemake builds for
# config/paper.yaml (a dry run does not print them).
RULE_RETRIES_SCRIPT = """
import json
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(), snakefile=Path("Snakefile").absolute(),
                            config_settings=ConfigSettings(configfiles=[Path("config/paper.yaml").absolute()]),
                            workdir=Path(".").absolute())._workflow
    print("RETRIES=" + json.dumps({rule.name: rule._restart_times for rule in workflow.rules}))
"""


def rule_retries(workdir) -> dict:
    import json
    import sys

    proc = subprocess.run([sys.executable, "-c", RULE_RETRIES_SCRIPT], cwd=workdir, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **CLUSTER_ENV})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RETRIES=", 1)[1].splitlines()[0])


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
    # the field's exploration fixes: config.yaml defines them, paper.yaml names their replicates
    defined = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["baselines"]["methods"]
    baseline_runs = len(defined) * len(cfg["baselines"]["seeds"])
    per_model = {
        "train_grpo": grpo_runs * seeds,
        "train_grpo_eps": eps_runs * seeds,
        "train_pope": pope_runs * seeds,
        "train_nudgerl": nudgerl_runs * seeds,
        "train_baseline": baseline_runs,
        # Base + every trained run
        "evaluate": (1 + grpo_runs + eps_runs + pope_runs + nudgerl_runs) * seeds + baseline_runs,
        "curve_eval": curve_runs * seeds,
        "rank_hints": 1,  # top-ranked hint sampling: pools ranked by each base policy
        "table1": 1,
        "ablation_table": 3,  # p_drop, hint sampling, lambda_distill
        "baselines_table": 1,
        "baselines_figure": 1,
        # figures that need no organism trace parser, the compute table and the audit
        "training_curves": 1,
        "eps_high_scaling": 1,
        "compute_matched": 1,
        "training_reward": 1,
        "compute_table": 1,
        "audit": 1,
        # grpo.prune_checkpoints: every trained run's checkpoints, once its curve (if any) read them
        "prune_checkpoints": ((grpo_runs + eps_runs + pope_runs + nudgerl_runs) * seeds + baseline_runs
                              if cfg["grpo"].get("prune_checkpoints") else 0),
    }
    shared = {"prepare_train": 1, "prepare_benchmark": len(cfg["data"]["benchmarks"]), "strategy_pools": 1,
              "oracle_solutions": 1, "snapshot_model": models, "all": 1}
    return {**{k: v * models for k, v in per_model.items()}, **shared}


def test_job_counts_are_the_papers_matrix(paper_dry_run):
    _, out = paper_dry_run
    counts = job_counts(out)
    expected = expected_matrix()
    # 2 models x (4 GRPO + 5 eps_high + POPE + NudgeRL + 7 ablation runs), 5 benchmarks
    assert expected["train_nudgerl"] == 16 and expected["train_grpo_eps"] == 10 and expected["prepare_benchmark"] == 5
    assert expected["train_baseline"] == 14 and expected["evaluate"] == 52  # + 7 baselines x 2 models
    assert {k: counts.get(k, 0) for k in expected} == expected
    for organism_rule in ("organism_data", "drilled_model", "base_model", "diagnose_base", "strategy_diversity", "case_study"):
        assert organism_rule not in counts


def test_gpu_resources_and_commands(paper_dry_run):
    _, out = paper_dry_run
    jobs = out.split("\nrule ")[1:]
    gpu_jobs = [j for j in jobs if j.startswith(("train_grpo:", "train_grpo_eps:", "train_nudgerl:", "train_pope:", "evaluate:", "curve_eval:"))]
    assert gpu_jobs
    for job in gpu_jobs:
        assert "gpu=1" in job and "cpus_per_gpu=8" in job, job[:400]
        assert "slurm_account=acct-test" in job and "slurm_partition=gpu-test" in job and "--gres" not in job
    grpo64 = next(j for j in jobs if "runs/grpo64/seed0/model" in j.split("Shell command:")[0])
    # the model's snapshot at its pinned revision (rule snapshot_model), never a Hub id
    assert "--model results/paper/models/qwen3_4b_instruct " in grpo64 or \
        "--model results/paper/models/olmo3_7b_instruct_sft " in grpo64
    assert '"name": "authors_grpo"' in grpo64 and '"use_vllm": true' in grpo64
    nudge = next(j for j in jobs if j.startswith("train_nudgerl:") and "runs/nudgerl8/" in j)
    assert '"name": "authors_nudgerl"' in nudge and "pools/pools_dapo.jsonl" in nudge
    ev = next(j for j in jobs if j.startswith("evaluate:"))
    assert '"name": "authors_eval"' in ev and '"temperature": 0.7' in ev and '"samples_per_problem": 128' in ev
    # Per-rule requests live in the config, not in profile lists a command line would replace.
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert "set-resources" not in profile and "set-threads" not in profile
    assert "gres" not in (REPO / "config" / "paper.yaml").read_text()


def test_gpu_type_only_from_the_environment(paper_dry_run):
    """No type in the config: unset, GPU jobs ask for any GPU (the plugin sends --gpus=1); set,
    every GPU job asks for that type (--gpus=<type>:1) and no other job asks for one (the
    plugin would turn a gpu_model alone into a GPU request)."""
    workdir, untyped = paper_dry_run
    untyped_jobs = jobs_of(untyped)
    assert {j["rule"] for j in untyped_jobs if j["resources"].get("gpu") == "1"} == set(GPU_RULES)
    assert not [j["rule"] for j in untyped_jobs if "gpu_model" in j["resources"]]
    typed_jobs = jobs_of(dry_run(workdir, **{GPU_TYPE_VAR: "h200_nvl"}))
    assert len(typed_jobs) == len(untyped_jobs)
    for job in typed_jobs:
        if job["rule"] in GPU_RULES:
            assert job["resources"]["gpu"] == "1" and job["resources"]["gpu_model"] == "h200_nvl", job["text"][:600]
        else:
            assert "gpu" not in job["resources"] and "gpu_model" not in job["resources"], job["text"][:600]


def test_every_gpu_job_requires_cuda_and_no_cpu_job_does(paper_dry_run):
    """A job given a GPU that finds no CUDA must stop at once (nudgerl.hardware) instead of running
    on the CPU: its command carries NUDGERL_REQUIRE_CUDA=1, ahead of the program so it reaches
    every process. Pools, oracles, tables and figures ask for no GPU and carry no requirement."""
    _, out = paper_dry_run
    jobs = [j for j in jobs_of(out) if j["shell"]]
    gpu = [j for j in jobs if j["resources"].get("gpu")]
    cpu = [j for j in jobs if not j["resources"].get("gpu")]
    assert {j["rule"] for j in gpu} == set(GPU_RULES)
    assert {"strategy_pools", "oracle_solutions", "table1", "prepare_train", "training_curves"} <= {j["rule"] for j in cpu}
    for job in gpu:
        assert re.match(r"^(\w+=\S* )*NUDGERL_REQUIRE_CUDA=1 ", job["shell"]), job["shell"][:300]
    assert not [j["rule"] for j in cpu if "NUDGERL_REQUIRE_CUDA" in j["shell"]]


def test_runtimes_fit_common_partition_limits_and_training_resumes_across_jobs(paper_dry_run):
    """No job asks for more than 24 h; a training job stops itself (SIGUSR1 from `timeout`, inside
    a Slurm job only) before its limit with a checkpoint, and the profile resubmits failed jobs
    (retries) without stopping the others (keep-going)."""
    workdir, out = paper_dry_run
    jobs = jobs_of(out)
    runtimes = {j["rule"]: int(j["resources"]["runtime"]) for j in jobs if "runtime" in j["resources"]}
    assert set(GPU_RULES) <= set(runtimes)
    too_long = {rule: t for rule, t in runtimes.items() if t > MAX_RUNTIME_MIN}
    assert not too_long, too_long
    for job in (j for j in jobs if j["rule"] in TRAIN_RULES):
        budget_s = int(job["resources"]["runtime"]) * 60 - 30 * 60  # SIGUSR1 30 min before the limit
        assert f"${{SLURM_JOB_ID:+timeout --preserve-status --signal=USR1 --kill-after=1200 {budget_s}}} nudgerl " \
            in job["shell"], job["shell"][:300]
    assert not [j["rule"] for j in jobs if j["rule"] not in TRAIN_RULES and "timeout" in j["shell"]]
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["keep-going"] is True and profile["rerun-incomplete"] is True
    # enough attempts of the training rules for the longest run the config used to ask for in one
    # job (48 h); evaluate has its own (eval_retries: it stops between chunks and resumes); every
    # other rule keeps the profile's single retry
    longest_train = max(runtimes[r] for r in TRAIN_RULES if r in runtimes)
    retries = rule_retries(workdir)
    assert {retries[r] for r in TRAIN_RULES} == {yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["train_retries"]}
    assert (retries["train_grpo"] + 1) * (longest_train - 30) >= 48 * 60
    assert retries["evaluate"] == yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["eval_retries"] >= 1
    assert profile["retries"] == 1 and not [r for r, n in retries.items()
                                            if r not in (*TRAIN_RULES, "evaluate") and n is not None]
    # The checkpoints a retry resumes from are no declared output: Snakemake deletes a failed
    # job's outputs (model/, metrics.jsonl), never the run's checkpoints/.
    for job in (j for j in jobs if j["rule"] in TRAIN_RULES):
        outputs = re.search(r"^    output: (.*)$", job["text"], re.M).group(1).split(", ")
        assert outputs and not [o for o in outputs if "checkpoints" in o]
        assert all(o.endswith(("/model", "/metrics.jsonl")) for o in outputs), outputs


def _resources(out: str, rule: str, output: str) -> str:
    job = next(j for j in out.split("\nrule ")[1:] if j.startswith(f"{rule}:") and output in j.split("resources:")[0])
    return job.split("resources:", 1)[1].split("\n", 1)[0]


def test_a_command_line_override_changes_only_what_it_names(paper_dry_run):
    workdir, _ = paper_dry_run
    out = dry_run(workdir, "--set-resources", "train_grpo:runtime=100")
    grpo = _resources(out, "train_grpo", "runs/grpo8/seed0/model")
    mem_mb = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["resources"]["mem_mb"]["train_grpo"]
    for kept in (f"mem_mb={mem_mb}", "gpu=1", "cpus_per_gpu=8", "slurm_account=acct-test",
                 "slurm_partition=gpu-test"):
        assert kept in grpo, (kept, grpo)
    assert "runtime=100" in grpo and "runtime=720" not in grpo
    assert "runtime=720" in _resources(out, "train_nudgerl", "runs/nudgerl8/seed0/model")  # other rules keep theirs


def test_multi_gpu_training_runs_under_accelerate(paper_dry_run):
    workdir, _ = paper_dry_run
    out = dry_run(workdir, "--set-resources", "train_grpo:gpu=4")
    grpo = [j for j in out.split("\nrule ")[1:] if j.startswith("train_grpo:")]
    # port 0: a free one on the node (two multi-GPU jobs on one node would both take 29500)
    assert grpo and all("accelerate launch --config_file workflow/accelerate/deepspeed_zero2.yaml "
                        "--num_processes 4 --main_process_port 0 -m nudgerl.cli train-grpo" in j for j in grpo)
    nudge = [j for j in out.split("\nrule ")[1:] if j.startswith("train_nudgerl:")]
    assert nudge and all("} nudgerl train-nudgerl" in j and "accelerate" not in j for j in nudge)  # still one GPU


def test_the_pilot_runs_every_gpu_rule_of_the_paper_once_small_and_apart(paper_dry_run, tmp_path):
    """config/pilot.yaml over config/paper.yaml: every GPU rule of the paper's DAG has jobs, none
    writes under results/paper/, training takes a few steps, evaluation a few samples, and its
    planned GPU-hours are a small share of the paper's (nudgerl plan-cost)."""
    import sys

    from nudgerl.reporting import gpu_hours

    workdir, out = paper_dry_run
    proc = subprocess.run(["snakemake", "all", "-n", "-p", "--configfile", "config/paper.yaml", "config/pilot.yaml",
                           "--profile", "profiles/slurm"], cwd=workdir, capture_output=True, text=True, timeout=300,
                          env={**{k: v for k, v in os.environ.items() if k != GPU_TYPE_VAR}, **CLUSTER_ENV})
    assert proc.returncode == 0, proc.stderr[-3000:]
    pilot = jobs_of(proc.stdout + proc.stderr)
    assert {j["rule"] for j in jobs_of(out)} & set(GPU_RULES) == {j["rule"] for j in pilot} & set(GPU_RULES)
    assert not [j for j in pilot if "results/paper/" in j["text"]]
    for job in (j for j in pilot if j["rule"] in TRAIN_RULES):
        assert '"max_steps": 4' in job["shell"], job["shell"][:400]
    assert all('"samples_per_problem": 2' in j["shell"] for j in pilot if j["rule"] == "evaluate")

    def planned(*configs):
        cmd = [sys.executable, "-m", "nudgerl.cli", "plan-cost", "--configfile", *configs]
        done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return float(re.search(r"\*\*total\*\* \| \| \d+ \| \*\*([\d,.]+)\*\*", done.stdout).group(1).replace(",", ""))

    assert gpu_hours.BEGIN  # the same command that generates docs/cluster.md's block
    assert planned("config/paper.yaml", "config/pilot.yaml") < 0.02 * planned("config/paper.yaml")
