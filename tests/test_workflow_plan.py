"""nudgerl.plan.workflow_plan: what the rules build, derived from a config without Snakemake.

The dry-run tests (test_paper_dag, test_smoke_dag) check the whole DAG; these pin the
derivations one by one: method ids, ablation and claim roles, paths, resources, arguments, and
the plan's layout (one module per concern, composed by WorkflowPlan).
"""

import copy
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from nudgerl.method_ids import grpo_group_size, nudge_group_size, trained_group_sizes
from nudgerl.plan.arguments import EVAL_EXCLUDE, GRPO_RUN_EXCLUDE, POPE_RUN_EXCLUDE, SAMPLING_KEYS
from nudgerl.plan.resources import GPU_TYPE_VAR, TRAIN_KILL_AFTER_S, TRAIN_STOP_BEFORE_LIMIT_S, time_budget
from nudgerl.plan.workflow_plan import WorkflowPlan

from conftest import REPO, merged_config


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the plan reads dvc.yaml / params.yaml of the workflow root


def test_default_paths_and_methods():
    cfg = merged_config()
    plan = WorkflowPlan(cfg)
    run = cfg["run_name"]
    assert plan.paths.RESULTS == plan.paths.SHARED == f"results/{run}"
    assert plan.paths.TRAIN == f"results/{run}/data/train.jsonl"
    assert plan.methods.GRPO_METHODS == [f"grpo{n}" for n in cfg["grpo"]["group_sizes"]]
    n = cfg["nudgerl"].get("M", 2) * cfg["nudgerl"].get("K", 4)
    assert plan.methods.NUDGE_MAIN == f"nudgerl{n}"
    assert plan.methods.METHODS == ["base", *plan.methods.GRPO_METHODS, plan.methods.POPE_METHOD, plan.methods.NUDGE_MAIN]
    assert plan.methods.REFERENCE == ("grpo8" if 8 in cfg["grpo"]["group_sizes"] else plan.methods.GRPO_METHODS[0])
    assert plan.methods.AA_REPEAT is None  # the default has no A/A pair (its budget); the single-family matrix has
    plan = WorkflowPlan(merged_config("single_family.yaml"))
    # Table 1 methods and the A/A repeat have every replicate; ablation runs only the ablation seeds
    assert plan.methods.AA_REPEAT == "grpo8_aa" and plan.methods.CLAIM_ROLES["aa"] == {
        "a": "grpo8", "b": "grpo8_aa", "seeds": plan.methods.SEEDS}
    for method, seeds in plan.methods.RUN_SEEDS.items():
        assert seeds == (plan.methods.SEEDS if method in [*plan.methods.METHODS, "grpo8_aa"]
                         else plan.methods.ABLATION_SEEDS)
    # the A/A repeat trains and samples with its replicate's seed moved by the offset
    assert plan.methods.run_seed(type("W", (), {"method": "grpo8_aa", "seed": "3"})) == 1003
    assert plan.methods.run_seed(type("W", (), {"method": "grpo8", "seed": "3"})) == 3
    assert "grpo8_aa" not in plan.methods.EVALUATED  # no method of the tables or figures


def test_ablations_register_runs_and_claim_roles():
    cfg = merged_config()
    cfg["nudgerl"]["ablations"] = {"p_drop": [0.0, 0.25], "hint_sampling": ["random"]}
    plan = WorkflowPlan(cfg)
    main = plan.methods.NUDGE_MAIN
    p_main = cfg["nudgerl"].get("p_drop", 0.5)
    methods = [m for m, _ in plan.methods.ABLATIONS["pdrop"]]
    assert main in methods and f"{main}_pdrop0.25" in methods and f"{main}_pdrop0" in methods
    assert plan.methods.NUDGE_RUNS[f"{main}_pdrop0.25"]["nudge"]["p_drop"] == 0.25
    # the setting equal to the main run's is the main run, not another run
    assert [p for p, m in plan.methods.CLAIM_ROLES["pdrop"] if m == main] == [p_main]
    assert plan.methods.ABLATIONS["hint_sampling"][0][0] == main
    assert plan.methods.CLAIM_ROLES["hint_sampling"]["random"] == f"{main}_random"
    assert "distill" not in plan.methods.ABLATIONS  # one value only: no table
    assert set(plan.methods.TRAINED) == {*plan.methods.GRPO_METHODS, *plan.methods.NUDGE_RUNS}


