"""The regime map's grid (regime_map.smk; config `regime_map`, organism only): base models at a
grid of unhinted always-right shares, the runs trained on each, and the arguments of its rules.
"""

from __future__ import annotations

import json
import shlex

from nudgerl.method_ids import baseline_definitions, baseline_group_size, grpo_group_size
from nudgerl.plan.arguments import grpo_run_section, rl_diagnosis_params

# The regime map varies the single-family task's unhinted mixture (its one rare strategy's
# share); the families task has no such axis yet. Under families the map (and the study, which
# holds it) runs with this overlay merged in.
SINGLE_FAMILY_CONFIG = "config/single_family.yaml"


def target_needs_config(target: str, configfiles: str, task: str, organism_task: str, what: str,
                        section: str) -> None:
    """Raise the ConfigError of a target this configuration cannot build (`regime_map`, `study`):
    why (another task, the families task, or no ``section``) and the command to use. ``what``: the
    part that varies the single-family task's share ("the map", "the study's regime map")."""
    from nudgerl.config import ConfigError

    if task != "organism":
        why = f"task: {task}; the {target.replace('_', ' ')} is organism only"
    elif organism_task != "single_family":
        why = (f"base_model.task: {organism_task}; {what} varies the single-family task's rare strategy "
               f"share, which the {organism_task} task does not have yet")
    else:
        why = f"this configuration has no `{section}` section"
    raise ConfigError(f"target `{target}` needs --configfile {configfiles} ({why}): "
                      f"snakemake {target} --cores 2 --configfile {configfiles}")


