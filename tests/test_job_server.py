"""The local job server (nudgerl.job_server): a `nudgerl` command run in the server's forked
child prints, exits and computes as in a fresh process; signals reach the child; a killed
client takes its child with it; a job whose import-time environment differs runs in its own
process; the compute table counts the child's CPU and memory."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import organism_training_inputs
from nudgerl import job_client
from nudgerl.training.run_state import TIME_LIMIT_EXIT_CODE, checkpoint_complete, read_metric_rows

REPO = Path(__file__).resolve().parents[1]
NUDGERL = str(Path(sys.executable).parent / "nudgerl")
TRAIN = {"prompts_per_step": 2, "max_steps": 6, "max_completion_length": 32, "checkpoint_every": 2,
         "learning_rate": 0.01}


@pytest.fixture(scope="module")
def server():
    handle = job_client.start()
    assert handle is not None, "the job server did not come up"
    path = os.environ[job_client.ENV]
    yield path
    job_client.stop(handle)
    assert job_client.ENV not in os.environ and not os.path.exists(path)


def _env(served: bool, **extra) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **extra}
    if not served:
        env.pop(job_client.ENV, None)
    return env


def _run(args, served, cwd=REPO, **extra):
    return subprocess.run([NUDGERL, *args], cwd=cwd, env=_env(served, **extra), capture_output=True, text=True,
                          timeout=600)


def _served(proc) -> bool:
    return f"{job_client.USAGE_PREFIX} ran in a forked child" in proc.stderr


@pytest.mark.slow
def test_command_runs_in_a_child_as_in_its_own_process(server, tmp_path):
    ok = _run(["validate-config", "config/config.yaml"], True)  # a path relative to the job's folder
    assert ok.returncode == 0 and _served(ok), ok.stderr
    assert ok.stdout == _run(["validate-config", "config/config.yaml"], False).stdout == "config/config.yaml: valid\n"
    usage = job_client.logged_usage(_write(tmp_path / "ok.log", ok.stderr))
    assert usage["cpu_s"] > 0 and usage["max_rss_mb"] > 100  # the child's, with torch imported

    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO / "config" / "config.yaml").read_text() + "no_such_key: 1\n")
    served, alone = _run(["validate-config", str(bad)], True), _run(["validate-config", str(bad)], False)
    assert served.returncode == alone.returncode == 2 and _served(served)
    assert job_client.USAGE_PREFIX not in alone.stderr  # no server named: not a word about one
    assert "no_such_key" in served.stderr and served.stderr.startswith(alone.stderr.strip().splitlines()[0])


@pytest.mark.slow
def test_import_time_environment_or_gpu_request_runs_in_own_process(server):
    for extra in ({"HF_HUB_OFFLINE": "0" if os.environ.get("HF_HUB_OFFLINE") == "1" else "1"},
                  {"TRANSFORMERS_VERBOSITY": "error"}):
        proc = _run(["validate-config", "config/config.yaml"], True, **extra)
        assert proc.returncode == 0 and not _served(proc), (extra, proc.stderr)
        assert f"{job_client.USAGE_PREFIX} not used (environment differs from the server's in {next(iter(extra))})" \
            in proc.stderr  # the job's log says why
    gpu = _run(["validate-config", "config/config.yaml"], True, NUDGERL_REQUIRE_CUDA="1")
    assert gpu.returncode == 3 and not _served(gpu) and "CUDA" in gpu.stderr  # failed fast, in its own process
    assert _served(_run(["validate-config", "config/config.yaml"], True, OMP_NUM_THREADS="2"))  # set per job


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return organism_training_inputs(tmp_path_factory.mktemp("job_server"))


def _train_args(d, run, params=TRAIN):
    return ["train-grpo", "--model", str(d / "base"), "--train", str(d / "train.jsonl"), "--seed", "0",
            "--num-generations", "4", "--params", json.dumps(params), "--out-dir", str(d / run)]


def _rows(path):
    return [{k: r[k] for k in ("step", "reward_mean", "loss", "cumulative_rollout_tokens")} for r in read_metric_rows(path)]


@pytest.mark.slow
def test_training_in_a_child_equals_training_in_its_own_process(server, inputs):
    d = inputs
    alone, served = _run(_train_args(d, "alone"), False), _run(_train_args(d, "served"), True)
    assert alone.returncode == 0 and not _served(alone), alone.stderr[-3000:]
    assert served.returncode == 0 and _served(served), served.stderr[-3000:]
    assert _rows(d / "served" / "metrics.jsonl") == _rows(d / "alone" / "metrics.jsonl")
    weights = [(d / run / "model" / "model.safetensors").read_bytes() for run in ("alone", "served")]
    assert weights[0] == weights[1]


def _cmdline(p):
    try:
        return p.cmdline()
    except psutil.Error:
        return []


@pytest.mark.slow
def test_signals_reach_the_child_and_a_killed_client_takes_it_along(server, inputs):
    d = inputs
    proc = subprocess.Popen([NUDGERL, *_train_args(d, "stopped", {**TRAIN, "max_steps": 40})], cwd=REPO,
                            env=_env(True), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = d / "stopped" / "checkpoints" / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.exists() and read_metric_rows(metrics)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
        time.sleep(0.02)
    proc.send_signal(signal.SIGUSR1)  # to the client, as `timeout` under Slurm would
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == TIME_LIMIT_EXIT_CODE and job_client.USAGE_PREFIX in err, err[-3000:]
    step = int(next(l for l in out.splitlines() if "for the time limit" in l).split("stopped at step ")[1].split()[0])
    assert checkpoint_complete(d / "stopped" / "checkpoints" / f"checkpoint-{step}")

    server_pid = next(c.pid for c in psutil.Process(os.getpid()).children() if "nudgerl.job_server" in _cmdline(c))
    before = {c.pid for c in psutil.Process(server_pid).children()}
    proc = subprocess.Popen([NUDGERL, *_train_args(d, "killed", {**TRAIN, "max_steps": 40})], cwd=REPO,
                            env=_env(True), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = d / "killed" / "checkpoints" / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.exists() and read_metric_rows(metrics)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    (child,) = [c for c in psutil.Process(server_pid).children() if c.pid not in before]
    proc.kill()
    proc.wait()
    child.wait(timeout=30)  # killed by the server once the client's end closed
    assert not psutil.pid_exists(child.pid) or child.status() == psutil.STATUS_ZOMBIE


def test_compute_table_adds_the_childs_usage(tmp_path):
    from nudgerl.reporting.compute import compute_table

    bench = tmp_path / "benchmarks" / "evaluate"
    bench.mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (bench / "base_seed0.tsv").write_text(header + "12.5\t0:00:12\t30.0\t0\t0\t0\t0\t0\t0\t0.2\n")
    (bench / "base_seed1.tsv").write_text(header + "20.0\t0:00:20\t400.0\t0\t0\t0\t0\t0\t0\t15.0\n")
    logs = tmp_path / "logs" / "evaluate"
    logs.mkdir(parents=True)
    (logs / "base_seed0.log").write_text(f"evaluating\n{job_client.USAGE_PREFIX} ran in a forked child (pid 7): "
                                         "exit 0 cpu_s=11.25 max_rss_mb=512.0\n")
    rows = {r["seed"]: r for r in compute_table(tmp_path)}
    assert (rows[0]["wall_s"], rows[0]["max_rss_mb"]) == (12.5, 512.0) and rows[0]["cpu_s"] == pytest.approx(11.45)
    assert (rows[1]["cpu_s"], rows[1]["max_rss_mb"]) == (15.0, 400.0)  # ran in its own process
