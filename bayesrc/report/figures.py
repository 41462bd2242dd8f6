"""Report figures: the reference study's figures redrawn from a run's data, and the
Bayesian layer's posterior plots (arviz-plots where ArviZ has the plot).

Every function takes tidy inputs (the items tables and JSON blocks the analysis
commands write) and returns a matplotlib ``Figure``; :func:`to_png` turns one into
PNG bytes for embedding.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from bayesrc.classical.rci import CLASS_COLOURS, CLASS_LABELS, CLASSES, DETERIORATED, EXCLUDED, IMPROVED, NO_CHANGE
from bayesrc.plotting import subplots, to_png  # noqa: F401  (the report draws with them; sections call F.to_png)


def _jitter(n: int, scale: float, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-scale, scale, n)


def _max_samples(items: pd.DataFrame, default: int = 10) -> int:
    """The most samples an item has (``n_v1``, ``n_v2``): the grid of its accuracies; ``default`` with no finite
    count."""
    if not {"n_v1", "n_v2"} <= set(items):
        return default
    counts = items[["n_v1", "n_v2"]].to_numpy(float)
    counts = counts[np.isfinite(counts)]
    return int(counts.max()) if counts.size else default


def item_scatter(
    items: pd.DataFrame, s_diff: float, z: float = 1.96, *, versions: tuple[str, str] = ("v1", "v2"), title: str = ""
) -> Figure:
    """v1 vs v2 item accuracy, coloured by RCI class, with the band ``|p2 - p1| <= z S_diff``.

    Points are jittered slightly: with K samples accuracies sit on a grid of 1/K.
    """
    fig, ax = subplots(figsize=(5.6, 5.2))
    n = len(items)
    k_grid = 1.0 / max(_max_samples(items), 1)
    jx, jy = _jitter(n, 0.3 * k_grid, 1), _jitter(n, 0.3 * k_grid, 2)
    for cls in (EXCLUDED, *CLASSES):
        sel = (items["class"] == cls).to_numpy()
        if sel.any():
            ax.scatter(
                items["p_v1"].to_numpy()[sel] + jx[sel],
                items["p_v2"].to_numpy()[sel] + jy[sel],
                s=7,
                alpha=0.55,
                color=CLASS_COLOURS[cls],
                label=f"{CLASS_LABELS[cls]} ({sel.sum()})",
                linewidths=0,
            )
    x = np.array([0.0, 1.0])
    ax.plot(x, x, color="black", lw=0.8)
    if np.isfinite(s_diff):
        band = z * s_diff
        ax.fill_between(
            x, x - band, x + band, color="#4c72b0", alpha=0.12, label=f"RCI band ±{z:g}·S_diff = ±{band:.3f}"
        )
    v1, v2 = versions
    ax.set(
        xlim=(-0.05, 1.05),
        ylim=(-0.05, 1.05),
        xlabel=f"accuracy {v1} (p_v1)",
        ylabel=f"accuracy {v2} (p_v2)",
        title=title or f"Item accuracy, {v1} vs {v2}",
    )
    ax.set_aspect("equal")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7, frameon=False)
    return fig


def rci_histogram(items: pd.DataFrame, z: float = 1.96, *, title: str = "") -> Figure:
    """Distribution of RCI over analysable items with the ±z thresholds."""
    fig, ax = subplots(figsize=(6.4, 3.6))
    sub = items.loc[(items["class"] != EXCLUDED) & items["rci"].notna()]
    r = sub["rci"].to_numpy()
    if r.size:
        lim = max(np.nanmax(np.abs(r)), z) * 1.05
        groups = [sub.loc[sub["class"] == c, "rci"].to_numpy() for c in CLASSES]
        ax.hist(
            groups,
            bins=np.linspace(-lim, lim, 61),
            stacked=True,
            color=[CLASS_COLOURS[c] for c in CLASSES],
            label=[CLASS_LABELS[c] for c in CLASSES],
        )
        ax.legend(fontsize=7, frameon=False, loc="upper left")
    for s in (-z, z):
        ax.axvline(s, color="#d62728", ls="--", lw=1)
    ax.text(z, ax.get_ylim()[1] * 0.92, f" +{z:g}", color="#d62728", fontsize=8)
    ax.text(-z, ax.get_ylim()[1] * 0.92, f"-{z:g} ", color="#d62728", fontsize=8, ha="right")
    ax.set(xlabel="RCI = Δp / S_diff", ylabel="items", title=title or f"RCI distribution ({r.size} analysable items)")
    return fig


def domain_heatmap(table: pd.DataFrame, *, title: str = "", fmt: str = "{:d}") -> Figure:
    """Domain x class counts (rows: domains) as an annotated heatmap of row shares."""
    t = table.reindex(columns=[c for c in CLASSES if c in table.columns]).fillna(0)
    share = t.div(t.sum(axis=1).replace(0, np.nan), axis=0)
    fig, ax = subplots(figsize=(5.2, 0.45 * len(t) + 1.4))
    im = ax.imshow(share.to_numpy(float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for i in range(t.shape[0]):
        for j in range(t.shape[1]):
            v = share.iat[i, j]
            ax.text(
                j,
                i,
                f"{int(t.iat[i, j])}\n{v:.0%}" if np.isfinite(v) else "0",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if (np.isfinite(v) and v < 0.6) else "black",
            )
    ax.set_xticks(range(t.shape[1]), [CLASS_LABELS[c] for c in t.columns], fontsize=8)
    ax.set_yticks(range(t.shape[0]), list(map(str, t.index)), fontsize=8)
    fig.colorbar(im, ax=ax, label="share of domain's items", shrink=0.8)
    ax.set_title(title or "Domain × class")
    return fig


def difficulty_churn(bins: pd.DataFrame, *, title: str = "") -> Figure:
    """Share improved / deteriorated per baseline-accuracy bin, with n per bin."""
    fig, ax = subplots(figsize=(6.4, 3.6))
    x = np.arange(len(bins))
    n = bins["n"].replace(0, np.nan).to_numpy(float)
    imp, det = bins[IMPROVED].to_numpy(float) / n, bins[DETERIORATED].to_numpy(float) / n
    ax.bar(x, np.nan_to_num(imp), color=CLASS_COLOURS[IMPROVED], label=CLASS_LABELS[IMPROVED])
    ax.bar(
        x,
        np.nan_to_num(det),
        bottom=np.nan_to_num(imp),
        color=CLASS_COLOURS[DETERIORATED],
        label=CLASS_LABELS[DETERIORATED],
    )
    # a label inside the axes: a share over 1 (counts above n) would stretch the PNG
    for xi, ni, top in zip(x, bins["n"], np.nan_to_num(imp + det)):
        ax.text(xi, min(top, 1.0) + 0.01, f"n={int(ni)}" if np.isfinite(ni) else "n=n/a", ha="center", fontsize=7)
    ax.set_xticks(x, list(bins["bin"]))
    ax.set(
        xlabel="baseline accuracy p_v1",
        ylabel="share of items (churn)",
        ylim=(0, 1.05),
        title=title or "Churn by baseline difficulty",
    )
    ax.legend(fontsize=8, frameon=False)
    return fig


def p_changed_vs_rci(merged: pd.DataFrame, z: float = 1.96) -> Figure:
    """Posterior P(changed) per item against its RCI, coloured by the RCI class."""
    fig, ax = subplots(figsize=(6.4, 4.0))
    for cls in (EXCLUDED, *CLASSES):
        sel = merged["rci_class"] == cls
        if sel.any():
            ax.scatter(
                merged.loc[sel, "rci"],
                merged.loc[sel, "p_changed"],
                s=7,
                alpha=0.6,
                color=CLASS_COLOURS.get(cls, "grey"),
                label=f"RCI: {CLASS_LABELS.get(cls, cls)}",
                linewidths=0,
            )
    for s in (-z, z):
        ax.axvline(s, color="#d62728", ls="--", lw=0.8)
    ax.set(
        xlabel="RCI", ylabel="posterior P(changed)", ylim=(-0.02, 1.02), title="Posterior probability of change vs RCI"
    )
    ax.legend(fontsize=7, frameon=False)
    return fig


def dp_forest(items: pd.DataFrame, n: int = 25) -> Figure:
    """Δp posterior mean and 90% interval of the ``n`` items with the largest |Δp|.

    Drawn from the summary columns of ``items.parquet`` (the full per-item posterior
    lives in ``posterior.nc``; :func:`posterior_forest` draws it with arviz-plots).
    """
    top = items.reindex(items["dp_mean"].abs().sort_values(ascending=False).index).head(n).iloc[::-1]
    fig, ax = subplots(figsize=(6.4, 0.22 * len(top) + 1.2))
    y = np.arange(len(top))
    colours = [CLASS_COLOURS.get(c, "grey") for c in top.get("bayes_class", pd.Series([NO_CHANGE] * len(top)))]
    ax.hlines(y, top["dp_lo90"], top["dp_hi90"], color=colours, lw=2)
    ax.scatter(top["dp_mean"], y, color=colours, s=14, zorder=3)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y, list(top["item_id"]), fontsize=6)
    ax.set(xlabel="Δp (posterior mean, 90% interval)", title=f"Most changed items ({len(top)})")
    return fig


def domain_shift_forest(shift: pd.DataFrame) -> Figure:
    """Per-domain shift: posterior mean and 90% interval (``fit.json`` ``domain_shift``)."""
    fig, ax = subplots(figsize=(6.0, 0.35 * len(shift) + 1.2))
    y = np.arange(len(shift))
    ax.hlines(y, shift["lo90"], shift["hi90"], color="#4c72b0", lw=2.5)
    ax.scatter(shift["mean"], y, color="#4c72b0", zorder=3)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y, list(shift["domain"]), fontsize=8)
    ax.set(xlabel="domain shift (posterior mean, 90% interval)", title="Domain shifts")
    return fig


def truth_scores(per_replicate: pd.DataFrame, q: float = 0.10, *, title: str = "") -> Figure:
    """Real-model truth (``truth_replicates.parquet`` of ``bayesrc truth``), one point per replicate.

    Left: realised false-discovery proportion (sign) of every method, with the FDR level q.
    Right: each Bayesian model's estimate of RCI's FDP against RCI's realised FDP (the diagonal
    is a perfect estimate; bars: the fit's 90% interval of it, sign), with its 90% coverage of the
    exact Delta p in the legend.
    """
    fig, (a1, a2) = subplots(1, 2, figsize=(10.5, 4.2))
    methods = list(dict.fromkeys(per_replicate["method"]))
    rng = np.random.default_rng(0)
    for i, m in enumerate(methods):
        g = per_replicate[per_replicate["method"] == m]
        kind = g["kind"].iloc[0]
        a1.scatter(
            g["fdp_sign"] + rng.uniform(-0.004, 0.004, len(g)),
            np.full(len(g), i) + rng.uniform(-0.15, 0.15, len(g)),
            s=10,
            alpha=0.5,
            color="#4c72b0" if kind == "rci" else "#d95f02",
            linewidths=0,
        )
        a1.scatter([g["fdp_sign"].mean()], [i], marker="|", s=300, color="black", zorder=3)
    a1.axvline(q, color="#d62728", ls="--", lw=0.8, label=f"q = {q:g}")
    a1.set_yticks(range(len(methods)), methods, fontsize=8)
    a1.set(xlabel="realised FDP (flag's sign ≠ exact Δp's)", title="False discoveries per replicate (| = mean)")
    a1.legend(fontsize=7, frameon=False)
    # replicates scored by RCI alone (truth(methods=())) have no model and no estimate column
    bayes = (
        per_replicate[(per_replicate["kind"] == "bayes") & per_replicate["rci_fdp_estimate"].notna()]
        if "rci_fdp_estimate" in per_replicate
        else per_replicate.iloc[:0]
    )
    colours = ["#d95f02", "#7570b3", "#1b9e77", "#e7298a", "#66a61e"]
    for j, (m, g) in enumerate(bayes.groupby("method", sort=False)):
        a2.scatter(
            g["rci_fdp_realised"],
            g["rci_fdp_estimate"],
            s=14,
            alpha=0.6,
            color=colours[j % len(colours)],
            linewidths=0,
            label=f"{m}, sign (coverage90 {g['coverage90'].mean():.2f})",
        )
        if "rci_fdp_lo90" in g:  # the fit's 90% interval of the realised proportion (tables from before it have none)
            below, above = (
                (g["rci_fdp_estimate"] - g["rci_fdp_lo90"]).clip(lower=0),
                (g["rci_fdp_hi90"] - g["rci_fdp_estimate"]).clip(lower=0),
            )
            a2.errorbar(
                g["rci_fdp_realised"],
                g["rci_fdp_estimate"],
                yerr=[below, above],
                fmt="none",
                ecolor=colours[j % len(colours)],
                alpha=0.3,
                lw=0.8,
            )
        if "rci_fdp_estimate_material" in g:  # material false discoveries (|exact dp| < delta_min counts too): hollow
            a2.scatter(
                g["rci_fdp_realised_material"],
                g["rci_fdp_estimate_material"],
                s=14,
                alpha=0.6,
                facecolors="none",
                edgecolors=colours[j % len(colours)],
                label=f"{m}, material",
            )
    cols = [
        c
        for c in (
            "rci_fdp_realised",
            "rci_fdp_estimate",
            "rci_fdp_realised_material",
            "rci_fdp_estimate_material",
            "rci_fdp_hi90",
        )
        if c in bayes
    ]
    shown = bayes[cols].to_numpy(float)
    shown = shown[np.isfinite(shown)]  # an infinite or missing proportion cannot set the axis limits
    hi = float(shown.max()) if shown.size else 1.0
    hi = max(hi, 0.1) * 1.1
    a2.plot([0, hi], [0, hi], color="black", lw=0.8)
    a2.set(
        xlim=(-0.01, hi),
        ylim=(-0.01, hi),
        xlabel="RCI's realised FDP",
        ylabel="model's estimate of RCI's FDP",
        title="Estimating RCI's false discoveries",
    )
    if len(bayes):  # no model scored: nothing to label
        a2.legend(fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


#: a family's methods, as family_truth_scores colours them
FAMILY_METHOD_COLOURS = {"joint": "#d95f02", "pair": "#7570b3", "rci": "#4c72b0"}


def family_truth_scores(per_replicate: pd.DataFrame, *, title: str = "") -> Figure:
    """A family against exact truth (``family_truth_replicates.parquet`` of ``bayesrc truth V1 V2 V3 ...``),
    one point per replicate and a tick at the mean, one row per version or step and method.

    Left: the models' coverage of exact Delta p by their 90% intervals, with the nominal 0.9.
    Right: the flags' realised false-discovery proportion (sign) of every method.

    Examples
    --------
    >>> rep = pd.DataFrame({"method": ["rci", "joint"], "version": ["v2", "v2"], "coverage90": [np.nan, 0.9],
    ...                     "fdp_sign": [0.2, 0.0]})
    >>> len(family_truth_scores(rep).axes)
    2
    """
    rows = per_replicate[["version", "method"]].drop_duplicates()
    # each version's (or step's) methods together, in the order of FAMILY_METHOD_COLOURS
    rank = rows.assign(
        v=rows["version"].map({v: i for i, v in enumerate(dict.fromkeys(rows["version"]))}),
        m=rows["method"].map({m: i for i, m in enumerate(FAMILY_METHOD_COLOURS)}),
    )
    rows = rows.loc[rank.sort_values(["v", "m"], kind="stable").index]
    fig, (a1, a2) = subplots(1, 2, figsize=(10.5, 1.2 + 0.32 * len(rows)), sharey=True)
    for i, (version, method) in enumerate(rows.itertuples(index=False)):
        g = per_replicate[(per_replicate["version"] == version) & (per_replicate["method"] == method)]
        colour = FAMILY_METHOD_COLOURS.get(method, "#666666")
        for ax, col in ((a1, "coverage90"), (a2, "fdp_sign")):
            x = pd.to_numeric(g[col], errors="coerce").to_numpy(float) if col in g else np.array([])
            x = x[np.isfinite(x)]
            if x.size:
                ax.scatter(x, i + _jitter(x.size, 0.15, seed=i), s=10, alpha=0.5, color=colour, linewidths=0)
                ax.scatter([x.mean()], [i], marker="|", s=200, color="black", zorder=3)
    a1.axvline(0.9, color="#d62728", ls="--", lw=0.8, label="nominal 0.9")
    a1.set_yticks(range(len(rows)), [f"{v} ({m})" for v, m in rows.itertuples(index=False)], fontsize=7)
    a1.invert_yaxis()
    a1.set(xlabel="coverage of exact Δp (90% intervals)", title="Per-item coverage (| = mean)")
    a1.legend(fontsize=7, frameon=False)
    a1.xaxis.set_major_locator(MaxNLocator(5))  # the coverage axis spans ~0.15: default ticks crowd it
    a2.set(xlabel="realised FDP (flag's sign ≠ exact Δp's)", title="False discoveries per replicate")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _arviz_figure(pc) -> Figure:
    return pc.get_viz("figure")


def scalar_vars(dt, max_panels: int = 8) -> list[str]:
    """Posterior variables for trace / rank plots: no per-item (or per-cell: the change model's ``r_cell``)
    variables, no ``log_`` / ``logit_`` copies of a variable that is also stored, smallest first, at most
    ``max_panels`` panels in all (each panel is one chain-overlaid trace)."""
    post = dt["posterior"]
    names = set(map(str, post.data_vars))
    sized = []
    for name, da in post.data_vars.items():
        name = str(name)
        extra = [d for d in da.dims if d not in ("chain", "draw")]
        if {"item", "cell"} & set(extra) or any(
            name.startswith(pre) and name[len(pre) :] in names for pre in ("log_", "logit_")
        ):
            continue
        sized.append((int(np.prod([da.sizes[d] for d in extra])), name))
    out, used = [], 0
    for size, name in sorted(sized):
        if used + size > max_panels and out:
            break
        out.append(name)
        used += size
    return out


def trace_plot(dt, var_names: Sequence[str]) -> Figure:
    """arviz-plots ``plot_trace_dist`` of the given variables."""
    import arviz_plots as azp  # deferred: arviz_plots loads matplotlib, ~4 s (bayes extra)

    return _arviz_figure(azp.plot_trace_dist(dt, var_names=list(var_names), backend="matplotlib", compact=True))


def rank_plot(dt, var_names: Sequence[str]) -> Figure:
    """arviz-plots ``plot_rank`` (fractional rank ECDF with simultaneous envelope)."""
    import arviz_plots as azp  # deferred: arviz_plots loads matplotlib, ~4 s (bayes extra)

    return _arviz_figure(azp.plot_rank(dt, var_names=list(var_names), backend="matplotlib"))


def posterior_dist(dt, var_names: Sequence[str]) -> Figure:
    """arviz-plots ``plot_dist`` (marginal posteriors with credible interval)."""
    import arviz_plots as azp  # deferred: arviz_plots loads matplotlib, ~4 s (bayes extra)

    return _arviz_figure(azp.plot_dist(dt, var_names=list(var_names), backend="matplotlib"))


def heatmap(matrix: pd.DataFrame, *, title: str, label: str, fmt: str = "{:+.3f}", centre: bool = True) -> Figure:
    """A labelled matrix (rows: prefix model, columns: suffix model) as an annotated heatmap."""
    vals = matrix.to_numpy(float)
    lim = np.nanmax(np.abs(vals)) if np.isfinite(vals).any() else 1.0
    fig, ax = subplots(figsize=(0.8 * matrix.shape[1] + 2.5, 0.6 * matrix.shape[0] + 1.6))
    im = ax.imshow(
        vals,
        cmap="RdBu_r" if centre else "viridis",
        vmin=-lim if centre else None,
        vmax=lim if centre else None,
        aspect="auto",
    )
    for i in range(vals.shape[0]):
        for j in range(vals.shape[1]):
            if np.isfinite(vals[i, j]):
                dark = centre and abs(vals[i, j]) > 0.6 * lim
                ax.text(
                    j,
                    i,
                    fmt.format(vals[i, j]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "black",
                )
    ax.set_xticks(range(matrix.shape[1]), list(map(str, matrix.columns)), rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(matrix.shape[0]), list(map(str, matrix.index)), fontsize=7)
    ax.set(xlabel=matrix.columns.name or "suffix model", ylabel=matrix.index.name or "prefix model", title=title)
    fig.colorbar(im, ax=ax, label=label, shrink=0.8)
    return fig
