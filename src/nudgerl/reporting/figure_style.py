"""One look for every figure: paper sizes, font sizes, and each method's colour, marker and
label (:func:`method_style`; within one figure :func:`figure_styles`, which tells apart what
would look alike there); the phrases that say which replicates a figure rests on
(:func:`replicates_phrase`, :func:`seed_sets`); :func:`styled_pyplot` is matplotlib with these
fonts."""

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
# The height (in) one line of a figure's title (which replicates it rests on) adds.
TITLE_ROW_IN = 0.16
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
# Where one figure shows several GRPO group sizes, their blues (darker with N) are hard to tell
# apart, as lines above all: each size then takes the first of these hues (tab10's, then darker
# ones) that no other method of the figure uses.
DISTINCT_COLORS = ["#1f77b4", "#17becf", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#bcbd22", "#393b79",
                   "#637939", "#843c39", "#7b4173", "#3182bd"]
# The variants of one figure (NudgeRL ablations, eps_high runs) share their family's colour:
# each takes its own marker, in this order (skipping the markers of the runs they vary).
VARIANT_MARKERS = ["o", "s", "^", "v", "<", ">", "p", "h", "P", "X", "*", "d", "H", "8"]


def method_style(method: str) -> dict:
    """Colour, marker and label of a method id, the same in every figure.

    GRPO runs get a blue that darkens with N (unknown N: mid blue); eps_high sweep runs and
    NudgeRL ablation variants keep their family's colour with a hollow marker."""
    fam = family(method)
    variant = "_" in method
    if fam == "grpo":
        n = re.match(r"grpo(\d+)", method)
        color = METHOD_COLORS.get(f"grpo{n.group(1)}" if n else "", "#2171b5")
    else:
        color = METHOD_COLORS.get(fam, "#9467bd")
    return {"color": color, "marker": _FAMILY_MARKERS.get(fam, "x"), "label": method_label(method),
            "hollow": variant}


def family(method: str) -> str:
    """The letters a method id starts with: ``grpo`` of ``grpo8_eps0.28``, ``nudgerl`` of ``nudgerl8``."""
    found = re.match(r"[a-z]+", method)
    return found.group(0) if found else method


def figure_styles(methods: list[str]) -> dict[str, dict]:
    """:func:`method_style` of each of one figure's ``methods``, with what would look alike in
    it told apart: several GRPO group sizes each a hue of :data:`DISTINCT_COLORS` (their
    variants follow them), and each variant (hollow) its own marker of :data:`VARIANT_MARKERS`."""
    styles = {m: method_style(m) for m in dict.fromkeys(methods)}
    sizes = [m for m in styles if family(m) == "grpo" and not styles[m]["hollow"]]
    if len(sizes) > 1:
        taken = {st["color"] for m, st in styles.items() if family(m) != "grpo"}
        free = iter(c for c in DISTINCT_COLORS if c not in taken)
        hue = {m: next(free, styles[m]["color"]) for m in sizes}
        for m, st in styles.items():
            main = m.split("_")[0]
            if main in hue:
                st["color"] = hue[main]
    variants = [m for m in styles if styles[m]["hollow"]]
    # not the marker of a run they vary: that run is drawn beside them
    varied = {method_style(m.split("_")[0])["marker"] for m in variants}
    markers = [mk for mk in VARIANT_MARKERS if mk not in varied]
    for m, marker in zip(variants, markers * (1 + len(variants) // len(markers))):
        styles[m]["marker"] = marker
    return styles


def reward_label(method: str) -> str:
    """A method's label on a training-reward curve: POPE's reward is the mean over all its
    prompts, its guided (oracle-prefixed) ones included, so it is not the others' quantity."""
    label = method_label(method)
    return f"{label}, reward incl. guided prompts" if family(method) == "pope" else label


# ---------------------------------------------------------------- which replicates


def _seed_number(seed) -> int:
    """A seed as its number: 3, "3" or a run folder's name "seed3"."""
    return int(str(seed).removeprefix("seed"))


def seeds_phrase(seeds) -> str:
    """ "seed 0", "seeds 0, 1", "seeds 0-4" (a run of three or more), "seeds 0-2, 5"."""
    numbers = sorted({_seed_number(s) for s in seeds})
    if not numbers:
        return "no seeds"
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs]
    return ("seed " if len(numbers) == 1 else "seeds ") + ", ".join(parts)


def replicates_phrase(seeds) -> str:
    """How many replicates and which: "3 replicates (seeds 0-2)"; one: "1 replicate (seed 0 only)"."""
    numbers = sorted({_seed_number(s) for s in seeds})
    if len(numbers) == 1:
        return f"1 replicate ({seeds_phrase(numbers)} only)"
    return f"{len(numbers)} replicates ({seeds_phrase(numbers)})"


def seed_sets(seeds_by_method: dict[str, list]) -> tuple[str, dict[str, str]]:
    """What one figure's methods rest on: the :func:`replicates_phrase` of their most common seed
    set (ties: the larger set) for its title, and for each method on another set the suffix its
    legend label takes (", seed 0 only", ", seeds 0-2"), so no mean of several replicates is read
    beside one of fewer without the legend saying which is which."""
    sets = {m: tuple(sorted({_seed_number(s) for s in seeds})) for m, seeds in seeds_by_method.items()}
    if not sets:
        return "no replicates", {}
    common = common_seeds(seeds_by_method)
    suffix = {m: ", " + seeds_phrase(seeds) + (" only" if len(seeds) == 1 else "")
              for m, seeds in sets.items() if seeds != common}
    return replicates_phrase(common), suffix


def common_seeds(seeds_by_method: dict[str, list]) -> tuple[int, ...]:
    """The seed set most of the methods rest on (ties: the larger set); () for no methods."""
    sets = [tuple(sorted({_seed_number(s) for s in seeds})) for seeds in seeds_by_method.values()]
    return max(sets, key=lambda seeds: (sets.count(seeds), len(seeds)), default=())


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
