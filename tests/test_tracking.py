"""Experiment tracking the TRL way: ``grpo.report_to`` (none, tensorboard, wandb), validated
by the schema; a tiny run writes TensorBoard event files (and a W&B offline run, when the
optional package is installed) inside its run folder, and no secret reaches them or the log."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from nudgerl.config import ConfigError, validate_config

# Secrets a user's shell may hold while training runs: none may be written anywhere.
SECRETS = {"HF_TOKEN": "hf_SENTINEL0tracking0secret", "WANDB_API_KEY": "wandb0SENTINEL0secret0key0000000000000",
           "OPENAI_API_KEY": "sk-SENTINEL-tracking-secret"}


def _config(**grpo):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["grpo"].update(grpo)
    return config


@pytest.mark.parametrize("report_to", ["none", "tensorboard", ["tensorboard"]])
def test_report_to_values_the_schema_accepts(report_to):
    validate_config(_config(report_to=report_to))


@pytest.mark.parametrize("report_to", ["all", "mlflow", ["none"], [], ["tensorboard", "tensorboard"]])
def test_report_to_values_the_schema_rejects(report_to):
    with pytest.raises(ConfigError, match="grpo.report_to"):
        validate_config(_config(report_to=report_to))


def test_wandb_without_the_package_is_a_config_error_naming_the_extra(monkeypatch):
    # as on a machine without the tracking extra, wherever this runs (CI installs it)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name, *a))
    with pytest.raises(ConfigError, match=r"grpo.report_to' names wandb.*\[tracking\]"):
        validate_config(_config(report_to=["tensorboard", "wandb"]))
    validate_config(_config(report_to=["tensorboard"]))


def _tiny_run(tiny_model_dir, tmp_path, report_to, env_extra=None):
    from nudgerl.organism import task

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(p.to_record()) + "\n" for p in task.training_problems(0, 2, 0.5)))
    params = {"prompts_per_step": 1, "max_steps": 2, "max_completion_length": 8, "checkpoint_every": 10,
              "report_to": report_to}
    run = tmp_path / "run"
    env = {**os.environ, **SECRETS, **(env_extra or {}), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "nudgerl.cli", "train-grpo", "--model", tiny_model_dir,
                           "--train", str(train), "--num-generations", "2", "--params", json.dumps(params),
                           "--out-dir", str(run)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run, proc.stdout + proc.stderr


def _assert_no_secret(log: str, folder) -> None:
    for secret in SECRETS.values():
        assert secret not in log
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(secret.encode() in data for secret in SECRETS.values()), path


@pytest.mark.slow
def test_tensorboard_event_files_from_a_tiny_run(tiny_model_dir, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run, log = _tiny_run(tiny_model_dir, tmp_path, "tensorboard")
    events = list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/reward", "train/loss", "train/learning_rate"} <= set(tags)
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2]  # one point per optimizer step
    assert not (run / "checkpoints" / "runs").exists()  # not transformers' default place
    _assert_no_secret(log, run)


@pytest.mark.slow  # a training run in a subprocess
@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="W&B is optional: pip install -e '.[tracking]' (CI does)")
def test_wandb_offline_run_stays_in_the_run_folder(tiny_model_dir, tmp_path):
    run, log = _tiny_run(tiny_model_dir, tmp_path, ["tensorboard", "wandb"], {"WANDB_MODE": "offline"})
    offline = list((run / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("run-*.wandb"))
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert not (tmp_path / "wandb").exists()  # nothing in the working directory
    _assert_no_secret(log, run)


def test_wandb_runs_offline_on_an_offline_job_unless_the_user_says_otherwise():
    from nudgerl.training.grpo import tracker_settings

    assert tracker_settings(["wandb"], {"HF_HUB_OFFLINE": "1"}) == {"WANDB_PROJECT": "nudgerl", "WANDB_MODE": "offline"}
    assert tracker_settings(["wandb"], {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "online", "WANDB_PROJECT": "p"}) == {}
    assert tracker_settings(["wandb"], {}) == {"WANDB_PROJECT": "nudgerl"}  # a job with network: online
    assert tracker_settings(["tensorboard"], {"HF_HUB_OFFLINE": "1"}) == {}
