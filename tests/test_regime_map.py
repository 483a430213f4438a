"""The regime map: the SFT mixture per share, the per-run figures, and a CI-sized map end to end."""

import json
import re
import subprocess

import pandas as pd
import pytest
import yaml

from conftest import failed_rule_logs
from nudgerl.reporting.regime_map import _final_and_reach, mixture


def test_mixture_sets_the_rare_share_and_keeps_the_others_proportions():
    w = {"common_difference": 0.75, "first_difference": 0.17, "sum_of_last_two": 0.05, "difference_table": 0.03}
    m = mixture(w, "difference_table", 0.1)
    assert m["difference_table"] == 0.1 and sum(m.values()) == pytest.approx(1.0)
    assert m["common_difference"] / m["first_difference"] == pytest.approx(0.75 / 0.17)
    # by hand: the other three share 0.9 in their old proportions (0.75, 0.17, 0.05 of 0.97)
    assert m["common_difference"] == pytest.approx(0.75 * 0.9 / 0.97) and m["sum_of_last_two"] == pytest.approx(
        0.05 * 0.9 / 0.97)
    assert mixture(w, "difference_table", 0.03)["common_difference"] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="regime_map.shares"):
        mixture(w, "difference_table", 1.0)


def _row(step, tokens, cs):
    return {"step": step, "cumulative_rollout_tokens": tokens, "benchmark": "hard",
            "problems": [{"id": f"p{i}", "n": 4, "c": c} for i, c in enumerate(cs)]}


def test_final_pass_and_tokens_to_first_reach():
    curve = [_row(0, 0.0, [0, 0, 1, 0]), _row(10, 900.0, [2, 2, 2, 0]), _row(20, 1800.0, [4, 4, 2, 2])]
    final, mean, reach, total = _final_and_reach(curve, 0.5)
    assert list(final) == [1.0, 1.0, 0.5, 0.5] and mean == 0.75 and total == 1800.0
    assert reach == 1800.0  # 0.375 at step 10 is below 0.5
    assert _final_and_reach(curve, 0.3)[2] == 900.0 and _final_and_reach(curve, 0.9)[2] is None


GRID = {"regime_map": {"shares": [0.05, 0.3], "methods": ["grpo2", "nudgerl2"], "seeds": [0], "reached": 0.5,
                       "every": 2, "samples": 1,
                       # one of the field's fixes (smoke trains them at N=8) in every cell, on seed 0
                       "baselines": {"methods": ["ngrpo8"], "seeds": [0]},
                       # the second axis: one misexecuting base model beside the 30 % cell
                       "accuracy": {"share": 0.3, "accuracies": [0.5], "seeds": [0]}}}


# The study on the smoke run's two replicates: one seed per set, the map's 30 % cell as "common".
STUDY = {"study": {"seed_sets": [[0], [1]], "common_shares": [0.3], "rl_works_method": "grpo2"}}


