"""NudgeRL on TRL: a ``GRPOTrainer`` subclass that overrides small hooks.

- ``_generate_and_score_completions``: before generation, give each of a problem's
  N = M x K rollouts one of M pool hints (K each), dropped with probability p_drop;
  after scoring, replace GRPO's advantages by the inter-intra advantage and attach the
  hint-free prompt x0 of every rollout for the distillation term (the per-group recomputation
  is :class:`nudgerl.training.estimator_trainer.GroupAdvantageTrainer`'s, shared with the other
  estimators; the advantage is ``nudgerl`` in :mod:`nudgerl.advantages`).
- ``_compute_loss``: L = L_RL + lambda_distill * mean_i(-A_i * log pi(y_i | x0)).
- ``_get_per_token_logps_and_entropies``: keeps the RL forward's log-probs during the loss,
  because a hint-free rollout's x0 is its prompt and log pi(y | x0) is already computed there.

The math lives in :mod:`nudgerl.algorithms`; this module is glue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from nudgerl.advantages import AdvantageOptions, get_advantage_estimator
from nudgerl.algorithms import distillation_loss, intra_inter_terms, nudge_contexts
from nudgerl.sections import from_section
from nudgerl.training.estimator_trainer import GroupAdvantageTrainer

# Keys of the ``nudgerl`` section that the workflow reads, not a run (the ablation runs).
WORKFLOW_KEYS = ("ablations",)


@dataclass
class NudgeRLConfig:
    """Paper defaults: M=2 hints x K=4 rollouts, p_drop=0.5, lam=1.1, lambda_distill=0.1."""

    M: int = 2
    K: int = 4
    p_drop: float = 0.5
    lam: float = 1.1
    normalize: bool = True
    lambda_distill: float = 0.1
    # "sequential": the pool's first M hints (the authors' default); "random": M hints drawn
    # per problem and step; "top_ranked": the first M of a pool re-ordered by rank_hints.
    hint_sampler: str = "sequential"

    @classmethod
    def from_dict(cls, d: dict, section: str = "nudgerl") -> NudgeRLConfig:
        """From the ``nudgerl`` section; ``ablations`` is the workflow's (the extra runs), skipped."""
        return from_section(cls, d, section, ignore=WORKFLOW_KEYS)


