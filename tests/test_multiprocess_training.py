"""Training under several processes, run as the Slurm rules run it (PlanResources.launcher):
``accelerate launch --config_file <cfg> --num_processes 2 -m nudgerl.cli train-...``, here on
CPUs with gloo (workflow/accelerate/multi_cpu.yaml). GRPO, POPE and NudgeRL finish with one
metrics row per generation step, files written by the main process only, the same weights
on both ranks; NudgeRL's ranks agree on the nudges and its advantages use whole groups; a
killed 2-process run resumes; a stop signal checkpoints and the rerun resumes; preflight
checks batch shapes for the job's process count.

tests/multiprocess_probe/sitecustomize.py (on PYTHONPATH) records, per rank, the weights'
hash, the files it changed (Python-level writes) and the nudges, without test code in the package.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from nudgerl.organism import task
from conftest import organism_training_inputs
from nudgerl.training.run_state import (TIME_LIMIT_EXIT_CODE, check_continuous, checkpoint_complete,
                                        read_metric_rows)

REPO = Path(__file__).resolve().parents[1]
ACCELERATE_CONFIG = REPO / "workflow" / "accelerate" / "multi_cpu.yaml"
PROBE = Path(__file__).resolve().parent / "multiprocess_probe"
# Organism batching: each step's 2 prompts x N rollouts split over the 2 processes.
TRAIN = {"prompts_per_step": 2, "max_steps": 4, "max_completion_length": 32, "checkpoint_every": 2,
         "learning_rate": 0.01}
# Paper-scale batching: micro-batches of 2 per process, 2 optimizer steps per generation
# (2 prompts x N=4 = 8 rollouts = 2 per micro-batch x 2 processes x 2 steps): rows at steps 1, 3.
PAPER_BATCHING = {**TRAIN, "per_device_train_batch_size": 2, "optimizer_steps_per_generation": 2}
# N = M x K = 6 and 3 prompts: 18 rollouts, 9 per process, so the second group straddles ranks.
NUDGE = {"M": 2, "K": 3, "p_drop": 0.5, "hint_sampler": "random"}
NUDGE_TRAIN = {**TRAIN, "prompts_per_step": 3, "max_steps": 6}
COMPARED = ("step", "reward_mean", "loss", "completion_length_mean", "cumulative_rollout_tokens",
            "nudge/frac_hinted", "nudge/reward_hinted", "nudge/distill_loss")
# Real multi-process training runs (seconds to a minute each); the preflight tests at the end are fast.
slow = pytest.mark.slow


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The smoke config's base model, a training split, pools of three hints and oracle
    solutions (the rare strategy's traces) per problem."""
    d = organism_training_inputs(tmp_path_factory.mktemp("multiprocess"))
    problems = [json.loads(line) for line in (d / "train.jsonl").read_text().splitlines()]
    (d / "oracles.jsonl").write_text("".join(
        json.dumps({"id": r["id"], "solution": task.trace(r["terms"], task.RARE_CORRECT_STRATEGY)}) + "\n"
        for r in problems))
    return d


def _args(d, kind, run, params):
    common = ["--model", str(d / "base"), "--train", str(d / "train.jsonl"), "--seed", "0",
              "--params", json.dumps(params), "--out-dir", str(d / run)]
    if kind == "grpo":
        return ["train-grpo", *common, "--num-generations", "4"]
    if kind == "pope":
        return ["train-pope", *common, "--num-generations", "4", "--oracles", str(d / "oracles.jsonl"),
                "--pope", json.dumps({"guided_fraction": 0.5})]
    return ["train-nudgerl", *common, "--pools", str(d / "pools.jsonl"), "--nudge", json.dumps(NUDGE)]


