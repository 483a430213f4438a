#!/usr/bin/env bash
# First-node check: run this on one GPU of your cluster before the first real run.
#
#   bash scripts/gpu-check.sh                       # in the env where nudgerl[gpu] is installed
#   bash scripts/gpu-check.sh --wheels DIR          # offline node: install from carried-in wheels first
#   bash scripts/gpu-check.sh --download-wheels DIR # on a machine with network: fill DIR to carry in
#   bash scripts/gpu-check.sh --mode cpu            # the same steps without a GPU (CI runs this)
#   bash scripts/gpu-check.sh --paper --model DIR   # the paper's code path, measured and projected
#                                                   # (nudgerl.node_check_paper; --mode cpu in CI too)
#
# What it runs (nudgerl.node_check): with a small local model (default: the organism's LM,
# trained in ~30 s, so nothing is downloaded; --model DIR for your own), a few GRPO and NudgeRL
# steps with LoRA and bf16 (vLLM colocate when vLLM is installed), a resume, an evaluation and
# a checkpoint curve, each through the `nudgerl` command the workflow's rules run. It checks
# every output and prints tokens/s and peak GPU memory; exit 0 only if everything passed.
# Other flags (--mode, --model, --work) go to `python -m nudgerl.node_check`.
#
# Offline install: the node's preinstalled torch stays (it satisfies the torch==2.13.0 pin when
# its version is 2.13.0, any CUDA build); everything else, setuptools and wheel included (the
# editable install builds the package), comes from DIR with --no-index. Fill DIR on a machine
# with network, the same Python version and platform as the node. GPU_CHECK_EXTRAS (default
# gpu) names the extras to install (CI: test, over the vLLM CPU build already in its venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --download-wheels)
            dir=${2:?--download-wheels needs a folder}
            "$PY" -m pip download -q -d "$dir" ".[gpu]" setuptools wheel
            echo "gpu-check: wheels for nudgerl[gpu] in $dir ($(ls "$dir" | wc -l) files); carry it to the node"
            exit 0 ;;
        --wheels)
            dir=${2:?--wheels needs a folder}
            shift 2
            "$PY" -c 'import torch' 2>/dev/null || echo "gpu-check: no torch in this env; installing it from $dir too" >&2
            "$PY" -m pip install -q --no-index --find-links "$dir" -e ".[${GPU_CHECK_EXTRAS:-gpu}]"
            continue ;;
        *) args+=("$1"); shift ;;
    esac
done
# --paper is a module of its own (it builds on nudgerl.node_check, which therefore cannot import it)
module=nudgerl.node_check
for a in ${args[@]+"${args[@]}"}; do [ "$a" = --paper ] && module=nudgerl.node_check_paper; done
exec "$PY" -m "$module" ${args[@]+"${args[@]}"}
