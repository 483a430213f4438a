"""Same seed, same artefacts; another seed, other artefacts (CPU)."""

import torch

from nudgerl.organism import task
from nudgerl.organism.base_model import BaseModelConfig, train_base_model
from nudgerl.sampling import SamplingParams, chat_prompt, generate, load_policy

TINY = dict(examples=128, epochs=1.0, arithmetic_drills=1, drill_epochs=1.0, arithmetic_replay=0,
            hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, batch_size=32, warmup_steps=2)


def _weights(path):
    model, _ = load_policy(str(path))
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_base_model_and_samples_are_seeded(tmp_path):
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        train_base_model(BaseModelConfig(seed=seed, **TINY), tmp_path / name, log=lambda s: None)
    a, b, c = (_weights(tmp_path / n) for n in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)

    model, tok = load_policy(str(tmp_path / "a"))
    prompts = [chat_prompt(tok, p.text()) for p in task.training_problems(0, 4, 0.5)]
    first = generate(model, tok, prompts, SamplingParams(n=4, seed=3))
    assert first == generate(model, tok, prompts, SamplingParams(n=4, seed=3))
    assert first != generate(model, tok, prompts, SamplingParams(n=4, seed=4))
