"""How long must GRPO train before its curve plateaus? Read from a pilot run's training curves.

    snakemake results/families_length_pilot/figures/training_curves.png --cores 2 --keep-going \
        --configfile config/families.yaml config/training_length_pilot.yaml
    python benchmarks/training_length.py --results results/families_length_pilot

The pilot (``config/training_length_pilot.yaml``) trains GRPO-8 far past the default's steps on
base-model seeds outside every final seed set and evaluates its checkpoints hint-free every
``eval.curve.every`` steps (``curves/grpo8/seed<k>/curve.jsonl``: pass@1 on the curve
benchmarks). The rule, fixed here before the pilot ran:

* a seed's curve is hint-free pass@1 over all the curve benchmarks' problems at each checkpoint
  (step 0 is its base model), averaged over the last ``--window`` checkpoints (1: none; a
  checkpoint's pass@1 from a few samples is noisy, and the highest of forty noisy values is
  biased upward);
* it *rose* when its highest value is at least ``--rise`` (0.2) above step 0 (0.2: the
  single-family task, where the one rare strategy solves every hard problem; the families task
  sets it to half of what one family found gives, ``config/training_length_pilot.yaml``);
* a risen curve's plateau step is the first checkpoint at which it reaches step 0 plus
  ``--fraction`` (0.9) of its rise;
* the training length is the largest plateau step over the seeds that rose, rounded up to a
  multiple of the checkpoint interval; a seed whose highest value is at its last checkpoint is
  flagged (it may still be rising, and the pilot was too short for it).

Seeds that never rose say how often GRPO-8 misses within the pilot's steps, not how long to
train. Writes ``<out-prefix>.json`` and ``<out-prefix>.md`` (default ``benchmarks/training_length``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def curve_of(path: Path) -> dict[int, float]:
    """step -> pass@1 over every curve benchmark's problems (c / n summed over problems)."""
    from nudgerl.io import read_jsonl

    c: dict[int, float] = {}
    n: dict[int, float] = {}
    for row in read_jsonl(path):
        for p in row["problems"]:
            c[row["step"]] = c.get(row["step"], 0) + p["c"] / p["n"]
            n[row["step"]] = n.get(row["step"], 0) + 1
    if not n:
        raise ValueError(f"{path}: no checkpoint rows")
    return {s: c[s] / n[s] for s in sorted(n)}


def running_mean(curve: dict[int, float], window: int) -> dict[int, float]:
    """Each checkpoint's value averaged with the ``window - 1`` checkpoints before it (fewer at
    the start; step 0 stays the base model's own value)."""
    steps = sorted(curve)
    return {s: sum(curve[t] for t in steps[max(0, i - window + 1):i + 1]) / (i + 1 - max(0, i - window + 1))
            for i, s in enumerate(steps)}


def plateau(curve: dict[int, float], rise: float, fraction: float) -> dict:
    steps = sorted(curve)
    base, top = curve[steps[0]], max(curve.values())
    out = {"base": base, "max": top, "final": curve[steps[-1]], "rose": top - base >= rise,
           "max_at_last_checkpoint": curve[steps[-1]] == top and top > base, "plateau_step": None}
    if out["rose"]:
        out["plateau_step"] = next(s for s in steps if curve[s] >= base + fraction * (top - base))
    return out


def training_length(rows: dict[int, dict], every: int) -> int | None:
    risen = [r["plateau_step"] for r in rows.values() if r["rose"]]
    return None if not risen else int(math.ceil(max(risen) / every) * every)


def markdown(curves: dict[int, dict[int, float]], rows: dict[int, dict], length, args, every: int,
             command: str) -> str:
    seeds = sorted(curves)
    steps = sorted({s for c in curves.values() for s in c})
    lines = [
        f"# Training length: GRPO-8's curve on `{args.results}`",
        "",
        f"`{command}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}). Hint-free pass@1 on the curve benchmarks "
        f"at every checkpoint (step 0: the base model), {len(seeds)} pilot seeds"
        + (f", each value the mean of its last {args.window} checkpoints" if args.window > 1 else "")
        + f". Rule (fixed before the pilot, this script's docstring): a curve rose when its highest value is "
        f">= {args.rise:g} above step 0; its "
        f"plateau step is the first checkpoint at step 0 + {args.fraction:g} of its rise; the training length is "
        f"the largest plateau step over the seeds that rose, rounded up to a multiple of {every}.",
        "",
        "| step | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---|" + "---|" * len(seeds),
    ]
    for st in steps:
        lines.append(f"| {st} | " + " | ".join("-" if st not in curves[s] else f"{curves[s][st]:.3f}" for s in seeds)
                     + " |")
    lines += ["", "| seed | step 0 | highest | final | rose | plateau step | highest at the last checkpoint |",
              "|---|---|---|---|---|---|---|"]
    for s in seeds:
        r = rows[s]
        lines.append(f"| {s} | {r['base']:.3f} | {r['max']:.3f} | {r['final']:.3f} | {'yes' if r['rose'] else 'no'} | "
                     f"{r['plateau_step'] if r['plateau_step'] is not None else '-'} | "
                     f"{'yes (may still be rising)' if r['max_at_last_checkpoint'] else 'no'} |")
    risen = sum(r["rose"] for r in rows.values())
    lines += ["", f"**Training length: {length if length is not None else 'undetermined'} steps** "
              f"({risen} of {len(seeds)} seeds rose within {max(steps)} steps)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True, help="the pilot's run folder, results/<run_name>")
    ap.add_argument("--method", default="grpo8")
    ap.add_argument("--rise", type=float, default=0.2)
    ap.add_argument("--fraction", type=float, default=0.9)
    ap.add_argument("--window", type=int, default=1, help="running mean over this many checkpoints (1: none)")
    ap.add_argument("--out-prefix", default=str(REPO / "benchmarks" / "training_length"))
    args = ap.parse_args(argv)
    from nudgerl.io import code_version

    paths = sorted(Path(args.results, "curves", args.method).glob("seed*/curve.jsonl"))
    if not paths:
        raise SystemExit(f"{args.results}/curves/{args.method}: no seed*/curve.jsonl (run the pilot first)")
    if args.window < 1:
        raise SystemExit(f"--window {args.window}: must be at least 1")
    raw = {int(p.parent.name.removeprefix("seed")): curve_of(p) for p in paths}
    curves = {s: running_mean(c, args.window) for s, c in raw.items()}
    steps = sorted({s for c in curves.values() for s in c})
    every = min(b - a for a, b in zip(steps, steps[1:])) if len(steps) > 1 else 1
    rows = {s: plateau(c, args.rise, args.fraction) for s, c in curves.items()}
    length = training_length(rows, every)
    out = Path(args.out_prefix)
    record = {"command": " ".join(["python", "benchmarks/training_length.py", *(argv or sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "code_version": code_version(),
              "rule": {"rise": args.rise, "fraction": args.fraction, "window": args.window, "every": every},
              "curves": {str(s): {str(k): v for k, v in c.items()} for s, c in raw.items()},
              "smoothed": {str(s): {str(k): v for k, v in c.items()} for s, c in curves.items()},
              "seeds": {str(s): r for s, r in rows.items()}, "training_length": length}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    out.with_suffix(".md").write_text(markdown(curves, rows, length, args, every, record["command"]))
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
