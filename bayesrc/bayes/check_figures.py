"""Figures of the workflow checks (:mod:`bayesrc.bayes.ppc`, :mod:`bayesrc.bayes.checks`), drawn from
``fit.json`` alone.

matplotlib is imported when a figure is drawn (through :mod:`bayesrc.plotting`), never at import.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from bayesrc.bayes.ppc import PPC_ALPHA, STATS
from bayesrc.plotting import subplots

STAT_TITLES = {
    "mean_v1": "mean accuracy v1",
    "mean_v2": "mean accuracy v2",
    "sd_v1": "SD of accuracies v1",
    "sd_v2": "SD of accuracies v2",
    "mean_change": "mean change (y2 - y1)/n",
    "sd_change": "SD of change",
    "floor": "share at floor",
    "ceiling": "share at ceiling",
    "corr": "corr(v1, v2)",
}


def ppc_figure(ppc: Mapping, *, title: str = ""):
    """Posterior predictive check: per statistic (panel) and stratum (row), the replicated 90% range
    (bar) and mean (tick) against the observed value (dot; red where the check flags it).

    Examples
    --------
    >>> rows = [{"stratum": "all", "stat": s, "observed": 0.5, "replicated_mean": 0.5, "replicated_lo90": 0.4,
    ...          "replicated_hi90": 0.6, "p": 0.9, "p_adjusted": 1.0} for s in STATS]
    >>> type(ppc_figure({"table": rows, "alpha": 0.05})).__name__
    'Figure'
    """
    table = pd.DataFrame(ppc["table"])
    alpha = float(ppc.get("alpha", PPC_ALPHA))
    strata = list(dict.fromkeys(table["stratum"]))
    ncols = 3
    nrows = int(np.ceil(len(STATS) / ncols))
    fig, axes = subplots(
        nrows, ncols, figsize=(11, 0.8 + nrows * (0.6 + 0.22 * len(strata))), layout="constrained", squeeze=False
    )
    ypos = np.arange(len(strata))[::-1]
    for ax, stat in zip(axes.ravel(), STATS):
        t = table[table["stat"] == stat].set_index("stratum").reindex(strata)
        num = lambda c: pd.to_numeric(t[c], errors="coerce").to_numpy(float)  # noqa: E731  (JSON null -> NaN)
        lo, hi, mean, obs, adj = (
            num("replicated_lo90"),
            num("replicated_hi90"),
            num("replicated_mean"),
            num("observed"),
            num("p_adjusted"),
        )
        ax.hlines(ypos, lo, hi, color="0.6", lw=4, label="replicated 90%")
        ax.plot(mean, ypos, "|", color="0.2", ms=8, label="replicated mean")
        bad = np.nan_to_num(adj, nan=1.0) <= alpha
        ax.plot(obs[~bad], ypos[~bad], "o", color="tab:blue", ms=4, label="observed")
        ax.plot(obs[bad], ypos[bad], "o", color="tab:red", ms=5, label=f"observed, flagged (adjusted p ≤ {alpha:g})")
        ax.set_title(STAT_TITLES.get(stat, stat), fontsize=9)
        ax.set_yticks(ypos, strata if ax in axes[:, 0] else [""] * len(strata), fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes.ravel()[len(STATS) :]:
        ax.set_visible(False)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    fig.suptitle(title or "Posterior predictive check per stratum (domain:level)", fontsize=10)
    return fig


def prior_predictive_figure(pp: Mapping, *, title: str = ""):
    """Prior predictive check: the accuracies a new item may have under the priors (per version,
    beside the observed ``y / n`` of the items) and the change in accuracy they allow.

    Examples
    --------
    >>> e = np.linspace(0, 1, 3).tolist()
    >>> pp = {"hist_p": {"edges": e, "prior_v1": [5, 5], "prior_v2": [4, 6], "observed_v1": [1, 0],
    ...                  "observed_v2": [0, 1]},
    ...       "hist_dp": {"edges": [-1.0, 0.0, 1.0], "prior": [3, 7]}, "share_abs_dp_above": {"0.05": 0.4, "0.1": 0.2}}
    >>> len(prior_predictive_figure(pp).axes)
    2
    """
    fig, (ax_p, ax_dp) = subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    hp = pp["hist_p"]
    edges = np.asarray(hp["edges"])
    share = lambda c: np.asarray(c, float) / max(float(np.sum(c)), 1.0)  # noqa: E731
    for v, colour in ((1, "tab:blue"), (2, "tab:orange")):
        ax_p.stairs(share(hp[f"prior_v{v}"]), edges, color=colour, lw=1.5, label=f"prior predictive, version {v}")
        ax_p.stairs(
            share(hp[f"observed_v{v}"]), edges, color=colour, lw=1, ls=":", label=f"observed y / n, version {v}"
        )
    ax_p.set(xlabel="item accuracy", ylabel="share of items", title="Accuracy of an item")
    ax_p.legend(fontsize=7, frameon=False)
    hd = pp["hist_dp"]
    ax_dp.stairs(share(hd["prior"]), np.asarray(hd["edges"]), color="0.3", fill=True, alpha=0.5)
    above = pp["share_abs_dp_above"]
    ax_dp.set(
        xlabel="change in accuracy (v2 - v1)",
        ylabel="share of items",
        title="Change: " + ", ".join(f"|dp| > {k}: {v:.0%}" for k, v in above.items()),
    )
    fig.suptitle(title or "Prior predictive check: what the priors allow before the data", fontsize=10)
    return fig


def loo_pit_figure(band: pd.DataFrame, *, ks_p: float | None = None, title: str = ""):
    """LOO-PIT of the per-item change: its ECDF minus the uniform CDF, with the simultaneous 95%
    band that the curve stays in when the model's leave-one-out predictions are calibrated
    (:func:`bayesrc.bayes.checks.pit_ecdf_band`). A curve below zero then above it: the
    predictions are too wide; above then below: too narrow; above (below) throughout: the
    observed changes are smaller (larger) than predicted.

    Examples
    --------
    >>> from bayesrc.bayes.checks import pit_ecdf_band
    >>> band = pit_ecdf_band(np.random.default_rng(0).uniform(size=200))
    >>> len(loo_pit_figure(band, ks_p=0.5).axes)
    1
    """
    fig, ax = subplots(1, 1, figsize=(5.5, 3.4), layout="constrained")
    x = band["x"].to_numpy(float)
    ax.fill_between(
        x, band["lower"], band["upper"], step="post", color="0.85", label="95% simultaneous band (uniform PIT)"
    )
    ax.axhline(0.0, color="0.5", lw=0.8)
    out = band["outside"].to_numpy(bool)
    ax.step(
        x,
        band["ecdf_diff"],
        where="post",
        color="tab:red" if out.any() else "tab:blue",
        lw=1.5,
        label="LOO-PIT ECDF - uniform",
    )
    ax.set(xlabel="LOO-PIT of y2 - y1", ylabel="ECDF difference")
    ax.legend(fontsize=7, frameon=False)
    verdict = "outside the band" if out.any() else "within the band"
    ks = "" if ks_p is None else f", KS p = {ks_p:.3f}"
    ax.set_title(title or f"LOO-PIT calibration: {verdict}{ks}", fontsize=10)
    return fig


def loo_compare_figure(table: pd.DataFrame, *, title: str = ""):
    """Each fit's ELPD difference from the best (dot) with ±2 SE of the difference (bar), best on top
    (the table of :attr:`bayesrc.bayes.model_comparison.ModelComparison.table`).

    Examples
    --------
    >>> t = pd.DataFrame({"elpd_diff": [0.0, -21.0], "dse": [0.0, 6.0]}, index=["change", "betabinom"])
    >>> len(loo_compare_figure(t).axes)
    1
    """
    fig, ax = subplots(1, 1, figsize=(5.5, 0.9 + 0.45 * len(table)), layout="constrained")
    ypos = np.arange(len(table))[::-1]
    diff, dse = table["elpd_diff"].to_numpy(float), table["dse"].to_numpy(float)
    ax.hlines(ypos, diff - 2 * dse, diff + 2 * dse, color="0.6", lw=4, label="±2 SE of the difference")
    ax.plot(diff, ypos, "o", color="tab:blue", label="ELPD difference from the best")
    ax.axvline(0.0, color="0.5", lw=0.8)
    ax.set_yticks(ypos, [str(m) for m in table.index])
    ax.set(xlabel="ELPD difference (PSIS-LOO, log scale; higher is better)")
    ax.legend(fontsize=7, frameon=False, loc="lower left")
    ax.set_title(title or "Model comparison by PSIS-LOO", fontsize=10)
    return fig