def test_top_ranked_ablation_reads_the_replicates_ranked_pools():
    cfg = merged_config()
    cfg["nudgerl"]["ablations"] = {"hint_sampling": ["top_ranked"]}
    plan = WorkflowPlan(cfg)
    run = plan.methods.NUDGE_RUNS[f"{plan.methods.NUDGE_MAIN}_topranked"]
    assert run["pools"] == plan.paths.RANKED_POOLS and "{seed}" in run["pools"]
    assert plan.methods.nudge_pools(SimpleNamespace(method=plan.methods.NUDGE_MAIN, items=lambda: {}.items())) == plan.paths.POOLS


def test_eps_sweep_main_value_is_the_main_run():
    cfg = merged_config()
    cfg["grpo"]["epsilon_high"] = 0.2
    cfg["grpo"]["epsilon_high_sweep"] = [0.2, 0.28]
    cfg["grpo"]["epsilon_high_sweep_group_size"] = cfg["grpo"]["group_sizes"][0]
    plan = WorkflowPlan(cfg)
    n = cfg["grpo"]["group_sizes"][0]
    assert plan.methods.EPS_SWEEP == [(0.2, f"grpo{n}"), (0.28, f"grpo{n}_eps0.28")]
    assert plan.methods.EPS_RUNS == [f"grpo{n}_eps0.28"]
    assert "eps_high_scaling" in plan.figure_names()


def test_resources_and_threads_from_config():
    cfg = merged_config()
    cfg["threads_per_job"] = 3
    cfg["resources"] = {"mem_mb": {"evaluate": 9000}, "threads": {"evaluate": 5}}
    plan = WorkflowPlan(cfg)
    assert plan.resources.rule_resources("evaluate", mem_mb=2000, runtime=10) == {"mem_mb": 9000, "runtime": 10}
    assert plan.resources.rule_resources("train_grpo", mem_mb=2000) == {"mem_mb": 2000}
    assert plan.resources.rule_threads("evaluate") == 5 and plan.resources.rule_threads("train_grpo") == 3


def test_section_leaves_out_other_rules_keys():
    plan = WorkflowPlan(merged_config())
    assert "curve" not in yaml.safe_load(plan.arguments.section("eval", exclude=EVAL_EXCLUDE, seed=1))
    grpo = yaml.safe_load(plan.arguments.section("grpo", exclude=GRPO_RUN_EXCLUDE))
    assert not set(GRPO_RUN_EXCLUDE) & set(grpo)


def test_the_drill_reads_no_sft_setting_so_the_regime_map_shares_it():
    plan = WorkflowPlan(merged_config())
    drill = yaml.safe_load(plan.arguments.drill_section())
    assert drill and set(drill) <= set(plan.config["base_model"])
    assert "unhinted_strategy_weights" not in drill and "examples" not in drill
    shares = plan.config["regime_map"]["shares"]
    cells = [plan.regime_map.regime_map_base_config(share) for share in shares]
    assert all({k: cell[k] for k in drill} == drill for cell in cells)  # every cell: the same drill
    assert len({str(cell["unhinted_strategy_weights"]) for cell in cells}) == len(shares)  # other SFT mixtures


