"""The regime gate: a base model outside the configured regime stops the DAG before any RL job.
Each figure is judged with its interval: it fails only when the whole interval lies outside its
bound, and the message names the figure, its value, interval and bound."""

import json
import subprocess

import pytest

from nudgerl.evaluation.regime import RegimeError, check, gate, replicate_markdown, replicate_table

BOUNDS = {"hinted_rare_pass@1_hard": {"min": 0.8}, "unhinted_pass@1_hard": {"max": 0.15},
          "rare_strategy_share_unhinted": {"min": 0.02, "max": 0.08},
          "rare_strategy_accuracy_unhinted": {"min": 0.8}}
PROBLEMS = 100  # hard training problems, 16 samples each


def _counts(rate: float, n: int = 16) -> list[list[int]]:
    """Per-problem counts whose pooled proportion is ``rate`` (spread evenly over problems)."""
    total = round(rate * n * PROBLEMS)
    return [[total // PROBLEMS + (1 if i < total % PROBLEMS else 0), n] for i in range(PROBLEMS)]


def _diagnosis(tmp_path, **rates):
    base = {"hinted_rare_pass@1_hard": 0.95, "unhinted_pass@1_hard": 0.03, "rare_strategy_share_unhinted": 0.03,
            "rare_strategy_accuracy_unhinted": 0.97}
    counts = {k: _counts(v) for k, v in {**base, **rates}.items()}
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps({"seed": 0, "summary": {"rare_strategy_share_unhinted": 0.03},
                                "rl_prompts": {"problems": [f"p{i}" for i in range(PROBLEMS)], "samples_per_problem": 16,
                                               "sampler": {"temperature": 1.0}, "counts": counts},
                                "sft": {"steps": 600, "passed_at_step": 450, "threads": 1}}))
    return path


def test_in_regime_passes_and_records_value_interval_and_margin(tmp_path):
    verdict = gate(_diagnosis(tmp_path), {"gate": True, "bounds": BOUNDS}, tmp_path / "seed0.regime.json")
    assert verdict["in_regime"] and all(r["ok"] for r in verdict["figures"])
    saved = json.loads((tmp_path / "seed0.regime.json").read_text())
    row = {r["figure"]: r for r in saved["figures"]}["hinted_rare_pass@1_hard"]
    assert row["low"] < row["value"] < row["high"] and row["value"] == pytest.approx(0.95) and row["min"] == 0.8
    assert row["k"] == 1520 and row["n"] == 1600 and row["margin_se"] > 3
    df = replicate_table([tmp_path / "seed0.regime.json"])
    assert df.loc[0, "sft_check_passed_at"] == 450 and bool(df.loc[0, "in_regime"])
    assert "0.950 [" in replicate_markdown(df)
    assert "| 600 | 450 | yes |" in replicate_markdown(df)


def test_a_base_model_kept_from_a_later_attempt_says_so_in_the_table(tmp_path):
    path = _diagnosis(tmp_path)
    d = json.loads(path.read_text())
    d["sft"].update(attempts=2, model_seed=1000000)
    path.write_text(json.dumps(d))
    gate(path, {"gate": True, "bounds": BOUNDS}, tmp_path / "seed0.regime.json")
    df = replicate_table([tmp_path / "seed0.regime.json"])
    assert df.loc[0, "sft_attempts"] == 2 and "| 600 | 450 (attempt 2) | yes |" in replicate_markdown(df)


def test_a_measurement_whose_interval_reaches_the_bound_passes(tmp_path):
    # the case that stopped a first command: 0.0187 against a bound of 0.02, a third of a
    # standard error away; the interval reaches the bound, so the gate lets it through
    verdict = gate(_diagnosis(tmp_path, rare_strategy_share_unhinted=0.0187), {"gate": True, "bounds": BOUNDS},
                   tmp_path / "out.json")
    row = {r["figure"]: r for r in verdict["figures"]}["rare_strategy_share_unhinted"]
    assert row["value"] < 0.02 < row["high"] and row["ok"] and -1.96 < row["margin_se"] < 0


@pytest.mark.parametrize("figure,rate,bound", [
    ("hinted_rare_pass@1_hard", 0.10, ">= 0.8"),  # a broken base model, met before
    ("rare_strategy_accuracy_unhinted", 0.19, ">= 0.8"),  # rare and wrong: RL has nothing to reinforce
    ("rare_strategy_share_unhinted", 0.005, ">= 0.02 and <= 0.08"),
    ("unhinted_pass@1_hard", 0.4, "<= 0.15"),
])
def test_out_of_regime_names_figure_value_interval_and_bound(tmp_path, figure, rate, bound):
    with pytest.raises(RegimeError) as err:
        gate(_diagnosis(tmp_path, **{figure: rate}), {"gate": True, "bounds": BOUNDS}, tmp_path / "out.json")
    msg = str(err.value)
    assert f"{figure} = {rate:.4f} [" in msg and f"interval wholly outside its bound ({bound})" in msg
    assert "seed0.json" in msg  # which replicate's diagnosis
    assert len([r for r in json.loads((tmp_path / "out.json").read_text())["figures"] if not r["ok"]]) == 1


def test_gate_off_reports_and_carries_on(tmp_path):
    verdict = gate(_diagnosis(tmp_path), {"gate": False, "bounds": {"hinted_rare_pass@1_hard": {"min": 0.99}}},
                   tmp_path / "out.json")
    assert verdict["in_regime"] is False and verdict["gate"] is False


def test_a_bounded_figure_without_samples_fails_an_unbounded_one_is_reported(tmp_path):
    rows = check({"rare_strategy_accuracy_chosen": [[0, 0], [0, 0]]}, {"rare_strategy_accuracy_chosen": {"min": 0.5}})
    assert rows[0]["value"] is None and not rows[0]["ok"]
    verdict = gate(_diagnosis(tmp_path), {"bounds": BOUNDS}, tmp_path / "out.json")
    chosen = {r["figure"]: r for r in verdict["figures"]}.get("rare_strategy_accuracy_chosen")
    assert verdict["in_regime"] and chosen is None  # not in this diagnosis's counts
    d = json.loads((tmp_path / "seed0.json").read_text())
    d["rl_prompts"]["counts"]["rare_strategy_accuracy_chosen"] = [[0, 0]] * PROBLEMS
    (tmp_path / "seed0.json").write_text(json.dumps(d))
    verdict = gate(tmp_path / "seed0.json", {"bounds": BOUNDS}, tmp_path / "out.json")
    chosen = {r["figure"]: r for r in verdict["figures"]}["rare_strategy_accuracy_chosen"]
    assert verdict["in_regime"] and chosen["ok"] and chosen["value"] is None and chosen["min"] is None


def test_unknown_figure_is_a_config_error():
    with pytest.raises(ValueError, match="regime.bounds.pass_at_1"):
        check({"pass_at_1": [[1, 2]]}, {"pass_at_1": {"min": 0.1}})


def test_a_diagnosis_without_the_training_problems_is_refused(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"seed": 0, "summary": {}}))
    with pytest.raises(ValueError, match="old.json: no 'rl_prompts' block"):
        gate(path, {"bounds": BOUNDS}, tmp_path / "out.json")


