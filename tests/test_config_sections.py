"""Config sections are read one way (nudgerl.sections.from_section): an unknown key is an error
naming the key and the section, the keys the workflow passes are accepted, and each config
dataclass's defaults (and the SamplingParams builder's fallbacks) are config/config.yaml's."""

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from nudgerl.data.prepare import DatasetSpec
from nudgerl.data.prompts import PromptTemplate
from nudgerl.evaluation.sampling import SECTION_SAMPLING_DEFAULTS, SamplingParams, sampling_params
from nudgerl.offline.oracles import OracleConfig
from nudgerl.offline.pools import PoolConfig
from nudgerl.organism.base_config import BaseModelConfig
from nudgerl.sections import UnknownKeysError, from_section
from nudgerl.training.grpo_config import GRPORunConfig
from nudgerl.training.nudgerl import NudgeRLConfig
from nudgerl.training.pope import POPEConfig
from nudgerl.plan.arguments import rl_diagnosis_params

REPO = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
PARAMS = yaml.safe_load((REPO / "params.yaml").read_text())
SCHEMA = yaml.safe_load((REPO / "src" / "nudgerl" / "schemas" / "config.schema.yaml").read_text())
# Every configuration in config/, as Snakemake sees it: each file merged over config.yaml, key by key.
OVERLAYS = {"config.yaml": [], "common.yaml": ["common.yaml"], "study.yaml": ["study.yaml"], "smoke.yaml": ["smoke.yaml"], "paper.yaml": ["paper.yaml"],
            "paper.yaml+offline.yaml": ["paper.yaml", "offline.yaml"], "paper.yaml+pilot.yaml": ["paper.yaml", "pilot.yaml"],
            "smollm2.yaml": ["smollm2.yaml"],
            "smollm2_arith.yaml": ["smollm2_arith.yaml"], "families.yaml": ["families.yaml"],
            "families.yaml+training_length_pilot.yaml": ["families.yaml", "training_length_pilot.yaml"],
            "families.yaml+families_execution_practice.yaml": ["families.yaml", "families_execution_practice.yaml"],
            "families.yaml+families_execution_practice.yaml+families_sft_attempts.yaml":
                ["families.yaml", "families_execution_practice.yaml", "families_sft_attempts.yaml"]}

# Config sections read into a dataclass (the rules pass them as JSON to the training CLIs).
DATACLASS_SECTIONS = {"grpo": GRPORunConfig, "nudgerl": NudgeRLConfig, "pope": POPEConfig,
                      "base_model": BaseModelConfig}
# A default that differs from config/config.yaml's value on purpose. Every configuration sets
# these keys (config.yaml does), so the workflow never reads the code default; runs built in
# code (tests, benchmarks) rely on it.
KNOWN_DIFFERENCES = {
    ("grpo", "per_device_train_batch_size"): "None: one micro-batch per generation batch (small runs in code)",
    ("grpo", "optimizer_steps_per_generation"): "1: goes with per_device_train_batch_size None",
    ("grpo", "gradient_checkpointing"): "None: TRL's own default",
    # The code's organism defaults are the single-family task's (what the dataclasses build
    # unconfigured: the tests' and the regime map's task; config/single_family.yaml restates
    # them); config/config.yaml sets the families task's, the default since it replaced it.
    ("grpo", "max_steps"): "40: the single-family task's one pass over the training problems",
    ("grpo", "max_completion_length"): "56: the single-family task's longest trace",
    ("base_model", "task"): "single_family",
    ("base_model", "hint_following"): "1.0: the single-family task's hints dictate",
    ("base_model", "chosen_fraction"): "0.15: the single-family task's execution practice",
    ("base_model", "practice_random_terms"): "0.0: the single-family task has no random-term practice",
    ("base_model", "sft_attempts"): "1: the single-family task's one build",
    ("base_model", "max_steps"): "1500: the single-family task's SFT cap",
}


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def _config(name: str) -> dict:
    cfg = CONFIG
    for f in OVERLAYS[name]:
        cfg = _merge(cfg, yaml.safe_load((REPO / "config" / f).read_text()))
    return cfg


