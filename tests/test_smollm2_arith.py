"""The SmolLM2 arithmetic configuration's own pieces: the generated arithmetic set (a
prepare-data source), the LoRA update norm a training report carries, and the job list of
`snakemake -n --configfile config/smollm2_arith.yaml` (no model package or data needed)."""

import json
import subprocess

import pytest
import torch
import yaml

from conftest import REPO, copy_workflow, job_counts
from nudgerl.data.prepare import DatasetSpec, arithmetic_rows, prepare
from nudgerl.training.grpo import lora_update_norm

CONFIG = yaml.safe_load((REPO / "config" / "smollm2_arith.yaml").read_text())


def _solve(problem: str) -> int:
    a, op, b = problem.removeprefix("What is ").removesuffix("?").split()
    return {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]


def test_arithmetic_parts_are_disjoint_and_cover_every_problem():
    spec = dict(ops=["+", "*"], low=1, high=9, heldout_fraction=0.4, seed=0)
    train, held = arithmetic_rows(part="train", **spec), arithmetic_rows(part="heldout", **spec)
    assert len(train) + len(held) == 2 * 81 and len(held) == round(162 * 0.4)
    assert not {r["problem"] for r in train} & {r["problem"] for r in held}
    assert len({r["id"] for r in train + held}) == 162
    for r in train + held:
        assert r["answer"] == str(_solve(r["problem"])), r
    assert arithmetic_rows(part="train", **spec) == train  # seeded
    assert arithmetic_rows(part="train", **{**spec, "seed": 1}) != train


def test_arithmetic_bad_parameters_name_the_key():
    with pytest.raises(ValueError, match="generate.ops"):
        arithmetic_rows(ops=["/"])
    with pytest.raises(ValueError, match="generate.part"):
        arithmetic_rows(part="test")
    with pytest.raises(ValueError, match="exactly one of 'hf'.*'path'.*'generate'"):
        DatasetSpec.from_dict({"path": "x.jsonl", "generate": {"kind": "arithmetic", "part": "train"}}, where="data.train")


def test_prepare_writes_the_generated_set_with_its_provenance(tmp_path):
    spec = CONFIG["data"]["benchmarks"]["arith_heldout"]
    out = tmp_path / "arith_heldout.jsonl"
    stats = prepare(spec, "arith_heldout", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert stats["rows"] == len(rows) == 65
    prov = json.loads(out.with_name(out.name + ".provenance.json").read_text())
    assert prov["data"]["source"]["generate"] == spec["generate"]
    assert prov["data"]["sha256"] == stats["sha256"]
    with pytest.raises(ValueError, match="data.arith_heldout.generate"):
        prepare({"generate": {**spec["generate"], "digits": 2}}, "arith_heldout", tmp_path / "bad.jsonl")


def test_lora_update_norm_is_the_norm_of_scaling_b_a():
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 4))
    model = get_peft_model(base, LoraConfig(r=2, lora_alpha=4, target_modules=["0", "2"]))
    assert lora_update_norm(model) == {"layers": 2, "delta_w_frobenius": 0.0}  # peft starts B at 0
    expected = 0.0
    for module in model.modules():
        if hasattr(module, "lora_B"):
            with torch.no_grad():
                module.lora_B["default"].weight.normal_()
                delta = module.lora_B["default"].weight @ module.lora_A["default"].weight * module.scaling["default"]
                expected += float(delta.pow(2).sum())
    got = lora_update_norm(model)
    assert got["layers"] == 2 and got["delta_w_frobenius"] == pytest.approx(expected ** 0.5, rel=1e-6)
    assert lora_update_norm(base.__class__(torch.nn.Linear(2, 2))) is None


@pytest.mark.slow
def test_job_list(tmp_path):
    workdir = copy_workflow(tmp_path)
    proc = subprocess.run(["snakemake", "-n", "-p", "--configfile", "config/smollm2_arith.yaml"], cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert job_counts(out) == {
        "convert_gguf": 1, "prepare_train": 1, "prepare_benchmark": 1, "strategy_pools": 1, "oracle_solutions": 1,
        "train_grpo": 1, "train_pope": 1, "train_nudgerl": 1, "evaluate": 4, "curve_eval": 2, "training_curves": 1,
        "table1": 1, "replicate_table": 1, "claims": 1, "power_table": 1, "training_reward": 1, "compute_matched": 1,
        "compute_table": 1, "audit": 1, "all": 1,
    }  # held-out curves of GRPO-8 and NudgeRL-8; no ablations, eps sweep or rank_hints
    # the arithmetic set is generated, not read: no local data directory is needed
    assert "nudgerl prepare-data --name arith_heldout" in out and "--local-dir" not in out
    assert "pools_smollm2_arith@smollm2_arith" in out


def test_the_configs_answer_region_does_not_reward_restating_the_problem():
    """The exploit a first run found: math-verify reads "3 * 3" as 9, so a policy that
    restates each problem scores 1.0 when the whole completion is graded. The config's
    region (the last integer) scores it 0 and still reads a worked, boxed answer."""
    from nudgerl.evaluation.grading import grade

    region = CONFIG["prompts"]["templates"]["arith_worked_example"]["answer_region"]
    assert grade("3 * 3", "9", region=None) == 1.0  # the exploit, under the whole-completion rule
    assert grade("3 * 3", "9", region=region) == 0.0
    assert grade("\\boxed{3*3}", "9", region=region) == 0.0
    assert grade("3 * 3 = 9, which is \\boxed{9}.", "9", region=region) == 1.0
    assert grade("The answer is 60.", "9", region=region) == 0.0
