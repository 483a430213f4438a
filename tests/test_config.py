"""Configuration errors name the key and stop the DAG before any job runs."""

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from nudgerl.config import ConfigError, load_config, validate_config

from conftest import merged_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def default_config():
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml"])
def test_shipped_configs_are_valid(name):
    load_config(REPO / "config" / name)


def _error(config) -> str:
    with pytest.raises(ConfigError) as e:
        validate_config(config)
    return str(e.value)


def test_unknown_key_is_named(default_config):
    bad = copy.deepcopy(default_config)
    bad["grpo"]["max_stpes"] = 10
    msg = _error(bad)
    assert "max_stpes" in msg and "'grpo'" in msg and "max_steps" in msg  # lists what is allowed


def test_wrong_type_names_the_key(default_config):
    bad = copy.deepcopy(default_config)
    bad["grpo"]["learning_rate"] = "fast"
    assert "grpo.learning_rate" in _error(bad)


def test_missing_required_key(default_config):
    bad = copy.deepcopy(default_config)
    del bad["eval"]["samples_per_problem"]
    assert "samples_per_problem" in _error(bad)


def test_preflight_k_larger_than_samples(default_config):
    bad = copy.deepcopy(default_config)
    bad["eval"]["ks"] = [1, 64]
    msg = _error(bad)
    assert "eval.ks" in msg and "pass@64" in msg


def test_preflight_benchmarks_that_do_not_fit(default_config):
    bad = copy.deepcopy(default_config)
    bad["organism"]["benchmarks"]["apex"]["size"] = 5000
    assert "organism.benchmarks" in _error(bad)


