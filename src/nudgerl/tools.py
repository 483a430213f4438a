"""The command-line tools of the running environment (dvc, snakemake, nudgerl).

A user may start ``.venv/bin/nudgerl`` or ``.venv/bin/snakemake`` without activating the
virtual environment, so its ``bin/`` is not on PATH and a bare ``dvc`` either fails or finds
another installation (another DVC version writing this checkout's dvc.lock). Python
subprocesses therefore run tools as ``<this interpreter> -m <module>``, and the Snakefile puts
this interpreter's folder first on PATH so that rules' shell commands (``nudgerl ...``,
``dvc repro ...``) and the commands DVC runs for its stages resolve to this environment too.
"""

from __future__ import annotations

import os
import sys


def tool_command(module: str) -> list[str]:
    """argv prefix that runs ``module``'s CLI (``dvc``, ``snakemake``) with this interpreter."""
    return [sys.executable, "-m", module]


def environment_bin() -> str:
    """The folder of this interpreter's console scripts (a venv's or conda env's ``bin``).
    Not resolved through symlinks: a venv's python links to the base interpreter."""
    return os.path.dirname(os.path.abspath(sys.executable))


def put_environment_first_on_path(environ=None) -> str:
    """Make ``environment_bin()`` the first PATH entry of ``environ`` (default: this process,
    inherited by every job Snakemake starts); returns the new PATH. A conda env that a job
    activates later still comes first: activation prepends its own ``bin``."""
    environ = os.environ if environ is None else environ
    here = environment_bin()
    rest = [p for p in environ.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != here]
    environ["PATH"] = os.pathsep.join([here, *rest])
    return environ["PATH"]
