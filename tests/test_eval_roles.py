"""Evaluation cost at paper scale, as the plan sets it: samples per problem by a run's role
(eval.samples_per_role) in rule evaluate's params, and the time budget an evaluation job stops
in under Slurm (then exit 75, and the rule's own retries resume it)."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from nudgerl.evaluation.benchmarks import BUDGET_VAR
from nudgerl.plan.arguments import EVAL_EXCLUDE
from nudgerl.method_ids import role_samples
from nudgerl.plan.resources import EVAL_STOP_BEFORE_LIMIT_S, eval_time_budget
from nudgerl.plan.workflow_plan import WorkflowPlan

from conftest import REPO, merged_config


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the plan reads dvc.yaml / params.yaml of the workflow root


def _eval_params(plan, method, seed=0, model=None):
    wildcards = {"method": method, "seed": str(seed), **({"model": model} if model else {})}
    w = SimpleNamespace(**wildcards, items=lambda: wildcards.items())
    return json.loads(plan.arguments.eval_section(w))


def test_paper_roles_route_their_sample_counts_into_evaluate():
    cfg = merged_config("paper.yaml")
    counts = cfg["eval"]["samples_per_role"]
    plan = WorkflowPlan(cfg)
    m = plan.methods
    table1 = ["base", *m.GRPO_METHODS, m.POPE_METHOD, m.NUDGE_MAIN]
    expected = {**{r: "table1" for r in table1},
                **{r: "ablation" for r in m.NUDGE_RUNS if r != m.NUDGE_MAIN},
                **{r: "sweep" for r in m.EPS_RUNS}, **{r: "baseline" for r in m.BASELINES}}
    assert m.EVAL_ROLE == expected
    assert {"ablation", "sweep", "baseline"} <= set(expected.values())  # paper.yaml has runs of each
    model = cfg["models"][0]["name"]
    for method, role in expected.items():
        params = _eval_params(plan, method, model=model)
        assert params["samples_per_problem"] == counts[role], method
        assert "samples_per_role" not in params  # resolved: changing another role re-runs nothing here


def test_default_config_evaluates_every_run_at_one_count_with_unchanged_params():
    """config.yaml sets no roles: evaluate's params are the eval section as before (no re-run)."""
    cfg = merged_config()
    plan = WorkflowPlan(cfg)
    before = json.loads(plan.arguments.section("eval", exclude=("curve",)))
    for method in plan.methods.EVALUATED:
        assert _eval_params(plan, method) == before
    assert set(plan.methods.EVAL_SAMPLES.values()) == {cfg["eval"]["samples_per_problem"]}


def test_role_counts_are_checked_with_the_key_named():
    section = {"samples_per_problem": 128, "ks": [1, 16], "samples_per_role": {"ablation": 8}}
    with pytest.raises(ValueError, match=r"eval\.samples_per_role\.ablation.*pass@16"):
        role_samples(section, "ablation")
    assert role_samples(section, "sweep") == 128  # not listed: samples_per_problem
    with pytest.raises(ValueError, match=r"unknown role\(s\) \['table2'\]"):
        role_samples({**section, "samples_per_role": {"table2": 32}}, "table1")
    with pytest.raises(ValueError, match=r"eval\.samples_per_role\.sweep"):
        role_samples({**section, "samples_per_role": {"sweep": 0}}, "sweep")
    assert "samples_per_role" in EVAL_EXCLUDE  # no other rule re-runs when the roles change


def _run_launcher(launcher: str, slurm: bool) -> subprocess.CompletedProcess:
    """The launcher as rule evaluate's shell runs it, with a stand-in for `nudgerl` that prints
    the budget and whether it was asked for CUDA."""
    assert launcher.endswith("nudgerl")
    probe = (f"{sys.executable} -c \"import os; print(os.environ.get('{BUDGET_VAR}'), "
             "os.environ.get('NUDGERL_REQUIRE_CUDA'))\"")
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID", BUDGET_VAR, "NUDGERL_REQUIRE_CUDA")}
    if slurm:
        env["SLURM_JOB_ID"] = "1"
    return subprocess.run(["bash", "-c", f"set -euo pipefail; HF_HUB_OFFLINE=1 {launcher[:-len('nudgerl')]}{probe}"],
                          env=env, capture_output=True, text=True)


def test_evaluation_under_slurm_gets_a_time_budget_before_its_limit():
    plan = WorkflowPlan(merged_config("paper.yaml"))
    runtime = plan.config["resources"]["runtime"]["evaluate"]
    gpu_job = SimpleNamespace(gpu=1, runtime=runtime)
    launcher = plan.resources.eval_launcher(None, gpu_job)
    in_slurm = _run_launcher(launcher, slurm=True)
    assert in_slurm.returncode == 0, in_slurm.stderr
    assert in_slurm.stdout.split() == [str(runtime * 60 - EVAL_STOP_BEFORE_LIMIT_S), "1"]
    local = _run_launcher(launcher, slurm=False)  # no Slurm job: no time limit to stop before
    assert local.returncode == 0, local.stderr
    assert local.stdout.split() == ["None", "1"]
    cpu_job = _run_launcher(plan.resources.eval_launcher(None, SimpleNamespace(gpu=0, runtime=runtime)), slurm=True)
    assert cpu_job.stdout.split() == [str(runtime * 60 - EVAL_STOP_BEFORE_LIMIT_S), "None"]
    assert eval_time_budget(None) == "" and eval_time_budget(5) == ""  # no runtime, or shorter than the lead
    assert plan.resources.EVAL_RETRIES >= 1  # the planned stop is resumed by a retry at paper scale


