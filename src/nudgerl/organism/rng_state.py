"""The RNG states a drilled model is saved with, so that the SFT continuing from it draws what
it would have drawn had the drill run in the same process."""

from __future__ import annotations

from pathlib import Path

DRILL_RNG = "rng_state.pt"


def save_rng_state(gen, folder: Path) -> None:
    """``gen``'s state and torch's global RNG state, saved in ``folder``."""
    import torch

    torch.save({"generator": gen.get_state(), "torch": torch.get_rng_state()}, folder / DRILL_RNG)


def restore_rng_state(folder: Path):
    """The generator saved in ``folder`` by :func:`save_rng_state`; torch's global RNG is set
    back to its saved state as well."""
    import torch

    states = torch.load(folder / DRILL_RNG)
    gen = torch.Generator()
    gen.set_state(states["generator"])
    torch.set_rng_state(states["torch"])
    return gen
