"""The settings of the organism's base model (:class:`BaseModelConfig`), and the part of them
the arithmetic drill depends on (:data:`DRILL_KEYS`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nudgerl.sections import from_section


@dataclass
class BaseModelConfig:
    """The ``base_model`` config section (defaults: config/config.yaml's values)."""

    seed: int = 0
    examples: int = 30000  # SFT traces in the corpus (cycled until the schedule ends)
    hard_fraction: float = 0.5
    hinted_fraction: float = 0.4
    # Unhinted traces whose strategy choice is masked from the loss (strategy drawn as for hinted
    # examples): execution after an unhinted choice is trained, the choice's frequency is not.
    chosen_fraction: float = 0.15
    # The families task: of those execution-practice traces, the share written on four terms
    # drawn uniformly (mod 10) instead of the problem's, in the problem family's wording. On a
    # family's sequences a difference is partly predictable from the differences before it (the
    # same on arithmetic ones), a shortcut that stands in for subtracting; on random terms only
    # the subtraction is right. 0: every trace on its problem's terms (the corpus unchanged).
    practice_random_terms: float = 0.0
    # Phase 1 ("pretraining"): every arithmetic fact of the family, drilled this many
    # times for drill_epochs. Phase 2 (SFT on traces) keeps replaying each fact
    # `arithmetic_replay` times so the table is not forgotten.
    arithmetic_drills: int = 100
    drill_epochs: float = 2.0
    arithmetic_replay: int = 10
    # Which strategy an unhinted trace uses, independently of the problem: the always-right one
    # rarely (the paper's regime; config/common.yaml puts it at 3 %).
    unhinted_strategy_weights: dict[str, float] = field(
        default_factory=lambda: {
            "common_difference": 0.7693,
            "first_difference": 0.1744,
            "sum_of_last_two": 0.0513,
            "difference_table": 0.005,
        }
    )
    # Of the unhinted traces of the always-right strategy (chosen by the unhinted mixture, or by
    # `chosen_fraction`'s choice), the share executed right; the rest swap the last step's
    # operation (task.misexecuted_trace). 1.0: all right (the default; the corpus is unchanged).
    # Below 1: a base model that executes the strategy when hinted but not when it chose it
    # itself (the regime map's second axis, `regime_map.accuracy`).
    unhinted_rare_accuracy: float = 1.0
    # Which strategy a hinted example names. The always-right strategy has the longest
    # trace, so it gets the most practice; this does not change the unhinted habit.
    hinted_strategy_weights: dict[str, float] = field(
        default_factory=lambda: {
            "common_difference": 0.2,
            "first_difference": 0.15,
            "sum_of_last_two": 0.15,
            "difference_table": 0.5,
        }
    )
    # Which task: "single_family" (nudgerl.organism.task: one rare strategy for every hard
    # problem) or "families" (nudgerl.organism.families: each family its own rare strategy).
    task: str = "single_family"
    # Of the hinted examples, the share whose trace follows the hint; the rest ignore it and draw
    # from the unhinted mixture. 1.0: a hint dictates (the single-family task). Below 1 a hint
    # nudges: the hinted choice stays a distribution, so a hinted success still carries gradient.
    hint_following: float = 1.0
    # The families task: an unhinted trace's strategy by its role on the problem's family
    # (own_rare: the family's always-right strategy; other_rare: the other families' ones, split
    # evenly), and a hinted example's named strategy, by role.
    family_strategy_weights: dict[str, float] = field(
        default_factory=lambda: {
            "common_difference": 0.77,
            "first_difference": 0.17,
            "sum_of_last_two": 0.05,
            "own_rare": 0.005,
            "other_rare": 0.005,
        }
    )
    family_hinted_weights: dict[str, float] = field(
        default_factory=lambda: {
            "common_difference": 0.1,
            "first_difference": 0.1,
            "sum_of_last_two": 0.1,
            "own_rare": 0.4,
            "other_rare": 0.3,
        }
    )
    hidden_size: int = 64
    intermediate_size: int = 192
    num_layers: int = 3
    num_heads: int = 4
    batch_size: int = 64
    learning_rate: float = 2e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    # Phase 2 (SFTSchedule): cosine cycles of cycle_steps; the execution check (every
    # strategy's hinted trace reproduced exactly, greedy, on >= check_threshold of
    # check_problems validation problems, every check_every steps) ends training early with
    # a linear anneal of anneal_steps; a cycle without a pass is followed by one at
    # restart_peak times the peak, up to max_steps (then the failed check is reported and the
    # regime gate decides).
    check_every: int = 50
    check_problems: int = 64
    check_threshold: float = 0.98
    cycle_steps: int = 600
    anneal_steps: int = 100
    restart_peak: float = 0.5
    max_steps: int = 1500
    # Attempts at a base model: an SFT that reaches max_steps without passing its check is
    # discarded and the whole base model (initialization, drill, SFT corpus) is built again from
    # the next attempt's seed (:func:`attempt_seed`), as a stalled pretraining run is restarted
    # from another seed. 1: one attempt (a failed check is reported and the regime gate decides).
    sft_attempts: int = 1

    @classmethod
    def from_dict(cls, d: dict, section: str = "base_model") -> BaseModelConfig:
        """From the ``base_model`` section (plus the replicate's seed): an unknown key is an error."""
        cfg = from_section(cls, d, section)
        if cfg.task not in TASKS:
            raise ValueError(f"config key '{section}.task': {cfg.task!r} is not one of {sorted(TASKS)}")
        if cfg.sft_attempts < 1:
            raise ValueError(f"config key '{section}.sft_attempts': {cfg.sft_attempts} is not at least 1")
        if not 0 < cfg.restart_peak <= 1:
            raise ValueError(f"config key '{section}.restart_peak': {cfg.restart_peak} is not in (0, 1]")
        if not 0 <= cfg.hint_following <= 1:
            raise ValueError(f"config key '{section}.hint_following': {cfg.hint_following} is not in [0, 1]")
        if cfg.task == "families" and cfg.unhinted_rare_accuracy != 1:
            raise ValueError(f"config key '{section}.unhinted_rare_accuracy': the families task has no "
                             "misexecuted traces (leave it at 1)")
        if not 0 <= cfg.practice_random_terms <= 1:
            raise ValueError(f"config key '{section}.practice_random_terms': {cfg.practice_random_terms} is not in "
                             "[0, 1]")
        if cfg.task != "families" and cfg.practice_random_terms != 0:
            raise ValueError(f"config key '{section}.practice_random_terms': only the families task has it "
                             "(leave it at 0)")
        if not 0 <= cfg.unhinted_rare_accuracy <= 1:
            raise ValueError(f"config key '{section}.unhinted_rare_accuracy': {cfg.unhinted_rare_accuracy} is not in "
                             "[0, 1]")
        return cfg


def attempt_seed(seed: int, attempt: int) -> int:
    """The seed of a base model's ``attempt``-th build (1: the replicate's own seed). A million
    apart, so an attempt's seed is never another replicate's and reads as its own: seed 11's
    second attempt is 1000011."""
    if attempt < 1:
        raise ValueError(f"attempt {attempt}: attempts count from 1")
    return seed + 1_000_000 * (attempt - 1)


# The organism's tasks, by the name `base_model.task` gives: modules with the same names.
TASKS = {"single_family": "nudgerl.organism.task", "families": "nudgerl.organism.families"}


def task_module(cfg: BaseModelConfig):
    """The module of ``cfg``'s task (:mod:`nudgerl.organism.task` or :mod:`~nudgerl.organism.families`)."""
    import importlib

    return importlib.import_module(TASKS[cfg.task])


def record_task(record: dict):
    """The task module an organism problem record comes from (a families record names its family)."""
    import importlib

    return importlib.import_module(TASKS["families" if "family" in record else "single_family"])


def record_rare_strategy(record: dict) -> str:
    """The always-right strategy of an organism problem record: its family's, or the single one."""
    if "rare_strategy" in record:
        return record["rare_strategy"]
    from nudgerl.organism.task import RARE_CORRECT_STRATEGY

    return RARE_CORRECT_STRATEGY


# What phase 1 (the arithmetic drill) depends on, and nothing else: the SFT mixture is not
# among them, so the regime map's base models of one replicate seed share one drilled model.
DRILL_KEYS = ("seed", "task", "arithmetic_drills", "drill_epochs", "batch_size", "learning_rate", "warmup_steps",
              "weight_decay", "hidden_size", "intermediate_size", "num_layers", "num_heads")


def drill_config(cfg: BaseModelConfig) -> dict:
    import torch

    out = {**{k: getattr(cfg, k) for k in DRILL_KEYS}, "threads": torch.get_num_threads()}
    if cfg.task == "single_family":  # drilled folders from before the families task have no "task"
        del out["task"]
    return out
