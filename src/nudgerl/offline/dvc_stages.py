"""The helper-LLM DVC stages as the workflow sees them: one stage per configuration.

dvc.yaml defines each helper stage (strategy pools, oracle solutions) once, as a ``foreach``
group over the run names listed in params.yaml ``stage_runs.<section>``; DVC names the
expanded stages ``<section>@<run_name>``. DVC itself resolves the templates here (the stage
as ``dvc repro`` will run it), so the Snakemake rules, the preflight and the audit never
re-implement DVC's templating.

A new configuration needs no hand edit: :func:`register_run` (the Snakefile calls it before the
preflight) lists its ``run_name`` under ``stage_runs`` for each helper stage it uses.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

RUNS_KEY = "stage_runs"  # params.yaml: section -> run names that build it
RUN_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # the config schema's run_name pattern
# Serialises register_run across Snakemake processes in one checkout (DVC's .dvc/tmp is git-ignored).
LOCK_FILE = ".dvc/tmp/nudgerl-stage-runs.lock"


class StageError(ValueError):
    """A helper stage missing or not shaped as the workflow expects; the message says the fix."""


def stage_name(section: str, run_name: str) -> str:
    return f"{section}@{run_name}"


def run_of(stage: str) -> str | None:
    """The run name of an expanded stage (``pools_organism@smoke`` -> ``smoke``)."""
    return stage.split("@", 1)[1] if "@" in stage else None


@dataclass(frozen=True)
class HelperStage:
    name: str
    cmd: str
    deps: tuple[str, ...]  # files and folders (params.yaml is in ``params``)
    outs: tuple[str, ...]  # outs and metrics, in dvc.yaml order
    params: dict  # the tracked params.yaml values

    def definition(self) -> str:
        """JSON for a Snakemake rule's ``params``: the rule re-runs when the stage's command,
        paths or parameters change, and not when another stage's do."""
        return json.dumps({"stage": {"cmd": self.cmd, "deps": list(self.deps), "outs": list(self.outs)},
                           "params": self.params}, sort_keys=True)


def helper_stages(config: dict) -> list[tuple[str, str]]:
    """The helper stages a configuration uses, each with the config key that names it:
    ``pools.stage`` always, ``pope.oracle_stage`` when the config has a ``pope`` section."""
    named = [("pools.stage", (config.get("pools") or {}).get("stage", "pools_organism"))]
    if "pope" in config:
        named.append(("pope.oracle_stage", (config.get("pope") or {}).get("oracle_stage", "oracles_organism")))
    return named


def stage_groups(root: str | Path = ".") -> list[str]:
    """The stage names written in dvc.yaml (before expansion)."""
    path = Path(root) / "dvc.yaml"
    return sorted((yaml.safe_load(path.read_text()) or {}).get("stages", {})) if path.exists() else []


def load_stage(name: str, root: str | Path = ".") -> HelperStage:
    """The expanded stage ``name`` as DVC resolves it from dvc.yaml and params.yaml (cached
    per checkout and file versions: one DAG build asks for each stage several times)."""
    root = Path(root).resolve()
    versions = tuple((root / f).stat().st_mtime_ns if (root / f).exists() else None for f in ("dvc.yaml", "params.yaml"))
    return _load_stage(name, str(root), versions)


@lru_cache(maxsize=None)
def _load_stage(name: str, root: str, _versions: tuple) -> HelperStage:
    from dvc.dependency.param import ParamsDependency
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    section, run = name.split("@", 1) if "@" in name else (name, None)
    try:
        repo = Repo(root)
    except DvcException as e:
        raise StageError(f"{Path(root).resolve()} is not a DVC repository ({e}); run `dvc init` there") from e
    try:
        (stage,) = repo.stage.collect(name)
        deps = tuple(d.def_path for d in stage.deps if not isinstance(d, ParamsDependency))
        params = {}
        for p in stage.deps:
            if isinstance(p, ParamsDependency):
                params.update(p.read_params())
        return HelperStage(name, stage.cmd, deps, tuple(o.def_path for o in stage.outs), params)
    except DvcException as e:
        hint = ""
        if run is not None and section in stage_groups(root):
            hint = (f": add {run!r} to params.yaml '{RUNS_KEY}.{section}' (dvc.yaml makes one stage per run "
                    "listed there)")
        raise StageError(f"DVC stage {name!r} does not exist{hint}") from e
    finally:
        repo.close()


