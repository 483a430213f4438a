"""The families task: a rare always-right strategy per problem family, hints that nudge."""

import collections

import pytest
from scipy import stats

from nudgerl.evaluation.grading import grade
from nudgerl.organism import families as fam
from nudgerl.organism import task
from nudgerl.organism.base_config import BaseModelConfig, task_module
from nudgerl.organism.sft_data import sft_examples
from nudgerl.organism.tokenizer import build_tokenizer, task_tokenizer


def every_problem():
    out = [fam._problem(f, True, p, "p") for f in fam.FAMILIES for p in fam.hard_space(f)]
    return out + [fam._problem(f, False, p, "p") for f in fam.FAMILIES for p in fam._easy_space()]


def test_on_a_hard_problem_only_its_familys_strategy_is_right():
    """So a discovery on one family solves no other, and the habit fails on every one."""
    seen = collections.Counter()
    for p in every_problem():
        right = {s for s in fam.STRATEGIES if fam.is_correct_strategy(p, s)}
        own = fam.FAMILIES[p.family].rare_strategy
        if p.hard:
            assert right == {own}, (p, right)
            seen[p.family] += 1
        else:  # arithmetic, in the family's wording: the habit and every family's strategy are right
            assert {fam.DOMINANT_STRATEGY, *fam.RARE_STRATEGIES} <= right, (p, right)
    assert set(seen) == set(fam.FAMILIES) and min(seen.values()) >= 300


def test_each_familys_sequences_follow_its_rule_and_its_strategy_reaches_the_answer():
    for f, family in fam.FAMILIES.items():
        for params in fam.hard_space(f)[::17]:
            p = fam._problem(f, True, params, "p")
            assert list(p.terms) + [p.answer] == fam._sequence(f, params)
            text = fam.trace(p.terms, family.rare_strategy)
            assert grade(text, str(p.answer)) == 1.0
            assert grade(fam.trace(p.terms, fam.DOMINANT_STRATEGY), str(p.answer)) == 0.0
            for step in fam.solve(p.terms, family.rare_strategy)[0]:
                (x, op, y), z = step.split(" = ")[0].split(), int(step.split(" = ")[1])
                assert (int(x) + int(y) if op == "+" else int(x) - int(y)) % 10 == z


def test_the_family_is_read_from_the_wording_never_named():
    words = {w for s in fam.STRATEGIES.values() for w in (s.words + " " + s.hint).split()}
    questions = [f.question for f in fam.FAMILIES.values()]
    assert len(set(questions)) == len(questions)
    for q in questions:  # no strategy's name or hint word in a question ("the" and "term" aside)
        assert not (set(q.split()) & words) - {"the", "term", "next", "terms"}, q
    firsts = [s.words.split()[0] for s in fam.STRATEGIES.values()]
    assert len(set(firsts)) == len(firsts)  # a strategy's choice is its first word
    for s in fam.STRATEGIES.values():  # a hint describes, it does not name: nothing to copy
        assert not set(s.hint.split()) & set(s.words.split()), s
    assert len({s.hint for s in fam.STRATEGIES.values()}) == len(fam.STRATEGIES)


def test_splits_are_disjoint_seeded_and_balanced_over_families():
    val = fam.validation_problems(0, 64)
    assert collections.Counter(p.family for p in val) == {f: 16 for f in fam.FAMILIES}
    train = fam.training_problems(0, 4000, 0.7)
    assert train == fam.training_problems(0, 4000, 0.7) and train != fam.training_problems(1, 4000, 0.7)
    counts = collections.Counter(p.family for p in train)
    assert max(counts.values()) - min(counts.values()) <= 1
    sets = fam.evaluation_sets(0, {"a": (40, 0.8), "b": (40, 1.0)})
    held = [(p.family, p.hard, p.params) for ps in sets.values() for p in ps]
    assert len(held) == len(set(held)) == 80
    keys = lambda ps: {(p.family, p.hard, p.params) for p in ps}  # noqa: E731
    assert not keys(val) & keys(train) and not set(held) & keys(train) and not set(held) & keys(val)
    assert collections.Counter(p.family for p in sets["b"]) == {f: 10 for f in fam.FAMILIES}
    with pytest.raises(ValueError, match="held-out hard tripling"):
        fam.evaluation_sets(0, {"big": (4000, 1.0)})


def test_the_tokenizer_covers_the_task_and_keeps_the_single_family_ids():
    tok, single = task_tokenizer(fam), build_tokenizer()
    assert all(tok.convert_tokens_to_ids(w) == i for w, i in single.get_vocab().items())
    p = fam.validation_problems(0, 4)
    texts = [fam.trace(q.terms, s) for q in p for s in fam.STRATEGIES]
    texts += [fam.prompt_text(q.text(), fam.hint_line(s)) for q in p for s in fam.STRATEGIES]
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids and tok.decode(ids) == text
    assert fam.MAX_TRACE_TOKENS > max(len(t.split()) for t in texts)
    assert task_module(BaseModelConfig(task="families")) is fam and task_module(BaseModelConfig()) is task


