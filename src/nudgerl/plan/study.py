"""The study's extra tables (study.smk; config `study`, organism only): exploration success on
two disjoint seed sets, and whether RL works at all in the regime map's common cells.
"""

from __future__ import annotations


class PlanStudy:
    """The study of one config; STUDY is None (and the helpers unusable) without a `study` section.
    ``paths``: nudgerl.plan.paths.PlanPaths."""

    def __init__(self, config: dict, paths):
        self.STUDY = config.get("study") if paths.TASK == "organism" else None
        self.STUDY_SEED_SET_ARGS = self.STUDY_COMMON_SHARES = self.STUDY_RL_WORKS_METHOD = None
        if self.STUDY:
            # `seed-set-agreement --seed-sets`: each set comma-separated
            self.STUDY_SEED_SET_ARGS = " ".join(",".join(map(str, s)) for s in self.STUDY["seed_sets"])
            self.STUDY_COMMON_SHARES = list(self.STUDY["common_shares"])
            self.STUDY_RL_WORKS_METHOD = self.STUDY.get("rl_works_method", "grpo8")
        self._results = paths.RESULTS

    def study_tables(self) -> list[str]:
        """The study's own tables (beyond the default's outputs and the regime map's)."""
        if not self.STUDY:
            return []
        return [f"{self._results}/tables/{name}.{ext}" for name in ("seed_set_agreement", "rl_works")
                for ext in ("csv", "md", "html")]
