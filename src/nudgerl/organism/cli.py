"""Subcommands of the model organism's boxes (workflow/rules/data.smk, base.smk): its
generated problems and benchmarks, and its base model, SFT'd from scratch per replicate."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from nudgerl.arguments import add_command, add_job_arguments, json_arg, set_threads


def cmd_make_data(args) -> None:
    import importlib

    from nudgerl.io import write_jsonl, write_provenance
    from nudgerl.organism.base_config import TASKS

    task = importlib.import_module(TASKS[args.task])
    org = args.params
    seed = org.get("seed", 0)
    out = Path(args.out_dir)
    train = task.training_problems(seed, org["train"]["size"], org["train"]["hard_fraction"])
    write_jsonl(out / "train.jsonl", [p.to_record() for p in train])
    specs = {k: (v["size"], v["hard_fraction"]) for k, v in org["benchmarks"].items()}
    for name, problems in task.evaluation_sets(seed, specs).items():
        write_jsonl(out / "eval" / f"{name}.jsonl", [p.to_record() for p in problems])
    write_provenance(out / "train.jsonl", {**org, "task": args.task}, {"organism": seed},
                     outputs=[out / "eval" / f"{name}.jsonl" for name in specs])
    print(f"wrote {len(train)} training problems and {len(specs)} benchmarks to {out}")


def _build_in_place(out_dir: str, build) -> None:
    """``build(tmp)`` writes a model folder under a temporary name, renamed into place after:
    a kill never leaves a half-saved model."""
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    build(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def cmd_train_base(args) -> None:
    set_threads(args.threads)
    from nudgerl.io import atomic_write_text, write_provenance
    from nudgerl.organism.base_config import BaseModelConfig
    from nudgerl.organism.base_model import train_base_model

    cfg = BaseModelConfig.from_dict({**args.params, "seed": args.seed})

    def build(tmp: Path) -> None:
        report = train_base_model(cfg, tmp, drilled=args.drilled)
        report["threads"] = args.threads  # float summation order depends on it
        atomic_write_text(tmp / "sft_report.json", json.dumps(report, indent=2))
        # the kept model's own seed, where a later attempt built it
        seeds = {"base_model": cfg.seed, **({"model": report["model_seed"]} if report["model_seed"] != cfg.seed else {})}
        write_provenance(tmp, args.params, seeds, inputs=[args.drilled] if args.drilled else ())

    _build_in_place(args.out_dir, build)


def cmd_drill_base(args) -> None:
    set_threads(args.threads)
    from nudgerl.io import write_provenance
    from nudgerl.organism.base_config import BaseModelConfig
    from nudgerl.organism.base_model import drill_base_model

    cfg = BaseModelConfig.from_dict({**args.params, "seed": args.seed})

    def build(tmp: Path) -> None:
        drill_base_model(cfg, tmp)
        write_provenance(tmp, args.params, {"base_model": cfg.seed})

    _build_in_place(args.out_dir, build)


TITLE = "organism: the synthetic task's data and base model"


def register(subparsers) -> None:
    p = add_command(subparsers, "make-data", cmd_make_data, "generate the organism's training split and benchmarks")
    p.add_argument("--params", type=json_arg, required=True, help="the 'organism' config section as JSON")
    p.add_argument("--task", default="single_family", choices=["single_family", "families"],
                   help="the organism's task (config base_model.task)")
    p.add_argument("--out-dir", required=True)

    p = add_command(subparsers, "train-base", cmd_train_base, "SFT the organism's tiny base model from scratch")
    add_job_arguments(p)
    p.add_argument("--seed", type=int, default=0, help="the replicate: SFT data, initialisation, order")
    p.add_argument("--drilled", help="a drill-base folder of the same seed: phase 1 read from there, not run")
    p.add_argument("--out-dir", required=True)

    p = add_command(subparsers, "drill-base", cmd_drill_base,
                    "phase 1 of train-base alone (the arithmetic drill), for base models that share it")
    add_job_arguments(p)  # --params: the base_model section (phase 1 reads base_model.DRILL_KEYS only)
    p.add_argument("--seed", type=int, default=0, help="the replicate: initialisation, drill order")
    p.add_argument("--out-dir", required=True)
