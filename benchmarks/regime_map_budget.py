"""The regime map's budget: `snakemake regime_map --cores 2`, cold, in a scratch copy.

    python benchmarks/regime_map_budget.py            # ~45-75 min on 2 cores
    python benchmarks/regime_map_budget.py --keep DIR # also keep its tables and figure

Writes ``benchmarks/regime_map.json`` and ``benchmarks/regime_map.md``: wall time against the
60-min target, CPU use, and the jobs' wall seconds per rule (from the rules' benchmark files).
Run it on an otherwise idle machine: other jobs on the same cores stretch every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import REPO, run_default  # noqa: E402

WALL_TARGET_S = 3600  # issue: the map, cold, within 60 min on 2 cores


def per_job_kind(results: Path) -> dict:
    """Wall and CPU seconds of the map's jobs, by kind (train_grpo8, curve, base model, ...),
    with the drilled models (phase 1 of the base models) the map's base models start from."""
    kinds = defaultdict(lambda: {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0})
    tsvs = [*(results / "benchmarks" / "regime_map").rglob("*.tsv"), *(results / "benchmarks" / "drilled_model").glob("*.tsv")]
    for tsv in tsvs:
        stem = tsv.stem
        kind = ("drilled_model" if tsv.parent.name == "drilled_model" else "curve" if stem.startswith("curve_")
                else "base_model" if stem.startswith("base") else "diagnose" if stem.startswith("diagnos")
                else stem.rsplit("_seed", 1)[0])
        row = tsv.read_text().splitlines()[1].split("\t")
        k = kinds[kind]
        k["jobs"] += 1
        k["wall_s"] = round(k["wall_s"] + float(row[0]), 1)
        k["cpu_s"] = round(k["cpu_s"] + float(row[-1] or 0), 1)
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]["wall_s"]))


def summary_markdown(res: dict) -> str:
    d = res["regime_map"]
    lines = [f"# Regime map budget ({res['date']}, {res['machine']['cpus']} CPUs, code {res['code_version']})", "",
             f"Command: `{res['command']}` (runs `snakemake regime_map --cores {d['cores']}` cold in a scratch copy)", "",
             "| figure | measured | target | met |", "|---|---|---|---|",
             f"| wall time, cold | {d['wall_seconds'] / 60:.1f} min | <= {WALL_TARGET_S / 60:.0f} min | {d['met']} |",
             f"| CPU use overall | {d['cpu_utilisation_overall']:.2f} of {d['cores']} cores | - | - |", "",
             "| jobs of kind | jobs | wall s (sum) | CPU s (sum, Snakemake's sampling) |", "|---|---|---|---|"]
    lines += [f"| {kind} | {k['jobs']} | {k['wall_s']:.0f} | {k['cpu_s']:.0f} |" for kind, k in res["per_job_kind"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configfile", nargs="+", default=["config/config.yaml"],
                    help="config files, later ones overlaying earlier (a test run: config/smoke.yaml + a small grid)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "regime_map.json"))
    ap.add_argument("--keep", help="copy the map's tables, figures and audit here")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = {}
    for path in args.configfile:
        config.update(yaml.safe_load((REPO / path).read_text()))  # run_name: the last file that sets it
    res = {"command": "python benchmarks/regime_map_budget.py --configfile " + " ".join(args.configfile),
           "date": time.strftime("%Y-%m-%d %H:%M %Z"),
           "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
           "code_version": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                          capture_output=True, text=True).stdout.strip()}
    with tempfile.TemporaryDirectory(prefix="nudgerl-regime-map-") as tmp:
        work = Path(tmp)
        res["regime_map"] = run_default(work, args.configfile, args.cores, config["run_name"], targets=("regime_map",),
                                        wall_target_s=WALL_TARGET_S)
        results = work / "results" / config["run_name"]
        res["per_job_kind"] = per_job_kind(results)
        res["tables"] = {p.name: p.read_text() for p in sorted((results / "tables").glob("regime_map*.md"))}
        if args.keep:
            for sub in ("tables", "figures", "audit"):
                for p in (results / sub).glob("regime_map*"):
                    Path(args.keep, sub).mkdir(parents=True, exist_ok=True)
                    shutil.copy(p, Path(args.keep, sub, p.name))
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    Path(args.out).with_suffix(".md").write_text(summary_markdown(res))
    print(summary_markdown(res))


if __name__ == "__main__":
    main()
