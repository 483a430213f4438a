import os
import shutil
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]


WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles", "dvc.yaml", "params.yaml", ".gitignore")


def copy_workflow(dest: Path) -> Path:
    """A scratch copy of the workflow in its own git + DVC repo, as a user's clone is:
    runs never touch this checkout's results/, and DVC's git checks (ignored files) apply."""
    for name in WORKFLOW_FILES:
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["dvc", "init", "-q"], cwd=dest, check=True)
    return dest


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path)
