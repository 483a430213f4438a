#!/usr/bin/env bash
# Snakemake runs this once in the rules' conda env (workflow/envs/nudgerl.yaml, under
# --sdm conda), right after creating it, with the env activated. It installs what
# scripts/setup.sh installs, into that env: torch from PyPI's CPU index where it answers (else
# pip's default index; it says which), then the nudgerl package (editable, from this checkout:
# the rules call its `nudgerl` console script) with its dependencies, constrained by
# requirements/cpu-lock.txt.
# Snakemake runs a copy (.snakemake/conda/<hash>.post-deploy.sh) from its working directory, so
# the checkout is found from there (or from the env's own folder, or NUDGERL_REPO).
# Snakemake's env hash covers this file, not the lock, so the lock's digest is written here
# (scripts/lock.sh): a new lock makes a new env, and a lock edited by hand stops the build.
set -euo pipefail
LOCK_SHA256=8d59b14ecf6d6d7ad8dc20fe40c687f35b420e7d4b2cf4b3ff8ae7750e1ecf8e

is_repo() { [ -f "$1/scripts/setup.sh" ] && grep -q '^name = "nudgerl"' "$1/pyproject.toml" 2>/dev/null; }
find_repo() {
    local dir
    for dir in "${NUDGERL_REPO:-}" "$PWD" "${CONDA_PREFIX:-}" "${VIRTUAL_ENV:-}"; do
        while [ -n "$dir" ] && [ "$dir" != / ]; do
            is_repo "$dir" && { (cd "$dir" && pwd); return 0; }
            dir=$(dirname "$dir")
        done
    done
    return 1
}
REPO=$(find_repo) || {
    echo "post-deploy: no nudgerl checkout above $PWD; set NUDGERL_REPO to it" >&2
    exit 1
}
have=$( (sha256sum 2>/dev/null || shasum -a 256) < "$REPO/requirements/cpu-lock.txt" | cut -d' ' -f1)
if [ "$have" != "$LOCK_SHA256" ]; then
    echo "post-deploy: $REPO/requirements/cpu-lock.txt is not the lock this env was made for" \
         "(sha256 $have, expected $LOCK_SHA256): regenerate it with bash scripts/lock.sh" >&2
    exit 1
fi
echo "post-deploy: installing nudgerl from $REPO into $(python -c 'import sys; print(sys.prefix)')"
PYTHON=$(command -v python) exec bash "$REPO/scripts/setup.sh" --no-venv --extras "" "$@"
