"""Hugging Face base models as local folders: one snapshot per model, at its pinned revision.

Compute nodes of many clusters have no internet, and TRL's colocated vLLM is started with the
model's ``name_or_path`` and no revision, so a job given a Hub id plus ``--revision`` could
neither download it there nor be sure vLLM serves that revision. Rule ``snapshot_model`` (a
local rule: it runs on the submit host, which reaches the Hub) therefore downloads each Hub
model once into ``results/<run_name>/models/<name>``; every GPU job then loads that folder with
``HF_HUB_OFFLINE=1``. The folder *is* the revision: its sidecar records the repo id, the
requested revision and the commit it resolved to.

The download is ``huggingface_hub.snapshot_download`` into the Hugging Face cache
(``HF_HUB_CACHE``, or ``cache_dir``). The cache, not ``local_dir``, because the cache also
works offline: with ``HF_HUB_OFFLINE=1`` the library resolves a branch or tag through the
cache's ``refs/`` and returns the cached snapshot, while a ``local_dir`` download offline
copies nothing. The snapshot's folder name is the resolved commit. Its files are then
hard-linked (copied across filesystems) into a temporary folder beside the target, the
sidecar is written there, and the folder is renamed into place, so a killed job never leaves a
folder that looks finished.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from nudgerl.io import atomic_write_text, provenance, sidecar_path

DEFAULT_REVISION = "main"  # what huggingface_hub downloads when no revision is given
COMMIT = re.compile(r"[0-9a-f]{40}")


class SnapshotError(RuntimeError):
    """A model could not be snapshotted; the message names the model, the revision and the fix."""


def existing_snapshot(out_dir: str | Path, repo_id: str, revision: str) -> dict | None:
    """The recorded source of ``out_dir`` when it already holds ``repo_id`` at ``revision``
    (its sidecar says so and every file the sidecar hashed is there), else None."""
    side = sidecar_path(Path(out_dir))
    if not Path(out_dir).is_dir() or not side.is_file():
        return None
    try:
        record = json.loads(side.read_text())
    except json.JSONDecodeError:
        return None
    source = record.get("config") or {}
    if source.get("repo_id") != repo_id or source.get("revision") != revision:
        return None
    if not record.get("outputs") or not all(os.path.isfile(f) for f in record["outputs"]):
        return None
    return source


def _download(repo_id: str, revision: str, cache_dir: str | None) -> Path:
    """huggingface_hub's snapshot of ``repo_id`` at ``revision`` in the cache; errors name both."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    try:
        folder = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir)
    except (HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled, OSError) as e:
        cache = cache_dir or constants.HF_HUB_CACHE
        hint = (f"HF_HUB_OFFLINE is set, so only the Hugging Face cache ({cache}) was searched: unset it on a "
                "machine that reaches the Hub (rule snapshot_model is a local rule: it runs on the submit host), "
                f"or put the model there first (huggingface-cli download {repo_id} --revision {revision})"
                if constants.HF_HUB_OFFLINE else
                f"check the id and revision (config key models[].path / models[].revision), the network, and a "
                f"token for gated models (HF_TOKEN); Hugging Face cache: {cache}")
        raise SnapshotError(f"model {repo_id!r} at revision {revision!r}: snapshot_download failed "
                            f"({type(e).__name__}: {e}). {hint}") from e
    folder = Path(folder)
    # In the cache layout models--<org>--<name>/snapshots/<commit>/ the folder's name is the commit.
    if folder.parent.name != "snapshots" or not COMMIT.fullmatch(folder.name):
        raise SnapshotError(f"model {repo_id!r} at revision {revision!r}: snapshot_download returned {folder}, "
                            "not a cache snapshot folder (.../snapshots/<commit>); cannot tell which commit it is")
    return folder


def _link_or_copy_tree(src: Path, dst: Path) -> int:
    """Every file below ``src`` (cache symlinks followed to their blobs) under ``dst``, as hard
    links where both are on one filesystem (no second copy of the weights), else copies."""
    n = 0
    for path in sorted(src.rglob("*")):
        if path.is_dir():
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        blob = os.path.realpath(path)
        try:
            os.link(blob, target)
        except OSError:  # another filesystem (EXDEV) or no hard links there
            shutil.copy2(blob, target)
        n += 1
    return n


def snapshot_model(repo_id: str, revision: str | None, out_dir: str | Path, cache_dir: str | None = None) -> dict:
    """``repo_id`` at ``revision`` (default main) as the folder ``out_dir``, with a sidecar
    ``<out_dir>/provenance.json`` whose ``config`` is {repo_id, revision, resolved_commit}.
    A folder that already holds that model at that revision is kept as it is (no Hub call)."""
    revision = revision or DEFAULT_REVISION
    out = Path(out_dir)
    found = existing_snapshot(out, repo_id, revision)
    if found is not None:
        return {**found, "skipped": True}
    cached = _download(repo_id, revision, cache_dir)
    commit = cached.name
    if COMMIT.fullmatch(revision) and revision != commit:
        raise SnapshotError(f"model {repo_id!r}: asked for commit {revision}, the cache returned {commit}")
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # a killed earlier attempt
    tmp.mkdir(parents=True)
    try:
        files = _link_or_copy_tree(cached, tmp)
        if not files:
            raise SnapshotError(f"model {repo_id!r} at revision {revision!r}: the snapshot {cached} holds no files")
        source = {"repo_id": repo_id, "revision": revision, "resolved_commit": commit}
        # The sidecar names the files as they will be after the rename (what the audit reads).
        record = provenance(source, {}, outputs=[tmp])
        prefix = os.path.normpath(tmp) + os.sep
        record["outputs"] = {os.path.join(os.path.normpath(out), k[len(prefix):]): v
                             for k, v in record["outputs"].items()}
        atomic_write_text(sidecar_path(tmp), json.dumps(record, indent=2, default=str))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {**source, "files": files, "skipped": False}