def test_plan_cost_prices_each_evaluation_at_its_roles_count_and_chains_it_over_retries():
    from nudgerl.reporting import gpu_hours as cost

    config = {"models": [{"name": "m", "path": "Qwen/Qwen3-4B-Instruct-2507"}],
              "grpo": {"group_sizes": [8], "max_steps": 10}, "nudgerl": {"M": 2, "K": 4},
              "eval": {"samples_per_problem": 8, "ks": [1], "max_new_tokens": 1000, "batch_size": 8,
                       "samples_per_role": {"ablation": 2}},
              "data": {"benchmarks": {"aime24": {}}}, "eval_retries": 2}
    gpu = cost.GPU("toy", memory_gb=100, bandwidth_tb_s=1.6, bf16_tflops=100)
    eff = cost.Efficiency(decode_bandwidth=0.5, job_start_s=0, completion_fill=0.5, prompt_tokens=100,
                          eval_memory_utilization=0.5)

    def job(method, runtime=600):
        return cost.job_cost({"rule": "evaluate", "wildcards": {"model": "m", "seed": "0", "method": method},
                              "resources": {"gpu": "1", "runtime": str(runtime)}}, config, gpu, eff)

    main, ablation = job("nudgerl8"), job("nudgerl8_pdrop0.25")
    assert main.tokens == 30 * 8 * 500 and ablation.tokens == 30 * 2 * 500  # AIME24's 30 problems
    assert ablation.hours == pytest.approx(main.hours / 4)
    assert main.chain == 1 and main.allowed == 3 and main.fits
    # 30 x 8 x 500 tokens at 8 x 100 tokens/s = 150 s; jobs of 11 min sample for 1 min each
    short = job("nudgerl8", runtime=11)
    assert short.chain == 3 and short.fits
    assert not job("grpo8", runtime=10.5).fits  # 30 s a job: 5 jobs, 3 allowed


def _problems(root, method, bench, cs, n):
    d = root / method / "seed0"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{bench}.problems.jsonl").write_text(
        "".join(json.dumps({"id": f"{bench}-{i}", "n": n, "c": int(c)}) + "\n" for i, c in enumerate(cs)))


def test_an_ablation_table_caption_names_each_rows_sample_count(tmp_path):
    import pandas as pd

    from nudgerl.reporting.tables import samples_phrase, write_table

    for method, n in [("nudgerl8", 128), ("nudgerl8_pdrop0.25", 32), ("nudgerl8_pdrop0.75", 32), ("grpo8", 128)]:
        _problems(tmp_path, method, "aime24", [n // 2, n // 4, 0, n], n)
    paths = write_table(tmp_path, ["nudgerl8_pdrop0.25", "nudgerl8", "nudgerl8_pdrop0.75"], ["aime24"], [0],
                        tmp_path / "t" / "ablation_pdrop", "Ablation: p_drop", n_boot=100, reference="grpo8",
                        labels=["p_drop = 0.25", "p_drop = 0.5", "p_drop = 0.75"])
    caption = paths[1].read_text().splitlines()[0]
    assert "32 samples per problem (128 for p_drop = 0.5)" in caption
    assert pd.read_csv(paths[0]).groupby("method")["samples"].first().to_dict() == {
        "nudgerl8": 128, "nudgerl8_pdrop0.25": 32, "nudgerl8_pdrop0.75": 32}
    assert samples_phrase({"a": 8, "b": 8}) == "8 samples per problem"  # one count: as before


def test_the_eps_high_figure_says_each_points_sample_count(tmp_path):
    from nudgerl.reporting import figures

    for method, n in [("grpo8", 128), ("grpo8_eps0.28", 32), ("grpo8_eps0.4", 32), ("nudgerl8", 128)]:
        for bench in ("aime24", "aime25"):
            _problems(tmp_path, method, bench, [n // 2] * 4, n)
    fig, data = figures.eps_high_scaling(tmp_path, [(0.4, "grpo8_eps0.4"), (0.2, "grpo8"), (0.28, "grpo8_eps0.28")],
                                         "nudgerl8", 0.2, ["aime24", "aime25"], [0], n_boot=100)
    assert data["series"][0]["samples_per_problem"] == [128, 32, 32]  # x sorted: 0.2, 0.28, 0.4
    assert data["reference"]["samples_per_problem"] == 128
    assert fig.legends[0].get_title().get_text() == data["samples"] == \
        "128 samples per problem (32 for eps_high=0.28, eps_high=0.4)"  # a tie: the larger count leads


def test_config_check_names_a_role_count_below_the_largest_k_and_the_schema_an_unknown_role():
    import copy

    from nudgerl.config import ConfigError, validate_config

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    validate_config(copy.deepcopy({**cfg, "eval": {**cfg["eval"], "samples_per_role": {"ablation": 8}}}))
    for roles, words in [({"ablation": 4}, ("eval.samples_per_role.ablation", "pass@8")),
                         ({"table2": 8}, ("samples_per_role", "table2"))]:
        with pytest.raises(ConfigError) as e:
            validate_config(copy.deepcopy({**cfg, "eval": {**cfg["eval"], "samples_per_role": roles}}))
        assert all(w in str(e.value) for w in words), str(e.value)
