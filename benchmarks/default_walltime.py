"""Wall time of the embedded default, cold, in a scratch copy of the workflow.

    python benchmarks/default_walltime.py [--configfile config/config.yaml] [--cores 2]

Writes benchmarks/default_walltime.json: total wall seconds, the per-rule sums of
Snakemake's own benchmark records (wall s, CPU s, max RSS), and CPU utilisation
(CPU seconds of all jobs / (wall seconds x cores)).
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configfile", default="config/config.yaml")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "default_walltime.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nudgerl-bench-") as tmp:
        work = Path(tmp)
        for name in ("Snakefile", "workflow", "config", "profiles", "dvc.yaml", "params.yaml"):
            src = REPO / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
        subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=work, check=True)
        t0 = time.perf_counter()
        proc = subprocess.run(["snakemake", "--cores", str(args.cores), "--configfile", args.configfile],
                              cwd=work, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        per_rule = defaultdict(lambda: {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "max_rss_mb": 0.0})
        for tsv in (work / "results" / "benchmarks").rglob("*.tsv"):
            rule = tsv.parent.name if tsv.parent.name != "benchmarks" else tsv.stem
            with open(tsv) as f:
                row = next(csv.DictReader(f, delimiter="\t"))
            r = per_rule[rule]
            r["jobs"] += 1
            r["wall_s"] += float(row["s"])
            r["cpu_s"] += float(row.get("cpu_time") or 0)
            r["max_rss_mb"] = max(r["max_rss_mb"], float(row.get("max_rss") or 0))
        cpu = sum(r["cpu_s"] for r in per_rule.values())
        tables = {p.name: p.read_text() for p in sorted((work / "results" / "tables").glob("*.md"))}
        tables["base_model.md"] = (work / "results" / "diagnostics" / "base_model.md").read_text()
    record = {
        "configfile": args.configfile,
        "cores": args.cores,
        "wall_seconds": round(wall, 1),
        "cpu_utilisation": round(cpu / (wall * args.cores), 3),
        "per_rule": per_rule,
        "machine": {"platform": platform.platform(), "cpus": __import__("os").cpu_count()},
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "tables": tables,
    }
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("wall_seconds", "cpu_utilisation")}))


if __name__ == "__main__":
    main()