@pytest.mark.slow
def test_out_of_regime_base_model_stops_the_dag_before_any_training(workdir):
    # the smoke base model (1 layer, 12 SFT steps) cannot learn the difference table
    (workdir / "gate.yaml").write_text("regime:\n  gate: true\n")
    proc = subprocess.run(["snakemake", "--cores", "2", "--configfile", "config/smoke.yaml", "gate.yaml"],
                          cwd=workdir, capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "base model outside the regime, no RL job will start" in out
    assert "hinted_rare_pass@1_hard = " in out and "interval wholly outside its bound (>= 0.8)" in out
    assert "rule train_" not in out and not (workdir / "results" / "smoke" / "runs").exists()
    assert "Error in rule regime_gate" in out


def test_diagnosis_on_the_training_problems_counts_each_figure(tmp_path, tiny_model_dir):
    """`nudgerl diagnose --train`: per hard training problem, counts of each gate figure, sampled
    with the RL sampler's settings; the gate reads them (a random tiny model is out of regime)."""
    from nudgerl.io import write_jsonl
    from nudgerl.organism import task

    train = task.training_problems(0, 12, 0.5)
    bench = task.evaluation_sets(0, {"b": (4, 0.5)})["b"]
    write_jsonl(tmp_path / "train.jsonl", [p.to_record() for p in train])
    write_jsonl(tmp_path / "b.jsonl", [p.to_record() for p in bench])
    rl = {"samples": 3, "batch_size": 64, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 8, "seed": 0}
    ev = {"samples_per_problem": 2, "max_new_tokens": 8, "batch_size": 64}
    subprocess.run(["nudgerl", "diagnose", "--model", tiny_model_dir, "--benchmarks", str(tmp_path / "b.jsonl"),
                    "--train", str(tmp_path / "train.jsonl"), "--rl-params", json.dumps(rl), "--params", json.dumps(ev),
                    "--out", str(tmp_path / "d.json")], check=True, capture_output=True)
    d = json.loads((tmp_path / "d.json").read_text())["rl_prompts"]
    hard = [p.id for p in train if p.hard]
    assert d["problems"] == hard and d["samples_per_problem"] == 3
    for figure in ("unhinted_pass@1_hard", "rare_strategy_share_unhinted", "rare_strategy_accuracy_unhinted",
                   "hinted_rare_pass@1_hard"):
        assert [n for _, n in d["counts"][figure]] == [3] * len(hard), figure
    # of the unhinted samples that chose the table, the right ones: n is the share's k
    assert [n for _, n in d["counts"]["rare_strategy_accuracy_chosen"]] == [k for k, _ in d["counts"][
        "rare_strategy_share_unhinted"]]
    assert all(s.startswith("strategy : difference table .") for s in d["examples"]["forced"])
    verdict = gate(tmp_path / "d.json", {"gate": False, "bounds": BOUNDS}, tmp_path / "r.json")
    assert not verdict["in_regime"]


def test_a_base_model_whose_sft_never_passed_its_check_is_out_of_regime(tmp_path):
    """Whatever its figures: an SFT that hit its step cap without passing is a failed base model
    (unless regime.sft_check is false)."""
    counts = {"hinted_rare_pass@1_hard": [[15, 16]] * 20, "unhinted_pass@1_hard": [[0, 16]] * 20}
    diag = {"rl_prompts": {"counts": counts, "problems": list(range(20)), "samples_per_problem": 16},
            "summary": {}, "seed": 0, "sft": {"passed": False, "passed_at_step": None, "steps": 1500,
                                              "final_execution": {"x": 0.9}}}
    path = tmp_path / "d.json"
    path.write_text(json.dumps(diag))
    bounds = {"hinted_rare_pass@1_hard": {"min": 0.8}}
    with pytest.raises(RegimeError, match="SFT ended at step 1500 without passing"):
        gate(path, {"bounds": bounds}, tmp_path / "r.json")
    assert not gate(path, {"bounds": bounds, "gate": False}, tmp_path / "r.json")["in_regime"]
    assert gate(path, {"bounds": bounds, "sft_check": False}, tmp_path / "r.json")["in_regime"]
    # a check that passed during SFT and dipped after the anneal to one problem short of 0.98 (62
    # of 64, met on 3 of 30 families builds): the base model did learn every strategy
    diag["sft"].update(passed_at_step=1100, final_execution={"x": 0.96875})
    path.write_text(json.dumps(diag))
    assert gate(path, {"bounds": bounds}, tmp_path / "r.json")["in_regime"]
    # a real LM's diagnosis has no SFT block, and nothing is judged of one
    del diag["sft"]
    path.write_text(json.dumps(diag))
    assert gate(path, {"bounds": bounds}, tmp_path / "r.json")["in_regime"]
