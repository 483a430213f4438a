"""The training-reward figure (matplotlib, Agg backend); colours from :func:`nudgerl.reporting.figures.method_style`."""

from __future__ import annotations

from pathlib import Path

from nudgerl.reporting.figures import method_style
from nudgerl.io import read_jsonl
from nudgerl.reporting.tables import method_label

def _method_of(run_dir: str) -> str:
    # results/runs/<method>/seed<k>
    return Path(run_dir).parent.name


def _smooth(values: list[float], window: int) -> list[float]:
    out, acc = [], []
    for v in values:
        acc.append(v)
        acc = acc[-window:]
        out.append(sum(acc) / len(acc))
    return out


def training_curves(run_dirs: list[str], out: str | Path, window: int = 5) -> Path:
    """Training reward (moving average) against step, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_r, ax_t) = plt.subplots(1, 2, figsize=(7.0, 2.8), constrained_layout=True)
    for run in run_dirs:
        rows = read_jsonl(Path(run) / "metrics.jsonl")
        if not rows:
            raise ValueError(f"{run}/metrics.jsonl has no rows")
        method = _method_of(run)
        seed = Path(run).name
        steps = [r["step"] for r in rows]
        color = method_style(method)["color"]
        label = f"{method_label(method)} {seed}"
        ax_r.plot(steps, _smooth([r["reward_mean"] for r in rows], window), color=color, label=label)
        ax_t.plot([r["cumulative_rollout_tokens"] / 1e3 for r in rows],
                  _smooth([r["reward_mean"] for r in rows], window), color=color, label=label)
    ax_r.set_xlabel("training step")
    ax_r.set_ylabel(f"train reward ({window}-step avg)")
    ax_t.set_xlabel("cumulative rollout tokens (thousands)")
    ax_r.legend(fontsize=7, frameon=False)
    for ax in (ax_r, ax_t):
        ax.grid(alpha=0.3)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp" + out.suffix)
    fig.savefig(tmp, dpi=150)
    plt.close(fig)
    tmp.replace(out)
    return out
