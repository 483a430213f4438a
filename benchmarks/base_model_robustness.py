"""Does the organism's base model converge for every seed and any float noise, and how far
inside the regime bounds does it land?

    python benchmarks/base_model_robustness.py            # 5 seeds x (threads {1, 2}, kernels capped at AVX2)
    python benchmarks/base_model_robustness.py --seeds 0 1 --threads 1 --kernels native
    python benchmarks/base_model_robustness.py --threads 1 --configfile config/config.yaml config/common.yaml \
        --out-prefix benchmarks/base_models_common    # an overlay, merged key by key as Snakemake does

Builds each base model with the DAG's own commands (``nudgerl drill-base``, ``train-base
--drilled``, ``diagnose --train``, ``regime-gate`` with the default config's sections), so each
row is what a replicate of ``snakemake --cores 2`` would get on this machine. Float noise
comes from two stand-ins for another CPU: the torch thread count, and (``--kernels avx2``)
torch's, MKL's and oneDNN's kernels capped at AVX2, which changes summation order on an
AVX-512 machine where a second thread changed no byte. Reports each
gate figure with its interval and its distance inside each bound in standard errors, and the
smallest distance over all rows (a bound the spread comes within 3 standard errors of must be
redesigned). Writes ``benchmarks/base_models_rare.json`` and ``benchmarks/base_models_rare.md``
(the default's regime; ``--out-prefix`` for another).
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


# CPU kernels torch (ATen), MKL and oneDNN may use. "native" is what this CPU offers; "avx2"
# caps all three at AVX2 on an AVX-512 machine: other float summation orders, a stand-in for
# another CPU (on the machines measured so far a second torch thread changed no byte).
KERNELS = {"native": {}, "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                                  "ONEDNN_MAX_CPU_ISA": "AVX2"}}


def _run(cmd: list[str], log: Path, kernels: str = "native") -> float:
    """Run one pipeline command; its CPU seconds (user + system of the child)."""
    import os
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "a") as f:
        subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT, cwd=REPO,
                       env={**os.environ, **KERNELS[kernels]})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def build(work: Path, config: dict, seed: int, threads: int, kernels: str = "native") -> dict:
    """One base model, its diagnosis and regime verdict (the DAG's rules). Each step resumes:
    a model or diagnosis already in ``work`` (an interrupted run's) is read, not rebuilt; the
    verdict is always judged again (cheap), so a read-back row has this code's gate."""
    name = f"seed{seed}_threads{threads}" + ("" if kernels == "native" else f"_{kernels}")
    out, log = work / name, work / f"{name}.log"
    bench, train = work / "data" / "eval", work / "data" / "train.jsonl"
    if not bench.exists():
        # the DAG's own command and sorted-key params: the benchmarks are dealt in key order, so
        # the YAML's order (math500 before apex) would deal other problems than a replicate's
        # and the config's task, as the DAG passes it (the families task's problems name their family)
        _run(["nudgerl", "make-data", "--params", json.dumps(config["organism"], sort_keys=True),
              "--task", config["base_model"].get("task", "single_family"), "--out-dir", str(work / "data")],
             work / "make-data.log")
    from nudgerl.organism.base_config import DRILL_KEYS
    from nudgerl.plan.arguments import rl_diagnosis_params

    sft_cpu = None
    if (out / "model" / "sft_report.json").exists():
        wall = json.loads((out / "model" / "sft_report.json").read_text())["seconds"]
    else:
        drilled = work / "drilled" / name
        if not (drilled / "drill_report.json").exists():
            _run(["nudgerl", "drill-base", "--params", json.dumps({k: v for k, v in config["base_model"].items()
                                                                   if k in DRILL_KEYS}, sort_keys=True),
                  "--seed", str(seed), "--threads", str(threads), "--out-dir", str(drilled)], log, kernels)
        t0 = time.perf_counter()
        # sorted keys, as the DAG passes them: the order of the strategy-weight keys is part of the
        # SFT data draw, so only then is a row the model a replicate of `snakemake` gets
        sft_cpu = _run(["nudgerl", "train-base", "--params", json.dumps(config["base_model"], sort_keys=True),
                        "--seed", str(seed), "--threads", str(threads), "--drilled", str(drilled),
                        "--out-dir", str(out / "model")], log, kernels)
        wall = time.perf_counter() - t0
    if not (out / "diagnosis.json").exists():
        ev = {k: v for k, v in config["eval"].items() if k != "curve"}
        # the benchmarks in the config's order, as the DAG passes them: samples are drawn across
        # problems in that order, so another order gives other samples (and other figures)
        files = [str(bench / f"{b}.jsonl") for b in config["organism"]["benchmarks"]]
        _run(["nudgerl", "diagnose", "--model", str(out / "model"), "--benchmarks", *files, "--train", str(train),
              "--rl-params", json.dumps(rl_diagnosis_params(config, seed), sort_keys=True),
              "--params", json.dumps({**ev, "seed": seed}, sort_keys=True), "--threads", str(threads),
              "--out", str(out / "diagnosis.json")], log, kernels)
    subprocess.run(["nudgerl", "regime-gate", "--diagnosis", str(out / "diagnosis.json"), "--regime",
                    json.dumps({**config["regime"], "gate": False}), "--out", str(out / "regime.json")],
                   check=True, capture_output=True, text=True, cwd=REPO)
    return {**_row(out, seed, threads, sft_cpu, wall), "kernels": kernels}


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
        m = [(r["figures"][f]["margin_se"], f"seed {r['seed']}, threads {r['threads']}, {r.get('kernels', 'native')}")
             for r in rows
             if r["figures"].get(f, {}).get("margin_se") is not None]
        low = min(m) if m else (None, None)
        out[f] = {"min_margin_se": low[0], "at": low[1], "values": [r["figures"][f]["value"] for r in rows]}
    return out


def _repo_relative(path: str) -> str:
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(path)


def merged_config(files: list[str]) -> dict:
    """The config files merged key by key, later over earlier (Snakemake's --configfile)."""
    def merge(base, over):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    config: dict = {}
    for f in files:
        config = merge(config, yaml.safe_load(Path(f).read_text()) or {})
    return config


def markdown(rows: list[dict], config: dict, configfiles=("config/config.yaml",)) -> str:
    from nudgerl.evaluation.regime import sft_passed_cell

    bounds = config["regime"]["bounds"]
    # the bounded figures, then those the verdict reports without a bound
    figs = list(bounds) + sorted({f for r in rows for f in r["figures"]} - set(bounds))
    conf = config["regime"].get("confidence", 0.95)
    lines = [
        "# Base-model robustness: seeds x torch threads",
        "",
        f"`python benchmarks/base_model_robustness.py` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); "
        "each row is one `nudgerl drill-base` + `train-base` + `diagnose` + `regime-gate` with the sections of "
        + " + ".join(f"`{_repo_relative(f)}`" for f in configfiles) + ".",
        f"Figures on the hard training problems, sampled as RL samples them: value [{conf:.0%} interval, clustered by "
        "problem] (distance inside the bound, in standard errors at the bound). Bounds: "
        + "; ".join(f"`{f}` {_bound(bounds[f])}" for f in bounds) + "; the others are reported without a bound.",
        "",
        "| seed | threads | kernels | " + " | ".join(f"`{f}`" for f in figs)
        + " | SFT steps | check passed at | SFT wall s | in regime |",
        "|---|---|---|" + "---|" * len(figs) + "---|---|---|---|",
    ]
    for r in rows:
        sft = r["sft"] or {}
        cells = []
        for f in figs:
            x = r["figures"].get(f) or {}
            margin = "" if x.get("margin_se") is None else f" ({x['margin_se']:+.1f})"
            cells.append("-" if x.get("value") is None else
                         f"{x['value']:.3f} [{x['low']:.3f}, {x['high']:.3f}]{margin}" +
                         ("" if f in bounds else f", {x['k']} of {x['n']}"))
        lines.append(f"| {r['seed']} | {r['threads']} | {r.get('kernels', 'native')} | " + " | ".join(cells) +
                     f" | {sft.get('steps')} | {sft_passed_cell(sft.get('passed_at_step'), sft.get('attempts') or 1, sft.get('model_seed'))}"
                     f" | {round(r['sft_wall_s'])} | "
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
    ap.add_argument("--kernels", nargs="+", choices=sorted(KERNELS), default=["native", "avx2"],
                    help="CPU kernel sets (avx2: one-thread builds with torch, MKL and oneDNN capped at AVX2)")
    ap.add_argument("--configfile", nargs="+", default=[str(REPO / "config" / "config.yaml")],
                    help="config files merged key by key, later over earlier (an overlay after config/config.yaml)")
    ap.add_argument("--out-prefix", default=str(REPO / "benchmarks" / "base_models_rare"))
    ap.add_argument("--work-dir", help="keep the models here (default: a temporary folder); a rerun with the same "
                    "folder reads the builds that finished instead of repeating them")
    args = ap.parse_args(argv)
    config = merged_config(args.configfile)
    with tempfile.TemporaryDirectory(prefix="nudgerl-base-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        # one-thread models two at a time (2 cores); two-thread models alone, as a job would run;
        # capped kernels with one thread (the kernel set is the variation there)
        single = [(s, 1, k) for k in args.kernels for s in args.seeds if 1 in args.threads or k != "native"]
        if single:
            rows.append(build(work, config, *single[0]))  # writes the benchmark files first
            with ThreadPoolExecutor(2) as pool:
                rows += list(pool.map(lambda stk: build(work, config, *stk), single[1:]))
        if "native" in args.kernels:
            for t in (t for t in args.threads if t != 1):
                rows += [build(work, config, s, t) for s in args.seeds]
    rows.sort(key=lambda r: (r["kernels"] != "native", r["threads"], r["seed"]))
    out = Path(args.out_prefix)
    from nudgerl.io import code_version

    record = {"command": " ".join(["python", "benchmarks/base_model_robustness.py", *(argv or sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "code_version": code_version(),
              "config": [_repo_relative(f) for f in args.configfile],
              "base_model": config["base_model"], "regime": config["regime"],
              "margins": margins(rows, config["regime"]["bounds"]), "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    out.with_suffix(".md").write_text(markdown(rows, config, args.configfile))
    print(out.with_suffix(".md").read_text())
    wide = all(m["min_margin_se"] is not None and m["min_margin_se"] >= 3
               for m in margins(rows, config["regime"]["bounds"]).values())
    return 0 if all(r["in_regime"] for r in rows) and wide else 1


if __name__ == "__main__":
    sys.exit(main())