def _two_processes(args):
    """The Slurm rules' command line for a job given 2 GPUs (PlanResources.launcher), with the CPU
    accelerate config (config `accelerate.config_file`). Its environment assignments are left out:
    NUDGERL_REQUIRE_CUDA would stop the job here (no GPU), the signal settings are the tests' own."""
    import shlex
    from types import SimpleNamespace

    from nudgerl.plan.resources import launcher_signal_env
    from nudgerl.plan.workflow_plan import WorkflowPlan

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["accelerate"] = {"config_file": str(ACCELERATE_CONFIG)}
    here = os.getcwd()
    os.chdir(REPO)  # the plan reads the workflow root's dvc.yaml
    try:
        words = shlex.split(WorkflowPlan(config).resources.launcher(None, SimpleNamespace(gpu=2)))
    finally:
        os.chdir(here)
    env = [w for w in words if "=" in w.split()[0] and not w.startswith("-")][: words.index("accelerate")]
    assert {w.split("=", 1)[0] for w in env} == {"NUDGERL_REQUIRE_CUDA", *launcher_signal_env()}, words
    return [*words[len(env):], *args]


def _env(d, run, single=False):
    probe = d / f"{run}.probe"
    probe.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PROBE), os.environ.get("PYTHONPATH", "")]),
               NUDGERL_PROBE_DIR=str(probe), NUDGERL_PROBE_WATCH=str(d / run), OMP_NUM_THREADS="1",
               HF_HUB_OFFLINE="1")
    if single:
        env["NUDGERL_PROBE_SINGLE"] = "1"
    return env


def _run(cmd, env):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _probes(d, run):
    return {json.loads(p.read_text())["rank"]: json.loads(p.read_text())
            for p in sorted((d / f"{run}.probe").glob("rank*.json"))}


def _metrics(path):
    return [{k: r.get(k) for k in COMPARED} for r in read_metric_rows(Path(path))]


def _check_finished_run(d, run, proc, max_steps, every):
    """Exit 0, one metrics row per generation step, one final model renamed into place by the
    main process, nothing written by rank 1 but its own RNG state, equal weights on both ranks."""
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = d / run
    steps = [r["step"] for r in read_metric_rows(out / "metrics.jsonl")]
    assert steps == list(range(1, max_steps + 1, every))
    check_continuous(out / "metrics.jsonl", max_steps, every)
    assert (out / "model" / "model.safetensors").exists() and not (out / "model.tmp").exists()
    assert json.loads((out / "train_report.json").read_text())["processes"] == 2
    assert (out / "model" / "provenance.json").exists()

    probes = _probes(d, run)
    assert sorted(probes) == [0, 1]
    assert probes[0]["global_step"] == probes[1]["global_step"] == max_steps
    assert probes[0]["weights"] == probes[1]["weights"]  # DDP kept the replicas equal
    # The probe sees Python-level writes (metrics rows, JSON files, renames, removals; not the
    # tensors that torch.save and safetensors write from C++): rank 0 made them all, rank 1 none.
    assert probes[1]["fs"] == [], probes[1]["fs"]
    written = [Path(e[1]).relative_to(out.resolve()).as_posix() for e in probes[0]["fs"] if e[0] == "write"]
    assert written.count("checkpoints/metrics.jsonl") == len(read_metric_rows(out / "metrics.jsonl"))
    assert "checkpoints/checkpoint-2/trainer_state.json" in written
    model_renames = [e for e in probes[0]["fs"] if e[0] == "rename" and e[2] == str((out / "model").resolve())]
    assert len(model_renames) == 1  # the final model saved once
    return probes


@slow
def test_grpo_two_processes_paper_batching(inputs):
    d = inputs
    proc = _run(_two_processes(_args(d, "grpo", "grpo", PAPER_BATCHING)), _env(d, "grpo"))
    _check_finished_run(d, "grpo", proc, PAPER_BATCHING["max_steps"], every=2)
    rows = read_metric_rows(d / "grpo" / "metrics.jsonl")
    assert all(r["rollouts"] == 8 for r in rows)  # the generation batch is shared, not doubled


@slow
def test_pope_two_processes(inputs):
    d = inputs
    proc = _run(_two_processes(_args(d, "pope", "pope", TRAIN)), _env(d, "pope"))
    _check_finished_run(d, "pope", proc, TRAIN["max_steps"], every=1)
    assert json.loads((d / "pope" / "train_report.json").read_text())["guided_problems"] > 0


@pytest.fixture(scope="module")
def nudgerl_unbroken(inputs):
    d = inputs
    proc = _run(_two_processes(_args(d, "nudgerl", "nudgerl", NUDGE_TRAIN)), _env(d, "nudgerl"))
    return proc


