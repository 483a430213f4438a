"""``nudgerl`` console script: one subcommand per Snakemake rule, grouped by stage.

Each stage's subcommands live beside its code (``<stage>/cli.py``: the commands and one
``register(subparsers)``); this module only builds the parser from them and dispatches.
Heavy imports (torch, transformers, trl) happen inside the subcommands so that
``nudgerl --help`` and light rules start fast.
"""

from __future__ import annotations

import argparse
import sys

from nudgerl.arguments import add_command
from nudgerl.data import cli as data_cli
from nudgerl.evaluation import cli as evaluation_cli
from nudgerl.hardware import CudaUnavailableError, require_cuda
from nudgerl.offline import cli as offline_cli
from nudgerl.organism import cli as organism_cli
from nudgerl.reporting import cli as reporting_cli
from nudgerl.reporting import figure_cli
from nudgerl.training import cli as training_cli

# In the order of the DAG: what each box of workflow/rules/ runs.
STAGES = (data_cli, organism_cli, offline_cli, training_cli, evaluation_cli, reporting_cli, figure_cli)


def cmd_validate_config(args) -> None:
    from nudgerl.config import load_config

    load_config(args.config)
    print(f"{args.config}: valid")


def _register_workflow(subparsers) -> None:
    p = add_command(subparsers, "validate-config", cmd_validate_config, "check a config file against the schema")
    p.add_argument("config")


def _command_list(groups: list[tuple[str, list]]) -> str:
    """The subcommands under their stage's title (argparse alone lists them in one block)."""
    width = max(len(a.dest) for _, actions in groups for a in actions) + 2
    blocks = []
    for title, actions in groups:
        blocks.append("\n".join([f"{title}:", *(f"  {a.dest:<{width}}{a.help}" for a in actions)]))
    return "\n\n".join(blocks)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="nudgerl", description=__doc__, usage="%(prog)s [-h] <command> ...",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    # help=SUPPRESS: the flat list argparse would print is replaced by the grouped one (epilog)
    sub = ap.add_subparsers(dest="command", required=True, metavar="<command>", help=argparse.SUPPRESS,
                            prog="nudgerl")
    groups = []
    for title, register in [("workflow: the configuration", _register_workflow),
                            *((stage.TITLE, stage.register) for stage in STAGES)]:
        before = len(sub._choices_actions)
        register(sub)
        groups.append((title, sub._choices_actions[before:]))
    ap.epilog = _command_list(groups)
    return ap


def main(argv: list[str] | None = None) -> int:
    """The console script: the command runs in the local job server's forked child when the
    workflow started one (nudgerl.job_server: the heavy imports are already done there), else here."""
    from nudgerl import job_client

    code = job_client.forward(sys.argv[1:] if argv is None else list(argv))
    return run(argv) if code is None else code


def run(argv: list[str] | None = None) -> int:
    """Run one subcommand in this process."""
    # Before parsing: a job that asked for a GPU and sees no CUDA stops here, within seconds,
    # whatever it was asked to run (NUDGERL_REQUIRE_CUDA=1 comes from the workflow's launcher).
    try:
        require_cuda()
    except CudaUnavailableError as e:
        words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
        print(f"{' '.join(['nudgerl', *words[:1]])}: error: {e}", file=sys.stderr)
        return 3
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except (ValueError, FileNotFoundError, KeyError, RuntimeError) as e:
        print(f"nudgerl {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
