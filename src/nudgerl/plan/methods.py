"""The runs a configuration makes: method ids (GRPO sizes, POPE, NudgeRL and its ablations, the
eps_high sweep), each run's seeds, the training-curve and case-study runs, and the paper's claims
in terms of these ids (which runs each compares, their result files).
"""

from __future__ import annotations

from nudgerl.method_ids import (DEFAULT_AA_SEED_OFFSET, aa_repeat_method, baseline_group_size, baseline_runs, baseline_seeds, eps_sweep, eps_sweep_group_size, epsilon_high,
                                eval_role, eval_samples, grpo_group_sizes, grpo_method, grpo_methods, nudge_group_size,
                                nudge_main_method, pope_method, role_samples)

ABLATION_TITLES = {
    "pdrop": "Ablation: hint drop probability p_drop",
    "hint_sampling": "Ablation: how the M hints are chosen from the pool",
    "distill": "Ablation: distillation weight lambda_distill",
}


class PlanMethods:
    """Method ids, seeds and claim roles of one config; ``paths`` gives the pools a NudgeRL run
    reads and the results folder of the claims' files (nudgerl.plan.paths.PlanPaths)."""

    def __init__(self, config: dict, paths):
        self.config = config
        self._paths = paths
        # Replicates: every seed has its own RL and sampling seed and (organism) its own base model,
        # or all one base model (base_model_seed): BASE_SEEDS are the base models they start from.
        # Ablations and the eps_high sweep run on ABLATION_SEEDS (a subset; captions say so).
        self.SEEDS = config["seeds"]
        self.BASE_SEEDS = paths.base_seeds(self.SEEDS)
        self.ABLATION_SEEDS = config.get("ablation_seeds", self.SEEDS[:1])
        self.GRPO_METHODS = grpo_methods(config)
        self.POPE_METHOD = pope_method(config)

        # NudgeRL runs: the main run and one run per ablation value, as method ids
        # (nudgerl8, nudgerl8_pdrop0.25, nudgerl8_distill0, nudgerl8_random, nudgerl8_topranked).
        self.NUDGE = {k: v for k, v in config.get("nudgerl", {}).items() if k != "ablations"}
        self._ABL = config.get("nudgerl", {}).get("ablations", {})
        self.NUDGE_MAIN = nudge_main_method(self.NUDGE)
        self.NUDGE_RUNS = {self.NUDGE_MAIN: {"nudge": self.NUDGE, "pools": self._pools_for(self.NUDGE)}}
        self.ABLATIONS, self.ABLATION_VALUES = self._ablations()
        self.ABLATION_TITLES = ABLATION_TITLES
        self.METHODS = ["base", *self.GRPO_METHODS, self.POPE_METHOD, self.NUDGE_MAIN]
        self.TRAINED = [*self.GRPO_METHODS, *self.NUDGE_RUNS]

        # Paired tests in every table compare against GRPO-8 (the smallest N when 8 is not run).
        self.REFERENCE = grpo_method(8) if 8 in grpo_group_sizes(config) else self.GRPO_METHODS[0]

        # GRPO eps_high sweep (paper Fig. 5): one run per value at N = epsilon_high_sweep_group_size;
        # the value equal to grpo.epsilon_high is the main grpo{N} run (see COORD conventions).
        self.EPS_MAIN = epsilon_high(config)
        self.EPS_N = eps_sweep_group_size(config)
        self.EPS_SWEEP = eps_sweep(config)
        self.EPS_RUNS = [m for _, m in self.EPS_SWEEP if "_eps" in m]

        # Periodic checkpoint evaluation (training curves, paper Fig. 3): eval.curve.
        self.CURVE = config["eval"].get("curve")
        self.CURVE_BENCHMARKS = list(self.CURVE.get("benchmarks", ["aime24", "aime25"])) if self.CURVE else []
        self.CURVE_SEEDS = list(self.CURVE.get("seeds") or self.SEEDS[:1]) if self.CURVE else []
        self.CURVE_METHODS = (
            list(self.CURVE.get("methods") or [*(grpo_method(n) for n in grpo_group_sizes(config) if n <= 32),
                                               self.NUDGE_MAIN]) if self.CURVE else []
        )
        # Case study (paper Fig. 4): the GRPO reference against the main NudgeRL run.
        self.CASE_METHODS = [self.REFERENCE, self.NUDGE_MAIN]
        # The field's exploration fixes (config `baselines`): method id -> its grpo overrides, on
        # BASELINE_SEEDS; their table sets them beside GRPO (the reference, and N=32 when run)
        # and the main NudgeRL run.
        self.BASELINES = baseline_runs(config)
        self.BASELINE_SEEDS = baseline_seeds(config)
        self.BASELINE_GROUP_SIZE = baseline_group_size(config)
        self.BASELINE_TABLE_METHODS = [self.REFERENCE, *(m for m in [grpo_method(32)] if m in self.GRPO_METHODS),
                                       self.NUDGE_MAIN, *self.BASELINES] if self.BASELINES else []
        # Every evaluated run, for the compute-matched figure.
        self.EVALUATED = list(dict.fromkeys([*self.METHODS, *self.TRAINED, *(m for _, m in self.EPS_SWEEP),
                                             *self.BASELINES]))
        # Which seeds each evaluated run has: the Table 1 methods every replicate, the baselines
        # BASELINE_SEEDS, the rest ABLATION_SEEDS.
        self.RUN_SEEDS = {m: (self.SEEDS if m in self.METHODS else self.BASELINE_SEEDS if m in self.BASELINES
                              else self.ABLATION_SEEDS) for m in self.EVALUATED}

        # The A/A pair (config report.verdicts.aa): a GRPO run trained again on every replicate's
        # base model with RL and sampling seeds moved by seed_offset, so the difference of two
        # identical methods measures the noise floor every comparison is read against. Only the
        # claims read it (it is no method of the tables or figures).
        # Its method defaults to the reference (GRPO-8, or the smallest N when 8 is not run).
        aa = ((config.get("report") or {}).get("verdicts") or {}).get("aa")
        aa = None if aa is None or not self.GRPO_METHODS else aa
        self.AA_METHOD = aa.get("method") or self.REFERENCE if aa is not None else None
        self.AA_REPEAT = aa_repeat_method(self.AA_METHOD) if aa is not None else None
        self.AA_SEED_OFFSET = int(aa.get("seed_offset", DEFAULT_AA_SEED_OFFSET)) if aa is not None else 0
        self.AA_SEEDS = list(self.SEEDS) if aa is not None else []
        if aa is not None:
            self.RUN_SEEDS[self.AA_REPEAT] = self.AA_SEEDS

        # Samples per problem of each evaluated run, by its role (role_samples; the default
        # config sets no roles: eval.samples_per_problem for all).
        self.EVAL_ROLE = {m: eval_role(config, m) for m in self.RUN_SEEDS}
        self.EVAL_SAMPLES = {m: role_samples(config["eval"], role) for m, role in self.EVAL_ROLE.items()}

        # The paper's claims (nudgerl.reporting.claims) in terms of this DAG's method ids.
        self.CLAIM_ROLES = {
            "nudgerl": self.NUDGE_MAIN,
            "nudgerl_n": nudge_group_size(self.NUDGE),
            "grpo": {str(n): grpo_method(n) for n in grpo_group_sizes(config)},
            "pope": self.POPE_METHOD,
            "pdrop": self.ABLATION_VALUES["pdrop"] if len(self.ABLATION_VALUES["pdrop"]) > 1 else [],
            "distill": self.ABLATION_VALUES["distill"] if len(self.ABLATION_VALUES["distill"]) > 1 else [],
            "hint_sampling": self.ABLATION_VALUES["hint_sampling"],
            "eps": [[e, m] for e, m in self.EPS_SWEEP],
            "seeds": self.SEEDS,
            "ablation_seeds": self.ABLATION_SEEDS,
            # our eighth claim (NudgeRL beats each of them) where the baselines are trained
            "baselines": list(self.BASELINES),
            "baseline_seeds": self.BASELINE_SEEDS,
            "baseline_n": self.BASELINE_GROUP_SIZE,
            "aa": {"a": self.AA_METHOD, "b": self.AA_REPEAT, "seeds": self.AA_SEEDS} if aa is not None else None,
        }

    def eval_samples(self, method: str) -> int:
        """Samples per problem of ``method``'s evaluation (a run outside this plan: Table 1's count)."""
        return self.EVAL_SAMPLES.get(method) or eval_samples(self.config, method)

    def run_seed(self, wildcards) -> int:
        """A run's RL and sampling seed: its replicate's, moved by the offset for the A/A repeat."""
        return int(wildcards.seed) + (self.AA_SEED_OFFSET if wildcards.method == self.AA_REPEAT else 0)

    def _ablations(self):
        """(ABLATIONS, ABLATION_VALUES): per ablation with more than one setting, its (method id,
        label) rows; per ablation, each setting's method id (the claims table). Registers each
        ablation run in NUDGE_RUNS."""
        ablations = {"pdrop": [], "hint_sampling": [], "distill": []}
        values = {"pdrop": [], "distill": [], "hint_sampling": {}}  # setting -> method id (claims table)
        for p in sorted(set(self._ABL.get("p_drop", [])) | {self.NUDGE.get("p_drop", 0.5)}):
            ablations["pdrop"].append((self._variant(f"pdrop{p:g}", p_drop=p), f"p_drop = {p:g}"))
            values["pdrop"].append([p, ablations["pdrop"][-1][0]])
        for l in sorted(set(self._ABL.get("lambda_distill", [])) | {self.NUDGE.get("lambda_distill", 0.1)}):
            ablations["distill"].append((self._variant(f"distill{l:g}", lambda_distill=l), f"lambda_distill = {l:g}"))
            values["distill"].append([l, ablations["distill"][-1][0]])
        for s in sorted(set(self._ABL.get("hint_sampling", [])) | {self.NUDGE.get("hint_sampler", "sequential")}):
            method = self._variant(s.replace("_", ""), hint_sampler=s)
            values["hint_sampling"][s] = method
            if method != self.NUDGE_MAIN:
                ablations["hint_sampling"].append((method, s.replace("_", "-")))
        if ablations["hint_sampling"] and not any(m == self.NUDGE_MAIN for m, _ in ablations["hint_sampling"]):
            ablations["hint_sampling"].insert(0, (self.NUDGE_MAIN, f"{self.NUDGE.get('hint_sampler', 'sequential')} (main)"))
        return {k: v for k, v in ablations.items() if len(v) > 1}, values

    def _pools_for(self, nudge):
        # top_ranked = the first M hints of the pool as re-ordered by the rank_hints rule
        return self._paths.RANKED_POOLS if nudge.get("hint_sampler") == "top_ranked" else self._paths.POOLS

    def _variant(self, suffix, **overrides):
        """Register an ablation run; a setting equal to the main run's is the main run."""
        nudge = {**self.NUDGE, **overrides}
        if nudge == self.NUDGE:
            return self.NUDGE_MAIN
        self.NUDGE_RUNS[f"{self.NUDGE_MAIN}_{suffix}"] = {"nudge": nudge, "pools": self._pools_for(nudge)}
        return f"{self.NUDGE_MAIN}_{suffix}"

    def nudge_pools(self, wildcards):
        return self.NUDGE_RUNS[wildcards.method]["pools"].format(**dict(wildcards.items()))

    def claim_runs(self):
        """(method, seeds) of every run a claim compares, among the runs this DAG makes."""
        from nudgerl.reporting.claims import build_claims

        runs = {}
        for c in build_claims(self.CLAIM_ROLES):
            for pair in c.comparisons:
                for m in pair:
                    if m in self.RUN_SEEDS:
                        runs.setdefault(m, set()).update(c.seeds)
        if self.AA_REPEAT:
            for m in (self.AA_METHOD, self.AA_REPEAT):
                runs.setdefault(m, set()).update(self.AA_SEEDS)
        return {m: sorted(s) for m, s in runs.items()}

    def aa_evals(self):
        """The A/A pair's evaluation summaries, both arms on every replicate ([] without a pair)."""
        return [f"{self._paths.RESULTS}/eval/{m}/seed{s}/summary.json"
                for m in ((self.AA_METHOD, self.AA_REPEAT) if self.AA_REPEAT else ()) for s in self.AA_SEEDS]

    def claim_evals(self):
        return [f"{self._paths.RESULTS}/eval/{m}/seed{s}/summary.json"
                for m, seeds in self.claim_runs().items() for s in seeds]

    def claim_metrics(self):
        return [f"{self._paths.RESULTS}/runs/{m}/seed{s}/metrics.jsonl"
                for m, seeds in self.claim_runs().items() if m != "base" for s in seeds]
