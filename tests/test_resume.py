"""Kill and resume: a SIGKILLed training or evaluation job, rerun, continues from where it
stopped (checkpoint, optimizer, RNG states; finished benchmarks), and its
results equal those of a run that was never interrupted."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from nudgerl.organism import task
from nudgerl.training.run_state import checkpoint_complete, last_checkpoint, read_metric_rows, truncate_metrics

from conftest import organism_training_inputs

REPO = Path(__file__).resolve().parents[1]
TRAIN = {"prompts_per_step": 2, "max_steps": 6, "max_completion_length": 32, "checkpoint_every": 2,
         "learning_rate": 0.01}
# Random hint sampling and p_drop draw nudges every step (from the run seed, step and group).
NUDGE = {"M": 2, "K": 2, "p_drop": 0.5, "hint_sampler": "random"}
COMPARED = ("step", "reward_mean", "loss", "completion_length_mean", "cumulative_rollout_tokens",
            "nudge/frac_hinted", "nudge/reward_hinted", "nudge/distill_loss")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The smoke config's base model (it solves some problems, so gradients are not zero),
    a training split and pools of three hints per problem."""
    return organism_training_inputs(tmp_path_factory.mktemp("resume"))


def _train_cmd(d, run):
    return ["nudgerl", "train-nudgerl", "--model", str(d / "base"), "--train", str(d / "train.jsonl"),
            "--pools", str(d / "pools.jsonl"), "--seed", "0", "--params", json.dumps(TRAIN),
            "--nudge", json.dumps(NUDGE), "--out-dir", str(d / run)]


def _kill_when(cmd, ready, log):
    """Start ``cmd`` in its own process group; SIGKILL the group as soon as ``ready()``."""
    proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    # A hang guard, not a speed check: the kill point (the model's load and two training steps,
    # or one benchmark's sampling) came after about a minute on a 2-core machine at load 10.
    deadline = time.monotonic() + 600
    while not ready():
        assert proc.poll() is None, f"finished or died before the kill point: {Path(log).read_text()[-2000:]}"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _metrics(path):
    return [{k: r.get(k) for k in COMPARED} for r in read_metric_rows(Path(path))]


def _weights(model_dir):
    from safetensors.torch import load_file

    return load_file(str(Path(model_dir) / "model.safetensors"))


