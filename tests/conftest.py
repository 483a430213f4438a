import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workdir(tmp_path):
    """A scratch copy of the workflow (Snakefile, rules, configs): runs never touch results/."""
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name)
        else:
            shutil.copy(src, tmp_path / name)
    return tmp_path
