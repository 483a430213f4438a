import json
import os

# What the rules build, derived from the config: nudgerl.workflow_plan (unit-tested in
# tests/test_workflow_plan.py). Its names (RESULTS, METHODS, rule_resources, ...) are bound
# here for every rule file; this file keeps what needs Snakemake itself (wildcard
# constraints, the scheduler settings, report entries).
from nudgerl.workflow_plan import WorkflowPlan

PLAN = WorkflowPlan(config)
globals().update(PLAN.rule_names())


wildcard_constraints:
    model=r"[A-Za-z0-9_.-]+",
    seed=r"\d+",
    n=r"\d+",
    method=r"base|grpo\d+|grpo\d+_eps[0-9.]+|pope\d+|nudgerl\d+(_[a-z0-9.]+)?",
    eps=r"[0-9]+(\.[0-9]+)?",
    ablation=r"pdrop|hint_sampling|distill",
    share=r"[0-9.]+",


def scheduler_settings():
    """(where, "name=raw value") of every resource a profile or the command line set, before
    Snakemake expands environment variables in them."""
    settings = workflow.resource_settings
    found = [("default-resources", arg) for arg in getattr(settings.default_resources, "args", [])]
    for rule, res in settings.overwrite_resources.items():
        args = res.args if hasattr(res, "args") else [f"{k}={v}" for k, v in res.items()]
        found += [(f"set-resources {rule}", arg) for arg in args]
    return found


def check_scheduler_placeholders():
    from nudgerl.config import ConfigError, resource_placeholders

    problems = resource_placeholders(scheduler_settings())
    if problems:
        raise ConfigError("unfilled scheduler settings, nothing was submitted:\n  - " + "\n  - ".join(problems))


# `snakemake --report` categories, numbered because the report lists them alphabetically.
REPORT_MAIN = "1. Main results"
REPORT_ABLATIONS = "2. Ablations"
REPORT_DIAGNOSTICS = "3. Diagnostics"
REPORT_COMPUTE = "4. Compute and audit"
REPORT_REGIME_MAP = "5. Regime map"


def report_labels(result):
    """A report entry's labels: the result's name (a string, or a function of the wildcards)
    and, for task: math, the model; the report lists these instead of file paths."""

    def labels(wildcards):
        name = result(wildcards) if callable(result) else result
        return {"Result": name, **({"Model": wildcards.model} if TASK == "math" else {})}

    return labels


def figure_report_outputs(name, caption, category, label=None):
    """A figure rule's outputs: the PNG (in the report, with its caption), PDF and plotted series."""
    return {
        "png": report(f"{RESULTS}/figures/{name}.png", caption=f"../report/{caption}.rst", category=category,
                      labels=report_labels(label or name)),
        "pdf": f"{RESULTS}/figures/{name}.pdf",
        "json": f"{RESULTS}/figures/{name}.json",
    }
