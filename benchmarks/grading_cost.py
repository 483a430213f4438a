"""Per-item cost of :func:`nudgerl.evaluation.grading.grade`, the call every rollout and every eval sample makes.

    python benchmarks/grading_cost.py [--repeats 3] [--out benchmarks/grading_cost.json]

Workloads (each item graded once per repeat; the best repeat is reported, to damp
noise from other jobs on the machine; CPU time, this process's plus its grading
processes', is the steadier number on a shared machine):
- ``organism``: completions in the CPU model organism's format, half right, half wrong
  (what the embedded default's training and evaluation grade);
- ``benchmarks``: every AIME24/AIME25/AMC23/MATH500 gold, boxed at the end of a short
  solution, graded against its own gold and against a wrong gold.

Paths: ``in_process`` (the default on a main thread: signal-bounded) and ``worker``
(``isolate=True``: the persistent worker process that bounds time anywhere). A grader
without the ``isolate`` argument (older code) is measured on its only path.

``hostile``: completions only a time limit ends (or that must be read in bounded time),
graded once each at ``--hostile-limit`` seconds on both paths, in order: the seconds from
call to outcome. On the worker path a time-out kills the process, and the next item waits
for its replacement's start (outside that item's limit), as a caller's loop would.
tests/test_grading.py asserts only that these items end (hang guards) and what they score;
how long they take is this figure.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import random
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = Path("/work/shared/data/benchmarks")


def organism_items(n: int = 400) -> list[tuple[str, str]]:
    rng = random.Random(0)
    items = []
    for i in range(n):
        answer = rng.randint(0, 999)
        shown = answer if i % 2 == 0 else answer + 1
        text = f"strategy : difference table . compute : 3 + 4 = 7 . answer : \\boxed{{ {shown} }}"
        items.append((text, str(answer)))
    return items


def benchmark_items() -> list[tuple[str, str]]:
    items = []
    for name in ("aime24", "aime25", "amc23", "math500"):
        path = BENCHMARKS / f"{name}.jsonl"
        if not path.exists():
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for r in rows:
            text = f"We simplify step by step and check the cases. So the final answer is \\boxed{{{r['answer']}}}."
            items.append((text, r["answer"]))
            items.append((text, "7" if r["answer"] != "7" else "8"))
    return items


def worker_cpu_seconds() -> float:
    """CPU seconds used so far by this process's grading processes (Linux /proc)."""
    try:
        from nudgerl.evaluation import grading
    except ImportError:
        return 0.0
    pool = getattr(grading, "_POOL", None)
    total = 0.0
    for worker in list(pool._idle) if pool is not None else []:
        fields = Path(f"/proc/{worker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


HOSTILE = {
    "power_tower": "\\boxed{10^{10^{10^{10}}}}",
    "billion_digit_power": "\\boxed{123456789^{123456789}}",
    "deep_fraction": "\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}",
    "one_mb_answer_at_the_end": "x" * 1_000_000 + " so \\boxed{5}",
    "unclosed_solution_tags": "<SOLUTION>" * 20_000 + "5",
}


def hostile(limit: float, paths: dict) -> dict:
    """Seconds from call to outcome of each HOSTILE completion (gold "5"), per path."""
    from nudgerl.evaluation.grading import judge

    result = {"time_limit_seconds": limit}
    for path, kwargs in paths.items():
        rows = {}
        for name, text in HOSTILE.items():
            t0 = time.perf_counter()
            outcome = judge(text, "5", time_limit=limit, **kwargs)
            rows[name] = {"outcome": outcome, "seconds": round(time.perf_counter() - t0, 3)}
        result[path] = rows
    return result


def measure(grade, items, repeats: int, **kwargs) -> dict:
    """Best-of-repeats wall and CPU milliseconds per item (CPU: this process + its graders)."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        t0, c0, w0 = time.perf_counter(), time.process_time(), worker_cpu_seconds()
        for completion, gold in items:
            grade(completion, gold, **kwargs)
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0 + worker_cpu_seconds() - w0)
    per_item = lambda seconds: round(1000 * seconds / len(items), 3)  # noqa: E731
    return {"items": len(items), "wall_ms_per_item": per_item(best_wall), "cpu_ms_per_item": per_item(best_cpu)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "grading_cost.json"))
    ap.add_argument("--hostile-limit", type=float, default=1.0,
                    help="time limit (s) for the hostile completions (tests/test_grading.py's)")
    args = ap.parse_args()
    from nudgerl.evaluation.grading import grade

    workloads = {"organism": organism_items(), "benchmarks": benchmark_items()}
    paths = {"in_process": {}}
    if "isolate" in inspect.signature(grade).parameters:
        paths = {"in_process": {"isolate": False}, "worker": {"isolate": True}}
    grade("\\boxed{1}", "1")  # imports and math-verify's lazy regexes, not per-item cost
    result = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "repeats": args.repeats,
        "results": {
            path: {name: measure(grade, items, args.repeats, **kw) for name, items in workloads.items()}
            for path, kw in paths.items()
        },
    }
    if "worker" in paths:
        from nudgerl.evaluation.grading import TIME_LIMIT_SECONDS

        # Starting (or restarting, after a time-out kills one) a worker: paid once, not per item.
        from nudgerl.evaluation import grading

        t0 = time.perf_counter()
        grading.shutdown_workers()
        grade("\\boxed{1}", "1", isolate=True)
        result["worker_start_seconds"] = round(time.perf_counter() - t0, 3)
        result["time_limit_seconds"] = TIME_LIMIT_SECONDS
        result["hostile"] = hostile(args.hostile_limit, paths)
    text = json.dumps(result, indent=2)
    print(text)
    Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
