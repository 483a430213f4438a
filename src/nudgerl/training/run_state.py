"""The files of a training run that a resume reads: its checkpoints and ``metrics.jsonl``.

A killed job restarts from its newest *complete* checkpoint; the metrics rows past that
step are dropped (they are trained again), and the finished file must hold every
generation step once (:func:`check_continuous`). :func:`metrics_callback` writes the rows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from nudgerl.io import atomic_write_text


def metrics_callback(path: Path, cfg: GRPORunConfig, resume_tokens: float):
    from transformers import TrainerCallback

    class MetricsToJsonl(TrainerCallback):
        """Appends one JSON line per optimizer step; cumulative rollout tokens included."""

        def __init__(self):
            self.rollout_tokens = resume_tokens
            self.t_last = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "reward" not in logs:
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
            row.update({k: v for k, v in logs.items() if k.startswith("nudge/")})
            self.t_last = now
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")

    return MetricsToJsonl()


def checkpoint_complete(path: Path) -> bool:
    """A checkpoint is complete when ``trainer_state.json`` (the last file transformers
    writes into it) exists and parses: a job killed mid-save leaves a folder without it."""
    try:
        state = json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return state.get("global_step") == int(path.name.rsplit("-", 1)[1])


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
