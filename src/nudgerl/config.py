"""Configuration: JSON-schema validation with errors that name the key, plus preflight checks.

The Snakefile calls :func:`validate_config` before building the DAG, so a typo or an
impossible shape fails before any job starts.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

import yaml

from nudgerl.method_ids import role_samples, trained_group_sizes

# The config's JSON schema is package data (pyproject.toml [tool.setuptools.package-data]): an
# installed nudgerl, editable or not, validates a config without the repository's checkout.
SCHEMA_RESOURCE = "schemas/config.schema.yaml"  # under the nudgerl package
SCHEMA_PATH = Path(__file__).resolve().parent / SCHEMA_RESOURCE  # where it lies in a checkout or install


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


def schema_text() -> str:
    """The packaged config schema's text, read through importlib.resources (a wheel's install,
    a zip import or an editable checkout alike)."""
    schema = resources.files("nudgerl")  # nudgerl has no __init__.py: on 3.11 a MultiplexedPath, one part a step
    for part in SCHEMA_RESOURCE.split("/"):
        schema = schema / part
    return schema.read_text(encoding="utf-8")


def load_schema(path: str | Path | None = None) -> dict:
    """The config's JSON schema: the packaged one, or the file at ``path``."""
    return yaml.safe_load(schema_text() if path is None else Path(path).read_text())


def validate_config(config: dict, schema_path: str | Path | None = None) -> dict:
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
    if config.get("task", "organism") == "math":
        for key in ("models", "data"):
            if not config.get(key):
                problems.append(f"config key '{key}' is required when task is 'math'")
        problems += check_real_inputs(config)
    from nudgerl.data.prompts import resolve_template

    for use in ("train", "pope", "nudgerl", "eval"):
        try:
            template = resolve_template(config.get("prompts"), use)
        except ValueError as e:
            problems.append(str(e))
            continue
        style = (config.get("pope") or {}).get("prompt_style", "prefill")
        if use == "pope" and template.guided_user is not None and style != "instruct":
            problems.append(f"config key 'pope.prompt_style' is {style!r}, but the POPE template {template.name!r} "
                            "has a guided_user turn, which only the 'instruct' style uses; set prompt_style: instruct")
    ev = config["eval"]
    for k in ev.get("ks", [1]):
        if k > ev["samples_per_problem"]:
            problems.append(
                f"config key 'eval.ks': pass@{k} needs k <= eval.samples_per_problem "
                f"({ev['samples_per_problem']}); lower k or raise samples_per_problem"
            )
    for role in ev.get("samples_per_role") or {}:  # each role's count must reach pass@k too
        try:
            role_samples(ev, role)
        except ValueError as e:
            problems.append(str(e))
    problems += check_batch_shapes(config)
    problems += check_dvc_stages(config)
    problems += check_trackers(config)
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
        samplers = [nudge.get("hint_sampler", "sequential"), *nudge.get("ablations", {}).get("hint_sampling", [])]
        if "top_ranked" in samplers and ranking.get("keep", 2) < M:
            problems.append(f"config key 'ranking.keep' ({ranking.get('keep', 2)}) must be >= nudgerl.M ({M})")
        if M * K < 2:
            problems.append(f"config keys 'nudgerl.M' x 'nudgerl.K' = {M * K}: a group needs at least 2 rollouts")
    problems += _preflight_figures(config)
    problems += check_replicates(config)
    from nudgerl.organism import task

    specs = {k: (v["size"], v["hard_fraction"]) for k, v in config["organism"]["benchmarks"].items()}
    try:
        task.evaluation_sets(config["organism"].get("seed", 0), specs)
    except ValueError as e:
        problems.append(f"config key 'organism.benchmarks': {e}")
    return problems


def check_replicates(config: dict) -> list[str]:
    """Ablation and curve replicates are among the Table 1 replicates (they pair with them)."""
    seeds = set(config["seeds"])
    problems = []
    for key, sub in (("ablation_seeds", config.get("ablation_seeds")),
                     ("eval.curve.seeds", (config["eval"].get("curve") or {}).get("seeds"))):
        if sub and not set(sub) <= seeds:
            problems.append(f"config key '{key}': {sorted(set(sub) - seeds)} not in 'seeds' {sorted(seeds)}; "
                            "these runs are paired with the Table 1 replicates")
    problems += check_verdicts(config)
    if config.get("base_model_seed") is not None and config.get("task", "organism") != "organism":
        problems.append("config key 'base_model_seed': only the organism builds base models (task math names its "
                        "models in 'models'); set it to null (config/config.yaml sets the organism's)")
    if config.get("study"):
        problems += check_study(config)
    if config.get("baselines"):
        problems += check_baselines(config)
    if config.get("regime_map"):
        problems += check_regime_map_methods(config)
    if config.get("task", "organism") == "organism" and "regime" in config:
        from nudgerl.evaluation.regime import FIGURES

        for figure, bound in (config["regime"].get("bounds") or {}).items():
            if figure in FIGURES and bound.get("min") is not None and bound.get("max") is not None \
                    and bound["min"] > bound["max"]:
                problems.append(f"config key 'regime.bounds.{figure}': min {bound['min']} > max {bound['max']}")
    return problems


