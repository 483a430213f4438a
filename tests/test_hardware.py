"""nudgerl.hardware: a job that asked for a GPU and finds no CUDA stops within seconds, with a
message that says what to check; without the request nothing changes. This machine has no
CUDA, so these run the real check (real torch, real console script), no stand-ins."""

import os
import subprocess

import pytest

from nudgerl.hardware import CudaUnavailableError, cuda_report, cuda_required, require_cuda


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("NUDGERL_REQUIRE_CUDA", "CUDA_VISIBLE_DEVICES")}
    return {**env, **extra}


def test_a_gpu_job_without_cuda_fails_fast_and_says_what_to_check(tmp_path):
    # Real arguments of a training job: without the check this would start training on the CPU.
    args = ["nudgerl", "train-grpo", "--model", str(tmp_path / "model"), "--train", str(tmp_path / "train.jsonl"),
            "--params", "{}", "--out-dir", str(tmp_path / "run")]
    # Fast means: stopped at the check, before the command's work (its exit code and message,
    # and no run folder, below), not a wall-clock figure a loaded machine breaks (a job's start-up
    # is measured in benchmarks/perf.py). The timeout is a hang guard.
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300,
                          env=_env(NUDGERL_REQUIRE_CUDA="1", CUDA_VISIBLE_DEVICES="0"))
    assert proc.returncode == 3, proc.stderr
    err = proc.stderr
    assert err.startswith("nudgerl train-grpo: error: this job asked for a GPU")
    assert "torch.version.cuda = None" in err and "torch.cuda.device_count() = 0" in err
    assert "CUDA_VISIBLE_DEVICES = '0'" in err and "nvidia-smi" in err and "CUDA torch wheel" in err
    assert not (tmp_path / "run").exists()  # stopped before the command ran


def test_without_the_requirement_the_command_runs_as_before(tmp_path):
    # The same command: it now reaches the training code, which fails on the missing model file
    # (exit 2 from cli.main's error path, not the CUDA check's 3).
    args = ["nudgerl", "train-grpo", "--model", str(tmp_path / "model"), "--train", str(tmp_path / "train.jsonl"),
            "--params", "{}", "--out-dir", str(tmp_path / "run")]
    for env in (_env(), _env(NUDGERL_REQUIRE_CUDA="0"), _env(NUDGERL_REQUIRE_CUDA="")):
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode != 3 and "asked for a GPU" not in proc.stderr, proc.stderr[-2000:]


def test_requirement_flag_values():
    assert cuda_required({"NUDGERL_REQUIRE_CUDA": "1"}) and cuda_required({"NUDGERL_REQUIRE_CUDA": "yes"})
    assert not cuda_required({}) and not cuda_required({"NUDGERL_REQUIRE_CUDA": "0"})
    require_cuda({})  # not required: returns without touching torch
    with pytest.raises(CudaUnavailableError, match="CUDA_VISIBLE_DEVICES = unset"):
        require_cuda({"NUDGERL_REQUIRE_CUDA": "1"})


def test_report_tells_a_cpu_build_from_a_driver_mismatch():
    cpu_build = cuda_report(None, 0, None)
    assert "CPU-only build" in cpu_build and "no GPU was assigned" in cpu_build
    mismatch = cuda_report("12.8", 0, "0,1")
    assert "driver must support CUDA 12.8" in mismatch and "nvidia-smi" in mismatch
    assert "CPU-only" not in mismatch and "no GPU was assigned" not in mismatch