@pytest.mark.slow
def test_killed_training_resumes_as_an_unbroken_run(inputs):
    d = inputs
    subprocess.run(_train_cmd(d, "unbroken"), check=True, capture_output=True)

    checkpoints = d / "killed" / "checkpoints"
    _kill_when(_train_cmd(d, "killed"), lambda: checkpoint_complete(checkpoints / "checkpoint-2"), d / "killed.log")
    assert not (d / "killed" / "model").exists() and not (d / "killed" / "metrics.jsonl").exists()
    # How far the run got past its first checkpoint before the kill landed depends on the
    # machine's load (2 on an idle one): it resumes from its last complete checkpoint.
    kept = max(int(p.name.rsplit("-", 1)[1]) for p in checkpoints.glob("checkpoint-*") if checkpoint_complete(p))
    assert 2 <= kept < TRAIN["max_steps"]

    proc = subprocess.run(_train_cmd(d, "killed"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from checkpoint" in proc.stdout and f"at global step {kept}" in proc.stdout
    report = json.loads((d / "killed" / "train_report.json").read_text())
    assert report["resumed_from_step"] == kept and report["global_step"] == 6

    resumed = _metrics(d / "killed" / "metrics.jsonl")
    assert [r["step"] for r in resumed] == [1, 2, 3, 4, 5, 6]  # no step twice, none missing
    # Data order, sampling RNG and optimizer state came back, and the nudges are a function of
    # (seed, step, group): the resumed
    # run's metrics and final weights are those of the unbroken run.
    assert resumed == _metrics(d / "unbroken" / "metrics.jsonl")
    assert any(r["loss"] for r in resumed)  # the model did learn, so the optimizer mattered
    a, b = _weights(d / "unbroken" / "model"), _weights(d / "killed" / "model")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (d / "killed" / "model" / "provenance.json").exists()


def test_half_written_checkpoint_and_torn_metrics_line(tmp_path):
    ckpts = tmp_path / "checkpoints"
    for step in (2, 4):
        (ckpts / f"checkpoint-{step}").mkdir(parents=True)
        (ckpts / f"checkpoint-{step}" / "model.safetensors").write_text("x")
    (ckpts / "checkpoint-2" / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    (ckpts / "checkpoint-4" / "trainer_state.json").write_text('{"global_st')  # killed mid-save
    assert last_checkpoint(ckpts, log=lambda s: None) == str(ckpts / "checkpoint-2")
    assert not (ckpts / "checkpoint-4").exists()

    metrics = ckpts / "metrics.jsonl"
    rows = [{"step": s, "cumulative_rollout_tokens": 10.0 * s} for s in (1, 2, 3)]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "cumul')
    assert truncate_metrics(metrics, 2) == 20.0
    assert [r["step"] for r in read_metric_rows(metrics)] == [1, 2]


EVAL = {"samples_per_problem": 16, "ks": [1, 4], "max_new_tokens": 64, "batch_size": 64}


def _eval_cmd(d, benches, out):
    return ["nudgerl", "evaluate", "--model", str(d / "base"), "--benchmarks", *map(str, benches), "--seed", "0",
            "--params", json.dumps(EVAL), "--out-dir", str(d / out)]


def _outputs(out):
    """The evaluation's records (its attempts log differs by its seconds)."""
    from nudgerl.io import ATTEMPTS_LOG

    return {p.name: p.read_text() for p in sorted(Path(out).glob("*.jsonl")) if p.name != ATTEMPTS_LOG}


@pytest.mark.slow
def test_killed_evaluation_does_not_sample_finished_benchmarks_again(inputs):
    d = inputs
    sets = task.evaluation_sets(0, {"b1": (12, 0.5), "b2": (12, 0.5), "b3": (12, 0.5)})
    benches = []
    for name, problems in sets.items():
        benches.append(d / f"{name}.jsonl")
        benches[-1].write_text("".join(json.dumps(p.to_record()) + "\n" for p in problems))
    subprocess.run(_eval_cmd(d, benches, "eval_unbroken"), check=True, capture_output=True)

    # eval.chunk_problems unset: one resume chunk a benchmark
    resume = d / "eval_killed" / ".resume"
    _kill_when(_eval_cmd(d, benches, "eval_killed"), (resume / "b1.chunk0000.json").exists, d / "eval_killed.log")
    assert not (d / "eval_killed" / "summary.json").exists()
    # Which benchmarks were finished when the kill landed depends on the machine's load (b1
    # alone on an idle one); at least one was not.
    finished = [name for name in sets if (resume / f"{name}.chunk0000.json").exists()]
    assert finished[0] == "b1" and len(finished) < len(sets)

    proc = subprocess.run(_eval_cmd(d, benches, "eval_killed"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "12 problems, not sampled again" in proc.stdout
    for name in sets:  # finished when killed: not sampled again; unfinished: sampled in full
        assert (f"{name}: resumed from" in proc.stdout) == (name in finished), (name, finished, proc.stdout)
    assert _outputs(d / "eval_killed") == _outputs(d / "eval_unbroken")
    assert not (d / "eval_killed" / ".resume").exists()  # cleared once every output is written


@pytest.mark.slow
def test_stale_partial_results_are_not_reused(inputs, tmp_path):
    """A partial result from other sampling parameters (or another model) is ignored."""
    from nudgerl.evaluation.benchmarks import RESUME_DIR, evaluate_model
    from nudgerl.evaluation.sampling import SamplingParams

    problems = [p.to_record() for p in task.evaluation_sets(0, {"b": (4, 0.5)})["b"]]
    logs = []
    evaluate_model(str(inputs / "base"), {"b": problems}, SamplingParams(n=2, max_new_tokens=16), [1], tmp_path,
                   progress=False, log=logs.append)
    assert (tmp_path / RESUME_DIR / "b.chunk0000.json").exists() and not logs
    evaluate_model(str(inputs / "base"), {"b": problems}, SamplingParams(n=4, max_new_tokens=16), [1], tmp_path,
                   progress=False, log=logs.append)
    assert not logs  # n changed: sampled again
    assert len((tmp_path / "b.samples.jsonl").read_text().splitlines()) == 4 * 4
    evaluate_model(str(inputs / "base"), {"b": problems}, SamplingParams(n=4, max_new_tokens=16), [1], tmp_path,
                   progress=False, log=logs.append)
    assert len(logs) == 1 and "resumed" in logs[0]


def test_checkpoints_continue_only_the_run_with_the_same_inputs(tmp_path):
    """A run's checkpoints record what it trained on; another run's inputs in the same folder (a
    rebuilt base model, a changed config) remove them, the same inputs keep them."""
    import shutil

    from nudgerl.training.run_state import RUN_INPUTS, keep_checkpoints_of, run_inputs

    model = tmp_path / "base"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    ckpts = tmp_path / "run" / "checkpoints"
    records = [{"prompt": "p", "answer": "1"}]
    first = run_inputs(dict, model, records, {"learning_rate": 0.01}, None, apply_hint=_train_cmd)
    assert keep_checkpoints_of(ckpts, first) and (ckpts / RUN_INPUTS).is_file()
    (ckpts / "checkpoint-2").mkdir()
    (ckpts / "metrics.jsonl").write_text("{}\n")
    # the same inputs (a function argument described by its name, not its address): kept
    assert run_inputs(dict, model, records, {"learning_rate": 0.01}, None, apply_hint=_train_cmd) == first
    assert keep_checkpoints_of(ckpts, first) and (ckpts / "checkpoint-2").is_dir()
    # another config: removed, with the live metrics
    other = run_inputs(dict, model, records, {"learning_rate": 0.02}, None, apply_hint=_train_cmd)
    said = []
    assert not keep_checkpoints_of(ckpts, other, log=said.append)
    assert not (ckpts / "checkpoint-2").exists() and not (ckpts / "metrics.jsonl").exists()
    assert said and "other inputs" in said[0]
    # a longer run (max_steps raised) continues them; a shorter one drops those past its end
    (ckpts / "checkpoint-2").mkdir()
    (ckpts / "checkpoint-4").mkdir()
    longer = run_inputs(dict, model, records, {"learning_rate": 0.02, "max_steps": 8}, None, apply_hint=_train_cmd)
    assert longer == other  # the run's length is not an input its checkpoints depend on
    assert not keep_checkpoints_of(ckpts, longer, max_steps=3)
    assert (ckpts / "checkpoint-2").is_dir() and not (ckpts / "checkpoint-4").exists()
    shutil.rmtree(ckpts / "checkpoint-2")
    # a base model rebuilt at the same path is another model
    (ckpts / "checkpoint-2").mkdir()
    os.utime(model / "model.safetensors", ns=(1, 1))
    assert not keep_checkpoints_of(ckpts, run_inputs(dict, model, records, {"learning_rate": 0.02}, None,
                                                     apply_hint=_train_cmd))
    assert not (ckpts / "checkpoint-2").exists()


@pytest.mark.slow
def test_a_rerun_with_another_config_trains_from_the_start(inputs):
    """Snakemake reruns a training job whose params changed and removes its declared outputs
    (model, metrics), not the checkpoints beside them: the rerun must not resume the other run."""
    import shutil

    d = inputs
    subprocess.run(_train_cmd(d, "changed"), check=True, capture_output=True)
    shutil.rmtree(d / "changed" / "model")
    (d / "changed" / "metrics.jsonl").unlink()
    cmd = _train_cmd(d, "changed")
    cmd[cmd.index("--params") + 1] = json.dumps({**TRAIN, "learning_rate": 0.02})
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from checkpoint" not in proc.stdout and "other inputs" in proc.stdout
    report = json.loads((d / "changed" / "train_report.json").read_text())
    assert report["resumed_from_step"] == 0 and report["global_step"] == TRAIN["max_steps"]
    assert [r["step"] for r in read_metric_rows(d / "changed" / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]
