"""The model organism: answers, traces, splits, parser, tokenizer."""

import pytest

from nudgerl.evaluation.grading import grade
from nudgerl.organism import task
from nudgerl.organism.tokenizer import build_tokenizer


def all_problems():
    return [task._problem(c, "p") for h in (True, False) for c in task._coeff_space(h)]


def test_every_correct_strategy_trace_reaches_the_answer():
    checked = 0
    for p in all_problems():
        for s in task.STRATEGIES:
            if task.is_correct_strategy(p, s):
                assert grade(task.trace(p.terms, s), str(p.answer)) == 1.0, (p, s)
                checked += 1
    assert checked > len(all_problems())  # easy problems have several correct strategies


def test_only_the_rare_strategy_solves_hard_problems():
    for p in all_problems():
        correct = {s for s in task.STRATEGIES if task.is_correct_strategy(p, s)}
        assert task.RARE_CORRECT_STRATEGY in correct
        if p.hard:
            assert correct == {task.RARE_CORRECT_STRATEGY}
        else:
            assert task.DOMINANT_STRATEGY in correct


def test_wrong_strategy_trace_is_graded_wrong():
    p = next(p for p in all_problems() if p.hard)
    assert grade(task.trace(p.terms, task.DOMINANT_STRATEGY), str(p.answer)) == 0.0


def test_trace_steps_are_true_arithmetic():
    for p in all_problems()[::7]:
        for s in task.STRATEGIES:
            for step in task.solve(p.terms, s)[0]:
                lhs, rhs = step.split(" = ")
                x, op, y = lhs.split()
                assert (int(x) + int(y) if op == "+" else int(x) - int(y)) % task.MODULUS == int(rhs)


def test_parser_recovers_each_strategy():
    p = all_problems()[0]
    for s in task.STRATEGIES:
        assert task.parse_strategy(task.trace(p.terms, s)) == s
        assert task.hint_strategy(task.hint_line(s)) == s
    assert task.parse_strategy("garbage") == "unknown"


def test_splits_are_seeded_and_disjoint():
    specs = {"a": (20, 0.8), "b": (20, 0.5), "c": (10, 1.0)}
    sets = task.evaluation_sets(0, specs)
    assert sets == task.evaluation_sets(0, specs)
    assert sets != task.evaluation_sets(1, specs)
    coeffs = [p.coeffs for ps in sets.values() for p in ps]
    assert len(coeffs) == len(set(coeffs)), "benchmarks share a problem"
    assert sum(p.hard for p in sets["c"]) == 10 and sum(p.hard for p in sets["a"]) == 16
    train = task.training_problems(0, 500, 0.7)
    assert not {p.coeffs for p in train} & set(coeffs), "a held-out problem is in training"
    assert sum(p.hard for p in train) == 350


def test_too_many_eval_problems_is_a_clear_error():
    with pytest.raises(ValueError, match="benchmark 'x' needs"):
        task.evaluation_sets(0, {"x": (10_000, 1.0)})


def test_tokenizer_covers_every_prompt_and_trace():
    tok = build_tokenizer()
    p = max(all_problems(), key=lambda q: q.answer)
    texts = [task.trace(p.terms, s) for s in task.STRATEGIES]
    texts += [task.prompt_text(p.text(), task.hint_line(s)) for s in task.STRATEGIES]
    texts += [" ".join(task.drill(f)) for f in task.arithmetic_facts()[:50]]
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids, text
        assert tok.decode(ids) == text
    prompt = tok.apply_chat_template([{"role": "user", "content": "find"}], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|> assistant ")


def test_validation_problems_are_never_trained_on_nor_benchmarks():
    val = task.validation_problems(0, 1000)
    assert len(val) > 60 and all(task.is_validation(p.coeffs) for p in val)
    trained = {p.coeffs for p in task.training_problems(0, 5000, 0.7)}
    held = {p.coeffs for ps in task.evaluation_sets(0, {"a": (100, 0.8)}).values() for p in ps}
    assert not {p.coeffs for p in val} & (trained | held)
    assert task.MAX_TRACE_TOKENS > max(len(task.trace(p.terms, s).split()) for p in val for s in task.STRATEGIES)


def test_packed_batches_give_the_padded_batch_loss():
    """The SFT packs each batch's examples into shared rows; attention stays within each
    example, so the loss is the one of the same examples padded one per row."""
    import torch

    from nudgerl.organism import base_model as bm

    tok = build_tokenizer()
    torch.manual_seed(0)
    model = bm.new_model(tok, bm.BaseModelConfig(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2))
    examples = bm.sft_examples(bm.BaseModelConfig(examples=100, arithmetic_replay=0, chosen_fraction=0.0))[:48]
    batch = bm._Corpus(tok, examples, 48, torch.Generator().manual_seed(0)).next_batch()
    assert batch["input_ids"].shape[0] < 48  # several examples share a row
    seqs, labels = bm._encode(tok, examples)
    width = max(map(len, seqs))
    ids = torch.full((48, width), tok.pad_token_id)
    lab = torch.full((48, width), -100)
    mask = torch.zeros((48, width), dtype=torch.long)
    for i, (s, lb) in enumerate(zip(seqs, labels)):
        ids[i, : len(s)], lab[i, : len(lb)], mask[i, : len(s)] = torch.tensor(s), torch.tensor(lb), 1
    padded = model(input_ids=ids, attention_mask=mask, labels=lab).loss
    assert model(**batch).loss.item() == pytest.approx(padded.item(), rel=1e-5)


def test_execution_check_scores_exact_hinted_traces():
    """A model that has not learned anything executes nothing; the check reports per strategy."""
    import torch

    from nudgerl.organism import base_model as bm

    tok = build_tokenizer()
    torch.manual_seed(0)
    model = bm.new_model(tok, bm.BaseModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))
    scores = bm.execution_check(model, tok, task.validation_problems(0, 4))
    assert scores == {s: 0.0 for s in task.STRATEGIES}
    assert bm.execution_check(model, tok, task.validation_problems(0, 4), chosen=True) == {s: 0.0 for s in task.STRATEGIES}
    prior = bm.unhinted_strategy_prior(model, tok, task.validation_problems(0, 4))
    assert set(prior) == set(task.STRATEGIES) and all(0 <= p <= 1 for p in prior.values())


