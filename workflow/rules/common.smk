import hashlib
import json
import os

# What the rules build, derived from the config: nudgerl.plan.workflow_plan (unit-tested in
# tests/test_workflow_plan.py). Every name a rule file reads is bound here, one per line, so
# `grep -n "^NAME = " workflow/rules/common.smk` finds it; this file also keeps what needs
# Snakemake itself (wildcard constraints, the scheduler settings, report entries).
from nudgerl.io import CONFIG_FILES_ENV, CONFIG_SHA256_ENV
from nudgerl.plan.arguments import EVAL_EXCLUDE, GRPO_RUN_EXCLUDE
from nudgerl.plan.workflow_plan import WorkflowPlan

PLAN = WorkflowPlan(config)

# Which configuration ran, recorded in every result's provenance (nudgerl.io.provenance): the
# jobs inherit these (a cluster job's inner snakemake sets them again from the same files).
os.environ[CONFIG_FILES_ENV] = os.pathsep.join(map(str, workflow.configfiles))
os.environ[CONFIG_SHA256_ENV] = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()

# ---- the configuration ------------------------------------------------------------------
TASK = PLAN.paths.TASK  # organism | math
SEEDS = PLAN.methods.SEEDS
ABLATION_SEEDS = PLAN.methods.ABLATION_SEEDS
BASE_SEEDS = PLAN.methods.BASE_SEEDS  # the base models the replicates start from
BENCHMARKS = PLAN.paths.BENCHMARKS
MODELS = PLAN.paths.MODELS  # task math: the real base models by name
GGUF_MODELS = PLAN.paths.GGUF_MODELS
HUB_MODELS = PLAN.paths.HUB_MODELS
HUB_OFFLINE = PLAN.paths.HUB_OFFLINE  # command prefix of jobs that load a base policy
TRAIN_RETRIES = PLAN.resources.TRAIN_RETRIES
# the families task's independence check (workflow/rules/families.smk): family, N, replicates
FAMILY_CHECK = config.get("family_independence") or {}
EVAL_RETRIES = PLAN.resources.EVAL_RETRIES


def main_process_retries(retries):
    """A rule's own retries, in the main Snakemake process only: inside a Slurm job the job step's
    Snakemake (workflow.remote_exec) would rerun a job that stopped for its time limit in the same
    allocation, with no time left (snakemake-executor-plugin-slurm issue #284); the main process
    resubmits it as a new Slurm job instead."""
    return 0 if workflow.remote_exec else retries
N_BOOT = PLAN.arguments.N_BOOT
EXPLORATION_SHARE = PLAN.arguments.EXPLORATION_SHARE
EXPLORATION_CONFIDENCE = PLAN.arguments.EXPLORATION_CONFIDENCE
VERDICTS = PLAN.arguments.VERDICTS  # `claims --verdicts`: the rule over replicates (report.verdicts)
VERDICT_ALPHA = PLAN.arguments.VERDICT_ALPHA
POWER_TABLES = PLAN.arguments.POWER_TABLES  # `power-table --tables`: this config's tables and replicates
TABLE1_EXPLORATION_ARG = PLAN.arguments.table1_exploration_arg(PLAN.paths.TASK)
TABLE1_AA_ARG = PLAN.arguments.table1_aa_arg()  # `table --aa grpo8 grpo8_aa` with an A/A pair, else ""
# `table --base-model-seed K` when every replicate starts from one base model (base_model_seed), else ""
TABLE_BASE_MODEL_ARG = PLAN.arguments.table_base_model_arg()
AA_EVALS = PLAN.methods.aa_evals()  # the A/A pair's evaluations ([] without one)

