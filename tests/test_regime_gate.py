"""The regime gate: a base model outside the configured regime stops the DAG before any RL job,
and the message names the figure, its value and the bound."""

import json
import subprocess

import pytest

from nudgerl.evaluation.regime import RegimeError, check, gate, replicate_table

BOUNDS = {"hinted_rare_pass@1_hard": {"min": 0.8}, "unhinted_pass@1_hard": {"max": 0.15},
          "rare_strategy_share_unhinted": {"min": 0.01, "max": 0.1}}


def _diagnosis(tmp_path, **summary):
    base = {"hinted_rare_pass@1_hard": 0.95, "unhinted_pass@1_hard": 0.03, "rare_strategy_share_unhinted": 0.03,
            "dominant_strategy_share_unhinted": 0.75}
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps({"seed": 0, "summary": {**base, **summary},
                                "sft": {"steps": 600, "passed_at_step": 450, "threads": 1}}))
    return path


def test_in_regime_passes_and_records_the_verdict(tmp_path):
    verdict = gate(_diagnosis(tmp_path), {"gate": True, "bounds": BOUNDS}, tmp_path / "seed0.regime.json")
    assert verdict["in_regime"] and all(r["ok"] for r in verdict["figures"])
    assert json.loads((tmp_path / "seed0.regime.json").read_text())["in_regime"] is True
    df = replicate_table([tmp_path / "seed0.regime.json"])
    assert df.loc[0, "sft_check_passed_at"] == 450 and bool(df.loc[0, "in_regime"])


@pytest.mark.parametrize("figure,value,bound", [
    ("hinted_rare_pass@1_hard", 0.10, ">= 0.8"),
    ("rare_strategy_share_unhinted", 0.003, ">= 0.01 and <= 0.1"),
    ("unhinted_pass@1_hard", 0.4, "<= 0.15"),
])
def test_out_of_regime_names_figure_value_and_bound(tmp_path, figure, value, bound):
    with pytest.raises(RegimeError) as err:
        gate(_diagnosis(tmp_path, **{figure: value}), {"gate": True, "bounds": BOUNDS}, tmp_path / "out.json")
    assert f"{figure} = {value:.4f}, outside its bound ({bound})" in str(err.value)
    assert "seed0.json" in str(err.value)  # which replicate's diagnosis


def test_gate_off_reports_and_carries_on(tmp_path):
    verdict = gate(_diagnosis(tmp_path, hinted_rare_pass_at_1=0), {"gate": False, "bounds": {
        "hinted_rare_pass@1_hard": {"min": 0.99}}}, tmp_path / "out.json")
    assert verdict["in_regime"] is False and verdict["gate"] is False


def test_unknown_figure_is_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="regime.bounds.pass_at_1"):
        check({"pass_at_1": 0.5}, {"pass_at_1": {"min": 0.1}})


@pytest.mark.slow
def test_out_of_regime_base_model_stops_the_dag_before_any_training(workdir):
    # the smoke base model (1 layer, 12 SFT steps) cannot learn the difference table
    (workdir / "gate.yaml").write_text("regime:\n  gate: true\n")
    proc = subprocess.run(["snakemake", "--cores", "2", "--configfile", "config/smoke.yaml", "gate.yaml"],
                          cwd=workdir, capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "base model outside the regime, no RL job will start" in out
    assert "hinted_rare_pass@1_hard = " in out and "outside its bound (>= 0.8)" in out
    assert "rule train_" not in out and not (workdir / "results" / "smoke" / "runs").exists()
    assert "Error in rule regime_gate" in out
