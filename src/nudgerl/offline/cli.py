"""Subcommands of the offline box (dvc.yaml, workflow/rules/pools.smk): strategy pools and
oracle solutions (run by DVC), and a pool's hints ranked by a replicate's base policy."""

from __future__ import annotations

import json
from pathlib import Path

from nudgerl.arguments import add_command, add_pool_sampling_arguments, set_threads
from nudgerl.evaluation.model_arguments import add_model_arguments, prompt_template


def _run_helper_llm_stage(args, config_cls, build) -> None:
    """make-pools / make-oracles: a params.yaml section, the problems, one output file."""
    import yaml

    from nudgerl.io import read_problems
    from nudgerl.sections import UnknownKeysError

    params = yaml.safe_load(Path(args.params_file).read_text()) or {}
    if args.section not in params:
        raise KeyError(f"{args.params_file} has no section {args.section!r}")
    try:
        cfg = config_cls.from_dict(params[args.section], section=args.section)
    except UnknownKeysError as e:  # names the section already
        raise ValueError(f"{args.params_file}: {e}") from None
    except ValueError as e:
        raise ValueError(f"{args.params_file} section {args.section!r}: {e}") from None
    stats = build(read_problems(args.problems), cfg, args.out)
    print(json.dumps({k: v for k, v in stats.items() if k != "config"}, indent=2))


def cmd_make_pools(args) -> None:
    from nudgerl.offline.pools import PoolConfig, build_pools

    _run_helper_llm_stage(args, PoolConfig, build_pools)


def cmd_make_oracles(args) -> None:
    from nudgerl.offline.oracles import OracleConfig, build_oracles

    _run_helper_llm_stage(args, OracleConfig, build_oracles)


def cmd_rank_hints(args) -> None:
    set_threads(args.threads)
    from nudgerl.io import read_jsonl, read_problems, write_jsonl, write_provenance
    from nudgerl.offline.ranking import rank_pools

    params = args.params if args.seed is None else {**args.params, "seed": args.seed}
    rows = rank_pools(args.model, read_problems(args.train), read_jsonl(args.pools), params,
                      template=prompt_template(args), revision=args.revision, grader_mode=args.grader_mode)
    write_jsonl(args.out, rows)
    write_provenance(args.out, params, {"sampling": params.get("seed", 0)},
                     [args.model, args.train, args.pools])


TITLE = "offline: strategy pools, oracle solutions, hint ranking"


def register(subparsers) -> None:
    for name, fn, help_ in [
        ("make-pools", cmd_make_pools, "strategy pools (run by DVC: `dvc repro pools_*`)"),
        ("make-oracles", cmd_make_oracles, "oracle solutions for POPE (run by DVC: `dvc repro oracles_*`)"),
    ]:
        p = add_command(subparsers, name, fn, help_)
        p.add_argument("--params-file", default="params.yaml")
        p.add_argument("--section", required=True)
        p.add_argument("--problems", required=True)
        p.add_argument("--out", required=True)

    p = add_command(subparsers, "rank-hints", cmd_rank_hints,
                    "top-ranked hint sampling: score pool hints with the base policy")
    add_pool_sampling_arguments(p)
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: the params' seed)")
    p.add_argument("--out", required=True)
    add_model_arguments(p)