# ---- where files live ---------------------------------------------------------------------
SHARED = PLAN.paths.SHARED
RESULTS = PLAN.paths.RESULTS
DATA = PLAN.paths.DATA
TRAIN = PLAN.paths.TRAIN
POOLS = PLAN.paths.POOLS
RANKED_POOLS = PLAN.paths.RANKED_POOLS
ORACLES = PLAN.paths.ORACLES
BASE_MODEL = PLAN.paths.BASE_MODEL
DRILLED_MODEL = PLAN.paths.DRILLED_MODEL
DIAGNOSIS = PLAN.paths.DIAGNOSIS
POOL_DVC_STAGE = PLAN.paths.POOL_DVC_STAGE
ORACLE_DVC_STAGE = PLAN.paths.ORACLE_DVC_STAGE
# a job's roots and prefixes, from its wildcards, inputs or outputs (params functions)
results_root = PLAN.paths.results_root
eval_root = PLAN.paths.eval_root
runs_root = PLAN.paths.runs_root
output_run_dir = PLAN.paths.output_run_dir
input_run_dir = PLAN.paths.input_run_dir
figure_prefix = PLAN.paths.figure_prefix
table_prefix = PLAN.paths.table_prefix

# ---- the runs: method ids, ablations, sweeps, curves, claims --------------------------------
METHODS = PLAN.methods.METHODS
GRPO_METHODS = PLAN.methods.GRPO_METHODS
POPE_METHOD = PLAN.methods.POPE_METHOD
NUDGE_MAIN = PLAN.methods.NUDGE_MAIN
ABLATIONS = PLAN.methods.ABLATIONS
ABLATION_TITLES = PLAN.methods.ABLATION_TITLES
REFERENCE = PLAN.methods.REFERENCE
EPS_MAIN = PLAN.methods.EPS_MAIN
EPS_SWEEP = PLAN.methods.EPS_SWEEP
CURVE_BENCHMARKS = PLAN.methods.CURVE_BENCHMARKS
CURVE_SEEDS = PLAN.methods.CURVE_SEEDS
CURVE_METHODS = PLAN.methods.CURVE_METHODS
CASE_METHODS = PLAN.methods.CASE_METHODS
EVALUATED = PLAN.methods.EVALUATED
BASELINES = PLAN.methods.BASELINES
BASELINE_SEEDS = PLAN.methods.BASELINE_SEEDS
BASELINE_GROUP_SIZE = PLAN.methods.BASELINE_GROUP_SIZE
BASELINE_TABLE_METHODS = PLAN.methods.BASELINE_TABLE_METHODS
RUN_SEEDS = PLAN.methods.RUN_SEEDS
AA_SEED_OFFSET = PLAN.methods.AA_SEED_OFFSET  # the A/A repeat's RL and sampling seeds: the replicate's + this
run_seed = PLAN.methods.run_seed  # a run's RL / sampling seed (the A/A repeat's moved)
claim_evals = PLAN.methods.claim_evals
claim_metrics = PLAN.methods.claim_metrics

# ---- the regime map (regime_map.smk; None without a `regime_map` section) -----------------
RMAP = PLAN.regime_map.RMAP
# `regime_map` where the map cannot run (task math, or the families task): stops, names the config
regime_map_needs_single_family = PLAN.regime_map.regime_map_needs_single_family
RMAP_DIR = PLAN.regime_map.RMAP_DIR
RMAP_CELL = PLAN.regime_map.RMAP_CELL
RMAP_CELLS = PLAN.regime_map.RMAP_CELLS
regime_map_base_section = PLAN.regime_map.regime_map_base_section
regime_map_train_command = PLAN.regime_map.regime_map_train_command
regime_map_train_section = PLAN.regime_map.regime_map_train_section
regime_map_curve_section = PLAN.regime_map.regime_map_curve_section
regime_map_grid_section = PLAN.regime_map.regime_map_grid_section
RMAP_BASELINES = PLAN.regime_map.RMAP_BASELINES
RMAP_BASELINE_SEEDS = PLAN.regime_map.RMAP_BASELINE_SEEDS
RMAP_BASELINE_CELLS = PLAN.regime_map.RMAP_BASELINE_CELLS
RMAP_BASELINE_OUTPUTS = PLAN.regime_map.RMAP_BASELINE_OUTPUTS
regime_map_baselines_grid_section = PLAN.regime_map.regime_map_baselines_grid_section
regime_map_root = PLAN.regime_map.regime_map_root
RMAP_ACCURACY_CELLS = PLAN.regime_map.RMAP_ACCURACY_CELLS
RMAP_ACCURACY_SEEDS = PLAN.regime_map.RMAP_ACCURACY_SEEDS
RMAP_ACCURACY_OUTPUTS = PLAN.regime_map.RMAP_ACCURACY_OUTPUTS
regime_map_accuracy_grid_section = PLAN.regime_map.regime_map_accuracy_grid_section
regime_map_diagnosis_train = PLAN.regime_map.regime_map_diagnosis_train
regime_map_rl_diagnosis_args = PLAN.regime_map.regime_map_rl_diagnosis_args

