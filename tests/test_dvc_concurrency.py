"""Helper-LLM stages through the real DAG: two DVC stages (strategy pools, oracle solutions)
in parallel under `snakemake --cores 2 --resources dvc_lock=2` (profiles/default's one-at-a-time
limit lifted: DVC's `--wait-for-lock` must hold without it), a faulty endpoint, a persistent
failure, a rerun that asks only for what is missing, and the API key nowhere on disk (rule
logs, DVC files, stats, caches, Snakemake metadata)."""

import importlib
import json
import os
import subprocess
import threading
import time

import pytest
import yaml

from nudgerl.io import merged_configfiles
from nudgerl.organism.base_config import TASKS
from openai_server import FakeOpenAI

# real DVC stages in parallel
pytestmark = pytest.mark.slow

SECRET = "sk-test-SECRET-never-on-disk-42"
TARGETS = ["results/smoke/pools/pools_organism.jsonl", "results/smoke/oracles/oracles_organism.jsonl"]


# How long a stage's answers wait for the other stage's first request (_meeting_hints); the
# client's timeout is above it, so a wait is never a time-out and a retry.
MEET_SECONDS = 60.0


def _is_pools(body) -> bool:
    return "different hints" in body["messages"][-1]["content"]


def _meeting_hints():
    """Answers that make the two stages' requests interleave whenever the stages run at once,
    however far apart a loaded machine starts them: a stage's answers wait until the other stage
    has asked (at most MEET_SECONDS, once; stages run one after the other never meet, and the
    overlap check fails)."""
    asked = {True: threading.Event(), False: threading.Event()}  # by _is_pools
    gave_up = threading.Event()

    def content(body):
        pools = _is_pools(body)
        asked[pools].set()
        if not gave_up.is_set() and not asked[not pools].wait(MEET_SECONDS):
            gave_up.set()
        time.sleep(0.03)
        tag = abs(hash(body["messages"][-1]["content"])) % 1000
        return "\n".join(f"{i}. Technique {tag}-{i}" for i in range(1, 4))

    return content


def _params(url):
    # The timeout is not what this test is about: far above the server's milliseconds (and the
    # meeting wait), so a slow answer on a loaded machine is not asked again.
    common = {"backend": "openai", "base_url": url, "model": "helper-mini", "api_key_env": "NUDGERL_TEST_KEY",
              "concurrency": 2, "max_retries": 2, "timeout": 2 * MEET_SECONDS}
    return {"pools_organism": {**common, "n": 3}, "oracles_organism": {**common, "max_tokens": 64}}


def _snakemake(workdir, env):
    # dvc_lock=2: both stages at once (profiles/default, loaded here too, allows one)
    return subprocess.run(["snakemake", *TARGETS, "--cores", "2", "--resources", "dvc_lock=2",
                           "--configfile", "config/smoke.yaml"],
                          cwd=workdir, capture_output=True, text=True, timeout=600, env=env)


def _files_containing(root, needle: bytes):
    hits = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                with open(path, "rb") as f:
                    if needle in f.read():
                        hits.append(path)
            except OSError:
                pass
    return hits


def test_parallel_dvc_stages_faults_and_resume_without_leaking_the_key(workdir):
    env = {**os.environ, "NUDGERL_TEST_KEY": SECRET}
    smoke = merged_configfiles(workdir / "config" / "config.yaml", workdir / "config" / "smoke.yaml")
    # the organism task the smoke run's data is made of (config base_model.task)
    task = importlib.import_module(TASKS[smoke["base_model"].get("task", "single_family")])
    train = task.training_problems(smoke["organism"].get("seed", 0), smoke["organism"]["train"]["size"],
                                   smoke["organism"]["train"]["hard_fraction"])
    doomed = train[5]
    with FakeOpenAI(content=_meeting_hints()) as server:
        params = yaml.safe_load((workdir / "params.yaml").read_text())
        (workdir / "params.yaml").write_text(yaml.safe_dump({**params, **_params(server.url)}))
        server.plan = ["429", "500", "malformed", "truncated"]  # early faults, retried
        server.fail_ids = [doomed.text()]  # a persistent 500 for one problem

        first = _snakemake(workdir, env)
        assert first.returncode != 0
        for log in ("strategy_pools", "oracle_solutions"):
            text = (workdir / "results" / "smoke" / "logs" / f"{log}.log").read_text()
            # the failure names the problem; no DVC lock error although both ran at once
            assert "1 problem(s) got no valid" in text and doomed.id in text, text[-2000:]
            assert "Unable to acquire lock" not in text and "is busy" not in text
        pools_times = [i for i, b in enumerate(server.requests) if _is_pools(b)]
        # the stages overlapped: their requests interleave in the server's arrival order
        assert 0 < len(pools_times) < len(server.requests)
        first_oracle = min(set(range(len(server.requests))) - set(pools_times))
        assert first_oracle < max(pools_times), "the two DVC stages did not run at the same time"

        asked = len(server.requests)
        server.fail_ids = []
        second = _snakemake(workdir, env)
        assert second.returncode == 0, second.stderr[-3000:]
        # the rerun asked only for the one missing problem, in each stage (once each, unless an
        # answer had to be asked again: at most 1 + max_retries HTTP requests a stage)
        rerun = server.requests[asked:]
        assert all(doomed.text() in b["messages"][-1]["content"] for b in rerun)
        assert {_is_pools(b) for b in rerun} == {True, False}
        assert len(rerun) <= 2 * (1 + _params("")["pools_organism"]["max_retries"])
    for out in TARGETS:
        rows = [json.loads(line) for line in (workdir / out).read_text().splitlines()]
        assert [r["id"] for r in rows] == [p.id for p in train]
    # both parallel stages recorded in dvc.lock (no lost update): DVC sees nothing to redo
    assert set(yaml.safe_load((workdir / "dvc.lock").read_text())["stages"]) == {"pools_organism@smoke",
                                                                                 "oracles_organism@smoke"}
    # (dvc.yaml also defines the real-data stages, which this organism run never builds)
    status = subprocess.run(["dvc", "status", "pools_organism@smoke", "oracles_organism@smoke"], cwd=workdir,
                            capture_output=True, text=True, env=env)
    assert "up to date" in status.stdout, status.stdout
    assert _files_containing(workdir, SECRET.encode()) == []
    assert SECRET not in first.stdout + first.stderr + second.stdout + second.stderr