def _runs_list(root: Path, section: str) -> bool:
    """Whether dvc.yaml's stage group ``section`` expands over params.yaml ``stage_runs.<section>``."""
    stages = (yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("stages") or {}
    group = stages.get(section)
    return isinstance(group, dict) and group.get("foreach") == f"${{{RUNS_KEY}.{section}}}"


def _missing(params: dict, sections: list[str], run: str) -> list[str]:
    runs = params.get(RUNS_KEY) if isinstance(params, dict) else None
    return [s for s in sections if isinstance(runs, dict) and isinstance(runs.get(s), list) and run not in runs[s]]


def register_run(config: dict, root: str | Path = ".") -> list[str]:
    """List the configuration's ``run_name`` in params.yaml ``stage_runs`` for each helper stage it
    uses (:func:`helper_stages`) that does not list it yet, so that DVC declares the run's
    stages (``<section>@<run_name>``) and a new run needs no hand edit. Returns one log line per
    stage added; nothing is written when every stage lists the run already (the usual case).

    Not a stage parameter: the other runs' stages, their dvc.lock entries and Snakemake's
    ``params`` stay as they were. Only a list DVC's ``foreach`` reads is extended; anything else
    (no DVC repository, an unknown stage, a run_name the schema refuses, a list missing from
    params.yaml) is left to the preflight, which names the fix. The edit is a round trip through
    ruamel.yaml, the library DVC edits params.yaml with (``dvc exp run --set-param``): comments,
    layout and quotes kept, only the lists change. It runs under a lock and lands by an atomic
    rename: two runs started at once in one checkout both land, and a DVC stage reading
    params.yaml meanwhile never sees half a file."""
    root = Path(root)
    run = config.get("run_name")
    params_file = root / "params.yaml"
    if (not isinstance(run, str) or not RUN_NAME.match(run) or not params_file.exists()
            or not (root / "dvc.yaml").exists() or not (root / ".dvc").is_dir()):
        return []
    sections = [s for _, s in helper_stages(config) if isinstance(s, str) and _runs_list(root, s)]
    if not _missing(yaml.safe_load(params_file.read_text()), sections, run):
        return []
    lock = root / LOCK_FILE
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        text = params_file.read_text()  # again, under the lock: another run may have added its own
        expected = yaml.safe_load(text)
        added = _missing(expected, sections, run)
        if not added:
            return []
        # ruamel.yaml, DVC's YAML library, round trip: comments, layout and quotes kept
        from ruamel.yaml import YAML
        from ruamel.yaml.scalarstring import SingleQuotedScalarString

        rt = YAML()
        rt.preserve_quotes = True
        rt.width = 4096  # a one-line list stays on one line however many runs it lists
        data = rt.load(text)
        # quoted where a YAML 1.1 reader would take the bare word for something else (yes, on, 1)
        item = run if yaml.safe_load(run) == run else SingleQuotedScalarString(run)
        for section in added:
            data[RUNS_KEY][section].append(item)
            expected[RUNS_KEY][section].append(run)
        out = io.StringIO()
        rt.dump(data, out)
        new_text = out.getvalue()
        if yaml.safe_load(new_text) != expected:  # the round trip changed something else: do not write
            raise StageError(f"could not add {run!r} to params.yaml '{RUNS_KEY}' ({', '.join(added)}) "
                             "automatically; add it there by hand")
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".params.yaml.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(new_text)
            os.chmod(tmp, params_file.stat().st_mode & 0o7777)
            os.replace(tmp, params_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return [f"params.yaml: added run {run!r} to {RUNS_KEY}.{section} (DVC stage {stage_name(section, run)}); "
            "commit params.yaml with the run's other files" for section in added]


def check_outputs(stage: HelperStage, expected: list[str]) -> None:
    """The stage writes exactly the files the workflow's rule declares (its layout)."""
    if list(stage.outs) != list(expected):
        raise StageError(f"dvc.yaml stage {stage.name!r} writes {list(stage.outs)}, but the workflow expects "
                         f"{list(expected)}: make its outs/metrics these paths")
