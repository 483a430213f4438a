"""The workflow's plan: what the Snakemake rules build, derived from the config alone.

WorkflowPlan composes one part per concern, each unit-tested through it (tests/test_workflow_plan.py):

  nudgerl.plan.paths       PlanPaths        where a configuration's files live; roots and prefixes
  nudgerl.plan.methods     PlanMethods      method ids, ablations, the eps_high sweep, seeds, claims
  nudgerl.plan.regime_map  PlanRegimeMap    the regime map's grid and its rules' arguments
  nudgerl.plan.study       PlanStudy        the study's seed-set agreement and common-regime check
  nudgerl.plan.resources   PlanResources    resources, threads, retries and launchers of the jobs
  nudgerl.plan.arguments   PlanArguments    config sections as JSON params, command-line fragments
  (nudgerl.method_ids: the method ids themselves, shared with nudgerl.config)

and, itself, the result files every configuration ends with. A name is read through its part
(PLAN.paths.SHARED, PLAN.resources.launcher): workflow/rules/common.smk binds, one name at a
time, what the rules read, so `grep -n "^NAME = " workflow/rules/common.smk` names the part that
defines it.
"""

from __future__ import annotations

from snakemake.io import expand

from nudgerl.plan.arguments import PlanArguments
from nudgerl.plan.methods import PlanMethods
from nudgerl.plan.paths import PlanPaths
from nudgerl.plan.regime_map import PlanRegimeMap
from nudgerl.plan.resources import PlanResources
from nudgerl.plan.study import PlanStudy


class WorkflowPlan:
    """Everything the rules derive from one config (validated first: nudgerl.config)."""

    def __init__(self, config: dict):
        self.config = config
        self.paths = PlanPaths(config)
        self.methods = PlanMethods(config, self.paths)
        self.regime_map = PlanRegimeMap(config, self.paths, self.methods)
        self.study = PlanStudy(config, self.paths, self.methods, self.regime_map)
        self.resources = PlanResources(config)
        self.arguments = PlanArguments(config, self.methods)

    # ---- the result files ---------------------------------------------------------------------
    def figure_files(self, name):
        return expand(f"{self.paths.RESULTS}/figures/{name}.{{ext}}", ext=["png", "pdf", "json"], allow_missing=True)

    def figure_names(self):
        names = ["compute_matched"]
        if self.paths.TASK != "math":
            # strategies are parsed from organism traces; the real-data labeler is not built yet
            names += ["strategy_diversity", "case_study"]
        if self.methods.CURVE:
            names.append("training_curves")
        if self.methods.EPS_SWEEP:
            names.append("eps_high_scaling")
        if self.methods.BASELINES:
            names.append("baselines")
        return names

    def result_outputs(self):
        """Every table, figure and diagnosis (what compute accounting and the audit cover)."""
        diagnostics = [] if self.paths.TASK == "math" else [
            *expand(f"{self.paths.DIAGNOSIS}.{{ext}}", seed=self.methods.BASE_SEEDS,
                   ext=["json", "md", "html", "regime.json"]),
            *expand(f"{self.paths.RESULTS}/diagnostics/base_models.{{ext}}", ext=["csv", "md", "html"]),
            # strategies are labelled in organism samples only
            *expand(f"{self.paths.RESULTS}/tables/exploration.{{ext}}", ext=["csv", "md", "html"])]
        table_exts = ["csv", "md", "tex", "html"]  # .html: the page `snakemake --report` shows
        return [
            *diagnostics,
            *expand(f"{self.paths.RESULTS}/tables/table1.{{ext}}", ext=table_exts, allow_missing=True),
            *expand(f"{self.paths.RESULTS}/tables/table1_replicates.{{ext}}", ext=["csv", "md", "html"], allow_missing=True),
            *expand(f"{self.paths.RESULTS}/tables/claims.{{ext}}", ext=["csv", "md", "html"], allow_missing=True),
            *expand(f"{self.paths.RESULTS}/tables/power.{{ext}}", ext=["csv", "md", "html"], allow_missing=True),
            *expand(f"{self.paths.RESULTS}/tables/ablation_{{ablation}}.{{ext}}", ablation=list(self.methods.ABLATIONS), ext=table_exts,
                    allow_missing=True),
            *(expand(f"{self.paths.RESULTS}/tables/baselines.{{ext}}", ext=table_exts, allow_missing=True)
              if self.methods.BASELINES else []),
            *(f for name in self.figure_names() for f in self.figure_files(name)),
            f"{self.paths.RESULTS}/figures/training_reward.png",
        ]

    def final_outputs(self):
        per_model = [*self.result_outputs(), *(f"{self.paths.RESULTS}/tables/compute.{ext}" for ext in ("csv", "html")),
                     *(f"{self.paths.RESULTS}/audit/audit.{ext}" for ext in ("txt", "html"))]
        if self.paths.TASK == "math":
            return expand(per_model, model=list(self.paths.MODELS))
        return per_model
