"""Classical sensitivity analyses: the RCI threshold, the exclusion rules and K, each over a grid of one choice
(:func:`threshold_sensitivity`, :func:`exclusion_sensitivity`, :func:`k_subsample_sensitivity`; see
:mod:`bayesrc.sensitivity.analyses`). The threshold and exclusion grids reuse one reliability estimate (they do not
change r_xx) and recompute SEM, S_diff and the classes with the classical module's formulas (SPEC section 2); at the
defaults they equal ``bayesrc rci``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.classical import rci as R
from bayesrc.classical.calibration import binomial_s_diff, nominal_rate, sample_level_null
from bayesrc.classical.pipeline import reliable_change
from bayesrc.classical.rci import RCISettings
from bayesrc.classical.reliability import split_half_reliability
from bayesrc.classical.result import PairResult

Z_GRID: tuple[float, ...] = (1.645, 1.96, 2.326, 2.58, 3.0)

MIN_VALID_GRID: tuple[int, ...] = (2, 4, 6, 8, 10)


def classify(
    items: pd.DataFrame, r_v1: float, r_v2: float, settings: RCISettings = RCISettings(), *, floor_ceiling: bool = True
) -> pd.DataFrame:
    """Per-item class under one setting: ``items`` needs p_v1, p_v2, n_v1, n_v2 (an RCI items table).

    ``settings``: the classification (``z``, ``min_valid``, ``sd_basis``, ``s_diff``; the
    reliabilities ``r_v1``, ``r_v2`` are given, so its ``reliability_basis`` is not read);
    ``floor_ceiling``: apply exclusion rule (b). Returns ``items`` with columns
    ``analysable``, ``rci`` and ``class`` and the setting's S_diff in ``attrs["s_diff"]``
    (the median per-item S_diff,i for ``s_diff = "binomial"``).

    Examples
    --------
    >>> from bayesrc.classical import reliable_change
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> pair = reliable_change(item_counts(sim.trials_v1, sim.trials_v2), n_null=0, n_permutations=20)
    >>> r1, r2 = pair.r_xx["v1"], pair.r_xx["v2"]
    >>> bool((classify(pair.items, r1, r2)["class"] == pair.items["class"]).all())  # the defaults are bayesrc rci's
    True
    """
    p1, p2 = items["p_v1"].to_numpy(float), items["p_v2"].to_numpy(float)
    ks = {"k_v1": items["k_v1"], "k_v2": items["k_v2"]} if "k_v1" in items else {}
    reason = R.exclusion_reasons(items["n_v1"], items["n_v2"], p1, p2, settings.min_valid, **ks)
    analysable = (reason == "") | ((reason == "floor_ceiling") & (not floor_ceiling))
    scored = ~(np.isnan(p1) | np.isnan(p2))
    analysable &= scored
    basis = analysable if settings.sd_basis == "analysable" else scored
    if settings.s_diff == "binomial":
        n1, n2 = items["n_v1"].to_numpy(float), items["n_v2"].to_numpy(float)
        s_item = binomial_s_diff(np.round(p1 * n1), n1, np.round(p2 * n2), n2)
        with np.errstate(invalid="ignore", divide="ignore"):
            rci = (p2 - p1) / s_item
        s_diff = float(np.nanmedian(s_item[analysable])) if analysable.any() else float("nan")
    else:
        _, _, s_diff = R.s_diff_from_accuracies(p1[basis], p2[basis], r_v1, r_v2)
        rci = R.reliable_change_index(p2 - p1, s_diff)
    out = items[["item_id", "domain", "p_v1", "p_v2"]].copy()
    out["analysable"] = analysable
    out["rci"] = rci
    out["class"] = np.where(analysable, R.classify_rci(rci, settings.z), R.EXCLUDED)
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


def _pair(counts: xr.Dataset, pair: PairResult | None, seed: int, settings: RCISettings) -> PairResult:
    if pair is not None:
        return pair
    # The nulls are not needed here (threshold_sensitivity runs its own per method): keep them minimal.
    return reliable_change(counts, n_permutations=20, n_null=0, seed=seed, **asdict(settings))


METHODS: tuple[tuple[str, str], ...] = (("reference", "all"), ("reference", "analysed"), ("binomial", "all"))


def threshold_sensitivity(
    counts: xr.Dataset,
    *,
    zs: Sequence[float] = Z_GRID,
    sd_bases: Sequence[str] = ("analysable", "all"),
    methods: Sequence[tuple[str, str]] = METHODS,
    min_valid: int | None = None,
    null_replicates: int = 200,
    truth: pd.DataFrame | None = None,
    pair: PairResult | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """RCI classes over a grid of thresholds ``z``, SD bases and S_diff methods (one row per setting).

    ``methods``: (s_diff, reliability_basis) pairs -- the paper's recipe ("reference", "all"),
    its r_xx over the analysed items, and the calibrated per-item "binomial" S_diff (no SD
    basis). Every row carries the observed counts and, from the sample-level no-change null
    (``null_replicates`` replicates, SPEC 2.1; 0 skips it), the flagged count expected
    with no change at all and the implied false-positive rate beside the nominal one.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> t = threshold_sensitivity(item_counts(sim.trials_v1, sim.trials_v2), zs=(1.96,), null_replicates=0)
    >>> t["z"].unique().tolist()
    [1.96]
    """
    p = _pair(counts, pair, seed, RCISettings(min_valid=min_valid))
    r_all = (p.r_xx["v1"], p.r_xx["v2"])
    analysable = ~p.items["excluded"].to_numpy(bool)
    a, b = counts["correct"].isel(version=0).values, counts["correct"].isel(version=1).values
    rows = []
    for s_diff, rel_basis in methods:
        if s_diff == "reference" and rel_basis == "analysed":
            r1, r2 = (split_half_reliability(x[analysable], n_splits=200, seed=seed).r_xx for x in (a, b))
        else:
            r1, r2 = r_all
        for basis in sd_bases if s_diff == "reference" else ("-",):
            settings = RCISettings(
                z=float(zs[0]),
                min_valid=min_valid,
                sd_basis=basis if basis != "-" else "analysable",
                s_diff=s_diff,
                reliability_basis=rel_basis,
            )
            null = None
            if null_replicates > 0:
                null = sample_level_null(
                    a, b, settings, n_replicates=null_replicates, seed=seed, zs=tuple(float(z) for z in zs)
                )
            for z in zs:
                cls = classify(p.items, r1, r2, replace(settings, z=float(z)))
                row = {
                    "analysis": "threshold",
                    "z": float(z),
                    "method": f"{s_diff}" + (f" (r_xx: {rel_basis}, SD: {basis})" if s_diff == "reference" else ""),
                    "s_diff_method": s_diff,
                    "reliability_basis": rel_basis if s_diff == "reference" else "-",
                    "sd_basis": basis,
                    "s_diff": cls.attrs["s_diff"],
                    "min_detectable": z * cls.attrs["s_diff"],
                    **score_against_truth(cls, truth),
                }
                if null is not None:
                    nz = null["by_z"][float(z)]
                    row.update(
                        {
                            "null_flagged_mean": nz["flagged_mean"],
                            "null_flagged_p975": nz["flagged_p975"],
                            "null_rate": nz["rate"],
                            "nominal_rate": nominal_rate(z),
                        }
                    )
                rows.append(row)
    return pd.DataFrame(rows)


def exclusion_sensitivity(
    counts: xr.Dataset,
    *,
    min_valid_grid: Sequence[int] = MIN_VALID_GRID,
    floor_ceiling: Sequence[bool] = (True, False),
    settings: RCISettings = RCISettings(),
    truth: pd.DataFrame | None = None,
    pair: PairResult | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """RCI classes over exclusion rule (a) ``min_valid`` and rule (b) floor/ceiling on or off.

    ``settings``: the rest of the classification (``z``, ``sd_basis``, ``s_diff``); its
    ``min_valid`` is replaced by each value of the grid.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> exclusion_sensitivity(item_counts(sim.trials_v1, sim.trials_v2), min_valid_grid=(6,))["min_valid"].tolist()
    [6, 6]
    """
    p = _pair(counts, pair, seed, settings)
    r1, r2 = p.r_xx["v1"], p.r_xx["v2"]
    rows = []
    for fc in floor_ceiling:
        for m in min_valid_grid:
            cls = classify(p.items, r1, r2, replace(settings, min_valid=int(m)), floor_ceiling=fc)
            rows.append(
                {
                    "analysis": "exclusion",
                    "min_valid": int(m),
                    "floor_ceiling_excluded": bool(fc),
                    "s_diff": cls.attrs["s_diff"],
                    **score_against_truth(cls, truth),
                }
            )
    return pd.DataFrame(rows)


def first_k(counts: xr.Dataset, k: int) -> xr.Dataset:
    """Item counts built from the first ``k`` samples of every item and version."""
    correct = counts["correct"].isel(k=slice(0, k))
    administered = counts["n_trials"].clip(max=k)
    n_valid = correct.notnull().sum("k").astype(np.int64)
    n_correct = correct.fillna(0).sum("k").astype(np.int64)
    p = (n_correct / n_valid.where(n_valid > 0)).astype(float)
    return xr.Dataset(
        {"n_trials": administered, "n_valid": n_valid, "n_correct": n_correct, "p": p, "correct": correct},
        attrs=dict(counts.attrs),
    )


def k_subsample_sensitivity(
    counts: xr.Dataset,
    *,
    ks: Sequence[int] | None = None,
    settings: RCISettings = RCISettings(),
    valid_share: float = 0.6,
    n_splits: int = 200,
    truth: pd.DataFrame | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """The classical analysis on the first ``k`` samples, for each ``k`` (default 3, 5, ..., K).

    Rule (a) scales with k: ``min_valid = ceil(valid_share * k)`` (6 at K = 10), replacing
    ``settings.min_valid``; the rest of ``settings`` (``z``, ``sd_basis``, ...) is kept.
    Reliability is re-estimated at each k (split halves of the first k samples).

    Examples
    --------
    >>> k_subsample_sensitivity(counts, ks=(3, 5))        # doctest: +SKIP
    """
    k_full = int(counts.sizes["k"])
    ks = sorted(set(ks if ks is not None else [*range(3, k_full, 2), k_full]))
    rows = []
    for i, k in enumerate(ks):
        if not 2 <= k <= k_full:
            raise ValueError(f"k must be in 2..{k_full}, got {k}")
        mv = max(1, math.ceil(valid_share * k - 1e-9))
        at_k = replace(settings, min_valid=mv)
        p = reliable_change(
            first_k(counts, k),
            n_splits=n_splits,
            n_permutations=20,
            n_splits_by_k=20,
            n_null=0,
            seed=seed + i,
            **asdict(at_k),
        )
        cls = classify(p.items, p.r_xx["v1"], p.r_xx["v2"], at_k)
        rows.append(
            {
                "analysis": "k_subsample",
                "k": int(k),
                "min_valid": mv,
                "r_xx_v1": p.r_xx["v1"],
                "r_xx_v2": p.r_xx["v2"],
                "s_diff": p.s_diff,
                "min_detectable": p.min_detectable,
                **score_against_truth(cls, truth),
            }
        )
    return pd.DataFrame(rows)
