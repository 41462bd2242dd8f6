"""Sensitivity analyses of the classical reliable-change conclusions.

Each analysis re-runs the classification over a grid of one analysis choice and
returns a tidy table (one row per setting) and a figure:

* :func:`threshold_sensitivity` — the RCI threshold ``z`` (1.645 ... 3.0, incl. the
  paper's 1.96 and conservative 2.58) under both ``sd_basis`` choices;
* :func:`exclusion_sensitivity` — rule (a) ``min_valid`` over a grid, rule (b)
  floor/ceiling exclusion on or off (which changes the SD basis, hence S_diff);
* :func:`k_subsample_sensitivity` — "what would K = 3, 5, ... have concluded?":
  the full classical analysis (reliability included) on the first ``k`` samples of
  every item, with rule (a) scaled as ``ceil(0.6 k)`` (the paper's 6 of 10).

Given the truth of a simulated pair (``bayesrc.data.simulate_pair``), every row also
carries the realized false-discovery proportion and the share of truly changed
items detected. Reproducible: every random step is seeded from ``seed``.

The threshold and exclusion grids reuse one reliability estimate (they do not
change r_xx) and recompute SEM, S_diff and the classes with the classical
module's formulas (SPEC section 2); at the defaults they equal ``bayesrc rci``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.classical import rci as R
from bayesrc.classical.pipeline import PairRCI, reliable_change

Z_GRID: tuple[float, ...] = (1.645, 1.96, 2.326, 2.58, 3.0)
MIN_VALID_GRID: tuple[int, ...] = (2, 4, 6, 8, 10)


def classify(
    items: pd.DataFrame,
    r_v1: float,
    r_v2: float,
    *,
    z: float = 1.96,
    min_valid: int = 6,
    floor_ceiling: bool = True,
    sd_basis: str = "analysable",
) -> pd.DataFrame:
    """Per-item class under one setting: ``items`` needs p_v1, p_v2, n_v1, n_v2 (an RCI items table).

    Returns ``items`` with columns ``analysable``, ``rci`` and ``class`` and the
    setting's S_diff in ``attrs["s_diff"]``.
    """
    p1, p2 = items["p_v1"].to_numpy(float), items["p_v2"].to_numpy(float)
    reason = R.exclusion_reasons(items["n_v1"], items["n_v2"], p1, p2, min_valid)
    analysable = (reason == "") | ((reason == "floor_ceiling") & (not floor_ceiling))
    scored = ~(np.isnan(p1) | np.isnan(p2))
    analysable &= scored
    basis = analysable if sd_basis == "analysable" else scored
    _, _, s_diff = R.s_diff_from_accuracies(p1[basis], p2[basis], r_v1, r_v2)
    rci = R.reliable_change_index(p2 - p1, s_diff)
    out = items[["item_id", "domain", "p_v1", "p_v2"]].copy()
    out["analysable"] = analysable
    out["rci"] = rci
    out["class"] = np.where(analysable, R.classify_rci(rci, z), R.EXCLUDED)
    out.attrs["s_diff"] = s_diff
    return out


def score_against_truth(classes: pd.DataFrame, truth: pd.DataFrame | None) -> dict:
    """Detections, and with truth: true detections (changed, right direction), realized FDP, share detected."""
    cls = classes["class"].to_numpy()
    flagged = np.isin(cls, (R.IMPROVED, R.DETERIORATED))
    out = {
        "n_analysable": int(classes["analysable"].sum()),
        "improved": int(np.sum(cls == R.IMPROVED)),
        "deteriorated": int(np.sum(cls == R.DETERIORATED)),
        "detections": int(flagged.sum()),
    }
    out["churn"] = out["detections"] / out["n_analysable"] if out["n_analysable"] else float("nan")
    if truth is not None:
        t = truth.set_index("item_id").reindex(classes["item_id"])
        sign = np.sign(t["delta_p"].to_numpy(float))
        direction = np.where(cls == R.IMPROVED, 1.0, np.where(cls == R.DETERIORATED, -1.0, 0.0))
        true_hit = flagged & t["changed"].to_numpy(bool) & (sign == direction)
        n_changed = int(t["changed"].sum())
        out["true_detections"] = int(true_hit.sum())
        out["false_detections"] = out["detections"] - out["true_detections"]
        out["realized_fdp"] = out["false_detections"] / out["detections"] if out["detections"] else 0.0
        out["share_changed_detected"] = out["true_detections"] / n_changed if n_changed else float("nan")
    return out


def _pair(counts: xr.Dataset, pair: PairRCI | None, seed: int, **kw) -> PairRCI:
    if pair is not None:
        return pair
    # The null distribution is not needed here: keep its permutations minimal.
    return reliable_change(counts, n_permutations=kw.pop("n_permutations", 20), seed=seed, **kw)


def threshold_sensitivity(
    counts: xr.Dataset,
    *,
    zs: Sequence[float] = Z_GRID,
    sd_bases: Sequence[str] = ("analysable", "all"),
    min_valid: int = 6,
    truth: pd.DataFrame | None = None,
    pair: PairRCI | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """RCI classes over a grid of thresholds ``z`` and both SD bases (one row per setting)."""
    p = _pair(counts, pair, seed, min_valid=min_valid)
    r1, r2 = p.reliability["v1"].r_xx, p.reliability["v2"].r_xx
    rows = []
    for basis in sd_bases:
        for z in zs:
            cls = classify(p.items, r1, r2, z=z, min_valid=min_valid, sd_basis=basis)
            rows.append({"analysis": "threshold", "z": float(z), "sd_basis": basis, "s_diff": cls.attrs["s_diff"],
                         "min_detectable": z * cls.attrs["s_diff"], **score_against_truth(cls, truth)})
    return pd.DataFrame(rows)


def exclusion_sensitivity(
    counts: xr.Dataset,
    *,
    min_valid_grid: Sequence[int] = MIN_VALID_GRID,
    floor_ceiling: Sequence[bool] = (True, False),
    z: float = 1.96,
    sd_basis: str = "analysable",
    truth: pd.DataFrame | None = None,
    pair: PairRCI | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """RCI classes over exclusion rule (a) ``min_valid`` and rule (b) floor/ceiling on or off."""
    p = _pair(counts, pair, seed)
    r1, r2 = p.reliability["v1"].r_xx, p.reliability["v2"].r_xx
    rows = []
    for fc in floor_ceiling:
        for m in min_valid_grid:
            cls = classify(p.items, r1, r2, z=z, min_valid=int(m), floor_ceiling=fc, sd_basis=sd_basis)
            rows.append({"analysis": "exclusion", "min_valid": int(m), "floor_ceiling_excluded": bool(fc), "s_diff": cls.attrs["s_diff"],
                         **score_against_truth(cls, truth)})
    return pd.DataFrame(rows)


def first_k(counts: xr.Dataset, k: int) -> xr.Dataset:
    """Item counts built from the first ``k`` samples of every item and version."""
    correct = counts["correct"].isel(k=slice(0, k))
    administered = counts["n_trials"].clip(max=k)
    n_valid = correct.notnull().sum("k").astype(np.int64)
    n_correct = correct.fillna(0).sum("k").astype(np.int64)
    p = (n_correct / n_valid.where(n_valid > 0)).astype(float)
    return xr.Dataset({"n_trials": administered, "n_valid": n_valid, "n_correct": n_correct, "p": p, "correct": correct}, attrs=dict(counts.attrs))


def k_subsample_sensitivity(
    counts: xr.Dataset,
    *,
    ks: Sequence[int] | None = None,
    z: float = 1.96,
    valid_share: float = 0.6,
    sd_basis: str = "analysable",
    n_splits: int = 200,
    truth: pd.DataFrame | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """The classical analysis on the first ``k`` samples, for each ``k`` (default 3, 5, ..., K).

    Rule (a) scales with k: ``min_valid = ceil(valid_share * k)`` (6 at K = 10).
    Reliability is re-estimated at each k (split halves of the first k samples).
    """
    k_full = int(counts.sizes["k"])
    ks = sorted(set(ks if ks is not None else [*range(3, k_full, 2), k_full]))
    rows = []
    for i, k in enumerate(ks):
        if not 2 <= k <= k_full:
            raise ValueError(f"k must be in 2..{k_full}, got {k}")
        mv = max(1, math.ceil(valid_share * k - 1e-9))
        p = reliable_change(first_k(counts, k), z=z, min_valid=mv, sd_basis=sd_basis, n_splits=n_splits,
                            n_permutations=20, n_splits_by_k=20, seed=seed + i)
        cls = classify(p.items, p.reliability["v1"].r_xx, p.reliability["v2"].r_xx, z=z, min_valid=mv, sd_basis=sd_basis)
        rows.append({"analysis": "k_subsample", "k": int(k), "min_valid": mv, "r_xx_v1": p.reliability["v1"].r_xx,
                     "r_xx_v2": p.reliability["v2"].r_xx, "s_diff": p.s_diff, "min_detectable": p.min_detectable,
                     **score_against_truth(cls, truth)})
    return pd.DataFrame(rows)


def sensitivity_figure(table: pd.DataFrame):
    """Detections (improved, deteriorated, total) against the varied setting; realized FDP if known."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    analysis = table["analysis"].iloc[0]
    x_col, group_col = {"threshold": ("z", "sd_basis"), "exclusion": ("min_valid", "floor_ceiling_excluded"), "k_subsample": ("k", None)}[analysis]
    groups = [(None, table)] if group_col is None else list(table.groupby(group_col, sort=False))
    has_truth = "realized_fdp" in table
    fig, axes = plt.subplots(1, 2 if has_truth else 1, figsize=(10 if has_truth else 6, 3.8), squeeze=False)
    ax = axes[0, 0]
    styles = ["-", "--", ":"]
    for (g, sub), ls in zip(groups, styles):
        tag = "" if g is None else f" ({group_col}={g})"
        ax.plot(sub[x_col], sub["improved"], ls, marker="o", color="#1b9e77", label="improved" + tag)
        ax.plot(sub[x_col], sub["deteriorated"], ls, marker="s", color="#d95f02", label="deteriorated" + tag)
        ax.plot(sub[x_col], sub["detections"], ls, marker="^", color="#4c72b0", label="all detections" + tag)
    ax.set(xlabel=x_col, ylabel="items", title=f"Reliable changes vs {x_col}")
    ax.legend(fontsize=6, frameon=False)
    if has_truth:
        ax2 = axes[0, 1]
        for (g, sub), ls in zip(groups, styles):
            tag = "" if g is None else f" ({group_col}={g})"
            ax2.plot(sub[x_col], sub["realized_fdp"], ls, marker="o", color="#d62728", label="realized FDP" + tag)
            ax2.plot(sub[x_col], sub["share_changed_detected"], ls, marker="s", color="#7570b3", label="share of changed items detected" + tag)
        ax2.set(xlabel=x_col, ylabel="proportion", ylim=(0, 1), title="Against the simulation's truth")
        ax2.legend(fontsize=6, frameon=False)
    fig.tight_layout()
    return fig