def test_launcher_uses_accelerate_for_more_than_one_gpu():
    plan = WorkflowPlan(merged_config())
    assert plan.resources.launcher(None, SimpleNamespace(gpu=0)) == "nudgerl"  # CPU training: no CUDA check
    assert plan.resources.launcher(None, SimpleNamespace(gpu=1)) == "NUDGERL_REQUIRE_CUDA=1 nudgerl"
    cmd = plan.resources.launcher(None, SimpleNamespace(gpu=4))
    assert cmd.startswith("NUDGERL_REQUIRE_CUDA=1 ") and "accelerate launch" in cmd
    # a free rendezvous port (accelerate picks one for 0): two such jobs on one node do not collide
    assert "--num_processes 4 --main_process_port 0 -m nudgerl.cli" in cmd
    # but not on CPU processes: accelerate hands a CPU config's port to gloo as it is (0: no rendezvous)
    cpu = WorkflowPlan({**merged_config(), "accelerate": {"config_file": "workflow/accelerate/multi_cpu.yaml"}})
    assert "--main_process_port" not in cpu.resources.launcher(None, SimpleNamespace(gpu=2))
    # evaluation never runs one process per GPU (vLLM's tensor parallelism spans them)
    assert plan.resources.inference_launcher(None, SimpleNamespace(gpu=4)) == "NUDGERL_REQUIRE_CUDA=1 nudgerl"
    assert plan.resources.inference_launcher(None, SimpleNamespace(gpu=0)) == "nudgerl"


def test_gpu_type_comes_from_the_environment_for_gpu_rules_only(monkeypatch):
    cfg = merged_config()
    cfg["resources"] = {"gpu": {"train_grpo": 1, "evaluate": 2}, "gpu_model": {"evaluate": "a100"}}
    plan = WorkflowPlan(cfg)
    monkeypatch.delenv(GPU_TYPE_VAR, raising=False)
    assert "gpu_model" not in plan.resources.rule_resources("train_grpo")  # plain count: --gpus=1
    monkeypatch.setenv(GPU_TYPE_VAR, "")
    assert "gpu_model" not in plan.resources.rule_resources("train_grpo")
    monkeypatch.setenv(GPU_TYPE_VAR, "h200_nvl")
    assert plan.resources.rule_resources("train_grpo") == {"gpu": 1, "gpu_model": "h200_nvl"}
    assert plan.resources.rule_resources("evaluate")["gpu_model"] == "a100"  # the config's own per-rule model wins
    assert "gpu_model" not in plan.resources.rule_resources("rank_hints", mem_mb=2000)  # no GPU: no type
    monkeypatch.setenv(GPU_TYPE_VAR, "nvidia_a100-sxm4-80gb")  # the plugin rejects '-' at submit time
    with pytest.raises(ValueError, match="NUDGERL_SLURM_GPU_TYPE='nvidia_a100-sxm4-80gb'"):
        plan.resources.rule_resources("train_grpo")


def test_training_under_slurm_stops_itself_before_the_time_limit(tmp_path):
    """The time budget prefix, run by bash as Snakemake runs a rule's shell: inside a Slurm job
    the trainer gets SIGUSR1 when the budget is spent and its exit code is kept; outside Slurm
    (no SLURM_JOB_ID) nothing limits it. A stand-in trainer that saves and exits 75 on SIGUSR1,
    with a 1-minute runtime and a 45 s lead (a 15 s budget). It writes ``ready`` once its handler
    is installed: a signal that came before (its interpreter had not started: twice in CI, at 3 s
    and at 15 s, while the other test worker loaded the machine) says nothing about the prefix,
    so that run is repeated once with a 30 s budget; after a ready stand-in, anything but the
    saved exit fails."""
    import subprocess
    import time

    trainer = tmp_path / "trainer.py"
    trainer.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (open(sys.argv[1], 'w').write('saved'), sys.exit(75)))\n"
        "open(sys.argv[1] + '.ready', 'w').close()\n"
        "time.sleep(float(sys.argv[2]))\n")
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    for lead_s in (45, 30):
        prefix = time_budget(1, stop_before_s=lead_s, kill_after_s=5)
        budget = 60 - lead_s
        assert prefix.startswith(f"${{SLURM_JOB_ID:+timeout --preserve-status --signal=USR1 --kill-after=5 {budget}}}")
        out = tmp_path / f"a{lead_s}"
        t0 = time.monotonic()
        in_slurm = subprocess.run(["bash", "-c", f"set -euo pipefail; {prefix}python {trainer} {out} 120"],
                                  env={**env, "SLURM_JOB_ID": "1"})
        elapsed = time.monotonic() - t0
        if Path(f"{out}.ready").exists():
            break
    assert Path(f"{out}.ready").exists(), "the stand-in never started within a 30 s budget"
    assert in_slurm.returncode == 75 and out.read_text() == "saved"
    assert budget - 0.5 < elapsed < 100  # stopped at the budget, long before its 120 s sleep ends
    local = subprocess.run(["bash", "-c", f"set -euo pipefail; {prefix}python {trainer} {tmp_path}/b 5"], env=env)
    assert local.returncode == 0 and not (tmp_path / "b").exists()
    assert time_budget(None) == "" and time_budget(20) == ""  # no runtime, or one shorter than the lead
    assert time_budget(720).endswith(f"--kill-after={TRAIN_KILL_AFTER_S} {720 * 60 - TRAIN_STOP_BEFORE_LIMIT_S}}} ")


