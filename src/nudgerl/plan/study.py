"""The study's extra tables (study.smk; config `study`, organism only): exploration success on
two disjoint seed sets, whether RL works at all in the regime map's common cells, and the claims
judged again in those common cells (their runs evaluated on the benchmarks).
"""

from __future__ import annotations

import json
import shlex

from nudgerl.method_ids import grpo_group_size, grpo_method

# the overlays that define the study (its `study` section) on the task it runs on: the
# single-family task, whose regime map it holds (nudgerl.plan.regime_map.SINGLE_FAMILY_CONFIG)
STUDY_CONFIG = "config/single_family.yaml config/study.yaml"


class PlanStudy:
    """The study of one config; STUDY is None (and the helpers unusable) without a `study` section.
    ``paths``, ``methods``, ``regime_map``: nudgerl.plan.paths.PlanPaths,
    nudgerl.plan.methods.PlanMethods, nudgerl.plan.regime_map.PlanRegimeMap."""

    def __init__(self, config: dict, paths, methods=None, regime_map=None):
        # the study holds the regime map, which is the single-family task's
        self.STUDY = (config.get("study")
                      if paths.TASK == "organism" and paths.ORGANISM_TASK == "single_family" else None)
        self.STUDY_SEED_SET_ARGS = self.STUDY_COMMON_SHARES = self.STUDY_RL_WORKS_METHOD = None
        self.STUDY_CLAIM_CELLS = []  # the map's common cells, where the claims are judged a second time
        self._paths, self._methods, self._regime_map = paths, methods, regime_map
        if self.STUDY:
            from nudgerl.reporting.regime_map import cell_tag

            # `seed-set-agreement --seed-sets`: each set comma-separated
            self.STUDY_SEED_SET_ARGS = " ".join(",".join(map(str, s)) for s in self.STUDY["seed_sets"])
            self.STUDY_COMMON_SHARES = list(self.STUDY["common_shares"])
            self.STUDY_RL_WORKS_METHOD = self.STUDY.get("rl_works_method", "grpo8")
            if regime_map is not None and regime_map.RMAP:
                self.STUDY_CLAIM_CELLS = [cell_tag(s) for s in self.STUDY_COMMON_SHARES]
        self._results = paths.RESULTS

    def study_needs_its_config(self, wildcards=None):
        """The input of the `study` target in a configuration without the study (study.smk):
        `snakemake study` stops while building the DAG, dry run included, with the command to use,
        instead of Snakemake's "No rule to produce study"."""
        from nudgerl.plan.regime_map import target_needs_config

        target_needs_config("study", STUDY_CONFIG, self._paths.TASK, self._paths.ORGANISM_TASK,
                            "the study's regime map", "study")

    def study_tables(self) -> list[str]:
        """The study's own tables (beyond the default's outputs and the regime map's)."""
        if not self.STUDY:
            return []
        names = ["seed_set_agreement", "rl_works"]
        tables = [f"{self._results}/tables/{name}.{ext}" for name in names for ext in ("csv", "md", "html")]
        return tables + self.study_cell_baseline_tables()

    # ---- the claims in the map's common cells -------------------------------------------------
    def _cell_dir(self, cell: str) -> str:
        return self._regime_map.RMAP_CELL.format(cell=cell)

    def study_cell_baselines(self, cell: str) -> list[str]:
        """The field's fixes trained in ``cell`` (regime_map.baselines), [] where none are."""
        rm = self._regime_map
        return list(rm.RMAP_BASELINE_GRID["against"]) if cell in rm.RMAP_BASELINE_CELLS else []

    def study_cell_roles(self, cell: str) -> dict:
        """The claims' roles (nudgerl.reporting.claims.build_claims) in one cell of the map: the map's
        GRPO runs and NudgeRL on its seeds, the fixes on the baselines' seeds; the rest of the
        matrix (POPE, GRPO-64, the ablations) is not trained there, so its claims are 'not run'."""
        rm, roles = self._regime_map, self._methods.CLAIM_ROLES
        grpo = {str(grpo_group_size(m)): m for m in rm.RMAP["methods"] if grpo_group_size(m) is not None}
        seeds = list(rm.RMAP["seeds"])
        return {"nudgerl": roles["nudgerl"], "nudgerl_n": roles["nudgerl_n"], "grpo": grpo, "pope": None,
                "pdrop": [], "distill": [], "hint_sampling": {}, "eps": [], "seeds": seeds, "ablation_seeds": seeds,
                "baselines": self.study_cell_baselines(cell), "baseline_seeds": list(rm.RMAP_BASELINE_SEEDS),
                "baseline_n": roles["baseline_n"]}

    def study_cell_runs(self, cell: str) -> dict[str, list[int]]:
        """(method, seeds) of every run of ``cell`` the claims compare or the cell's baselines table shows."""
        from nudgerl.reporting.claims import build_claims

        runs = {}
        for c in build_claims(self.study_cell_roles(cell)):
            for pair in c.comparisons:
                for m in pair:
                    runs.setdefault(m, set()).update(c.seeds)
        for m in self.study_cell_table_methods(cell):
            runs.setdefault(m, set()).update(self._regime_map.RMAP_BASELINE_SEEDS)
        return {m: sorted(s) for m, s in runs.items()}

    def study_cell_evals(self) -> list[str]:
        """The benchmark evaluations of the common cells' runs (regime_map_evaluate)."""
        return [f"{self._cell_dir(cell)}/eval/{m}/seed{s}/summary.json"
                for cell in self.STUDY_CLAIM_CELLS for m, seeds in self.study_cell_runs(cell).items() for s in seeds]

    def study_claim_inputs(self) -> list[str]:
        """What the claims rule reads beyond the matrix's own runs: the cells' evaluations, runs and
        base-model diagnoses, and the matrix's base-model table (the regimes' measured shares)."""
        if not self.STUDY_CLAIM_CELLS:
            return []
        rm = self._regime_map
        files = [f"{self._results}/diagnostics/base_models.csv", *self.study_cell_evals()]
        for cell in self.STUDY_CLAIM_CELLS:
            files += [f"{self._cell_dir(cell)}/runs/{m}/seed{s}/metrics.jsonl"
                      for m, seeds in self.study_cell_runs(cell).items() for s in seeds]
            files += [f"{self._cell_dir(cell)}/diagnostics/seed{s}.json" for s in rm.RMAP["seeds"]]
        return list(dict.fromkeys(files))

    def study_claim_args(self) -> str:
        """`claims --regime rare --regime-diagnoses ... --cell JSON ...` in the study, else nothing."""
        if not self.STUDY_CLAIM_CELLS:
            return ""
        from nudgerl.reporting.regime_map import cell_settings

        args = ["--regime", "rare (the study's matrix)",
                "--regime-diagnoses", f"{self._results}/diagnostics/base_models.csv"]
        for cell in self.STUDY_CLAIM_CELLS:
            share, _ = cell_settings(cell)
            spec = {"regime": f"common (regime map, SFT share {100 * share:g} %)",
                    "eval_root": f"{self._cell_dir(cell)}/eval", "runs_root": f"{self._cell_dir(cell)}/runs",
                    "roles": self.study_cell_roles(cell),
                    "diagnoses": [f"{self._cell_dir(cell)}/diagnostics/seed{s}.json"
                                  for s in self._regime_map.RMAP["seeds"]]}
            args += ["--cell", json.dumps(spec, sort_keys=True)]
        return shlex.join(args)

    # ---- the fixes' Table 1 in the map's common cells -----------------------------------------
    def study_cell_table_methods(self, cell: str) -> list[str]:
        """GRPO-8 (the reference), GRPO-32, NudgeRL and the fixes trained in ``cell``; [] without fixes."""
        fixes = self.study_cell_baselines(cell)
        if not fixes:
            return []
        ours = [m for m in (self.study_cell_table_reference(cell), grpo_method(32), self._methods.NUDGE_MAIN)
                if m in self._regime_map.RMAP["methods"]]
        return [*ours, *fixes]

    def study_cell_table_reference(self, cell: str) -> str:
        """The fixes' table's reference in ``cell``: the matrix's (GRPO-8) where the map trains it,
        else the map's first GRPO run, else none."""
        methods = self._regime_map.RMAP["methods"]
        if self._methods.REFERENCE in methods:
            return self._methods.REFERENCE
        return next((m for m in methods if grpo_group_size(m) is not None), "none")

    def study_cell_baseline_tables(self) -> list[str]:
        """tables/baselines_<cell>.*: the fixes' Table 1 (Avg pass@1) in each common cell that trains them."""
        return [f"{self._results}/tables/baselines_{cell}.{ext}" for cell in self.STUDY_CLAIM_CELLS
                if self.study_cell_table_methods(cell) for ext in ("csv", "md", "tex", "html")]
