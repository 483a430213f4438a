"""Subcommands of the families task's independence check (workflow/rules/families.smk):
``family-split`` writes one family's training problems, ``family-independence`` diagnoses a
base model and a model trained on one family, ``family-independence-page`` tabulates them."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from nudgerl.arguments import add_command, json_arg, set_threads


def cmd_family_split(args) -> None:
    from nudgerl.io import read_problems, write_jsonl, write_provenance

    rows = [r for r in read_problems(args.train) if r.get("family") == args.family]
    if not rows:
        raise SystemExit(f"{args.train}: no problems of family {args.family!r} (is it the families task?)")
    write_jsonl(args.out, rows)
    write_provenance(args.out, {"family": args.family}, {}, inputs=[args.train])
    print(f"wrote {len(rows)} {args.family} problems to {args.out}")


def cmd_family_independence(args) -> None:
    set_threads(args.threads)
    from nudgerl.evaluation.family_independence import run_check
    from nudgerl.io import atomic_write_text, write_provenance

    result = run_check(args.base_model, args.trained_model, args.train, args.family, args.rl_params)
    atomic_write_text(args.out, json.dumps(result, indent=2))
    write_provenance(args.out, {"family": args.family, "rl": args.rl_params}, {"sampling": args.rl_params.get("seed")},
                     inputs=[args.base_model, args.trained_model, args.train])
    for row in result["rows"]:
        print(row["family"], row["base"]["value"], row["trained"]["value"], row.get("inside_base_interval"))


def cmd_family_independence_page(args) -> None:
    from nudgerl.evaluation.family_independence import render_markdown
    from nudgerl.io import atomic_write_text

    results = {int(Path(path).stem.rsplit("seed", 1)[-1]): json.loads(Path(path).read_text()) for path in args.results}
    command = shlex.join(["nudgerl", "family-independence-page", "--results", *args.results, "--out", args.out])
    atomic_write_text(args.out, render_markdown(results, command))
    print(f"wrote {args.out}")


def register(subparsers) -> None:
    p = add_command(subparsers, "family-split", cmd_family_split, "one family's problems of a families-task split")
    p.add_argument("--train", required=True)
    p.add_argument("--family", required=True)
    p.add_argument("--out", required=True)

    p = add_command(subparsers, "family-independence", cmd_family_independence,
                    "every family's own-strategy share, base model and a model trained on one family")
    p.add_argument("--base-model", required=True)
    p.add_argument("--trained-model", required=True)
    p.add_argument("--train", required=True, help="the families task's training split (every family)")
    p.add_argument("--family", required=True, help="the family the trained model was trained on")
    p.add_argument("--rl-params", type=json_arg, required=True, help="RL's sampler, as the regime diagnosis takes it")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)

    p = add_command(subparsers, "family-independence-page", cmd_family_independence_page,
                    "tabulate family-independence results (files named ...seed<k>.json)")
    p.add_argument("--results", nargs="+", required=True)
    p.add_argument("--out", required=True)