@pytest.mark.slow
def test_ci_sized_study_with_its_map_end_to_end(smoke_run_copy):
    """`snakemake study` over a finished smoke run: the regime map, the seed-set agreement and
    the common-regime check are built. The smoke run is the default's families task and the study
    the single-family task's, so its matrix trains again in the same run folder: every rerun
    training starts from its new base model, none resumes the families run's checkpoints."""
    workdir = smoke_run_copy
    (workdir / "map.yaml").write_text(yaml.safe_dump({**GRID, **STUDY}))
    # the map and the study are the single-family task's (config/single_family.yaml)
    proc = subprocess.run(["snakemake", "study", "--cores", "2", "--configfile", "config/single_family.yaml",
                           "config/smoke.yaml", "map.yaml"],
                          cwd=workdir, capture_output=True, text=True, timeout=2400)
    assert proc.returncode == 0, proc.stderr[-4000:] + failed_rule_logs(workdir, proc.stderr)
    res = workdir / "results" / "smoke"
    logs = [p.read_text() for p in (res / "logs" / "train_grpo").glob("grpo*_seed*.log")]
    assert logs and not any("resuming from checkpoint" in text for text in logs)
    assert any("other inputs" in text for text in logs)  # the families run's checkpoints, removed
    runs = pd.read_csv(res / "tables" / "regime_map.csv")
    assert len(runs) == 4 and set(runs.method) == {"grpo2", "nudgerl2"} and set(runs.share_set) == {0.05, 0.3}
    # the RL-prompt diagnosis (accuracy after an unhinted choice) runs on the second axis' cells only
    assert runs[runs.share_set == 0.05].accuracy_measured.isna().all()
    assert runs[runs.share_set == 0.3].accuracy_measured.between(0, 1).all()
    assert runs["final_hard_pass@1"].between(0, 1).all() and (runs.rollout_tokens > 0).all()
    # the x axis is each base model's measured share, read from its diagnosis
    for share in ("0.05", "0.3"):
        diag = json.loads((res / "regime_map" / f"share{share}" / "diagnostics" / "seed0.json").read_text())
        got = runs[runs.share_set == float(share)].share_measured.unique()
        assert list(got) == [diag["summary"]["rare_strategy_share_unhinted"]]
    # the two base models were trained on different mixtures
    cfgs = [json.loads((res / "regime_map" / f"share{s}" / "models" / "base" / "seed0" / "provenance.json")
                       .read_text())["config"]["unhinted_strategy_weights"]["difference_table"] for s in ("0.05", "0.3")]
    assert cfgs == [0.05, 0.3]
    fig = json.loads((res / "figures" / "regime_map.json").read_text())
    assert {s["method"] for s in fig["series"]} == {"grpo2", "nudgerl2"} and fig["replicates"] == 1
    assert (res / "figures" / "regime_map.png").read_bytes()[:4] == b"\x89PNG"
    md = (res / "tables" / "regime_map.md").read_text()
    assert "1 replicate per cell" in md and "NudgeRL (N=2) - GRPO (N=2)" in md and "| 5 % |" in md
    assert (res / "tables" / "regime_map.csv.provenance.json").exists()
    assert "nudgerl audit: OK" in (res / "audit" / "regime_map.txt").read_text()
    # the baselines' sub-grid beside the map's methods, on the same base models
    sub = pd.read_csv(res / "tables" / "regime_map_baselines.csv")
    assert set(sub.method) == {"grpo2", "nudgerl2", "ngrpo8"} and set(sub.seed) == {0} and len(sub) == 6
    same = sub.merge(runs, on=["share_set", "seed", "method"], suffixes=("", "_map"))
    assert len(same) == 4 and (same["final_hard_pass@1"] == same["final_hard_pass@1_map"]).all()
    assert (sub[sub.method == "ngrpo8"].rollout_tokens > 0).all()
    md = (res / "tables" / "regime_map_baselines.md").read_text()
    assert "| 30 % | NGRPO (N=8) |" in md and "beats every baseline" in md
    fig = json.loads((res / "figures" / "regime_map_baselines.json").read_text())
    assert [p["share_set"] for p in fig["panels"]] == [0.05, 0.3] and set(fig["beats_every_baseline"]) == {"0.05", "0.3"}
    # the second axis: the misexecuting base model beside the 30 % cell's, same seed and mixture
    axis = pd.read_csv(res / "tables" / "regime_map_accuracy.csv")
    assert sorted(axis.accuracy_set) == [0.5, 0.5, 1.0, 1.0] and set(axis.method) == {"grpo2", "nudgerl2"}
    same = axis[axis.accuracy_set == 1.0].merge(runs, on=["share_set", "seed", "method"], suffixes=("", "_map"))
    assert len(same) == 2 and (same["final_hard_pass@1"] == same["final_hard_pass@1_map"]).all()
    assert axis.accuracy_measured.between(0, 1).all()  # the axis' cells ran the RL-prompt diagnosis
    flawed = json.loads((res / "regime_map" / "share0.3_accuracy0.5" / "models" / "base" / "seed0" / "provenance.json")
                        .read_text())["config"]
    assert flawed["unhinted_rare_accuracy"] == 0.5 and flawed["unhinted_strategy_weights"]["difference_table"] == 0.3
    md = (res / "tables" / "regime_map_accuracy.md").read_text()
    assert "| 0.5 |" in md and "step 0" in md and "NudgeRL (N=2) - GRPO (N=2)" in md
    assert (res / "figures" / "regime_map_accuracy.png").read_bytes()[:4] == b"\x89PNG"

    # the study's own tables, from the run's exploration rows and the map's runs
    explored = pd.read_csv(res / "tables" / "exploration.csv")
    agreement = pd.read_csv(res / "tables" / "seed_set_agreement.csv")
    assert set(agreement.method) == set(explored.method)
    for r in agreement.itertuples():
        found = {int(x.seed): bool(x.run_found) for x in explored[explored.method == r.method].itertuples()}
        assert (r.found_a, r.replicates_a, r.found_b, r.replicates_b) == (int(found[0]), 1, int(found[1]), 1)
        assert r.agree and r.test == "Boschloo exact"  # 1 against 1 replicate can never disagree
    works = pd.read_csv(res / "tables" / "rl_works.csv")
    cell = runs[(runs.method == "grpo2") & (runs.share_set == 0.3)]
    assert works.share_set.tolist() == [0.3] and works.replicates.tolist() == [1]
    assert works.works.tolist() == [bool((cell["final_hard_pass@1"] > cell["base_hard_pass@1"]).all())]
    assert "RL works at all" in (res / "tables" / "rl_works.md").read_text()
    assert (res / "tables" / "seed_set_agreement.csv.provenance.json").exists()
    # the claims judged again in the common cell, on its runs evaluated on the benchmarks: the
    # matrix's regime and the cell's, each row labelled with what its base models measured
    claims = pd.read_csv(res / "tables" / "claims.csv")
    regimes = list(dict.fromkeys(claims.regime))
    assert len(regimes) == 2 and regimes[0].startswith("rare (the study's matrix): unhinted share")
    assert regimes[1].startswith("common (regime map, SFT share 30 %): unhinted share")
    ours = claims[(claims.claim == 8) & (claims.regime == regimes[1])]
    # one replicate a cell: below the rule's minimum, no verdict in either regime
    assert ours.worse.tolist() == ["ngrpo8"] and ours.verdict.iloc[0] == f"descriptive (n = {ours.replicates.iloc[0]})"
    assert claims.verdict.str.startswith("descriptive (n = ").sum() + (claims.verdict == "not run").sum() == len(claims)
    assert (res / "regime_map" / "share0.3" / "eval" / "ngrpo8" / "seed0" / "summary.json").exists()
    assert "| # | regime | claim |" in (res / "tables" / "claims.md").read_text()
    table = pd.read_csv(res / "tables" / "baselines_share0.3.csv")
    assert {"ngrpo8", "nudgerl2"} <= set(table.method)


