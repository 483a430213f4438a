"""The config as a rule's job reads it: config sections sliced into JSON for a rule's `params`
(a change re-runs the rule; keys another rule reads are left out) and command-line fragments
(--prompt, --grader-mode, --local-dir).
"""

from __future__ import annotations

import json
import shlex

from nudgerl.sections import section_for_model

# config keys read by other rules than the section's main one (prune_checkpoints: rule
# prune_checkpoints; left out of the trainers' params, so turning it on re-runs no training)
GRPO_RUN_EXCLUDE = ("epsilon_high_sweep", "epsilon_high_sweep_group_size", "prune_checkpoints")
# samples_per_role: resolved per run into samples_per_problem (eval_section), so a change
# re-runs only the evaluations whose count it changes
EVAL_EXCLUDE = ("curve", "samples_per_role")
POPE_RUN_EXCLUDE = ("num_generations", "oracle_stage")  # the run's id and its oracles' stage
# the sampler keys of the eval section that the diagnostic figures (strategy diversity, case study) use
SAMPLING_KEYS = ("temperature", "top_p", "max_new_tokens", "batch_size")


def grpo_run_section(config: dict, overrides: dict | None = None, model: str | None = None) -> str:
    """`train-grpo --params` of one run, as JSON: the grpo section (with ``model``'s own keys,
    config models[].grpo) less the sweep's keys, with a baseline's ``overrides`` (the default's
    baseline runs and the regime map's both read this)."""
    cfg = {k: v for k, v in section_for_model(config, "grpo", model).items() if k not in GRPO_RUN_EXCLUDE}
    return json.dumps({**cfg, **(overrides or {})}, sort_keys=True)


def wildcard_model(wildcards) -> str | None:
    """The job's real model (wildcard ``model``, task math only), or None (the organism)."""
    return getattr(wildcards, "model", None)


def rl_diagnosis_params(config: dict, seed: int) -> dict:
    """The diagnosis on the training problems: RL's sampler (config `grpo`), the samples per
    problem (`regime.diagnosis`), the replicate's sampling seed."""
    grpo, diag = config.get("grpo", {}), (config.get("regime") or {}).get("diagnosis") or {}
    return {"samples": diag.get("samples", 16), "batch_size": diag.get("batch_size", 512),
            "temperature": grpo.get("temperature", 1.0), "top_p": grpo.get("top_p", 1.0),
            "max_new_tokens": grpo.get("max_completion_length", 56), "seed": seed}


