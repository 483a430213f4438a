"""Test-only probe for tests/test_multiprocess_training.py, loaded into every training process
by putting this folder on PYTHONPATH (Python imports ``sitecustomize`` at start-up), so the
test runs the real ``accelerate launch ... -m nudgerl.cli`` command with nothing test-only in
the package. Inactive unless NUDGERL_PROBE_DIR is set and the process is a rank (RANK set by
torchrun, or NUDGERL_PROBE_SINGLE for a one-process run). Each rank writes
``<NUDGERL_PROBE_DIR>/rank<R>.json`` when training ends:

- ``weights``: a SHA-256 of the trained parameters (names and bytes), to compare ranks;
- ``fs``: file-system changes it made under NUDGERL_PROBE_WATCH (Python audit events: opens
  for writing, renames, removals), to check that only the main process writes the run folder;
- ``nudges`` (NudgeRL): per generation, the step, every process's nudge contexts as this rank
  computed them, its own slice, the gathered rewards and its advantages.
"""

import atexit
import json
import os
import sys

_DIR = os.environ.get("NUDGERL_PROBE_DIR")
_RANK = os.environ.get("RANK", "0" if os.environ.get("NUDGERL_PROBE_SINGLE") else None)

if _DIR and _RANK is not None:
    import importlib.abc
    import importlib.util

    _WATCH = os.path.realpath(os.environ.get("NUDGERL_PROBE_WATCH", "/nonexistent"))
    _record = {"rank": int(_RANK), "fs": [], "nudges": []}
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def _watched(path):
        try:
            return os.path.realpath(os.fsdecode(path)).startswith(_WATCH + os.sep)
        except TypeError:  # a file descriptor
            return False

    def _audit(event, args):
        if event == "open":
            path, mode, flags = args
            writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes and _watched(path):
                _record["fs"].append(["write", os.path.realpath(os.fsdecode(path))])
        elif event in ("os.rename", "os.replace") and _watched(args[0]):
            _record["fs"].append(["rename", os.path.realpath(os.fsdecode(args[0])),
                                  os.path.realpath(os.fsdecode(args[1]))])
        elif event in ("os.remove", "os.rmdir", "shutil.rmtree") and _watched(args[0]):
            _record["fs"].append(["remove", os.path.realpath(os.fsdecode(args[0]))])

    sys.addaudithook(_audit)

    def _dump():
        with open(os.path.join(_DIR, f"rank{_RANK}.json"), "w") as f:
            json.dump(_record, f)

    atexit.register(_dump)

    def _weights_hash(model):
        import hashlib

        h = hashlib.sha256()
        for name, p in sorted(model.named_parameters()):
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()

    def _probe_trainer(trainer):
        from transformers import TrainerCallback

        class WeightsAtEnd(TrainerCallback):
            def on_train_end(self, args, state, control, model=None, **kwargs):
                _record["weights"] = _weights_hash(trainer.model)
                _record["global_step"] = state.global_step

        trainer.add_callback(WeightsAtEnd())
        if not hasattr(trainer, "_nudge_local"):
            return
        nudge_local, generate = trainer._nudge_local, trainer._generate_and_score_completions

        def probed_nudge_local(inputs):
            rows, contexts, every_context = nudge_local(inputs)
            _record["nudges"].append({"step": trainer.state.global_step, "contexts": list(every_context),
                                      "local": list(contexts)})
            return rows, contexts, every_context

        def probed_generate(inputs):
            out = generate(inputs)
            if trainer.model.training:
                weights = trainer.reward_weights.to(trainer._last_rewards_per_func.device).unsqueeze(0)
                rewards = (trainer._last_rewards_per_func * weights).nansum(dim=1)
                _record["nudges"][-1].update(rewards=rewards.tolist(), advantages=out["advantages"].tolist())
            return out

        trainer._nudge_local, trainer._generate_and_score_completions = probed_nudge_local, probed_generate

    def _patch(grpo):
        build_trainer = grpo.build_trainer

        def probed_build_trainer(*args, **kwargs):
            trainer = build_trainer(*args, **kwargs)
            _probe_trainer(trainer)
            return trainer

        grpo.build_trainer = probed_build_trainer

    class _AfterImport(importlib.abc.MetaPathFinder):
        """Patches nudgerl.training.grpo as it is first imported."""

        def find_spec(self, name, path, target=None):
            if name != "nudgerl.training.grpo":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            exec_module = spec.loader.exec_module

            def exec_and_patch(module):
                exec_module(module)
                _patch(module)

            spec.loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, _AfterImport())
