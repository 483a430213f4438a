"""From records to results (workflow/rules/report.smk, figures.smk, regime_map.smk): tables,
the paper's claims, figures, the regime map, compute accounting, the artifact audit, and
the HTML pages `snakemake --report` shows."""