class PlanRegimeMap:
    """The map of one config; every name is None (the helpers unusable) without a map.
    ``paths`` and ``methods``: nudgerl.plan.paths.PlanPaths, nudgerl.plan.methods.PlanMethods."""

    def __init__(self, config: dict, paths, methods):
        self.config = config
        self._paths, self._methods = paths, methods
        self.RMAP = (config.get("regime_map")
                     if paths.TASK == "organism" and paths.ORGANISM_TASK == "single_family" else None)
        self.RMAP_DIR = self.RMAP_CELL = self.RMAP_CELLS = self.RMAP_GRID = None  # set below with a map
        self.RMAP_BASELINES, self.RMAP_BASELINE_SEEDS, self.RMAP_BASELINE_GRID = [], [], None
        self.RMAP_BASELINE_CELLS = []  # the cells the baselines train in
        self.RMAP_BASELINE_OUTPUTS = []  # the sub-grid's table and figure (regime_map_baselines)
        self.RMAP_ACCURACY_CELLS, self.RMAP_ACCURACY_SEEDS, self.RMAP_ACCURACY_GRID = [], [], None
        self.RMAP_ACCURACY_OUTPUTS = []  # the second axis' table and figure (regime_map_accuracy)
        if self.RMAP:
            from nudgerl.reporting.regime_map import cell_tag
            from nudgerl.verdicts import rule_constants

            self.RMAP_DIR = f"{paths.RESULTS}/regime_map"
            # a cell's folder: share<s> (the first axis), share<s>_accuracy<a> (the second)
            self.RMAP_CELL = f"{self.RMAP_DIR}/{{cell}}"
            self.RMAP_CELLS = [cell_tag(s) for s in self.RMAP["shares"]]
            self.RMAP_GRID = {**{k: self.RMAP[k] for k in ("shares", "methods", "seeds", "reached", "every", "samples")},
                              "reference": methods.NUDGE_MAIN,
                              "against": [m for m in self.RMAP["methods"] if m != methods.NUDGE_MAIN],
                              # the verdict rule over replicates (report.verdicts; its A/A pair is the matrix's)
                              "verdicts": rule_constants((config.get("report") or {}).get("verdicts"))}
            # The baselines' sub-grid: the cells of `shares` (default every cell), fewer replicates; on those the map's own methods
            # are its comparison (their runs exist already), NudgeRL paired against each baseline.
            # RMAP_BASELINES: the ones the map does not train already.
            extra = self.RMAP.get("baselines") or {}
            self.RMAP_BASELINES = [m for m in extra.get("methods", []) if m not in self.RMAP["methods"]]
            self.RMAP_BASELINE_SEEDS = list(extra.get("seeds", []))
            baseline_shares = list(extra.get("shares", self.RMAP["shares"]))
            self.RMAP_BASELINE_CELLS = [cell_tag(s) for s in baseline_shares]
            self.RMAP_BASELINE_GRID = {**self.RMAP_GRID, "shares": baseline_shares,
                                       "methods": [*self.RMAP["methods"], *self.RMAP_BASELINES],
                                       "seeds": self.RMAP_BASELINE_SEEDS, "against": list(extra.get("methods", []))}
            if extra:
                self.RMAP_BASELINE_OUTPUTS = self._outputs("regime_map_baselines")
            # The second axis: base models at one share whose unhinted always-right traces were
            # executed right only `accuracies` of the time; the map's cell at that share (accuracy 1)
            # is the reference, on the same seeds.
            axis = self.RMAP.get("accuracy")
            if axis:
                # the axis' cells, the reference first
                self.RMAP_ACCURACY_CELLS = [cell_tag(axis["share"], a) for a in [1.0, *axis["accuracies"]]]
                self.RMAP_ACCURACY_SEEDS = list(axis["seeds"])
                self.RMAP_ACCURACY_GRID = {**self.RMAP_GRID, "shares": [axis["share"]],
                                           "accuracies": [1.0, *axis["accuracies"]], "seeds": self.RMAP_ACCURACY_SEEDS}
                self.RMAP_ACCURACY_OUTPUTS = self._outputs("regime_map_accuracy")

    def regime_map_needs_single_family(self, wildcards=None):
        """The input of the `regime_map` target where the map cannot run (regime_map.smk): it
        stops while building the DAG, dry run included, naming why and the command to use."""
        target_needs_config("regime_map", SINGLE_FAMILY_CONFIG, self._paths.TASK, self._paths.ORGANISM_TASK,
                            "the map", "regime_map")

    def _outputs(self, name: str) -> list[str]:
        results = self._paths.RESULTS
        return [*(f"{results}/tables/{name}.{ext}" for ext in ("csv", "md")),
                *(f"{results}/figures/{name}.{ext}" for ext in ("png", "pdf", "json"))]

    def regime_map_base_config(self, share, accuracy=1.0):
        """The base_model section with the always-right strategy at `share` of the unhinted mixture
        (and, below accuracy 1, that share of its unhinted traces executed right)."""
        from nudgerl.organism.task import RARE_CORRECT_STRATEGY
        from nudgerl.organism.base_config import BaseModelConfig
        from nudgerl.reporting.regime_map import mixture

        cfg = dict(self.config["base_model"])
        weights = cfg.get("unhinted_strategy_weights") or BaseModelConfig().unhinted_strategy_weights
        cfg["unhinted_strategy_weights"] = mixture(weights, RARE_CORRECT_STRATEGY, share)
        cfg.pop("unhinted_rare_accuracy", None)  # the cell's tag says it: share<s> is accuracy 1
        if accuracy != 1:
            cfg["unhinted_rare_accuracy"] = accuracy
        return cfg

    def regime_map_base_section(self, wildcards):
        """`train-base --params` of a map cell's base model (its share and accuracy), as JSON."""
        from nudgerl.reporting.regime_map import cell_settings

        return json.dumps(self.regime_map_base_config(*cell_settings(wildcards.cell)), sort_keys=True)

    def regime_map_diagnosis_train(self, wildcards):
        """The training problems a cell's diagnosis reads: on the second axis' cells (its reference
        among them) the RL-prompt diagnosis measures the accuracy after an unhinted choice of the
        always-right strategy (the axis' x); elsewhere none (the map's x is the benchmark share)."""
        return [self._paths.TRAIN] if wildcards.cell in self.RMAP_ACCURACY_CELLS else []

    def regime_map_rl_diagnosis_args(self, wildcards):
        """`nudgerl diagnose --train ... --rl-params ...` on the second axis' cells, else nothing."""
        if wildcards.cell not in self.RMAP_ACCURACY_CELLS:
            return ""
        rl = json.dumps(rl_diagnosis_params(self.config, int(wildcards.seed)), sort_keys=True)
        return f"--train {shlex.quote(self._paths.TRAIN)} --rl-params {shlex.quote(rl)}"

    def regime_map_train_command(self, wildcards):
        """`train-grpo --num-generations N`, or the main NudgeRL run's `train-nudgerl` arguments."""
        main = self._methods.NUDGE_MAIN
        if wildcards.method == main:
            nudge = json.dumps(self._methods.NUDGE_RUNS[main]["nudge"], sort_keys=True)
            return f"train-nudgerl --pools {shlex.quote(self._paths.POOLS)} --nudge {shlex.quote(nudge)}"
        n = grpo_group_size(wildcards.method)
        if n is None and wildcards.method in baseline_definitions(self.config):
            n = baseline_group_size(self.config)
        if n is not None:
            return f"train-grpo --num-generations {n}"
        raise ValueError(f"config key 'regime_map.methods': {wildcards.method!r} is neither grpo<N>, {main} "
                         "nor a baseline of 'baselines.methods'")

    def regime_map_train_section(self, wildcards):
        """`--params` of a map run: the grpo section, with a baseline's overrides for a baseline."""
        return grpo_run_section(self.config, baseline_definitions(self.config).get(wildcards.method))

    def regime_map_curve_section(self):
        """`curve-eval --params` of the map's runs: the eval section with the map's checkpoint
        spacing and samples as its `curve`, as JSON."""
        evaluation = {k: v for k, v in self.config["eval"].items() if k != "curve"}
        curve = {"every": self.RMAP["every"], "samples": self.RMAP["samples"]}
        return json.dumps({**evaluation, "curve": curve}, sort_keys=True)

    def regime_map_grid_section(self):
        """`regime-map --grid`: the map's grid, as JSON."""
        return json.dumps(self.RMAP_GRID, sort_keys=True)

    def regime_map_baselines_grid_section(self):
        """`regime-map-baselines --grid`: the baselines' sub-grid, as JSON."""
        return json.dumps(self.RMAP_BASELINE_GRID, sort_keys=True)

    def regime_map_accuracy_grid_section(self):
        """`regime-map-accuracy --grid`: the second axis' grid, as JSON."""
        return json.dumps(self.RMAP_ACCURACY_GRID, sort_keys=True)

    def regime_map_root(self, wildcards):
        """`regime-map --root`: the folder of the map's cells (<root>/share<s>/...)."""
        return self.RMAP_DIR.format(**dict(wildcards.items()))
