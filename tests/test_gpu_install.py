"""Installs: the paper-scale `gpu` extra installs from its lock (requirements/gpu-lock.txt) with
the CPU pins (pip's resolver, as a GPU machine sees it: PyPI only, metadata only, `--dry-run`: no
CUDA wheel is downloaded), and resolves for Python 3.12 (uv). The locks themselves and the
rules' conda environment: tests/test_install_lock.py.

The resolver check needs the package index (CI reaches PyPI): about 1.5-2 min, most of it
fetching metadata and building DeepSpeed's sdist metadata.
"""

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path

import pytest

from conftest import LOCKED_EXTRAS, REPO


def _pins(reqs: list[str]) -> dict[str, str]:
    return dict(r.split("==") for r in reqs)


def trl_supported_vllm() -> tuple[str, str]:
    """The vLLM versions TRL supports, as its own import check states them."""
    source = Path(find_spec("trl.import_utils").origin).read_text()
    found = re.search(r'Version\("([\d.]+)"\) <= _vllm_base_version <= Version\("([\d.]+)"\)', source)
    assert found, "trl/import_utils.py no longer states its vLLM range in the form this test reads"
    return found.group(1), found.group(2)


@pytest.mark.slow
@pytest.mark.network  # the package index (PyPI)
def test_gpu_extra_resolves_with_the_cpu_pins(tmp_path):
    from packaging.version import Version

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base, gpu = _pins(project["dependencies"]), _pins(project["optional-dependencies"]["gpu"])
    low, high = trl_supported_vllm()
    assert Version(low) <= Version(gpu["vllm"]) <= Version(high), f"TRL {base['trl']} supports vLLM {low}-{high}"

    # A GPU machine's view: no pip configuration of this machine (its local CPU torch wheel,
    # its constraints file), only the package index.
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_CONSTRAINT")}
    env["PIP_CONFIG_FILE"] = os.devnull
    report = tmp_path / "report.json"
    # With the GPU lock as constraints (scripts/lock.sh; the documented GPU install): pip must
    # install exactly the lock, no package more or less.
    lock = REPO / "requirements" / "gpu-lock.txt"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), "-c", str(lock), f"{REPO}[gpu,{','.join(LOCKED_EXTRAS)}]"],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, "pip cannot resolve .[gpu] with its lock:\n" + proc.stderr[-4000:]
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
    chosen = {norm(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    for name, version in {**base, **gpu}.items():
        assert chosen[norm(name)] == version, (name, chosen.get(norm(name)))
    locked = {norm(k): v for k, v in re.findall(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==(\S+)", lock.read_text(), re.M)}
    assert {k: v for k, v in chosen.items() if k != "nudgerl"} == locked
    # PyPI's torch 2.13.0 is the CUDA build (no +cpu local version), with its CUDA libraries.
    assert chosen["torch"] == "2.13.0" and any(n.startswith("nvidia-") for n in chosen)


@pytest.mark.slow
@pytest.mark.network  # the package index (PyPI)
def test_the_package_and_every_extra_resolve_for_python_3_12(tmp_path):
    """Many GPU images ship Python 3.12. This machine has no 3.12 interpreter (Debian bookworm),
    and pip resolves for another Python version over wheels only (`--python-version` needs
    `--only-binary=:all:`), while connection_pool (Snakemake) and deepspeed ship only sdists;
    uv resolves for a target version and platform from metadata, sdists included."""
    from shutil import which

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "<3.13" in project["requires-python"] and ">=3.11" in project["requires-python"]
    uv = which("uv", path=str(Path(sys.executable).parent)) or which("uv")
    assert uv, "uv is in the test extra (pyproject.toml)"
    out = tmp_path / "py312.txt"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    proc = subprocess.run([uv, "pip", "compile", "--quiet", "--python-version", "3.12", "--python-platform",
                           "x86_64-manylinux_2_28", "--all-extras", str(REPO / "pyproject.toml"), "-o", str(out)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, "uv cannot resolve nudgerl[all extras] for Python 3.12:\n" + proc.stderr[-4000:]
    chosen = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", out.read_text(), re.M))
    chosen = {k.lower(): v for k, v in chosen.items()}
    pins = {k: v for extra in project["optional-dependencies"].values() for k, v in _pins(extra).items()}
    for name, version in {**_pins(project["dependencies"]), **pins}.items():
        assert chosen[name.lower()] == version, (name, chosen.get(name.lower()))
    assert any(n.startswith("nvidia-") for n in chosen)  # the CUDA torch of a Linux GPU node
