# The study (`snakemake study --cores 2 --configfile config/study.yaml`):
# everything the default leaves out, on more replicates. The default's whole matrix on the
# study's seeds (Table 1, claims, ablations and the eps_high sweep on `ablation_seeds`), the
# regime map, and two tables of its own: exploration success on two disjoint seed sets, and
# the common-regime check that RL works at all. Organism only; not part of `all`.
if TASK == "organism" and STUDY:

    rule seed_set_agreement:
        """Exploration success per method on each of two disjoint seed sets; do the intervals overlap?"""
        input:
            f"{RESULTS}/tables/exploration.csv",
        output:
            csv=f"{RESULTS}/tables/seed_set_agreement.csv",
            md=f"{RESULTS}/tables/seed_set_agreement.md",
            html=report(f"{RESULTS}/tables/seed_set_agreement.html", caption="../report/seed_set_agreement.rst",
                        category=REPORT_STUDY, labels=report_labels("Seed-set agreement")),
        params:
            seed_sets=STUDY_SEED_SET_ARGS,
            confidence=EXPLORATION_CONFIDENCE,
            prefix=table_prefix,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/study/seed_set_agreement.log",
        benchmark:
            f"{RESULTS}/benchmarks/study/seed_set_agreement.tsv"
        shell:
            "nudgerl seed-set-agreement --exploration {input} --seed-sets {params.seed_sets} "
            "--confidence {params.confidence} --out-prefix {params.prefix} > {log} 2>&1"

    rule rl_works:
        """In the regime map's common cells, every replicate's run ends above its own base model."""
        input:
            f"{RESULTS}/tables/regime_map.csv",
        output:
            csv=f"{RESULTS}/tables/rl_works.csv",
            md=f"{RESULTS}/tables/rl_works.md",
            html=report(f"{RESULTS}/tables/rl_works.html", caption="../report/rl_works.rst",
                        category=REPORT_STUDY, labels=report_labels("RL works (common regime)")),
        params:
            shares=STUDY_COMMON_SHARES,
            method=STUDY_RL_WORKS_METHOD,
            prefix=table_prefix,
        conda:
            "../envs/nudgerl.yaml"
        log:
            f"{RESULTS}/logs/study/rl_works.log",
        benchmark:
            f"{RESULTS}/benchmarks/study/rl_works.tsv"
        shell:
            "nudgerl rl-works --regime-map {input} --shares {params.shares} --method {params.method} "
            "--out-prefix {params.prefix} > {log} 2>&1"

    rule study:
        """`snakemake study`: the default's outputs on the study's seeds, the regime map, the study's tables."""
        input:
            final_outputs(),
            rules.regime_map.input,
            study_tables(),
