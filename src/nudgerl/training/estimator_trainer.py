"""GRPO with an advantage estimator that TRL lacks: a ``GRPOTrainer`` subclass that overrides one hook.

``_generate_and_score_completions`` lets TRL generate and score as usual, then replaces TRL's
advantages by the estimator's, computed per group from the same rewards. Estimators that TRL
computes itself (``trl_options`` in :mod:`nudgerl.advantages`) never come here: their options
go to ``trl.GRPOConfig`` (:func:`trl_advantage_options`) and plain ``GRPOTrainer`` runs.
"""

from __future__ import annotations

import numpy as np
from trl import GRPOTrainer

from nudgerl.advantages import AdvantageOptions, get_advantage_estimator


class GroupAdvantageTrainer(GRPOTrainer):
    """A ``GRPOTrainer`` whose advantages are recomputed per group from the rewards TRL scored:
    the one place that turns every process's rewards into this process's advantages (the
    estimator trainer below and NudgeRL's trainer both use it)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._last_rewards_per_func = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func  # every process's rows: groups are whole
        return rewards_per_func

    def replace_advantages(self, out: dict, group_advantages) -> np.ndarray:
        """Set ``out["advantages"]`` (this process's rows) to ``group_advantages(rewards, start)``
        of each group of every process's weighted rewards; returns those rewards."""
        import torch

        local = out["advantages"]
        weights = self.reward_weights.to(local.device).unsqueeze(0)
        rewards = torch.nan_to_num(self._last_rewards_per_func * weights, nan=0.0).sum(dim=1).cpu().numpy()
        G = self.num_generations
        adv = np.concatenate([group_advantages(rewards[s : s + G], s) for s in range(0, len(rewards), G)])
        rank, rows = self.accelerator.process_index, local.shape[0]
        out["advantages"] = torch.tensor(adv[rank * rows : (rank + 1) * rows], dtype=local.dtype, device=local.device)
        return rewards


class EstimatorGRPOTrainer(GroupAdvantageTrainer):
    def __init__(self, *args, advantage_estimator: str, advantage_options: AdvantageOptions, **kwargs):
        estimator = get_advantage_estimator(advantage_estimator)
        if estimator.trl_options is not None:
            raise ValueError(f"advantage estimator {estimator.name!r} is TRL's own: run GRPOTrainer with "
                             f"{estimator.trl_options}")
        if estimator.needs_contexts:
            raise ValueError(f"advantage estimator {estimator.name!r} needs hint contexts: it is the NudgeRL trainer's")
        super().__init__(*args, **kwargs)
        self.estimator = estimator
        self.advantage_options = advantage_options

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self.replace_advantages(out, lambda rewards, start: self.estimator.fn(rewards, None, self.advantage_options))
        return out


def trl_advantage_options(cfg) -> dict:
    """The ``trl.GRPOConfig`` options of a run's estimator, when TRL computes it itself."""
    if cfg.advantage_estimator is None:
        return {}
    return dict(get_advantage_estimator(cfg.advantage_estimator).trl_options or {})


def grpo_trainer(cfg) -> tuple[type, dict]:
    """The trainer class of a GRPO-family run (GRPO, POPE) and its extra arguments."""
    if cfg.advantage_estimator is None or trl_advantage_options(cfg):
        return GRPOTrainer, {}
    return EstimatorGRPOTrainer, {"advantage_estimator": cfg.advantage_estimator,
                                  "advantage_options": AdvantageOptions(k=cfg.advantage_k)}
