"""Sharing helper-LLM outputs through DVC, as two teammates do it: A runs the pool and oracle
stages against an OpenAI-compatible endpoint (the local test server), commits dvc.lock and
pushes to a DVC remote (a local folder); B clones, pulls and runs snakemake for the same
outputs. B's endpoint sees zero requests and B's files are A's, byte for byte; a B who changes
the helper in params.yaml does call it. The commands A and B type are the sharing section of
docs/operations.md, run here as written (SHARING_A, SHARING_B)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, copy_workflow
from openai_server import FakeOpenAI

pytestmark = pytest.mark.slow

KEY_ENV = "NUDGERL_TEAM_KEY"
TARGETS = ["results/smoke/pools/pools_organism.jsonl", "results/smoke/oracles/oracles_organism.jsonl"]
SHARED = [*TARGETS, *(f"{t}.stats.json" for t in TARGETS)]  # what DVC tracks for the two stages

SHARING_A = [
    'dvc remote add -d team "$DVC_REMOTE"',
    "git add dvc.lock .dvc/config",
    'git commit -m "Helper outputs for run smoke"',
    "dvc push",
]
SHARING_B = [
    'git clone "$REPO" nudgerl && cd nudgerl',
    "dvc pull pools_organism@smoke oracles_organism@smoke",
    "snakemake results/smoke/pools/pools_organism.jsonl results/smoke/oracles/oracles_organism.jsonl "
    "--cores 2 --configfile config/smoke.yaml",
]


def _hints(body):
    tag = sum(map(ord, body["messages"][-1]["content"])) % 1000  # deterministic across processes
    return "\n".join(f"{i}. Technique {tag}-{i}" for i in range(1, 4))


def _helper_params(url: str) -> dict:
    common = {"backend": "openai", "base_url": url, "model": "helper-mini", "api_key_env": KEY_ENV,
              "concurrency": 4, "max_retries": 2, "timeout": 5.0}
    return {"pools_organism": {**common, "n": 3}, "oracles_organism": {**common, "max_tokens": 64}}


def _env(**extra) -> dict:
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PATH=f"{venv_bin}:/usr/bin:/bin", GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.org",
               GIT_COMMITTER_NAME="A", GIT_COMMITTER_EMAIL="a@example.org", **extra)
    return env


def _shell(lines, cwd, env):
    """The docs' lines, typed into one bash session (so `cd` carries over)."""
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _snakemake_without_venv_on_path(cwd, *targets, env):
    """`.venv/bin/snakemake` from a shell whose PATH lacks the venv: the rules' `dvc` and the
    stage commands' `nudgerl` must still be this environment's."""
    env = {**env, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([str(Path(sys.executable).parent / "snakemake"), *targets, "--cores", "2",
                           "--configfile", "config/smoke.yaml"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _audit_dvc(cwd, env) -> str:
    proc = subprocess.run([str(Path(sys.executable).parent / "nudgerl"), "audit", "--dvc-only"], cwd=cwd,
                          env={**env, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


SHARING_DOC = REPO / "docs" / "operations.md"


def test_the_sharing_docs_list_the_commands_this_test_runs():
    page = SHARING_DOC.read_text()
    for line in [*SHARING_A, *SHARING_B]:
        assert line in page, f"{SHARING_DOC.relative_to(REPO)} lacks: {line}"


def test_a_teammate_pulls_the_pools_without_one_helper_call(tmp_path):
    a, remote = tmp_path / "a", tmp_path / "dvc-remote"
    a.mkdir()
    copy_workflow(a)
    env = _env(**{KEY_ENV: "sk-team-test-key", "DVC_REMOTE": str(remote), "REPO": str(a)})

    with FakeOpenAI(content=_hints) as server_a:
        params = yaml.safe_load((a / "params.yaml").read_text())
        (a / "params.yaml").write_text(yaml.safe_dump({**params, **_helper_params(server_a.url)}, sort_keys=False))
        _shell(["git add -A", 'git commit -qm "Project, helper endpoint in params.yaml"'], a, env)
        _snakemake_without_venv_on_path(a, *TARGETS, env=env)
        assert len(server_a.requests) == 2 * 64  # both stages, every smoke training problem
        # the shared files hold no timings: computing them again writes the same bytes, so
        # dvc.lock (what A commits) does not change with every run
        lock = (a / "dvc.lock").read_text()
        _shell(["dvc repro --force --single-item pools_organism@smoke"], a, env)
        assert len(server_a.requests) == 3 * 64 and (a / "dvc.lock").read_text() == lock
        port = server_a.httpd.server_address[1]
    assert "computed here" in _audit_dvc(a, env)
    _shell(SHARING_A, a, env)
    assert yaml.safe_load((a / "dvc.lock").read_text())["stages"].keys() == {"pools_organism@smoke",
                                                                             "oracles_organism@smoke"}

    # B: the same endpoint URL (a new server on A's port), a fresh clone, the documented commands
    with FakeOpenAI(content=_hints, port=port) as server_b:
        _shell(SHARING_B, tmp_path, env)
        assert server_b.requests == []  # not one helper call
        b = tmp_path / "nudgerl"
        for path in SHARED:
            assert (b / path).read_bytes() == (a / path).read_bytes(), path
        # As in B's full run: the training problems are made here, newer than the pulled pools,
        # so Snakemake re-runs both DVC rules (removing their outputs first) and DVC restores
        # them from its cache, by dvc.lock's hashes
        _snakemake_without_venv_on_path(b, "results/smoke/data/train.jsonl", env=env)
        _snakemake_without_venv_on_path(b, *TARGETS, env=env)
        assert server_b.requests == []
        for path in SHARED:
            assert (b / path).read_bytes() == (a / path).read_bytes(), path
        for rule in ("strategy_pools", "oracle_solutions"):
            log = (b / "results" / "smoke" / "logs" / f"{rule}.log").read_text()
            assert "is cached - skipping run" in log and "Running stage" not in log, log
        origins = _audit_dvc(b, env)
        assert "pools_organism@smoke: from the DVC cache" in origins and "oracles_organism@smoke: from the DVC cache" \
            in origins, origins
        assert "dvc status: every DVC stage is up to date" in origins

        # B asks another helper model: the pool stage is recomputed, from B's endpoint
        params = yaml.safe_load((b / "params.yaml").read_text())
        params["pools_organism"]["model"] = "helper-large"
        (b / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        _snakemake_without_venv_on_path(b, TARGETS[0], env=env)
        assert len(server_b.requests) == 64 and {r["model"] for r in server_b.requests} == {"helper-large"}
        stats = json.loads((b / f"{TARGETS[0]}.stats.json").read_text())
        assert stats["http_requests"] == 64 and stats["config"]["model"] == "helper-large"
        origins = _audit_dvc(b, env)
        assert "pools_organism@smoke: computed here" in origins and "oracles_organism@smoke: from the DVC cache" \
            in origins, origins
    for f in ("dvc.lock", "params.yaml"):
        assert "sk-team-test-key" not in (b / f).read_text()
