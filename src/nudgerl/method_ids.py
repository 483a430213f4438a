"""The trained runs' method ids and group sizes, from the config alone: the one definition that
the config checks (nudgerl.config) and the workflow's plan (nudgerl.plan.workflow_plan) both read.

A method id names a run and its group size N (rollouts per problem): grpo{N} (GRPO baselines,
`grpo.group_sizes`), grpo{N}_eps{value} (the eps_high sweep at N =
`grpo.epsilon_high_sweep_group_size`), pope{N} (`pope.num_generations`) and nudgerl{M x K} (the
main NudgeRL run; its ablations add a suffix: nudgerl8_pdrop0.25), and {name}{N} for the field's
exploration fixes (`baselines.methods`: dapo8, ngrpo8, ...). This module imports nothing of
nudgerl, so both can import it.
"""

from __future__ import annotations

DEFAULT_POPE_GROUP_SIZE = 8  # POPE's N when `pope.num_generations` is not set
DEFAULT_EPS_SWEEP_GROUP_SIZE = 8  # the eps_high sweep's N (schema default)
DEFAULT_EPSILON_HIGH = 0.2


def grpo_method(n: int) -> str:
    return f"grpo{n}"


def grpo_group_size(method: str) -> int | None:
    """N of a plain GRPO method id (grpo{N}); None for any other id."""
    return int(method[4:]) if method.startswith("grpo") and method[4:].isdigit() else None


def grpo_group_sizes(config: dict) -> list[int]:
    """The GRPO baselines' N, in config order (one run each)."""
    return list((config.get("grpo") or {}).get("group_sizes", []))


def grpo_methods(config: dict) -> list[str]:
    return [grpo_method(n) for n in grpo_group_sizes(config)]


def pope_group_size(config: dict) -> int | None:
    """`pope.num_generations` as configured; None when unset."""
    return (config.get("pope") or {}).get("num_generations")


def pope_method(config: dict) -> str:
    return f"pope{pope_group_size(config) or DEFAULT_POPE_GROUP_SIZE}"


def nudge_group_size(nudge: dict) -> int:
    """N = M hints x K rollouts per hint of a NudgeRL run (defaults M=2, K=4)."""
    return nudge.get("M", 2) * nudge.get("K", 4)


def nudge_main_method(nudge: dict) -> str:
    """The main NudgeRL run's id (its ablations are ``<id>_<suffix>``)."""
    return f"nudgerl{nudge_group_size(nudge)}"


def eps_sweep_group_size(config: dict) -> int:
    return config["grpo"].get("epsilon_high_sweep_group_size", DEFAULT_EPS_SWEEP_GROUP_SIZE)


def epsilon_high(config: dict) -> float:
    """The main runs' eps_high (`grpo.epsilon_high`)."""
    return float(config["grpo"].get("epsilon_high", DEFAULT_EPSILON_HIGH))


def eps_sweep(config: dict) -> list[tuple[float, str]]:
    """(eps_high, method id) of the GRPO eps_high sweep (paper Fig. 5), ascending; the value
    equal to `grpo.epsilon_high` is the main grpo{N} run. Empty without a sweep."""
    values = config["grpo"].get("epsilon_high_sweep")
    if not values:
        return []
    main, n = epsilon_high(config), eps_sweep_group_size(config)
    return [(eps, grpo_method(n) if eps == main else f"{grpo_method(n)}_eps{eps:g}")
            for eps in sorted(set(map(float, values)) | {main})]


# The A/A pair's repeat (config report.verdicts.aa): grpo{N}_aa, the same GRPO-N with other seeds.
DEFAULT_AA_SEED_OFFSET = 1000


def aa_repeat_method(method: str) -> str:
    """The id of the A/A pair's second arm of a GRPO run (grpo8 -> grpo8_aa)."""
    if grpo_group_size(method) is None:
        raise ValueError(f"config key 'report.verdicts.aa.method': {method!r} is not a GRPO run id (grpo<N>)")
    return f"{method}_aa"


DEFAULT_BASELINE_GROUP_SIZE = 8
# Names a baseline may not take: their ids would be read as another method's.
RESERVED_BASELINE_NAMES = ("base", "grpo", "pope", "nudgerl")


