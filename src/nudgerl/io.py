"""Atomic file writes, JSONL, hashing and provenance sidecars.

Every output is written under a temporary name and renamed into place, so a killed job
never leaves a half-written file that Snakemake (or a reader) could take as finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: str | Path, rows) -> None:
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def read_jsonl(path: str | Path) -> list[dict]:
    """Rows of a JSONL file; a malformed line raises an error naming file and line."""
    rows = []
    with open(path) as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not valid JSON ({e.msg})") from None
    return rows


def json_rows(path: str | Path):
    """(line number, parsed row) of a JSONL file, blank lines skipped; bad JSON names file:line."""
    with open(path) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({e.msg})") from None


def read_problems(path: str | Path) -> list[dict]:
    """Problem rows (training split or benchmark), validated: every row needs a unique
    string ``id``, a non-empty string ``problem`` and a non-empty ``answer``; an empty file
    is an error. A bad row raises an error naming file and line, never a silent zero reward."""
    rows, seen = [], {}
    for line_no, row in json_rows(path):
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
        for key in ("id", "problem"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise ValueError(f"{path}:{line_no}: '{key}' must be a non-empty string, got {row.get(key)!r}")
        answer = row.get("answer")
        if answer is None or (isinstance(answer, str) and not answer.strip()):
            raise ValueError(f"{path}:{line_no}: problem {row['id']!r} has no answer")
        if row["id"] in seen:
            raise ValueError(f"{path}:{line_no}: duplicate id {row['id']!r} (first on line {seen[row['id']]})")
        seen[row["id"]] = line_no
        rows.append({**row, "answer": str(answer)})
    if not rows:
        raise ValueError(f"{path}: no problems (empty file)")
    return rows


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def is_sidecar(path: str | Path) -> bool:
    """A provenance sidecar (never hashed as part of what it describes)."""
    return Path(path).name.endswith("provenance.json")


def hash_inputs(paths) -> dict[str, str]:
    """sha256 of each input file; a directory hashes every file below it (sidecars excluded).
    Keys are normalised paths as given (relative to the working directory in the pipeline)."""
    out = {}
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if x.is_file() and not is_sidecar(x)):
                out[os.path.normpath(f)] = sha256_file(f)
        elif p.exists():
            out[os.path.normpath(p)] = sha256_file(p)
    return out


def code_version() -> str:
    """git commit of the checkout (with -dirty), or the package version outside git."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=here,
                             capture_output=True, text=True, timeout=10)
        if rev.returncode == 0 and rev.stdout.strip():
            return rev.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "nudgerl-" + metadata.version("nudgerl")


_PACKAGES = ("torch", "transformers", "trl", "peft", "math-verify", "snakemake", "dvc", "numpy")
# Set by the workflow for its jobs (workflow/rules/common.smk): which configuration ran.
CONFIG_FILES_ENV, CONFIG_SHA256_ENV = "NUDGERL_CONFIG_FILES", "NUDGERL_CONFIG_SHA256"


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None


def machine() -> dict:
    """The machine a job ran on: host, CPU model and count, and torch's CPU kernel capability
    (AVX2 / AVX512: float results differ between them) when torch is already loaded."""
    record = {"hostname": platform.node(), "cpu_model": _cpu_model(), "cpu_count": os.cpu_count()}
    torch = sys.modules.get("torch")
    if torch is not None:
        record["torch_capability"] = torch.backends.cpu.get_cpu_capability()
    return record


def provenance(config: dict, seeds: dict, inputs=(), outputs=()) -> dict:
    """What produced an artifact: config subset, code and package versions, seeds, input hashes,
    and the hashes of the outputs as written (``nudgerl audit`` compares both with the files)."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "code_version": code_version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "machine": machine(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config_files": [f for f in os.environ.get(CONFIG_FILES_ENV, "").split(os.pathsep) if f] or None,
        "config_sha256": os.environ.get(CONFIG_SHA256_ENV),
        "config": config,
        "seeds": seeds,
        "inputs": hash_inputs(inputs),
        "outputs": hash_inputs(outputs),
        "command": sys.argv,
    }


def sidecar_path(artifact: str | Path) -> Path:
    artifact = Path(artifact)
    return artifact / "provenance.json" if artifact.is_dir() else artifact.with_name(artifact.name + ".provenance.json")


def write_provenance(artifact: str | Path, config: dict, seeds: dict, inputs=(), outputs=()) -> Path:
    """Sidecar ``<artifact>.provenance.json`` (inside the folder for a directory artifact).

    The artifact itself (every file of a directory) and any further ``outputs`` written by
    the same job are hashed into the sidecar's ``outputs``."""
    side = sidecar_path(artifact)
    record = provenance(config, seeds, inputs, [artifact, *outputs])
    atomic_write_text(side, json.dumps(record, indent=2, default=str))
    return side


# A training run's attempt records: written by nudgerl.attempts (one row an attempt:
# its seconds and how it ended), summed by the compute table (nudgerl.reporting.compute).
ATTEMPTS_LOG = "attempts.jsonl"


# A run's pruned checkpoints: written by nudgerl.training.prune into the run's checkpoints/
# folder (no Snakemake output, so a rerun of an interrupted prune finds it) before anything is
# deleted; read by the audit (nudgerl.reporting.audit): a file listed there is pruned, not lost.
CHECKPOINTS_PRUNED = "pruned.json"


def read_pruned_record(path: str | Path) -> dict:
    """A ``CHECKPOINTS_PRUNED`` record (``removed`` folders, ``files`` -> size); empty when absent."""
    path = Path(path)
    if not path.exists():
        return {"removed": [], "files": {}}
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); check which checkpoints are gone before removing it") from None


def pruned_checkpoint_files(results: str | Path) -> dict[str, str]:
    """Every file a run's ``checkpoints/pruned.json`` under ``results`` lists -> that record's path."""
    out = {}
    for record_path in sorted(Path(results).rglob(f"checkpoints/{CHECKPOINTS_PRUNED}")):
        for path in read_pruned_record(record_path).get("files", {}):
            out[os.path.normpath(path)] = str(record_path)
    return out


def attempt_seconds(run_dir: str | Path) -> tuple[int, float] | None:
    """(attempts, their seconds summed) from a run's ``attempts.jsonl``; None without one."""
    path = Path(run_dir) / ATTEMPTS_LOG
    if not path.exists():
        return None
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line torn by a kill mid-append
    return len(rows), sum(float(r.get("seconds", 0.0)) for r in rows)


def merged_configfiles(base, *overlays) -> dict:
    """``overlays`` merged over ``base`` key by key (YAML files), as Snakemake merges
    ``--configfile``: nested sections are updated, not replaced."""
    import copy

    from snakemake.utils import update_config

    import yaml

    config = yaml.safe_load(Path(base).read_text())
    for path in overlays:
        update_config(config, copy.deepcopy(yaml.safe_load(Path(path).read_text())))
    return config
