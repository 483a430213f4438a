"""Pruning a run's checkpoints (nudgerl.training.prune, `nudgerl prune-checkpoints`): only a
finished run's, only after its curve was written, only the steps not kept; the record it leaves
makes the audit report the deleted files as pruned, not missing. Fake run folders, real files,
written by the helpers the trainer and run_state use."""

import json
import subprocess
import sys

import pytest

from nudgerl.io import CHECKPOINTS_PRUNED, atomic_write_text, write_provenance
from nudgerl.reporting.audit import _audit
from nudgerl.attempts import ATTEMPT_FILE, process_alive
from nudgerl.training.prune import checkpoints_to_prune, prune_checkpoints
from nudgerl.training.run_state import last_checkpoint

STEPS = (2, 4, 6)


def _checkpoint(run, step):
    """A complete checkpoint as transformers leaves it: weights, then trainer_state.json last."""
    d = run / "checkpoints" / f"checkpoint-{step}"
    d.mkdir(parents=True)
    (d / "adapter_model.safetensors").write_bytes(b"w" * 16)
    atomic_write_text(d / "trainer_state.json", json.dumps({"global_step": step}))
    return d


def _training_run(tmp_path, finished=True):
    """A run folder mid-training (checkpoints, live metrics) or finished (model/, its sidecar
    over the checkpoints, metrics.jsonl, train_report.json: what _finish_run writes last)."""
    run = tmp_path / "runs" / "grpo8" / "seed0"
    for step in STEPS:
        _checkpoint(run, step)
    rows = "".join(json.dumps({"step": s, "cumulative_rollout_tokens": 10.0 * s}) + "\n" for s in range(1, 7, 2))
    atomic_write_text(run / "checkpoints" / "metrics.jsonl", rows)
    if finished:
        (run / "model").mkdir()
        (run / "model" / "adapter_model.safetensors").write_bytes(b"final")
        atomic_write_text(run / "metrics.jsonl", rows)
        atomic_write_text(run / "train_report.json", json.dumps({"global_step": 6}))
        write_provenance(run / "model", {}, {"train": 0}, [], outputs=[run / "metrics.jsonl", run / "checkpoints"])
    return run


def _curve(tmp_path, run, sidecar=True):
    curve = tmp_path / "curves" / "grpo8" / "seed0" / "curve.jsonl"
    atomic_write_text(curve, json.dumps({"step": 4, "pass@1": 0.5}) + "\n")
    if sidecar:  # curve-eval writes it after the rows, reading checkpoint-4
        write_provenance(curve, {}, {"sampling": 0}, [run / "checkpoints" / "checkpoint-4", run / "metrics.jsonl"])
    return curve


def _checkpoint_steps(run):
    return sorted(int(p.name.split("-")[1]) for p in (run / "checkpoints").glob("checkpoint-*"))


def test_which_checkpoints_go_is_decided_by_name_and_kept_steps(tmp_path):
    found = [tmp_path / n for n in ("checkpoint-10", "checkpoint-2", "metrics.jsonl", "checkpoint-x", "checkpoint-4")]
    assert checkpoints_to_prune(found, {4}) == [tmp_path / "checkpoint-2", tmp_path / "checkpoint-10"]
    assert checkpoints_to_prune(found, set()) == [tmp_path / n for n in ("checkpoint-2", "checkpoint-4", "checkpoint-10")]


def test_an_unfinished_run_keeps_every_checkpoint(tmp_path):
    run = _training_run(tmp_path, finished=False)
    with pytest.raises(ValueError, match=r"model/provenance.json does not exist"):
        prune_checkpoints(run, log=lambda s: None)
    assert _checkpoint_steps(run) == list(STEPS)
    assert not (run / "checkpoints" / CHECKPOINTS_PRUNED).exists()
    assert last_checkpoint(run / "checkpoints") == str(run / "checkpoints" / "checkpoint-6")  # resume still works


def test_a_run_whose_curve_is_unwritten_keeps_every_checkpoint(tmp_path):
    run = _training_run(tmp_path)
    curve = tmp_path / "curves" / "grpo8" / "seed0" / "curve.jsonl"
    with pytest.raises(ValueError, match="curve.jsonl does not exist"):
        prune_checkpoints(run, curve=curve, log=lambda s: None)
    # rows without the sidecar: curve-eval did not finish
    curve = _curve(tmp_path, run, sidecar=False)
    with pytest.raises(ValueError, match=r"curve.jsonl.provenance.json does not exist"):
        prune_checkpoints(run, curve=curve, log=lambda s: None)
    assert _checkpoint_steps(run) == list(STEPS)