def _fields(cls) -> dict:
    return {f.name: f for f in dataclasses.fields(cls)}


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


# ---------------------------------------------------------------- unknown keys

UNKNOWN = [
    (lambda d: GRPORunConfig.from_dict({"num_generations": 8, **d}), "grpo", "max_completion_length"),
    (lambda d: NudgeRLConfig.from_dict({"M": 2, **d}), "nudgerl", "lambda_distill"),
    (lambda d: POPEConfig.from_dict(d), "pope", "prefix_ratio"),
    (lambda d: PoolConfig.from_dict(d), "pools", "p_correct"),
    (lambda d: PoolConfig.from_dict(d, section="pools_organism"), "pools_organism", "max_hint_words"),
    (lambda d: OracleConfig.from_dict(d), "oracles", "filter_correct"),
    (lambda d: OracleConfig.from_dict(d, section="oracles_dapo"), "oracles_dapo", "api_key_env"),
    (lambda d: DatasetSpec.from_dict({"path": "x.jsonl", **d}, where="data.train"), "data.train", "problem_field"),
    (lambda d: PromptTemplate.from_dict({"name": "mine", **d}), "prompts.templates.mine", "hint_block"),
    (lambda d: BaseModelConfig.from_dict(d), "base_model", "chosen_fraction"),
]


@pytest.mark.parametrize("build,section,accepted", UNKNOWN, ids=[u[1] for u in UNKNOWN])
def test_an_unknown_key_names_key_section_and_accepted_keys(build, section, accepted):
    with pytest.raises(ValueError) as e:
        build({"bogus_key": 1, "another_typo": 2})
    msg = str(e.value)
    assert isinstance(e.value, UnknownKeysError)
    assert "'another_typo'" in msg and "'bogus_key'" in msg
    assert f"section {section!r}" in msg
    assert "accepted keys" in msg and f"'{accepted}'" in msg.split("accepted keys")[1]


def test_the_workflow_keys_of_a_section_are_accepted():
    """The rules pass the whole grpo section (group_sizes: which N to run) and the helpers the
    whole nudgerl/pope sections: keys the workflow reads are named and skipped, not errors."""
    cfg = GRPORunConfig.from_dict({**CONFIG["grpo"], "num_generations": 8, "seed": 1, "grader_mode": "standard"})
    assert cfg.prompts_per_step == CONFIG["grpo"]["prompts_per_step"] and cfg.seed == 1
    assert NudgeRLConfig.from_dict(CONFIG["nudgerl"]).M == CONFIG["nudgerl"]["M"]
    assert POPEConfig.from_dict(CONFIG["pope"]).prefix_ratio == CONFIG["pope"]["prefix_ratio"]
    with pytest.raises(UnknownKeysError, match="'lora_rank'"):
        GRPORunConfig.from_dict({**CONFIG["grpo"], "lora_rank": 8})


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_shipped_config_loads_into_its_dataclasses(name):
    cfg = _config(name)
    for section, cls in DATACLASS_SECTIONS.items():
        cls.from_dict(cfg[section])
    data = cfg.get("data") or {}
    specs = {"train": data.get("train"), **(data.get("benchmarks") or {})}
    for spec_name, spec in specs.items():
        if spec is not None:
            DatasetSpec.from_dict(spec, where=f"data.{spec_name}")
    for tname, template in ((cfg.get("prompts") or {}).get("templates") or {}).items():
        PromptTemplate.from_dict({"name": tname, **template})


def test_every_params_yaml_helper_section_loads():
    sections = {k: v for k, v in PARAMS.items() if k.startswith(("pools_", "oracles_"))}
    assert sections
    for name, section in sections.items():
        cls = PoolConfig if name.startswith("pools_") else OracleConfig
        assert isinstance(cls.from_dict(section, section=name), cls)


