"""Advantage estimators by name (nudgerl.advantages): each against a group worked by hand, the
registry against the schema and TRL, and the trainers using them on a tiny model."""

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from nudgerl.advantages import (ADVANTAGE_ESTIMATORS, AdvantageOptions, get_advantage_estimator,
                                group_advantages, zero_variance_groups)
from nudgerl.organism import task
from nudgerl.training.grpo_config import GRPORunConfig

REPO = Path(__file__).resolve().parents[1]
ONE_RIGHT = [1, 0, 0, 0]


# ---------------------------------------------------------------- each estimator, by hand


def test_grpo_divides_by_the_groups_sample_std():
    # mean 1/4; sample variance 4/3 * 3/16 = 1/4, std 1/2 (+ TRL's 1e-4)
    np.testing.assert_allclose(group_advantages("grpo", ONE_RIGHT), np.array([0.75, -0.25, -0.25, -0.25]) / 0.5001)
    assert np.all(group_advantages("grpo", [0, 0, 0, 0]) == 0)


def test_dr_grpo_only_centres():
    np.testing.assert_allclose(group_advantages("dr_grpo", ONE_RIGHT), [0.75, -0.25, -0.25, -0.25])


def test_ngrpo_counts_a_virtual_right_rollout():
    # The NGRPO paper's worked case: G = 8 with one right, GRPO 2.47 / -0.35, NGRPO 1.76 / -0.50.
    group = [1] + [0] * 7
    grpo, ngrpo = group_advantages("grpo", group), group_advantages("ngrpo", group)
    assert (round(grpo[0], 2), round(grpo[1], 2)) == (2.47, -0.35)
    assert (round(ngrpo[0], 2), round(ngrpo[1], 2)) == (1.76, -0.50)
    # all wrong: R' = {0, 0, 0, 0, 1}, mean 1/5, sample std sqrt(1/5); GRPO would give 0
    np.testing.assert_allclose(group_advantages("ngrpo", [0, 0, 0, 0]), [-0.2 / (0.2 ** 0.5 + 1e-4)] * 4)


def test_pass_at_k_worked_group():
    # G = 4, one right, k = 2: R = 1 - C(3,2)/C(4,2) = 1/2, sigma = 1/2;
    # A_pos = (1 - 1/2) / (1/2) = 1; A_neg = (1 - 1/2 - C(2,1)/C(3,1)) / (1/2) = -1/3
    np.testing.assert_allclose(group_advantages("pass_at_k", ONE_RIGHT, options=AdvantageOptions(k=2)),
                               [1, -1 / 3, -1 / 3, -1 / 3])
    # every 2-subset of two right out of 4 ... R = 1 - C(2,2)/C(4,2) = 5/6: wrongs still negative
    adv = group_advantages("pass_at_k", [1, 1, 0, 0], options=AdvantageOptions(k=2))
    assert adv[0] > 0 > adv[2]
    for same in ([0, 0, 0, 0], [1, 1, 1, 1]):
        assert np.all(group_advantages("pass_at_k", same, options=AdvantageOptions(k=2)) == 0)
    # k = 4 of 4 with one right: every 4-subset succeeds, nothing to learn
    assert np.all(group_advantages("pass_at_k", ONE_RIGHT, options=AdvantageOptions(k=4)) == 0)


def test_pass_at_1_is_grpo_with_the_population_std():
    r = np.array([1, 0, 1, 0, 0, 0, 1, 0], dtype=float)
    np.testing.assert_allclose(group_advantages("pass_at_k", r, options=AdvantageOptions(k=1)),
                               (r - r.mean()) / r.std())


def test_pass_at_k_refuses_what_it_cannot_mean():
    with pytest.raises(ValueError, match="0/1 rewards"):
        group_advantages("pass_at_k", [0.5, 0, 1, 0], options=AdvantageOptions(k=2))
    with pytest.raises(ValueError, match="k <= G"):
        group_advantages("pass_at_k", ONE_RIGHT, options=AdvantageOptions(k=5))


def test_nudgerl_inter_intra_worked_group():
    # mean_all 3/4; context 0 = rollouts 0, 1 (mean 1/2); context 1 = rollout 3 (mean 1); rollout 2 hint-free
    adv = group_advantages("nudgerl", [1, 0, 1, 1], contexts=[0, 0, None, 1],
                           options=AdvantageOptions(lam=1.1, normalize=False))
    np.testing.assert_allclose(adv, [0.5 - 1.1 * 0.25, -0.5 - 1.1 * 0.25, 0.25, 1.1 * 0.25])
    with pytest.raises(ValueError, match="hint context"):
        group_advantages("nudgerl", [1, 0])


# ---------------------------------------------------------------- the registry


def test_the_schema_lists_exactly_the_registered_estimators():
    schema = yaml.safe_load((REPO / "src" / "nudgerl" / "schemas" / "config.schema.yaml").read_text())
    enum = schema["properties"]["grpo"]["properties"]["advantage_estimator"]["enum"]
    assert sorted(enum) == sorted(ADVANTAGE_ESTIMATORS)


