"""Subcommands of the training box (workflow/rules/train.smk): GRPO, POPE and NudgeRL runs,
each from the base policy, the training problems and the grpo config section."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from nudgerl.arguments import add_command, json_arg, set_threads
from nudgerl.evaluation.model_arguments import add_model_arguments, prompt_template


def _problem_records(rows: list[dict], template) -> list[dict]:
    """Trainer rows: conversational prompt (x0), gold answer, id; the answer region if the
    template names one (the reward then grades that part of each completion)."""
    out = []
    for r in rows:
        messages = template.messages(r["problem"]) if template is not None else [
            {"role": "user", "content": r["problem"]}]
        rec = {"prompt": messages, "answer": r["answer"], "id": r["id"]}
        if template is not None and template.answer_region:
            rec["answer_region"] = template.answer_region
        out.append(rec)
    return out


def _run_config(params: dict, template):
    from nudgerl.training.grpo_config import GRPORunConfig

    cfg = GRPORunConfig.from_dict(params)
    if template is not None and template.stop and cfg.use_vllm:
        cfg.stop = list(template.stop)
    return cfg


def _run_outputs(run_dir: Path) -> list[Path]:
    """What a training job writes besides the model: metrics, report and checkpoints (the
    training-curve stage evaluates the checkpoints, so the audit covers them)."""
    return [p for p in (run_dir / "metrics.jsonl", run_dir / "train_report.json", run_dir / "checkpoints") if p.exists()]


def _finish_run(args, out: Path, report: dict, config: dict, inputs: list) -> None:
    """A trainer job's last writes: its report, then the model's provenance sidecar (config,
    seed, inputs, and hashes of the model, metrics, report and checkpoints). Under several
    processes only the main one writes them (the training set up accelerate's shared state)."""
    from accelerate import PartialState

    from nudgerl.io import atomic_write_text, write_provenance

    if not PartialState().is_main_process:
        return

    atomic_write_text(out / "train_report.json", json.dumps(report, indent=2, default=str))
    write_provenance(out / "model", {**config, "model": args.model, "revision": args.revision, "prompt": args.prompt},
                     {"train": args.seed}, [args.model, *inputs], outputs=_run_outputs(out))


@contextmanager
def _attempt(args):
    """One attempt of the run in ``--out-dir``: a retry of a failed run and a second live job on
    it refuse; a failure other than the planned stop is recorded (nudgerl.attempts).
    RANK: torchrun's process rank (several GPUs); only rank 0 guards the run folder."""
    from nudgerl.attempts import guarded_attempt

    with guarded_attempt(Path(args.out_dir), main=os.environ.get("RANK", "0") == "0"):
        yield


def cmd_train_grpo(args) -> None:
    set_threads(args.threads)
    with _attempt(args):
        from nudgerl.io import read_problems
        from nudgerl.training.grpo import train_grpo
        from nudgerl.training.grpo_config import GRPORunConfig

        params = dict(args.params, num_generations=args.num_generations, seed=args.seed, grader_mode=args.grader_mode)
        template = prompt_template(args)
        cfg = _run_config(params, template)
        assert isinstance(cfg, GRPORunConfig)
        records = _problem_records(read_problems(args.train), template)
        out = Path(args.out_dir)
        report = train_grpo(args.model, records, cfg, out, revision=args.revision)
        _finish_run(args, out, report, params, [args.train])


def cmd_train_pope(args) -> None:
    set_threads(args.threads)
    with _attempt(args):
        from nudgerl.offline.outputs import read_oracles
        from nudgerl.io import read_problems
        from nudgerl.training.grpo_config import GRPORunConfig
        from nudgerl.training.pope import POPEConfig, train_pope

        pope = POPEConfig.from_dict(args.pope)
        params = dict(args.params, num_generations=args.num_generations, seed=args.seed, grader_mode=args.grader_mode)
        template = prompt_template(args)
        cfg = _run_config(params, template)
        assert isinstance(cfg, GRPORunConfig)
        train = read_problems(args.train)
        oracles = read_oracles(args.oracles, train_ids={r["id"] for r in train})
        out = Path(args.out_dir)
        report = train_pope(args.model, train, oracles, cfg, pope, out, template=template, revision=args.revision)
        _finish_run(args, out, report, {**params, "pope": args.pope}, [args.train, args.oracles])


def cmd_train_nudgerl(args) -> None:
    set_threads(args.threads)
    with _attempt(args):
        from nudgerl.offline.outputs import read_pools
        from nudgerl.io import read_problems
        from nudgerl.training.grpo_config import GRPORunConfig
        from nudgerl.training.nudgerl import NudgeRLConfig, train_nudgerl

        nudge = NudgeRLConfig.from_dict(args.nudge)
        params = dict(args.params, num_generations=nudge.M * nudge.K, seed=args.seed, grader_mode=args.grader_mode)
        template = prompt_template(args)
        cfg = _run_config(params, template)
        assert isinstance(cfg, GRPORunConfig)
        train = read_problems(args.train)
        pools = read_pools(args.pools, train_ids={r["id"] for r in train})
        records = []
        for rec in _problem_records(train, template):
            if rec["id"] not in pools:
                raise KeyError(f"{args.pools} has no pool for training problem {rec['id']!r}")
            records.append({**rec, "hints": pools[rec["id"]]})
        out = Path(args.out_dir)
        report = train_nudgerl(args.model, records, cfg, nudge, out, template=template, revision=args.revision)
        _finish_run(args, out, report, {**params, "nudge": args.nudge}, [args.train, args.pools])


def cmd_prune_checkpoints(args) -> None:
    """Delete a finished run's checkpoints that neither a resume nor its curve needs any more
    (nudgerl.training.prune); refuses while the run is unfinished or its curve unwritten.
    ``--out``: the record's copy written once the prune is done (the Snakemake output)."""
    import sys

    from nudgerl.io import atomic_write_text
    from nudgerl.training.prune import prune_checkpoints

    try:
        record = prune_checkpoints(Path(args.run_dir), set(args.keep_steps), Path(args.curve) if args.curve else None)
    except ValueError as e:
        sys.exit(f"prune-checkpoints: {e}")
    if args.out:
        atomic_write_text(args.out, json.dumps(record, indent=2) + "\n")


TITLE = "training: GRPO, POPE and NudgeRL runs"


def _add_training(subparsers, name, fn, help_):
    """A baseline/method trainer: base model, problems, grpo section, seed, run folder."""
    p = add_command(subparsers, name, fn, help_)
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--params", type=json_arg, required=True, help="the grpo config section as JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-dir", required=True)
    return p


def register(subparsers) -> None:
    p = _add_training(subparsers, "train-grpo", cmd_train_grpo, "GRPO training (TRL GRPOTrainer)")
    p.add_argument("--num-generations", type=int, required=True)
    add_model_arguments(p)

    p = _add_training(subparsers, "train-pope", cmd_train_pope,
                      "POPE baseline: GRPO with oracle prefixes on guided problems")
    p.add_argument("--oracles", required=True)
    p.add_argument("--pope", type=json_arg, required=True, help="POPE parameters as JSON")
    p.add_argument("--num-generations", type=int, required=True)
    add_model_arguments(p)

    p = _add_training(subparsers, "train-nudgerl", cmd_train_nudgerl, "NudgeRL training (GRPOTrainer subclass)")
    p.add_argument("--pools", required=True)
    p.add_argument("--nudge", type=json_arg, required=True, help="NudgeRL parameters as JSON")
    add_model_arguments(p)

    p = add_command(subparsers, "prune-checkpoints", cmd_prune_checkpoints,
                    "delete a finished run's checkpoints once its curve has read them")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--keep-steps", type=int, nargs="*", default=[], help="checkpoint steps to keep")
    p.add_argument("--curve", help="the run's curve.jsonl: nothing is pruned before it (and its sidecar) exist")
    p.add_argument("--out", help="where to write a copy of the record once done (the rule's output)")
