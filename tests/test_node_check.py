"""scripts/gpu-check.sh (nudgerl.node_check). Its CPU mode runs whole in CI (.ci/run, vLLM CPU
venv, without network); here: on a machine without CUDA, GPU mode stops before any step with
the message every GPU job of the workflow gives."""

import os
import subprocess

from conftest import REPO


def test_gpu_mode_without_cuda_stops_at_once_and_says_what_to_check(tmp_path):
    # "At once": before any step (no step's log, below), not a wall-clock figure a loaded machine
    # breaks; the timeout is a hang guard.
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu-check.sh"), "--mode", "gpu", "--work",
                           str(tmp_path / "check")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": "python"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu-check: FAILED" in proc.stderr and "torch.version.cuda = None" in proc.stderr
    assert "torch.cuda.device_count() = 0" in proc.stderr
    assert not (tmp_path / "check" / "logs" / "make-data.log").exists()  # no step ran
