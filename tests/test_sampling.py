"""The transformers backend's static KV cache changes speed, not results (tiny model, seconds):
the same sampled and greedy tokens as transformers' dynamic cache on left-padded prompts of
different lengths, and the same GRPO weights after a few steps."""

import torch
from trl import GRPOTrainer

from nudgerl.evaluation import sampling
from nudgerl.evaluation.sampling import SamplingParams, generate, load_policy
from nudgerl.organism import task
from nudgerl.organism.checks import execution_check
from nudgerl.training.grpo import build_trainer
from nudgerl.training.grpo_config import GRPORunConfig


def _prompts(tokenizer, n=6):
    # problems of different lengths, some hinted: the batch is left-padded to different widths
    problems = task.validation_problems(0, n)
    hints = [None, "difference_table", None, "common_difference", None, "sum_of_last_two"]
    return [sampling.chat_prompt(tokenizer, task.prompt_text(p.text(), task.hint_line(h) if h else None))
            for p, h in zip(problems, hints)]


def _generate_with(monkeypatch, cache: dict, model, tokenizer, prompts, params):
    monkeypatch.setattr(sampling, "GENERATE_CACHE", cache)
    return generate(model, tokenizer, prompts, params)


def test_static_cache_samples_the_same_tokens(tiny_model_dir, monkeypatch):
    model, tokenizer = load_policy(tiny_model_dir)
    prompts = _prompts(tokenizer)
    assert len({len(tokenizer(p)["input_ids"]) for p in prompts}) > 1  # padding differs across rows
    for params in (SamplingParams(n=4, max_new_tokens=20, batch_size=8, seed=3),  # sampled, 3 batches
                   SamplingParams(n=1, temperature=0.0, max_new_tokens=20, batch_size=6)):  # greedy
        static = _generate_with(monkeypatch, {"cache_implementation": "static", "disable_compile": True},
                                model, tokenizer, prompts, params)
        dynamic = _generate_with(monkeypatch, {}, model, tokenizer, prompts, params)
        assert static == dynamic
        if params.temperature > 0:  # not one degenerate completion (greedy, the random model repeats one word)
            assert len({t for row in static for t, _ in row}) > 1


def test_execution_check_is_unchanged_by_the_cache(tiny_model_dir, monkeypatch):
    from nudgerl.organism import checks  # execution_check reads GENERATE_CACHE there

    model, tokenizer = load_policy(tiny_model_dir)
    problems = task.validation_problems(1, 8)
    scores = {}
    for name, cache in (("static", checks.GENERATE_CACHE), ("dynamic", {})):
        monkeypatch.setattr(checks, "GENERATE_CACHE", cache)
        scores[name] = execution_check(model, tokenizer, problems, batch_size=5)
    assert scores["static"] == scores["dynamic"]


def parity_reward(prompts, completions, **kwargs):
    """Mixed groups even for a random model: is the completion's length odd?"""
    return [float(len(c[0]["content"] if isinstance(c, list) else c) % 2) for c in completions]


def test_grpo_weights_are_unchanged_by_the_cache(tiny_model_dir, tmp_path):
    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
               for p in task.training_problems(0, 4, 1.0)]
    weights = {}
    for cache in ("static", None):
        cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_completion_length=12, learning_rate=0.05,
                            checkpoint_every=1000, max_steps=3, cache_implementation=cache)
        trainer = build_trainer(GRPOTrainer, tiny_model_dir, records, cfg, tmp_path / str(cache),
                                reward_funcs=[parity_reward])
        assert trainer.generation_config.cache_implementation == cache
        trainer.train()
        weights[cache] = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    start = load_policy(tiny_model_dir)[0].state_dict()
    assert any(not torch.equal(start[k], v) for k, v in weights["static"].items())  # it trained
    assert all(torch.equal(weights["static"][k], weights[None][k]) for k in weights[None])
