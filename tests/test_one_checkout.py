"""One git + DVC checkout, many configurations, as a user works: after the smoke run, the
SmolLM2 and paper configurations plan only inside their own run folders, a second small
configuration runs beside it, and the smoke run is untouched (nothing to do, audit passes;
the audit runs from a shell without the virtual environment on PATH)."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import stand_in_data

pytestmark = pytest.mark.slow

# A smoke variant with its own run name and a smaller matrix (no ablations, no eps_high
# sweep, no checkpoint curves): the second configuration, kept short.
TINY = {
    "run_name": "tiny",
    "grpo": {"group_sizes": [2], "epsilon_high_sweep": []},
    "nudgerl": {"ablations": {"p_drop": [], "hint_sampling": [], "lambda_distill": []}},
    "eval": {"curve": None},
}


def _snakemake(workdir, *args, timeout=1800):
    return subprocess.run(["snakemake", *args], cwd=workdir, capture_output=True, text=True, timeout=timeout)


def _hashes(root: Path, skip: Path | None = None) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not (skip and skip in p.parents)}


def _planned_outputs(dry_run: str) -> list[str]:
    """Every output file of every job a dry run plans (its `output:` lines)."""
    return [f.strip() for line in dry_run.splitlines() if line.startswith("    output: ")
            for f in line.removeprefix("    output: ").split(",")]


def test_configurations_share_one_checkout_without_touching_each_other(smoke_run_copy):
    # a copy of the smoke checkout: this test adds a configuration and edits params.yaml
    work, results = smoke_run_copy, smoke_run_copy / "results"
    before = _hashes(results)

    smol = _snakemake(work, "-n", "--configfile", "config/smollm2.yaml", stand_in_data(work), timeout=300)
    assert smol.returncode == 0, smol.stderr[-3000:]
    planned = _planned_outputs(smol.stdout)
    assert planned and all(f.startswith("results/smollm2/") for f in planned), planned
    assert "results/smollm2/models/smollm2_135m" in planned and "results/smollm2/data/train.jsonl" in planned
    paper = _snakemake(work, "all", "-n", "--configfile", "config/paper.yaml", "--profile", "profiles/slurm",
                       timeout=300)
    assert paper.returncode == 0, paper.stderr[-3000:]
    planned = _planned_outputs(paper.stdout)
    assert planned and all(f.startswith("results/paper/") for f in planned), planned
    assert "results/paper/data/train.jsonl" in planned  # shared by the paper's two models
    assert "results/paper/qwen3_4b_instruct/tables/table1.html" in planned
    # the field's exploration fixes (config.yaml's baselines) on the paper's replicate
    assert "results/paper/qwen3_4b_instruct/tables/baselines.html" in planned
    assert "results/paper/olmo3_7b_instruct_sft/runs/cispo8/seed0/model" in planned

    (work / "config" / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    # a new run name needs its own DVC stages: the workflow lists it in params.yaml stage_runs
    # itself (no hand edit), says so, and runs it
    tiny = _snakemake(work, "--cores", "2", "--configfile", "config/smoke.yaml", "config/tiny.yaml")
    assert tiny.returncode == 0, tiny.stderr[-4000:]
    for section in ("pools_organism", "oracles_organism"):
        assert f"params.yaml: added run 'tiny' to stage_runs.{section}" in tiny.stdout + tiny.stderr
        assert "tiny" in yaml.safe_load((work / "params.yaml").read_text())["stage_runs"][section]
    assert (results / "tiny" / "tables" / "table1.csv").exists()
    assert "nudgerl audit: OK" in (results / "tiny" / "audit" / "audit.txt").read_text()

    # the second configuration wrote only in its own folder; the smoke run is as it was
    assert _hashes(results, skip=results / "tiny") == before
    rerun = _snakemake(work, "-n", "--configfile", "config/smoke.yaml", timeout=300)
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr
    # `.venv/bin/nudgerl audit` from a shell whose PATH lacks the venv: it runs its own dvc
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/bin:/bin"
    audit = subprocess.run([str(Path(sys.executable).parent / "nudgerl"), "audit"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "== results/smoke\nnudgerl audit: OK" in audit.stdout and "== results/tiny\nnudgerl audit: OK" in audit.stdout
    assert "dvc stage pools_organism@tiny: computed here" in audit.stdout
    assert "dvc status: every DVC stage is up to date" in audit.stdout
