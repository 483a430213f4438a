"""The options every subcommand that runs a real model shares (evaluation, training, the
offline helper stages): a hub revision, the prompt template, the grader mode."""

from __future__ import annotations

from nudgerl.arguments import json_arg
from nudgerl.data.prompts import PromptTemplate
from nudgerl.evaluation.grading import DEFAULT_MODE, GRADER_MODES


def prompt_template(args) -> PromptTemplate | None:
    """The --prompt template (JSON from the rule), or None: the organism's built-in prompts."""
    d = getattr(args, "prompt", None)
    return PromptTemplate.from_dict(d) if d else None


def add_model_arguments(p) -> None:
    """Real models: a hub revision and the prompt template (both optional: the organism needs
    neither); how completions are graded (config key grading.mode)."""
    p.add_argument("--revision", default=None, help="revision of a Hugging Face model id given as --model")
    p.add_argument("--prompt", type=json_arg, default=None, help="prompt template as JSON (nudgerl.data.prompts)")
    p.add_argument("--grader-mode", choices=GRADER_MODES, default=DEFAULT_MODE,
                   help="how completions are graded (nudgerl.evaluation.grading; config key grading.mode)")
