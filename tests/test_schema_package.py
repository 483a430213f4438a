"""The config schema is package data: nudgerl reads it through importlib.resources, the wheel
carries it, and an installed (not editable) nudgerl validates a config with no checkout."""

import fnmatch
import subprocess
import sys
import tomllib
import zipfile

import pytest
import yaml

from conftest import REPO
from nudgerl import config as nconfig


def test_the_schema_lives_in_the_package_and_nowhere_else():
    assert nconfig.SCHEMA_PATH == REPO / "src" / "nudgerl" / "schemas" / "config.schema.yaml"
    assert nconfig.SCHEMA_PATH.is_file()
    assert not (REPO / "workflow" / "schemas").exists()  # one copy: no stale schema beside the rules
    assert nconfig.load_schema() == yaml.safe_load(nconfig.SCHEMA_PATH.read_text())
    assert nconfig.load_schema(nconfig.SCHEMA_PATH) == nconfig.load_schema()


def test_the_schema_is_read_through_importlib_resources(monkeypatch, tmp_path):
    """Not a path next to the source tree: what the package's resources hold is what validates."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "config.schema.yaml").write_text(
        "type: object\nproperties: {only: {type: integer}}\nadditionalProperties: false\n")
    asked = []

    def files(package):
        asked.append(package)
        return tmp_path

    with monkeypatch.context() as m:  # importlib.resources itself: jsonschema reads its own resources too
        m.setattr(nconfig.resources, "files", files)
        schema = nconfig.load_schema()
    assert schema["properties"] == {"only": {"type": "integer"}} and asked == ["nudgerl"]
    with pytest.raises(nconfig.ConfigError, match="unknown key"):
        nconfig.validate_config({"only": 1, "other": 2}, tmp_path / "schemas" / "config.schema.yaml")


def test_pyproject_ships_the_schema_as_package_data():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["nudgerl"]
    assert any(fnmatch.fnmatch(nconfig.SCHEMA_RESOURCE, p) for p in patterns), patterns


@pytest.mark.slow
def test_a_wheel_install_validates_a_config_without_the_checkout(tmp_path):
    """Build the wheel from a copy of the package (~15 s), unpack it as pip installs a pure-Python
    wheel, and validate config/config.yaml in a Python whose path has the install and not src/."""
    import shutil

    build = tmp_path / "build"
    (build / "src").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, build / name)
    shutil.copytree(REPO / "src" / "nudgerl", build / "src" / "nudgerl",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(build)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel, = (tmp_path / "dist").glob("nudgerl-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert "nudgerl/schemas/config.schema.yaml" in z.namelist()
        z.extractall(tmp_path / "site")
    script = (
        "import sys, yaml\n"
        f"sys.path = [{str(tmp_path / 'site')!r}] + [p for p in sys.path if p != {str(REPO / 'src')!r}]\n"
        "import nudgerl\n"
        f"assert list(nudgerl.__path__) == [{str(tmp_path / 'site' / 'nudgerl')!r}], nudgerl.__path__\n"
        "from nudgerl.config import ConfigError, validate_config\n"
        f"config = yaml.safe_load(open({str(REPO / 'config' / 'config.yaml')!r}))\n"
        "validate_config(config)\n"
        "try:\n"
        "    validate_config({**config, 'typo_key': 1})\n"
        "except ConfigError as e:\n"
        "    assert 'typo_key' in str(e)\n"
        "else:\n"
        "    raise SystemExit('an unknown key passed')\n"
        "print('validated')\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "validated" in proc.stdout, proc.stderr[-3000:]
