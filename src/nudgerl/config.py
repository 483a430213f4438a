"""Configuration: JSON-schema validation with errors that name the key, plus preflight checks.

The Snakefile calls :func:`validate_config` before building the DAG, so a typo or an
impossible shape fails before any job starts.
"""

from __future__ import annotations

from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A configuration problem; the message names the key and the fix."""


def _key_path(error) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    return path or "<top level>"


def _describe(error) -> str:
    key = _key_path(error)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = sorted(error.schema.get("properties", {}))
        msg = f"unknown key(s) {extra} under '{key}'; allowed: {allowed}"
        if key == "pools":
            msg += " (pool parameters live in params.yaml, DVC's single source of truth)"
        return msg
    if error.validator == "required":
        return f"'{key}' is missing a required key: {error.message}"
    return f"config key '{key}': {error.message}"


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    return yaml.safe_load(Path(path).read_text())


def validate_config(config: dict, schema_path: Path = SCHEMA_PATH) -> dict:
    """Raise :class:`ConfigError` listing every schema violation and preflight failure."""
    import jsonschema

    schema = load_schema(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    problems = [_describe(e) for e in errors]
    if not problems:
        problems = preflight(config)
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
    return config


def preflight(config: dict) -> list[str]:
    """Checks a schema cannot express: shapes that would only fail inside a job."""
    problems = []
    ev = config["eval"]
    for k in ev.get("ks", [1]):
        if k > ev["samples_per_problem"]:
            problems.append(
                f"config key 'eval.ks': pass@{k} needs k <= eval.samples_per_problem "
                f"({ev['samples_per_problem']}); lower k or raise samples_per_problem"
            )
    if 1 not in ev.get("ks", [1]):
        problems.append("config key 'eval.ks' must contain 1 (pass@1 is the paper's metric)")
    weights = config.get("base_model", {}).get("unhinted_strategy_weights")
    if weights is not None and sum(weights.values()) <= 0:
        problems.append("config key 'base_model.unhinted_strategy_weights': weights must not all be zero")
    nudge = config.get("nudgerl")
    if nudge is not None:
        M, K = nudge.get("M", 2), nudge.get("K", 4)
        ranking = config.get("ranking", {})
        if ranking.get("k", 1) > ranking.get("samples", 16):
            problems.append("config key 'ranking.k' must be <= ranking.samples")
        if "top_ranked" in nudge.get("ablations", {}).get("hint_sampling", []) and ranking.get("keep", 2) < M:
            problems.append(f"config key 'ranking.keep' ({ranking.get('keep', 2)}) must be >= nudgerl.M ({M})")
        if M * K < 2:
            problems.append(f"config keys 'nudgerl.M' x 'nudgerl.K' = {M * K}: a group needs at least 2 rollouts")
    problems += _preflight_figures(config)
    from .organism import task

    specs = {k: (v["size"], v["hard_fraction"]) for k, v in config["organism"]["benchmarks"].items()}
    try:
        task.evaluation_sets(config["organism"].get("seed", 0), specs)
    except ValueError as e:
        problems.append(f"config key 'organism.benchmarks': {e}")
    return problems


def _preflight_figures(config: dict) -> list[str]:
    """eval.curve and the eps_high sweep: shapes that would fail only in the curve/sweep jobs."""
    problems = []
    grpo = config["grpo"]
    curve = config["eval"].get("curve")
    if curve:
        every, ckpt = curve.get("every", 10), grpo.get("checkpoint_every", 20)
        if every % ckpt:
            problems.append(f"config key 'eval.curve.every' ({every}) must be a multiple of 'grpo.checkpoint_every' "
                            f"({ckpt}): the curve evaluates the checkpoints training saves")
        known = set(config.get("organism", {}).get("benchmarks", {}))
        unknown = [b for b in curve.get("benchmarks", ["aime24", "aime25"]) if known and b not in known]
        if unknown:
            problems.append(f"config key 'eval.curve.benchmarks': {unknown} not in organism.benchmarks {sorted(known)}")
    if grpo.get("epsilon_high_sweep") and grpo.get("num_iterations", 1) == 1:
        problems.append("config key 'grpo.epsilon_high_sweep' needs 'grpo.num_iterations' >= 2: with one optimizer "
                        "pass per generation batch the importance ratio is 1, eps_high never clips, and every "
                        "sweep run would train the same model as grpo{N}")
    if grpo.get("epsilon_high_sweep") and not config.get("nudgerl"):
        problems.append("config key 'grpo.epsilon_high_sweep': the eps_high figure needs a nudgerl section "
                        "(NudgeRL is its reference line)")
    return problems


def load_config(path: str | Path) -> dict:
    with open(path) as f:
        config = yaml.safe_load(f)
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return validate_config(config)
