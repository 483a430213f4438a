"""Compute nodes without internet (paper scale): GPU jobs load local folders with
HF_HUB_OFFLINE=1, and what needs the network runs as a local rule on the submit host.

1. The paper's DAG under profiles/slurm: no GPU job is given a Hub id or --revision, every one
   runs with HF_HUB_OFFLINE=1 and loads the model's snapshot folder; rule snapshot_model, the
   data rules and the API helper stages are local rules (Snakemake's own predicate), and the
   organism default keeps its cluster jobs and commands.
2. `nudgerl snapshot-model` through the real huggingface_hub, offline, against a Hugging Face
   cache laid out as the library writes it (blobs, snapshots/<commit>/ symlinks, refs/).
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from conftest import REPO, copy_workflow, job_counts, save_tiny_model

CLUSTER_ENV = {"NUDGERL_SLURM_ACCOUNT": "acct-test", "NUDGERL_SLURM_PARTITION": "gpu-test"}
PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
HUB_IDS = [m["path"] for m in PAPER["models"]]  # paper.yaml names its models by Hub id
MODEL_RULES = ("train_grpo", "train_grpo_eps", "train_baseline", "train_nudgerl", "train_pope", "evaluate", "curve_eval",
               "rank_hints")
NETWORK_RULES = ("snapshot_model", "prepare_train", "prepare_benchmark", "strategy_pools", "oracle_solutions")


def _snakemake(workdir, *args, env=None):
    # Targets before --configfile: --configfile takes every following positional argument.
    proc = subprocess.run(["snakemake", "all", "-n", "-p", *args], cwd=workdir, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **CLUSTER_ENV, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _jobs(out: str) -> list[dict]:
    """Each job of a dry run's printout: rule, its block, resources line and shell command."""
    jobs = []
    for block in out.split("\nrule ")[1:]:
        rule, body = block.split(":", 1)
        command = body.split("Shell command: ", 1)[1].split("\n", 1)[0] if "Shell command: " in body else ""
        line = body.split("resources: ", 1)[1].split("\n", 1)[0] if "resources: " in body else ""
        resources = dict(item.split("=", 1) for item in line.split(", ") if "=" in item)
        jobs.append({"rule": rule, "body": body.split("Shell command: ", 1)[0], "resources": resources,
                     "command": command})
    return jobs


# Snakemake 9 dry runs never print "localrule" (jobs.py log_info: "in dryrun, we don't want to
# display a decision whether local or not"), so ask Snakemake's own predicate, Workflow.is_local,
# with the slurm executor plugin in place, as a real `--profile profiles/slurm` run would.
LOCAL_RULES_SCRIPT = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow_api = api.workflow(resource_settings=ResourceSettings(), snakefile=Path("Snakefile").absolute(),
                                config_settings=ConfigSettings(configfiles=[Path(f).absolute() for f in sys.argv[1:]]),
                                workdir=Path(".").absolute())
    workflow = workflow_api._workflow
    workflow._executor_plugin = ExecutorPluginRegistry().get_plugin("slurm")
    print("LOCAL=" + json.dumps({rule.name: workflow.is_local(rule) for rule in workflow.rules}))
