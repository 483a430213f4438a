"""GPU hours of a configuration's DAG, planned before any are spent (``nudgerl.reporting.gpu_hours``).

Every GPU job of the dry run (``snakemake all -n``) is costed from the config's own numbers
(steps, rollouts, lengths, samples, benchmark sizes, vLLM memory share) and a small model of a
GPU: decoding is bound by memory bandwidth (one pass over the weights per token step, for all
sequences in flight), the number in flight by the KV cache the vLLM share leaves, a generation
batch waits for its longest rollout, and training is bound by FLOPs. The figures of a GPU and a
model are documented defaults (:data:`GPUS`, :data:`MODEL_SHAPES`); ``--measured`` replaces
them with what the first-node check measured on the cluster's card. A plan, not a measurement:
its point is which jobs cannot finish inside their time limit and resume chain, and the order
of the total, before the first job starts.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

# The cards and the models' shapes (GPUS, MODEL_SHAPES) live in nudgerl.gpu_memory, shared with
# the jobs' memory preflight; named here too, where the plan's readers look for them.
from nudgerl.gpu_memory import GPU, GPUS, MODEL_SHAPES, ModelShape, kv_cache_tokens  # noqa: F401
from nudgerl.method_ids import eval_samples
from nudgerl.sections import section_for_model
from nudgerl.table_text import markdown_table

# ---------------------------------------------------------------- the documented defaults


@dataclass(frozen=True)
class Efficiency:
    """Shares of a datasheet figure a real stack reaches (assumptions, stated in the output)."""
    decode_bandwidth: float = 0.5       # of HBM bandwidth while decoding (vLLM, small batches)
    train_mfu: float = 0.3              # of bf16 FLOPs for LoRA training with checkpointing
    memory_overhead_gb: float = 3.0     # activations, CUDA graphs, allocator: off vLLM's share
    step_overhead_s: float = 10.0       # per generation batch: weight sync, vLLM sleep/wake, grading
    job_start_s: float = 300.0          # per job: Snakemake, model load, vLLM start (CUDA graphs)
    completion_fill: float = 0.5        # mean completion length / the maximum (math RL, 6k tokens)
    prompt_tokens: int = 300            # a problem with the template (and a hint)
    eval_memory_utilization: float = 0.9  # evaluation's own vLLM engine (sampling.py's default)


# Problems per benchmark of config/paper.yaml (MATH500 at level 5; the pinned Apex shortlist)
BENCHMARK_PROBLEMS = {"aime24": 30, "aime25": 30, "amc23": 40, "math500": 134, "apex": 47}
STOP_BEFORE_LIMIT_H = 0.5  # a training job stops 30 min before its limit (plan.resources)
EVAL_STOP_BEFORE_LIMIT_H = 10 / 60  # an evaluation, between chunks (plan.resources EVAL_STOP_BEFORE_LIMIT_S)


# ---------------------------------------------------------------- the model of a GPU


@dataclass(frozen=True)
class Engine:
    """Decoding on one GPU: tokens a second per sequence, and how many fit in the KV cache."""
    tokens_per_s_per_seq: float
    kv_tokens: int
    train_tokens_per_s: float

    def in_flight(self, seq_len: int) -> int:
        return max(0, self.kv_tokens // seq_len)


def engine(shape: ModelShape, gpu: GPU, memory_share: float, eff: Efficiency) -> Engine:
    kv = kv_cache_tokens(shape, gpu.memory_gb, memory_share, eff.memory_overhead_gb)
    per_seq = gpu.bandwidth_tb_s * 1e12 * eff.decode_bandwidth / (shape.weight_gb * 1e9)
    # 6 N FLOPs a trained token, and a recomputed forward under gradient checkpointing (8 N)
    train = gpu.bf16_tflops * 1e12 * eff.train_mfu / (8 * shape.params_b * 1e9)
    return Engine(per_seq, kv, train)


def generation_seconds(rollouts: int, max_len: int, eng: Engine, prompt: int) -> float:
    """One batch of ``rollouts``: as many in flight as the KV cache holds at full length, each wave
    lasting as long as its longest rollout (the maximum length: RL on hard problems truncates)."""
    at_once = eng.in_flight(prompt + max_len)
    if at_once < 1:
        return math.inf
    waves = math.ceil(rollouts / at_once)
    return waves * max_len / eng.tokens_per_s_per_seq


def sampling_seconds(sequences: int, mean_len: float, eng: Engine, prompt: int, batch: int) -> float:
    """Many independent samples (evaluation, ranking): the engine keeps min(batch, what fits at
    the mean length) sequences in flight, so time follows the mean length."""
    at_once = min(batch, eng.in_flight(int(prompt + mean_len)))
    if at_once < 1:
        return math.inf
    return sequences * mean_len / (at_once * eng.tokens_per_s_per_seq)


# ---------------------------------------------------------------- the jobs of a dry run


GPU_RULES = ("train_grpo", "train_grpo_eps", "train_baseline", "train_nudgerl", "train_pope", "evaluate",
             "curve_eval", "rank_hints")


def dry_run_jobs(text: str) -> list[dict]:
    """Every job of ``snakemake -n`` output: rule, wildcards and resources (as printed)."""
    jobs = []
    for block in re.split(r"\n(?:local)?rule ", "\n" + text)[1:]:
        rule = block.split(":", 1)[0]

        def fields(name):
            m = re.search(rf"^    {name}: (.*)$", block, re.M)
            return dict(kv.split("=", 1) for kv in m.group(1).split(", ")) if m else {}

        jobs.append({"rule": rule, "wildcards": fields("wildcards"), "resources": fields("resources")})
    return jobs


def rollouts_per_prompt(job: dict, config: dict) -> int:
    """N of a training job: the wildcard n, NudgeRL's M x K, else the number in the method id
    (passk8, dapo8), else the group size the config gives the rule."""
    w = job["wildcards"]
    if "n" in w:
        return int(w["n"])
    if job["rule"] == "train_nudgerl":
        return int(config["nudgerl"]["M"]) * int(config["nudgerl"]["K"])
    m = re.match(r"[a-z_]+?(\d+)", w.get("method", ""))
    if m:
        return int(m.group(1))
    raise ValueError(f"rule {job['rule']} {w}: cannot tell its rollouts per prompt")


@dataclass
class JobCost:
    rule: str
    model: str
    method: str
    hours: float          # GPU-hours of the job (one GPU)
    limit_h: float        # its time limit
    chain: int            # jobs it needs (a training run resumes over jobs)
    allowed: int          # jobs it may take (1 + train_retries for training, else 1)
    tokens: float
    step_s: float = 0.0   # seconds an optimizer step (training jobs; 0 for the others)

    @property
    def fits(self) -> bool:
        return self.chain <= self.allowed


def job_cost(job: dict, config: dict, gpu: GPU, eff: Efficiency, measured: dict | None = None,
             pool_hints: int = 5) -> JobCost:
    w, rule = job["wildcards"], job["rule"]
    name = w.get("model")
    paths = {m["name"]: m["path"] for m in config["models"]}
    if name not in paths:
        raise ValueError(f"rule {rule}: model {name!r} is not in the config's models")
    shape = MODEL_SHAPES.get(paths[name])
    if shape is None:
        raise ValueError(f"model {name} ({paths[name]}): no shape known to the plan; add it to "
                         "nudgerl.gpu_memory.MODEL_SHAPES (from its config.json)")
    g = section_for_model(config, "grpo", name)  # the model's own vLLM share (models[].grpo) included
    limit_h = float(job["resources"].get("runtime", 60)) / 60
    if rule.startswith("train_"):
        eng = engine(shape, gpu, float(g.get("vllm_gpu_memory_utilization", 0.3)), eff)
    else:
        eng = engine(shape, gpu, eff.eval_memory_utilization, eff)
    if measured and name in measured:
        eng = replace(eng, **{k: v for k, v in measured[name].items() if k in Engine.__dataclass_fields__})
    if rule.startswith("train_"):
        n = rollouts_per_prompt(job, config)
        prompts = int(g.get("prompts_per_step", 1))
        generations = int(g["max_steps"]) // int(g.get("optimizer_steps_per_generation", 1))
        max_len = int(g["max_completion_length"])
        mean_len = eff.completion_fill * max_len
        rollouts = prompts * n
        gen_s = generation_seconds(rollouts, max_len, eng, eff.prompt_tokens)
        trained = rollouts * (eff.prompt_tokens + mean_len)
        if rule == "train_nudgerl" and not w.get("method", "").endswith("distill0"):
            trained *= 2  # the distillation term: each rollout again under its hint-free prompt
        step_s = gen_s + trained / eng.train_tokens_per_s + eff.step_overhead_s
        seconds, tokens = generations * step_s, generations * rollouts * mean_len
        # each job of the chain trains until 30 min before its limit, after its own start
        per_job_s = (limit_h - STOP_BEFORE_LIMIT_H) * 3600 - eff.job_start_s
        retries = config.get("train_retries") or 0
        chain = math.ceil(seconds / per_job_s) if per_job_s > 0 and seconds < math.inf else math.inf
        seconds += (chain if chain < math.inf else 1) * eff.job_start_s
        return JobCost(rule, name, w.get("method", f"grpo{n}"), seconds / 3600, limit_h, chain, 1 + retries, tokens,
                       step_s / int(g.get("optimizer_steps_per_generation", 1)))
    if rule == "evaluate":
        ev = config["eval"]
        # at its run's role's count (eval.samples_per_role: Table 1 at the paper's, the rest fewer)
        sequences = sum(BENCHMARK_PROBLEMS.get(b, 0) for b in config["data"]["benchmarks"]) * eval_samples(
            config, w.get("method", "base"))
        max_len, batch = int(ev["max_new_tokens"]), int(ev.get("batch_size", 128))
    elif rule == "curve_eval":
        ev, curve = config["eval"], config["eval"]["curve"]
        checkpoints = int(g["max_steps"]) // int(curve["every"]) + 1
        problems = sum(BENCHMARK_PROBLEMS.get(b, 0) for b in curve["benchmarks"])
        sequences = checkpoints * problems * int(curve["samples"])
        max_len, batch = int(ev["max_new_tokens"]), int(ev.get("batch_size", 128))
    elif rule == "rank_hints":
        rk = config["ranking"]
        # each problem's hints and no hint, ``samples`` times each
        sequences = int(config["data"]["train"].get("size", 0)) * (pool_hints + 1) * int(rk["samples"])
        max_len, batch = int(rk["max_new_tokens"]), int(rk.get("batch_size", 128))
    else:
        raise ValueError(f"rule {rule}: not a GPU rule the plan knows ({', '.join(GPU_RULES)})")
    mean_len = eff.completion_fill * max_len
    seconds = sampling_seconds(sequences, mean_len, eng, eff.prompt_tokens, batch) + eff.job_start_s
    chain = math.ceil(seconds / 3600 / limit_h) if seconds < math.inf else math.inf
    allowed = 1
    if rule == "evaluate":
        # an evaluation stops between chunks before its limit and its retries resume it
        # (eval.chunk_problems, eval_retries): each job samples until the lead before its limit
        per_job_s = (limit_h - EVAL_STOP_BEFORE_LIMIT_H) * 3600 - eff.job_start_s
        chain = math.ceil((seconds - eff.job_start_s) / per_job_s) if per_job_s > 0 and seconds < math.inf else math.inf
        seconds += (max(chain, 1) - 1) * eff.job_start_s if chain < math.inf else 0
        allowed += config.get("eval_retries") or 0
    return JobCost(rule, name, w.get("method", "-"), seconds / 3600, limit_h, chain, allowed, sequences * mean_len)


def plan(jobs: list[dict], config: dict, gpu: GPU, eff: Efficiency = Efficiency(),
         measured: dict | None = None, pool_hints: int = 5) -> list[JobCost]:
    return [job_cost(j, config, gpu, eff, measured, pool_hints) for j in jobs
            if j["rule"] in GPU_RULES and int(j["resources"].get("gpu", 0) or 0) >= 1]


# ---------------------------------------------------------------- checkpoint intervals


def checkpoint_interval(step_s: float, target_minutes: float, curve_every: int | None = None,
                        generation_steps: int = 1) -> int:
    """The largest checkpoint interval (optimizer steps) whose steps take at most
    ``target_minutes``, so that a lost node costs at most that much training. It stays a
    multiple of ``generation_steps`` (a checkpoint inside a generation batch would resume without
    the rest of its rollouts) and, for a run with a curve, a divisor of ``curve_every`` (the curve
    reads the checkpoints at its multiples); with neither bound to meet, one generation batch."""
    if step_s <= 0 or target_minutes <= 0:
        raise ValueError(f"step seconds ({step_s}) and target minutes ({target_minutes}) must be positive")
    most = max(1, int(target_minutes * 60 // step_s))  # steps that fit the target (at least one)
    if curve_every:
        fits = [d for d in range(generation_steps, curve_every + 1, generation_steps)
                if curve_every % d == 0 and d <= most]
    else:
        fits = [most // generation_steps * generation_steps] if most >= generation_steps else []
    return max(fits, default=generation_steps)


def lost_hours(step_s: float, checkpoint_every: int, eff: Efficiency) -> float:
    """Training a lost node costs at worst: the steps since the last checkpoint, and the new
    job's start (model load, vLLM) before training resumes."""
    return (checkpoint_every * step_s + eff.job_start_s) / 3600


