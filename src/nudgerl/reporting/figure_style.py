"""One look for every figure: paper sizes, font sizes, and each method's colour, marker and
label (:func:`method_style`); :func:`styled_pyplot` is matplotlib with these fonts."""

from __future__ import annotations

import re

from nudgerl.reporting.tables import method_label

# Paper-size figures: one column is ~3.3 in, two columns ~7 in; fonts legible at that size.
ONE_COLUMN = (3.4, 2.6)
TWO_COLUMN = (7.0, 2.8)
RC = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
      "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.4, "lines.markersize": 4,
      "legend.handlelength": 1.6, "legend.columnspacing": 1.2}
# Legends sit outside the panels: the height (in) one legend row adds to a figure.
LEGEND_ROW_IN = 0.17
# A method's interval band and its replicates' thin lines.
BAND_ALPHA = 0.18
REPLICATE_ALPHA = 0.3

METHOD_COLORS = {
    "base": "#7f7f7f",
    "grpo8": "#6baed6",  # #9ecae1 was too pale to read as a thin line on white
    "grpo16": "#4292c6",
    "grpo32": "#08519c",
    "grpo64": "#08306b",
    "pope": "#2ca02c",
    "nudgerl": "#d62728",
    # the field's exploration fixes (config `baselines`)
    "dapo": "#ff7f0e",
    "drgrpo": "#8c564b",
    "gspo": "#e377c2",
    "cispo": "#bcbd22",
    "entropy": "#17becf",
    "ngrpo": "#9467bd",
    "passk": "#7b4173",
}
_FAMILY_MARKERS = {"base": "s", "grpo": "o", "pope": "^", "nudgerl": "D", "dapo": "v", "drgrpo": "<",
                   "gspo": ">", "cispo": "P", "entropy": "*", "ngrpo": "X", "passk": "h"}


def method_style(method: str) -> dict:
    """Colour, marker and label of a method id, the same in every figure.

    GRPO runs get a blue that darkens with N (unknown N: mid blue); eps_high sweep runs and
    NudgeRL ablation variants keep their family's colour with a hollow marker."""
    family = re.match(r"[a-z]+", method).group(0) if re.match(r"[a-z]+", method) else method
    variant = "_" in method
    if family == "grpo":
        n = re.match(r"grpo(\d+)", method)
        color = METHOD_COLORS.get(f"grpo{n.group(1)}" if n else "", "#2171b5")
    else:
        color = METHOD_COLORS.get(family, "#9467bd")
    return {"color": color, "marker": _FAMILY_MARKERS.get(family, "x"), "label": method_label(method),
            "hollow": variant}


def pyplot():
    """matplotlib.pyplot on the Agg backend, rcParams as they are."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def styled_pyplot():
    """matplotlib.pyplot on the Agg backend with the paper's font sizes (:data:`RC`)."""
    plt = pyplot()
    plt.rcParams.update(RC)
    return plt
