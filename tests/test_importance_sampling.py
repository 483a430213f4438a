"""The vLLM importance-sampling correction is configurable, and the authors' per-token clamp
differs from TRL 1.16's default on a batch built so that the two disagree.

TRL computes the correction inside ``GRPOTrainer._generate_and_score_completions`` from the
log-probs vLLM reports. Here those log-probs are scripted, chosen per token, and TRL's own code
does the rest on a real trainer of the tiny model: the test needs a planted mismatch (a ratio of
4 on one token), and a real engine cannot be asked for one (vLLM's CPU build in float32 matches
the policy to 5e-7 nats). The real engine's ratios, under both modes, are tested in
tests/test_vllm_cpu.py (the mass top-p keeps, per token and per completion)."""

import math

import pytest
import torch
import trl

from nudgerl.training.grpo import build_trainer
from nudgerl.training.grpo_config import GRPORunConfig

PROMPT = [{"role": "user", "content": "find the next term mod 10 : 1 2 3 4"}]
# Two rollouts of one prompt: the first 5 tokens long, the second 3.
COMPLETIONS = [["answer", ":", "5", ".", "done"], ["answer", ":", "7"]]


class ScriptedVLLMOutput:
    """Answers like TRL's colocated vLLM generation: one completion per rollout prompt and the
    sampler's log-prob of each token, as given."""

    def __init__(self, completion_ids, logprobs):
        self.completion_ids, self.logprobs = completion_ids, logprobs

    def sync_weights(self):
        pass

    def generate(self, prompts, images, num_generations, profiler=None):
        assert len(prompts) == len(self.completion_ids)
        top1 = [[[lp] for lp in seq] for seq in self.logprobs]
        return prompts, self.completion_ids, top1, None


def _trainer(tiny_model_dir, tmp_path, **is_options):
    rows = [{"prompt": PROMPT, "answer": "5", "id": "p0"}]
    cfg = GRPORunConfig(num_generations=2, prompts_per_step=1, max_steps=1, max_completion_length=8, **is_options)
    trainer = build_trainer(trl.GRPOTrainer, tiny_model_dir, rows, cfg, tmp_path)
    trainer.model.train()
    # as if TRL had started its colocated vLLM engine: what it does then is TRL's own code
    trainer.use_vllm, trainer._last_loaded_step = True, trainer.state.global_step
    return trainer


def _scored(trainer, logprobs):
    tok = trainer.processing_class
    ids = [tok.convert_tokens_to_ids(c) for c in COMPLETIONS]
    trainer.vllm_generation = ScriptedVLLMOutput(ids, logprobs)
    return trainer._generate_and_score_completions([{"prompt": PROMPT, "answer": "5", "id": "p0"}] * 2)


def _mismatched_logprobs(trainer):
    """vLLM's log-probs: the policy's own (read from TRL's recomputation), except that vLLM
    found token 2 of rollout 0 four times less likely (ratio pi_train / pi_vLLM = 4) and every
    other token 1.1 times more likely (ratio 1/1.1)."""
    zero = [[0.0] * len(c) for c in COMPLETIONS]
    policy = _scored(trainer, zero)["old_per_token_logps"]
    shifted = []
    for i, c in enumerate(COMPLETIONS):
        row = [float(policy[i, t]) + math.log(1.1) for t in range(len(c))]
        if i == 0:
            row[2] = float(policy[i, 2]) - math.log(4.0)
        shifted.append(row)
    return shifted


def test_authors_token_clamp_and_trl_sequence_mask_differ(tiny_model_dir, tmp_path):
    authors = _trainer(tiny_model_dir, tmp_path / "authors",
                       vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_max=2.0)
    default = _trainer(tiny_model_dir, tmp_path / "default")  # TRL 1.16: sequence_mask, cap 3
    assert (authors.vllm_importance_sampling_mode, authors.vllm_importance_sampling_clip_max) == ("token_truncate", 2.0)
    assert (default.vllm_importance_sampling_mode, default.vllm_importance_sampling_clip_max) == ("sequence_mask", 3.0)
    logprobs = _mismatched_logprobs(authors)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)

    token = _scored(authors, logprobs)["importance_sampling_ratio"]
    expected = torch.full((2, 5), 1 / 1.1)
    expected[0, 2] = 2.0  # 4, clamped at the cap
    assert token.shape == (2, 5)
    assert torch.allclose(token[mask], expected[mask], rtol=1e-4)  # padding carries no loss

    sequence = _scored(default, logprobs)["importance_sampling_ratio"]
    # one ratio per rollout: rollout 0's is 4 / 1.1^4 = 2.73 < 3, kept; rollout 1's 1.1^-3
    assert sequence.shape == (2, 1)
    assert torch.allclose(sequence[:, 0], torch.tensor([4 / 1.1**4, 1.1**-3]), rtol=1e-4)


def test_a_long_mismatch_drops_the_whole_sequence_under_trls_default(tiny_model_dir, tmp_path):
    """Over a long completion the per-token ratios multiply: TRL's default masks the whole
    rollout (weight 0 on every token), the authors' clamp keeps every token's weight near 1."""
    authors = _trainer(tiny_model_dir, tmp_path / "authors",
                       vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_max=2.0)
    default = _trainer(tiny_model_dir, tmp_path / "default")
    zero = [[0.0] * len(c) for c in COMPLETIONS]
    policy = _scored(authors, zero)["old_per_token_logps"]
    # every token 1.3x more likely under the policy than under vLLM: 1.3^5 = 3.7 > 3 for rollout 0
    logprobs = [[float(policy[i, t]) - math.log(1.3) for t in range(len(c))] for i, c in enumerate(COMPLETIONS)]
    token = _scored(authors, logprobs)["importance_sampling_ratio"]
    sequence = _scored(default, logprobs)["importance_sampling_ratio"]
    assert torch.allclose(token[0], torch.full((5,), 1.3), rtol=1e-4)
    assert sequence[0, 0] == 0.0 and sequence[1, 0] == pytest.approx(1.3**3, rel=1e-4)


def test_importance_sampling_keys_are_validated_by_the_schema():
    from nudgerl.config import ConfigError, load_schema, validate_config

    import yaml

    from conftest import REPO

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["grpo"]["vllm_importance_sampling_mode"] = "token_clamp"
    with pytest.raises(ConfigError, match="grpo.vllm_importance_sampling_mode"):
        validate_config(config)
    assert "token_truncate" in load_schema()["properties"]["grpo"]["properties"]["vllm_importance_sampling_mode"]["enum"]