ANALYSES = {
    "threshold": threshold_sensitivity,
    "exclusion": exclusion_sensitivity,
    "k": k_subsample_sensitivity,
}


NOT_DONE = {
    "prior": "prior sensitivity (power-scaling / prior grid) needs the Bayesian models of bayesrc.bayes",
    "fdr": "Bayesian FDR level needs the posterior selection of bayesrc.bayes",
}


def run_sensitivity_analyses(
    counts: xr.Dataset,
    names: Sequence[str] = ("threshold", "exclusion", "k"),
    *,
    truth: pd.DataFrame | None = None,
    sd_basis: str = "analysable",
    seed: int = 0,
    zs: Sequence[float] = Z_GRID,
    min_valid_grid: Sequence[int] = MIN_VALID_GRID,
    ks: Sequence[int] | None = None,
) -> dict[str, pd.DataFrame]:
    """Run the named analyses (one shared reliability estimate for threshold / exclusion)."""
    pair = None
    out: dict[str, pd.DataFrame] = {}
    for name in names:
        if name in ("threshold", "exclusion") and pair is None:
            pair = _pair(counts, None, seed, sd_basis=sd_basis)
        if name == "threshold":
            out[name] = threshold_sensitivity(counts, zs=zs, truth=truth, pair=pair, seed=seed)
        elif name == "exclusion":
            out[name] = exclusion_sensitivity(counts, min_valid_grid=min_valid_grid, sd_basis=sd_basis, truth=truth, pair=pair, seed=seed)
        elif name == "k":
            out[name] = k_subsample_sensitivity(counts, ks=ks, sd_basis=sd_basis, truth=truth, seed=seed)
        else:
            raise ValueError(f"unknown sensitivity analysis {name!r}")
    return out


def write_sensitivity(tables: dict[str, pd.DataFrame], out_dir) -> list:
    """``sensitivity_<name>.csv`` + ``.png`` per analysis and ``sensitivity.json``, all together."""
    from pathlib import Path

    from bayesrc.io import atomic_write_bytes, atomic_write_json, atomic_write_text, staged_output
    from bayesrc.report.figures import to_png

    out_dir = Path(out_dir)
    written = []
    with staged_output(out_dir) as stage:
        for name, t in tables.items():
            atomic_write_text(stage / f"sensitivity_{name}.csv", t.to_csv(index=False))
            atomic_write_bytes(stage / f"sensitivity_{name}.png", to_png(sensitivity_figure(t)))
            written += [out_dir / f"sensitivity_{name}.csv", out_dir / f"sensitivity_{name}.png"]
        atomic_write_json(stage / "sensitivity.json", {"analyses": {n: t.to_dict(orient="records") for n, t in tables.items()}, "not_done": NOT_DONE})
        written.append(out_dir / "sensitivity.json")
    return written
