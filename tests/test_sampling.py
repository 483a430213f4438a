"""The transformers backend's static KV cache changes speed, not results (tiny model, seconds):
the same sampled and greedy tokens, and the same per-step logits, as transformers' dynamic cache
on left-padded prompts of different lengths, the same execution-check generations, and the same
GRPO weights after a few steps.

The model is random but not flat: weights drawn at std 0.5 (not the initializer's 0.02, whose
logits are near uniform and whose greedy output repeats one word whatever the prompt) give
peaked, context-dependent next-token distributions, so a cache that puts a key or value one
position off changes the tokens, not just the fifth decimal of a logit."""

import pytest
import torch
from conftest import save_tiny_model
from trl import GRPOTrainer

from nudgerl.evaluation import sampling
from nudgerl.evaluation.sampling import SamplingParams, generate, load_policy
from nudgerl.organism import task
from nudgerl.organism.checks import execution_check
from nudgerl.training.grpo import build_trainer
from nudgerl.training.grpo_config import GRPORunConfig

STATIC = {"cache_implementation": "static", "disable_compile": True}


@pytest.fixture(scope="module")
def peaked_model_dir(tmp_path_factory):
    """conftest's tiny random model with its weights redrawn at std 0.5 (norms kept at one)."""
    path = save_tiny_model(tmp_path_factory.mktemp("peaked"))
    model, tokenizer = load_policy(path)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.5)
    model.save_pretrained(path)
    return path


def _prompts(tokenizer, n=6):
    # problems of different lengths, some hinted: the batch is left-padded to different widths
    problems = task.validation_problems(0, n)
    hints = [None, "difference_table", None, "common_difference", None, "sum_of_last_two"]
    return [sampling.chat_prompt(tokenizer, task.prompt_text(p.text(), task.hint_line(h) if h else None))
            for p, h in zip(problems, hints)]


def _generate_with(monkeypatch, cache: dict, model, tokenizer, prompts, params):
    monkeypatch.setattr(sampling, "GENERATE_CACHE", cache)
    return generate(model, tokenizer, prompts, params)


def test_static_cache_samples_the_same_tokens(peaked_model_dir, monkeypatch):
    model, tokenizer = load_policy(peaked_model_dir)
    prompts = _prompts(tokenizer)
    assert len({len(tokenizer(p)["input_ids"]) for p in prompts}) > 1  # padding differs across rows
    for params in (SamplingParams(n=4, max_new_tokens=20, batch_size=8, seed=3),  # sampled, 3 batches
                   SamplingParams(n=1, temperature=0.0, max_new_tokens=20, batch_size=6)):  # greedy
        static = _generate_with(monkeypatch, STATIC, model, tokenizer, prompts, params)
        dynamic = _generate_with(monkeypatch, {}, model, tokenizer, prompts, params)
        assert static == dynamic
        # not degenerate: what is written depends on the prompt (greedy too), in many words
        assert len({row[0][0] for row in dynamic}) >= len(prompts) - 1, dynamic
        assert len({w for row in dynamic for text, _ in row for w in text.split()}) >= 10, dynamic


def test_static_cache_gives_the_same_logits(peaked_model_dir):
    """Token by token, the logits themselves (not only the tokens they pick) agree."""
    model, tokenizer = load_policy(peaked_model_dir)
    enc = tokenizer(_prompts(tokenizer), return_tensors="pt", padding=True, add_special_tokens=False)
    logits = {}
    for name, cache in (("static", STATIC), ("dynamic", {})):
        with torch.no_grad():
            out = model.generate(**enc, do_sample=False, max_new_tokens=16, output_logits=True,
                                 return_dict_in_generate=True, pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=tokenizer.eos_token_id, **cache)
        logits[name] = torch.stack(out.logits, dim=1)  # (prompt, step, vocab)
    assert logits["static"].shape == logits["dynamic"].shape
    gap = (logits["static"] - logits["dynamic"]).abs().max().item()
    assert gap < 1e-4, f"static and dynamic cache logits differ by up to {gap}"
    # peaked, prompt-dependent distributions: a key one position off moves them by far more than 1e-4
    probs = torch.softmax(logits["dynamic"], dim=-1)
    assert probs.max(dim=-1).values.mean() > 0.4
    assert (logits["dynamic"][0, 0] - logits["dynamic"][1:, 0]).abs().amax(dim=-1).min() > 0.1


def test_execution_check_is_unchanged_by_the_cache(peaked_model_dir, monkeypatch):
    """The check's scores are 0 for any untrained model, so the greedy generations it grades
    are compared as well (each generate call's token ids)."""
    from nudgerl.organism import checks  # execution_check reads GENERATE_CACHE there

    model, tokenizer = load_policy(peaked_model_dir)
    problems = task.validation_problems(1, 8)
    model_generate = model.generate
    scores, generated = {}, {}
    for name, cache in (("static", checks.GENERATE_CACHE), ("dynamic", {})):
        monkeypatch.setattr(checks, "GENERATE_CACHE", cache)
        calls = generated[name] = []  # each call's completions (the token ids after the padded prompts)

        def spy(*args, calls=calls, **kwargs):
            out = model_generate(*args, **kwargs)
            calls.append(out[:, kwargs["input_ids"].shape[1]:])
            return out

        monkeypatch.setattr(model, "generate", spy)
        scores[name] = execution_check(model, tokenizer, problems, batch_size=5)
    assert len(generated["static"]) == len(generated["dynamic"]) == 2 * len(task.STRATEGIES)  # 2 batches each
    for static, dynamic in zip(generated["static"], generated["dynamic"]):
        assert torch.equal(static, dynamic)
    rows = {tuple(row) for out in generated["dynamic"] for row in out.tolist()}
    assert len(rows) >= 3 * len(problems)  # not one trace written whatever the problem and hint
    assert scores["static"] == scores["dynamic"]


def parity_reward(prompts, completions, **kwargs):
    """Mixed groups even for a random model: is the completion's length odd?"""
    return [float(len(c[0]["content"] if isinstance(c, list) else c) % 2) for c in completions]


def test_grpo_weights_are_unchanged_by_the_cache(peaked_model_dir, tmp_path):
    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
               for p in task.training_problems(0, 4, 1.0)]
    weights = {}
    for cache in ("static", None):
        cfg = GRPORunConfig(num_generations=4, prompts_per_step=2, max_completion_length=12, learning_rate=0.05,
                            checkpoint_every=1000, max_steps=3, cache_implementation=cache)
        trainer = build_trainer(GRPOTrainer, peaked_model_dir, records, cfg, tmp_path / str(cache),
                                reward_funcs=[parity_reward])
        assert trainer.generation_config.cache_implementation == cache
        trainer.train()
        weights[cache] = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    start = load_policy(peaked_model_dir)[0].state_dict()
    assert any(not torch.equal(start[k], v) for k, v in weights["static"].items())  # it trained
    assert all(torch.equal(weights["static"][k], weights[None][k]) for k in weights[None])