def test_organism_outputs_and_base_model_arguments():
    plan = WorkflowPlan(merged_config("smoke.yaml"))
    outputs = plan.final_outputs()
    assert f"{plan.paths.RESULTS}/tables/table1.csv" in outputs and f"{plan.paths.RESULTS}/audit/audit.txt" in outputs
    assert all("{" not in f for f in outputs)
    w = SimpleNamespace(seed="1", method="base")
    assert plan.paths.model_dir(w) == plan.paths.base_model_arg(w) == plan.paths.BASE_MODEL.format(seed=1)
    assert plan.paths.regime_input(w) == f"{plan.paths.DIAGNOSIS}.regime.json".format(seed=1)


def test_replicates_can_start_from_one_base_model():
    """base_model_seed: every replicate's RL, ranking and base evaluation read that seed's base
    model and wait for its regime verdict; its diagnosis is the only one the run makes."""
    cfg = copy.deepcopy(merged_config("smoke.yaml"))
    cfg["base_model_seed"] = 7
    plan = WorkflowPlan(cfg)
    for seed in cfg["seeds"]:
        w = SimpleNamespace(seed=str(seed), method="base")
        assert plan.paths.model_dir(w) == plan.paths.base_model_arg(w) == plan.paths.BASE_MODEL.format(seed=7)
        assert plan.paths.regime_input(w) == f"{plan.paths.DIAGNOSIS}.regime.json".format(seed=7)
    assert plan.paths.base_seeds(cfg["seeds"]) == plan.methods.BASE_SEEDS == [7]
    # the tables' captions say so (`table --base-model-seed`), not "each its own base model"
    assert plan.arguments.table_base_model_arg() == "--base-model-seed 7"
    diagnoses = [f for f in plan.result_outputs() if "/diagnostics/base_model/" in f]
    assert diagnoses and all(f.split("/")[-1].startswith("seed7.") for f in diagnoses)
    unset = WorkflowPlan(merged_config("smoke.yaml"))
    assert unset.paths.base_seeds(cfg["seeds"]) == list(cfg["seeds"])
    assert unset.arguments.table_base_model_arg() == ""


def test_math_task_runs_per_model():
    plan = WorkflowPlan(merged_config("smollm2.yaml"))
    assert plan.paths.TASK == "math" and plan.paths.RESULTS == f"{plan.paths.SHARED}/{{model}}"
    outputs = plan.final_outputs()
    for name in plan.paths.MODELS:
        assert f"{plan.paths.SHARED}/{name}/tables/table1.csv" in outputs
    assert plan.paths.regime_input(SimpleNamespace(seed="0")) == []


def test_a_model_named_like_a_shared_folder_is_refused():
    cfg = merged_config("smollm2.yaml")
    cfg = copy.deepcopy(cfg)
    cfg["models"][0]["name"] = "pools"
    with pytest.raises(ValueError, match="rename the model"):
        WorkflowPlan(cfg)