def test_trl_options_are_trl_grpo_config_fields():
    from trl import GRPOConfig

    names = {f.name for f in fields(GRPOConfig)}
    for est in ADVANTAGE_ESTIMATORS.values():
        assert est.summary, est.name
        assert set(est.trl_options or {}) <= names, est.name


def test_an_unknown_estimator_names_the_key_and_the_registered_ones():
    with pytest.raises(ValueError, match=r"'grpo.advantage_estimator'.*'ppo'.*dr_grpo, grpo, ngrpo"):
        GRPORunConfig.from_dict({"advantage_estimator": "ppo"})
    with pytest.raises(ValueError, match="grpo.advantage_k"):
        GRPORunConfig(advantage_k=0)
    assert get_advantage_estimator("ngrpo").trl_options is None


# ---------------------------------------------------------------- the trainers


def _rewards_from_length(prompts, completions, **kwargs):
    """0/1 by the completion's length: a mix of rights and wrongs from a random model."""
    from nudgerl.training.rewards import completion_text

    return [float(len(completion_text(c)) % 2) for c in completions]


def _scored(model_dir, tmp_path, reward=None, **grpo):
    from nudgerl.training.estimator_trainer import grpo_trainer
    from nudgerl.training.grpo import build_trainer

    problems = task.training_problems(0, 4, 1.0)
    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
               for p in problems]
    cfg = GRPORunConfig(num_generations=8, prompts_per_step=2, max_steps=1, max_completion_length=12, **grpo)
    trainer_cls, extra = grpo_trainer(cfg)
    trainer = build_trainer(trainer_cls, model_dir, records, cfg, tmp_path,
                            reward_funcs=[reward or _rewards_from_length], **extra)
    trainer.model.train()
    batch = [records[i // 8] for i in range(16)]  # two groups, as TRL's RepeatSampler yields them
    captured = {}
    calculate = trainer._calculate_rewards

    def keep(*args):
        captured["rewards"] = calculate(*args)
        return captured["rewards"]

    trainer._calculate_rewards = keep
    out = trainer._generate_and_score_completions(batch)
    return trainer, out, captured["rewards"].sum(dim=1).numpy()


@pytest.mark.parametrize("name, options", [("ngrpo", AdvantageOptions()), ("pass_at_k", AdvantageOptions(k=4)),
                                           ("grpo", AdvantageOptions()), ("dr_grpo", AdvantageOptions())])
def test_a_trainer_uses_the_configured_estimator(tiny_model_dir, tmp_path, name, options):
    """ngrpo / pass_at_k through our hook; grpo / dr_grpo through TRL's own code, which must
    compute what the registered function writes down."""
    trainer, out, rewards = _scored(tiny_model_dir, tmp_path, advantage_estimator=name, advantage_k=options.k)
    advantages = out["advantages"].numpy()
    assert type(trainer).__name__ == ("GRPOTrainer" if get_advantage_estimator(name).trl_options else
                                      "EstimatorGRPOTrainer")
    assert 0 < rewards.sum() < len(rewards)  # the groups are not all alike: the estimators differ
    expected = np.concatenate([group_advantages(name, rewards[s:s + 8], options=options) for s in (0, 8)])
    np.testing.assert_allclose(advantages, expected, atol=1e-5)


def test_nudgerl_runs_refuse_another_estimator(tmp_path):
    from nudgerl.training.nudgerl import NudgeRLConfig, train_nudgerl

    with pytest.raises(ValueError, match="grpo.advantage_estimator.*'ngrpo'"):
        train_nudgerl("unused", [], GRPORunConfig(advantage_estimator="ngrpo"), NudgeRLConfig(), tmp_path)


def test_ngrpo_learns_from_an_all_wrong_group_where_grpo_cannot(tiny_model_dir, tmp_path):
    """The whole training path (train_grpo: TRL's loop, checkpoint, saved model): a random tiny
    model gets every reward 0, so GRPO's advantages are 0 and its weights stay put, while
    NGRPO's virtual right rollout gives the group a negative advantage that moves them."""
    from safetensors.torch import load_file

    from nudgerl.training.grpo import train_grpo

    problems = task.training_problems(0, 4, 1.0)
    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
               for p in problems]
    weights = {}
    for name in (None, "ngrpo"):
        cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_steps=2, max_completion_length=8,
                            learning_rate=1e-2, checkpoint_every=1, advantage_estimator=name)
        report = train_grpo(str(tiny_model_dir), records, cfg, tmp_path / str(name))
        assert report["global_step"] == 2 and report["config"]["advantage_estimator"] == name
        rows = [json.loads(line) for line in (tmp_path / str(name) / "metrics.jsonl").read_text().splitlines()]
        assert all(r["reward_mean"] == 0 for r in rows)  # every group all wrong
        weights[name] = load_file(tmp_path / str(name) / "model" / "model.safetensors")
    base = load_file(Path(tiny_model_dir) / "model.safetensors")
    assert all(torch.equal(weights[None][k], base[k]) for k in base)
    assert any(not torch.equal(weights["ngrpo"][k], base[k]) for k in base)


