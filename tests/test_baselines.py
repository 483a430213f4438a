"""The field's exploration fixes as methods of the matrix: their ids, config checks and plan."""

import copy

import yaml

from conftest import REPO, merged_config
from nudgerl.config import check_baselines, check_regime_map_methods
from nudgerl.method_ids import baseline_definitions, baseline_runs, trained_group_sizes
from nudgerl.plan.workflow_plan import WorkflowPlan
from nudgerl.reporting.tables import method_label

# the single-family matrix (GRPO at every N, the regime map the fixes also train in); the default's
# families task trains none of the fixes either
CONFIG = merged_config("single_family.yaml")


def _with(**baselines):
    cfg = copy.deepcopy(CONFIG)
    cfg["baselines"].update(baselines)
    return cfg


def test_baselines_are_defined_in_the_default_and_trained_only_where_seeded():
    assert list(baseline_definitions(CONFIG)) == ["dapo8", "drgrpo8", "gspo8", "cispo8", "entropy8", "ngrpo8", "passk8"]
    assert baseline_runs(CONFIG) == {} and ("train_baseline", 8) not in trained_group_sizes(CONFIG)
    cfg = _with(seeds=[0, 1])
    assert baseline_runs(cfg)["dapo8"] == {"loss_type": "dapo", "epsilon_high": 0.28, "mask_truncated_completions": True,
                                          "dynamic_sampling": "drop"}
    assert ("train_baseline", 8) in trained_group_sizes(cfg)
    assert check_baselines(CONFIG) == [] and check_baselines(cfg) == []


def test_plan_runs_the_baselines_on_their_seeds_beside_grpo_and_nudgerl():
    plan = WorkflowPlan(_with(seeds=[0, 1]))
    m = plan.methods
    assert m.BASELINE_TABLE_METHODS == ["grpo8", "grpo32", "nudgerl8", *baseline_definitions(CONFIG)]
    assert m.RUN_SEEDS["ngrpo8"] == [0, 1] and m.RUN_SEEDS["grpo64"] == CONFIG["seeds"]
    assert "ngrpo8" in m.EVALUATED and "ngrpo8" not in m.METHODS  # not a Table 1 row
    section = yaml.safe_load(plan.arguments.baseline_section(type("W", (), {"method": "cispo8"})()))
    assert section["loss_type"] == "cispo" and section["epsilon_high"] == 5.0
    assert section["max_steps"] == CONFIG["grpo"]["max_steps"]  # GRPO's steps
    assert f"{plan.paths.RESULTS}/tables/baselines.md" in plan.final_outputs()
    assert not any("baselines" in f for f in WorkflowPlan(CONFIG).final_outputs())


def test_a_baseline_may_change_the_loss_not_the_batching_and_needs_a_clear_name():
    cfg = _with(seeds=[0, 5], methods={"grpox": {"max_steps": 80}, "fast": {"lerning_rate": 1.0},
                                       "bad": {"loss_type": 3}})
    problems = " | ".join(check_baselines(cfg))
    assert "'baselines.seeds': [5] not in 'seeds'" in problems
    assert "'baselines.methods.grpox': a baseline's name may not start with" in problems
    assert "'baselines.methods.grpox': ['max_steps'] may not differ from GRPO's" in problems
    assert "'baselines.methods.fast': ['lerning_rate'] are not keys of the 'grpo' section" in problems
    assert "'baselines.methods.bad.loss_type'" in problems


def test_the_regime_map_trains_grpo_nudgerl_or_a_defined_baseline():
    cfg = copy.deepcopy(CONFIG)
    cfg["regime_map"]["methods"] = ["grpo8", "nudgerl8", "dapo8", "ppo8"]
    assert check_regime_map_methods(cfg) == [
        "config key 'regime_map.methods': ['ppo8'] are neither grpo<N>, nudgerl<N> nor a baseline of 'baselines.methods' "
        "(dapo8, drgrpo8, gspo8, cispo8, entropy8, ngrpo8, passk8)"]
    cfg["regime_map"]["baselines"] = {"methods": ["dapo8", "sac8"], "seeds": [0, 9], "shares": [0.03, 0.05]}
    assert check_regime_map_methods(cfg)[1:] == [
        "config key 'regime_map.baselines.methods': ['sac8'] are not baselines of 'baselines.methods' "
        "(dapo8, drgrpo8, gspo8, cispo8, entropy8, ngrpo8, passk8)",
        "config key 'regime_map.baselines.seeds': [9] not in 'regime_map.seeds' [0, 1, 2] (the baselines pair "
        "with the map's runs on the same base models)",
        "config key 'regime_map.baselines.shares': [0.05] not in 'regime_map.shares' [0.003, 0.01, 0.03, 0.1] "
        "(the baselines pair with the map's runs in the same cells)"]
    cfg["regime_map"]["methods"] = ["grpo8", "nudgerl8", "dapo8"]
    cfg["regime_map"]["baselines"] = {"methods": ["dapo8", "ngrpo8"], "seeds": [1]}
    plan = WorkflowPlan(cfg)
    grid = yaml.safe_load(plan.regime_map.regime_map_baselines_grid_section())
    assert grid["methods"] == ["grpo8", "nudgerl8", "dapo8", "ngrpo8"] and grid["seeds"] == [1]
    # without `shares`, every cell of the map; with it, those cells only
    assert grid["shares"] == [0.003, 0.01, 0.03, 0.1] and len(plan.regime_map.RMAP_BASELINE_CELLS) == 4
    cfg["regime_map"]["baselines"]["shares"] = [0.1]
    plan = WorkflowPlan(cfg)
    grid = yaml.safe_load(plan.regime_map.regime_map_baselines_grid_section())
    assert grid["shares"] == [0.1] and plan.regime_map.RMAP_BASELINE_CELLS == ["share0.1"]
    assert grid["against"] == ["dapo8", "ngrpo8"] and plan.regime_map.RMAP_BASELINES == ["ngrpo8"]  # dapo8 runs already
    w = type("W", (), {"method": "gspo8"})()
    assert plan.regime_map.regime_map_train_command(w) == "train-grpo --num-generations 8"
    assert yaml.safe_load(plan.regime_map.regime_map_train_section(w))["importance_sampling_level"] == "sequence"
    grpo = yaml.safe_load(plan.regime_map.regime_map_train_section(type("W", (), {"method": "grpo8"})()))
    assert grpo.get("importance_sampling_level", "token") == "token"


def test_baselines_have_their_papers_names():
    assert [method_label(m) for m in ("dapo8", "drgrpo8", "entropy8", "passk8")] == \
        ["DAPO (N=8)", "Dr. GRPO (N=8)", "GRPO + entropy bonus (N=8)", "Pass@k training (N=8)"]