"""


def local_rules(workdir, *configfiles) -> dict[str, bool]:
    proc = subprocess.run([sys.executable, "-c", LOCAL_RULES_SCRIPT, *configfiles], cwd=workdir, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **CLUSTER_ENV})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("LOCAL=", 1)[1].splitlines()[0])


def offline_stand_in(workdir: Path) -> str:
    """config/offline.yaml's local datasets as empty files (the preflight checks that they
    exist; a dry run reads none), so its dry run needs no ../shared copy."""
    data = yaml.safe_load((REPO / "config" / "offline.yaml").read_text())["data"]
    folder = workdir / "stand-in-benchmarks"
    folder.mkdir(exist_ok=True)
    for spec in [data["train"], *data["benchmarks"].values()]:
        (folder / spec["path"]).write_text("")
    (workdir / "config" / "stand_in_offline.yaml").write_text(yaml.safe_dump({"data": {"local_dir": str(folder)}}))
    return "config/stand_in_offline.yaml"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("offline_nodes"))


@pytest.fixture(scope="module", params=["paper", "paper+offline"])
def paper_dag(request, scratch):
    configs = ["config/paper.yaml"]
    if request.param == "paper+offline":
        configs += ["config/offline.yaml", offline_stand_in(scratch)]
    run = "paper" if request.param == "paper" else "paper_offline"
    return run, configs, _snakemake(scratch, "--configfile", *configs, "--profile", "profiles/slurm")


@pytest.mark.slow
def test_gpu_jobs_load_snapshot_folders_offline(paper_dag):
    run, _, out = paper_dag
    names = [m["name"] for m in PAPER["models"]]
    assert job_counts(out)["snapshot_model"] == len(names)  # one download per Hub model
    jobs = _jobs(out)
    gpu_jobs = [j for j in jobs if int(j["resources"].get("gpu", 0))]
    assert {j["rule"] for j in gpu_jobs} == set(MODEL_RULES)  # the rules that load a model are the GPU ones
    for job in gpu_jobs:
        cmd = job["command"]
        assert cmd.startswith("HF_HUB_OFFLINE=1 "), cmd[:300]
        assert "--revision" not in cmd and not any(hub_id in cmd for hub_id in HUB_IDS), cmd[:300]
        # the model it loads is the snapshot folder, declared as an input (built before it starts)
        # or a trained run's folder (evaluate) whose LoRA adapter names that snapshot as its base
        flag = "--base-model " if job["rule"] == "curve_eval" else "--model "
        model = cmd.split(flag, 1)[1].split(" ", 1)[0]
        if "/runs/" in model:
            assert any(model.startswith(f"results/{run}/{n}/runs/") for n in names), model
        else:
            assert model in {f"results/{run}/models/{n}" for n in names}, model
            assert model in job["body"].split("input: ", 1)[1].split("\n", 1)[0], job["body"][:400]
    snapshots = [j for j in jobs if j["rule"] == "snapshot_model"]
    for model in PAPER["models"]:
        cmd = next(j["command"] for j in snapshots if f"--out-dir results/{run}/models/{model['name']} " in j["command"])
        assert f"--repo-id {model['path']} --revision {model['revision']} " in cmd
    # what needs the network asks for no GPU (were it ever sent to the cluster)
    for job in jobs:
        if job["rule"] in NETWORK_RULES:
            assert not {"gpu", "gpu_model", "cpus_per_gpu"} & set(job["resources"]), job


@pytest.mark.slow
def test_network_rules_run_on_the_submit_host(scratch, paper_dag):
    _, configs, _ = paper_dag
    local = local_rules(scratch, *configs)
    assert {r: local[r] for r in NETWORK_RULES} == {r: True for r in NETWORK_RULES}
    assert {r: local[r] for r in MODEL_RULES} == {r: False for r in MODEL_RULES}  # GPU jobs go to Slurm


@pytest.mark.slow
def test_organism_default_keeps_its_cluster_jobs_and_commands(scratch):
    """The organism's helpers (backend organism) compute here: still cluster jobs, and no job
    gets the offline prefix (the organism uses no Hub)."""
    local = local_rules(scratch, "config/smoke.yaml")
    assert local["strategy_pools"] is False and local["oracle_solutions"] is False
    assert "snapshot_model" not in local and "prepare_train" not in local
    out = _snakemake(scratch, "--configfile", "config/smoke.yaml", "--cores", "2")
    assert "HF_HUB_OFFLINE" not in out and "snapshot_model" not in out and "snapshot-model" not in out


def test_plan_gives_local_folders_and_no_revision(tmp_path, monkeypatch):
    from snakemake.utils import update_config

    from nudgerl.plan.workflow_plan import WorkflowPlan

    monkeypatch.chdir(REPO)  # the plan reads dvc.yaml / params.yaml of the workflow root
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    update_config(cfg, PAPER)
    local = tmp_path / "my_model"
    local.mkdir()
    cfg["models"] = [*PAPER["models"], {"name": "mine", "path": str(local), "revision": "v1"},
                     {"name": "unpinned", "path": "org/unpinned"}]
    plan = WorkflowPlan(cfg)
    assert set(plan.paths.HUB_MODELS) == {*(m["name"] for m in PAPER["models"]), "unpinned"}  # not the local folder
    qwen = SimpleNamespace(model="qwen3_4b_instruct", seed="0", method="base")
    assert plan.paths.base_model_arg(qwen) == plan.paths.base_model_input(qwen) == plan.paths.model_arg(qwen) \
        == "results/paper/models/qwen3_4b_instruct"
    mine = SimpleNamespace(model="mine", seed="0", method="base")
    assert plan.paths.base_model_arg(mine) == str(local) == plan.paths.base_model_input(mine)  # a folder has no revision
    assert plan.paths.snapshot_source(SimpleNamespace(model="unpinned")) == "--repo-id org/unpinned --revision main"
    assert plan.paths.HUB_OFFLINE == "HF_HUB_OFFLINE=1 "
    assert plan.paths.helper_calls_api(plan.paths.POOL_DVC_STAGE) and plan.paths.helper_calls_api(plan.paths.ORACLE_DVC_STAGE)
    organism = WorkflowPlan(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    assert organism.paths.HUB_OFFLINE == "" and organism.paths.HUB_MODELS == {}
    assert not organism.paths.helper_calls_api(organism.paths.POOL_DVC_STAGE)


# ---- nudgerl snapshot-model, offline, through the real huggingface_hub -------------------------

MAIN = "1" * 40
V1 = "2" * 40


def _add_commit(repo: Path, commit: str, files: dict[str, bytes], ref: str) -> None:
    """One commit in huggingface_hub's cache layout: content in blobs/, snapshots/<commit>/
    holding relative symlinks to them, refs/<ref> naming the commit."""
    import hashlib

    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / ref).write_text(commit)


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """A cache holding org/tiny: `main` = a real tiny model, tag `v1` = another commit."""
    model = Path(save_tiny_model(tmp_path_factory.mktemp("tiny_model")))
    cache = tmp_path_factory.mktemp("hub_cache")
    repo = cache / "models--org--tiny"
    files = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    _add_commit(repo, MAIN, files, "main")
    _add_commit(repo, V1, {**files, "README.md": b"v1\n"}, "v1")
    return cache


def snapshot(cache, out, revision="main", repo_id="org/tiny", cwd=None):
    return subprocess.run([sys.executable, "-m", "nudgerl.cli", "snapshot-model", "--repo-id", repo_id, "--revision",
                           revision, "--cache-dir", str(cache), "--out-dir", str(out)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_snapshot_resolves_the_revision_and_writes_a_loadable_folder(hub_cache, tmp_path):
    out = Path("results/run/models/tiny")  # relative, as the rule passes it
    proc = snapshot(hub_cache, out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / out
    assert not list(folder.parent.glob(".tiny.tmp*"))  # renamed into place, nothing left beside it
    record = json.loads((folder / "provenance.json").read_text())
    assert record["config"] == {"repo_id": "org/tiny", "revision": "main", "resolved_commit": MAIN}
    weights = folder / "model.safetensors"
    assert weights.is_file() and not weights.is_symlink()  # a real file, not a link into the cache
    assert weights.read_bytes() == (hub_cache / "models--org--tiny" / "snapshots" / MAIN / "model.safetensors").read_bytes()
    assert not (folder / "README.md").exists()  # v1's file: main was served
    # the sidecar hashes the files under their final names, as the audit reads them
    from nudgerl.io import sha256_file

    assert record["outputs"][str(out / "model.safetensors")] == sha256_file(weights)
    assert all(os.path.isfile(tmp_path / f) for f in record["outputs"])
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(folder).config.num_hidden_layers == 1

    # a tag resolves through refs/ to its own commit
    tagged = snapshot(hub_cache, tmp_path / "tagged", revision="v1")
    assert tagged.returncode == 0, tagged.stderr[-3000:]
    assert json.loads((tmp_path / "tagged" / "provenance.json").read_text())["config"]["resolved_commit"] == V1
    assert (tmp_path / "tagged" / "README.md").read_text() == "v1\n"


def test_snapshot_present_and_matching_is_kept_without_the_hub(hub_cache, tmp_path):
    out = tmp_path / "tiny"
    assert snapshot(hub_cache, out).returncode == 0
    before = (out / "provenance.json").read_text()
    # an empty cache, offline: only the folder already there can satisfy the request
    again = snapshot(tmp_path / "empty_cache", out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["skipped"] is True
    assert (out / "provenance.json").read_text() == before
    # another revision is not "matching": it needs the Hub (or the cache) again
    other = snapshot(tmp_path / "empty_cache", out, revision="v1")
    assert other.returncode == 2


def test_snapshot_failure_names_model_and_revision_and_leaves_nothing(hub_cache, tmp_path):
    out = tmp_path / "models" / "tiny"
    proc = snapshot(hub_cache, out, revision="no-such-tag")
    assert proc.returncode == 2
    err = proc.stderr
    assert "snapshot-model: error: model 'org/tiny' at revision 'no-such-tag'" in err, err
    assert "HF_HUB_OFFLINE is set" in err and str(hub_cache) in err
    assert not out.exists() and not (tmp_path / "models" / ".tiny.tmp").exists()
    missing = snapshot(hub_cache, out, repo_id="org/absent")
    assert missing.returncode == 2 and "model 'org/absent' at revision 'main'" in missing.stderr
    assert not out.exists()


def test_a_leftover_temporary_folder_is_replaced(hub_cache, tmp_path):
    out = tmp_path / "models" / "tiny"
    stale = tmp_path / "models" / ".tiny.tmp"
    stale.mkdir(parents=True)
    (stale / "half-written.bin").write_bytes(b"x")
    proc = snapshot(hub_cache, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not stale.exists() and not (out / "half-written.bin").exists() and (out / "config.json").is_file()


@pytest.mark.slow
def test_snapshot_rule_runs_through_snakemake(hub_cache, workdir):
    """The rule itself (its command, log and benchmark), on a config naming a Hub model, with
    the Hugging Face cache the job finds through HF_HUB_CACHE as a login node's would be."""
    scratch = workdir  # its own checkout: this run adds a config and results the module's dry runs must not see
    (scratch / "config" / "tiny_hub.yaml").write_text(yaml.safe_dump(
        {"models": [{"name": "tiny", "path": "org/tiny", "revision": "v1"}]}))
    target = "results/paper/models/tiny"
    proc = subprocess.run(["snakemake", target, "--cores", "1", "--configfile", "config/paper.yaml",
                           "config/tiny_hub.yaml"], cwd=scratch, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((scratch / target / "provenance.json").read_text())
    assert record["config"] == {"repo_id": "org/tiny", "revision": "v1", "resolved_commit": V1}
    assert (scratch / "results/paper/benchmarks/snapshot_model/tiny.tsv").is_file()
    assert '"resolved_commit": "' + V1 in (scratch / "results/paper/logs/snapshot_model/tiny.log").read_text()
