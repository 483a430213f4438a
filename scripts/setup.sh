#!/usr/bin/env bash
# Create .venv with the pinned CPU stack and the nudgerl package (editable).
# torch==2.13.0 is installed first so pip never pulls a multi-GB CUDA build on a CPU box.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] in ((3, 11), (3, 12)), "nudgerl needs Python 3.11 or 3.12"'
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0
python -m pip install -q -e ".[test]"
echo "nudgerl installed in $(pwd)/.venv"
