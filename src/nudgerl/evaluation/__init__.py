"""Sampling and grading a policy (workflow/rules/base.smk, eval.smk, the curve rules):
the one grader, batched sampling, benchmark evaluation and pass@k, checkpoint curves,
the base model's diagnosis and regime gate, strategy labels of sampled traces."""
