"""What a rule's jobs ask the scheduler for and how a job's command starts: resources and
threads per rule (config `resources`), the GPU type (NUDGERL_SLURM_GPU_TYPE), and the launcher
prefix of training and inference jobs (accelerate for several GPUs, the time budget under Slurm).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from nudgerl.evaluation.benchmarks import BUDGET_VAR
from nudgerl.attempts import ATTEMPT_VAR

# The cluster's name for its GPU type (its GRES type, e.g. h100, a100_80g), from the
# environment like the Slurm account and partition (profiles/slurm): a tracked config cannot
# know it, and a type the cluster does not have is rejected at submission ("Requested node
# configuration is not available"). Empty or unset: a plain GPU count (sbatch --gpus=N).
GPU_TYPE_VAR = "NUDGERL_SLURM_GPU_TYPE"
# What snakemake-executor-plugin-slurm 2.6.1 accepts as gpu_model (utils.py, set_gres_string):
# no '-', so a type such as nvidia_a100-sxm4-80gb cannot be requested through it.
_PLUGIN_GPU_MODEL = re.compile(r"^[a-zA-Z0-9_.]+$")
# A training job stops itself before the scheduler's time limit (resources runtime): the
# trainer catches SIGUSR1, ends the current generation batch, saves a complete checkpoint and
# exits 75 (training/run_state.py); the retry (profiles/slurm `retries`) resumes from it.
# The signal comes from `timeout` around the trainer, not from sbatch --signal (slurm_extra).
# Measured with the pinned plugin on Slurm 22.05: --signal=USR1@N reaches every process of the
# job step, so the job's inner Snakemake, which does not handle SIGUSR1, dies at once and the
# job is reported failed (a retry could start) while the trainer is still saving; with
# --signal=B:USR1@N only the batch shell gets it, dies, and the job ends with the trainer killed.
# SIGUSR1 this long before the limit: the trainer's last step and the save (TRAIN_KILL_AFTER_S),
# plus the minutes Snakemake takes before the command starts and after it ends.
TRAIN_STOP_BEFORE_LIMIT_S = 30 * 60
TRAIN_KILL_AFTER_S = 20 * 60  # SIGKILL if the trainer has not exited this long after SIGUSR1


def launcher_signal_env(kill_after_s=TRAIN_KILL_AFTER_S) -> dict:
    """Environment of a multi-process training job's `accelerate launch`: torchrun's agent
    handles SIGTERM/INT/HUP/QUIT only and would die of SIGUSR1, leaving its ranks (each in a
    session of its own, out of reach of `timeout`'s process-group signal) to train on. Listed in
    PET_SIGNALS_TO_HANDLE (torchrun's own option through its PET_ environment default, which
    accelerate passes on; TORCHELASTIC_SIGNALS_TO_HANDLE is overwritten by torchrun) it passes
    the signal to its ranks, and waits TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds (default 30: less
    than a paper-scale step and its save) before it kills them."""
    return {"PET_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(kill_after_s)}


def accelerate_port_args(config_file) -> str:
    """`accelerate launch`'s rendezvous port for a job on GPUs: 0, for which accelerate (1.15)
    takes a free port on the node, so two multi-GPU jobs that Slurm puts on one node do not both
    try its default 29500 (the second would fail with "port already in use"). Nothing for a CPU
    config (use_cpu: true): accelerate's CPU launcher hands the port to gloo as it is, and 0
    there is no address the other processes can find."""
    import yaml

    path = Path(config_file)
    if not path.is_file():
        return ""  # accelerate reports the missing file itself, naming it
    settings = yaml.safe_load(path.read_text()) or {}
    return "" if settings.get("use_cpu") else "--main_process_port 0 "


def slurm_gpu_type(environ=None) -> str:
    """The GPU type GPU jobs ask for (NUDGERL_SLURM_GPU_TYPE), or "" for a plain GPU count."""
    environ = os.environ if environ is None else environ
    gpu_type = environ.get(GPU_TYPE_VAR, "").strip()
    if gpu_type and not _PLUGIN_GPU_MODEL.match(gpu_type):
        raise ValueError(f"{GPU_TYPE_VAR}={gpu_type!r}: the Slurm executor plugin accepts only letters, digits, "
                         "'_' and '.' in a GPU type; use one of the cluster's type names (`sinfo -o %G`) that "
                         "fits, or leave the variable empty for a plain GPU count")
    return gpu_type


def time_budget(runtime_min, stop_before_s=TRAIN_STOP_BEFORE_LIMIT_S, kill_after_s=TRAIN_KILL_AFTER_S) -> str:
    """A command prefix: `timeout` that sends SIGUSR1 ``stop_before_s`` before the job's time
    limit (resources runtime, minutes) and SIGKILL ``kill_after_s`` later, active only inside a
    Slurm job (${SLURM_JOB_ID:+...}: a local run has no time limit). --preserve-status keeps the
    trainer's own exit code (75: stopped for the time limit, checkpoint complete). Empty when the
    job has no runtime or one shorter than the lead."""
    budget_s = _budget_s(runtime_min, stop_before_s)
    if budget_s is None:
        return ""
    return f"${{SLURM_JOB_ID:+timeout --preserve-status --signal=USR1 --kill-after={kill_after_s} {budget_s}}} "


def _budget_s(runtime_min, stop_before_s) -> int | None:
    """A job's seconds before its planned stop: its time limit (minutes) less the lead; None
    when it has no limit or one shorter than the lead."""
    if not runtime_min:
        return None
    budget_s = int(runtime_min) * 60 - stop_before_s
    return budget_s if budget_s > 0 else None


# An evaluation stops itself between chunks of problems (eval.chunk_problems) when the next
# would not end this long before the job's time limit: Snakemake's start inside the job comes
# before the budget's clock starts, its bookkeeping and the last outputs' writes after the stop.
EVAL_STOP_BEFORE_LIMIT_S = 10 * 60


def eval_time_budget(runtime_min, stop_before_s=EVAL_STOP_BEFORE_LIMIT_S) -> str:
    """A command prefix giving an evaluation its seconds (:data:`BUDGET_VAR`): the job's time limit
    (resources runtime, minutes) less ``stop_before_s``, only inside a Slurm job (a local run has
    no time limit). `env` sets it, because an assignment that comes out of an expansion is a
    word, not an assignment. Empty when the job has no runtime or one shorter than the lead."""
    budget_s = _budget_s(runtime_min, stop_before_s)
    if budget_s is None:
        return ""
    return f"${{SLURM_JOB_ID:+env {BUDGET_VAR}={budget_s}}} "


class PlanResources:
    """Resources, threads, retries and launchers of the rules' jobs, from one config."""

    def __init__(self, config: dict):
        self.config = config
        self.THREADS = config.get("threads_per_job", 1)
        # Attempts after a failure of a training job, over the profile's `retries` for every other
        # rule: a training run longer than its job's time limit stops itself with a checkpoint
        # (exit 75) and is carried on by these retries (config/paper.yaml). None: the profile's.
        self.TRAIN_RETRIES = config.get("train_retries")
        # Likewise for rule evaluate: an evaluation longer than its job's time limit stops itself
        # between chunks (exit 75) and these retries resume it. None: the profile's.
        self.EVAL_RETRIES = config.get("eval_retries")
        self.EVAL_STOP_BEFORE_S = int(config.get("eval_stop_before_limit_s", EVAL_STOP_BEFORE_LIMIT_S))

    def rule_resources(self, rule, **defaults):
        """What a rule's jobs ask the scheduler for: config `resources.<name>.<rule>` over the
        rule's defaults (e.g. mem_mb). Per-rule values live here, in the rules, not in a profile's
        `set-resources` list, because a `--set-resources` on the command line replaces that whole
        list; it still overrides what it names. mem_mb limits concurrency locally only under a
        global limit (`--resources dvc_lock=1 mem_mb=...`; profiles/default sets none, since a
        global mem_mb would also cap every Slurm job's request); on Slurm each value is a request."""
        wanted = {name: per_rule[rule] for name, per_rule in self.config.get("resources", {}).items()
                  if name != "threads" and rule in per_rule}
        resources = {**defaults, **wanted}
        gpu_type = slurm_gpu_type()
        # A GPU job asks for the cluster's GPU type when NUDGERL_SLURM_GPU_TYPE names one, unless
        # the config names a model for this rule; never a job without GPUs (the plugin would turn
        # a gpu_model alone into --gpus=<type>:1).
        if gpu_type and int(resources.get("gpu", 0) or 0) >= 1 and not resources.get("gpu_model"):
            resources["gpu_model"] = gpu_type
        return resources

    def rule_threads(self, rule):
        """Threads of a rule's jobs (torch threads; cpus per task on Slurm unless cpus_per_task or
        cpus_per_gpu is set): config `resources.threads.<rule>`, else `threads_per_job`."""
        return int(self.config.get("resources", {}).get("threads", {}).get(rule, self.THREADS))

    def launcher(self, wildcards, resources):
        """A training job's command prefix: `nudgerl`, or `accelerate launch` (DeepSpeed ZeRO, one
        process per GPU) when the job was given more than one GPU (resources `gpu`); with
        NUDGERL_REQUIRE_CUDA=1 when it was given any (inference_launcher), and under Slurm with a
        time budget that stops it for a resume before the job's time limit (TRAIN_STOP_BEFORE_LIMIT_S)."""
        gpus = int(getattr(resources, "gpu", 0) or 0)
        # environment assignments first: they must precede the command words in the shell
        env = "NUDGERL_REQUIRE_CUDA=1 " if gpus >= 1 else ""
        attempt = getattr(resources, "attempt", None)
        if attempt is not None:
            # which try of this job it is: a retry of a run that failed (not the planned stop,
            # exit 75) refuses at once (nudgerl.attempts)
            env += f"{ATTEMPT_VAR}={int(attempt)} "
        budget = time_budget(getattr(resources, "runtime", None))
        if gpus <= 1:
            return f"{env}{budget}nudgerl"
        acc = self.config.get("accelerate", {})
        cfg = acc.get("config_file", "workflow/accelerate/deepspeed_zero2.yaml")
        env += "".join(f"{k}={v} " for k, v in launcher_signal_env().items())
        port = accelerate_port_args(cfg)
        return f"{env}{budget}accelerate launch --config_file {cfg} --num_processes {gpus} {port}-m nudgerl.cli"

    @staticmethod
    def attempt_number(wildcards, attempt):
        """A training rule's resource ``attempt``: Snakemake's try of this job (1, then 2, ...
        on each retry), for the launcher to pass on (NUDGERL_ATTEMPT)."""
        return attempt

    def inference_launcher(self, wildcards, resources):
        """A job's `nudgerl`, with NUDGERL_REQUIRE_CUDA=1 when it was given a GPU (resources
        `gpu` >= 1): nudgerl.cli then stops at once if torch sees no CUDA (nudgerl.hardware)
        instead of running on the CPU. Never `accelerate launch`: evaluation (vLLM) spreads one
        model over several GPUs itself (eval tensor_parallel_size), in one process."""
        gpus = int(getattr(resources, "gpu", 0) or 0)
        return "NUDGERL_REQUIRE_CUDA=1 nudgerl" if gpus >= 1 else "nudgerl"

    def eval_launcher(self, wildcards, resources):
        """Rule evaluate's :meth:`inference_launcher`, under Slurm with its time budget
        (:func:`eval_time_budget`): the evaluation stops between chunks before the job's time
        limit and exits 75 for a retry (eval_retries) to resume it."""
        gpus = int(getattr(resources, "gpu", 0) or 0)
        # assignments first, the budget's (possibly empty) expansion after them: a word before an
        # assignment would make the assignment a command word
        env = "NUDGERL_REQUIRE_CUDA=1 " if gpus >= 1 else ""
        attempt = getattr(resources, "attempt", None)
        if attempt is not None:
            env += f"{ATTEMPT_VAR}={int(attempt)} "  # a retry of a failed evaluation refuses (nudgerl.attempts)
        return f"{env}{eval_time_budget(getattr(resources, 'runtime', None), self.EVAL_STOP_BEFORE_S)}nudgerl"
