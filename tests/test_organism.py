"""The model organism: answers, traces, splits, parser, tokenizer."""

import pytest

from nudgerl.grading import grade
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