class NudgeRLTrainer(GroupAdvantageTrainer):
    def __init__(self, *args, nudge: NudgeRLConfig, apply_hint: Callable[[list, str], list], **kwargs):
        train_args = kwargs.get("args")
        # Checked before TRL builds anything (vLLM included), so a bad config fails fast.
        if train_args is not None and train_args.use_vllm and train_args.vllm_mode == "server":
            raise ValueError(
                "NudgeRL needs per-rollout prompts, but TRL's vLLM server mode sends one prompt per "
                "group and would drop the hints; set vllm_mode: colocate"
            )
        if train_args is not None and nudge.M * nudge.K != train_args.num_generations:
            raise ValueError(f"M x K = {nudge.M} x {nudge.K} must equal num_generations N = {train_args.num_generations}")
        if nudge.hint_sampler not in ("sequential", "random", "top_ranked"):
            raise ValueError(f"unknown hint_sampler {nudge.hint_sampler!r}; use sequential, random or top_ranked")
        super().__init__(*args, **kwargs)
        self.nudge = nudge
        self.apply_hint = apply_hint
        self._inter_intra = get_advantage_estimator("nudgerl").fn
        self._advantage_options = AdvantageOptions(lam=nudge.lam, normalize=nudge.normalize)
        self._keep_policy_logps = False
        self._policy_logps = None

    # ------------------------------------------------------------ nudging
    # One source of randomness per group: the hints and drops of a group come from a generator
    # seeded by (run seed, global step, group index in the global generation batch). Every
    # process therefore draws the same nudges for a group, whichever process holds its rows
    # (TRL lets a group straddle processes), and a resumed run nudges as an unbroken one
    # without any generator state in the checkpoint.

    def _group_rng(self, group_index: int) -> np.random.Generator:
        return np.random.default_rng([self.args.seed, self.state.global_step, group_index])

    def _choose_hints(self, pool: list[str], rng: np.random.Generator) -> list[str | None]:
        M = self.nudge.M
        if self.nudge.hint_sampler == "random" and len(pool) > M:
            picked = [pool[i] for i in sorted(rng.choice(len(pool), size=M, replace=False))]
        else:
            picked = list(pool[:M])
        return picked + [None] * (M - len(picked))  # a short pool leaves rollouts hint-free

    def _nudge(self, inputs: list[dict]) -> tuple[list[dict], list[int | None]]:
        """Nudge a whole generation batch (every process's rows, in order): N consecutive rows
        are one problem's group."""
        N = self.num_generations
        if len(inputs) % N:
            raise ValueError(f"a generation batch of {len(inputs)} rows is not a whole number of groups of N={N}")
        nudged, contexts = [], []
        for g, start in enumerate(range(0, len(inputs), N)):
            group = inputs[start : start + N]
            rng = self._group_rng(g)
            hints = self._choose_hints(group[0].get("hints") or [], rng)
            ctx = nudge_contexts(self.nudge.M, self.nudge.K, self.nudge.p_drop, rng)
            for row, c in zip(group, ctx):
                hint = hints[c] if c is not None else None
                c = c if hint is not None else None
                prompt = self.apply_hint(row["prompt"], hint) if hint is not None else row["prompt"]
                nudged.append({**row, "prompt": prompt, "x0_prompt": row["prompt"]})
                contexts.append(c)
        return nudged, contexts

    def _nudge_local(self, inputs: list[dict]) -> tuple[list[dict], list[int | None], list[int | None]]:
        """This process's nudged rows and contexts, and every process's contexts (for the advantage)."""
        from accelerate.utils import gather_object

        return self._nudge_slice(gather_object(inputs), self.accelerator.process_index, len(inputs))

    def _nudge_slice(self, everyone: list[dict], rank: int, rows: int):
        nudged, contexts = self._nudge(everyone)
        local = slice(rank * rows, (rank + 1) * rows)
        return nudged[local], contexts[local], contexts

    def _x0_ids(self, x0_prompts: list, device):
        import torch
        from trl.trainer.utils import pad

        tok = self.processing_class
        texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in x0_prompts]
        ids = [torch.tensor(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
        mask = [torch.ones_like(i) for i in ids]
        return (
            pad(ids, padding_value=tok.pad_token_id, padding_side="left").to(device),
            pad(mask, padding_value=0, padding_side="left").to(device),
        )

    def _generate_and_score_completions(self, inputs):
        import torch

        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        inputs, contexts, all_contexts = self._nudge_local(inputs)
        out = super()._generate_and_score_completions(inputs)

        N = self.num_generations
        # TRL gathers every process's rewards (groups are normalised whole)
        rewards = self.replace_advantages(out, lambda r, start: self._inter_intra(
            r, all_contexts[start : start + N], self._advantage_options))
        device = out["advantages"].device
        out["x0_prompt_ids"], out["x0_prompt_mask"] = self._x0_ids([r["x0_prompt"] for r in inputs], device)
        # Which rows carry a hint: only those need a separate forward pass on x0.
        out["hinted"] = torch.tensor([c is not None for c in contexts], dtype=torch.bool, device=device)
        self._log_nudge_metrics(rewards, all_contexts)
        return out

    def _log_nudge_metrics(self, rewards: np.ndarray, contexts: list) -> None:
        hinted = np.array([c is not None for c in contexts])
        m = self._metrics["train"]
        m["nudge/frac_hinted"].append(float(hinted.mean()))
        if hinted.any():
            m["nudge/reward_hinted"].append(float(rewards[hinted].mean()))
        if (~hinted).any():
            m["nudge/reward_hint_free"].append(float(rewards[~hinted].mean()))
        N = self.num_generations
        intra, inter = [], []
        for s in range(0, len(rewards), N):
            a, b = intra_inter_terms(rewards[s : s + N], contexts[s : s + N])
            intra += list(np.abs(a))
            inter += list(np.abs(b))
        if intra:
            m["nudge/abs_intra"].append(float(np.mean(intra)))
            m["nudge/abs_inter"].append(float(np.mean(inter)))

    # ------------------------------------------------------------ distillation

    def x0_sequence_logps(self, model, inputs, policy_logps=None):
        """Per-token mean log pi(y_i | x0) of every completion (the distillation log-prob).

        ``policy_logps`` are the RL forward's per-token log pi(y_i | x_i); for hint-free rows
        x_i = x0, so only hinted rows get a second forward pass, batched together.
        """
        import torch

        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        hinted = inputs.get("hinted")
        if policy_logps is None or hinted is None:
            rows = torch.arange(completion_ids.size(0), device=completion_ids.device)
            logps = None
        else:
            rows = hinted.nonzero(as_tuple=True)[0]
            logps = policy_logps
        if len(rows):
            prompt_ids, prompt_mask = inputs["x0_prompt_ids"][rows], inputs["x0_prompt_mask"][rows]
            first = int(prompt_mask.any(dim=0).int().argmax())  # drop all-padding columns (left padding)
            input_ids = torch.cat([prompt_ids[:, first:], completion_ids[rows]], dim=1)
            attention_mask = torch.cat([prompt_mask[:, first:], completion_mask[rows]], dim=1)
            x0_logps, _, _ = self._get_per_token_logps_and_entropies(model, input_ids, attention_mask, completion_ids.size(1))
            logps = x0_logps if logps is None else logps.index_put((rows,), x0_logps)
        return (logps * completion_mask).sum(dim=1) / completion_mask.sum(dim=1).clamp(min=1)

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        # Relies on a private detail of TRL 1.16.0 (the pinned version, checked against its
        # grpo_trainer.py): the first call of this method inside GRPOTrainer._compute_loss is the
        # policy's forward over the batch's prompts + completions. TRL exposes no public hook for
        # those log-probs. tests/test_nudgerl_trainer.py (test_distillation_term_matches_direct_log_probs)
        # fails if an upgrade changes that order: re-check there before moving the pin.
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._keep_policy_logps:
            self._policy_logps, self._keep_policy_logps = result[0], False
        return result

    def _compute_loss(self, model, inputs):
        if self.nudge.lambda_distill == 0 or "x0_prompt_ids" not in inputs:
            return super()._compute_loss(model, inputs)
        self._keep_policy_logps = True  # the first log-prob pass inside the RL loss is the policy's
        try:
            loss = super()._compute_loss(model, inputs)
            policy_logps = self._policy_logps
        finally:
            self._keep_policy_logps, self._policy_logps = False, None
        distill = distillation_loss(inputs["advantages"], self.x0_sequence_logps(model, inputs, policy_logps))
        self._metrics["train"]["nudge/distill_loss"].append(distill.item())
        return loss + self.nudge.lambda_distill * distill / self.current_gradient_accumulation_steps


def train_nudgerl(model_dir: str, train_records: list[dict], cfg, nudge: NudgeRLConfig, run_dir,
                  hint_style: str = "organism", template=None, revision: str | None = None) -> dict:
    """Train NudgeRL (N = M x K rollouts per prompt), resuming from the last checkpoint.
    ``template`` (a PromptTemplate) inserts the hints; without one, the organism's hint line."""
    from dataclasses import asdict

    from nudgerl.data.prompts import HINT_STYLES
    from nudgerl.training.grpo import run_training

    if cfg.advantage_estimator not in (None, "nudgerl"):
        raise ValueError(f"config key 'grpo.advantage_estimator': NudgeRL uses its inter-intra advantage "
                         f"('nudgerl'), got {cfg.advantage_estimator!r}")
    apply_hint = template.apply_hint if template is not None else HINT_STYLES[hint_style]
    report = run_training(NudgeRLTrainer, model_dir, train_records, cfg, run_dir, revision=revision,
                          nudge=nudge, apply_hint=apply_hint)
    report["nudge"] = asdict(nudge)
    return report