def check_verdicts(config: dict) -> list[str]:
    """The verdict rule can reach its alpha at its minimum; the A/A pair repeats a GRPO run of the matrix."""
    from nudgerl.verdicts import VerdictRule

    section = (config.get("report") or {}).get("verdicts") or {}
    problems = []
    try:
        VerdictRule.from_section(section)
    except ValueError as e:
        problems.append(str(e))
    aa = section.get("aa")
    if aa is not None:
        from nudgerl.method_ids import grpo_methods

        if not grpo_methods(config):
            problems.append("config key 'report.verdicts.aa': the A/A pair repeats a GRPO run, and 'grpo.group_sizes' "
                            "is empty (set aa: null)")
        elif aa.get("method") and aa["method"] not in grpo_methods(config):
            problems.append(f"config key 'report.verdicts.aa.method': {aa['method']!r} is not a GRPO run of the matrix "
                            f"({', '.join(grpo_methods(config))}); leave it out for the reference GRPO run")
        if len(config["seeds"]) < 2:
            problems.append("config key 'report.verdicts.aa': an A/A spread needs at least 2 replicates ('seeds')")
    return problems


def check_study(config: dict) -> list[str]:
    """The study's seed sets are two disjoint sets of the run's seeds; its common shares and
    checked method are among the regime map's."""
    from nudgerl.reporting.study import check_seed_sets

    study = config["study"]
    problems = check_seed_sets(study["seed_sets"], config["seeds"])
    rmap = config.get("regime_map")
    if not rmap:
        return [*problems, "config key 'study': the study needs a 'regime_map' section (its common-regime check "
                           "reads the map's cells)"]
    missing = sorted(set(study["common_shares"]) - set(rmap["shares"]))
    if missing:
        problems.append(f"config key 'study.common_shares': {missing} not in 'regime_map.shares' {rmap['shares']}")
    method = study.get("rl_works_method", "grpo8")
    if method not in rmap["methods"]:
        problems.append(f"config key 'study.rl_works_method': {method!r} not in 'regime_map.methods' {rmap['methods']}")
    return problems


def check_regime_map_methods(config: dict) -> list[str]:
    """The map trains grpo<N>, NudgeRL, or a baseline defined in `baselines.methods`; its
    `baselines` sub-grid trains defined baselines on some of its seeds. (Which
    nudgerl<N> is the main run is checked when the map is planned: a configuration that does not
    run the map, e.g. smoke's N=2 under config.yaml's map, must still load.)"""
    from nudgerl.method_ids import baseline_definitions, grpo_group_size

    rmap = config["regime_map"]
    known = set(baseline_definitions(config))
    defined = ", ".join(baseline_definitions(config)) or "none defined"
    problems = []
    unknown = [m for m in rmap["methods"]
               if grpo_group_size(m) is None and not re.fullmatch(r"nudgerl\d+", m) and m not in known]
    if unknown:
        problems.append(f"config key 'regime_map.methods': {unknown} are neither grpo<N>, nudgerl<N> nor a baseline "
                        f"of 'baselines.methods' ({defined})")
    extra = rmap.get("baselines") or {}
    unknown = [m for m in extra.get("methods", []) if m not in known]
    if unknown:
        problems.append(f"config key 'regime_map.baselines.methods': {unknown} are not baselines of "
                        f"'baselines.methods' ({defined})")
    missing = sorted(set(extra.get("seeds", [])) - set(rmap["seeds"]))
    if missing:
        problems.append(f"config key 'regime_map.baselines.seeds': {missing} not in 'regime_map.seeds' "
                        f"{sorted(rmap['seeds'])} (the baselines pair with the map's runs on the same base models)")
    missing = [s for s in extra.get("shares", []) if s not in rmap["shares"]]
    if missing:
        problems.append(f"config key 'regime_map.baselines.shares': {missing} not in 'regime_map.shares' "
                        f"{rmap['shares']} (the baselines pair with the map's runs in the same cells)")
    axis = rmap.get("accuracy")
    if axis:
        if axis["share"] not in rmap["shares"]:
            problems.append(f"config key 'regime_map.accuracy.share': {axis['share']} not in 'regime_map.shares' "
                            f"{rmap['shares']} (the map's cell there, accuracy 1, is the axis' reference)")
        missing = sorted(set(axis["seeds"]) - set(rmap["seeds"]))
        if missing:
            problems.append(f"config key 'regime_map.accuracy.seeds': {missing} not in 'regime_map.seeds' "
                            f"{sorted(rmap['seeds'])} (each cell pairs with the reference cell's base models)")
    return problems


