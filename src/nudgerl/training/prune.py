"""Pruning a finished run's checkpoints once nothing needs them (``nudgerl prune-checkpoints``).

A run's ``checkpoints/checkpoint-<step>`` folders serve two readers: a resume (only while the
run is unfinished) and the training curve (``curve_eval``, which reads the checkpoints at
multiples of ``eval.curve.every``). Once the run is complete and its curve, if it has one, is
written, no resume needs them: the final weights are ``model/`` (saved separately by
``run_training``), and the live ``checkpoints/metrics.jsonl`` was copied to ``metrics.jsonl``
(kept). The workflow keeps a curve run's curve steps (``keep_steps``), so its curve can be
evaluated again; every other checkpoint goes.

What is deleted is recorded first, in the run's ``checkpoints/pruned.json``, file by file with
its size (not hashed: a large run's checkpoints are tens of GB). The model's and the curve's
provenance sidecars hashed those files, and ``nudgerl audit`` reads the record to tell a pruned
file from a lost one. The record is written before anything is removed and is no Snakemake
output (Snakemake deletes an interrupted job's outputs), so a kill mid-prune leaves a record
naming every file that may be gone, and the rerun adds to it. Rule ``prune_checkpoints``'
output, ``checkpoints_pruned.json`` beside ``model/``, is a copy written when the prune is done.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from nudgerl.io import CHECKPOINTS_PRUNED, atomic_write_text, read_pruned_record
from nudgerl.training.run_state import checkpoint_complete

RECORD = CHECKPOINTS_PRUNED


def checkpoint_step(name: str) -> int | None:
    """The step of a ``checkpoint-<step>`` folder's name; None for any other name."""
    prefix, _, step = name.rpartition("-")
    return int(step) if prefix == "checkpoint" and step.isdigit() else None


def why_not_prunable(run_dir: Path, curve: Path | None, squeue: str = "squeue") -> str | None:
    """None when the run is finished and its curve (if given) written; else the reason, naming
    the missing file. Finished = ``train_report.json`` and the model's provenance sidecar exist:
    the trainer job writes them last (training.cli._finish_run), after ``model/`` is in place.
    A training job of the run still alive (its run lock, nudgerl.attempts) also refuses:
    it may be resuming from these checkpoints."""
    from nudgerl.attempts import ATTEMPT_FILE, live_predecessor, this_attempt

    lock = run_dir / ATTEMPT_FILE
    try:
        previous = json.loads(lock.read_text()) if lock.exists() else None
    except ValueError:
        previous = None  # torn by a kill mid-write: that job is gone
    alive = live_predecessor(previous, this_attempt(), squeue)
    if alive:
        return f"{lock}: a training job of this run is alive ({alive}); nothing is pruned"
    needed = [run_dir / "model" / "provenance.json", run_dir / "train_report.json", run_dir / "metrics.jsonl"]
    if curve is not None:
        # the curve's sidecar is written after its rows: without it curve_eval did not finish
        needed += [curve, curve.with_name(curve.name + ".provenance.json")]
    for path in needed:
        if not path.exists():
            return f"{path} does not exist: the run is unfinished or its curve unread, nothing is pruned"
    return None


def checkpoints_to_prune(checkpoint_dirs: list[Path], keep_steps: set[int]) -> list[Path]:
    """The ``checkpoint-<step>`` folders whose step is not kept, in step order (pure: names only)."""
    steps = {p: checkpoint_step(p.name) for p in checkpoint_dirs}
    return sorted((p for p, s in steps.items() if s is not None and s not in keep_steps), key=lambda p: steps[p])


def file_sizes(folders: list[Path]) -> dict[str, int]:
    """Every file below ``folders`` -> its size, keyed as the sidecars key them (normalised
    paths as given, nudgerl.io.hash_inputs)."""
    return {os.path.normpath(f): f.stat().st_size for d in folders for f in sorted(d.rglob("*")) if f.is_file()}


def prune_checkpoints(run_dir: Path, keep_steps: set[int] = frozenset(), curve: Path | None = None,
                      log=print, squeue: str = "squeue") -> dict:
    """Delete the run's checkpoint folders not in ``keep_steps``; refuse (ValueError) while the
    run is unfinished or its curve unwritten. Returns the record (also written to ``RECORD``)."""
    run_dir = Path(run_dir)
    reason = why_not_prunable(run_dir, curve, squeue)
    if reason:
        raise ValueError(reason)
    ckpt_root = run_dir / "checkpoints"
    found = sorted(p for p in ckpt_root.iterdir() if p.is_dir()) if ckpt_root.is_dir() else []
    doomed = checkpoints_to_prune(found, set(keep_steps))
    for path in found:
        step = checkpoint_step(path.name)
        if step is not None and step in keep_steps and not checkpoint_complete(path):
            log(f"warning: kept checkpoint {path} is incomplete (no valid trainer_state.json)")
    record_path = ckpt_root / RECORD
    record = read_pruned_record(record_path)  # a rerun after a kill mid-prune adds to the first record
    record["removed"] = sorted(set(record["removed"]) | {str(p) for p in doomed})
    record["files"] = {**record["files"], **file_sizes(doomed)}
    record["kept_steps"] = sorted(keep_steps)
    atomic_write_text(record_path, json.dumps(record, indent=2) + "\n")  # before any removal
    for path in doomed:
        shutil.rmtree(path)
    log(f"pruned {len(doomed)} checkpoint(s) of {run_dir} ({len(record['files'])} files recorded in {record_path})")
    return record
