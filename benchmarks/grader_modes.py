"""Where the two grader modes disagree, and which one is right.

    python benchmarks/grader_modes.py [--out benchmarks/grader_modes.json] [--limit N]

``standard`` is the pipeline's grader (the last ``<SOLUTION>`` region, boxed answers first);
``authors`` is the NudgeRL authors' rule (math-verify's ``parse`` over the whole completion
and the gold, then ``verify``). Two measurements, each with a known right verdict:

1. **Benchmark golds.** Every gold the pipeline grades against (AIME24, AIME25, AMC23,
   MATH-500 level 5, Apex; and the first 250 DAPO training problems, what the training
   reward sees), written into completions of the formats the authors' prompts produce: the
   answer between the SOLUTION tags (tight, on its own lines, in ``$...$``, boxed, in a
   sentence) after a working-out with other numbers in it, and a boxed answer without tags.
   Each right completion has a wrong twin whose region holds another answer while its
   working-out shows the gold. Per mode: how many it grades right, its false negatives and
   false positives; between the modes: how often they disagree, and who is right then.
2. **Constructed cases.** Single completions built to show each kind of disagreement (and
   one where the standard mode is the one that errs), with both verdicts.

Writes the numbers to ``--out`` (JSON) and a markdown summary beside it (``.md``).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = Path("/work/shared/data/benchmarks")
# (name, file, filter on a row, how many rows: None = all)
GOLD_SETS = [
    ("aime24", "aime24.jsonl", None, None),
    ("aime25", "aime25.jsonl", None, None),
    ("amc23", "amc23.jsonl", None, None),
    ("math500_l5", "math500.jsonl", lambda r: r.get("level") == 5, None),
    ("apex", "apex_shortlist.jsonl", None, None),
    ("dapo_train_250", "dapo_math_17k.jsonl", None, 250),
]
MODES = ("standard", "authors")
WORKING = "<start_working_out>We compute step by step: 6 * 7 = 42, then 3 + 4 = 7.<end_working_out>\n"
RIGHT_FORMATS = {
    "solution_tight": lambda a: f"{WORKING}<SOLUTION>{a}</SOLUTION>",
    "solution_lines": lambda a: f"{WORKING}<SOLUTION>\n{a}\n</SOLUTION>",
    "solution_dollars": lambda a: f"{WORKING}<SOLUTION>${a}$</SOLUTION>",
    "solution_boxed": lambda a: f"{WORKING}<SOLUTION>\\boxed{{{a}}}</SOLUTION>",
    "solution_sentence": lambda a: f"{WORKING}<SOLUTION>The final answer is ${a}$.</SOLUTION>",
    "boxed_no_tags": lambda a: f"We compute step by step: 6 * 7 = 42. So the answer is \\boxed{{{a}}}.",
}


def wrong_twin(gold: str, fmt: str) -> str:
    """A completion of the same format whose answer is not the gold, while its working-out
    shows the gold (a first attempt the model then revised)."""
    wrong = str(int(gold) + 1) if re.fullmatch(r"-?\d+", gold.strip()) else f"{gold} + 1"
    right = RIGHT_FORMATS[fmt](wrong)
    first_try = f"A first attempt gives {gold}, but it misses a case."
    if right.startswith(WORKING):
        return right.replace(WORKING, f"<start_working_out>{first_try}<end_working_out>\n", 1)
    return f"{first_try} {right}"


# Each: what it shows, the completion, the gold, the right verdict.
CASES = [
    ("answer between tight tags (the format the authors' prompt asks for)",
     WORKING + "<SOLUTION>42</SOLUTION>", "42", 1.0),
    ("the gold in the working-out, another answer in the solution",
     "<start_working_out>6*7 = 42<end_working_out><SOLUTION>41</SOLUTION>", "42", 0.0),
    ("a boxed first guess in the working-out, the right answer in the solution",
     "<start_working_out>first guess \\boxed{5}, but it is 4<end_working_out>\n<SOLUTION>\n4\n</SOLUTION>", "4", 1.0),
    ("a tuple gold written as bare LaTeX, answered right",
     WORKING + "<SOLUTION>\n(3, \\frac{\\pi}{2})\n</SOLUTION>", "\\left( 3, \\frac{\\pi}{2} \\right)", 1.0),
    ("a tuple gold, answered with its first coordinate only",
     "The answer is 3", "\\left( 3, \\frac{\\pi}{2} \\right)", 0.0),
    ("a bare LaTeX gold (7 pi), answered 7",
     WORKING + "<SOLUTION>\n7\n</SOLUTION>", "7\\pi", 0.0),
    ("a revised answer: the last SOLUTION region counts",
     "<SOLUTION>\n41\n</SOLUTION> Wait, I dropped a case. <SOLUTION>\n42\n</SOLUTION>", "42", 1.0),
    ("a unit after the number, tight tags",
     WORKING + "<SOLUTION>12 cm</SOLUTION>", "12", 1.0),
    ("an interval answer, tight tags",
     WORKING + "<SOLUTION>(3,4]</SOLUTION>", "(3,4]", 1.0),
    ("the answer region followed by 4,700 characters of text (evaluation sets no stop string)",
     WORKING + "<SOLUTION>\n42\n</SOLUTION>\n" + "Let me double-check the arithmetic once more. " * 100, "42", 1.0),
    ("the standard mode's blind spot: the answer written after a SOLUTION region that holds none",
     WORKING + "<SOLUTION>see below</SOLUTION>\nThe answer is 42.", "42", 1.0),
    ("a region cut off by the token limit (no closing tag): both miss it",
     WORKING + "<SOLUTION>42", "42", 1.0),
]


def load_golds(limit: int | None = None) -> dict[str, list[str]]:
    sets = {}
    for name, file, keep, size in GOLD_SETS:
        path = BENCHMARKS / file
        if not path.exists():
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if keep is None or keep(r)][:size]
        sets[name] = [r["answer"] for r in rows][:limit]
    return sets


def grade_all(items: list[tuple[str, str]]) -> dict[str, list[float]]:
    from nudgerl.evaluation.grading import grade

    return {mode: [grade(c, g, mode=mode) for c, g in items] for mode in MODES}


def gold_measurement(sets: dict[str, list[str]]) -> dict:
    items, labels = [], []  # labels: (set, format, truth)
    for name, golds in sets.items():
        for gold in golds:
            for fmt, make in RIGHT_FORMATS.items():
                items += [(make(gold), gold), (wrong_twin(gold, fmt), gold)]
                labels += [(name, fmt, 1.0), (name, fmt, 0.0)]
    verdicts = grade_all(items)
    per_mode = {mode: Counter() for mode in MODES}
    per_format = {fmt: {mode: Counter() for mode in MODES} for fmt in RIGHT_FORMATS}
    per_set = {name: {mode: Counter() for mode in MODES} for name in sets}
    disagree = Counter()
    examples = []
    for i, (name, fmt, truth) in enumerate(labels):
        got = {mode: verdicts[mode][i] for mode in MODES}
        for mode in MODES:
            outcome = "right" if got[mode] == truth else ("false_negative" if truth else "false_positive")
            for counter in (per_mode[mode], per_format[fmt][mode], per_set[name][mode]):
                counter[outcome] += 1
        if got["standard"] != got["authors"]:
            winner = next(m for m in MODES if got[m] == truth)
            disagree[f"{winner}_right"] += 1
            if len(examples) < 12 and all(e["format"] != fmt or e["truth"] != truth for e in examples):
                examples.append({"set": name, "format": fmt, "truth": truth, "gold": items[i][1],
                                 "completion": items[i][0], **got})
    total = len(items)
    return {
        "golds": {name: len(golds) for name, golds in sets.items()},
        "completions": total,
        "per_mode": {m: dict(c) for m, c in per_mode.items()},
        "per_format": {f: {m: dict(c) for m, c in v.items()} for f, v in per_format.items()},
        "per_set": {s: {m: dict(c) for m, c in v.items()} for s, v in per_set.items()},
        "disagreements": {"count": sum(disagree.values()), "share": round(sum(disagree.values()) / total, 4),
                          **dict(disagree)},
        "examples": examples,
    }


def case_measurement() -> list[dict]:
    verdicts = grade_all([(c, g) for _, c, g, _ in CASES])
    return [{"case": what, "gold": gold, "truth": truth, "completion": completion,
             **{mode: verdicts[mode][i] for mode in MODES}}
            for i, (what, completion, gold, truth) in enumerate(CASES)]


def markdown(result: dict) -> str:
    g = result["gold_completions"]
    lines = [
        "# Grader modes: standard (ours) vs authors (math-verify over the whole completion)",
        "",
        f"Golds: {', '.join(f'{k} {v}' for k, v in g['golds'].items())}; {g['completions']} completions "
        f"(each gold in {len(RIGHT_FORMATS)} formats, right and wrong).",
        "",
        "| mode | right | false negatives | false positives |",
        "|---|---|---|---|",
    ]
    for mode, c in g["per_mode"].items():
        lines.append(f"| {mode} | {c.get('right', 0)} | {c.get('false_negative', 0)} | {c.get('false_positive', 0)} |")
    d = g["disagreements"]
    lines += ["", f"Disagreements: {d['count']} of {g['completions']} ({100 * d['share']:.1f} %); standard right in "
              f"{d.get('standard_right', 0)}, authors right in {d.get('authors_right', 0)}.", "",
              "| format | standard right | authors right |", "|---|---|---|"]
    for fmt, v in g["per_format"].items():
        n = sum(v["standard"].values())
        lines.append(f"| {fmt} | {v['standard'].get('right', 0)}/{n} | {v['authors'].get('right', 0)}/{n} |")
    lines += ["", "| constructed case | gold | right | standard | authors |", "|---|---|---|---|---|"]
    for c in result["cases"]:
        lines.append(f"| {c['case']} | `{c['gold']}` | {c['truth']:g} | {c['standard']:g} | {c['authors']:g} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "grader_modes.json"))
    ap.add_argument("--limit", type=int, default=None, help="golds per set (default: all)")
    args = ap.parse_args()
    result = {"gold_completions": gold_measurement(load_golds(args.limit)), "cases": case_measurement()}
    out = Path(args.out)
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
