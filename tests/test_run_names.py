"""A new configuration needs no hand edit of params.yaml: the Snakefile lists its run_name in
`stage_runs` for the helper stages it uses (nudgerl.offline.dvc_stages.register_run), once, keeping
the file's comments and layout; and `snakemake study` without config/study.yaml names that
configfile. Dry runs only, in scratch copies of the workflow."""

import subprocess
import sys

import pytest
import yaml

from conftest import merged_config
from nudgerl.offline.dvc_stages import load_stage, register_run


def _added(run, section):
    return (f"params.yaml: added run {run!r} to stage_runs.{section} (DVC stage {section}@{run}); "
            "commit params.yaml with the run's other files")


def _with_run(text: str, run: str, sections) -> str:
    """params.yaml as the edit should leave it: each section's one-line list ends with the run."""
    return "".join(line.replace("]", f", {run}]") if line.strip().split(":")[0] in sections else line
                   for line in text.splitlines(keepends=True))


def test_a_new_run_name_is_listed_for_its_helper_stages_once(workdir, monkeypatch):
    monkeypatch.chdir(workdir)  # DVC reads params.yaml from the working directory, as Snakemake runs it
    params = workdir / "params.yaml"
    before = params.read_text()
    smoke_stage = load_stage("pools_organism@smoke", workdir).definition()

    lines = register_run({**merged_config("smoke.yaml"), "run_name": "mytest"}, workdir)
    assert lines == [_added("mytest", "pools_organism"), _added("mytest", "oracles_organism")]
    # only the two lists changed: comments, order and the other runs' lists are as they were
    assert params.read_text() == _with_run(before, "mytest", ("pools_organism", "oracles_organism"))
    assert load_stage("pools_organism@mytest", workdir).outs == (
        "results/mytest/pools/pools_organism.jsonl", "results/mytest/pools/pools_organism.jsonl.stats.json")
    assert load_stage("oracles_organism@mytest", workdir).deps == ("results/mytest/data/train.jsonl",)
    # not a stage parameter: the smoke run's stage (and so its rule's params) is unchanged
    assert load_stage("pools_organism@smoke", workdir).definition() == smoke_stage

    after = params.read_text()
    assert register_run({**merged_config("smoke.yaml"), "run_name": "mytest"}, workdir) == []
    assert params.read_text() == after  # idempotent: listed runs write nothing
    # a configuration without POPE uses the pool stage only; its own stage group, not the organism's
    assert register_run({"run_name": "nopope", "pools": {"stage": "pools_smollm2"}}, workdir) == [
        _added("nopope", "pools_smollm2")]
    assert yaml.safe_load(params.read_text())["stage_runs"]["pools_smollm2"] == ["smollm2", "nopope"]


def test_what_cannot_be_listed_is_left_to_the_preflight(workdir, tmp_path):
    params = workdir / "params.yaml"
    before = params.read_text()
    for config in ({"run_name": "bad name"}, {"run_name": 3}, {},  # the schema refuses these
                   {"run_name": "x", "pools": {"stage": "pools_missing"}}):  # no such stage group
        assert register_run(config, workdir) == []
    assert params.read_text() == before
    # no DVC repository: the preflight says `dvc init`
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("dvc.yaml", "params.yaml"):
        (bare / name).write_text((workdir / name).read_text())
    assert register_run({"run_name": "x"}, bare) == [] and (bare / "params.yaml").read_text() == before


def test_runs_registered_at_once_all_land(workdir):
    """Snakemake runs of several new configurations started together in one checkout: the lock
    keeps every one (no lost update), and the file stays whole."""
    code = ("import sys; from nudgerl.offline.dvc_stages import register_run; "
            "register_run({'run_name': sys.argv[1], 'pope': {}}, sys.argv[2])")
    procs = [subprocess.Popen([sys.executable, "-c", code, f"run{i}", str(workdir)]) for i in range(6)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 6
    runs = yaml.safe_load((workdir / "params.yaml").read_text())["stage_runs"]
    for section in ("pools_organism", "oracles_organism"):
        assert sorted(runs[section][-6:]) == [f"run{i}" for i in range(6)], runs[section]
    assert not list(workdir.glob(".params.yaml.*"))  # no temporary file left behind


@pytest.mark.slow
def test_snakemake_lists_a_new_run_and_plans_it(workdir):
    (workdir / "config" / "mytest.yaml").write_text("run_name: mytest\n")
    proc = subprocess.run(["snakemake", "-n", "--configfile", "config/smoke.yaml", "config/mytest.yaml"],
                          cwd=workdir, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    # the README's plain command gets profiles/default, found by Snakemake itself
    assert "Using workflow specific profile profiles/default" in out
    for section in ("pools_organism", "oracles_organism"):
        assert _added("mytest", section) in out
    assert "output: results/mytest/pools/pools_organism.jsonl" in out  # its stage, planned


@pytest.mark.slow
def test_the_study_target_without_its_config_says_which_configfile(workdir):
    proc = subprocess.run(["snakemake", "study", "-n", "--cores", "2"], cwd=workdir, capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "target `study` needs --configfile config/single_family.yaml config/study.yaml" in out, out[-3000:]
    assert "No rule to produce" not in out, out[-3000:]