def test_the_corpus_makes_each_familys_strategy_rare_unhinted_and_hints_nudge():
    """Measured on the corpus against its settings (binomial tests at 0.1 %): the own rare
    strategy's unhinted share per family, and the share of hinted traces that follow the hint."""
    cfg = BaseModelConfig(task="families", hint_following=0.5, examples=40000, arithmetic_replay=0,
                          family_strategy_weights={"common_difference": 0.9, "own_rare": 0.05, "other_rare": 0.05})
    unhinted = collections.Counter()
    followed = [0, 0]
    for user, assistant, *choice in sft_examples(cfg):
        if choice:
            continue
        strategy = fam.parse_strategy(assistant)
        problem_words = user.split(" . ")[-1]
        family = next(f for f in fam.FAMILIES.values() if problem_words.startswith(f.question))
        if user.startswith("hint"):
            followed[0] += fam.hint_strategy(user) == strategy
            followed[1] += 1
        else:
            unhinted[family.name, strategy == family.rare_strategy] += 1
            assert strategy in ("common_difference", *fam.RARE_STRATEGIES)
    # a hinted example follows with prob. 0.5, else draws from the unhinted mixture, which names
    # the hinted strategy with the probability of its role there
    h = cfg.family_hinted_weights
    by_chance = sum(h[r] * w for r, w in (("common_difference", 0.9), ("own_rare", 0.05), ("other_rare", 0.05 / 3)))
    expected = 0.5 + 0.5 * by_chance
    assert stats.binomtest(followed[0], followed[1], expected).pvalue > 1e-3
    assert followed[0] / followed[1] < 0.6  # not dictated
    for f in fam.FAMILIES:
        k, n = unhinted[f, True], unhinted[f, True] + unhinted[f, False]
        assert stats.binomtest(k, n, 0.05).pvalue > 1e-3, (f, k, n)


def test_execution_practice_on_random_terms_leaves_the_rest_of_the_corpus_as_it_was():
    """practice_random_terms moves only the traces whose choice is not trained onto other terms
    (about the share set, in the problem family's wording, each trace the strategy's own on those
    terms); every other example is the one the corpus has without the setting."""
    base = dict(task="families", examples=4000, arithmetic_replay=0, chosen_fraction=0.3)
    plain = sft_examples(BaseModelConfig(**base))
    moved = sft_examples(BaseModelConfig(**base, practice_random_terms=0.5))
    assert len(plain) == len(moved)
    assert [e for e in plain if len(e) == 2] == [e for e in moved if len(e) == 2]
    practice = [(a, b) for a, b in zip(plain, moved) if len(a) == 3]
    assert len(practice) == sum(len(e) == 3 for e in moved) > 1000
    changed = 0
    for (user0, _, choice0), (user, rest, choice) in practice:
        assert choice == choice0
        question0, question = user0.split(" . ")[-1], user.split(" . ")[-1]
        family = next(f for f in fam.FAMILIES.values() if question.startswith(f.question))
        assert question0.startswith(family.question)
        terms = tuple(int(t) for t in question[len(family.question):].split())
        strategy = fam.parse_strategy(choice)
        assert f"{choice} {rest}" == fam.trace(terms, strategy)
        changed += question != question0
    # terms equal by chance 1 time in 10,000; binomial test at 0.1 %
    assert stats.binomtest(changed, len(practice), 0.5).pvalue > 1e-3


def test_the_families_task_is_checked_in_config():
    with pytest.raises(ValueError, match="base_model.task"):
        BaseModelConfig.from_dict({"task": "three"})
    with pytest.raises(ValueError, match="practice_random_terms"):
        BaseModelConfig.from_dict({"practice_random_terms": 0.5})
    with pytest.raises(ValueError, match="practice_random_terms"):
        BaseModelConfig.from_dict({"task": "families", "practice_random_terms": 2})
    with pytest.raises(ValueError, match="unhinted_rare_accuracy"):
        BaseModelConfig.from_dict({"task": "families", "unhinted_rare_accuracy": 0.5})
    with pytest.raises(ValueError, match="hint_following"):
        BaseModelConfig.from_dict({"hint_following": 1.5})


def test_the_families_catalogue_reads_every_single_family_trace():
    """Evaluation labels both tasks' samples with the families parser."""
    p = task.validation_problems(0, 1)[0]
    for name, s in task.STRATEGIES.items():
        assert fam.STRATEGIES[name].words == s.words
        assert fam.parse_strategy(task.trace(p.terms, name)) == name


