"""GRPO with what TRL lacks per group: an advantage estimator, DAPO's dynamic sampling.

A ``GRPOTrainer`` subclass that overrides one hook: ``_generate_and_score_completions`` lets TRL
generate and score as usual, then replaces TRL's advantages by the estimator's, computed per
group from the same rewards, and (``dynamic_sampling: drop``) takes the groups whose rollouts
all scored alike out of the loss. Estimators that TRL computes itself (``trl_options`` in
:mod:`nudgerl.advantages`) never come here: their options go to ``trl.GRPOConfig``
(:func:`trl_advantage_options`), and without dynamic sampling plain ``GRPOTrainer`` runs.
"""

from __future__ import annotations

import numpy as np
from trl import GRPOTrainer

from nudgerl.advantages import AdvantageOptions, get_advantage_estimator, zero_variance_groups
from nudgerl.training.grpo_config import DYNAMIC_SAMPLING


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

    def weighted_rewards(self) -> np.ndarray:
        """Every process's rollouts' rewards of the last scoring, weighted and summed over the
        reward functions (TRL's sum), in TRL's row order: whole groups of ``num_generations``."""
        import torch

        weights = self.reward_weights.to(self._last_rewards_per_func.device).unsqueeze(0)
        return torch.nan_to_num(self._last_rewards_per_func * weights, nan=0.0).sum(dim=1).cpu().numpy()

    def _local_rows(self, values: np.ndarray, rows: int) -> np.ndarray:
        rank = self.accelerator.process_index
        return values[rank * rows : (rank + 1) * rows]

    def replace_advantages(self, out: dict, group_advantages) -> np.ndarray:
        """Set ``out["advantages"]`` (this process's rows) to ``group_advantages(rewards, start)``
        of each group of every process's weighted rewards; returns those rewards."""
        import torch

        local = out["advantages"]
        rewards = self.weighted_rewards()
        G = self.num_generations
        adv = np.concatenate([group_advantages(rewards[s : s + G], s) for s in range(0, len(rewards), G)])
        out["advantages"] = torch.tensor(self._local_rows(adv, local.shape[0]), dtype=local.dtype, device=local.device)
        return rewards

    def drop_zero_variance_groups(self, out: dict) -> float:
        """DAPO's dynamic sampling without the resampling: the rollouts of every group whose
        rewards are all equal leave the loss mask, so a token-normalised loss (``dapo``,
        ``cispo``, ``bnpo``) averages over the groups that carry a gradient; their tokens were
        generated and stay in the rollout-token count. Returns the dropped share of groups."""
        dropped = zero_variance_groups(self.weighted_rewards(), self.num_generations)
        mask = out["completion_mask"]
        keep = ~self._local_rows(np.repeat(dropped, self.num_generations), mask.shape[0])
        out["completion_mask"] = mask * self._to_device(keep, mask).unsqueeze(1)
        # TRL's token normaliser of the dapo / cispo losses, summed over every process as TRL does
        out["num_items_in_batch"] = self.accelerator.gather(out["completion_mask"].sum()).sum()
        share = float(dropped.mean()) if dropped.size else 0.0
        self._metrics["train"]["dynamic_sampling/dropped_groups"].append(share)
        return share

    @staticmethod
    def _to_device(values: np.ndarray, like):
        import torch

        return torch.as_tensor(values, device=like.device).to(like.dtype)


class EstimatorGRPOTrainer(GroupAdvantageTrainer):
    """GRPO with an estimator TRL lacks (``advantage_estimator``; None: TRL's advantages) and/or
    DAPO's dynamic sampling (``dynamic_sampling="drop"``)."""

    def __init__(self, *args, advantage_estimator: str | None = None,
                 advantage_options: AdvantageOptions = AdvantageOptions(), dynamic_sampling: str | None = None,
                 **kwargs):
        estimator = get_advantage_estimator(advantage_estimator) if advantage_estimator is not None else None
        if estimator is not None and estimator.trl_options is not None:
            raise ValueError(f"advantage estimator {estimator.name!r} is TRL's own: run GRPOTrainer with "
                             f"{estimator.trl_options}")
        if estimator is not None and estimator.needs_contexts:
            raise ValueError(f"advantage estimator {estimator.name!r} needs hint contexts: it is the NudgeRL trainer's")
        if dynamic_sampling not in DYNAMIC_SAMPLING:
            raise ValueError(f"dynamic_sampling: {dynamic_sampling!r} is not one of {DYNAMIC_SAMPLING}")
        super().__init__(*args, **kwargs)
        self.estimator = estimator
        self.advantage_options = advantage_options
        self.dynamic_sampling = dynamic_sampling

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.model.training:
            if self.estimator is not None:
                self.replace_advantages(out, lambda r, start: self.estimator.fn(r, None, self.advantage_options))
            if self.dynamic_sampling == "drop":
                self.drop_zero_variance_groups(out)
        return out


def trl_advantage_options(cfg) -> dict:
    """The ``trl.GRPOConfig`` options of a run's estimator, when TRL computes it itself."""
    if cfg.advantage_estimator is None:
        return {}
    return dict(get_advantage_estimator(cfg.advantage_estimator).trl_options or {})


def grpo_trainer(cfg) -> tuple[type, dict]:
    """The trainer class of a GRPO-family run (GRPO, POPE) and its extra arguments."""
    ours = cfg.advantage_estimator is not None and not trl_advantage_options(cfg)
    if not ours and cfg.dynamic_sampling is None:
        return GRPOTrainer, {}
    return EstimatorGRPOTrainer, {"advantage_estimator": cfg.advantage_estimator if ours else None,
                                  "advantage_options": AdvantageOptions(k=cfg.advantage_k),
                                  "dynamic_sampling": cfg.dynamic_sampling}
