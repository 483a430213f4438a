"""nudgerl.workflow_plan: what the rules build, derived from a config without Snakemake.

The dry-run tests (test_paper_dag, test_smoke_dag) check the whole DAG; these pin the
derivations one by one: method ids, ablation and claim roles, paths, resources, arguments.
"""

import copy
import os
from types import SimpleNamespace

import pytest
import yaml
from snakemake.utils import update_config  # how Snakemake merges --configfile files

from nudgerl.workflow_plan import (EVAL_EXCLUDE, GPU_TYPE_VAR, GRPO_RUN_EXCLUDE, TRAIN_KILL_AFTER_S,
                                   TRAIN_STOP_BEFORE_LIMIT_S, WorkflowPlan, time_budget)

from conftest import REPO


def _config(*extra: str) -> dict:
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for name in extra:
        update_config(cfg, yaml.safe_load((REPO / "config" / name).read_text()))
    return cfg


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the plan reads dvc.yaml / params.yaml of the workflow root


def test_default_paths_and_methods():
    cfg = _config()
    plan = WorkflowPlan(cfg)
    run = cfg["run_name"]
    assert plan.RESULTS == plan.SHARED == f"results/{run}"
    assert plan.TRAIN == f"results/{run}/data/train.jsonl"
    assert plan.GRPO_METHODS == [f"grpo{n}" for n in cfg["grpo"]["group_sizes"]]
    n = cfg["nudgerl"].get("M", 2) * cfg["nudgerl"].get("K", 4)
    assert plan.NUDGE_MAIN == f"nudgerl{n}"
    assert plan.METHODS == ["base", *plan.GRPO_METHODS, plan.POPE_METHOD, plan.NUDGE_MAIN]
    assert plan.REFERENCE == ("grpo8" if 8 in cfg["grpo"]["group_sizes"] else plan.GRPO_METHODS[0])
    # Table 1 methods have every replicate; ablation runs only the ablation seeds
    for method, seeds in plan.RUN_SEEDS.items():
        assert seeds == (plan.SEEDS if method in plan.METHODS else plan.ABLATION_SEEDS)


def test_ablations_register_runs_and_claim_roles():
    cfg = _config()
    cfg["nudgerl"]["ablations"] = {"p_drop": [0.0, 0.25], "hint_sampling": ["random"]}
    plan = WorkflowPlan(cfg)
    main = plan.NUDGE_MAIN
    p_main = cfg["nudgerl"].get("p_drop", 0.5)
    methods = [m for m, _ in plan.ABLATIONS["pdrop"]]
    assert main in methods and f"{main}_pdrop0.25" in methods and f"{main}_pdrop0" in methods
    assert plan.NUDGE_RUNS[f"{main}_pdrop0.25"]["nudge"]["p_drop"] == 0.25
    # the setting equal to the main run's is the main run, not another run
    assert [p for p, m in plan.CLAIM_ROLES["pdrop"] if m == main] == [p_main]
    assert plan.ABLATIONS["hint_sampling"][0][0] == main
    assert plan.CLAIM_ROLES["hint_sampling"]["random"] == f"{main}_random"
    assert "distill" not in plan.ABLATIONS  # one value only: no table
    assert set(plan.TRAINED) == {*plan.GRPO_METHODS, *plan.NUDGE_RUNS}


def test_top_ranked_ablation_reads_the_replicates_ranked_pools():
    cfg = _config()
    cfg["nudgerl"]["ablations"] = {"hint_sampling": ["top_ranked"]}
    plan = WorkflowPlan(cfg)
    run = plan.NUDGE_RUNS[f"{plan.NUDGE_MAIN}_topranked"]
    assert run["pools"] == plan.RANKED_POOLS and "{seed}" in run["pools"]
    assert plan.nudge_pools(SimpleNamespace(method=plan.NUDGE_MAIN, items=lambda: {}.items())) == plan.POOLS


def test_eps_sweep_main_value_is_the_main_run():
    cfg = _config()
    cfg["grpo"]["epsilon_high"] = 0.2
    cfg["grpo"]["epsilon_high_sweep"] = [0.2, 0.28]
    cfg["grpo"]["epsilon_high_sweep_group_size"] = cfg["grpo"]["group_sizes"][0]
    plan = WorkflowPlan(cfg)
    n = cfg["grpo"]["group_sizes"][0]
    assert plan.EPS_SWEEP == [(0.2, f"grpo{n}"), (0.28, f"grpo{n}_eps0.28")]
    assert plan.EPS_RUNS == [f"grpo{n}_eps0.28"]
    assert "eps_high_scaling" in plan.figure_names()


