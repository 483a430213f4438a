"""The CPU model organism (workflow/rules/data.smk, base.smk): a synthetic task whose strategies
are known, its tokenizer, and the base model SFT'd from scratch per replicate."""