def test_the_baselines_sub_grid_pairs_nudgerl_with_each_on_the_same_base_models(tmp_path):
    """regime-map-baselines on hand-made curves: per cell, NudgeRL is paired with each baseline on
    the same problems and replicates, and 'beats every baseline' takes the claims' rule over replicates
    (six: the fewest that can carry a verdict; with two, every cell is descriptive)."""
    from nudgerl.io import write_jsonl
    from nudgerl.reporting.regime_map import beats_every_baseline, cell_table, render_baselines_markdown, run_table

    finals = {"nudgerl8": [4, 4, 4, 4], "dapo8": [0, 0, 1, 0], "ngrpo8": [4, 4, 4, 4]}
    seeds = list(range(6))
    for share in ("0.01", "0.1"):
        cell = tmp_path / f"share{share}"
        for seed in seeds:
            (cell / "diagnostics").mkdir(parents=True, exist_ok=True)
            (cell / "diagnostics" / f"seed{seed}.json").write_text(json.dumps(
                {"summary": {"rare_strategy_share_unhinted": float(share)}}))
            for method, cs in finals.items():
                cs = [4, 4, 4, 3] if method == "ngrpo8" and seed == 0 else cs  # one problem of one replicate
                tokens = 800.0 if method == "nudgerl8" else 1000.0
                write_jsonl(cell / "curves" / method / f"seed{seed}.jsonl",
                            [_row(0, 0.0, [0, 0, 0, 0]), _row(10, tokens, cs)])
    args = ([0.01, 0.1], list(finals), seeds, 0.5)
    runs = run_table(tmp_path, *args)
    cells = cell_table(tmp_path, *args, reference="nudgerl8", against=["dapo8", "ngrpo8"], n_boot=200)
    # 40 pp above DAPO everywhere; a tie with NGRPO (one problem of one replicate apart)
    assert beats_every_baseline(cells, "nudgerl8", ["dapo8", "ngrpo8"]) == {0.01: "inconclusive", 0.1: "inconclusive"}
    assert beats_every_baseline(cells, "nudgerl8", ["dapo8"]) == {0.01: "supported", 0.1: "supported"}
    md = render_baselines_markdown(runs, cells, "nudgerl8", ["dapo8", "ngrpo8"], samples=4)
    row = next(line for line in md.splitlines() if line.startswith("| 1 % | DAPO (N=8) | "))
    # by hand: DAPO solves 1 of 16 samples (6.25 %), 1,000 rollout tokens (1 k); NudgeRL 100 % on
    # every replicate, so +93.75 points, and six positive replicate differences give the exact
    # one-sided p 1/2^6 = 0.016 (below alpha/2: better) and 1 against
    pass1, tokens, difference = row.split(" | ")[2:5]
    assert pass1.startswith("6.2 [") and tokens == "1"
    found = re.fullmatch(r"\+93\.8 \[\+([\d.]+), \+([\d.]+)\] \(p = 0\.016 / 1, better\) \|", difference)
    assert found and float(found[1]) <= 93.75 <= float(found[2]) <= 100, difference
    assert "| 10 % | **inconclusive** |" in md
    # on two of the replicates the same cells carry no verdict
    two = cell_table(tmp_path, [0.01, 0.1], list(finals), [0, 1], 0.5, reference="nudgerl8", against=["dapo8"], n_boot=100)
    assert beats_every_baseline(two, "nudgerl8", ["dapo8"]) == {0.01: "descriptive (n = 2)", 0.1: "descriptive (n = 2)"}