def test_sft_schedule_anneals_after_a_pass_and_restarts_without_one():
    from nudgerl.organism.sft_schedule import SFTSchedule

    s = SFTSchedule(warmup=10, cycle_steps=100, anneal_steps=20, max_steps=1000)
    assert s.factor(0) == pytest.approx(0.1) and s.factor(10) == pytest.approx(1.0)
    assert s.factor(60) == pytest.approx(0.5)  # half-way down the cosine
    s.passed(60)
    assert s.factor(70) == pytest.approx(0.25) and s.factor(80) == 0.0
    assert not s.done(79) and s.done(80)
    slow = SFTSchedule(warmup=10, cycle_steps=100, anneal_steps=20, max_steps=250)
    factors = [slow.factor(t) for t in range(250)]
    assert slow.restarts == 2 and factors[110] == pytest.approx(0.5) and factors[210] == pytest.approx(0.25)
    assert not slow.done(249) and slow.done(250)
    steady = SFTSchedule(warmup=10, cycle_steps=100, anneal_steps=20, max_steps=250, restart_peak=1.0)
    assert [steady.factor(t) for t in (110, 210)] == pytest.approx([1.0, 1.0]) and steady.restarts == 2


def test_restart_peak_outside_its_range_is_an_error_naming_the_key():
    from nudgerl.organism.base_config import BaseModelConfig

    with pytest.raises(ValueError, match="base_model.restart_peak"):
        BaseModelConfig.from_dict({"restart_peak": 0})


def test_chosen_examples_train_the_rest_of_the_trace_not_the_choice():
    """Unhinted traces with the strategy's choice masked: the steps are trained, the choice
    (and so how often the unhinted policy makes it) is not; chosen_fraction 0 is the old corpus."""
    from nudgerl.organism import base_model as bm

    cfg = bm.BaseModelConfig(examples=400, arithmetic_replay=0, chosen_fraction=0.25)
    examples = bm.sft_examples(cfg)
    chosen = [e for e in examples if len(e) == 3]
    assert 60 <= len(chosen) <= 140 and all("hint" not in user for user, _, _ in chosen)
    assert {choice for _, _, choice in chosen} <= {task.chosen_prefix(s) for s in task.STRATEGIES}
    tok = build_tokenizer()
    user, rest, choice = next(e for e in chosen if e[2] == task.chosen_prefix("difference_table"))
    seqs, labels = bm._encode(tok, [(user, rest, choice)])
    words = tok.convert_ids_to_tokens(seqs[0])
    trained = [w for w, lab in zip(words, labels[0]) if lab != -100]
    # the whole trace is in the sequence, its choice words are not in the loss
    assert " ".join(words).endswith(f"{choice} {rest} <|im_end|>")
    assert trained == tok.convert_ids_to_tokens(tok(rest, add_special_tokens=False)["input_ids"]) + ["<|im_end|>"]
    # without chosen examples every example is a whole trace in the loss
    plain = bm.sft_examples(bm.BaseModelConfig(examples=400, arithmetic_replay=0, chosen_fraction=0.0))
    assert all(len(e) == 2 for e in plain)
    assert [e for e in examples if len(e) == 2][:5] != []


