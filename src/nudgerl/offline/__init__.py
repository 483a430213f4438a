"""What is computed once, before any RL run (workflow/rules/pools.smk, dvc.yaml): strategy
pools and oracle solutions from a helper LLM (DVC stages, cached and shared), and the
top-ranked ordering of a pool by a replicate's base policy."""
