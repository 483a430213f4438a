"""Artifact audit: from every table and figure back to its evaluation records, checkpoints,
data and pools, checking that each file is still the one its provenance sidecar recorded.

Each sidecar (``nudgerl.io.write_provenance``) holds sha256 hashes of the job's inputs (as
read) and outputs (as written). The audit starts at the sidecars of the tables and figures
and follows inputs to the sidecars of the jobs that produced them, reporting

- ``modified``: a file differs from the hash its producing job recorded (edited by hand,
  or overwritten outside the pipeline);
- ``stale``: an input differs from the hash recorded by a job that read it (the input was
  regenerated, the consumer was not);
- ``missing``: a recorded input or output no longer exists (a checkpoint file that a run's
  ``checkpoints/pruned.json`` lists is not missing but pruned on purpose once the run was
  complete, by ``nudgerl prune-checkpoints``; counted in a note);
- ``dvc``: ``dvc status`` reports a changed DVC stage (strategy pools, oracle solutions),
  or could not run.

For each DVC stage it checks, the report also says where its outputs came from: computed in
this checkout (a run record ``<out>.run.json`` matches the file) or restored from the DVC
cache (pulled from a remote, or checked out from the local cache, without running it here).

Files with no producing sidecar (DVC outputs, for instance) are checked against the
consumer's recorded hash only; DVC's own hashes cover the pools and oracles.

``artifacts``: start only from the sidecars that recorded writing these files. A rule's audit
passes its declared inputs, so it never reads a table that another job of the same DAG is
rewriting at that moment (the main audit and the regime map's audit run side by side in
`snakemake study`, each over the same results folder).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from nudgerl.offline.helper_llm import computed_here
from nudgerl.io import is_sidecar, pruned_checkpoint_files, sha256_file
from nudgerl.tools import tool_command

ROOT_FOLDERS = ("tables", "figures", "diagnostics")


@dataclass
class Finding:
    kind: str  # modified | stale | missing | dvc
    path: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.path}: {self.detail}"


@dataclass
class AuditReport:
    roots: list[str] = field(default_factory=list)
    sidecars_checked: int = 0
    files_checked: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stage_origins: list[str] = field(default_factory=list)  # one line per DVC stage checked
    dvc_only: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings

    def text(self) -> str:
        lines = [
            "nudgerl audit: " + ("OK" if self.ok else f"{len(self.findings)} problem(s)"),
            "  DVC stages only (no table or figure checked)" if self.dvc_only else
            f"  {len(self.roots)} table/figure artifact(s), {self.sidecars_checked} provenance sidecar(s), "
            f"{self.files_checked} file(s) hashed",
        ]
        if self.findings:
            lines.append("")
            lines += [f"  {f}" for f in self.findings]
        if self.stage_origins:
            lines.append("")
            lines += [f"  dvc stage {o}" for o in self.stage_origins]
        if self.notes:
            lines.append("")
            lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def find_sidecars(results: Path) -> list[Path]:
    return sorted(p for p in Path(results).rglob("*provenance.json") if p.is_file() and is_sidecar(p))


def artifact_of(sidecar: str) -> str:
    """The artifact a sidecar describes (a directory for ``<dir>/provenance.json``)."""
    p = Path(sidecar)
    return str(p.parent) if p.name == "provenance.json" else str(p.with_name(p.name.removesuffix(".provenance.json")))


class _Hasher:
    def __init__(self):
        self.cache: dict[str, str | None] = {}

    def __call__(self, path: str) -> str | None:
        if path not in self.cache:
            self.cache[path] = sha256_file(path) if os.path.isfile(path) else None
        return self.cache[path]


def _lock_stages(cwd: Path) -> dict:
    import yaml

    lock = Path(cwd) / "dvc.lock"
    return (yaml.safe_load(lock.read_text()) or {}).get("stages", {}) if lock.exists() else {}


def dvc_status(cwd: Path, stages: list[str] | None = None,
               run: str | None = None) -> tuple[list[Finding], list[str], list[str]]:
    """Changed DVC stages as findings; a checkout without DVC is a note, not a failure.
    ``stages``: only these (the ones this config's results used); None = every stage that ran
    here (recorded in dvc.lock) for ``run`` (``<section>@<run>``, or all when run is None),
    since a stage of another configuration is not part of these results.
    Returns (findings, notes, one line per stage saying where its outputs came from)."""
    lock = _lock_stages(cwd)
    if stages is None:
        stages = sorted(s for s in lock if run is None or s.endswith(f"@{run}")) or None
        if stages is None and run is not None:
            return [], [f"dvc.lock has no DVC stage of run {run!r} (never run or pulled here): dvc status skipped"], []
    if not (Path(cwd) / ".dvc").is_dir() or not (Path(cwd) / "dvc.yaml").exists():
        return [], ["not a DVC repository here (no .dvc/ or dvc.yaml): dvc status skipped"], []
    try:
        # this environment's DVC, found without PATH (e.g. `.venv/bin/nudgerl audit`)
        proc = subprocess.run([*tool_command("dvc"), "status", "--json", *(stages or [])], cwd=cwd,
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        return [Finding("dvc", "dvc.yaml", f"dvc status could not run: {e}")], [], []
    if proc.returncode != 0:
        return [Finding("dvc", "dvc.yaml", f"dvc status failed: {(proc.stderr or proc.stdout).strip()[-500:]}")], [], []
    try:
        status = json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        return [Finding("dvc", "dvc.yaml", f"dvc status printed no JSON: {proc.stdout[-300:]}")], [], []
    findings = [Finding("dvc", f"dvc.yaml:{stage}", f"stage changed: {json.dumps(changes)}")
                for stage, changes in sorted(status.items())]
    origins = [stage_origin(Path(cwd), stage, lock.get(stage)) for stage in (stages or [])]
    return findings, ([] if findings else ["dvc status: every DVC stage is up to date"]), origins


def stage_origin(cwd: Path, stage: str, locked: dict | None) -> str:
    """Where a DVC stage's outputs in this checkout came from, in words."""
    if not locked:
        return f"{stage}: not in dvc.lock (never run or pulled here)"
    for out in locked.get("outs", []):
        record = computed_here(Path(cwd) / out["path"])
        if record is not None:
            return (f"{stage}: computed here ({record.get('finished', '?')}, {record.get('asked', '?')} problem(s) "
                    f"asked, {record.get('http_requests', '?')} HTTP request(s), {record.get('seconds', '?')} s)")
    return f"{stage}: from the DVC cache (pulled or restored, not computed in this checkout)"


def result_folders(root: str | Path = "results") -> list[Path]:
    """The results folders under ``root``: each configuration's ``results/<run_name>`` (or,
    for task: math, each ``results/<run_name>/<model>``), i.e. every folder up to two levels
    down that holds tables, figures or diagnostics; ``root`` itself if it does."""
    root = Path(root)

    def holds(d: Path) -> bool:
        return any((d / name).is_dir() for name in ROOT_FOLDERS)

    if holds(root):
        return [root]
    found = []
    for child in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        found += [child] if holds(child) else [g for g in sorted(child.iterdir()) if g.is_dir() and holds(g)]
    return found


def run_of_results(results: str | Path) -> str | None:
    """``smoke`` for ``results/smoke`` or ``results/smoke/<model>``; None for other layouts."""
    parts = Path(results).parts
    return parts[1] if len(parts) >= 2 and parts[0] == "results" else None


def audit(results: str | Path = "results", cwd: str | Path = ".", check_dvc: bool = True,
          dvc_stages: list[str] | None = None, check_artifacts: bool = True,
          artifacts: list[str] | None = None) -> AuditReport:
    """Walk from the tables' and figures' sidecars through every recorded input.
    ``check_artifacts=False``: only the DVC stages (a checkout that pulled pools, no tables).
    ``artifacts``: only from the sidecars of these files (None: every table, figure, diagnosis).

    Paths inside sidecars are relative to ``cwd`` (the workflow root, where jobs run)."""
    cwd = Path(cwd)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        if not check_artifacts:
            report = AuditReport(dvc_only=True)
            _check_dvc(report, Path(results), dvc_stages)
            return report
        return _audit(Path(results), check_dvc, dvc_stages, artifacts)
    finally:
        os.chdir(old)


def _check_dvc(report: AuditReport, results: Path, dvc_stages: list[str] | None) -> None:
    findings, notes, origins = dvc_status(Path("."), dvc_stages, run_of_results(results))
    report.findings += findings
    report.notes += notes
    report.stage_origins += origins


def _audit(results: Path, check_dvc: bool, dvc_stages: list[str] | None = None,
           artifacts: list[str] | None = None) -> AuditReport:
    report = AuditReport()
    hasher = _Hasher()
    sidecars: dict[str, dict] = {}
    producer: dict[str, str] = {}  # output file -> the sidecar that recorded writing it
    for side in find_sidecars(results):
        try:
            record = json.loads(side.read_text())
        except json.JSONDecodeError as e:
            report.findings.append(Finding("modified", str(side), f"sidecar is not valid JSON ({e.msg})"))
            continue
        sidecars[str(side)] = record
        for out in record.get("outputs", {}):
            producer[os.path.normpath(out)] = str(side)
    if not results.is_dir():
        report.findings.append(Finding("missing", str(results), "results folder does not exist"))
        return report
    if artifacts is None:
        roots = [s for s in sidecars if Path(s).relative_to(results).parts[0] in ROOT_FOLDERS]
    else:
        wanted = [os.path.normpath(a) for a in artifacts]
        roots = sorted({producer[a] for a in wanted if a in producer})
        if not roots:
            report.findings.append(Finding("missing", str(results), "none of the given artifacts has a provenance "
                                                                    f"sidecar under this folder: {wanted[:3]}"))
        unrecorded = sum(1 for a in wanted if a not in producer)
        if unrecorded:  # a rule's declared inputs also hold markers and logs no job records writing
            report.notes.append(f"{unrecorded} of {len(wanted)} given artifact(s) have no provenance sidecar "
                                "(not a start of the walk)")
    report.roots = roots
    if not roots and artifacts is None:
        report.findings.append(Finding("missing", str(results), "no table or figure has a provenance sidecar"))
    seen, queue, flagged = set(), deque(roots), set()
    pruned = pruned_checkpoint_files(results)
    pruned_seen: dict[str, set[str]] = {}  # record -> the files it explains

    def flag(finding: Finding):
        if finding.kind == "missing" and (record := pruned.get(os.path.normpath(finding.path))):
            pruned_seen.setdefault(record, set()).add(finding.path)
            return
        key = (finding.kind, finding.path)
        if key not in flagged:
            flagged.add(key)
            report.findings.append(finding)

    while queue:
        side = queue.popleft()
        if side in seen:
            continue
        seen.add(side)
        record = sidecars[side]
        outputs = record.get("outputs")
        if outputs is None:
            flag(Finding("stale", side, "sidecar records no output hashes (written by an older pipeline); re-run its rule"))
            outputs = {}
        for path, recorded in outputs.items():
            current = hasher(path)
            if current is None:
                flag(Finding("missing", path, f"recorded as written in {side}, no longer exists"))
            elif current != recorded:
                flag(Finding("modified", path, f"differs from the hash recorded when it was written ({side})"))
        for path, recorded in record.get("inputs", {}).items():
            current = hasher(path)
            if current is None:
                flag(Finding("missing", path, f"input of {side}, no longer exists"))
            elif current != recorded and producer.get(os.path.normpath(path)) is not None \
                    and sidecars[producer[os.path.normpath(path)]].get("outputs", {}).get(path) == current:
                # regenerated by its own job after the consumer read it
                flag(Finding("stale", artifact_of(side), f"input {path} was regenerated after this artifact was made; "
                                                        "re-run its rule"))
            elif current != recorded and producer.get(os.path.normpath(path)) is None:
                # no provenance of its own (a DVC output, a Snakemake benchmark file): edited or
                # regenerated, either way the artifact that read it no longer matches it
                flag(Finding("stale", artifact_of(side), f"input {path} changed after this artifact read it"))
            elif current != recorded:
                flag(Finding("modified", path, f"differs from the hash {side} recorded when reading it"))
            if (p := producer.get(os.path.normpath(path))) is not None:
                queue.append(p)
    report.sidecars_checked = len(seen)
    report.notes += [f"{len(files)} recorded file(s) pruned on purpose by nudgerl prune-checkpoints ({record})"
                     for record, files in sorted(pruned_seen.items())]
    report.files_checked = sum(1 for v in hasher.cache.values() if v is not None)
    if check_dvc:
        _check_dvc(report, results, dvc_stages)
    return report
