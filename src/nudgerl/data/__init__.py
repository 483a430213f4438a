"""The DAG's first box (workflow/rules/data.smk): real datasets as problem files, and the
prompt templates every stage formats problems with."""
