"""Prompt templates: the authors' exact text, hint insertion (x1) and removal (x0), the
answer region the grader reads, and config-defined templates."""

import pytest

from nudgerl.evaluation.grading import MODE_REGION, grade, grading_region
from nudgerl.offline.oracles import OracleConfig
from nudgerl.offline.pools import PoolConfig
from nudgerl.data.prompts import (
    AUTHORS_SYSTEM,
    BUILTIN_TEMPLATES,
    HELPER_PROMPTS,
    PromptTemplate,
    helper_prompt,
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


# --- the authors' POPE, oracle and hint prompts, as their public code writes them ----------

POPE_GUIDED_SYSTEM = (
    "You are given a problem and a partial solution. \n"
    "Your task is to **carefully study the partial response, identify what reasoning or steps are already "
    "provided, and then complete the solution from where it left off**. \n"
    "Ensure your response is logically consistent and leads to a complete and correct final answer.\n"
    "Continue solving the problem, starting from where the partial response ends and place it between "
    "<start_working_out> and <end_working_out>. \n"
    "Make sure your final answer is written between <SOLUTION></SOLUTION>"
)


def test_authors_pope_prompts_unguided_and_guided():
    t = BUILTIN_TEMPLATES["authors_pope"]
    assert t.messages(PROBLEM) == [{"role": "system", "content": AUTHORS_SYSTEM},
                                   {"role": "user", "content": f"Problem: {PROBLEM}"}]
    prefix = "<start_working_out>Let {x} be"
    assert t.guided_messages(PROBLEM, prefix) == [
        {"role": "system", "content": POPE_GUIDED_SYSTEM},
        {"role": "user", "content": f"Problem: {PROBLEM}\nPartial Solution: {prefix}"},
    ]
    assert t.answer_region == BUILTIN_TEMPLATES["authors_grpo"].answer_region and t.stop == ["</SOLUTION>"]


def test_guided_prompt_uses_the_templates_guided_turn():
    from nudgerl.training.pope_prompts import guided_prompt

    class ChatStub:  # renders messages as text, as a chat template would
        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return "|".join(f"{m['role']}:{m['content']}" for m in messages) + "|assistant:"

    t = BUILTIN_TEMPLATES["authors_pope"]
    assert guided_prompt(ChatStub(), "1+1?", "We add", "instruct", template=t) == (
        f"system:{POPE_GUIDED_SYSTEM}|user:Problem: 1+1?\nPartial Solution: We add|assistant:")
    # a template without a guided turn keeps the instruction-and-prefix turn
    plain = guided_prompt(ChatStub(), "1+1?", "We add", "instruct", template=BUILTIN_TEMPLATES["authors_grpo"])
    assert plain.startswith(f"system:{AUTHORS_SYSTEM}|user:1+1?\n\n") and plain.endswith("We add|assistant:")


def test_authors_oracle_prompt():
    assert HELPER_PROMPTS["authors_oracle"].messages(PROBLEM) == [
        {"role": "system", "content": AUTHORS_SYSTEM}, {"role": "user", "content": f"Problem: {PROBLEM}"}]
    assert HELPER_PROMPTS["standard_oracle"].messages(PROBLEM) == [
        {"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": PROBLEM}]


def test_authors_hint_prompt():
    assert HELPER_PROMPTS["authors_hints"].messages(PROBLEM, 5) == [
        {"role": "system", "content": "You are a helpful assistant that provides mathematical hints. "
                                      "Provide concise, specific mathematical concepts or theorems as hints."},
        {"role": "user", "content": (
            "Given the following math problem, generate 5 different keyword hints that would help solve it. \n"
            'Each hint should be a specific mathematical concept, theorem, or technique (e.g., "Ceva\'s theorem", '
            '"Lifting the exponents", "Triangle inequality").\n\n'
            f"Problem:\n{PROBLEM}\n\n"
            "Please provide exactly 5 hints in the following format (one hint per line, numbered):\n"
            "1. [Hint 1]\n2. [Hint 2]\n...\n5. [Hint 5]\n\n"
            "Make sure each hint is a distinct mathematical concept or theorem.")},
    ]
    with pytest.raises(ValueError, match="unknown hints prompt 'authors_oracle'"):
        helper_prompt("authors_oracle", "hints")


def test_paper_config_and_its_helper_stages_use_the_authors_prompts():
    import yaml

    from conftest import REPO

    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    assert {use: resolve_template(paper["prompts"], use).name for use in ("train", "pope", "nudgerl", "eval")} == {
        "train": "authors_grpo", "pope": "authors_pope", "nudgerl": "authors_nudgerl", "eval": "authors_eval"}
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    pools, oracles = PoolConfig.from_dict(params[paper["pools"]["stage"]]), OracleConfig.from_dict(
        params[paper["pope"]["oracle_stage"]])
    assert (pools.prompt, pools.n, pools.max_tokens, pools.temperature) == ("authors_hints", 5, 500, 0.7)
    assert (oracles.prompt, oracles.temperature, oracles.max_tokens) == ("authors_oracle", 0.4, 16384)
    assert pools.messages({"problem": "P"}) == HELPER_PROMPTS["authors_hints"].messages("P", 5)
    # POPE falls back to the train template when a config names none (the SmolLM2 config)
    assert resolve_template({"train": "authors_grpo"}, "pope").name == "authors_grpo"


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
    with pytest.raises(ValueError, match="guided_user"):
        PromptTemplate(name="bad", guided_user="Problem: {problem} (no prefix)")
    # templates without the later guided_* fields keep the JSON they had (rules pass it as a parameter)
    assert "guided_user" not in BUILTIN_TEMPLATES["authors_grpo"].to_dict()
    assert BUILTIN_TEMPLATES["authors_pope"].to_dict()["guided_user"].endswith("{prefix}")
