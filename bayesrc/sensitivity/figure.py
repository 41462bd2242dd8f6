"""The sensitivity analyses' figure: detections (and false-discovery rates) against the setting varied."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bayesrc.classical.rci import CLASS_COLOURS, DETERIORATED, IMPROVED
from bayesrc.plotting import subplots

#: a line the figure draws: (column, marker, colour, legend label)
Line = tuple[str, str, str, str]

#: the count panel's lines, in legend order
COUNT_LINES: tuple[Line, ...] = (
    ("improved", "o", CLASS_COLOURS[IMPROVED], "improved"),
    ("deteriorated", "s", CLASS_COLOURS[DETERIORATED], "deteriorated"),
    ("detections", "^", "#4c72b0", "all detections"),
)

#: the proportion panel's lines, keyed by the column whose presence in the table draws them, in legend order
RATE_LINES: dict[str, tuple[Line, ...]] = {
    "expected_fdp": (("expected_fdp", "D", "#636363", "model's expected FDP"),),
    "null_rate": (("null_rate", "v", "#e7298a", "false-positive rate, no-change null"),),
    "realized_fdp": (
        ("realized_fdp", "o", "#d62728", "realized FDP"),
        ("share_changed_detected", "s", "#7570b3", "share of changed items detected"),
    ),
}

#: one line style per group of the varied setting (zip stops at the last: a seventh group is not drawn)
GROUP_STYLES = ("-", "--", ":", "-.", (0, (1, 3)), (0, (5, 1)))


def plot_lines_by_group(ax, groups: list, x_col: str, group_col: str | None, lines: Sequence[Line]) -> None:
    """Draw each of ``lines`` for each group against ``x_col``: a line style per group, a marker and colour per line.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel to draw on.
    groups : list of (label, DataFrame)
        The table's groups, in legend order; a label of ``None`` (an ungrouped table) adds nothing to the legend.
    x_col : str
        The column of the varied setting (the x axis).
    group_col : str or None
        The column the groups are of, named in the legend.
    lines : sequence of (column, marker, colour, label)
        The columns to draw, in legend order.

    Examples
    --------
    >>> import pandas as pd
    >>> from bayesrc.plotting import subplots
    >>> fig, axes = subplots(1, 1, squeeze=False)
    >>> table = pd.DataFrame({"k": [2, 4, 2, 4], "rule": ["a", "a", "b", "b"], "improved": [3, 2, 1, 1]})
    >>> plot_lines_by_group(axes[0, 0], list(table.groupby("rule")), "k", "rule", COUNT_LINES[:1])
    >>> [line.get_label() for line in axes[0, 0].get_lines()]
    ['improved (rule=a)', 'improved (rule=b)']
    """
    for (g, sub), ls in zip(groups, GROUP_STYLES):
        tag = "" if g is None else f" ({group_col}={g})"
        for column, marker, colour, label in lines:
            ax.plot(sub[x_col], sub[column], linestyle=ls, marker=marker, color=colour, label=label + tag)


def sensitivity_figure(table: pd.DataFrame):
    """Detections (improved, deteriorated, total) against the varied setting; realized FDP if known.

    Examples
    --------
    >>> fig = sensitivity_figure(tables["threshold"])   # doctest: +SKIP
    >>> fig.savefig("threshold.png")                   # doctest: +SKIP
    """
    analysis = table["analysis"].iloc[0]
    x_col, group_col = {
        "threshold": ("z", "method"),
        "exclusion": ("min_valid", "floor_ceiling_excluded"),
        "k_subsample": ("k", None),
        "prior": ("prior", None),
        "fdr": ("error_level", "rule"),
    }[analysis]
    groups = [(None, table)] if group_col is None else list(table.groupby(group_col, sort=False))
    has_truth = "realized_fdp" in table
    has_null = "null_rate" in table
    rate_lines = [line for key, lines in RATE_LINES.items() if key in table for line in lines]
    second = bool(rate_lines)
    fig, axes = subplots(1, 2 if second else 1, figsize=(10 if second else 6, 3.8), squeeze=False)
    ax = axes[0, 0]
    plot_lines_by_group(ax, groups, x_col, group_col, COUNT_LINES)
    ax.set(xlabel=x_col, ylabel="items", title=f"Reliable changes vs {x_col}")
    ax.legend(fontsize=6, frameon=False)
    if second:
        ax2 = axes[0, 1]
        plot_lines_by_group(ax2, groups, x_col, group_col, rate_lines)
        if has_null:
            nominal = table.drop_duplicates(x_col)
            ax2.plot(nominal[x_col], nominal["nominal_rate"], color="black", lw=0.8, label="nominal rate")
        ax2.set(
            xlabel=x_col,
            ylabel="proportion",
            ylim=(0, 1),
            title="Against the simulation's truth" if has_truth else "False discoveries",
        )
        ax2.legend(fontsize=6, frameon=False)
    if analysis == "prior":
        for ax in axes.ravel():
            ax.tick_params(axis="x", labelrotation=20, labelsize=7)
    fig.tight_layout()
    return fig
