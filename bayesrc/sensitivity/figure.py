"""The sensitivity analyses' figure: detections (and false-discovery rates) against the setting varied."""

from __future__ import annotations

import pandas as pd

from bayesrc.classical.rci import CLASS_COLOURS, DETERIORATED, IMPROVED
from bayesrc.plotting import subplots


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
    has_model_fdp = "expected_fdp" in table
    has_null = "null_rate" in table
    second = has_truth or has_model_fdp or has_null
    fig, axes = subplots(1, 2 if second else 1, figsize=(10 if second else 6, 3.8), squeeze=False)
    ax = axes[0, 0]
    styles = ["-", "--", ":", "-.", (0, (1, 3)), (0, (5, 1))]
    for (g, sub), ls in zip(groups, styles):
        tag = "" if g is None else f" ({group_col}={g})"
        ax.plot(
            sub[x_col], sub["improved"], linestyle=ls, marker="o", color=CLASS_COLOURS[IMPROVED], label="improved" + tag
        )
        ax.plot(
            sub[x_col],
            sub["deteriorated"],
            linestyle=ls,
            marker="s",
            color=CLASS_COLOURS[DETERIORATED],
            label="deteriorated" + tag,
        )
        ax.plot(sub[x_col], sub["detections"], linestyle=ls, marker="^", color="#4c72b0", label="all detections" + tag)
    ax.set(xlabel=x_col, ylabel="items", title=f"Reliable changes vs {x_col}")
    ax.legend(fontsize=6, frameon=False)
    if second:
        ax2 = axes[0, 1]
        for (g, sub), ls in zip(groups, styles):
            tag = "" if g is None else f" ({group_col}={g})"
            if has_model_fdp:
                ax2.plot(
                    sub[x_col],
                    sub["expected_fdp"],
                    linestyle=ls,
                    marker="D",
                    color="#636363",
                    label="model's expected FDP" + tag,
                )
            if has_null:
                ax2.plot(
                    sub[x_col],
                    sub["null_rate"],
                    linestyle=ls,
                    marker="v",
                    color="#e7298a",
                    label="false-positive rate, no-change null" + tag,
                )
            if has_truth:
                ax2.plot(
                    sub[x_col],
                    sub["realized_fdp"],
                    linestyle=ls,
                    marker="o",
                    color="#d62728",
                    label="realized FDP" + tag,
                )
                ax2.plot(
                    sub[x_col],
                    sub["share_changed_detected"],
                    linestyle=ls,
                    marker="s",
                    color="#7570b3",
                    label="share of changed items detected" + tag,
                )
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
