"""What the stages' subcommands share: argument types, the model options, the torch threads.

Each stage registers its own subcommands (``<stage>/cli.py``); :mod:`nudgerl.cli` builds
the parser from them.
"""

from __future__ import annotations

import argparse
import json
import os


def set_threads(n: int) -> None:
    """One torch thread per job: spinning OpenMP threads on a shared box cost 40-100x."""
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(n)


def json_arg(text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--params is not valid JSON: {e}") from None


def prompt_template(args):
    """The --prompt template (JSON from the rule), or None: the organism's built-in prompts."""
    from nudgerl.data.prompts import PromptTemplate

    d = getattr(args, "prompt", None)
    return PromptTemplate.from_dict(d) if d else None


def add_model_arguments(p) -> None:
    """Real models: a hub revision and the prompt template (both optional: the organism needs
    neither); how completions are graded (config key grading.mode)."""
    from nudgerl.evaluation.grading import DEFAULT_MODE, GRADER_MODES

    p.add_argument("--revision", default=None, help="revision of a Hugging Face model id given as --model")
    p.add_argument("--prompt", type=json_arg, default=None, help="prompt template as JSON (nudgerl.data.prompts)")
    p.add_argument("--grader-mode", choices=GRADER_MODES, default=DEFAULT_MODE,
                   help="how completions are graded (nudgerl.evaluation.grading; config key grading.mode)")


def add_job_arguments(p) -> None:
    """A model job's config section (--params, JSON) and its torch threads."""
    p.add_argument("--params", type=json_arg, required=True, help="config section as JSON")
    p.add_argument("--threads", type=int, default=1)


def add_pool_sampling_arguments(p) -> None:
    """Sampling the base policy on the training problems with their pools' hints (ranking the
    hints, measuring strategy diversity): the model, problems, pools, sampling section, threads."""
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--pools", required=True)
    p.add_argument("--params", type=json_arg, required=True, help="sampling config section as JSON")
    p.add_argument("--threads", type=int, default=1)


def add_command(subparsers, name: str, fn, help_: str) -> argparse.ArgumentParser:
    """A subcommand ``name`` that runs ``fn(args)``."""
    p = subparsers.add_parser(name, help=help_)
    p.set_defaults(fn=fn)
    return p
