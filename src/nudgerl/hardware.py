"""Fail fast on the wrong hardware: a job that was given a GPU must see CUDA.

The workflow sets ``NUDGERL_REQUIRE_CUDA=1`` in the command of every job that asks the
scheduler for a GPU (``PlanResources.launcher``). Without this check a driver/torch mismatch (a
CPU-only torch wheel, or a node driver older than the wheel's CUDA) goes unnoticed: training
falls back to the CPU and runs for hours, or vLLM fails much later with an unrelated-looking
error. ``nudgerl.cli.main`` calls :func:`require_cuda` before it dispatches, so such a job
stops within seconds with a message that says what to check.
"""

from __future__ import annotations

import os

REQUIRE_CUDA_VAR = "NUDGERL_REQUIRE_CUDA"


class CudaUnavailableError(RuntimeError):
    """A job that requires CUDA runs where torch finds no CUDA device."""


def cuda_required(environ=None) -> bool:
    """Whether the job declared that it needs CUDA (``NUDGERL_REQUIRE_CUDA`` set, not 0/empty)."""
    environ = os.environ if environ is None else environ
    return environ.get(REQUIRE_CUDA_VAR, "").strip() not in ("", "0")


def cuda_report(torch_cuda_version: str | None, device_count: int, visible_devices: str | None) -> str:
    """Why a job that needs CUDA cannot run, and what to check: the three facts that tell a
    CPU-only torch build (torch.version.cuda None), a driver that does not load or is too old for
    the build (a CUDA build that counts 0 devices), and a job without GPUs (CUDA_VISIBLE_DEVICES
    unset or empty) apart."""
    visible = "unset" if visible_devices is None else repr(visible_devices)
    lines = [
        f"this job asked for a GPU ({REQUIRE_CUDA_VAR}=1) but torch sees no CUDA device:",
        f"  torch.version.cuda = {torch_cuda_version}",
        f"  torch.cuda.device_count() = {device_count}",
        f"  CUDA_VISIBLE_DEVICES = {visible}",
        "what to check:",
    ]
    if torch_cuda_version is None:
        lines.append("  - torch is a CPU-only build: install the CUDA torch wheel that matches the node's driver "
                     "(pip install torch==<version> --index-url https://download.pytorch.org/whl/cu<XY>)")
    else:
        lines.append(f"  - the node's driver must support CUDA {torch_cuda_version} (torch's build): run "
                     "`nvidia-smi` on the node and compare its 'CUDA Version' (it must be >= the build's), or "
                     "install the torch wheel built for the driver's CUDA")
    if not visible_devices:
        lines.append("  - no GPU was assigned to the job (CUDA_VISIBLE_DEVICES unset or empty): check the "
                     "scheduler request (resources gpu / NUDGERL_SLURM_GPU_TYPE) and `scontrol show job`")
    else:
        lines.append("  - the scheduler assigned GPUs, so the driver or the torch build is the problem: "
                     "`nvidia-smi` must list them on the node")
    return "\n".join(lines)


def require_cuda(environ=None) -> None:
    """Raise :class:`CudaUnavailableError` when the job requires CUDA and torch finds none.
    Imports torch only when required (light commands stay fast)."""
    environ = os.environ if environ is None else environ
    if not cuda_required(environ):
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise CudaUnavailableError(cuda_report(torch.version.cuda, count, environ.get("CUDA_VISIBLE_DEVICES")))