def test_every_plan_name_a_rule_reads_is_bound_where_grep_finds_it():
    """workflow/rules/common.smk binds what the rules read of the plan one name per line
    (`NAME = PLAN.<part>.NAME`, or `PLAN.NAME` for the plan's own), never by injecting the plan's
    attributes wholesale: a reader of a rule file greps a name to its line, and the line names the
    part that defines it. Every plan attribute or method a rule file or the Snakefile mentions is
    bound there, and every binding names a real attribute of the part it names."""
    import re

    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    found = re.findall(r"^(\w+) = PLAN\.(?:(\w+)\.)?(\w+)(?:  # .*)?$", common, re.M)
    assert found and all(name == attr for name, _, attr in found)
    bound = {name: part for name, part, _ in found}
    rule_files = [p for p in (REPO / "workflow" / "rules").glob("*.smk") if p.name != "common.smk"]
    texts = [p.read_text() for p in [*rule_files, REPO / "Snakefile"]]
    assert not [p for p in [*rule_files, REPO / "workflow" / "rules" / "common.smk"] if "globals()" in p.read_text()]
    for cfg in (merged_config(), merged_config("smollm2.yaml"), merged_config("paper.yaml")):
        plan = WorkflowPlan(cfg)
        owners = _public_names(plan)
        for name, part in bound.items():
            assert owners.get(name) == (part or None), f"{name}: bound from {part or 'the plan'}, defined in {owners.get(name)}"
        used = {n for n in owners if any(re.search(rf"(?<![\w.]){n}\b", t) for t in texts)}
        assert used <= set(bound), f"read by a rule but not bound in common.smk: {sorted(used - set(bound))}"


PARTS = ("paths", "methods", "regime_map", "study", "resources", "arguments")


def _public(obj) -> set[str]:
    return {n for n in [*vars(obj), *dir(type(obj))] if not n.startswith("_") and n != "config"}


def _public_names(plan) -> dict[str, str | None]:
    """Every public name of the plan's parts -> the part; the plan's own -> None. No two share one."""
    owners = {n: None for n in _public(plan) - set(PARTS)}
    for part_name in PARTS:
        for name in _public(getattr(plan, part_name)):
            assert name not in owners, f"{name}: in {owners.get(name) or 'the plan'} and {part_name}"
            owners[name] = part_name
    return owners


def test_the_plan_composes_one_part_per_concern():
    """Each part (nudgerl.plan_*) owns its names and no two parts define the same name; each
    module stays small (one concern)."""
    plan = WorkflowPlan(merged_config("paper.yaml"))
    assert _public(plan) >= set(PARTS)
    owners = _public_names(plan)
    assert {owners[n] for n in ("SHARED", "NUDGE_MAIN", "RMAP", "launcher", "section")} == \
        {"paths", "methods", "regime_map", "resources", "arguments"}
    src = REPO / "src" / "nudgerl"
    for module in [src / "method_ids.py", *(src / "plan").glob("*.py")]:
        assert len(module.read_text().splitlines()) <= 300, module


def test_config_checks_and_plan_share_one_definition_of_the_method_ids():
    """nudgerl.config's batch-shape check and the plan derive the trained runs' N from
    nudgerl.method_ids; config.py sits below the plan and must not import it."""
    import ast

    for cfg in (merged_config(), merged_config("smoke.yaml"), merged_config("paper.yaml"), merged_config("smollm2.yaml")):
        plan = WorkflowPlan(cfg)
        sizes = trained_group_sizes(cfg)
        assert sorted(n for rule, n in sizes if rule == "train_grpo") == sorted(
            {grpo_group_size(m) for m in plan.methods.GRPO_METHODS})
        assert [n for rule, n in sizes if rule == "train_nudgerl"] == [nudge_group_size(plan.methods.NUDGE)]
        assert plan.methods.NUDGE_MAIN == f"nudgerl{nudge_group_size(plan.methods.NUDGE)}"
        pope = [n for rule, n in sizes if rule == "train_pope"]
        assert pope in ([], [int(plan.methods.POPE_METHOD[4:])])
        eps = [n for rule, n in sizes if rule == "train_grpo_eps"]
        assert eps == ([plan.methods.EPS_N] if plan.methods.EPS_SWEEP else [])
        assert all(grpo_group_size(m) == plan.methods.EPS_N for _, m in plan.methods.EPS_SWEEP if "_eps" not in m)
    for module, forbidden in (("config.py", "nudgerl.plan.workflow_plan"), ("method_ids.py", "nudgerl.")):
        tree = ast.parse((REPO / "src" / "nudgerl" / module).read_text())
        imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m.startswith(forbidden) and m != "nudgerl.method_ids"], (module, imported)
    assert "nudgerl.method_ids" in (REPO / "src" / "nudgerl" / "config.py").read_text()


