# nudgerl: the NudgeRL (arXiv 2605.15726) experiment matrix as one Snakemake DAG.
# Thin entry point: rules live in workflow/rules/, each calls one `nudgerl` subcommand.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


from nudgerl.config import validate_config
from nudgerl.offline.dvc_stages import register_run
from nudgerl.tools import put_environment_first_on_path

# Jobs run `nudgerl` and `dvc` of the environment this snakemake runs in, activated or not.
put_environment_first_on_path()

# A new run_name gets its helper DVC stages: params.yaml stage_runs lists it (logged; a no-op once
# listed). In the main process only: a cluster job's inner snakemake finds it listed already.
if workflow.is_main_process:
    for line in register_run(config):
        logger.info(line)

# Schema (package data: src/nudgerl/schemas/config.schema.yaml) + preflight: fails before any job starts.
validate_config(config)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/base.smk"
include: "workflow/rules/families.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/pools.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/regime_map.smk"
include: "workflow/rules/study.smk"


onstart:
    # Before the first job is submitted (never in a dry run, which submits nothing): a
    # profile value still unfilled (profiles/slurm: $NUDGERL_SLURM_ACCOUNT unset, a
    # <PLACEHOLDER>) stops the run here instead of at sbatch.
    check_scheduler_placeholders()
    start_job_server()


onsuccess:
    stop_job_server()


onerror:
    stop_job_server()


rule all:
    input:
        final_outputs(),
    default_target: True