def render_checkpoint_table(costs: list[JobCost], config: dict, eff: Efficiency, target_minutes: float) -> list[str]:
    """Per model and run kind (the GRPO group sizes apart: their step times differ most), the
    work a lost node costs at the configured ``grpo.checkpoint_every`` and the interval that
    would bound it to ``target_minutes`` (:func:`checkpoint_interval`)."""
    g = config["grpo"]
    every = int(g.get("checkpoint_every", 10))
    gen_steps = int(g.get("optimizer_steps_per_generation", 1))
    curve = (config.get("eval") or {}).get("curve") or {}
    curve_every = int(curve["every"]) if curve.get("every") else None
    worst: dict[tuple[str, str], float] = {}
    for c in costs:
        if c.rule.startswith("train_") and c.step_s < math.inf:
            kind = c.method if c.rule == "train_grpo" else c.rule
            worst[(c.model, kind)] = max(worst.get((c.model, kind), 0.0), c.step_s)
    if not worst:
        return []
    lines = ["", f"Work a lost node costs (a plan, not a measurement): the steps since the last checkpoint "
             f"(`grpo.checkpoint_every` = {every}) and a job's start, and the largest interval keeping it under "
             f"{target_minutes:g} min of training"
             + (f" (a divisor of `eval.curve.every` = {curve_every}, a multiple of the {gen_steps} steps a generation "
                "batch takes)" if curve_every else "") + ":",
             ""]
    def order(item):  # per model: GRPO by N, then the other rules in GPU_RULES order
        (model, kind), _ = item
        n = re.fullmatch(r"grpo(\d+)", kind)
        return model, 0 if n else 1 + GPU_RULES.index(kind), int(n.group(1)) if n else 0

    rows = []
    for (model, kind), step_s in sorted(worst.items(), key=order):
        k = checkpoint_interval(step_s, target_minutes, curve_every, gen_steps)
        rows.append([model, kind, f"{step_s:,.0f}", f"{lost_hours(step_s, every, eff):.1f}", k,
                     f"{lost_hours(step_s, k, eff):.1f}"])
    header = ["model", "run kind", "s / optimizer step", "h lost at checkpoint_every", "interval for the target",
              "h lost at it"]
    return lines + markdown_table(header, rows, align="--rrrr").splitlines()