def test_cell_tags_name_both_axes_and_read_back():
    from nudgerl.reporting.regime_map import cell_settings, cell_tag

    assert cell_tag(0.003) == "share0.003" and cell_tag(0.1, 1.0) == "share0.1"
    assert cell_tag(0.1, 0.2) == "share0.1_accuracy0.2"
    for share, accuracy in [(0.003, 1.0), (0.1, 0.2), (0.03, 0.5)]:
        assert cell_settings(cell_tag(share, accuracy)) == (share, accuracy)
    assert cell_settings("share0.03_accuracy0.5") == (0.03, 0.5) and cell_settings("share0.003") == (0.003, 1.0)


def test_the_accuracy_axis_pairs_nudgerl_with_grpo_per_accuracy_and_shows_each_checkpoint(tmp_path):
    """regime-map-accuracy on hand-made curves: rows per accuracy set (1 = the map's own cell) with
    the measured accuracy of each replicate, NudgeRL minus GRPO paired on the same problems, and
    hard pass@1 at every checkpoint."""
    from nudgerl.io import write_jsonl
    from nudgerl.reporting.regime_map import (cell_table, cell_tag, checkpoint_table, render_accuracy_markdown,
                                              run_table)

    # accuracy 1: both learn; 0.2: GRPO never does, NudgeRL does by step 20
    runs_by_cell = {1.0: {"grpo8": [[0, 0, 0, 0], [4, 4, 4, 4], [4, 4, 4, 4]],
                          "nudgerl8": [[0, 0, 0, 0], [4, 4, 4, 4], [4, 4, 4, 4]]},
                    0.2: {"grpo8": [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0]],
                          "nudgerl8": [[0, 0, 0, 0], [0, 0, 1, 0], [4, 4, 4, 4]]}}
    for accuracy, methods in runs_by_cell.items():
        cell = tmp_path / cell_tag(0.1, accuracy)
        for seed in range(6):
            (cell / "diagnostics").mkdir(parents=True, exist_ok=True)
            right = 97 if accuracy == 1 else 30  # after an unhinted choice, of 100 (two problems)
            (cell / "diagnostics" / f"seed{seed}.json").write_text(json.dumps({
                "summary": {"rare_strategy_share_unhinted": 0.1, "hinted_rare_pass@1_hard": 0.98},
                "rl_prompts": {"counts": {"rare_strategy_accuracy_unhinted": [[right - 20, 50], [20, 50]]}}}))
            for method, curve in methods.items():
                write_jsonl(cell / "curves" / method / f"seed{seed}.jsonl",
                            [_row(step, step * 100.0, cs) for step, cs in zip((0, 10, 20), curve)])
    accuracies, methods = [1.0, 0.2], ["grpo8", "nudgerl8"]
    seeds = list(range(6))
    runs = run_table(tmp_path, [0.1], methods, seeds, 0.5, accuracies)
    cells = cell_table(tmp_path, [0.1], methods, seeds, 0.5, "nudgerl8", ["grpo8"], n_boot=200, accuracies=accuracies)
    checkpoints = checkpoint_table(tmp_path, 0.1, accuracies, methods, seeds)
    assert set(runs.accuracy_set) == {1.0, 0.2} and set(runs.accuracy_measured) == {0.97, 0.3}
    assert len(checkpoints) == 2 * 2 * 6 * 3
    paired = cells[cells.kind == "paired difference"].set_index("accuracy_set")
    assert paired.loc[1.0, "verdict"] == "inconclusive" and paired.loc[0.2, "verdict"] == "supported"
    md = render_accuracy_markdown(runs, cells, checkpoints, 0.1, samples=4)
    low = next(line for line in md.splitlines() if line.startswith("| 0.2 | " + ", ".join(["30.0"] * 6) + " % |"))
    assert "(p = 0.016 / 1, better)" in low and "+93.8" in low
    assert "| 0.2 | NudgeRL (N=8) | 0.0 | 6.2 | 100.0 | 2 |" in md
    assert "| 1 | GRPO (N=8) | 0.0 | 100.0 | 100.0 | 2 |" in md


