"""Where torch comes from: scripts/setup.sh, scripts/lock.sh and the rules' conda env use this.

PyPI's torch==2.13.0 is the CUDA build (nvidia-* wheels, several GB). The CPU build is on
PyTorch's CPU index (PEP 503 "simple" pages). Standard library only: setup.sh runs it with the
base interpreter, before the venv exists.

    python scripts/torch_wheel.py choose      # stdout: "index <URL>" or "default"; stderr: why
    python scripts/torch_wheel.py find-links  # stdout: a find-links location with the CPU wheel
    python scripts/torch_wheel.py report [--pip-report R.json] [--chose index|default]
                                              # which torch is installed, and from where

Environment: NUDGERL_TORCH_INDEX (default https://download.pytorch.org/whl/cpu; "none" skips it),
NUDGERL_TORCH_INDEX_TIMEOUT (seconds, default 10).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_INDEX = "https://download.pytorch.org/whl/cpu"
SOURCE_FILE = "nudgerl-torch-source.txt"  # in the environment's prefix: what setup installed


def torch_pin(pyproject: Path = REPO / "pyproject.toml") -> str:
    """The torch version pyproject.toml pins (the one place it is written)."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    found = [d.split("==", 1)[1].strip() for d in deps if re.match(r"torch\s*==", d)]
    if len(found) != 1:
        raise SystemExit("pyproject.toml must pin torch exactly once (torch==X.Y.Z)")
    return found[0]


def index_setting() -> str | None:
    index = os.environ.get("NUDGERL_TORCH_INDEX", DEFAULT_INDEX).strip()
    return None if index.lower() in ("", "none", "off", "0") else index.rstrip("/")


def wheel_pattern(version: str, cp: str) -> re.Pattern:
    """A torch wheel of this version (a local label such as +cpu allowed, URL-quoted or not)
    for this CPython tag."""
    return re.compile(rf"torch-{re.escape(version)}(?:(?:\+|%2B)[A-Za-z0-9.]+)?-{cp}-", re.I)


def probe(index: str, version: str, cp: str | None = None, timeout: float | None = None) -> tuple[bool, str]:
    """Does `index` answer, with a torch `version` wheel for this Python? (ok, why)"""
    cp = cp or f"cp{sys.version_info[0]}{sys.version_info[1]}"
    timeout = timeout if timeout is not None else float(os.environ.get("NUDGERL_TORCH_INDEX_TIMEOUT", "10"))
    url = f"{index}/torch/"
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "nudgerl-setup"})
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            page = response.read().decode("utf-8", "replace")
    except Exception as exc:  # DNS, refused, timeout, TLS, HTTP error: all mean "not usable"
        return False, f"not reachable ({type(exc).__name__}: {exc})"
    if not wheel_pattern(version, cp).search(page):
        return False, f"reachable, but {url} lists no torch {version} wheel for {cp}"
    return True, f"reachable, lists torch {version} for {cp}"


def choose() -> tuple[str, str | None, str]:
    """("index", URL, why) when the CPU index serves our torch, else ("default", None, why)."""
    version = torch_pin()
    index = index_setting()
    if index is None:
        return "default", None, "NUDGERL_TORCH_INDEX=none: the CPU index is not tried"
    ok, why = probe(index, version)
    if ok:
        return "index", index, f"PyTorch CPU index {index}: {why}"
    return "default", None, f"PyTorch CPU index {index}: {why}; falling back to pip's default index"


def _pip_find_links() -> list[str]:
    """find-links locations pip is configured with (environment, then pip config)."""
    found = os.environ.get("PIP_FIND_LINKS", "").split()
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".find-links"):
            found += value.strip().strip("'\"").split()
    return list(dict.fromkeys(found))


def find_links(version: str | None = None, cp: str = "cp311") -> tuple[str | None, str]:
    """A find-links location (for uv) holding the CPU torch wheel: the CPU index's torch page
    where it answers, else a local folder pip is configured with. (location or None, why)"""
    version = version or torch_pin()
    index = index_setting()
    whys = []
    if index is not None:
        ok, why = probe(index, version, cp)
        if ok:
            return f"{index}/torch/", f"PyTorch CPU index {index}: {why}"
        whys.append(f"PyTorch CPU index {index}: {why}")
    cpu = re.compile(rf"torch-{re.escape(version)}\+cpu-{cp}-", re.I)
    for location in _pip_find_links():
        folder = Path(location.removeprefix("file://"))
        if folder.is_dir() and any(cpu.match(p.name) for p in folder.glob("torch-*.whl")):
            return str(folder), f"local CPU wheel in {folder} (pip's find-links)"
        whys.append(f"{location}: no torch {version}+cpu wheel for {cp}")
    return None, "; ".join(whys) or "no source of the CPU wheel"


def _has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def report(pip_report: str | None, chose: str | None, record: Path | None = None) -> int:
    """Print the installed torch (version, build) and where its wheel came from; warn loudly
    about a CUDA build on a machine without a GPU. Records the source in the environment."""
    import torch  # the target environment's torch

    record = record or Path(sys.prefix) / SOURCE_FILE
    source = None
    if pip_report and Path(pip_report).is_file():
        for item in json.loads(Path(pip_report).read_text()).get("install", []):
            if item["metadata"]["name"].lower() == "torch":
                source = item.get("download_info", {}).get("url")
    where = {"index": "the PyTorch CPU index", "default": "pip's default index and find-links"}.get(chose or "", "")
    if source:
        source = f"{source}" + (f" (through {where})" if where else "")
        try:
            record.write_text(source + "\n")
        except OSError:
            pass
    elif record.is_file():
        source = record.read_text().strip() + " (installed by an earlier setup)"
    else:
        source = "already installed; source not recorded"
    cuda = torch.version.cuda
    build = "CPU build" if cuda is None else f"CUDA {cuda} build"
    print(f"setup: torch {torch.__version__} ({build}) from {source}")
    if cuda is not None and not _has_gpu():
        bar = "!" * 78
        print(f"{bar}\nWARNING: torch {torch.__version__} is a CUDA build (nvidia-* wheels, several GB) and this "
              f"machine has no GPU (nvidia-smi).\nIt runs on the CPU, but the CPU build is what CI tests. To get it: "
              f"make PyTorch's CPU index reachable\n(or set NUDGERL_TORCH_INDEX to a mirror of it), or put "
              f"torch-{torch_pin()}+cpu's wheel where pip finds it (PIP_FIND_LINKS), then\n"
              f"  pip install --force-reinstall --no-deps torch=={torch_pin()} --index-url {DEFAULT_INDEX}\n{bar}",
              file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("choose", help="probe the CPU index: 'index URL' or 'default'")
    sub.add_parser("version", help="the torch version pyproject.toml pins")
    links = sub.add_parser("find-links", help="a find-links location with the CPU wheel (for uv)")
    links.add_argument("--cp", default="cp311")
    rep = sub.add_parser("report", help="which torch is installed, from where")
    rep.add_argument("--pip-report")
    rep.add_argument("--chose", choices=["index", "default"])
    args = parser.parse_args(argv)
    if args.cmd == "version":
        print(torch_pin())
    elif args.cmd == "choose":
        kind, index, why = choose()
        print(f"setup: torch source: {why}", file=sys.stderr)
        print(f"index {index}" if kind == "index" else "default")
    elif args.cmd == "find-links":
        location, why = find_links(cp=args.cp)
        print(f"lock: CPU torch from {why}", file=sys.stderr)
        if location is None:
            return 1
        print(location)
    else:
        return report(args.pip_report, args.chose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
