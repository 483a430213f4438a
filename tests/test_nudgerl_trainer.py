"""The NudgeRL trainer on a tiny model: nudged prompts, advantages, distillation term."""

import numpy as np
import pytest
import torch

from nudgerl.algorithms import inter_intra_advantages
from nudgerl.organism import task
from nudgerl.data.prompts import organism_apply_hint
from nudgerl.training.grpo import build_trainer
from nudgerl.training.grpo_config import GRPORunConfig
from nudgerl.training.nudgerl import NudgeRLConfig, NudgeRLTrainer

HINTS = [task.STRATEGIES["difference_table"].hint, task.STRATEGIES["common_difference"].hint]


def _trainer(model_dir, tmp_path, nudge, **grpo):
    problems = task.training_problems(0, 4, 1.0)
    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id,
                "hints": HINTS} for p in problems]
    cfg = GRPORunConfig(num_generations=nudge.M * nudge.K, prompts_per_step=2, max_steps=1,
                        max_completion_length=16, **grpo)
    trainer = build_trainer(NudgeRLTrainer, model_dir, records, cfg, tmp_path, nudge=nudge,
                            apply_hint=organism_apply_hint)
    N = nudge.M * nudge.K
    batch = [records[i // N] for i in range(2 * N)]  # what TRL's RepeatSampler yields
    return trainer, batch


def test_nudged_rollouts_advantages_and_hint_free_x0(tiny_model_dir, tmp_path):
    nudge = NudgeRLConfig(M=2, K=2, p_drop=0.5, lam=1.1, lambda_distill=0.1)
    trainer, batch = _trainer(tiny_model_dir, tmp_path, nudge)
    trainer.model.train()
    nudged, contexts = trainer._nudge(batch)
    for row, c in zip(nudged, contexts):
        text = row["prompt"][-1]["content"]
        assert (HINTS[c] in text) if c is not None else ("hint" not in text)
        assert "hint" not in row["x0_prompt"][-1]["content"]

    out = trainer._generate_and_score_completions(batch)
    _, contexts = trainer._nudge(batch)  # same step, same groups: the same nudges
    tok = trainer.processing_class
    for ids, mask in zip(out["x0_prompt_ids"], out["x0_prompt_mask"]):
        x0 = tok.decode(ids[mask.bool()])
        assert "hint" not in x0 and "find the next term" in x0
    rewards = trainer._last_rewards_per_func.sum(dim=1).numpy()
    expected = np.concatenate([inter_intra_advantages(rewards[s:s + 4], contexts[s:s + 4], 1.1, True)
                               for s in (0, 4)])
    np.testing.assert_allclose(out["advantages"].numpy(), expected, atol=1e-6)
    assert {"nudge/frac_hinted", "nudge/abs_intra", "nudge/abs_inter"} <= set(trainer._metrics["train"])


@pytest.mark.parametrize("p_drop", [0.0, 0.5])
def test_distillation_term_matches_direct_log_probs(tiny_model_dir, tmp_path, p_drop):
    """With p_drop > 0 the loss reuses the RL forward for hint-free rows (x0 = x1); the
    term must still equal log pi(y | x0) computed directly for every row."""
    nudge = NudgeRLConfig(M=2, K=2, p_drop=p_drop, lambda_distill=0.1)
    trainer, batch = _trainer(tiny_model_dir, tmp_path, nudge)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop in real runs
    trainer.state.global_step = 3  # another step's nudges
    out = trainer._generate_and_score_completions(batch)
    if p_drop:
        assert 0 < int(out["hinted"].sum()) < len(batch)  # both kinds of row are exercised
    out["advantages"] = torch.linspace(-1, 1, len(batch))  # any advantages; the term is linear in them
    model = trainer.model
    got = trainer.x0_sequence_logps(model, out)
    # Direct: log softmax over the concatenation x0 + y, completion positions only.
    for i in range(len(batch)):
        p_ids = out["x0_prompt_ids"][i][out["x0_prompt_mask"][i].bool()]
        c_ids = out["completion_ids"][i][out["completion_mask"][i].bool()]
        ids = torch.cat([p_ids, c_ids]).unsqueeze(0)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(p_ids) - 1 : -1]
        lp = torch.log_softmax(logits.float() / trainer.temperature, dim=-1)
        direct = lp.gather(1, c_ids.unsqueeze(1)).squeeze(1).mean()
        assert got[i].item() == pytest.approx(direct.item(), abs=1e-4)
    # The loss adds exactly lambda_distill * mean(-A * logp) on top of GRPO's loss.
    with torch.no_grad():
        full = trainer._compute_loss(model, out)
        trainer.nudge.lambda_distill = 0.0
        rl_only = trainer._compute_loss(model, out)
    expected = 0.1 * (-out["advantages"] * got.detach()).mean()
    assert (full - rl_only).item() == pytest.approx(expected.item(), abs=1e-5)


def test_refuses_vllm_server_mode_and_bad_shapes(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="server"):
        _trainer(tiny_model_dir, tmp_path, NudgeRLConfig(M=2, K=2), use_vllm=True, vllm_mode="server")
    with pytest.raises(ValueError, match="hint_sampler"):
        _trainer(tiny_model_dir, tmp_path, NudgeRLConfig(M=2, K=2, hint_sampler="best"))
