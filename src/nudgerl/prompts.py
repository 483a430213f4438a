"""Prompts: how a problem becomes chat messages, how a hint enters them (x1) and leaves (x0),
and which part of a completion holds the answer.

Named templates. ``organism`` is the model organism's (a ``hint : ...`` line in front of the
problem). The ``authors_*`` templates reproduce the text of the NudgeRL authors' public code
(github.com/tally0818/NudgeRL, read for this project, not copied):

- one system prompt for training and evaluation, asking for the working out between
  ``<start_working_out>``/``<end_working_out>`` and the solution between ``<SOLUTION></SOLUTION>``;
- ``authors_grpo``: their GRPO and POPE baselines put the bare problem in the user turn;
- ``authors_nudgerl``: their NudgeRL trainer wraps the problem (``Problem:`` ... ``Solve this
  step by step ...at the end.``) and, for hinted rollouts, inserts a context block naming the
  hint; the hint-free prompt x0 is the same text without the block;
- ``authors_eval``: their evaluation uses a slightly different user turn
  (``Problem: {problem}`` on one line, no "at the end").

None of the authors' prompts asks for ``\\boxed{}``; the answer sits between the SOLUTION
tags, so these templates name that region (``answer_region``) and the grader reads the last
such region (:mod:`nudgerl.grading`).
A config may add templates of its own under ``prompts.templates`` (same fields).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from .grading import MODE_REGION, SOLUTION_REGION

REASONING_START, REASONING_END = "<start_working_out>", "<end_working_out>"
SOLUTION_START, SOLUTION_END = "<SOLUTION>", "</SOLUTION>"

AUTHORS_SYSTEM = (
    "You are given a problem.\n"
    "Think about the problem and provide your working out.\n"
    f"Place it between {REASONING_START} and {REASONING_END}.\n"
    f"Then, provide your solution between {SOLUTION_START}{SOLUTION_END}"
)
AUTHORS_HINT_BLOCK = (
    "Context (exploration condition):\n"
    "- Use this hint/approach: {hint}\n\n"
    "Important:\n"
    "- Follow this approach as your primary strategy.\n\n"
)


def organism_apply_hint(messages: list[dict], hint: str) -> list[dict]:
    """x1 for the organism: a ``hint : ...`` line in front of the problem (see task.prompt_text)."""
    from .organism.task import prompt_text

    last = messages[-1]
    return [*messages[:-1], {**last, "content": prompt_text(last["content"], f"hint : {hint}")}]


@dataclass(frozen=True)
class PromptTemplate:
    """A named prompt. ``user`` holds ``{problem}`` and, if the template can carry a hint,
    ``{hint_block}`` (replaced by ``hint_block`` with ``{hint}`` filled, or by nothing)."""

    name: str
    user: str = "{problem}"
    system: str | None = None
    hint_block: str | None = None
    answer_region: str | None = None  # regex with one group: where the answer is read
    stop: list[str] = field(default_factory=list)  # generation stop strings (vLLM)
    style: str = "text"  # "text" | "organism" (the organism's own hint line)

    def __post_init__(self):
        if "{problem}" not in self.user:
            raise ValueError(f"prompt template {self.name!r}: 'user' must contain {{problem}}")
        if self.style not in ("text", "organism"):
            raise ValueError(f"prompt template {self.name!r}: unknown style {self.style!r}")
        if self.hint_block is not None:
            if "{hint_block}" not in self.user:
                raise ValueError(f"prompt template {self.name!r}: has a hint_block but 'user' has no {{hint_block}}")
            if "{hint}" not in self.hint_block:
                raise ValueError(f"prompt template {self.name!r}: 'hint_block' must contain {{hint}}")
            if "{problem}" in self.user.split("{hint_block}", 1)[1]:
                raise ValueError(f"prompt template {self.name!r}: {{problem}} must come before {{hint_block}}")
        if self.answer_region is not None and re.compile(self.answer_region, re.DOTALL).groups != 1:
            raise ValueError(f"prompt template {self.name!r}: 'answer_region' needs exactly one regex group")

    @classmethod
    def from_dict(cls, d: dict) -> PromptTemplate:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"prompt template {d.get('name')!r}: unknown field(s) {sorted(unknown)}")
        return cls(**{**d, "stop": list(d.get("stop") or [])})

    def to_dict(self) -> dict:
        return asdict(self)

    def _user(self, problem: str, block: str) -> str:
        # str.replace, not str.format: problems are full of braces ({x}, \frac{a}{b}).
        return self.user.replace("{hint_block}", block).replace("{problem}", problem, 1)

    def messages(self, problem: str, hint: str | None = None) -> list[dict]:
        """x0 (hint None) or x1 as chat messages."""
        msgs = [{"role": "system", "content": self.system}] if self.system else []
        msgs.append({"role": "user", "content": self._user(problem, "")})
        return msgs if hint is None else self.apply_hint(msgs, hint)

    def apply_hint(self, messages: list[dict], hint: str) -> list[dict]:
        """x1 from x0's messages: the hint block goes where ``{hint_block}`` stands."""
        if self.style == "organism":
            return organism_apply_hint(messages, hint)
        if self.hint_block is None:
            raise ValueError(f"prompt template {self.name!r} has no hint_block; NudgeRL needs one")
        suffix = self.user.split("{hint_block}", 1)[1]
        last = messages[-1]
        content = last["content"]
        if not content.endswith(suffix):
            raise ValueError(f"prompt template {self.name!r}: the user turn does not end with the template's text")
        block = self.hint_block.replace("{hint}", hint)
        return [*messages[:-1], {**last, "content": content[: len(content) - len(suffix)] + block + suffix}]