def test_the_diagnosis_forces_and_hints_each_problems_own_strategy(tmp_path):
    """The gate's figures on the families task: the forced choice, the hint and the share read
    each problem's own family strategy (a random model: the counts' shapes, not their values)."""
    import torch

    from nudgerl.evaluation.diagnostics import diagnose_base, diagnose_rl_prompts
    from nudgerl.organism import base_model as bm

    tok = task_tokenizer(fam)
    torch.manual_seed(0)
    model = bm.new_model(tok, BaseModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2))
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = tok.pad_token_id, tok.eos_token_id
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    train = [p.to_record() for p in fam.training_problems(0, 8, 1.0)]
    rl = {"samples": 2, "batch_size": 64, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 4, "seed": 0}
    d = diagnose_rl_prompts(str(tmp_path / "m"), train, rl)
    assert len(d["counts"]["rare_strategy_share_unhinted"]) == 8
    assert {r["rare_strategy"] for r in train} == set(fam.RARE_STRATEGIES)
    first = train[0]
    assert d["examples"]["forced"][0].startswith(fam.chosen_prefix(first["rare_strategy"]))
    report = diagnose_base(str(tmp_path / "m"), train[:4], {"samples_per_problem": 2, "max_new_tokens": 4,
                                                           "batch_size": 64})
    assert set(report["hinted"]) == set(fam.STRATEGIES)
    assert report["summary"]["rare_strategy"] == "own_family_strategy"


def test_the_transfer_probe_hints_each_problem_with_its_own_strategy_by_default():
    from nudgerl.evaluation.transfer import _problem_hints

    records = [p.to_record() for p in fam.training_problems(0, 8, 1.0)] + [task.training_problems(0, 1, 1.0)[0].to_record()]
    hints = _problem_hints(records, None, None)
    assert hints[:-1] == [[fam.STRATEGIES[r["rare_strategy"]].hint] for r in records[:-1]]
    assert len({h[0] for h in hints[:-1]}) == len(fam.FAMILIES)
    assert hints[-1] == [task.STRATEGIES[task.RARE_CORRECT_STRATEGY].hint]
    assert _problem_hints(records, None, "use the common difference") == [["use the common difference"]] * 9


def test_exploration_success_counts_each_problems_own_strategy(tmp_path):
    from nudgerl.io import write_jsonl
    from nudgerl.reporting.exploration import rare_uses

    write_jsonl(tmp_path / "b.problems.jsonl", [
        {"id": "q", "hard": True, "family": "quadratic", "rare_strategy": "difference_table"},
        {"id": "t", "hard": True, "family": "tripling", "rare_strategy": "tripled_differences"},
        {"id": "e", "hard": False, "family": "tripling", "rare_strategy": "tripled_differences"}])
    write_jsonl(tmp_path / "b.samples.jsonl", [
        {"id": "q", "strategy": "difference_table"}, {"id": "q", "strategy": "tripled_differences"},
        {"id": "t", "strategy": "difference_table"}, {"id": "t", "strategy": "tripled_differences"},
        {"id": "e", "strategy": "tripled_differences"}])
    # another family's strategy on a problem is no use of the problem's own; easy problems do not count
    assert rare_uses(tmp_path, ["b"], "difference_table") == (2, 4)


def test_make_data_writes_the_families_task_with_its_provenance(tmp_path):
    import argparse
    import json

    from nudgerl.io import read_jsonl
    from nudgerl.organism.cli import cmd_make_data

    params = {"seed": 0, "train": {"size": 40, "hard_fraction": 0.75},
              "benchmarks": {"a": {"size": 8, "hard_fraction": 1.0}}}
    cmd_make_data(argparse.Namespace(params=params, task="families", out_dir=str(tmp_path)))
    train = read_jsonl(tmp_path / "train.jsonl")
    assert len(train) == 40 and {r["family"] for r in train} == set(fam.FAMILIES)
    assert all(fam.FAMILIES[r["family"]].rare_strategy == r["rare_strategy"] for r in train)
    assert {r["family"] for r in read_jsonl(tmp_path / "eval" / "a.jsonl")} == set(fam.FAMILIES)
    sidecar = next(tmp_path.glob("train.jsonl*provenance*"))
    assert json.loads(sidecar.read_text())["config"]["task"] == "families"


def test_family_independence_compares_each_family_with_its_base_interval():
    from nudgerl.evaluation.family_independence import family_shares, independence_rows, render_markdown

    family_of = {"q1": "quadratic", "q2": "quadratic", "t1": "tripling", "t2": "tripling"}
    base = {"problems": ["q1", "q2", "t1", "t2"],
            "counts": {"rare_strategy_share_unhinted": [[0, 16], [1, 16], [0, 16], [1, 16]]}}
    trained = {"problems": ["q1", "q2", "t1", "t2"],
               "counts": {"rare_strategy_share_unhinted": [[12, 16], [14, 16], [9, 16], [10, 16]]}}
    b, t = family_shares(base, family_of), family_shares(trained, family_of)
    assert b["quadratic"]["k"] == 1 and b["quadratic"]["n"] == 32 and t["tripling"]["k"] == 19
    rows = independence_rows(b, t, "quadratic")
    assert [r["family"] for r in rows] == ["quadratic", "tripling"]
    assert "inside_base_interval" not in rows[0] and rows[1]["inside_base_interval"] is False  # it moved
    still = independence_rows(b, b, "quadratic")
    assert still[1]["inside_base_interval"] is True
    page = render_markdown({0: {"trained_family": "quadratic", "rows": rows}})
    assert "quadratic (trained on)" in page and "Other families inside their base interval: 0 of 1." in page
