"""Same seed, same artefacts; another seed, other artefacts (CPU): base model weights,
GRPO metrics and weights, evaluation records."""

import json

import pytest
import torch

from nudgerl.evaluation.benchmarks import evaluate_model
from nudgerl.organism import task
from nudgerl.organism.base_config import BaseModelConfig
from nudgerl.organism.base_model import drill_base_model, train_base_model
from nudgerl.evaluation.sampling import SamplingParams, chat_prompt, generate, load_policy
from nudgerl.training.grpo import train_grpo
from nudgerl.training.grpo_config import GRPORunConfig

# real base-model training and GRPO runs, twice each
pytestmark = pytest.mark.slow

TINY = dict(examples=128, arithmetic_drills=1, drill_epochs=1.0, arithmetic_replay=0, max_steps=6, cycle_steps=4, anneal_steps=2,
            check_every=2, check_problems=4, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
            batch_size=32, warmup_steps=2)
# Wall-clock fields: the only ones of a metrics row that may differ between identical runs.
TIMING = {"step_time", "wall_step_time"}


def _weights(path):
    model, _ = load_policy(str(path))
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same_weights(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("base") / "model"
    train_base_model(BaseModelConfig(seed=0, **TINY), d, log=lambda s: None)
    return d


def test_base_model_and_samples_are_seeded(tmp_path, base_model):
    for name, seed in (("b", 0), ("c", 1)):
        train_base_model(BaseModelConfig(seed=seed, **TINY), tmp_path / name, log=lambda s: None)
    a, b, c = _weights(base_model), _weights(tmp_path / "b"), _weights(tmp_path / "c")
    assert _same_weights(a, b)
    assert not _same_weights(a, c)

    model, tok = load_policy(str(base_model))
    prompts = [chat_prompt(tok, p.text()) for p in task.training_problems(0, 4, 0.5)]
    first = generate(model, tok, prompts, SamplingParams(n=4, seed=3))
    assert first == generate(model, tok, prompts, SamplingParams(n=4, seed=3))
    assert first != generate(model, tok, prompts, SamplingParams(n=4, seed=4))


def test_a_base_model_from_a_shared_drill_is_the_one_built_in_one_go(tmp_path, base_model):
    """Phase 1 saved (weights, RNG states) and read back gives the same base model, bit for
    bit: the regime map's base models of a seed share its drilled model."""
    drilled = tmp_path / "drilled"
    drill_base_model(BaseModelConfig(seed=0, **TINY), drilled, log=lambda s: None)
    report = train_base_model(BaseModelConfig(seed=0, **TINY), tmp_path / "two_step", log=lambda s: None,
                              drilled=drilled)
    assert (tmp_path / "two_step" / "model.safetensors").read_bytes() == (base_model / "model.safetensors").read_bytes()
    assert report["drilled_from"] == str(drilled)
    # another SFT mixture over the same drill: a different base model, phase 1 still shared
    other = train_base_model(BaseModelConfig(seed=0, **TINY, unhinted_strategy_weights={
        "common_difference": 0.5, "first_difference": 0.2, "sum_of_last_two": 0.1, "difference_table": 0.2}),
        tmp_path / "other", log=lambda s: None, drilled=drilled)
    assert other["loss_history"][0] == report["loss_history"][0]
    assert not _same_weights(_weights(tmp_path / "other"), _weights(base_model))
    # a drill of other settings is refused, naming the setting
    with pytest.raises(ValueError, match=r"drill_report.json: drilled with other settings: seed=0 \(this base model: 1\)"):
        train_base_model(BaseModelConfig(seed=1, **TINY), tmp_path / "wrong", log=lambda s: None, drilled=drilled)


def test_a_failed_attempt_is_built_again_from_the_next_attempts_seed(tmp_path, base_model):
    """TINY's 6 SFT steps never pass the execution check: with two attempts the first (from the
    shared drill) is discarded and the kept model is exactly the base model of seed 1000000,
    built in one go, drill included; the report keeps both attempts."""
    drilled = tmp_path / "drilled"
    drill_base_model(BaseModelConfig(seed=0, **TINY), drilled, log=lambda s: None)
    lines = []
    report = train_base_model(BaseModelConfig(seed=0, **TINY, sft_attempts=2), tmp_path / "two", log=lines.append,
                              drilled=drilled)
    assert [(a["attempt"], a["seed"], a["passed"]) for a in report["sft_attempts"]] == [(1, 0, False), (2, 1000000, False)]
    assert report["model_seed"] == 1000000 and "drilled_from" not in report
    assert any(line.startswith("attempt 2 of 2: the base model of seed 1000000") for line in lines)
    train_base_model(BaseModelConfig(seed=1000000, **TINY), tmp_path / "direct", log=lambda s: None)
    assert (tmp_path / "two" / "model.safetensors").read_bytes() == (tmp_path / "direct" / "model.safetensors").read_bytes()
    # one attempt (the default): the first build is kept, passed or not, as before
    one = train_base_model(BaseModelConfig(seed=0, **TINY), tmp_path / "one", log=lambda s: None, drilled=drilled)
    assert one["sft_attempts"] == [{"attempt": 1, "seed": 0, "steps": 6, "passed_at_step": None, "passed": False}]
    assert (tmp_path / "one" / "model.safetensors").read_bytes() == (base_model / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="base_model.sft_attempts': 0 is not at least 1"):
        BaseModelConfig.from_dict({"sft_attempts": 0})


def _metrics(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_grpo_runs_are_seeded(tmp_path, base_model):
    problems = task.training_problems(0, 8, 0.5)
    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
               for p in problems]
    # Seed 1 is one where this tiny policy earns some reward, so the runs' losses and
    # updates are not trivially zero.
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_steps=3, max_completion_length=32,
                            learning_rate=1e-2, checkpoint_every=100, seed=seed)
        train_grpo(str(base_model), records, cfg, tmp_path / name)
    a, b, c = (_metrics(tmp_path / n) for n in "abc")
    assert len(a) == 3 and any(r["reward_mean"] > 0 for r in a)
    assert a == b  # rewards, losses, lengths, token counts: every non-timing field
    assert a != c
    wa, wb, wc = (_weights(tmp_path / n / "model") for n in "abc")
    assert not _same_weights(wa, _weights(base_model))  # the runs did update the policy
    assert _same_weights(wa, wb)
    assert not _same_weights(wa, wc)


def test_evaluation_records_are_seeded(tmp_path, base_model):
    benchmarks = {"bench": [p.to_record() for p in task.training_problems(5, 6, 0.5, prefix="eval")]}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        params = SamplingParams(n=4, max_new_tokens=32, seed=seed)
        evaluate_model(str(base_model), benchmarks, params, [1, 2], tmp_path / name,
                       parse_strategy=task.parse_strategy, progress=False)
    a, b, c = ((tmp_path / n / "bench.samples.jsonl").read_bytes() for n in "abc")
    assert a == b
    assert a != c
    for name in "ab":
        summary = json.loads((tmp_path / name / "bench.summary.json").read_text())
        assert summary["grader"]["graded"] == 6 * 4
    problems = [(tmp_path / n / "bench.problems.jsonl").read_bytes() for n in "ab"]
    assert problems[0] == problems[1]