def grading_region(template: PromptTemplate | None):
    """The ``region`` argument of :func:`nudgerl.grading.grade` for completions of a template:
    its answer region, or (none named, or no template) the grader mode's own."""
    return template.answer_region if template is not None and template.answer_region else MODE_REGION


BUILTIN_TEMPLATES = {
    t.name: t
    for t in [
        PromptTemplate(name="organism", style="organism"),
        PromptTemplate(name="authors_grpo", system=AUTHORS_SYSTEM, answer_region=SOLUTION_REGION,
                       stop=[SOLUTION_END]),
        PromptTemplate(
            name="authors_nudgerl",
            system=AUTHORS_SYSTEM,
            user="Problem:\n{problem}\n\n{hint_block}"
            "Solve this step by step and provide your final numerical answer at the end.",
            hint_block=AUTHORS_HINT_BLOCK,
            answer_region=SOLUTION_REGION,
            stop=[SOLUTION_END],
        ),
        PromptTemplate(
            name="authors_eval",
            system=AUTHORS_SYSTEM,
            user="Problem: {problem}\n\nSolve this step by step and provide your final numerical answer.",
            answer_region=SOLUTION_REGION,
        ),
    ]
}

# Which template each use takes when a config's ``prompts`` section does not say.
DEFAULT_USES = {"train": "organism", "nudgerl": "organism", "eval": "organism"}


def resolve_template(prompts_cfg: dict | None, use: str) -> PromptTemplate:
    """The template for ``use`` (train | nudgerl | eval) under a config's ``prompts`` section."""
    prompts_cfg = prompts_cfg or {}
    if use not in DEFAULT_USES:
        raise ValueError(f"unknown prompt use {use!r}; use one of {sorted(DEFAULT_USES)}")
    name = prompts_cfg.get(use, DEFAULT_USES[use])
    custom = prompts_cfg.get("templates", {}) or {}
    if name in custom:
        return PromptTemplate.from_dict({"name": name, **custom[name]})
    if name in BUILTIN_TEMPLATES:
        return BUILTIN_TEMPLATES[name]
    raise ValueError(f"config key 'prompts.{use}': unknown template {name!r}; "
                     f"built in: {sorted(BUILTIN_TEMPLATES)}, defined: {sorted(custom)}")


# Back-compatible name -> hint function map (the organism trainer and ranking).
HINT_STYLES = {"organism": organism_apply_hint}