# ---- the study (study.smk; None without a `study` section) --------------------------------
STUDY = PLAN.study.STUDY
STUDY_SEED_SET_ARGS = PLAN.study.STUDY_SEED_SET_ARGS
STUDY_COMMON_SHARES = PLAN.study.STUDY_COMMON_SHARES
STUDY_RL_WORKS_METHOD = PLAN.study.STUDY_RL_WORKS_METHOD
study_tables = PLAN.study.study_tables
study_needs_its_config = PLAN.study.study_needs_its_config  # `study` without config/study.yaml: stops, names it
STUDY_CLAIM_CELLS = PLAN.study.STUDY_CLAIM_CELLS  # the map's common cells where the claims are judged again
STUDY_CLAIM_ARGS = PLAN.study.study_claim_args()  # `claims --regime ... --cell ...`; "" outside the study
study_claim_inputs = PLAN.study.study_claim_inputs
study_cell_evals = PLAN.study.study_cell_evals
study_cell_table_methods = PLAN.study.study_cell_table_methods
study_cell_table_reference = PLAN.study.study_cell_table_reference

# ---- what a rule's input, params and resources functions return ---------------------------
section = PLAN.arguments.section
eval_section = PLAN.arguments.eval_section  # evaluate's: its run's samples per problem (eval.samples_per_role)
model_section = PLAN.arguments.model_section  # a GPU rule's section with its model's own keys (models[].<section>)
rl_diagnosis_section = PLAN.arguments.rl_diagnosis_section
drill_section = PLAN.arguments.drill_section
grpo_eps_section = PLAN.arguments.grpo_eps_section
pope_section = PLAN.arguments.pope_section
baseline_section = PLAN.arguments.baseline_section
nudge_section = PLAN.arguments.nudge_section
nudge_shape_section = PLAN.arguments.nudge_shape_section
sampling_section = PLAN.arguments.sampling_section
run_seeds_section = PLAN.arguments.run_seeds_section
claim_roles_section = PLAN.arguments.claim_roles_section
gguf_input = PLAN.paths.gguf_input
gguf_args = PLAN.paths.gguf_args
snapshot_source = PLAN.paths.snapshot_source
rule_resources = PLAN.resources.rule_resources
rule_threads = PLAN.resources.rule_threads
# the GPUs each rule's jobs ask for (config resources.gpu): what the compute table charges them
GPUS_PER_RULE = config.get("resources", {}).get("gpu", {})
dvc_stage_deps = PLAN.paths.dvc_stage_deps
dvc_stage_definition = PLAN.paths.dvc_stage_definition
helper_calls_api = PLAN.paths.helper_calls_api
benchmark_files = PLAN.paths.benchmark_files
data_spec = PLAN.arguments.data_spec
local_data_arg = PLAN.arguments.local_data_arg
prompt_arg = PLAN.arguments.prompt_arg
base_model_input = PLAN.paths.base_model_input
base_model_arg = PLAN.paths.base_model_arg
regime_input = PLAN.paths.regime_input
nudge_pools = PLAN.methods.nudge_pools
model_dir = PLAN.paths.model_dir
model_arg = PLAN.paths.model_arg
launcher = PLAN.resources.launcher
attempt_number = PLAN.resources.attempt_number
inference_launcher = PLAN.resources.inference_launcher
eval_launcher = PLAN.resources.eval_launcher  # evaluate's: with its time budget under Slurm (stop, exit 75, retry)
result_outputs = PLAN.result_outputs
final_outputs = PLAN.final_outputs


