"""The fast path (-m "not slow") starts no workflow: conftest's guard recognises Snakemake and
DVC pipeline commands however they are spelled, and lets everything else through."""

import subprocess
import sys

import pytest
from conftest import starts_a_workflow


@pytest.mark.parametrize("args", [
    ["snakemake", "-n", "--cores", "1"],
    ["/venv/bin/snakemake", "all"],
    [sys.executable, "-m", "snakemake", "--cores", "2"],
    "snakemake -n --configfile config/smoke.yaml",
    ["dvc", "repro", "pools_x"],
    ["dvc", "--wait-for-lock", "repro", "pools_x"],
    [sys.executable, "-m", "dvc", "exp", "run"],
])
def test_workflow_commands_are_recognised(args):
    assert starts_a_workflow(args)


@pytest.mark.parametrize("args", [
    ["dvc", "init", "-q"],
    ["dvc", "--version"],
    [sys.executable, "-m", "dvc", "status"],
    [sys.executable, "-m", "nudgerl.cli", "train-grpo"],
    ["git", "init", "-q"],
    ["echo", "snakemake"],
    "sbatch --wrap 'snakemake'",
])
def test_other_commands_pass(args):
    assert not starts_a_workflow(args)


def test_a_fast_test_that_starts_snakemake_fails_before_it_runs():
    # this test is itself in the fast path: the guard is active around it
    with pytest.raises(AssertionError, match="mark it @pytest.mark.slow"):
        subprocess.run([sys.executable, "-m", "snakemake", "--version"], capture_output=True)
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_slow_test_may_start_snakemake():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip()[0].isdigit()
