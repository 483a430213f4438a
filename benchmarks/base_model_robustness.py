"""Does the organism's base model converge for every seed and any float noise, and how far
inside the regime bounds does it land?

    python benchmarks/base_model_robustness.py                 # 5 seeds x torch threads {1, 2}
    python benchmarks/base_model_robustness.py --seeds 0 1 --threads 1

Builds each base model with the DAG's own commands (``nudgerl drill-base``, ``train-base
--drilled``, ``diagnose --train``, ``regime-gate`` with the default config's sections), so each
row is what a replicate of ``snakemake --cores 2`` would get on this machine. The torch thread
count changes the order of float summation (a stand-in for another CPU's kernels). Reports each
gate figure with its interval and its distance inside each bound in standard errors, and the
smallest distance over all rows (a bound the spread comes within 3 standard errors of must be
redesigned). Writes ``benchmarks/base_models.json`` and ``benchmarks/base_models.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _run(cmd: list[str], log: Path) -> float:
    """Run one pipeline command; its CPU seconds (user + system of the child)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "a") as f:
        subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def build(work: Path, config: dict, seed: int, threads: int) -> dict:
    """One base model, its diagnosis and regime verdict (the DAG's three rules)."""
    name = f"seed{seed}_threads{threads}"
    out, log = work / name, work / f"{name}.log"
    if (out / "regime.json").exists():  # finished in an earlier (interrupted) run of --work-dir
        return _row(out, seed, threads, None, json.loads((out / "model" / "sft_report.json").read_text())["seconds"])
    bench, train = work / "data" / "eval", work / "data" / "train.jsonl"
    if not bench.exists():
        # the DAG's own command and sorted-key params: the benchmarks are dealt in key order, so
        # the YAML's order (math500 before apex) would deal other problems than a replicate's
        _run(["nudgerl", "make-data", "--params", json.dumps(config["organism"], sort_keys=True),
              "--out-dir", str(work / "data")], work / "make-data.log")
    from nudgerl.organism.base_model import DRILL_KEYS
    from nudgerl.workflow_plan import rl_diagnosis_params

    drilled = work / "drilled" / name
    if not (drilled / "drill_report.json").exists():
        _run(["nudgerl", "drill-base", "--params", json.dumps({k: v for k, v in config["base_model"].items()
                                                               if k in DRILL_KEYS}, sort_keys=True),
              "--seed", str(seed), "--threads", str(threads), "--out-dir", str(drilled)], log)
    t0 = time.perf_counter()
    # sorted keys, as the DAG passes them: the order of the strategy-weight keys is part of the
    # SFT data draw, so only then is a row the model a replicate of `snakemake` gets
    sft_cpu = _run(["nudgerl", "train-base", "--params", json.dumps(config["base_model"], sort_keys=True), "--seed",
                    str(seed), "--threads", str(threads), "--drilled", str(drilled), "--out-dir", str(out / "model")],
                   log)
    wall = time.perf_counter() - t0
    ev = {k: v for k, v in config["eval"].items() if k != "curve"}
    # the benchmarks in the config's order, as the DAG passes them: samples are drawn across
    # problems in that order, so another order gives other samples (and other figures)
    files = [str(bench / f"{b}.jsonl") for b in config["organism"]["benchmarks"]]
    _run(["nudgerl", "diagnose", "--model", str(out / "model"), "--benchmarks", *files, "--train", str(train),
          "--rl-params", json.dumps(rl_diagnosis_params(config, seed), sort_keys=True),
          "--params", json.dumps({**ev, "seed": seed}, sort_keys=True), "--threads", str(threads),
          "--out", str(out / "diagnosis.json")], log)
    subprocess.run(["nudgerl", "regime-gate", "--diagnosis", str(out / "diagnosis.json"), "--regime",
                           json.dumps({**config["regime"], "gate": False}), "--out", str(out / "regime.json")],
                   check=True, capture_output=True, text=True, cwd=REPO)
    return _row(out, seed, threads, sft_cpu, wall)


def _row(out: Path, seed: int, threads: int, sft_cpu: float | None, wall: float) -> dict:
    """One table row from a finished build's regime verdict (CPU seconds: None when the build
    was read back from disk, where only the SFT's wall seconds are recorded)."""
    verdict = json.loads((out / "regime.json").read_text())
    return {"seed": seed, "threads": threads, "sft_cpu_s": None if sft_cpu is None else round(sft_cpu, 1),
            "sft_wall_s": round(wall, 1),
            "figures": {r["figure"]: r for r in verdict["figures"]}, "in_regime": verdict["in_regime"],
            "summary": verdict["summary"], "sft": verdict["sft"]}


def _bound(b: dict) -> str:
    return " and ".join(f"{'>=' if k == 'min' else '<='} {b[k]:g}" for k in ("min", "max") if b.get(k) is not None)