# The field's exploration fixes as config/config.yaml defines them (`baselines.methods`), and
# one more setting of the kind (the high-entropy-token share): each must reach trl.GRPOConfig
# under TRL's own name and value; advantage_k is ours (the pass_at_k estimator's k).
FIELD_FIXES = {**yaml.safe_load((REPO / "config" / "config.yaml").read_text())["baselines"]["methods"],
               "high_entropy_tokens": {"top_entropy_quantile": 0.2}}


OUR_KEYS = ("advantage_estimator", "advantage_k", "dynamic_sampling")  # settings our trainer applies, not TRL


@pytest.mark.parametrize("name", FIELD_FIXES)
def test_the_field_fixes_settings_reach_trl(name, tmp_path):
    from nudgerl.training.grpo import trl_config

    section = FIELD_FIXES[name]
    args = trl_config(GRPORunConfig.from_dict(section), str(tmp_path))
    expected = {**section, **(get_advantage_estimator(section["advantage_estimator"]).trl_options or {}
                              if "advantage_estimator" in section else {})}
    for key, value in expected.items():
        if key not in OUR_KEYS:
            assert getattr(args, key) == value, (name, key)


# ---------------------------------------------------------------- DAPO's dynamic sampling


def test_zero_variance_groups_are_the_all_alike_ones():
    r = [1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0.5, 0.5, 0.5, 0.5]
    assert zero_variance_groups(r, 4).tolist() == [True, False, True, True]
    with pytest.raises(ValueError, match="not whole groups of 3"):
        zero_variance_groups(r, 3)


def test_dynamic_sampling_needs_a_token_normalised_loss():
    with pytest.raises(ValueError, match=r"'grpo.dynamic_sampling'.*token-normalised.*not loss_type 'grpo'"):
        GRPORunConfig(dynamic_sampling="drop")
    with pytest.raises(ValueError, match=r"'grpo.dynamic_sampling': 'resample'"):
        GRPORunConfig(loss_type="dapo", dynamic_sampling="resample")


def test_dynamic_sampling_drops_the_all_alike_groups_from_the_loss(tiny_model_dir, tmp_path):
    """DAPO as config.yaml defines it, through TRL's generation and scoring: the rollouts of an
    all-alike group leave the loss mask and TRL's token normaliser, the others stay as TRL made them."""
    section = FIELD_FIXES["dapo"]
    assert section["dynamic_sampling"] == "drop"
    for attempt in range(3):  # the second group is all alike with p = 1/128: then draw again
        trainer, out, rewards = _scored(tiny_model_dir, tmp_path / str(attempt), reward=_rewards_all_wrong_first,
                                        **section)
        dropped = zero_variance_groups(rewards, 8)
        if dropped.tolist() == [True, False]:
            break
    assert type(trainer).__name__ == "EstimatorGRPOTrainer" and dropped.tolist() == [True, False]
    mask = out["completion_mask"]
    assert mask[:8].sum() == 0 and mask[8:].sum() > 0
    assert int(out["num_items_in_batch"]) == int(mask.sum())
    assert trainer._metrics["train"]["dynamic_sampling/dropped_groups"][-1] == 0.5


def test_dynamic_sampling_trains_through_trls_loop_when_every_group_is_dropped(tiny_model_dir, tmp_path):
    """The whole training path with DAPO's settings: a random tiny model gets every reward 0, so
    every group is dropped; the masked loss stays finite (TRL's normaliser clamps at 1), the
    weights stay put, and every metrics row says all groups were dropped."""
    from safetensors.torch import load_file

    from nudgerl.training.grpo import train_grpo

    problems = task.training_problems(0, 4, 1.0)
    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
               for p in problems]
    cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_steps=2, max_completion_length=8,
                        learning_rate=1e-2, checkpoint_every=1, **FIELD_FIXES["dapo"])
    report = train_grpo(str(tiny_model_dir), records, cfg, tmp_path / "dapo")
    assert report["global_step"] == 2 and report["config"]["dynamic_sampling"] == "drop"
    rows = [json.loads(line) for line in (tmp_path / "dapo" / "metrics.jsonl").read_text().splitlines()]
    assert [r["dynamic_sampling/dropped_groups"] for r in rows] == [1.0, 1.0]
    assert all(r["reward_mean"] == 0 and r["rollout_tokens"] > 0 and np.isfinite(r["loss"]) for r in rows)
    weights, base = load_file(tmp_path / "dapo" / "model" / "model.safetensors"), load_file(
        Path(tiny_model_dir) / "model.safetensors")
    assert all(torch.equal(weights[k], base[k]) for k in base)


def _rewards_all_wrong_first(prompts, completions, **kwargs):
    """The first group (8 rollouts) all wrong; the second by length, right and wrong."""
    from nudgerl.training.rewards import completion_text

    return [0.0 if i < 8 else float(len(completion_text(c)) % 2) for i, c in enumerate(completions)]