def test_roots_and_prefixes_are_what_the_rules_took_from_their_files():
    """The roots a command takes (eval, runs, results, the regime map's cells) are the folders
    the rules' input and output paths sit in, per model under task math."""
    for cfg, wildcards in ((merged_config(), {}), (merged_config("smollm2.yaml"), {"model": "m1"})):
        plan = WorkflowPlan(cfg)
        w = SimpleNamespace(**wildcards, items=lambda d=wildcards: d.items())
        results = plan.paths.RESULTS.format(**wildcards)
        summary = f"{results}/eval/grpo8/seed0/summary.json"
        metrics = f"{results}/runs/grpo8/seed0/metrics.jsonl"
        assert plan.paths.eval_root(w) == os.path.dirname(os.path.dirname(os.path.dirname(summary)))
        assert plan.paths.runs_root(w) == os.path.dirname(os.path.dirname(os.path.dirname(metrics)))
        assert plan.paths.results_root(w) == os.path.dirname(os.path.dirname(f"{results}/tables/compute.csv")) == results
        assert "{" not in plan.paths.eval_root(w) + plan.paths.runs_root(w) + plan.paths.results_root(w)
    plan = WorkflowPlan(merged_config("single_family.yaml"))  # the regime map's task
    diagnosis = plan.regime_map.RMAP_CELL.format(cell="share0.5") + "/diagnostics/seed0.json"
    assert plan.regime_map.regime_map_root(SimpleNamespace(items=lambda: {}.items())) == \
        os.path.dirname(os.path.dirname(os.path.dirname(diagnosis)))
    files = SimpleNamespace(metrics="a/b/metrics.jsonl", png="f/x.png", csv="t/y.csv")
    assert plan.paths.output_run_dir(None, files) == plan.paths.input_run_dir(None, files) == "a/b"
    assert plan.paths.figure_prefix(None, files) == "f/x" and plan.paths.table_prefix(None, files) == "t/y"


def test_sections_a_rule_passes_as_json():
    cfg = merged_config("single_family.yaml")  # the regime map's task
    cfg["pope"] = {**cfg.get("pope", {}), "num_generations": 8, "oracle_stage": "oracles_organism", "guide": 1}
    cfg["report"] = {**cfg.get("report", {}), "case_study": {"samples": 32}}
    cfg["nudgerl"]["ablations"] = {"p_drop": [0.25]}
    plan = WorkflowPlan(cfg)
    pope = yaml.safe_load(plan.arguments.pope_section())
    assert pope["guide"] == 1 and not set(POPE_RUN_EXCLUDE) & set(pope)
    run = f"{plan.methods.NUDGE_MAIN}_pdrop0.25"
    assert yaml.safe_load(plan.arguments.nudge_section(SimpleNamespace(method=run))) == plan.methods.NUDGE_RUNS[run]["nudge"]
    case = yaml.safe_load(plan.arguments.sampling_section("case_study"))
    assert case["samples"] == 32 and set(case) - {"samples"} <= set(SAMPLING_KEYS)
    assert yaml.safe_load(plan.arguments.nudge_shape_section()) == {"M": plan.methods.NUDGE.get("M", 2), "K": plan.methods.NUDGE.get("K", 4)}
    eps = yaml.safe_load(plan.arguments.grpo_eps_section(SimpleNamespace(eps="0.28")))
    assert eps["epsilon_high"] == 0.28 and not set(GRPO_RUN_EXCLUDE) & set(eps)
    assert yaml.safe_load(plan.arguments.run_seeds_section()) == plan.methods.RUN_SEEDS
    assert yaml.safe_load(plan.arguments.claim_roles_section())["nudgerl"] == plan.methods.NUDGE_MAIN
    curve = yaml.safe_load(plan.regime_map.regime_map_curve_section())
    assert curve["curve"] == {"every": plan.regime_map.RMAP["every"], "samples": plan.regime_map.RMAP["samples"]}
    assert yaml.safe_load(plan.regime_map.regime_map_grid_section()) == plan.regime_map.RMAP_GRID
    share = plan.regime_map.RMAP["shares"][0]
    assert yaml.safe_load(plan.regime_map.regime_map_base_section(SimpleNamespace(cell=f"share{share:g}"))) == \
        plan.regime_map.regime_map_base_config(float(share))
    # the second axis' cells: the same mixture, and the accuracy of the unhinted always-right traces
    accuracy_cell = yaml.safe_load(plan.regime_map.regime_map_base_section(SimpleNamespace(cell=f"share{share:g}_accuracy0.2")))
    assert accuracy_cell == {**plan.regime_map.regime_map_base_config(float(share)), "unhinted_rare_accuracy": 0.2}