wildcard_constraints:
    model=r"[A-Za-z0-9_.-]+",
    seed=r"\d+",
    n=r"\d+",
    # the last alternative: the field's baselines (dapo8, ngrpo8, ...: nudgerl.method_ids)
    method=r"base|grpo\d+|grpo\d+_eps[0-9.]+|grpo\d+_aa|pope\d+|nudgerl\d+(_[a-z0-9.]+)?|[a-z]+\d+",
    eps=r"[0-9]+(\.[0-9]+)?",
    ablation=r"pdrop|hint_sampling|distill",
    # a regime-map cell: share<s>, or share<s>_accuracy<a> on the map's second axis
    cell=r"share[0-9.]+(_accuracy[0-9.]+)?",
    family=r"[a-z]+",  # the families task's (nudgerl.organism.families.FAMILIES)


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
    from nudgerl import job_client

    # the run's shared folder: RESULTS holds a {model} wildcard under task math
    os.makedirs(f"{SHARED}/logs", exist_ok=True)
    handle = job_client.start(log=f"{SHARED}/logs/job_server.log")
    if handle is None:
        print(f"nudgerl: the job server did not start ({SHARED}/logs/job_server.log); every job imports on its own")
    JOB_SERVER.append(handle)


def stop_job_server():
    from nudgerl import job_client

    while JOB_SERVER:
        job_client.stop(JOB_SERVER.pop())


# `snakemake --report` categories, numbered because the report lists them alphabetically.
REPORT_MAIN = "1. Main results"
REPORT_ABLATIONS = "2. Ablations"
REPORT_DIAGNOSTICS = "3. Diagnostics"
REPORT_COMPUTE = "4. Compute and audit"
REPORT_REGIME_MAP = "5. Regime map"
REPORT_STUDY = "6. Study"


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


# Checkpoints pruned once nothing needs them (config grpo.prune_checkpoints; off by default, so
# the organism runs keep theirs). A run's checkpoints serve a resume and its curve; once the run
# is complete (model/ and its report written) and its curve, if it has one, written, the prune
# deletes every checkpoint-<step> folder but the curve's own steps (so a rerun of curve_eval,
# after a code change for instance, still finds them; the final weights are model/).
# checkpoints/ is no declared output of any rule, so deleting in it trips no output check and
# reruns no training.
PRUNE_CHECKPOINTS = bool(config["grpo"].get("prune_checkpoints", False))
PRUNE_MARKERS = [f"{RESULTS}/runs/{m}/seed{s}/checkpoints_pruned.json" for m, seeds in RUN_SEEDS.items()
                 if m != "base" for s in seeds] if PRUNE_CHECKPOINTS else []


def has_curve(wildcards) -> bool:
    return wildcards.method in CURVE_METHODS and int(wildcards.seed) in map(int, CURVE_SEEDS)


def prune_curve_input(wildcards):
    """The run's curve when it has one: nothing is pruned before curve_eval has read the checkpoints."""
    if has_curve(wildcards):
        return f"{RESULTS}/curves/{wildcards.method}/seed{wildcards.seed}/curve.jsonl".format(**dict(wildcards.items()))
    return []


def prune_keep_steps(wildcards) -> str:
    """--keep-steps of a curve run: the checkpoints its curve reads (eval.curve.every's multiples
    below max_steps; the last point is model/). Other runs keep none."""
    if not has_curve(wildcards):
        return ""
    every, last = int(config["eval"]["curve"]["every"]), int(config["grpo"]["max_steps"])
    return "--keep-steps " + " ".join(str(s) for s in range(every, last, every))
