"""Where a base model's execution goes wrong: per strategy, the validation problems whose greedy
trace (hinted, the strategy's choice given, as the SFT's execution check writes it) differs from
the reference, and the step at which each first differs. Written to read a stalled SFT (one that
reached its step cap without passing its check): is it one step or the whole strategy?

    python benchmarks/execution_errors.py --model DIR [--seed S] [--problems 100]

``--seed``: the seed the check set was drawn from (the build's ``model_seed`` in
``sft_report.json``, the default)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def first_wrong_step(got: str, reference: str) -> int | None:
    """Index of the first " . "-separated step of ``got`` that differs from ``reference``'s
    (step 0: the strategy's choice), or None when the traces are equal."""
    if got == reference:
        return None
    g, r = got.split(" . "), reference.split(" . ")
    return next((i for i in range(min(len(g), len(r))) if g[i] != r[i]), min(len(g), len(r)))


def main(argv=None) -> int:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from nudgerl.organism import families as spec
    from nudgerl.organism.checks import greedy_traces

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--seed", type=int, help="check-set seed (default: model_seed from sft_report.json)")
    ap.add_argument("--problems", type=int, default=100)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    seed = args.seed
    if seed is None:
        report = Path(args.model) / "sft_report.json"
        if not report.exists():
            raise SystemExit(f"{report}: missing; pass --seed")
        seed = json.loads(report.read_text())["model_seed"]
    tok = AutoTokenizer.from_pretrained(args.model)
    model = LlamaForCausalLM.from_pretrained(args.model).eval()
    problems = spec.validation_problems(seed, args.problems)
    print(f"{args.model}: check-set seed {seed}, {len(problems)} problems")
    for name in spec.STRATEGIES:
        # the hinted half of the SFT's execution check, as it runs (nudgerl.organism.checks)
        start, texts = greedy_traces(model, tok, problems, name, given_choice=True, spec=spec)
        steps, families = Counter(), Counter()
        for p, t in zip(problems, texts):
            i = first_wrong_step(f"{start} {t.strip()}", spec.trace(p.terms, name))
            if i is not None:
                steps[i] += 1
                families[p.family] += 1
        wrong = sum(steps.values())
        detail = (f"; first wrong step {dict(sorted(steps.items()))} (0: the choice); by family {dict(families)}"
                  if wrong else "")
        print(f"{name}: {wrong} of {len(problems)} wrong{detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