# What a baseline may not change: it runs with GRPO-N's steps, batching and seeds.
BASELINE_FIXED_KEYS = ("group_sizes", "prompts_per_step", "max_steps", "per_device_train_batch_size",
                       "optimizer_steps_per_generation", "epsilon_high_sweep", "epsilon_high_sweep_group_size",
                       "lora", "checkpoint_every", "prune_checkpoints")


def check_baselines(config: dict) -> list[str]:
    """Each baseline's overrides are `grpo` keys of the schema (with their types), none that
    changes steps or batching; names not read as another method's; seeds among `seeds`."""
    import jsonschema

    from nudgerl.method_ids import RESERVED_BASELINE_NAMES

    baselines = config["baselines"]
    problems = []
    missing = sorted(set(baselines.get("seeds") or []) - set(config["seeds"]))
    if missing:
        problems.append(f"config key 'baselines.seeds': {missing} not in 'seeds' {sorted(config['seeds'])}; "
                        "the baselines pair with the Table 1 replicates")
    grpo_schema = {**load_schema()["properties"]["grpo"], "required": []}
    for name, overrides in (baselines.get("methods") or {}).items():
        where = f"baselines.methods.{name}"
        if any(name.startswith(r) for r in RESERVED_BASELINE_NAMES):
            problems.append(f"config key '{where}': a baseline's name may not start with "
                            f"{' / '.join(RESERVED_BASELINE_NAMES)} (its id would read as that method's)")
        fixed = sorted(set(overrides or {}) & set(BASELINE_FIXED_KEYS))
        if fixed:
            problems.append(f"config key '{where}': {fixed} may not differ from GRPO's (same steps and batching)")
        for error in jsonschema.Draft202012Validator(grpo_schema).iter_errors(overrides or {}):
            if error.validator == "additionalProperties":
                extra = sorted(set(error.instance) - set(grpo_schema["properties"]))
                problems.append(f"config key '{where}': {extra} are not keys of the 'grpo' section")
            else:
                key = ".".join(str(p) for p in error.absolute_path)
                problems.append(f"config key '{where}.{key}': {error.message}")
    return problems


def check_batch_shapes(config: dict) -> list[str]:
    """Shapes TRL would reject (or silently degrade) inside a job, checked up front.

    Every trainer builds one step from ``grpo.prompts_per_step`` prompts x N rollouts, so the
    generation batch (prompts_per_step x N) is a whole number of groups by construction; what
    can still go wrong is a group too small for an advantage, too few training problems for
    one step, or NudgeRL's per-rollout prompts under TRL's vLLM server mode."""
    problems = []
    grpo = config.get("grpo", {})
    pps = grpo.get("prompts_per_step", 1)
    train_size = config.get("organism", {}).get("train", {}).get("size")
    if train_size is not None and train_size < pps:
        problems.append(f"config key 'grpo.prompts_per_step' ({pps}) exceeds the training set "
                        f"('organism.train.size' = {train_size}): lower prompts_per_step or raise the size")
    # each generation batch (prompts_per_step x N rollouts) must split into whole micro-batches
    # over the job's processes (its `gpu` resource: accelerate starts one per GPU) and
    # optimizer_steps_per_generation steps, for every N each training rule trains
    per_device = grpo.get("per_device_train_batch_size")
    steps = grpo.get("optimizer_steps_per_generation", 1)
    for rule, n in trained_group_sizes(config):
        procs = training_processes(config, rule)
        generation = pps * n
        gpu_key = f"'resources.gpu.{rule}' ({procs})"
        if per_device is None:
            if generation % procs:
                problems.append(
                    f"config keys 'grpo.prompts_per_step' and {gpu_key}: rule {rule}'s generation batch of N={n} "
                    f"({pps} x {n} = {generation} rollouts) does not split evenly over {procs} processes; pick a "
                    "prompts_per_step or gpu count that divides it")
        elif generation % (per_device * procs * steps):
            procs_text = f" x {gpu_key} processes" if procs > 1 else ""
            fix = " or fewer GPUs" if procs > 1 else ""
            problems.append(
                f"config key 'grpo.per_device_train_batch_size' ({per_device}): rule {rule}'s generation batch of "
                f"N={n} ('grpo.prompts_per_step' {pps} x {n} = {generation} rollouts) is not a multiple of "
                f"per_device_train_batch_size{procs_text} x 'grpo.optimizer_steps_per_generation' ({steps}) = "
                f"{per_device * procs * steps}; raise prompts_per_step or lower per_device_train_batch_size"
                f"{fix}")
    nudge = config.get("nudgerl")
    if nudge is not None:
        M, K = nudge.get("M", 2), nudge.get("K", 4)
        if M < 1 or K < 1:
            problems.append(f"config keys 'nudgerl.M' and 'nudgerl.K' must be >= 1 (got M={M}, K={K}); "
                            "N = M x K rollouts per problem")
        if grpo.get("use_vllm") and grpo.get("vllm_mode", "colocate") == "server":
            problems.append("config key 'grpo.vllm_mode': 'server' sends one prompt per group and would drop "
                            "NudgeRL's per-rollout hints; set vllm_mode: colocate")
    return problems