# ---------------------------------------------------------------- the report


def _h(x: float) -> str:
    return "cannot run" if math.isinf(x) else f"{x:,.1f}"


def render_markdown(costs: list[JobCost], gpu: GPU, eff: Efficiency, source: str, config: dict | None = None,
                    checkpoint_minutes: float = 60.0) -> str:
    import pandas as pd

    df = pd.DataFrame([{**vars(c), "fits": c.fits} for c in costs])
    df["order"] = df["rule"].map(GPU_RULES.index)
    df = df.sort_values(["model", "order"], kind="stable")
    lines = [f"GPU-hours of `{source}` on one {gpu.name} a job (`nudgerl.reporting.gpu_hours`): {len(costs)} GPU jobs.",
             ""]
    rows = []
    for (model, rule), grp in df.groupby(["model", "rule"], sort=False):
        worst = grp.loc[grp["hours"].idxmax()]
        hours = grp["hours"].sum()
        rate = f"{grp['tokens'].sum() / (hours * 3600):,.0f}" if rule.startswith("train_") and hours < math.inf else ""
        chain = "-" if math.isinf(worst["chain"]) else int(worst["chain"])
        rows.append([model, rule, len(grp), _h(hours), rate, _h(worst["hours"]), f"{worst['limit_h']:g}",
                     f"{chain} / {worst['allowed']}"])
    total = df["hours"].sum()
    rows.append(["**total**", None, len(df), f"**{_h(total)}**", None, None, None, None])  # None: a blank cell
    header = ["model", "rule", "jobs", "GPU-hours", "rollout tokens/s", "longest job (h)", "its limit (h)",
              "jobs it needs / may take"]
    lines += [markdown_table(header, rows, align="--rrrrr-"), ""]
    bad = df[~df["fits"]]
    if len(bad):
        lines.append(f"**{len(bad)} jobs cannot finish** inside their time limit and resume chain:")
        for _, r in bad.iterrows():
            why = ("its rollouts do not fit the KV cache at full length" if math.isinf(r["hours"])
                   else f"{r['hours']:.1f} h in jobs of {r['limit_h']:g} h needs {r['chain']}, may take {r['allowed']}")
            lines.append(f"- {r['rule']} {r['model']} {r['method']}: {why}")
    else:
        lines.append("Every job fits its time limit and resume chain.")
    lines += ["", f"Assumptions: decoding at {eff.decode_bandwidth:.0%} of {gpu.bandwidth_tb_s} TB/s, training at "
              f"{eff.train_mfu:.0%} of {gpu.bf16_tflops:g} TFLOPs, mean completion {eff.completion_fill:.0%} of the "
              f"maximum, {eff.step_overhead_s:g} s overhead a generation batch and {eff.job_start_s:g} s a job's start, rollouts in waves the KV cache holds at "
              "full length; measured figures (`--measured`) replace them per model."]
    if config is not None:
        lines += render_checkpoint_table(costs, config, eff, checkpoint_minutes)
    return "\n".join(lines) + "\n"


def read_measured(path: str | None) -> dict | None:
    """``{"models": {name: {"tokens_per_s_per_seq": .., "kv_tokens": .., "train_tokens_per_s": ..}}}``"""
    if not path:
        return None
    data = json.loads(Path(path).read_text())
    models = data.get("models")
    if not isinstance(models, dict):
        raise ValueError(f"{path}: needs a 'models' mapping of model name -> measured engine figures")
    for name, figures in models.items():
        unknown = set(figures) - set(Engine.__dataclass_fields__)
        if unknown:
            raise ValueError(f"{path}: models.{name}: unknown keys {sorted(unknown)} "
                             f"(known: {sorted(Engine.__dataclass_fields__)})")
    return models


# The generated block of docs/cluster.md (nudgerl.reporting.gpu_hours --doc ...)
BEGIN = "<!-- BEGIN GENERATED by `nudgerl.reporting.gpu_hours --doc`: do not edit by hand -->"
END = "<!-- END GENERATED plan-cost -->"



def replace_block(text: str, block: str, where: str) -> str:
    from nudgerl.reporting.power import replace_block as replace_between

    return replace_between(text, f"{BEGIN}\n{block}{END}", where, BEGIN, END)