@slow
def test_nudgerl_two_processes_agree_on_nudges(inputs, nudgerl_unbroken):
    from nudgerl.algorithms import inter_intra_advantages

    d = inputs
    probes = _check_finished_run(d, "nudgerl", nudgerl_unbroken, NUDGE_TRAIN["max_steps"], every=1)
    N = NUDGE["M"] * NUDGE["K"]
    rows = {r["step"]: r for r in read_metric_rows(d / "nudgerl" / "metrics.jsonl")}
    gens0, gens1 = probes[0]["nudges"], probes[1]["nudges"]
    assert len(gens0) == len(gens1) == NUDGE_TRAIN["max_steps"]
    hinted_seen = set()
    for g0, g1 in zip(gens0, gens1):
        assert g0["step"] == g1["step"]
        # One source of randomness: both ranks drew the same nudges for the whole batch ...
        assert g0["contexts"] == g1["contexts"] and len(g0["contexts"]) == NUDGE_TRAIN["prompts_per_step"] * N
        # ... and each took its own consecutive slice of it (a group straddles the two).
        assert g0["local"] + g1["local"] == g0["contexts"]
        # Advantages over whole groups: the ranks' slices together are the inter-intra
        # advantage of each gathered group.
        assert g0["rewards"] == g1["rewards"]
        rewards = np.array(g0["rewards"])
        expected = np.concatenate([
            inter_intra_advantages(rewards[s:s + N], g0["contexts"][s:s + N], 1.1, True)
            for s in range(0, len(rewards), N)])
        np.testing.assert_allclose(g0["advantages"] + g1["advantages"], expected, rtol=1e-5, atol=1e-6)
        hinted = [c is not None for c in g0["contexts"]]
        assert rows[g0["step"] + 1]["nudge/frac_hinted"] == pytest.approx(np.mean(hinted))
        hinted_seen.add(tuple(hinted))
    assert len(hinted_seen) > 1  # p_drop drew different nudges on different steps


