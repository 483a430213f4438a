"""The workflow's plan (:class:`nudgerl.plan.workflow_plan.WorkflowPlan`): what the Snakemake rules
build, derived from the config alone; one module per concern."""