def margins(rows: list[dict], bounds: dict) -> dict:
    """Per bounded figure: the smallest distance inside its bound over all rows, in standard
    errors at the bound (nudgerl.algorithms.margin_in_se), and the row it came from."""
    out = {}
    for f in bounds:
        m = [(r["figures"][f]["margin_se"], f"seed {r['seed']}, threads {r['threads']}") for r in rows
             if r["figures"].get(f, {}).get("margin_se") is not None]
        low = min(m) if m else (None, None)
        out[f] = {"min_margin_se": low[0], "at": low[1], "values": [r["figures"][f]["value"] for r in rows]}
    return out


def markdown(rows: list[dict], config: dict) -> str:
    bounds = config["regime"]["bounds"]
    figs = list(bounds)
    conf = config["regime"].get("confidence", 0.95)
    lines = [
        "# Base-model robustness: seeds x torch threads",
        "",
        f"`python benchmarks/base_model_robustness.py` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); "
        "each row is one `nudgerl drill-base` + `train-base` + `diagnose` + `regime-gate` with the default config.",
        f"Figures on the hard training problems, sampled as RL samples them: value [{conf:.0%} interval, clustered by "
        "problem] (distance inside the bound, in standard errors at the bound). Bounds: "
        + "; ".join(f"`{f}` {_bound(bounds[f])}" for f in figs) + ".",
        "",
        "| seed | threads | " + " | ".join(f"`{f}`" for f in figs) + " | SFT steps | check passed at | SFT wall s | in regime |",
        "|---|---|" + "---|" * len(figs) + "---|---|---|---|",
    ]
    for r in rows:
        sft = r["sft"] or {}
        cells = []
        for f in figs:
            x = r["figures"].get(f) or {}
            cells.append("-" if x.get("value") is None else
                         f"{x['value']:.3f} [{x['low']:.3f}, {x['high']:.3f}] ({x['margin_se']:+.1f})")
        lines.append(f"| {r['seed']} | {r['threads']} | " + " | ".join(cells) +
                     f" | {sft.get('steps')} | {sft.get('passed_at_step')} | {round(r['sft_wall_s'])} | "
                     f"{'yes' if r['in_regime'] else 'NO'} |")
    lines += ["", f"{sum(r['in_regime'] for r in rows)} of {len(rows)} inside the regime.", "",
              "**Margins** (smallest distance inside each bound over the rows above; a bound the spread comes within "
              "3 standard errors of is to be redesigned):", "",
              "| figure | bound | values (min - max) | smallest margin (SE) | at | >= 3 SE |", "|---|---|---|---|---|---|"]
    for f, m in margins(rows, bounds).items():
        vals = [v for v in m["values"] if v is not None]
        span = f"{min(vals):.3f} - {max(vals):.3f}" if vals else "-"
        mm = "-" if m["min_margin_se"] is None else f"{m['min_margin_se']:+.1f}"
        ok = "-" if m["min_margin_se"] is None else ("yes" if m["min_margin_se"] >= 3 else "NO")
        lines.append(f"| `{f}` | {_bound(bounds[f])} | {span} | {mm} | {m['at'] or '-'} | {ok} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--configfile", default=str(REPO / "config" / "config.yaml"))
    ap.add_argument("--out-prefix", default=str(REPO / "benchmarks" / "base_models"))
    ap.add_argument("--work-dir", help="keep the models here (default: a temporary folder); a rerun with the same "
                    "folder reads the builds that finished instead of repeating them")
    args = ap.parse_args(argv)
    config = yaml.safe_load(Path(args.configfile).read_text())
    with tempfile.TemporaryDirectory(prefix="nudgerl-base-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        # one-thread models two at a time (2 cores); two-thread models alone, as a job would run
        single = [(s, 1) for s in args.seeds if 1 in args.threads]
        if single:
            rows.append(build(work, config, *single[0]))  # writes the benchmark files first
            with ThreadPoolExecutor(2) as pool:
                rows += list(pool.map(lambda st: build(work, config, *st), single[1:]))
        for t in (t for t in args.threads if t != 1):
            rows += [build(work, config, s, t) for s in args.seeds]
    rows.sort(key=lambda r: (r["threads"], r["seed"]))
    out = Path(args.out_prefix)
    from nudgerl.io import code_version

    record = {"command": " ".join(["python", "benchmarks/base_model_robustness.py", *(argv or sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "code_version": code_version(),
              "config": args.configfile,
              "base_model": config["base_model"], "regime": config["regime"],
              "margins": margins(rows, config["regime"]["bounds"]), "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    out.with_suffix(".md").write_text(markdown(rows, config))
    print(out.with_suffix(".md").read_text())
    wide = all(m["min_margin_se"] is not None and m["min_margin_se"] >= 3
               for m in margins(rows, config["regime"]["bounds"]).values())
    return 0 if all(r["in_regime"] for r in rows) and wide else 1


if __name__ == "__main__":
    sys.exit(main())