def test_a_live_training_job_on_the_run_keeps_every_checkpoint(tmp_path):
    run = _training_run(tmp_path)
    # another process of this host running a nudgerl command holds the run lock
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "nudgerl"])
    try:
        import socket
        import time

        deadline = time.monotonic() + 10  # /proc/<pid>/cmdline can read empty just after the exec
        while not process_alive(other.pid) and time.monotonic() < deadline:
            time.sleep(0.05)

        atomic_write_text(run / ATTEMPT_FILE, json.dumps({"slurm_job_id": None, "host": socket.gethostname(),
                                                          "pid": other.pid}))
        with pytest.raises(ValueError, match="a training job of this run is alive"):
            prune_checkpoints(run, log=lambda s: None)
        assert _checkpoint_steps(run) == list(STEPS)
    finally:
        other.kill()
        other.wait()
    prune_checkpoints(run, log=lambda s: None)  # the lock's job is gone: a stale lock does not block
    assert _checkpoint_steps(run) == []


def test_a_finished_run_loses_only_the_checkpoints_not_kept(tmp_path):
    run = _training_run(tmp_path)
    curve = _curve(tmp_path, run)
    record = prune_checkpoints(run, keep_steps={6}, curve=curve, log=lambda s: None)
    assert _checkpoint_steps(run) == [6]
    # the final model, the metrics and the live metrics file stay
    assert (run / "model" / "adapter_model.safetensors").read_bytes() == b"final"
    assert (run / "metrics.jsonl").exists() and (run / "checkpoints" / "metrics.jsonl").exists()
    assert record["removed"] == sorted(str(run / "checkpoints" / f"checkpoint-{s}") for s in (2, 4))
    assert str(run / "checkpoints" / "checkpoint-4" / "trainer_state.json") in record["files"]
    assert json.loads((run / "checkpoints" / CHECKPOINTS_PRUNED).read_text()) == record
    # a second prune (a rerun after a kill mid-prune, or keeping less) adds to the record
    again = prune_checkpoints(run, curve=curve, log=lambda s: None)
    assert _checkpoint_steps(run) == [] and len(again["removed"]) == 3
    assert set(record["files"]) < set(again["files"])


def test_the_audit_reports_pruned_checkpoints_as_pruned_not_missing(tmp_path):
    results = tmp_path
    run = _training_run(tmp_path)
    curve = _curve(tmp_path, run)
    # a figure made from the curve: the audit's root, whose chain reaches the checkpoints
    fig = results / "figures" / "training_curves.json"
    atomic_write_text(fig, "{}")
    write_provenance(fig, {}, {}, [curve])
    assert _audit(results, check_dvc=False).ok
    prune_checkpoints(run, curve=curve, log=lambda s: None)
    report = _audit(results, check_dvc=False)
    assert report.ok, report.text()
    assert any("pruned on purpose" in n for n in report.notes)
    # a lost file the record does not list is still missing
    (run / "metrics.jsonl").unlink()
    report = _audit(results, check_dvc=False)
    assert [f.kind for f in report.findings] == ["missing"] and report.findings[0].path.endswith("metrics.jsonl")


def test_the_command_refuses_with_the_reason_and_writes_its_output_when_done(tmp_path):
    run = _training_run(tmp_path, finished=False)
    out = run / "checkpoints_pruned.json"
    cmd = [sys.executable, "-m", "nudgerl.cli", "prune-checkpoints", "--run-dir", str(run), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "does not exist" in proc.stderr and not out.exists()
    assert _checkpoint_steps(run) == list(STEPS)


def test_the_command_keeps_the_curve_steps_and_writes_its_output(tmp_path):
    run = _training_run(tmp_path)
    curve = _curve(tmp_path, run)
    out = run / "checkpoints_pruned.json"
    cmd = [sys.executable, "-m", "nudgerl.cli", "prune-checkpoints", "--run-dir", str(run), "--curve", str(curve),
           "--keep-steps", "4", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _checkpoint_steps(run) == [4]
    assert json.loads(out.read_text()) == json.loads((run / "checkpoints" / CHECKPOINTS_PRUNED).read_text())