def training_processes(config: dict, rule: str) -> int:
    """Processes a training job of ``rule`` runs with: one per GPU (PlanResources.launcher starts
    ``accelerate launch --num_processes <gpu>`` when the rule's ``resources.gpu`` is above 1).
    A ``--set-resources <rule>:gpu=N`` on the command line is not in the config: such a job
    checks its shapes itself when it starts (nudgerl.training.grpo.batch_kwargs)."""
    gpus = ((config.get("resources") or {}).get("gpu") or {}).get(rule) or 1
    return max(int(gpus), 1)


def check_trackers(config: dict) -> list[str]:
    """``grpo.report_to`` may name W&B only where it is installed (an optional extra;
    TensorBoard is a dependency)."""
    import importlib.util

    report_to = config.get("grpo", {}).get("report_to", "none")
    wanted = [report_to] if isinstance(report_to, str) else list(report_to)
    if "wandb" in wanted and importlib.util.find_spec("wandb") is None:
        return ["config key 'grpo.report_to' names wandb, which is not installed here: "
                'pip install -e ".[tracking]" (or drop wandb from report_to)']
    return []


def check_dvc_stages(config: dict, root: str | Path = ".") -> list[str]:
    """The DVC stages named by ``pools.stage`` and ``pope.oracle_stage`` exist in dvc.yaml with
    a params.yaml section and one expanded stage for this configuration's ``run_name``
    (``<stage>@<run_name>``), and pools hold at least M hints (else rollouts go hint-free)."""
    from nudgerl.offline.dvc_stages import RUNS_KEY, StageError, helper_stages, load_stage, stage_groups, stage_name

    root = Path(root)
    if not (root / "dvc.yaml").exists():
        return []  # not a workflow checkout (e.g. `nudgerl validate-config` elsewhere)
    stages = stage_groups(root)
    params = yaml.safe_load((root / "params.yaml").read_text()) or {} if (root / "params.yaml").exists() else {}
    problems = []
    named = helper_stages(config)
    for key, stage in named:
        if stage not in stages:
            problems.append(f"config key '{key}': dvc.yaml has no stage {stage!r} "
                            f"(stages: {stages}); add the stage or name an existing one")
        elif stage not in params:
            problems.append(f"config key '{key}': params.yaml has no section {stage!r} for DVC stage {stage!r}")
        elif config.get("run_name"):
            try:
                load_stage(stage_name(stage, config["run_name"]), str(root))
            except StageError as e:
                problems.append(f"config key 'run_name' ({config['run_name']!r}) with '{key}' = {stage!r}: {e}"
                                if RUNS_KEY in str(e) else f"config key '{key}': {e}")
    pool = params.get(named[0][1]) or {}
    M = config.get("nudgerl", {}).get("M", 2)
    if "nudgerl" in config and isinstance(pool.get("n"), int) and pool["n"] < M:
        problems.append(f"config key 'nudgerl.M' ({M}) exceeds the pool size (params.yaml "
                        f"{named[0][1]}.n = {pool['n']}): lower M or ask the helper for more hints")
    return problems


