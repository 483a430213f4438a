"""A training run's attempts (nudgerl.attempts): only the planned stop is retried, a
failed run's retries refuse at once and name the failure, and a second job never trains on a
run whose first job is alive. The Slurm side of the lock is in tests/test_slurm_local.py."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nudgerl.io import ATTEMPTS_LOG, attempt_seconds
from nudgerl.plan.resources import PlanResources
from nudgerl.attempts import (ATTEMPT_FILE, ATTEMPT_VAR, FAILED_FILE, FAILED_PREVIOUS_FILE, LOG_VAR,
                                       PredecessorAlive, RunFailedBefore, guarded_attempt, live_predecessor)
from nudgerl.training.run_state import TIME_LIMIT_EXIT_CODE, StoppedForTimeLimit


def _env(attempt, **extra):
    return {ATTEMPT_VAR: str(attempt), LOG_VAR: "results/x/logs/train_grpo/grpo8_seed0.log", **extra}


def test_a_failure_is_recorded_and_its_retries_refuse_naming_it(tmp_path):
    with pytest.raises(ValueError, match="bad lr"):
        with guarded_attempt(tmp_path, environ=_env(1)):
            raise ValueError("bad lr")
    assert json.loads((tmp_path / ATTEMPTS_LOG).read_text())["ended"] == "failed"
    rec = json.loads((tmp_path / FAILED_FILE).read_text())
    assert rec["error"] == "ValueError: bad lr" and rec["attempt"] == 1 and "raise ValueError" in rec["traceback_tail"]
    ran = []
    for attempt in (2, 3):
        with pytest.raises(RunFailedBefore) as err:
            with guarded_attempt(tmp_path, environ=_env(attempt)):
                ran.append(attempt)
        msg = str(err.value)
        assert "ValueError: bad lr" in msg and "results/x/logs/train_grpo/grpo8_seed0.log" in msg and "not retried" in msg
    assert ran == []  # the body never ran on a retry
    # a new invocation of the workflow (attempt 1) is the user asking again: it trains
    with guarded_attempt(tmp_path, environ=_env(1), log=lambda s: None):
        ran.append(1)
    assert ran == [1] and not (tmp_path / FAILED_FILE).exists()
    assert json.loads((tmp_path / FAILED_PREVIOUS_FILE).read_text())["error"] == "ValueError: bad lr"


@pytest.mark.parametrize("ending", ["time limit", "interrupt", "success"])
def test_the_planned_stop_an_interrupt_and_success_leave_no_marker(tmp_path, ending):
    def body():
        if ending == "time limit":
            raise StoppedForTimeLimit(4, "ckpt", "SIGUSR1")
        if ending == "interrupt":
            raise KeyboardInterrupt

    expected = {"time limit": SystemExit, "interrupt": KeyboardInterrupt}.get(ending)
    if expected:
        with pytest.raises(expected) as err:
            with guarded_attempt(tmp_path, environ=_env(1)):
                body()
        if ending == "time limit":
            assert err.value.code == TIME_LIMIT_EXIT_CODE
    else:
        with guarded_attempt(tmp_path, environ=_env(1)):
            body()
    assert not (tmp_path / FAILED_FILE).exists()
    # and the retry that resumes is allowed
    with guarded_attempt(tmp_path, environ=_env(2)):
        pass
    # each attempt's seconds and ending, for the compute table
    rows = [json.loads(line) for line in (tmp_path / ATTEMPTS_LOG).read_text().splitlines()]
    first = {"time limit": "stopped for the time limit", "interrupt": "interrupted", "success": "finished"}[ending]
    assert [(r["attempt"], r["ended"]) for r in rows] == [(1, first), (2, "finished")]
    assert attempt_seconds(tmp_path) == (2, pytest.approx(sum(r["seconds"] for r in rows)))


def test_another_exit_code_is_a_failure(tmp_path):
    with pytest.raises(SystemExit):
        with guarded_attempt(tmp_path, environ=_env(1)):
            raise SystemExit(3)
    assert json.loads((tmp_path / FAILED_FILE).read_text())["error"] == "SystemExit: 3"


def test_only_the_main_process_guards(tmp_path):
    (tmp_path / FAILED_FILE).write_text(json.dumps({"error": "x"}))
    with guarded_attempt(tmp_path, environ=_env(2), main=False):
        pass  # rank > 0: the main rank refuses for the job
    with pytest.raises(ValueError):
        with guarded_attempt(tmp_path / "other", environ=_env(1), main=False):
            raise ValueError
    assert not (tmp_path / "other" / FAILED_FILE).exists()


def test_a_live_predecessor_process_blocks_a_second_attempt(tmp_path):
    # a process that runs a nudgerl command (its argv names it), as a local job's trainer does
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "nudgerl"])
    try:
        # Popen may return before the child's exec shows in /proc (an empty cmdline until then)
        for _ in range(200):
            if b"nudgerl" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                break
            time.sleep(0.05)
        with guarded_attempt(tmp_path, environ={}):
            pass
        record = json.loads((tmp_path / ATTEMPT_FILE).read_text())
        assert record["pid"] == os.getpid() and record["slurm_job_id"] is None
        (tmp_path / ATTEMPT_FILE).write_text(json.dumps({**record, "pid": proc.pid}))
        with pytest.raises(PredecessorAlive, match=f"process {proc.pid} on .* is still running"):
            with guarded_attempt(tmp_path, environ={}):
                pass
    finally:
        proc.kill()
        proc.wait()
    with guarded_attempt(tmp_path, environ={}):  # gone: this attempt goes on and records itself
        pass
    assert json.loads((tmp_path / ATTEMPT_FILE).read_text())["pid"] == os.getpid()


def test_the_predecessor_check_reads_squeue(tmp_path):
    """A Slurm predecessor is alive by squeue's state, and the job itself (a requeue keeps its id)
    is not its own predecessor. squeue here is a script printing a fixed state."""
    fake = tmp_path / "squeue"
    here = {"slurm_job_id": "12", "host": "n1", "pid": 1}
    for state, alive in (("RUNNING", True), ("PENDING", True), ("COMPLETING", True), ("CANCELLED", False),
                         ("COMPLETED", False), ("FAILED", False), ("TIMEOUT", False), ("", False)):
        fake.write_text(f"#!/bin/sh\necho '{state}'\n")
        fake.chmod(0o755)
        why = live_predecessor({"slurm_job_id": "11"}, here, squeue=str(fake))
        assert (why == f"Slurm job 11 is {state}") if alive else why is None, (state, why)
    fake.write_text("#!/bin/sh\necho 'RUNNING'\n")
    assert live_predecessor({"slurm_job_id": "12"}, here, squeue=str(fake)) is None
    assert live_predecessor({"slurm_job_id": "11"}, here, squeue=str(tmp_path / "missing")) is None
    assert live_predecessor(None, here) is None


def test_the_training_launcher_passes_the_attempt_on():
    plan = PlanResources({})
    assert plan.launcher(None, SimpleNamespace(attempt=3)) == f"{ATTEMPT_VAR}=3 nudgerl"
    assert plan.launcher(None, SimpleNamespace()) == "nudgerl"
    assert PlanResources.attempt_number(None, 2) == 2


@pytest.mark.slow
def test_a_training_command_that_fails_is_not_retried(tmp_path):
    """The real command: it fails on a missing training file (exit 2) and records it; its retry
    (attempt 2, as the workflow's launcher says) refuses before reading anything."""
    run = tmp_path / "run"
    args = [sys.executable, "-m", "nudgerl.cli", "train-grpo", "--model", str(tmp_path / "model"), "--train",
            str(tmp_path / "train.jsonl"), "--params", "{}", "--num-generations", "8", "--out-dir", str(run)]
    env = {k: v for k, v in os.environ.items() if k not in ("NUDGERL_REQUIRE_CUDA", "NUDGERL_JOB_SERVER")}
    first = subprocess.run(args, capture_output=True, text=True, timeout=300, env={**env, **_env(1)})
    assert first.returncode == 2 and "train.jsonl" in first.stderr, first.stderr[-2000:]
    assert "train.jsonl" in json.loads((run / FAILED_FILE).read_text())["error"]
    retry = subprocess.run(args, capture_output=True, text=True, timeout=300, env={**env, **_env(2)})
    assert retry.returncode == 2
    assert retry.stderr.startswith("nudgerl train-grpo: error: ") and "not retried" in retry.stderr
    assert "train.jsonl" in retry.stderr and "grpo8_seed0.log" in retry.stderr
    assert (run / FAILED_FILE).exists() and not (run / FAILED_PREVIOUS_FILE).exists()