def test_nested_dataclass_sections_are_read_the_same_way():
    @dataclasses.dataclass
    class Inner:
        a: int = 1

    @dataclasses.dataclass
    class Outer:
        inner: Inner = dataclasses.field(default_factory=Inner)
        b: int = 2

    Outer.__annotations__["inner"] = Inner  # resolvable without this test module's globals
    assert from_section(Outer, {"inner": {"a": 5}}, "outer").inner == Inner(a=5)
    with pytest.raises(UnknownKeysError, match=r"section 'outer.inner'.*'c'"):
        from_section(Outer, {"inner": {"c": 5}}, "outer")


# ---------------------------------------------------------------- shared helper fields


def test_pool_and_oracle_configs_share_the_endpoint_fields():
    from nudgerl.offline.helper_llm import HelperEndpointConfig

    shared = set(_fields(HelperEndpointConfig))
    assert shared <= set(_fields(PoolConfig)) and shared <= set(_fields(OracleConfig))
    for cls in (PoolConfig, OracleConfig):  # the stats sidecar records every key but extra
        assert sorted(cls.STATS_KEYS) == sorted(set(_fields(cls)) - {"extra"})
        assert cls().stats_config() == {k: _default(_fields(cls)[k]) for k in cls.STATS_KEYS}


# ---------------------------------------------------------------- defaults


def _schema_defaults(section: str) -> dict:
    props = SCHEMA["properties"].get(section, {}).get("properties", {})
    return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}


@pytest.mark.parametrize("section", DATACLASS_SECTIONS)
def test_dataclass_defaults_are_the_config_values(section):
    fields = _fields(DATACLASS_SECTIONS[section])
    checked = 0
    for source, values in (("config/config.yaml", CONFIG[section]), ("the schema", _schema_defaults(section))):
        for key, value in values.items():
            if key not in fields:
                continue
            default = _default(fields[key])
            if (section, key) in KNOWN_DIFFERENCES:
                assert default != value, f"{section}.{key}: now equal to {source}; drop it from KNOWN_DIFFERENCES"
            else:
                assert default == value, f"{section}.{key}: code default {default!r}, {source} {value!r}"
                checked += 1
    assert checked


def test_sampling_builder_fallbacks_are_the_config_values():
    """eval and ranking (config.yaml), the RL-prompt diagnosis the workflow derives from grpo and
    regime.diagnosis, and the schema's defaults all fall back to the builder's values."""
    sections = {"eval": CONFIG["eval"], "ranking": CONFIG["ranking"],
                "rl_prompts": rl_diagnosis_params(CONFIG, 0), "rl_prompts (empty config)": rl_diagnosis_params({}, 0)}
    for section in ("eval", "ranking"):
        sections[f"schema {section}"] = _schema_defaults(section)
    sections["schema regime.diagnosis"] = {
        k: v["default"] for k, v in SCHEMA["properties"]["regime"]["properties"]["diagnosis"]["properties"].items()
        if "default" in v}
    # config.yaml's families task samples up to 72 tokens (its longest trace is 65); the builder
    # falls back to the single-family task's 56, as the code's other organism defaults
    # (KNOWN_DIFFERENCES)
    from_config = {"eval", "ranking", "rl_prompts"}
    checked = 0
    for name, values in sections.items():
        for key, default in SECTION_SAMPLING_DEFAULTS.items():
            if key in values:
                if name in from_config and key == "max_new_tokens":
                    assert values[key] == 72 != default, f"{name}.{key}: {values[key]!r}"
                    continue
                assert values[key] == default, f"{name}.{key}: {values[key]!r}, builder fallback {default!r}"
                checked += 1
    assert checked >= 8


def test_sampling_builder():
    assert sampling_params({}, 3) == SamplingParams(n=3, temperature=1.0, top_p=1.0, max_new_tokens=56,
                                                    batch_size=512, seed=0)
    p = {"temperature": 0.7, "top_p": 0.95, "max_new_tokens": 9, "batch_size": 4, "seed": 3, "samples": 2}
    assert sampling_params(p, 2) == SamplingParams(n=2, temperature=0.7, top_p=0.95, max_new_tokens=9, batch_size=4,
                                                   seed=3)
    assert sampling_params(p, 2, seed=7, stop=["</SOLUTION>"]).seed == 7
    assert sampling_params(p, 2, stop=["</SOLUTION>"]).stop == ("</SOLUTION>",)