def test_study_judges_the_claims_again_in_the_maps_common_cell():
    """The study evaluates the common cell's runs on the benchmarks and judges there the claims its
    runs allow (1 and 8); the default has no second regime and its claims command is unchanged."""
    assert WorkflowPlan(merged_config()).study.study_claim_args() == ""
    assert WorkflowPlan(merged_config("single_family.yaml")).study.study_claim_args() == ""
    plan = WorkflowPlan(merged_config("single_family.yaml", "study.yaml")).study
    assert plan.STUDY_CLAIM_CELLS == ["share0.03"]
    roles = plan.study_cell_roles("share0.03")
    assert roles["grpo"] == {"8": "grpo8", "32": "grpo32"} and roles["pope"] is None
    assert roles["seeds"] == list(range(8)) and roles["baseline_seeds"] == [0, 1, 2]
    assert "ngrpo8" in roles["baselines"] and "grpo8" not in roles["baselines"]
    runs = plan.study_cell_runs("share0.03")
    assert runs["nudgerl8"] == list(range(8)) and runs["grpo32"] == list(range(8)) and runs["dapo8"] == [0, 1, 2]
    assert runs["grpo8"] == [0, 1, 2]  # the fixes' table's reference, not a claim's
    inputs = plan.study_claim_inputs()
    assert "results/study/diagnostics/base_models.csv" in inputs
    assert "results/study/regime_map/share0.03/diagnostics/seed7.json" in inputs
    assert "results/study/regime_map/share0.03/eval/grpo32/seed7/summary.json" in inputs
    args = plan.study_claim_args()
    assert args.startswith("--regime 'rare (the study") and "common (regime map, SFT share 3 %)" in args
    assert plan.study_cell_baseline_tables()[0] == "results/study/tables/baselines_share0.03.csv"


def test_the_study_target_without_the_study_names_its_configfile():
    """`snakemake study` outside config/study.yaml: the `study` rule's input stops the DAG with
    the command to use (study.smk), instead of Snakemake's "No rule to produce study"."""
    from nudgerl.config import ConfigError

    with pytest.raises(ConfigError, match=r"target `study` needs --configfile config/single_family\.yaml "
                                          r"config/study\.yaml \(this configuration has no `study` section\): "
                                          r"snakemake study --cores 2 --configfile config/single_family\.yaml "
                                          r"config/study\.yaml"):
        WorkflowPlan(merged_config("single_family.yaml")).study.study_needs_its_config()
    # the default's families task: the study holds the regime map, the single-family task's
    with pytest.raises(ConfigError, match=r"base_model\.task: families; the study's regime map varies"):
        WorkflowPlan(merged_config("study.yaml")).study.study_needs_its_config()
    from nudgerl.plan.regime_map import SINGLE_FAMILY_CONFIG

    with pytest.raises(ConfigError, match=rf"target `regime_map` needs --configfile {SINGLE_FAMILY_CONFIG} "
                                          r"\(base_model\.task: families;"):
        WorkflowPlan(merged_config()).regime_map.regime_map_needs_single_family()
    assert WorkflowPlan(merged_config()).regime_map.RMAP is None
    assert WorkflowPlan(merged_config("single_family.yaml")).regime_map.RMAP == merged_config()["regime_map"]
    with pytest.raises(ConfigError, match=r"task: math; the study is organism only"):
        WorkflowPlan(merged_config("paper.yaml")).study.study_needs_its_config()
