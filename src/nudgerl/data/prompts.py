"""Prompts: how a problem becomes chat messages, how a hint enters them (x1) and leaves (x0),
which part of a completion holds the answer, and what the helper stages ask their LLMs.

Named templates. ``organism`` is the model organism's (a ``hint : ...`` line in front of the
problem). The ``authors_*`` templates reproduce the text of the NudgeRL authors' public code
(github.com/tally0818/NudgeRL, read for this project; the strings are data, the code is ours):

- one system prompt for training and evaluation, asking for the working out between
  ``<start_working_out>``/``<end_working_out>`` and the solution between ``<SOLUTION></SOLUTION>``;
- ``authors_grpo``: their GRPO baseline puts the bare problem in the user turn;
- ``authors_pope``: their POPE baseline (``train_grpope.py``): unguided problems are
  ``Problem: {problem}`` under the same system prompt; guided ones get a system prompt of
  their own (study the partial solution, continue it) and a ``Problem: ...`` /
  ``Partial Solution: ...`` user turn (``guided_system`` / ``guided_user``);
- ``authors_nudgerl``: their NudgeRL trainer wraps the problem (``Problem:`` ... ``Solve this
  step by step ...at the end.``) and, for hinted rollouts, inserts a context block naming the
  hint; the hint-free prompt x0 is the same text without the block;
- ``authors_eval``: their evaluation uses a slightly different user turn
  (``Problem: {problem}`` on one line, no "at the end").

None of the authors' prompts asks for ``\\boxed{}``; the answer sits between the SOLUTION
tags, so these templates name that region (``answer_region``) and the grader reads the last
such region (:mod:`nudgerl.evaluation.grading`). A config may add templates of its own under
``prompts.templates`` (same fields).

Helper prompts (:data:`HELPER_PROMPTS`, chosen by ``prompt`` in a pool or oracle section of
params.yaml): what the strategy-pool and oracle-solution stages send per problem.
``authors_hints`` and ``authors_oracle`` are the authors' ``generate_hints.py`` and
``generate_oracle_solutions.py`` text; ``standard_hints`` and ``standard_oracle`` are ours.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from nudgerl.sections import from_section

REASONING_START, REASONING_END = "<start_working_out>", "<end_working_out>"
SOLUTION_START, SOLUTION_END = "<SOLUTION>", "</SOLUTION>"
# Where the authors' system prompt asks for the solution: the grader's standard mode reads the
# last such region (nudgerl.evaluation.answers).
SOLUTION_REGION = r"<SOLUTION>(.*?)</SOLUTION>"

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
AUTHORS_POPE_SYSTEM = (
    "You are given a problem and a partial solution. \n"
    "Your task is to **carefully study the partial response, identify what reasoning or steps are "
    "already provided, and then complete the solution from where it left off**. \n"
    "Ensure your response is logically consistent and leads to a complete and correct final answer.\n"
    "Continue solving the problem, starting from where the partial response ends and place it between "
    f"{REASONING_START} and {REASONING_END}. \n"
    f"Make sure your final answer is written between {SOLUTION_START}{SOLUTION_END}"
)


def organism_apply_hint(messages: list[dict], hint: str) -> list[dict]:
    """x1 for the organism: a ``hint : ...`` line in front of the problem (see task.prompt_text)."""
    from nudgerl.organism.task import prompt_text

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
    # POPE's guided problems (instruct style): their own system prompt and a user turn
    # holding {problem} and {prefix}; unset: the template's turn, an instruction and the prefix
    guided_system: str | None = None
    guided_user: str | None = None

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
        if self.guided_user is not None and not all(k in self.guided_user for k in ("{problem}", "{prefix}")):
            raise ValueError(f"prompt template {self.name!r}: 'guided_user' must contain {{problem}} and {{prefix}}")
        if self.guided_system is not None and self.guided_user is None:
            raise ValueError(f"prompt template {self.name!r}: 'guided_system' needs a 'guided_user'")

    @classmethod
    def from_dict(cls, d: dict, section: str | None = None) -> PromptTemplate:
        """From a template's mapping (config ``prompts.templates.<name>`` plus its name)."""
        return from_section(cls, {**d, "stop": list(d.get("stop") or [])},
                            section or f"prompts.templates.{d.get('name')}")

    def to_dict(self) -> dict:
        # The guided_* fields came later: written only when set, so a template without them
        # keeps the JSON it had (the rules pass it as a parameter; a change re-runs jobs).
        return {k: v for k, v in asdict(self).items() if not (k in _LATER_FIELDS and v is None)}

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

    def guided_messages(self, problem: str, prefix: str) -> list[dict]:
        """A POPE guided problem's messages (``guided_user`` with the problem and the prefix)."""
        if self.guided_user is None:
            raise ValueError(f"prompt template {self.name!r} has no guided_user")
        system = self.guided_system if self.guided_system is not None else self.system
        msgs = [{"role": "system", "content": system}] if system else []
        msgs.append({"role": "user", "content": fill(self.guided_user, problem=problem, prefix=prefix)})
        return msgs


