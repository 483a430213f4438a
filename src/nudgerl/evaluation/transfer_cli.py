"""Subcommands of the transfer probe (:mod:`nudgerl.evaluation.transfer`), registered with the
evaluation stage's: ``transfer-probe`` measures one model, ``transfer-page`` writes the
generated ``benchmarks/transfer.md`` from probe results."""

from __future__ import annotations

import shlex

from nudgerl.arguments import add_command, set_threads


def cmd_transfer_probe(args) -> None:
    set_threads(args.threads)
    from nudgerl.evaluation.transfer import run_probe

    result = run_probe(args.model, args.problems, args.out, pool_path=args.pool, hint=args.hint, style=args.style,
                       trajectories=args.trajectories, samples=args.samples, fraction=args.fraction, seed=args.seed,
                       hard_only=not args.all_problems, max_problems=args.max_problems,
                       probe_per_problem=args.probe_per_problem,
                       temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                       batch_size=args.batch_size, level=args.level, n_boot=args.bootstrap_samples,
                       label=args.label)
    s = result["summary"]
    print(f"{result['label']}: n = {s['problems']} problems, {s['trajectories']} trajectories; transfer whole "
          f"{s['whole']['transfer']} [{s['whole']['low']}, {s['whole']['high']}], hint-changed tokens "
          f"{s['changed']['transfer']} [{s['changed']['low']}, {s['changed']['high']}]; hinted success "
          f"{s['hinted_success_rate']}, hint-free {s['hint_free_success_rate']}")


def cmd_transfer_page(args) -> None:
    from nudgerl.evaluation.transfer import write_page

    command = shlex.join(["nudgerl", "transfer-page", "--probes", *args.probes, "--out", args.out])
    write_page(args.probes, args.out, command)
    print(f"wrote {args.out}")


def register(subparsers) -> None:
    from nudgerl.evaluation.transfer import STYLES

    p = add_command(subparsers, "transfer-probe", cmd_transfer_probe,
                    "what a gradient step on hinted successes gives the hint-free policy")
    p.add_argument("--model", required=True, help="a model folder (the organism's base model, a converted GGUF)")
    p.add_argument("--problems", required=True, help="problems JSONL (id, problem, answer; the organism's terms, hard)")
    p.add_argument("--pool", help="pools JSONL: every hint of a problem's pool (default: --hint on every problem)")
    p.add_argument("--hint", help="the hint on every problem (default: each problem's own always-right strategy's)")
    p.add_argument("--style", choices=STYLES, default="organism",
                   help="organism: the organism's prompt and hint line; words: the problem and hint in English")
    p.add_argument("--trajectories", choices=("successes", "all"), default="successes",
                   help="probe the hinted rollouts the grader marks right, or every hinted rollout")
    p.add_argument("--fraction", type=float, default=0.2, help="share of tokens counted as hint-changed")
    p.add_argument("--samples", type=int, default=8, help="rollouts per prompt, hinted and hint-free")
    p.add_argument("--seed", type=int, default=0, help="sampling (hinted: seed, hint-free: seed + 1) and bootstrap")
    p.add_argument("--max-problems", type=int, help="probe only the first N (distinct, hard) problems")
    p.add_argument("--probe-per-problem", type=int,
                   help="probe at most N trajectories of a problem (all samples still count in the success rates)")
    p.add_argument("--all-problems", action="store_true", help="easy problems too (default: hard ones only)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, help="default: the longest trace of the problems' task")
    p.add_argument("--batch-size", type=int, default=64, help="sequences per generate call")
    p.add_argument("--level", type=float, default=0.95, help="bootstrap interval level")
    p.add_argument("--bootstrap-samples", type=int, default=2000)
    p.add_argument("--label", help="the model's name in the page (default: the folder's name)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, help="result JSON (a provenance sidecar is written beside it)")

    p = add_command(subparsers, "transfer-page", cmd_transfer_page,
                    "write benchmarks/transfer.md from transfer-probe results")
    p.add_argument("--probes", nargs="+", required=True, help="transfer-probe result JSONs")
    p.add_argument("--out", required=True)
