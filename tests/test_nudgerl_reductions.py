"""NudgeRL reduces to what it is built from (tiny model, seconds each):

- p_drop = 1 and lambda_distill = 0 is GRPO-N: the same advantages up to the known factor
  (population vs sample std, and the epsilon), and after a few steps the same weights;
- the distillation term's gradient is lambda_distill times that of mean(-A * mean_t log pi(y | x0));
- on the first pass over a generation hinted rows' log-ratio is exactly 0 (old log-probs were
  taken on the hinted prompt x1), and not on the second pass (num_iterations = 2);
- x0's token ids are the evaluation prompt's, for the organism and for every real template;
- a group straddling two processes gets the same nudges on both (one source of randomness).
"""

import numpy as np
import pytest
import torch
from trl import GRPOTrainer

from nudgerl.evaluation.benchmarks import build_prompts
from nudgerl.organism import task
from nudgerl.data.prompts import BUILTIN_TEMPLATES, organism_apply_hint
from nudgerl.training.grpo import build_trainer
from nudgerl.training.grpo_config import GRPORunConfig
from nudgerl.training.nudgerl import NudgeRLConfig, NudgeRLTrainer

HINTS = [task.STRATEGIES["difference_table"].hint, task.STRATEGIES["common_difference"].hint]


def parity_reward(prompts, completions, **kwargs):
    """A reward with mixed groups even for a random model: is the completion's length odd?"""
    return [float(len(c[0]["content"] if isinstance(c, list) else c) % 2) for c in completions]


def _records(n=4):
    return [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id, "hints": HINTS}
            for p in task.training_problems(0, n, 1.0)]


def _cfg(N, **kw):
    return GRPORunConfig(num_generations=N, prompts_per_step=2, max_completion_length=12, learning_rate=0.05,
                         checkpoint_every=1000, **kw)


def _nudgerl(model_dir, run_dir, nudge, cfg, trainer_cls=NudgeRLTrainer, records=None):
    return build_trainer(trainer_cls, model_dir, records or _records(), cfg, run_dir, nudge=nudge,
                         apply_hint=organism_apply_hint, reward_funcs=[parity_reward])


