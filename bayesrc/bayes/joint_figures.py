"""Figures of a joint fit of a family of versions (:class:`bayesrc.bayes.JointFit`): the versions'
posterior mean accuracy with their rank bands, and a heatmap of the per-item changes.

matplotlib is imported when a figure is drawn (through :mod:`bayesrc.plotting`), never at import.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrc.plotting import subplots


def rank_band_figure(versions: pd.DataFrame, *, title: str = ""):
    """Each version's posterior mean accuracy over the items (dot) with its 90% interval (bar), best
    on top, coloured by rank band (a band: versions the posterior cannot order; ``versions`` is
    :attr:`JointFit.versions_table`).

    Examples
    --------
    >>> t = pd.DataFrame({"version": ["a", "b", "c"], "mean_accuracy": [0.5, 0.6, 0.58], "acc_lo90": [0.45, 0.55, 0.53],
    ...                   "acc_hi90": [0.55, 0.65, 0.63], "p_best": [0.0, 0.6, 0.4], "band": [2, 1, 1]})
    >>> len(rank_band_figure(t).axes)
    1
    """
    t = versions.sort_values("mean_accuracy", ascending=True).reset_index(drop=True)
    fig, ax = subplots(1, 1, figsize=(5.5, 1.0 + 0.4 * len(t)), layout="constrained")
    colours = [f"C{(int(b) - 1) % 10}" for b in t["band"]]
    y = np.arange(len(t))
    ax.hlines(y, t["acc_lo90"], t["acc_hi90"], colors=colours, lw=3, alpha=0.6)
    ax.scatter(t["mean_accuracy"], y, c=colours, zorder=3)
    ax.set_yticks(y, [f"{v}  (band {b}, P(best) {p:.2f})" for v, b, p in zip(t["version"], t["band"], t["p_best"])])
    ax.set(xlabel="mean accuracy over the items (90% interval)")
    ax.set_title(title or "Versions by accuracy, coloured by rank band", fontsize=10)
    return fig


def change_heatmap(items: pd.DataFrame, *, n_items: int = 40, title: str = ""):
    """Posterior mean change in accuracy from the reference per item (rows) and version (columns), for
    the ``n_items`` items whose largest |change| is largest (``items`` is :attr:`JointFit.items`).

    Examples
    --------
    >>> t = pd.DataFrame({"item_id": ["i1"] * 3 + ["i2"] * 3, "version": ["a", "b", "c"] * 2,
    ...                   "dp_mean": [0.0, 0.2, -0.1, 0.0, 0.0, 0.05]})
    >>> len(change_heatmap(t).axes)   # the heatmap and its colour bar
    2
    """
    dp = items.pivot(index="item_id", columns="version", values="dp_mean")[list(dict.fromkeys(items["version"]))].iloc[
        :, 1:
    ]
    dp = dp.loc[dp.abs().max(axis=1).sort_values(ascending=False).index[:n_items]]
    fig, ax = subplots(1, 1, figsize=(1.8 + 0.9 * dp.shape[1], 1.2 + 0.18 * len(dp)), layout="constrained")
    lim = max(float(np.nanmax(np.abs(dp.to_numpy()))), 1e-3) if dp.size else 1.0
    im = ax.imshow(dp.to_numpy(), cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    ax.set_xticks(np.arange(dp.shape[1]), [str(c) for c in dp.columns], rotation=30, ha="right")
    ax.set_yticks(np.arange(len(dp)), [str(i) for i in dp.index], fontsize=6)
    fig.colorbar(im, ax=ax, label="posterior mean Δp from the reference")
    ax.set_title(title or f"Per-item change, the {len(dp)} largest", fontsize=10)
    return fig
