"""RL training runs (workflow/rules/train.smk): GRPO (TRL's GRPOTrainer with the grader as
reward), POPE (oracle prefixes in the prompt) and NudgeRL (a GRPOTrainer subclass)."""
