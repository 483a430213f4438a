"""The organism's width against another, side by side: what one training step and one sampling
call cost at each, in one process, one torch thread.

    python benchmarks/organism_width.py                      # the config's width vs 128 wide, ~2 min
    python benchmarks/organism_width.py --against 96 288 3 6

Both models are randomly initialised (speed does not depend on the weights) with the organism
tokenizer's vocabulary, and do the work `benchmarks/efficiency.py` times: the forward and
backward pass of GRPO's policy loss over one training micro-batch, and `model.generate` at the
evaluation batch. Each round times both widths alternately (CPU seconds: a slow spell of the
shared machine hits both); the ratio is the median over rounds of the other width's seconds over
the config's. Writes ``benchmarks/organism_width.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "src"))

from efficiency import cpu_seconds, default_shapes, make_model, sampling_work, training_work  # noqa: E402


def side_by_side(ours: dict, other: dict, repeats: int) -> dict:
    """Seconds of each kind of work at both widths, and other / ours per round (median, range)."""
    works = {}
    for name, shapes in (("ours", ours), ("other", other)):
        model = make_model(shapes)
        works[name] = {"training step": training_work(model, shapes), "sampling call": sampling_work(model.eval(), shapes)}
    out = {}
    for kind in ("training step", "sampling call"):
        rounds = [(cpu_seconds(works["ours"][kind]), cpu_seconds(works["other"][kind])) for _ in range(repeats)]
        ratios = [o / u for u, o in rounds]
        out[kind] = {"seconds": statistics.median(u for u, _ in rounds),
                     "other_seconds": statistics.median(o for _, o in rounds),
                     "speedup": statistics.median(ratios), "speedup_range": [min(ratios), max(ratios)]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "config" / "config.yaml"))
    ap.add_argument("--against", nargs=4, type=int, default=[128, 384, 3, 8],
                    metavar=("HIDDEN", "INTERMEDIATE", "LAYERS", "HEADS"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out-prefix", default=str(REPO / "benchmarks" / "organism_width"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    ours = default_shapes(yaml.safe_load(Path(args.config).read_text()))
    other = {**ours, **dict(zip(("hidden", "intermediate", "layers", "heads"), args.against))}
    result = side_by_side(ours, other, args.repeats)
    from nudgerl.io import code_version

    shape = lambda s: f"{s['hidden']} wide, {s['layers']} layers, {s['heads']} heads, MLP {s['intermediate']}"  # noqa: E731
    record = {"command": " ".join(["python", "benchmarks/organism_width.py", *(argv or sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "code_version": code_version(),
              "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "ours": ours, "other": other, "repeats": args.repeats, "result": result}
    lines = [f"# The organism's width side by side: {shape(ours)} (config) vs {shape(other)}", "",
             f"`{record['command']}` ({record['date']}, torch CPU capability {record['torch_cpu_capability']}); "
             f"one torch thread, CPU seconds, median of {args.repeats} alternating rounds. Training step: forward + "
             f"backward of GRPO's policy loss over {ours['train_batch']} sequences of "
             f"{ours['prompt_tokens'] + ours['new_tokens']} tokens; sampling call: `generate` of "
             f"{ours['new_tokens']} tokens for {ours['sample_batch']} rows.", "",
             "| work | config (s) | other (s) | other / config (range) |", "|---|---|---|---|"]
    for kind, r in result.items():
        lo, hi = r["speedup_range"]
        lines.append(f"| {kind} | {r['seconds']:.3f} | {r['other_seconds']:.3f} | {r['speedup']:.2f}x ({lo:.2f}-{hi:.2f}) |")
    out = Path(args.out_prefix)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
