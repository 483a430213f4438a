import json
import os

# What the rules build, derived from the config: nudgerl.workflow_plan (unit-tested in
# tests/test_workflow_plan.py). Every name a rule file reads is bound here, one per line, so
# `grep -n "^NAME = " workflow/rules/common.smk` finds it; this file also keeps what needs
# Snakemake itself (wildcard constraints, the scheduler settings, report entries).
from nudgerl.workflow_plan import EVAL_EXCLUDE, GRPO_RUN_EXCLUDE, WorkflowPlan

PLAN = WorkflowPlan(config)

# ---- the configuration ------------------------------------------------------------------
TASK = PLAN.TASK  # organism | math
SEEDS = PLAN.SEEDS
ABLATION_SEEDS = PLAN.ABLATION_SEEDS
BENCHMARKS = PLAN.BENCHMARKS
MODELS = PLAN.MODELS  # task math: the real base models by name
GGUF_MODELS = PLAN.GGUF_MODELS
HUB_MODELS = PLAN.HUB_MODELS
HUB_OFFLINE = PLAN.HUB_OFFLINE  # command prefix of jobs that load a base policy
TRAIN_RETRIES = PLAN.TRAIN_RETRIES
N_BOOT = PLAN.N_BOOT

# ---- where files live ---------------------------------------------------------------------
SHARED = PLAN.SHARED
RESULTS = PLAN.RESULTS
DATA = PLAN.DATA
TRAIN = PLAN.TRAIN
POOLS = PLAN.POOLS
RANKED_POOLS = PLAN.RANKED_POOLS
ORACLES = PLAN.ORACLES
BASE_MODEL = PLAN.BASE_MODEL
DRILLED_MODEL = PLAN.DRILLED_MODEL
DIAGNOSIS = PLAN.DIAGNOSIS
POOL_DVC_STAGE = PLAN.POOL_DVC_STAGE
ORACLE_DVC_STAGE = PLAN.ORACLE_DVC_STAGE

# ---- the runs: method ids, ablations, sweeps, curves, claims --------------------------------
METHODS = PLAN.METHODS
GRPO_METHODS = PLAN.GRPO_METHODS
POPE_METHOD = PLAN.POPE_METHOD
NUDGE = PLAN.NUDGE
NUDGE_MAIN = PLAN.NUDGE_MAIN
NUDGE_RUNS = PLAN.NUDGE_RUNS
ABLATIONS = PLAN.ABLATIONS
ABLATION_TITLES = PLAN.ABLATION_TITLES
REFERENCE = PLAN.REFERENCE
EPS_MAIN = PLAN.EPS_MAIN
EPS_SWEEP = PLAN.EPS_SWEEP
CURVE_BENCHMARKS = PLAN.CURVE_BENCHMARKS
CURVE_SEEDS = PLAN.CURVE_SEEDS
CURVE_METHODS = PLAN.CURVE_METHODS
CASE_METHODS = PLAN.CASE_METHODS
EVALUATED = PLAN.EVALUATED
RUN_SEEDS = PLAN.RUN_SEEDS
CLAIM_ROLES = PLAN.CLAIM_ROLES
claim_evals = PLAN.claim_evals
claim_metrics = PLAN.claim_metrics

# ---- the regime map (regime_map.smk; None without a `regime_map` section) -----------------
RMAP = PLAN.RMAP
RMAP_DIR = PLAN.RMAP_DIR
RMAP_CELL = PLAN.RMAP_CELL
RMAP_SHARES = PLAN.RMAP_SHARES
RMAP_GRID = PLAN.RMAP_GRID
regime_map_base_config = PLAN.regime_map_base_config
regime_map_train_command = PLAN.regime_map_train_command

# ---- what a rule's input, params and resources functions return ---------------------------
section = PLAN.section
rl_diagnosis_section = PLAN.rl_diagnosis_section
drill_section = PLAN.drill_section
gguf_input = PLAN.gguf_input
gguf_args = PLAN.gguf_args
snapshot_source = PLAN.snapshot_source
rule_resources = PLAN.rule_resources
rule_threads = PLAN.rule_threads
dvc_stage_deps = PLAN.dvc_stage_deps
dvc_stage_definition = PLAN.dvc_stage_definition
helper_calls_api = PLAN.helper_calls_api
benchmark_files = PLAN.benchmark_files
data_spec = PLAN.data_spec
local_data_arg = PLAN.local_data_arg
prompt_arg = PLAN.prompt_arg
base_model_input = PLAN.base_model_input
base_model_arg = PLAN.base_model_arg
regime_input = PLAN.regime_input
nudge_pools = PLAN.nudge_pools
model_dir = PLAN.model_dir
model_arg = PLAN.model_arg
launcher = PLAN.launcher
inference_launcher = PLAN.inference_launcher
result_outputs = PLAN.result_outputs
final_outputs = PLAN.final_outputs


wildcard_constraints:
    model=r"[A-Za-z0-9_.-]+",
    seed=r"\d+",
    n=r"\d+",
    method=r"base|grpo\d+|grpo\d+_eps[0-9.]+|pope\d+|nudgerl\d+(_[a-z0-9.]+)?",
    eps=r"[0-9]+(\.[0-9]+)?",
    ablation=r"pdrop|hint_sampling|distill",
    share=r"[0-9.]+",


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


# The local job server (config `job_server`; nudgerl.job_server): `nudgerl` jobs fork from one
# interpreter that has done the heavy imports. Local runs only: a cluster job runs on another
# node, where the client finds no server and runs the command itself anyway.
JOB_SERVER = []


def start_job_server():
    if not config.get("job_server") or not workflow.local_exec or workflow.remote_exec or workflow.touch:
        return
    from nudgerl import job_server

    os.makedirs(f"{RESULTS}/logs", exist_ok=True)
    handle = job_server.start(log=f"{RESULTS}/logs/job_server.log")
    if handle is None:
        print(f"nudgerl: the job server did not start ({RESULTS}/logs/job_server.log); every job imports on its own")
    JOB_SERVER.append(handle)


def stop_job_server():
    from nudgerl import job_server

    while JOB_SERVER:
        job_server.stop(JOB_SERVER.pop())


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
