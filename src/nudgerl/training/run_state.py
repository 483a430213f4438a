"""The files of a training run that a resume reads: its checkpoints and ``metrics.jsonl``.

A killed job restarts from its newest *complete* checkpoint; the metrics rows past that
step are dropped (they are trained again), and the finished file must hold every
generation step once (:func:`check_continuous`). :func:`metrics_callback` writes the rows.
Checkpoints continue only the run they came from: :func:`keep_checkpoints_of` removes those a
run with other inputs left in the folder (another base model, config or training set).

Under several processes (``accelerate launch``) the files of a run are the main process's:
it alone writes metric rows, removes half-written checkpoints and rewrites the metrics
file; the others wait for it (:func:`main_process_only`).

A job that would outlive its time limit is told so by a signal (:data:`STOP_SIGNALS`):
:func:`stop_on_signal` then saves a complete checkpoint at the end of the current
generation, and the job exits with :data:`TIME_LIMIT_EXIT_CODE`; the rerun resumes there.

:func:`progress_callback` prints the step count, elapsed time and ETA as plain lines.
"""

from __future__ import annotations

import json
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from nudgerl.attempts import PLANNED_STOP_EXIT_CODE
from nudgerl.io import atomic_write_text

if TYPE_CHECKING:
    from nudgerl.training.grpo_config import GRPORunConfig


def metrics_callback(path: Path, cfg: GRPORunConfig, resume_tokens: float):
    from transformers import TrainerCallback

    class MetricsToJsonl(TrainerCallback):
        """Appends one JSON line per optimizer step; cumulative rollout tokens included."""

        def __init__(self):
            self.rollout_tokens = resume_tokens
            self.t_last = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            # Every process logs the same (gathered) values; one row per step is the main process's.
            if not logs or "reward" not in logs or not state.is_world_process_zero:
                return
            # TRL logs rollout metrics (reward, lengths) only on the optimizer step that follows a
            # generation, so one row = one whole generation batch of prompts_per_step x N rollouts
            n_rollouts = cfg.prompts_per_step * cfg.num_generations
            mean_len = float(logs.get("completions/mean_length", 0.0))
            self.rollout_tokens += mean_len * n_rollouts
            now = time.perf_counter()
            row = {
                "step": state.global_step,
                "reward_mean": logs.get("reward"),
                "reward_std": logs.get("reward_std"),
                "frac_zero_variance_groups": logs.get("frac_reward_zero_std"),
                "completion_length_mean": mean_len,
                # the batch's longest rollout: a generation batch waits for it (the GPU-hour plan's model)
                "completion_length_max": logs.get("completions/max_length"),
                "rollouts": n_rollouts,
                "rollout_tokens": mean_len * n_rollouts,
                "cumulative_rollout_tokens": self.rollout_tokens,
                "step_time": logs.get("step_time", now - self.t_last),
                "wall_step_time": now - self.t_last,
                "loss": logs.get("loss"),
                "learning_rate": logs.get("learning_rate"),
                # TRL's num_input_tokens_seen: prompt + completion tokens trained on so far
                "num_tokens": logs.get("num_tokens"),
            }
            # NudgeRL's hint metrics; the share of groups DAPO's dynamic sampling dropped
            row.update({k: v for k, v in logs.items() if k.startswith(("nudge/", "dynamic_sampling/"))})
            self.t_last = now
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")

    return MetricsToJsonl()


def progress_callback(log=None, clock=time.monotonic):
    """A callback that prints the run's progress (``progress: step 120/400 (30%), elapsed
    0:41:02, ETA 1:35:45``) at the steps :class:`nudgerl.progress.Progress` picks: transformers'
    own bar is off (``disable_tqdm``), its redraws would fill a Slurm log. The main process
    alone prints: every process is at the same step. The clock starts when training starts
    (after the model and vLLM loaded), and a resumed run's pace counts its own steps only."""
    from transformers import TrainerCallback

    from nudgerl.progress import Progress

    class ProgressLines(TrainerCallback):
        def __init__(self):
            self.progress: Progress | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:  # global_step: the resume checkpoint's step, or 0
                self.progress = Progress("step", state.max_steps, start=state.global_step, log=log, clock=clock)

        def on_step_end(self, args, state, control, **kwargs):
            if self.progress is not None:
                self.progress.update(state.global_step)

    return ProgressLines()