def test_the_accuracy_axis_sits_on_a_share_of_the_map_and_its_seeds():
    """regime_map.accuracy: its share must be a cell of the map (the reference, accuracy 1) and its
    seeds the map's; planned, its cells are the reference's followed by one per accuracy."""
    from conftest import REPO
    from nudgerl.config import check_regime_map_methods
    from nudgerl.plan.workflow_plan import WorkflowPlan

    from conftest import merged_config

    cfg = merged_config("single_family.yaml")  # the map is the single-family task's
    cfg["regime_map"]["accuracy"] = {"share": 0.2, "accuracies": [0.5], "seeds": [0, 7]}
    assert check_regime_map_methods(cfg) == [
        "config key 'regime_map.accuracy.share': 0.2 not in 'regime_map.shares' [0.003, 0.01, 0.03, 0.1] (the map's "
        "cell there, accuracy 1, is the axis' reference)",
        "config key 'regime_map.accuracy.seeds': [7] not in 'regime_map.seeds' [0, 1, 2] (each cell pairs with the "
        "reference cell's base models)"]
    cfg["regime_map"]["accuracy"] = {"share": 0.1, "accuracies": [0.5, 0.2], "seeds": [0, 1]}
    assert check_regime_map_methods(cfg) == []
    plan = WorkflowPlan(cfg).regime_map
    assert plan.RMAP_ACCURACY_CELLS == ["share0.1", "share0.1_accuracy0.5", "share0.1_accuracy0.2"]
    grid = json.loads(plan.regime_map_accuracy_grid_section())
    assert grid["shares"] == [0.1] and grid["accuracies"] == [1.0, 0.5, 0.2] and grid["seeds"] == [0, 1]
    assert [o.rsplit("/", 1)[1] for o in plan.RMAP_ACCURACY_OUTPUTS][:2] == ["regime_map_accuracy.csv",
                                                                            "regime_map_accuracy.md"]