def check_real_inputs(config: dict) -> list[str]:
    """Local datasets and models named by a real-data config exist before any job starts.
    A dataset's relative ``path`` resolves against ``data.local_dir`` (as the loader does); a
    model folder that a rule builds (``gguf``) or a hub id is not checked."""
    problems = []
    data = config.get("data") or {}
    local_dir = data.get("local_dir")
    specs = [("data.train", data.get("train") or {})]
    specs += [(f"data.benchmarks.{name}", spec or {}) for name, spec in (data.get("benchmarks") or {}).items()]
    for key, spec in specs:
        path = spec.get("path")
        if not path or spec.get("hf"):
            continue
        full = Path(path).expanduser()
        if not full.is_absolute() and local_dir:
            full = Path(local_dir).expanduser() / full
        if not full.exists():
            problems.append(f"config key '{key}.path': dataset file {str(full)!r} does not exist; fix the path "
                            f"or 'data.local_dir' ({local_dir!r}), or name a Hugging Face dataset in '{key}.hf'")
    for i, model in enumerate(config.get("models") or []):
        if not model.get("gguf"):
            problems += check_local_path(f"models[{i}].path", model.get("path"))
    return problems


def check_local_path(key: str, value: str) -> list[str]:
    """For keys that name a model or dataset: a value that looks like a local path
    (absolute, ./, ../ or ~) must exist; anything else is taken as a hub id."""
    if not isinstance(value, str) or not value.startswith(("/", "./", "../", "~")):
        return []
    if Path(value).expanduser().exists():
        return []
    return [f"config key '{key}': local path {value!r} does not exist; fix the path or give a hub id"]


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
        benchmarks = (config.get("data", {}) if config.get("task", "organism") == "math" else config.get("organism", {}))
        known = set(benchmarks.get("benchmarks", {}))
        unknown = [b for b in curve.get("benchmarks", ["aime24", "aime25"]) if known and b not in known]
        if unknown:
            problems.append(f"config key 'eval.curve.benchmarks': {unknown} not in organism.benchmarks {sorted(known)}")
    off_policy = grpo.get("num_iterations", 1) >= 2 or (
        grpo.get("per_device_train_batch_size") is not None and grpo.get("optimizer_steps_per_generation", 1) >= 2)
    if grpo.get("epsilon_high_sweep") and not off_policy:
        problems.append("config key 'grpo.epsilon_high_sweep' needs off-policy updates: 'grpo.num_iterations' >= 2, "
                        "or 'grpo.per_device_train_batch_size' with 'grpo.optimizer_steps_per_generation' >= 2 (the "
                        "authors' setting). With one optimizer step per generation batch the importance ratio is 1, "
                        "eps_high never clips, and every sweep run would train the same model as grpo{N}")
    if grpo.get("epsilon_high_sweep") and not config.get("nudgerl"):
        problems.append("config key 'grpo.epsilon_high_sweep': the eps_high figure needs a nudgerl section "
                        "(NudgeRL is its reference line)")
    return problems

_PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*>")
_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def resource_placeholders(settings: list[tuple[str, str]], environ=None) -> list[str]:
    """Scheduler settings that would reach the cluster unfilled. ``settings`` are
    (where, "name=raw value") pairs as a profile or the command line gave them, e.g.
    ("default-resources", "slurm_account='$NUDGERL_SLURM_ACCOUNT'"). A value naming an
    environment variable that is not set (Snakemake leaves ``$NAME`` as it is) or still holding
    a ``<PLACEHOLDER>`` is a problem; the message names it and the fix. A variable set to the
    empty string is a choice (e.g. no Slurm account), not a problem."""
    environ = os.environ if environ is None else environ
    problems = []
    for where, setting in settings:
        name, _, raw = setting.partition("=")
        unset = [a or b for a, b in _ENV_REF.findall(raw) if (a or b) not in environ]
        for var in unset:
            problems.append(f"{where} {name}: environment variable {var} is not set; "
                            f"export {var}=<value> (profiles/slurm/config.yaml explains it)")
        expanded = _ENV_REF.sub(lambda m: environ.get(m.group(1) or m.group(2), m.group(0)), raw)
        for ph in _PLACEHOLDER.findall(expanded):
            problems.append(f"{where} {name}: still the placeholder {ph}; give your cluster's value")
    return problems


def load_config(path: str | Path) -> dict:
    with open(path) as f:
        config = yaml.safe_load(f)
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return validate_config(config)
