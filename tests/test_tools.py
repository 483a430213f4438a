"""Commands find the tools of their own environment, activated or not."""

import os
import subprocess
import sys
from pathlib import Path

from nudgerl.tools import environment_bin, put_environment_first_on_path, tool_command


def test_environment_bin_is_this_interpreters_folder_not_its_symlink_target():
    # a venv's python is a symlink to the base interpreter: its folder, not the target's
    assert environment_bin() == os.path.dirname(os.path.abspath(sys.executable))
    assert (Path(environment_bin()) / "nudgerl").exists()  # the console scripts live there


def test_put_first_on_path_without_duplicates():
    here = environment_bin()
    env = {"PATH": os.pathsep.join(["/usr/bin", here, "/bin"])}
    assert put_environment_first_on_path(env) == os.pathsep.join([here, "/usr/bin", "/bin"])
    assert put_environment_first_on_path({}) == here


def test_tool_command_runs_this_environments_dvc_without_path():
    proc = subprocess.run([*tool_command("dvc"), "--version"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}, timeout=120)
    from importlib.metadata import version

    assert proc.returncode == 0 and proc.stdout.strip() == version("dvc")
