"""Prompt templates: the authors' exact text, hint insertion (x1) and removal (x0), the
answer region the grader reads, and config-defined templates."""

import pytest

from nudgerl.grading import MODE_REGION, grade
from nudgerl.prompts import (
    AUTHORS_SYSTEM,
    BUILTIN_TEMPLATES,
    PromptTemplate,
    grading_region,
    organism_apply_hint,
    resolve_template,
)

PROBLEM = r"Let $f(x)=\frac{x}{2}$ and $S=\{1,2\}$. Find {problem} $f(4)$."


def test_authors_system_prompt_text():
    assert AUTHORS_SYSTEM == (
        "You are given a problem.\nThink about the problem and provide your working out.\n"
        "Place it between <start_working_out> and <end_working_out>.\n"
        "Then, provide your solution between <SOLUTION></SOLUTION>"
    )


def test_authors_eval_and_grpo_user_turns():
    ev = BUILTIN_TEMPLATES["authors_eval"].messages(PROBLEM)
    assert ev == [
        {"role": "system", "content": AUTHORS_SYSTEM},
        {"role": "user", "content": f"Problem: {PROBLEM}\n\nSolve this step by step and provide your final numerical answer."},
    ]
    grpo = BUILTIN_TEMPLATES["authors_grpo"].messages(PROBLEM)
    assert grpo[1]["content"] == PROBLEM  # braces in the problem survive (no str.format)


def test_nudgerl_hint_block_goes_in_and_x0_is_hint_free():
    t = BUILTIN_TEMPLATES["authors_nudgerl"]
    x0 = t.messages(PROBLEM)
    assert x0[1]["content"] == (
        f"Problem:\n{PROBLEM}\n\nSolve this step by step and provide your final numerical answer at the end."
    )
    x1 = t.apply_hint(x0, "use the {difference} table")
    assert x1[1]["content"] == (
        f"Problem:\n{PROBLEM}\n\n"
        "Context (exploration condition):\n- Use this hint/approach: use the {difference} table\n\n"
        "Important:\n- Follow this approach as your primary strategy.\n\n"
        "Solve this step by step and provide your final numerical answer at the end."
    )
    assert x1[0] == x0[0] and t.messages(PROBLEM, "use the {difference} table") == x1
    assert x0[1]["content"] != x1[1]["content"]  # apply_hint does not mutate x0


def test_templates_without_a_hint_block_refuse_hints():
    with pytest.raises(ValueError, match="no hint_block"):
        BUILTIN_TEMPLATES["authors_eval"].apply_hint(BUILTIN_TEMPLATES["authors_eval"].messages("p"), "h")


def test_organism_template_is_the_organism_prompt():
    t = BUILTIN_TEMPLATES["organism"]
    msgs = t.messages("find the next term mod 10 : 1 2 3 4")
    assert msgs == [{"role": "user", "content": "find the next term mod 10 : 1 2 3 4"}]
    assert t.apply_hint(msgs, "use the difference table") == organism_apply_hint(msgs, "use the difference table")
    assert resolve_template(None, "eval") is t


def test_answer_region_decides_what_is_graded():
    t = BUILTIN_TEMPLATES["authors_eval"]
    completion = (r"<start_working_out>first guess \boxed{5}, wrong; it is 4<end_working_out>"
                  "\n<SOLUTION>4</SOLUTION>")
    assert grade(completion, "4", region=None) == 0.0  # the boxed intermediate wins without the region
    assert grade(completion, "4", region=grading_region(t)) == 1.0
    assert grade("<SOLUTION>1</SOLUTION> then <SOLUTION>2</SOLUTION>", "2", region=grading_region(t)) == 1.0
    assert grade(r"no tags, \boxed{7}", "7", region=grading_region(t)) == 1.0  # whole text otherwise
    # a template naming no region leaves the grader's own (the last <SOLUTION> region)
    assert grading_region(BUILTIN_TEMPLATES["organism"]) is MODE_REGION and grading_region(None) is MODE_REGION


def test_config_templates_and_errors():
    cfg = {"eval": "mine", "templates": {"mine": {"user": "Q: {problem}", "system": None, "stop": ["END"]}}}
    t = resolve_template(cfg, "eval")
    assert t.messages("1+1") == [{"role": "user", "content": "Q: 1+1"}] and t.stop == ["END"]
    with pytest.raises(ValueError, match="unknown template 'nope'"):
        resolve_template({"train": "nope"}, "train")
    with pytest.raises(ValueError, match="must contain"):
        PromptTemplate(name="bad", user="no placeholder")
    with pytest.raises(ValueError, match="before"):
        PromptTemplate(name="bad", user="{hint_block} {problem}", hint_block="{hint}")
    with pytest.raises(ValueError, match="unknown field"):
        PromptTemplate.from_dict({"name": "x", "user": "{problem}", "sytem": "typo"})
