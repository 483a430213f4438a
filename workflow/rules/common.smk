import json
import os

RESULTS = "results"
SEEDS = config["seeds"]
BENCHMARKS = list(config["organism"]["benchmarks"])
GRPO_METHODS = [f"grpo{n}" for n in config["grpo"]["group_sizes"]]
METHODS = ["base", *GRPO_METHODS]
THREADS = config.get("threads_per_job", 1)


wildcard_constraints:
    seed=r"\d+",
    n=r"\d+",
    method=r"base|grpo\d+",


def section(name, **extra):
    """A config section as JSON for a rule's `params` (changes re-run the rule)."""
    return json.dumps({**config.get(name, {}), **extra}, sort_keys=True)


def benchmark_files():
    return expand(f"{RESULTS}/data/eval/{{bench}}.jsonl", bench=BENCHMARKS)


def model_dir(wildcards):
    if wildcards.method == "base":
        return f"{RESULTS}/models/base"
    return f"{RESULTS}/runs/{wildcards.method}/seed{wildcards.seed}/model"


def final_outputs():
    return [
        f"{RESULTS}/diagnostics/base_model.json",
        f"{RESULTS}/diagnostics/base_model.md",
        *expand(f"{RESULTS}/tables/table1.{{ext}}", ext=["csv", "md", "tex"]),
        f"{RESULTS}/figures/training_curves.png",
    ]
