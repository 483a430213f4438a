"""What the stages' subcommands share: argument types, the job options, the torch threads
(the options of commands that run a real model: :mod:`nudgerl.evaluation.model_arguments`).

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