def _batch(records, N):
    return [records[i // N] for i in range(2 * N)]  # what TRL's RepeatSampler yields


def _weights(trainer):
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def test_all_dropped_and_no_distillation_is_grpo(tiny_model_dir, tmp_path):
    N = 4
    nudge = NudgeRLConfig(M=2, K=2, p_drop=1.0, lambda_distill=0.0)
    nud = _nudgerl(tiny_model_dir, tmp_path / "n", nudge, _cfg(N, max_steps=3))
    grpo = build_trainer(GRPOTrainer, tiny_model_dir, _records(), _cfg(N, max_steps=3), tmp_path / "g",
                         reward_funcs=[parity_reward])
    batch = _batch(_records(), N)
    for t in (nud, grpo):
        t.model.train()
    torch.manual_seed(0)
    a = nud._generate_and_score_completions(batch)
    torch.manual_seed(0)
    b = grpo._generate_and_score_completions(batch)
    assert torch.equal(a["completion_ids"], b["completion_ids"])  # no hint: the same prompts, the same samples
    assert not a["hinted"].any()
    rewards = nud._last_rewards_per_func.sum(dim=1).view(-1, N)
    assert ((rewards.std(dim=1) > 0).sum() >= 1), "the test needs a group with mixed rewards"
    # NudgeRL: (r - mean) / (population std + 1e-5); TRL's GRPO: (r - mean) / (sample std + 1e-4),
    # each written out here per group from the rewards
    centred = (rewards - rewards.mean(dim=1, keepdim=True)).flatten()
    population = rewards.std(dim=1, unbiased=False).repeat_interleave(N)
    np.testing.assert_allclose(a["advantages"].numpy(), (centred / (population + 1e-5)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b["advantages"].numpy(), (centred / (rewards.std(dim=1).repeat_interleave(N) + 1e-4))
                               .numpy(), rtol=1e-5, atol=1e-6)
    factor = ((rewards.std(dim=1) + 1e-4) / (rewards.std(dim=1, unbiased=False) + 1e-5)).repeat_interleave(N)
    mixed = rewards.std(dim=1).repeat_interleave(N) > 0
    np.testing.assert_allclose(a["advantages"][mixed].numpy(), (b["advantages"] * factor)[mixed].numpy(), rtol=1e-5)
    assert torch.all(a["advantages"][~mixed] == 0) and torch.all(b["advantages"][~mixed] == 0)

    # Adam is invariant to a constant gradient scale (up to its epsilon): the runs stay together
    # (each trainer seeds torch when it is built: build and train one, then the other). Adam's
    # update ignores a constant gradient scale except through its epsilon, which matters for
    # the tiny gradients of rarely used embedding rows, and clipping would rescale one run's
    # steps and not the other's: epsilon near 0 and no clipping here.
    no_clip = {"max_grad_norm": 0.0, "adam_epsilon": 1e-15}
    nud2 = _nudgerl(tiny_model_dir, tmp_path / "n2", nudge, _cfg(N, max_steps=3, extra=no_clip))
    nud2.train()
    grpo2 = build_trainer(GRPOTrainer, tiny_model_dir, _records(), _cfg(N, max_steps=3, extra=no_clip),
                          tmp_path / "g2", reward_funcs=[parity_reward])
    start = _weights(grpo2)
    grpo2.train()
    wa, wb = _weights(nud2), _weights(grpo2)
    assert any(not torch.equal(wb[k], start[k]) for k in wb)  # GRPO did move the weights
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5)


def test_distillation_gradient_is_lambda_times_the_x0_term(tiny_model_dir, tmp_path):
    nudge = NudgeRLConfig(M=2, K=2, p_drop=0.5, lambda_distill=0.3)
    trainer = _nudgerl(tiny_model_dir, tmp_path, nudge, _cfg(4, max_steps=1))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    out = trainer._generate_and_score_completions(_batch(_records(), 4))
    assert 0 < int(out["hinted"].sum()) < len(out["hinted"])  # hinted and hint-free rows both occur
    model = trainer.model
    params = [p for p in model.parameters() if p.requires_grad]

    def grads(loss):
        return torch.autograd.grad(loss, params, allow_unused=True)

    full = grads(trainer._compute_loss(model, out))
    trainer.nudge.lambda_distill = 0.0
    rl_only = grads(trainer._compute_loss(model, out))
    # the x0 term written out directly: mean_i(-A_i * mean_t log pi(y_i,t | x0, y_i,<t))
    terms = []
    for i in range(len(out["hinted"])):
        p_ids = out["x0_prompt_ids"][i][out["x0_prompt_mask"][i].bool()]
        c_ids = out["completion_ids"][i][out["completion_mask"][i].bool()]
        logits = model(input_ids=torch.cat([p_ids, c_ids]).unsqueeze(0)).logits[0, len(p_ids) - 1: -1]
        lp = torch.log_softmax(logits.float() / trainer.temperature, dim=-1).gather(1, c_ids.unsqueeze(1)).mean()
        terms.append(-out["advantages"][i] * lp)
    direct = grads(torch.stack(terms).mean())
    checked = 0
    for f, r, d in zip(full, rl_only, direct):
        if d is None:
            continue
        torch.testing.assert_close(f - r, 0.3 * d, rtol=1e-4, atol=1e-6)
        checked += int(d.abs().sum() > 0)
    assert checked > 0


class _LogRatioProbe(NudgeRLTrainer):
    """Records, before each loss, the hinted rows' log pi_now(y | prompt) - old log-prob."""

    probes: list

    def _compute_loss(self, model, inputs):
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        with torch.no_grad():
            now, _, _ = self._get_per_token_logps_and_entropies(model, ids, mask, inputs["completion_ids"].size(1))
        diff = (now - inputs["old_per_token_logps"]) * inputs["completion_mask"]
        self.probes.append(diff[inputs["hinted"]].abs().max().item() if inputs["hinted"].any() else None)
        return super()._compute_loss(model, inputs)


def test_hinted_log_ratio_is_zero_on_the_first_pass_only(tiny_model_dir, tmp_path):
    nudge = NudgeRLConfig(M=2, K=2, p_drop=0.25, lambda_distill=0.1)
    trainer = _nudgerl(tiny_model_dir, tmp_path, nudge, _cfg(4, max_steps=4, num_iterations=2),
                       trainer_cls=_LogRatioProbe)
    trainer.probes = []
    trainer.train()
    first, second = trainer.probes[0::2], trainer.probes[1::2]  # one generation per two optimizer steps
    assert len(first) == 2 and all(p is not None for p in first + second)
    assert all(p == 0.0 for p in first)  # old log-probs were taken on x1, with the same weights
    assert all(p > 0 for p in second)  # after an update the same rows are off-policy


def _byte_tokenizer():
    """A real HF tokenizer with a ChatML template (system turns too) and byte-level BPE with no
    merges: ids are equal exactly when the texts are."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(alphabet))}
    for special in ("<pad>", "<|im_start|>", "<|im_end|>"):
        vocab[special] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>",
                                   bos_token="<|im_start|>", additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


def _x0_ids_of(tok, x0_prompts):
    """The trainer's own x0 encoding (it reads only the tokenizer)."""
    class Trainer:
        processing_class = tok

    return NudgeRLTrainer._x0_ids(Trainer(), x0_prompts, "cpu")


@pytest.mark.parametrize("template", ["organism", *sorted(t for t in BUILTIN_TEMPLATES if t != "organism")])
def test_x0_is_the_evaluation_prompt(tiny_model_dir, template):
    from transformers import AutoTokenizer

    problems = [p.to_record() for p in task.training_problems(0, 3, 0.5)]
    problems.append({"id": "braces", "problem": r"Find $\{x\}$ if $f(x)=\frac{x}{2}$.", "answer": "1"})
    t = BUILTIN_TEMPLATES[template]
    tok = AutoTokenizer.from_pretrained(tiny_model_dir) if template == "organism" else _byte_tokenizer()
    x0 = [t.messages(p["problem"]) for p in problems]  # what the trainer keeps as x0 (nudgerl.training.cli._problem_records)
    if t.hint_block is not None:  # x1 and back: the hint must leave no trace in x0
        assert all(t.apply_hint(m, "use the shoelace formula") != m for m in x0)
    ids, mask = _x0_ids_of(tok, x0)
    evaluated = build_prompts(tok, problems, template=None if template == "organism" else t)
    for row, m, text, messages, p in zip(ids, mask, evaluated, x0, problems):
        assert row[m.bool()].tolist() == tok(text, add_special_tokens=False)["input_ids"]
        # and both are the chat written out by hand (the organism's template: "<|im_start|> role
        # content <|im_end|> " turns; _byte_tokenizer's: ChatML with newlines), the problem verbatim
        if template == "organism":
            by_hand = f"<|im_start|> user {p['problem']} <|im_end|> <|im_start|> assistant "
        else:
            by_hand = "".join(f"<|im_start|>{x['role']}\n{x['content']}<|im_end|>\n" for x in messages)
            by_hand += "<|im_start|>assistant\n"
            assert p["problem"] in messages[-1]["content"] and [x["role"] for x in messages][-1] == "user"
        assert text == by_hand
        assert row[m.bool()].tolist() == tok(by_hand, add_special_tokens=False)["input_ids"]


def _expected_nudges(rows: list[dict], seed: int, step: int, nudge: NudgeRLConfig, N: int):
    """The nudges of a generation batch worked out again from the rule the trainer documents: group
    g (rows g*N .. g*N + N - 1) draws from numpy's generator seeded [run seed, step, g], first its M
    hints (hint_sampler random: M pool indices without replacement, in pool order), then one drop
    per rollout (uniform < p_drop); rollout r of a group gets picked hint r // K unless dropped.
    Returns each row's (context, prompt), the hint written in front of the problem by hand."""
    out = []
    for g in range(len(rows) // N):
        rng = np.random.default_rng([seed, step, g])
        pool = rows[g * N]["hints"]
        hints = [pool[i] for i in sorted(rng.choice(len(pool), size=nudge.M, replace=False))]
        drop = rng.random(N) < nudge.p_drop
        for r, row in enumerate(rows[g * N: (g + 1) * N]):
            (message,) = row["prompt"]
            context = None if drop[r] else r // nudge.K
            content = message["content"] if context is None else f"hint : {hints[context]} . {message['content']}"
            out.append((context, [{**message, "content": content}]))
    return out


def test_a_group_straddling_two_processes_gets_one_set_of_nudges(tiny_model_dir, tmp_path):
    """Two processes of 6 rows each, N = 4: the second group is split 2 | 2. Each process
    nudges the gathered batch and keeps its slice; both halves of the split group carry the
    nudges of one draw for the whole group (worked out by hand from the seeding rule)."""
    nudge = NudgeRLConfig(M=2, K=2, p_drop=0.5, hint_sampler="random")
    records = [{**r, "hints": [s.hint for s in task.STRATEGIES.values()]} for r in _records(3)]
    trainer = _nudgerl(tiny_model_dir, tmp_path, nudge, _cfg(4, max_steps=1), records=records)
    everyone = [records[i // 4] for i in range(12)]
    expected = {step: _expected_nudges(everyone, trainer.args.seed, step, nudge, 4) for step in (6, 8)}
    for step in (6, 8):
        trainer.state.global_step = step
        for rank in (0, 1):  # each process receives every row from the gather, keeps its own slice
            rows, ctx, all_ctx = trainer._nudge_slice(everyone, rank, 6)
            mine = expected[step][6 * rank: 6 * rank + 6]
            assert ctx == [c for c, _ in mine] and all_ctx == [c for c, _ in expected[step]], (step, rank)
            assert [r["prompt"] for r in rows] == [p for _, p in mine], (step, rank)
            assert all(r["x0_prompt"] == e["prompt"] for r, e in zip(rows, everyone[6 * rank:]))
    # the case is not trivial: at step 6 the split group has hinted rows on both processes, two hints
    # among them, and a dropped one; the next step's nudges are other ones
    group = [c for c, _ in expected[6][4:8]]
    assert {c for c in group[:2] if c is not None} and {c for c in group[2:] if c is not None}, group
    assert len({p[0]["content"] for c, p in expected[6][4:8] if c is not None}) == 2 and None in group, group
    assert [c for c, _ in expected[8]] != [c for c, _ in expected[6]]
