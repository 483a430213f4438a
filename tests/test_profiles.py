"""profiles/default is Snakemake's workflow profile: Snakemake loads it by itself, so the README's
plain `snakemake --cores 2` gets the workflow's settings, and also under `--profile
profiles/slurm`, after that profile, where its keys win one top-level key at a time. So it holds
only what is right on every executor. Snakemake's own argument parsing (snakemake.cli.parse_args)
in this checkout; no DAG."""

import pytest
import yaml
from snakemake.cli import parse_args

from conftest import REPO

DEFAULT = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
SLURM = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # Snakemake looks for profiles/default in the working directory
    monkeypatch.setenv("NUDGERL_SLURM_ACCOUNT", "acct-test")
    monkeypatch.setenv("NUDGERL_SLURM_PARTITION", "part-test")


def _args(*argv):
    return parse_args(list(argv))[1]


def _values(resources) -> dict:
    return {name: res.value for name, res in (resources or {}).items()}


def test_the_plain_command_gets_the_workflow_settings(capsys):
    args = _args("--cores", "2")
    assert "Using workflow specific profile profiles/default" in capsys.readouterr().err
    assert args.rerun_incomplete and args.show_failed_logs and args.printshellcmds
    assert _values(args.resources) == {"dvc_lock": 1}
    # `--workflow-profile none` leaves it out; a `--resources` replaces its list whole
    assert not _args("--cores", "2", "--workflow-profile", "none").rerun_incomplete
    assert _values(_args("--cores", "2", "--resources", "dvc_lock=2").resources) == {"dvc_lock": 2}


def test_the_default_profile_sets_no_machine_limit():
    """A `cores` would cap every Slurm job's threads and a mem_mb budget every job's memory
    request (Snakemake constrains each job's resources by the global ones, executor or not)."""
    assert not {"cores", "jobs", "executor", "local-cores", "max-threads", "default-resources", "set-resources",
                "set-threads"} & set(DEFAULT)
    assert DEFAULT["resources"] == {"dvc_lock": 1}
    assert "resources" not in SLURM  # profiles/default's list would replace it whole


def test_slurm_runs_keep_every_setting_of_their_profile():
    merged = _args("--profile", "profiles/slurm")
    alone = _args("--profile", "profiles/slurm", "--workflow-profile", "none")
    for key in SLURM:
        dest = key.replace("-", "_")
        assert repr(getattr(merged, dest)) == repr(getattr(alone, dest)), key
    assert merged.cores is None and merged.jobs == SLURM["jobs"] and merged.executor == "slurm"
    assert merged.default_resources["mem_mb"].value == SLURM["default-resources"]["mem_mb"]
    assert _values(merged.resources) == {"dvc_lock": 1}  # DVC stages one at a time, as before
