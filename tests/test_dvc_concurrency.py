"""Helper-LLM stages through the real DAG: two DVC stages (strategy pools, oracle solutions)
in parallel under plain `snakemake --cores 2` (no profile, so no `dvc_lock` resource), a
faulty endpoint, a persistent failure, a rerun that asks only for what is missing, and the
API key nowhere on disk (rule logs, DVC files, stats, caches, Snakemake metadata)."""

import json
import os
import subprocess
import time

import yaml

from nudgerl.organism import task
from openai_server import FakeOpenAI

SECRET = "sk-test-SECRET-never-on-disk-42"
TARGETS = ["results/smoke/pools/pools_organism.jsonl", "results/smoke/oracles/oracles_organism.jsonl"]


def _slow_hints(body):
    time.sleep(0.03)  # long enough that the two stages' requests overlap in time
    tag = abs(hash(body["messages"][-1]["content"])) % 1000
    return "\n".join(f"{i}. Technique {tag}-{i}" for i in range(1, 4))


def _params(url):
    common = {"backend": "openai", "base_url": url, "model": "helper-mini", "api_key_env": "NUDGERL_TEST_KEY",
              "concurrency": 2, "max_retries": 2, "timeout": 1.0}
    return {"pools_organism": {**common, "n": 3}, "oracles_organism": {**common, "max_tokens": 64}}


def _snakemake(workdir, env):
    return subprocess.run(["snakemake", *TARGETS, "--cores", "2", "--configfile", "config/smoke.yaml"],
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
    smoke = yaml.safe_load((workdir / "config" / "smoke.yaml").read_text())
    train = task.training_problems(smoke["organism"].get("seed", 0), smoke["organism"]["train"]["size"],
                                   smoke["organism"]["train"]["hard_fraction"])
    doomed = train[5]
    with FakeOpenAI(content=_slow_hints) as server:
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
        pools_times = [i for i, b in enumerate(server.requests) if "different hints" in b["messages"][-1]["content"]]
        # the stages overlapped: their requests interleave in the server's arrival order
        assert 0 < len(pools_times) < len(server.requests)
        first_oracle = min(set(range(len(server.requests))) - set(pools_times))
        assert first_oracle < max(pools_times), "the two DVC stages did not run at the same time"

        asked = len(server.requests)
        server.fail_ids = []
        second = _snakemake(workdir, env)
        assert second.returncode == 0, second.stderr[-3000:]
        # the rerun asked only for the one missing problem, once per stage
        assert len(server.requests) - asked == 2
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
