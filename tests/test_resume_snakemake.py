"""Kill and resume through Snakemake, as a user meets it: SIGKILL the whole `snakemake`
process group while a NudgeRL run trains (after its first checkpoint), then type what the
docs/operations.md says (`snakemake --unlock`, then the same command with `--rerun-incomplete`)."""

import json
import os
import signal
import subprocess
import time

import pytest
import yaml

# a real Snakemake run, killed and resumed
pytestmark = pytest.mark.slow

TARGET = "results/smoke/runs/nudgerl2/seed0/metrics.jsonl"
RUN = "results/smoke/runs/nudgerl2/seed0"
MAX_STEPS = 8


def _snakemake(workdir, *args):
    return ["snakemake", *args, "--cores", "1", "--configfile", "config/smoke.yaml", "config/kill.yaml"]


def _complete_checkpoints(run):
    ckpts = run / "checkpoints"
    return sorted(int(p.name.split("-")[1]) for p in ckpts.glob("checkpoint-*") if (p / "trainer_state.json").exists())


def test_sigkilled_snakemake_training_resumes_from_its_checkpoint(workdir):
    # More steps than the smoke config, a checkpoint every 2: a kill point exists for sure.
    (workdir / "config" / "kill.yaml").write_text(yaml.safe_dump({"grpo": {"max_steps": MAX_STEPS, "checkpoint_every": 2}}))
    run = workdir / RUN
    log = open(workdir / "first.log", "w")
    proc = subprocess.Popen(_snakemake(workdir, TARGET), cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not _complete_checkpoints(run):
        assert proc.poll() is None, (workdir / "first.log").read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # snakemake and its job: a node failure, an OOM kill
    proc.wait()
    kept = _complete_checkpoints(run)
    assert max(kept) < MAX_STEPS and not (workdir / TARGET).exists() and not (run / "model").exists()

    # Snakemake's lock outlives a SIGKILL: the user unlocks, then reruns the same command.
    unlock = subprocess.run(_snakemake(workdir, "--unlock"), cwd=workdir, capture_output=True, text=True)
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    again = subprocess.run(_snakemake(workdir, TARGET, "--rerun-incomplete"), cwd=workdir, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    # Only the killed job ran again: data, base model and pools were finished and kept.
    assert "train_nudgerl" in again.stderr and "base_model" not in again.stderr.split("Job stats:")[1].split("Select")[0]
    train_log = (workdir / "results" / "smoke" / "logs" / "train_nudgerl" / "nudgerl2_seed0.log").read_text()
    assert f"at global step {max(kept)}" in train_log, train_log[-2000:]
    rows = [json.loads(line) for line in (workdir / TARGET).read_text().splitlines()]
    # rollout metrics are logged on the first optimizer step of each generation batch
    grpo = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())["grpo"]
    every = grpo.get("optimizer_steps_per_generation", 1) if grpo.get("per_device_train_batch_size") else 1
    assert [r["step"] for r in rows] == list(range(1, MAX_STEPS + 1, every))  # none twice, none missing
    report = json.loads((run / "train_report.json").read_text())
    assert report["resumed_from_step"] == max(kept) and report["global_step"] == MAX_STEPS
    assert (run / "model" / "provenance.json").exists()