@pytest.mark.slow
def test_snakemake_refuses_a_bad_config_before_any_job(workdir):
    bad = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())
    bad["grpo"]["group_sizes"] = [8, "sixteen"]
    (workdir / "config" / "bad.yaml").write_text(yaml.safe_dump(bad))
    proc = subprocess.run(
        ["snakemake", "-n", "--cores", "1", "--configfile", "config/bad.yaml"],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert "grpo.group_sizes.1" in proc.stdout + proc.stderr
    assert not (workdir / "results").exists()


def test_preflight_batch_shapes(default_config):
    bad = copy.deepcopy(default_config)
    bad["grpo"]["prompts_per_step"] = 500
    msg = _error(bad)
    assert "grpo.prompts_per_step" in msg and "organism.train.size" in msg
    bad = copy.deepcopy(default_config)
    bad["grpo"].update(use_vllm=True, vllm_mode="server")
    msg = _error(bad)
    assert "grpo.vllm_mode" in msg and "set vllm_mode: colocate" in msg
    bad = copy.deepcopy(default_config)
    bad["nudgerl"]["K"] = 0  # a schema error: N = M x K needs K >= 1
    assert "nudgerl.K" in _error(bad)
    bad = copy.deepcopy(default_config)
    bad["nudgerl"].update(M=1, K=1)
    assert "a group needs at least 2 rollouts" in _error(bad)


def test_preflight_dvc_stages_and_pool_size(default_config):
    bad = copy.deepcopy(default_config)
    bad["pools"]["stage"] = "pools_missing"
    msg = _error(bad)
    assert "pools.stage" in msg and "dvc.yaml has no stage 'pools_missing'" in msg and "pools_organism" in msg
    bad = copy.deepcopy(default_config)
    bad["nudgerl"].update(M=4, K=2)  # params.yaml asks the helper for 3 hints per problem
    msg = _error(bad)
    assert "nudgerl.M" in msg and "pools_organism.n = 3" in msg
    bad = copy.deepcopy(default_config)
    bad["nudgerl"]["hint_sampler"] = "top_ranked"
    bad["ranking"]["keep"] = 1
    assert "ranking.keep" in _error(bad)


def test_a_run_name_without_its_dvc_stages_names_the_params_key(default_config):
    """One DVC stage per configuration: a new run_name is listed in params.yaml stage_runs."""
    cfg = copy.deepcopy(default_config)
    cfg["run_name"] = "my_new_run"
    msg = _error(cfg)
    assert "config key 'run_name' ('my_new_run')" in msg
    assert "DVC stage 'pools_organism@my_new_run' does not exist" in msg
    assert "add 'my_new_run' to params.yaml 'stage_runs.pools_organism'" in msg
    assert "'stage_runs.oracles_organism'" in msg


def test_dvc_stage_outputs_must_be_what_the_rules_declare():
    from nudgerl.offline.dvc_stages import StageError, check_outputs, load_stage

    stage = load_stage("pools_organism@smoke", REPO)
    assert stage.deps == ("results/smoke/data/train.jsonl",) and "pools_organism" in stage.params
    check_outputs(stage, ["results/smoke/pools/pools_organism.jsonl", "results/smoke/pools/pools_organism.jsonl.stats.json"])
    with pytest.raises(StageError, match="but the workflow expects"):
        check_outputs(stage, ["results/pools/pools_organism.jsonl"])
    # a helper model named in params.yaml is a dependency, as DVC resolves it
    assert load_stage("pools_smollm2@smollm2", REPO).deps[1] == "results/smollm2/models/smollm2_135m"


def test_local_model_or_dataset_paths_must_exist(tmp_path):
    from nudgerl.config import check_local_path

    assert check_local_path("models.policy", "Qwen/Qwen3-4B-Instruct-2507") == []  # a hub id
    assert check_local_path("models.policy", str(tmp_path)) == []
    msg = check_local_path("datasets.train", str(tmp_path / "nope.jsonl"))
    assert msg and "datasets.train" in msg[0] and "does not exist" in msg[0]


@pytest.mark.slow
def test_snakemake_dry_run_stops_on_a_preflight_error(workdir):
    bad = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())
    bad["grpo"]["prompts_per_step"] = 1000
    (workdir / "config" / "bad.yaml").write_text(yaml.safe_dump(bad))
    proc = subprocess.run(["snakemake", "-n", "--cores", "1", "--configfile", "config/bad.yaml"],
                          cwd=workdir, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "grpo.prompts_per_step" in out and "lower prompts_per_step" in out
    assert not (workdir / "results").exists()


def test_curve_interval_must_match_saved_checkpoints(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["eval"]["curve"]["every"] = 15  # checkpoints are saved every 10 steps
    assert "'eval.curve.every' (15) must be a multiple of 'grpo.checkpoint_every' (10)" in _error(cfg)
    cfg["eval"]["curve"] = {"every": 20, "benchmarks": ["aime24", "gsm8k"]}
    assert "'eval.curve.benchmarks': ['gsm8k'] not in organism.benchmarks" in _error(cfg)


def test_eps_sweep_keys_are_validated(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["grpo"]["epsilon_high_sweep"] = [0.2, 0.4]
    validate_config(cfg)  # the default trains 2 optimizer steps per generation batch: off-policy
    cfg["grpo"].pop("per_device_train_batch_size")
    # on-policy training (one step per batch): the ratio is 1, eps_high would change nothing
    assert "'grpo.epsilon_high_sweep' needs off-policy updates" in _error(cfg)
    cfg["grpo"]["num_iterations"] = 2
    validate_config(cfg)
    cfg["grpo"]["epsilon_high_sweep"] = [0.2, -0.1]
    assert "grpo.epsilon_high_sweep.1" in _error(cfg)
    cfg["grpo"]["epsilon_high_sweep"] = [0.2]
    cfg["grpo"]["epsilon_high_sweep_groupsize"] = 8
    assert "epsilon_high_sweep_groupsize" in _error(cfg)


def test_micro_batches_must_divide_every_generation_batch(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["grpo"]["per_device_train_batch_size"] = 24  # 8 prompts x N=8 = 64 rollouts: not 2 x 24
    msg = _error(cfg)
    assert "grpo.per_device_train_batch_size" in msg and "N=8" in msg and "64 rollouts" in msg


def test_missing_local_datasets_and_models_are_named_before_any_job(tmp_path):
    from snakemake.utils import update_config  # how Snakemake merges --configfile files

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    offline = yaml.safe_load((REPO / "config" / "offline.yaml").read_text())
    for name in ("paper.yaml", "offline.yaml"):
        update_config(cfg, yaml.safe_load((REPO / "config" / name).read_text()))
    cfg["data"]["local_dir"] = str(tmp_path)  # an empty folder: every local file is missing
    cfg["models"][0]["path"] = str(tmp_path / "no-such-model")
    msg = _error(cfg)
    assert "'data.train.path'" in msg and "dapo_math_17k.jsonl" in msg and "data.local_dir" in msg
    assert "'data.benchmarks.aime24.path'" in msg
    assert "models[0].path" in msg and "does not exist" in msg
    for name in ["dapo_math_17k.jsonl", *(s["path"] for s in offline["data"]["benchmarks"].values())]:
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "no-such-model").mkdir()
    validate_config(cfg)  # all present: no error


def test_unfilled_scheduler_settings_are_named():
    from nudgerl.config import resource_placeholders

    settings = [("default-resources", "slurm_account='$NUDGERL_SLURM_ACCOUNT'"),
                ("default-resources", "slurm_partition='${NUDGERL_SLURM_PARTITION}'"),
                ("default-resources", "runtime=60"),
                ("set-resources train_grpo", "slurm_extra='--qos=<QOS>'")]
    problems = resource_placeholders(settings, environ={"NUDGERL_SLURM_PARTITION": "gpu"})
    assert problems == [
        "default-resources slurm_account: environment variable NUDGERL_SLURM_ACCOUNT is not set; "
        "export NUDGERL_SLURM_ACCOUNT=<value> (profiles/slurm/config.yaml explains it)",
        "set-resources train_grpo slurm_extra: still the placeholder <QOS>; give your cluster's value"]
    # set (even to "": a cluster without accounts) and filled: nothing to report
    assert resource_placeholders(settings[:3], environ={"NUDGERL_SLURM_ACCOUNT": "", "NUDGERL_SLURM_PARTITION": "g"}) == []
    # a placeholder that arrives through a variable is still a placeholder
    assert "still the placeholder <ACCOUNT>" in resource_placeholders(
        settings[:1], environ={"NUDGERL_SLURM_ACCOUNT": "<ACCOUNT>"})[0]


def test_per_rule_resources_are_schema_checked(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["resources"] = {"gpu": {"train_grpo": 1}, "gpu_model": {"train_grpo": "h100"}, "runtime": {"evaluate": 30}}
    validate_config(cfg)
    cfg["resources"] = {"gpus": {"train_grpo": 1}}
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['gpus'\] under 'resources'"):
        validate_config(cfg)
    cfg["resources"] = {"runtime": {"train_grpx": 30}}
    with pytest.raises(ConfigError, match="'train_grpx' is not one of"):
        validate_config(cfg)


def test_base_model_seed_is_an_organism_key(default_config):
    ok = copy.deepcopy(default_config)
    ok["base_model_seed"] = 3
    validate_config(ok)
    bad = copy.deepcopy(default_config)
    bad["base_model_seed"] = -1
    assert "base_model_seed" in _error(bad)
    paper = merged_config("smollm2.yaml")
    paper["base_model_seed"] = 0
    assert "'base_model_seed': only the organism" in _error(paper)