def baseline_group_size(config: dict) -> int:
    return (config.get("baselines") or {}).get("group_size", DEFAULT_BASELINE_GROUP_SIZE)


def baseline_seeds(config: dict) -> list[int]:
    """The replicates the baselines train on (`baselines.seeds`; empty: none run)."""
    return list((config.get("baselines") or {}).get("seeds") or [])


def baseline_definitions(config: dict) -> dict[str, dict]:
    """method id ({name}{N}) -> its `grpo` overrides, for every defined baseline, in config order
    (the regime map may run them whether or not the matrix does)."""
    n = baseline_group_size(config)
    return {f"{name}{n}": dict(overrides or {}) for name, overrides in
            ((config.get("baselines") or {}).get("methods") or {}).items()}


def baseline_runs(config: dict) -> dict[str, dict]:
    """The baselines the matrix trains: every definition, or none when `baselines.seeds` is empty."""
    return baseline_definitions(config) if baseline_seeds(config) else {}


def trained_group_sizes(config: dict) -> list[tuple[str, int]]:
    """(training rule, N) for every group size the DAG trains with a configured N."""
    grpo = config.get("grpo", {})
    nudge = config.get("nudgerl")
    pairs = [("train_grpo", n) for n in sorted(set(grpo_group_sizes(config)))]
    if grpo.get("epsilon_high_sweep"):
        pairs.append(("train_grpo_eps", eps_sweep_group_size(config)))
    if pope_group_size(config):
        pairs.append(("train_pope", pope_group_size(config)))
    if nudge is not None and nudge_group_size(nudge) >= 1:
        pairs.append(("train_nudgerl", nudge_group_size(nudge)))
    if baseline_runs(config):
        pairs.append(("train_baseline", baseline_group_size(config)))
    return pairs


# What each evaluated run is for, which sets its samples per problem (config
# eval.samples_per_role): Table 1's runs carry the paper's headline numbers; ablations, the
# eps_high sweep and the field's baselines are read for their differences, at fewer samples.
EVAL_ROLES = ("table1", "ablation", "sweep", "baseline")


def eval_role(config: dict, method: str) -> str:
    """The role of an evaluated run (one of :data:`EVAL_ROLES`). A Table 1 run (Base, GRPO at
    each N, POPE, the main NudgeRL run) is one whatever else it is (the eps_high sweep's main
    value is the main GRPO run); NudgeRL's ``<main>_<suffix>`` runs are ablations; a run of no
    listed kind (the A/A repeat, read against its Table 1 partner) counts as Table 1."""
    nudge_main = nudge_main_method({k: v for k, v in config.get("nudgerl", {}).items() if k != "ablations"})
    if method in {"base", *grpo_methods(config), pope_method(config), nudge_main}:
        return "table1"
    if method in {m for _, m in eps_sweep(config)}:
        return "sweep"
    if method in baseline_runs(config):
        return "baseline"
    if method.startswith(f"{nudge_main}_"):
        return "ablation"
    return "table1"


def role_samples(eval_section: dict, role: str) -> int:
    """Samples per problem of ``role``'s evaluations: eval.samples_per_role.<role>, else
    eval.samples_per_problem. Each must reach the largest k of eval.ks (pass@k needs k samples)."""
    counts = eval_section.get("samples_per_role") or {}
    unknown = sorted(set(counts) - set(EVAL_ROLES))
    if unknown:
        raise ValueError(f"config key 'eval.samples_per_role': unknown role(s) {unknown}; roles are {list(EVAL_ROLES)}")
    key = f"eval.samples_per_role.{role}" if role in counts else "eval.samples_per_problem"
    n = counts.get(role, eval_section["samples_per_problem"])
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"config key '{key}': samples per problem must be a whole number >= 1, not {n!r}")
    top_k = max(eval_section.get("ks") or [1])
    if n < top_k:
        raise ValueError(f"config key '{key}': {n} samples per problem cannot give pass@{top_k} (eval.ks); "
                         f"raise it to {top_k} or more")
    return n


def eval_samples(config: dict, method: str) -> int:
    """Samples per problem of ``method``'s evaluation, by its role."""
    return role_samples(config["eval"], eval_role(config, method))
