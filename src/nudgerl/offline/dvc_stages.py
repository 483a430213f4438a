"""The helper-LLM DVC stages as the workflow sees them: one stage per configuration.

dvc.yaml defines each helper stage (strategy pools, oracle solutions) once, as a ``foreach``
group over the run names listed in params.yaml ``stage_runs.<section>``; DVC names the
expanded stages ``<section>@<run_name>``. DVC itself resolves the templates here (the stage
as ``dvc repro`` will run it), so the Snakemake rules, the preflight and the audit never
re-implement DVC's templating.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

RUNS_KEY = "stage_runs"  # params.yaml: section -> run names that build it


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


def check_outputs(stage: HelperStage, expected: list[str]) -> None:
    """The stage writes exactly the files the workflow's rule declares (its layout)."""
    if list(stage.outs) != list(expected):
        raise StageError(f"dvc.yaml stage {stage.name!r} writes {list(stage.outs)}, but the workflow expects "
                         f"{list(expected)}: make its outs/metrics these paths")