def test_chosen_execution_check_reads_the_trace_after_the_given_choice(tmp_path):
    """The chosen-unhinted check compares choice + greedy rest with the whole trace: a model that
    writes the right rest after the choice scores 1 on it."""
    import torch

    from nudgerl.organism import base_model as bm

    tok = build_tokenizer()
    problems = task.validation_problems(0, 2)
    torch.manual_seed(0)
    model = bm.new_model(tok, bm.BaseModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))
    # teach the tiny model two chosen traces of the table by heart
    examples = [(task.prompt_text(p.text()), task.trace(p.terms, "difference_table")[len(task.chosen_prefix(
        "difference_table")) + 1:], task.chosen_prefix("difference_table")) for p in problems]
    corpus = bm._Corpus(tok, examples, 2, torch.Generator().manual_seed(0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(150):
        batch = corpus.next_batch()
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    chosen = bm.execution_check(model, tok, problems, chosen=True)
    assert chosen["difference_table"] == 1.0
    assert bm.execution_check(model, tok, problems)["difference_table"] < 1.0  # hinted: never trained


def test_a_misexecuted_trace_swaps_the_last_operation_and_is_graded_by_its_answer():
    """The second axis' wrong execution: the same steps but the last, whose + becomes - (or - +),
    carried to the boxed answer; right only where the swapped operand is 0 or 5 (mod 10)."""
    hard = [p for p in all_problems() if not task.is_correct_strategy(p, "common_difference")]
    right = 0
    for p in hard:
        good, bad = task.trace(p.terms, "difference_table"), task.misexecuted_trace(p.terms, "difference_table")
        good_steps, bad_steps = good.split(" . ")[1:-1], bad.split(" . ")[1:-1]
        assert good_steps[:-1] == bad_steps[:-1] and " + " in good_steps[-1] and " - " in bad_steps[-1]
        x, _, y = bad_steps[-1].split(" = ")[0].split()
        assert bad_steps[-1] == f"{x} - {y} = {(int(x) - int(y)) % 10}"  # true arithmetic, the wrong operation
        ok = grade(bad, p.answer) > 0
        assert ok == (int(y) in (0, 5))
        right += ok
    assert 0 < right < 0.5 * len(hard)  # mostly wrong; some right by coincidence


def test_unhinted_rare_accuracy_misexecutes_only_unhinted_always_right_traces_and_pairs_the_corpus():
    """Below accuracy 1, that share of the unhinted difference-table traces (chosen or not) stays
    right and the rest are misexecuted; every other example is the accuracy-1 corpus', in order."""
    from nudgerl.organism import base_model as bm

    settings = dict(examples=3000, arithmetic_replay=0, chosen_fraction=0.15,
                    unhinted_strategy_weights={"common_difference": 0.5, "first_difference": 0.1,
                                               "sum_of_last_two": 0.1, "difference_table": 0.3})
    reference = bm.sft_examples(bm.BaseModelConfig(**settings))
    assert reference == bm.sft_examples(bm.BaseModelConfig(**settings, unhinted_rare_accuracy=1.0))
    flawed = bm.sft_examples(bm.BaseModelConfig(**settings, unhinted_rare_accuracy=0.25))
    assert len(flawed) == len(reference)
    changed, table_unhinted = 0, 0
    for ref, new in zip(reference, flawed):
        user, trace, *choice = ref
        whole = (choice[0] + " " + trace) if choice else trace
        if "hint" in user or task.parse_strategy(whole) != "difference_table":
            assert new == ref  # hinted traces and the other strategies: untouched
            continue
        table_unhinted += 1
        if new != ref:
            changed += 1
            assert new[0] == user and new[2:] == ref[2:]
            assert (choice[0] + " " + new[1] if choice else new[1]).split(" . ")[-2].count(" - ") == 1
    # 75 % misexecuted, binomial: about 1,000 such traces, 4 standard errors either side
    assert table_unhinted > 500 and abs(changed / table_unhinted - 0.75) < 4 * (0.75 * 0.25 / table_unhinted) ** 0.5
    with pytest.raises(ValueError, match="base_model.unhinted_rare_accuracy"):
        bm.BaseModelConfig.from_dict({"unhinted_rare_accuracy": 1.5})


def test_the_chosen_check_counts_a_misexecuted_trace_only_where_the_corpus_teaches_it():
    """A model that writes the misexecuted table after its choice passes the chosen check only
    when the check is told that strategy's corpus is misexecuted (unhinted_rare_accuracy < 1)."""
    import torch

    from nudgerl.organism import base_model as bm

    tok = build_tokenizer()
    problems = task.validation_problems(0, 2)
    prefix = task.chosen_prefix("difference_table")
    torch.manual_seed(0)
    model = bm.new_model(tok, bm.BaseModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))
    examples = [(task.prompt_text(p.text()), task.misexecuted_trace(p.terms, "difference_table")[len(prefix) + 1:],
                 prefix) for p in problems]
    corpus = bm._Corpus(tok, examples, 2, torch.Generator().manual_seed(0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(150):
        loss = model(**corpus.next_batch()).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert bm.execution_check(model, tok, problems, chosen=True)["difference_table"] < 1.0
    assert bm.execution_check(model, tok, problems, chosen=True,
                              misexecuted=frozenset({"difference_table"}))["difference_table"] == 1.0
