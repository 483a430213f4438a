"""Every job of each configuration's whole DAG as sorted text, for checking that a refactor
leaves what the workflow builds unchanged.

    python scripts/dag_jobs.py OUT_DIR [CONFIG[+CONFIG ...] ...]   # default: DEFAULT_CONFIGS

For each configuration (files joined by + are given together, later over earlier) it runs `snakemake all -n -p --forceall` (paper.yaml through
profiles/slurm with placeholder account/partition) in this checkout and writes
OUT_DIR/<name>.jobs (one line per job: rule, wildcards, outputs) and OUT_DIR/<name>.shell
(the jobs' shell commands). Compare two such folders with `diff -r`. Nothing is run or written
in the checkout: a dry run with --forceall reads no results. The checkout's own src/ comes first
on PYTHONPATH, so a second clone is measured with its own code, not the installed one.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIELDS = ("wildcards", "input", "output", "log", "benchmark", "resources")
# every file in config/, the overlays over the base they are written for
DEFAULT_CONFIGS = ("config.yaml", "config.yaml:regime_map", "config.yaml+common.yaml", "config.yaml+study.yaml:study",
                   "smoke.yaml", "paper.yaml",
                   "paper.yaml+offline.yaml", "smollm2.yaml", "smollm2_arith.yaml")
PROFILE_ENV = {"NUDGERL_SLURM_ACCOUNT": "acct", "NUDGERL_SLURM_PARTITION": "part"}


def dry_run(spec: str, extra_configfiles: tuple[str, ...] = ()) -> str:
    """The dry run's output; ``extra_configfiles`` go last (over the configuration's own)."""
    files, _, target = spec.partition(":")
    configs = [f"config/{name}" for name in files.split("+")] + list(extra_configfiles)
    extra = ["--profile", "profiles/slurm"] if "config/paper.yaml" in configs else []
    env = {k: v for k, v in os.environ.items() if k != "NUDGERL_SLURM_GPU_TYPE"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(["snakemake", target or "all", "-n", "-p", "--forceall", *extra, "--configfile", *configs],
                          cwd=REPO, capture_output=True, text=True, env={**env, **PROFILE_ENV})
    if proc.returncode:
        sys.exit(f"dag_jobs: snakemake -n failed for {spec}:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return proc.stdout


def jobs(out: str) -> tuple[list[str], list[str]]:
    """(job lines, shell commands), each sorted: job ids and timestamps dropped."""
    lines, shells = [], []
    for block in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) \w+:\n)", out)[1:]:
        head, _, body = block.partition("\n")
        fields = dict(re.findall(r"^    (input|output|log|benchmark|wildcards|resources): (.*)$", body, re.M))
        if "resources" in fields:  # printed in an order that varies with the hash seed
            fields["resources"] = ", ".join(sorted(fields["resources"].split(", ")))
        lines.append(" | ".join([head.rstrip(":"), *(f"{k}: {fields[k]}" for k in FIELDS if k in fields)]))
        shell = re.search(r"^Shell command: (.*)$", body, re.M)
        if shell:
            shells.append(shell.group(1))
    return sorted(lines), sorted(shells)


def main(argv: list[str]) -> None:
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    for spec in argv[1:] or DEFAULT_CONFIGS:
        job_lines, shells = jobs(dry_run(spec))
        name = spec.replace(".yaml", "").replace(":", "-")
        (out_dir / f"{name}.jobs").write_text("\n".join(job_lines) + "\n")
        (out_dir / f"{name}.shell").write_text("\n\n".join(shells) + "\n")
        print(f"{spec}: {len(job_lines)} jobs, {len(shells)} commands")


if __name__ == "__main__":
    main(sys.argv[1:])