def checkpoint_complete(path: Path) -> bool:
    """A checkpoint is complete when ``trainer_state.json`` (the last file transformers
    writes into it) exists and parses: a job killed mid-save leaves a folder without it."""
    try:
        state = json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return state.get("global_step") == int(path.name.rsplit("-", 1)[1])


RUN_INPUTS = "run_inputs.json"  # beside the checkpoints: what the run that wrote them trained on


def _described(value):
    """A JSON-able description of a trainer argument: a dataclass's fields, a function's name
    (its repr holds a memory address), else the value itself (or its str)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if callable(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


# config keys a resume may change: the run's length (a run is extended by raising it; a
# checkpoint past it is removed, keep_checkpoints_of) and how often it saves
RESUMABLE_CHANGES = ("max_steps", "checkpoint_every")


def run_inputs(trainer_cls, model_dir, train_records, cfg, revision=None, **extra) -> dict:
    """What a training run's checkpoints depend on: the trainer, its config (less
    :data:`RESUMABLE_CHANGES`), the training records
    (a hash), and the model folder as it stands (each file's name, size and modification time: a
    rebuilt base model is another model, even at the same path; reading the weights of a 7B model
    to hash them would cost minutes)."""
    import hashlib

    model = Path(model_dir)
    files = ({p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(model.iterdir()) if p.is_file()}
             if model.is_dir() else {})
    records = hashlib.sha256(json.dumps(train_records, sort_keys=True, default=str).encode()).hexdigest()
    config = _described(cfg)
    if isinstance(config, dict):
        config = {k: v for k, v in config.items() if k not in RESUMABLE_CHANGES}
    return json.loads(json.dumps({
        "trainer": f"{trainer_cls.__module__}.{trainer_cls.__qualname__}", "config": config,
        "model": {"path": str(model_dir), "revision": revision, "files": files}, "train_records_sha256": records,
        "extra": {k: _described(v) for k, v in sorted(extra.items())}}, sort_keys=True, default=str))


def keep_checkpoints_of(output_dir: Path, inputs: dict, log=print, max_steps: int | None = None) -> bool:
    """Keep the checkpoints (and live metrics) in ``output_dir`` only if the run that wrote them
    had these ``inputs`` (:func:`run_inputs`), and record them for the next start. Snakemake
    reruns a training job when its base model, params or data changed and removes its declared
    outputs, but not the checkpoints beside them: resumed, they would continue (or, past the last
    step, simply be) the other run. False when checkpoints were removed."""
    import shutil

    path = output_dir / RUN_INPUTS
    kept = True
    if path.is_file():
        try:
            before = json.loads(path.read_text())
        except json.JSONDecodeError:
            before = None
        if before != inputs:
            stale = [p for p in output_dir.glob("checkpoint-*") if p.is_dir()]
            if stale or (output_dir / "metrics.jsonl").exists():
                log(f"removing {len(stale)} checkpoint(s) in {output_dir}: a run with other inputs (base model, "
                    f"config or training set) wrote them")
            for p in stale:
                shutil.rmtree(p)
            (output_dir / "metrics.jsonl").unlink(missing_ok=True)
            kept = False
    # a shorter run than the one that saved them: checkpoints past its last step are not its own
    past = [p for p in output_dir.glob("checkpoint-*") if p.is_dir() and max_steps is not None
            and p.name.rsplit("-", 1)[1].isdigit() and int(p.name.rsplit("-", 1)[1]) > max_steps]
    if past:
        log(f"removing {len(past)} checkpoint(s) in {output_dir} past this run's last step {max_steps}")
        for p in past:
            shutil.rmtree(p)
        kept = False
    # no record (checkpoints of an earlier version of this code): they are kept, as before
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(inputs, sort_keys=True, indent=1) + "\n")
    return kept


def last_checkpoint(output_dir: Path, log=print) -> str | None:
    """The newest *complete* checkpoint; newer half-written ones (killed mid-save) are removed."""
    import shutil

    if not output_dir.is_dir():
        return None
    found = sorted((p for p in output_dir.glob("checkpoint-*") if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()),
                   key=lambda p: int(p.name.rsplit("-", 1)[1]), reverse=True)
    for path in found:
        if checkpoint_complete(path):
            return str(path)
        log(f"removing incomplete checkpoint {path} (the job was killed while saving it)")
        shutil.rmtree(path)
    return None


def read_metric_rows(path: Path) -> list[dict]:
    """Rows of the live metrics file; a torn last line (killed mid-append) is dropped."""
    rows = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}:{i + 1}: not valid JSON") from None
    return rows


def truncate_metrics(path: Path, step: int) -> float:
    """Keep metric rows up to ``step``: steps after the checkpoint are trained again on
    resume and must not appear twice. Returns the cumulative rollout tokens at ``step``."""
    if not path.exists():
        return 0.0
    kept = [r for r in read_metric_rows(path) if r["step"] <= step]
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    return kept[-1]["cumulative_rollout_tokens"] if kept else 0.0


def check_continuous(path: Path, max_steps: int, every: int = 1) -> None:
    """The final metrics must hold each generation step (1, 1 + every, ... <= max_steps) once:
    a resume left no gap or repeat."""
    steps = [r["step"] for r in read_metric_rows(path)]
    expected = list(range(1, max_steps + 1, every))
    if steps != expected:
        raise RuntimeError(f"{path}: metric steps are not {expected[:3]}...{expected[-1:]} once each: {steps}")


# --------------------------------------------------------------- several processes


@contextmanager
def main_process_only(accelerator):
    """The body runs on the main process only (file removals and rewrites of the run folder);
    the other processes wait at a barrier until it is done, so none reads a half-done state.
    One process: the body runs, the barrier is a no-op."""
    try:
        yield accelerator.is_main_process
    finally:
        accelerator.wait_for_everyone()


# --------------------------------------------------------------- time limits

# The warning before the time limit (SIGUSR1: from `timeout` around the trainer, see
# PlanResources.launcher, or sbatch --signal) and a plain SIGTERM (scancel, or the limit
# itself) both ask the job to stop where a rerun can resume.
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
# EX_TEMPFAIL (sysexits.h): not done, try again; the rerun resumes from the saved checkpoint.
TIME_LIMIT_EXIT_CODE = PLANNED_STOP_EXIT_CODE


class StoppedForTimeLimit(SystemExit):
    """Raised after the stop checkpoint is saved: a clean exit with TIME_LIMIT_EXIT_CODE (no
    traceback), the log line saying where the run stopped."""

    def __init__(self, step: int, checkpoint: str, signame: str):
        super().__init__(TIME_LIMIT_EXIT_CODE)
        self.message = (f"stopped at step {step} for the time limit ({signame}); checkpoint {checkpoint} is "
                        "complete, rerun resumes")


def stop_on_signal(interval: int = 1):
    """A callback that turns a stop signal into a checkpoint: once one of STOP_SIGNALS has
    reached any process, every process stops at the end of the same step, the first that ends
    a generation batch (``interval`` optimizer steps; a checkpoint inside a generation would
    resume without the rest of its rollouts), and the Trainer saves a checkpoint there.

    The processes agree through one all-reduce of the flag per optimizer step (a few bytes),
    so a signal that reached only some ranks still stops them all at the same step.
    ``install()`` sets the handlers, ``uninstall()`` puts the previous ones back, ``ignore()``
    ignores further stop signals (a stopped process on its way out)."""
    from transformers import TrainerCallback

    class StopOnSignal(TrainerCallback):
        def __init__(self):
            self.received: int | None = None
            self.stopped_at: int | None = None
            self._previous = {}

        def _handle(self, signum, frame):
            self.received = signum

        def install(self):
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
                # System calls in flight (a gloo/NCCL socket read, a checkpoint write) restart
                # instead of failing with EINTR: the handler only sets a flag.
                signal.siginterrupt(sig, False)

        def ignore(self):
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)

        def uninstall(self):
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            self._previous.clear()

        def _requested_anywhere(self, args) -> bool:
            if args.world_size <= 1:
                return self.received is not None
            import torch
            from accelerate import PartialState
            from accelerate.utils import reduce

            flag = torch.tensor([1.0 if self.received is not None else 0.0], device=PartialState().device)
            return bool(reduce(flag, reduction="sum").item() > 0)

        def on_step_end(self, args, state, control, **kwargs):
            requested = self._requested_anywhere(args)  # called on every step by every rank: collectives match
            if requested and state.global_step % interval == 0 and state.global_step < state.max_steps:
                control.should_save = True
                control.should_training_stop = True
                self.stopped_at = state.global_step

        def signal_name(self) -> str:
            return signal.Signals(self.received).name if self.received is not None else "a stop signal on another rank"

    return StopOnSignal()