class PlanArguments:
    """Config sections and command-line fragments of the rules' commands, from one config;
    ``methods``: nudgerl.plan.methods.PlanMethods (the runs' NudgeRL settings, seeds and claims)."""

    def __init__(self, config: dict, methods):
        self.config = config
        self._methods = methods
        self.N_BOOT = config.get("report", {}).get("bootstrap_samples", 2000)
        exploration = config.get("report", {}).get("exploration") or {}
        self.EXPLORATION_SHARE = exploration.get("success_share", 0.5)
        self.EXPLORATION_CONFIDENCE = exploration.get("confidence", 0.95)
        # The verdict rule over replicates (report.verdicts, less its A/A pair: PlanMethods), as JSON
        from nudgerl.verdicts import rule_constants

        verdicts = rule_constants(config.get("report", {}).get("verdicts"))
        self.VERDICTS = json.dumps(verdicts, sort_keys=True)
        self.VERDICT_ALPHA = verdicts.get("alpha", 0.05)
        from nudgerl.reporting.power import config_tables

        self.POWER_TABLES = json.dumps(config_tables(config))

    def table1_aa_arg(self) -> str:
        """`nudgerl table --aa`: the A/A pair's two run ids where the config has one, else nothing."""
        m = self._methods
        return f"--aa {m.AA_METHOD} {m.AA_REPEAT}" if m.AA_REPEAT else ""

    def table_base_model_arg(self) -> str:
        """`nudgerl table` / `replicate-table --base-model-seed`: with config base_model_seed (one
        base model for every replicate, organism only) the tables' captions say so, else nothing."""
        seed = self.config.get("base_model_seed")
        return f"--base-model-seed {int(seed)}" if seed is not None else ""

    def table1_exploration_arg(self, task: str) -> str:
        """`nudgerl table` options that add exploration success to Table 1: organism runs only
        (their samples carry a strategy label); empty for real models."""
        if task == "math":
            return ""
        return f"--exploration-share {self.EXPLORATION_SHARE} --exploration-confidence {self.EXPLORATION_CONFIDENCE}"

    def section(self, name, exclude=(), **extra):
        """A config section as JSON for a rule's `params` (changes re-run the rule). Keys in
        ``exclude`` belong to other rules (e.g. eval.curve, the eps_high sweep list) and are left
        out, so changing them does not re-run this one."""
        cfg = {k: v for k, v in self.config.get(name, {}).items() if k not in exclude}
        return json.dumps({**cfg, **extra}, sort_keys=True)

    def model_section(self, name, exclude=(), **extra):
        """:meth:`section` of a GPU rule, as a params function of the job's wildcards: under task
        math the job's model entry's own keys (config models[].<name>: its vLLM memory share,
        max_model_len) replace the section's, so each model gets what its card needs. The
        organism's jobs (no model wildcard) get exactly :meth:`section`."""

        def params(wildcards):
            cfg = section_for_model(self.config, name, wildcard_model(wildcards))
            return json.dumps({**{k: v for k, v in cfg.items() if k not in exclude}, **extra}, sort_keys=True)

        return params

    def rl_diagnosis_section(self, seed):
        """`nudgerl diagnose --rl-params` of a replicate, as JSON (:func:`rl_diagnosis_params`)."""
        return json.dumps(rl_diagnosis_params(self.config, int(seed)), sort_keys=True)

    def drill_section(self):
        """The base_model keys phase 1 reads, as JSON: SFT settings (the regime map's mixtures
        among them) do not re-run the drill."""
        from nudgerl.organism.base_config import DRILL_KEYS

        return json.dumps({k: v for k, v in self.config.get("base_model", {}).items() if k in DRILL_KEYS},
                          sort_keys=True)

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

    def eval_section(self, wildcards):
        """`nudgerl evaluate --params` of a run: the eval section (with its model's own keys) at
        the samples per problem of the run's role (PlanMethods.eval_samples, eval.samples_per_role)."""
        return self.model_section("eval", exclude=EVAL_EXCLUDE,
                                  samples_per_problem=self._methods.eval_samples(wildcards.method))(wildcards)

    def grpo_eps_section(self, wildcards):
        """The grpo section of an eps_high sweep run: its own epsilon_high (wildcard eps)."""
        return self.model_section("grpo", exclude=GRPO_RUN_EXCLUDE, epsilon_high=float(wildcards.eps))(wildcards)

    def baseline_section(self, wildcards):
        """The grpo section of a baseline run (wildcards.method): GRPO's, with the baseline's overrides."""
        return grpo_run_section(self.config, self._methods.BASELINES[wildcards.method], wildcard_model(wildcards))

    def pope_section(self):
        """`train-pope --pope`: the pope section less the run's N and its oracles' stage."""
        return self.section("pope", exclude=POPE_RUN_EXCLUDE)

    def nudge_section(self, wildcards):
        """`train-nudgerl --nudge` of run ``wildcards.method`` (the main run or an ablation)."""
        return json.dumps(self._methods.NUDGE_RUNS[wildcards.method]["nudge"], sort_keys=True)

    def nudge_shape_section(self):
        """The main run's M hints and K rollouts per hint, as JSON."""
        return json.dumps({"M": self._methods.NUDGE.get("M", 2), "K": self._methods.NUDGE.get("K", 4)})

    def sampling_section(self, name):
        """`--params` of a diagnostic figure (strategy_diversity, case_study): the eval sampler
        (SAMPLING_KEYS) under the figure's own `report.<name>` settings, as JSON."""
        sampler = {k: v for k, v in self.config["eval"].items() if k in SAMPLING_KEYS}
        return json.dumps({**sampler, **self.config.get("report", {}).get(name, {})}, sort_keys=True)

    def run_seeds_section(self):
        """Every evaluated run's seeds (RUN_SEEDS), as JSON."""
        return json.dumps(self._methods.RUN_SEEDS, sort_keys=True)

    def claim_roles_section(self):
        """`claims --roles`: the claims' roles in this DAG's method ids (CLAIM_ROLES), as JSON."""
        return json.dumps(self._methods.CLAIM_ROLES, sort_keys=True)