def test_resources_and_threads_from_config():
    cfg = _config()
    cfg["threads_per_job"] = 3
    cfg["resources"] = {"mem_mb": {"evaluate": 9000}, "threads": {"evaluate": 5}}
    plan = WorkflowPlan(cfg)
    assert plan.rule_resources("evaluate", mem_mb=2000, runtime=10) == {"mem_mb": 9000, "runtime": 10}
    assert plan.rule_resources("train_grpo", mem_mb=2000) == {"mem_mb": 2000}
    assert plan.rule_threads("evaluate") == 5 and plan.rule_threads("train_grpo") == 3


def test_section_leaves_out_other_rules_keys():
    plan = WorkflowPlan(_config())
    assert "curve" not in yaml.safe_load(plan.section("eval", exclude=EVAL_EXCLUDE, seed=1))
    grpo = yaml.safe_load(plan.section("grpo", exclude=GRPO_RUN_EXCLUDE))
    assert not set(GRPO_RUN_EXCLUDE) & set(grpo)


def test_the_drill_reads_no_sft_setting_so_the_regime_map_shares_it():
    plan = WorkflowPlan(_config())
    drill = yaml.safe_load(plan.drill_section())
    assert drill and set(drill) <= set(plan.config["base_model"])
    assert "unhinted_strategy_weights" not in drill and "examples" not in drill
    shares = plan.config["regime_map"]["shares"]
    cells = [plan.regime_map_base_config(share) for share in shares]
    assert all({k: cell[k] for k in drill} == drill for cell in cells)  # every cell: the same drill
    assert len({str(cell["unhinted_strategy_weights"]) for cell in cells}) == len(shares)  # other SFT mixtures


def test_launcher_uses_accelerate_for_more_than_one_gpu():
    plan = WorkflowPlan(_config())
    assert plan.launcher(None, SimpleNamespace(gpu=0)) == "nudgerl"  # CPU training: no CUDA check
    assert plan.launcher(None, SimpleNamespace(gpu=1)) == "NUDGERL_REQUIRE_CUDA=1 nudgerl"
    cmd = plan.launcher(None, SimpleNamespace(gpu=4))
    assert cmd.startswith("NUDGERL_REQUIRE_CUDA=1 ") and "accelerate launch" in cmd
    assert "--num_processes 4 -m nudgerl.cli" in cmd
    # evaluation never runs one process per GPU (vLLM's tensor parallelism spans them)
    assert plan.inference_launcher(None, SimpleNamespace(gpu=4)) == "NUDGERL_REQUIRE_CUDA=1 nudgerl"
    assert plan.inference_launcher(None, SimpleNamespace(gpu=0)) == "nudgerl"


def test_gpu_type_comes_from_the_environment_for_gpu_rules_only(monkeypatch):
    cfg = _config()
    cfg["resources"] = {"gpu": {"train_grpo": 1, "evaluate": 2}, "gpu_model": {"evaluate": "a100"}}
    plan = WorkflowPlan(cfg)
    monkeypatch.delenv(GPU_TYPE_VAR, raising=False)
    assert "gpu_model" not in plan.rule_resources("train_grpo")  # plain count: --gpus=1
    monkeypatch.setenv(GPU_TYPE_VAR, "")
    assert "gpu_model" not in plan.rule_resources("train_grpo")
    monkeypatch.setenv(GPU_TYPE_VAR, "h200_nvl")
    assert plan.rule_resources("train_grpo") == {"gpu": 1, "gpu_model": "h200_nvl"}
    assert plan.rule_resources("evaluate")["gpu_model"] == "a100"  # the config's own per-rule model wins
    assert "gpu_model" not in plan.rule_resources("rank_hints", mem_mb=2000)  # no GPU: no type
    monkeypatch.setenv(GPU_TYPE_VAR, "nvidia_a100-sxm4-80gb")  # the plugin rejects '-' at submit time
    with pytest.raises(ValueError, match="NUDGERL_SLURM_GPU_TYPE='nvidia_a100-sxm4-80gb'"):
        plan.rule_resources("train_grpo")