_LATER_FIELDS = ("guided_system", "guided_user")


def fill(template: str, **values: str) -> str:
    """``{name}`` placeholders replaced in one pass (not str.format: problems are full of
    braces, and a problem's text is never searched for placeholders)."""
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return pattern.sub(lambda m: values[m.group()[1:-1]], template)


BUILTIN_TEMPLATES = {
    t.name: t
    for t in [
        PromptTemplate(name="organism", style="organism"),
        PromptTemplate(name="authors_grpo", system=AUTHORS_SYSTEM, answer_region=SOLUTION_REGION,
                       stop=[SOLUTION_END]),
        PromptTemplate(
            name="authors_pope",
            system=AUTHORS_SYSTEM,
            user="Problem: {problem}",
            guided_system=AUTHORS_POPE_SYSTEM,
            guided_user="Problem: {problem}\nPartial Solution: {prefix}",
            answer_region=SOLUTION_REGION,
            stop=[SOLUTION_END],
        ),
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
DEFAULT_USES = {"train": "organism", "pope": "organism", "nudgerl": "organism", "eval": "organism"}
# A use left unset takes another use's choice first: POPE trains like GRPO unless told otherwise.
FALLBACK_USES = {"pope": "train"}


def resolve_template(prompts_cfg: dict | None, use: str) -> PromptTemplate:
    """The template for ``use`` (train | pope | nudgerl | eval) under a config's ``prompts`` section."""
    prompts_cfg = prompts_cfg or {}
    if use not in DEFAULT_USES:
        raise ValueError(f"unknown prompt use {use!r}; use one of {sorted(DEFAULT_USES)}")
    name = prompts_cfg.get(use) or prompts_cfg.get(FALLBACK_USES.get(use, use)) or DEFAULT_USES[use]
    custom = prompts_cfg.get("templates", {}) or {}
    if name in custom:
        return PromptTemplate.from_dict({"name": name, **custom[name]})
    if name in BUILTIN_TEMPLATES:
        return BUILTIN_TEMPLATES[name]
    raise ValueError(f"config key 'prompts.{use}': unknown template {name!r}; "
                     f"built in: {sorted(BUILTIN_TEMPLATES)}, defined: {sorted(custom)}")


# Back-compatible name -> hint function map (the organism trainer and ranking).
HINT_STYLES = {"organism": organism_apply_hint}


# ---------------------------------------------------------------- helper-LLM prompts


@dataclass(frozen=True)
class HelperPrompt:
    """What a helper stage sends for one problem: a system prompt (or none) and a user turn
    with ``{problem}`` (and, for hints, ``{n}``: how many hints to ask for)."""

    name: str
    user: str
    system: str | None = None

    def messages(self, problem: str, n: int | None = None) -> list[dict]:
        values = {"problem": problem} if n is None else {"problem": problem, "n": str(n)}
        msgs = [{"role": "system", "content": self.system}] if self.system else []
        msgs.append({"role": "user", "content": fill(self.user, **values)})
        return msgs


AUTHORS_HINT_SYSTEM = ("You are a helpful assistant that provides mathematical hints. "
                       "Provide concise, specific mathematical concepts or theorems as hints.")
AUTHORS_HINT_REQUEST = (
    "Given the following math problem, generate {n} different keyword hints that would help solve it. \n"
    "Each hint should be a specific mathematical concept, theorem, or technique "
    '(e.g., "Ceva\'s theorem", "Lifting the exponents", "Triangle inequality").\n\n'
    "Problem:\n{problem}\n\n"
    "Please provide exactly {n} hints in the following format (one hint per line, numbered):\n"
    "1. [Hint 1]\n2. [Hint 2]\n...\n{n}. [Hint {n}]\n\n"
    "Make sure each hint is a distinct mathematical concept or theorem."
)
STANDARD_HINT_REQUEST = (
    "Here is a math problem:\n\n{problem}\n\n"
    "Propose {n} different hints that could help solve it. Each hint must name one specific "
    "mathematical concept, theorem, or technique, in a few words. Do not solve the problem. "
    "Answer only with a numbered list, one hint per line."
)

HELPER_PROMPTS = {
    h.name: h
    for h in [
        HelperPrompt(name="standard_hints", user=STANDARD_HINT_REQUEST),
        HelperPrompt(name="authors_hints", user=AUTHORS_HINT_REQUEST, system=AUTHORS_HINT_SYSTEM),
        HelperPrompt(name="standard_oracle", user="{problem}", system="You are a helpful assistant."),
        HelperPrompt(name="authors_oracle", user="Problem: {problem}", system=AUTHORS_SYSTEM),
    ]
}


def helper_prompt(name: str, kind: str) -> HelperPrompt:
    """The helper prompt ``name`` for a ``kind`` of stage ("hints" or "oracle")."""
    known = sorted(k for k in HELPER_PROMPTS if k.endswith(f"_{kind}"))
    if name not in known:
        raise ValueError(f"unknown {kind} prompt {name!r} (params.yaml key 'prompt'); use one of {known}")
    return HELPER_PROMPTS[name]