def _kill_when(cmd, env, ready, log):
    """Start ``cmd`` in its own process group; when ``ready()``, SIGKILL the launcher's group and
    each rank's, as Slurm kills every process of a job at once. (torchrun starts each rank in a
    session of its own: a kill of the launcher's group alone would leave the ranks training.)"""
    import psutil

    proc = subprocess.Popen(cmd, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while not ready():
        assert proc.poll() is None, f"finished or died before the kill point: {Path(log).read_text()[-3000:]}"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    groups = {proc.pid, *(os.getpgid(c.pid) for c in psutil.Process(proc.pid).children(recursive=True))}
    for group in groups:
        os.killpg(group, signal.SIGKILL)
    proc.wait()
    psutil.wait_procs([c for c in psutil.process_iter() if c.pid != os.getpid() and _in_groups(c, groups)], timeout=30)


def _in_groups(process, groups):
    try:
        return os.getpgid(process.pid) in groups
    except (ProcessLookupError, PermissionError):
        return False


@slow
def test_killed_two_process_run_resumes(inputs, nudgerl_unbroken):
    d = inputs
    assert nudgerl_unbroken.returncode == 0, nudgerl_unbroken.stderr[-3000:]
    cmd = _two_processes(_args(d, "nudgerl", "killed", NUDGE_TRAIN))
    first = d / "killed" / "checkpoints" / "checkpoint-2"
    _kill_when(cmd, _env(d, "killed"), lambda: checkpoint_complete(first), d / "killed.log")
    assert not (d / "killed" / "model").exists() and not (d / "killed" / "metrics.jsonl").exists()

    proc = _run(cmd, _env(d, "killed"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = proc.stdout + proc.stderr
    assert log.count("resuming from checkpoint") == 1  # said by the main process only
    report = json.loads((d / "killed" / "train_report.json").read_text())
    assert report["resumed_from_step"] >= 2 and report["global_step"] == NUDGE_TRAIN["max_steps"]
    check_continuous(d / "killed" / "metrics.jsonl", NUDGE_TRAIN["max_steps"])
    # Every rank's RNG state, the data order and the optimizer came back, and the nudges are a
    # function of (seed, step, group): the resumed run is the unbroken one.
    assert _metrics(d / "killed" / "metrics.jsonl") == _metrics(d / "nudgerl" / "metrics.jsonl")
    probes = _probes(d, "killed")
    assert probes[0]["weights"] == probes[1]["weights"] == _probes(d, "nudgerl")[0]["weights"]


def _stop_signal_run(d, run, cmd, env, send):
    """Start ``cmd``; once the first metrics row is written, ``send(proc)`` a stop signal;
    the run must end with TIME_LIMIT_EXIT_CODE after a complete checkpoint at the step it
    names, and no traceback from the trainer."""
    metrics = d / run / "checkpoints" / "metrics.jsonl"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not (metrics.exists() and read_metric_rows(metrics)):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    send(proc)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


@slow
def test_stop_signal_checkpoints_and_rerun_resumes(inputs):
    """Slurm's warning before the time limit (SIGUSR1) to a one-process job."""
    d = inputs
    params = {**TRAIN, "max_steps": 10, "checkpoint_every": 5}
    unbroken = _run(["nudgerl", *_args(d, "grpo", "grpo_unbroken", params)], _env(d, "grpo_unbroken", True))
    assert unbroken.returncode == 0, unbroken.stderr[-3000:]

    cmd = ["nudgerl", *_args(d, "grpo", "stopped", params)]
    rc, out, err = _stop_signal_run(d, "stopped", cmd, _env(d, "stopped", True),
                                    lambda p: p.send_signal(signal.SIGUSR1))
    assert rc == TIME_LIMIT_EXIT_CODE, err[-3000:]
    assert "Traceback" not in err
    line = next(l for l in out.splitlines() if "for the time limit" in l)
    step = int(line.split("stopped at step ")[1].split()[0])
    assert "SIGUSR1" in line and "rerun resumes" in line
    assert 1 <= step < params["max_steps"]
    assert checkpoint_complete(d / "stopped" / "checkpoints" / f"checkpoint-{step}")
    assert not (d / "stopped" / "model").exists()

    proc = _run(cmd, _env(d, "stopped", True))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"at global step {step}" in proc.stdout
    check_continuous(d / "stopped" / "metrics.jsonl", params["max_steps"])
    assert _metrics(d / "stopped" / "metrics.jsonl") == _metrics(d / "grpo_unbroken" / "metrics.jsonl")


def _rank_process(proc, rank):
    import psutil

    def is_rank(c):
        try:
            return c.environ().get("RANK") == str(rank) and "nudgerl.cli" in " ".join(c.cmdline())
        except psutil.Error:  # a short-lived helper process that is gone already
            return False

    ranks = [c for c in psutil.Process(proc.pid).children(recursive=True) if is_rank(c)]
    assert len(ranks) == 1
    return ranks[0]


def _check_stopped_together(d, run, out, err, *, learnt_from_other_rank):
    lines = [l for l in (out + err).splitlines() if "for the time limit" in l and "stopped at step" in l]
    assert len(lines) == 1, out[-2000:] + err[-3000:]  # the main process says it, for both
    step = int(lines[0].split("stopped at step ")[1].split()[0])
    assert ("another rank" in lines[0]) == learnt_from_other_rank
    ckpt = d / run / "checkpoints" / f"checkpoint-{step}"
    assert checkpoint_complete(ckpt) and (ckpt / "rng_state_0.pth").exists() and (ckpt / "rng_state_1.pth").exists()
    probes = _probes(d, run)
    assert probes[0]["global_step"] == probes[1]["global_step"] == step < 20
    assert probes[0]["weights"] == probes[1]["weights"]
    assert not (d / run / "model").exists()


@slow
def test_stop_signal_to_one_rank_stops_both_at_the_same_step(inputs):
    """The signal reaches rank 1 only: rank 0 learns it through the per-step all-reduce, and
    both stop after the same step, which is saved whole."""
    d = inputs
    params = {**TRAIN, "max_steps": 40, "checkpoint_every": 20}  # the stop comes within a step or two
    cmd = _two_processes(_args(d, "grpo", "stopped2", params))
    rc, out, err = _stop_signal_run(d, "stopped2", cmd, _env(d, "stopped2"),
                                    lambda proc: _rank_process(proc, 1).send_signal(signal.SIGUSR1))
    assert rc == 1, err[-3000:]  # accelerate launch reports its ranks' failure
    _check_stopped_together(d, "stopped2", out, err, learnt_from_other_rank=True)
    # torchrun's report: both ranks exited with the time-limit code, none was killed
    assert err.count(f"exitcode  : {TIME_LIMIT_EXIT_CODE}") == 2, err[-3000:]


@slow
def test_stop_signal_to_the_launcher_reaches_the_ranks(inputs):
    """`timeout` (the Slurm side's time budget) signals the launcher's process group, which
    does not hold the ranks (torchrun starts each in a session of its own). torchrun's agent
    passes SIGUSR1 on when told to (PET_SIGNALS_TO_HANDLE: accelerate hands torchrun's
    arguments over with their PET_ environment defaults; TORCHELASTIC_SIGNALS_TO_HANDLE is
    overwritten by torchrun) and waits TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds for them before
    SIGKILL (30 by default, too short for a paper-scale step)."""
    d = inputs
    params = {**TRAIN, "max_steps": 40, "checkpoint_every": 20}  # the stop comes within a step or two
    cmd = _two_processes(_args(d, "grpo", "stopped_launcher", params))
    from nudgerl.plan.resources import launcher_signal_env

    # what the rules' launcher sets for a multi-process training job (its kill delay shortened)
    env = dict(_env(d, "stopped_launcher"), **launcher_signal_env(kill_after_s=300))
    rc, out, err = _stop_signal_run(d, "stopped_launcher", cmd, env, lambda proc: os.killpg(proc.pid, signal.SIGUSR1))
    assert rc != 0 and rc != -signal.SIGUSR1, err[-3000:]  # the launcher lived to report its ranks
    # both ranks exited by themselves (the probe writes its file at exit; SIGKILL would skip it)
    _check_stopped_together(d, "stopped_launcher", out, err, learnt_from_other_rank=False)
    assert "forcefully exiting" not in err


# ------------------------------------------------------------------------- preflight


def _paper_config():
    return yaml.safe_load((REPO / "config" / "paper.yaml").read_text())


@pytest.mark.parametrize("gpus", [2, 4])
def test_preflight_checks_batch_shapes_for_the_gpu_count(gpus):
    from nudgerl.config import check_batch_shapes

    cfg = _paper_config()
    assert check_batch_shapes(cfg) == []  # one GPU per job: the paper's shapes fit
    cfg["resources"]["gpu"]["train_grpo"] = gpus  # docs/cluster.md: train_grpo:gpu=4
    problems = check_batch_shapes(cfg)
    # prompts_per_step 1 x N=8 rollouts cannot fill micro-batches of 4 on each of 2 or 4 GPUs
    assert problems and all("train_grpo" in p for p in problems)
    assert any("N=8" in p for p in problems)
    for key in ("grpo.per_device_train_batch_size", "grpo.prompts_per_step", "grpo.optimizer_steps_per_generation",
                f"resources.gpu.train_grpo' ({gpus})"):
        assert key in problems[0]
    # One micro-batch of 1 per GPU and step fits N=8 (8 = 1 x 4 GPUs x 2 steps) and every larger N.
    cfg["grpo"]["per_device_train_batch_size"] = 1
    assert check_batch_shapes(cfg) == []


def test_preflight_two_processes_organism_batching():
    """Organism batching splits each generation over the processes: it must divide evenly."""
    from nudgerl.config import check_batch_shapes
    from nudgerl.training.grpo import batch_kwargs
    from nudgerl.training.grpo_config import GRPORunConfig

    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["grpo"].pop("per_device_train_batch_size")
    cfg["resources"] = {"gpu": {"train_nudgerl": 2}}
    assert check_batch_shapes(cfg) == []
    cfg["grpo"]["prompts_per_step"] = 1
    cfg["nudgerl"].update(M=1, K=3)
    problems = check_batch_shapes(cfg)
    assert len(problems) == 1 and "'resources.gpu.train_nudgerl' (2)" in problems[0] and "N=3" in problems[0]
    # the job checks the same itself (a --set-resources gpu count is not in the config)
    assert batch_kwargs(GRPORunConfig(prompts_per_step=2, num_generations=4), 2)["per_device_train_batch_size"] == 4
    with pytest.raises(ValueError, match="does not split evenly over 2 processes"):
        batch_kwargs(GRPORunConfig(prompts_per_step=1, num_generations=3), 2)