def test_training_under_slurm_stops_itself_before_the_time_limit(tmp_path):
    """The time budget prefix, run by bash as Snakemake runs a rule's shell: inside a Slurm job
    the trainer gets SIGUSR1 when the budget is spent and its exit code is kept; outside Slurm
    (no SLURM_JOB_ID) nothing limits it. A stand-in trainer that saves and exits 75 on SIGUSR1,
    with a 1-minute runtime and a 57 s lead (3 s budget)."""
    import subprocess
    import time

    trainer = tmp_path / "trainer.py"
    trainer.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (open(sys.argv[1], 'w').write('saved'), sys.exit(75)))\n"
        "time.sleep(float(sys.argv[2]))\n")
    prefix = time_budget(1, stop_before_s=57, kill_after_s=5)
    assert prefix.startswith("${SLURM_JOB_ID:+timeout --preserve-status --signal=USR1 --kill-after=5 3}")
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    t0 = time.monotonic()
    in_slurm = subprocess.run(["bash", "-c", f"set -euo pipefail; {prefix}python {trainer} {tmp_path}/a 30"],
                              env={**env, "SLURM_JOB_ID": "1"})
    assert in_slurm.returncode == 75 and (tmp_path / "a").read_text() == "saved"
    assert 2.5 < time.monotonic() - t0 < 20
    local = subprocess.run(["bash", "-c", f"set -euo pipefail; {prefix}python {trainer} {tmp_path}/b 5"], env=env)
    assert local.returncode == 0 and not (tmp_path / "b").exists()
    assert time_budget(None) == "" and time_budget(20) == ""  # no runtime, or one shorter than the lead
    assert time_budget(720).endswith(f"--kill-after={TRAIN_KILL_AFTER_S} {720 * 60 - TRAIN_STOP_BEFORE_LIMIT_S}}} ")


def test_organism_outputs_and_base_model_arguments():
    plan = WorkflowPlan(_config("smoke.yaml"))
    outputs = plan.final_outputs()
    assert f"{plan.RESULTS}/tables/table1.csv" in outputs and f"{plan.RESULTS}/audit/audit.txt" in outputs
    assert all("{" not in f for f in outputs)
    w = SimpleNamespace(seed="1", method="base")
    assert plan.model_dir(w) == plan.base_model_arg(w) == plan.BASE_MODEL.format(seed=1)
    assert plan.regime_input(w) == f"{plan.DIAGNOSIS}.regime.json".format(seed=1)


def test_math_task_runs_per_model():
    plan = WorkflowPlan(_config("smollm2.yaml"))
    assert plan.TASK == "math" and plan.RESULTS == f"{plan.SHARED}/{{model}}"
    outputs = plan.final_outputs()
    for name in plan.MODELS:
        assert f"{plan.SHARED}/{name}/tables/table1.csv" in outputs
    assert plan.regime_input(SimpleNamespace(seed="0")) == []


def test_a_model_named_like_a_shared_folder_is_refused():
    cfg = _config("smollm2.yaml")
    cfg = copy.deepcopy(cfg)
    cfg["models"][0]["name"] = "pools"
    with pytest.raises(ValueError, match="rename the model"):
        WorkflowPlan(cfg)


def test_every_plan_name_a_rule_reads_is_bound_where_grep_finds_it():
    """workflow/rules/common.smk binds what the rules read of the plan one name per line
    (`NAME = PLAN.NAME`), never by injecting the plan's attributes wholesale: a reader of a rule
    file greps a name to its line. Every plan attribute or method a rule file or the Snakefile
    mentions is bound there, and every binding names a real attribute."""
    import re

    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    bound = dict(re.findall(r"^(\w+) = PLAN\.(\w+)(?:  # .*)?$", common, re.M))
    assert bound and all(name == attr for name, attr in bound.items())
    rule_files = [p for p in (REPO / "workflow" / "rules").glob("*.smk") if p.name != "common.smk"]
    texts = [p.read_text() for p in [*rule_files, REPO / "Snakefile"]]
    assert not [p for p in [*rule_files, REPO / "workflow" / "rules" / "common.smk"] if "globals()" in p.read_text()]
    for cfg in (_config(), _config("smollm2.yaml"), _config("paper.yaml")):
        plan = WorkflowPlan(cfg)
        names = {n for n in [*vars(plan), *dir(type(plan))] if not n.startswith("_") and n != "config"}
        assert set(bound) <= names, sorted(set(bound) - names)
        used = {n for n in names if any(re.search(rf"(?<![\w.]){n}\b", t) for t in texts)}
        assert used <= set(bound), f"read by a rule but not bound in common.smk: {sorted(used - set(bound))}"