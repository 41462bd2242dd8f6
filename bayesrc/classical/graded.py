"""Classical reliable change on graded scores (SPEC section 11): Jacobson and Truax's RCI on per-item mean scores,
the setting it was made for.

A graded pair (:func:`bayesrc.data.item_scores`: a judge's 1-5, a rubric grade, partial credit in [0, 1]) enters
SPEC 2's analysis on the unit scale (:func:`unit_scores`): each score ``s`` becomes ``(s - low) / (high - low)``,
``low`` and ``high`` the scale's ends (an ordinal score's lowest and highest level over all versions; 0 and 1 for a
continuous one). An item's ``p`` is then its mean score on [0, 1], and every statistic that reads it is the
mean-score statistic: the SD over items, split-half reliability and ICC of the (item, sample) scores, SEM, S_diff,
RCI (which does not depend on the scale), floor and ceiling (every sample at the scale's lowest or highest end).
What right/wrong outcomes alone allow is replaced:

* the sample-level null re-deals each item's pooled scores by a random permutation
  (:func:`bayesrc.classical.calibration.sample_level_null`);
* the no-change test is the same within-item permutation test on the scores' sums (:func:`score_no_change_test`);
* ``s_diff = "binomial"`` takes each item's ``p q / n`` at its mean score (``p`` smoothed as for right/wrong): the
  largest variance a score on [0, 1] with that mean can have (Bhatia and Davis 2000), so per item it is a
  conservative S_diff;
* paired tests over items that fit ordinal data (:func:`paired_tests`): Wilcoxon's signed-rank test and the sign
  test of the items' mean-score changes, where McNemar's test serves right/wrong.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from bayesrc.classical.calibration import permute_within_items, within_item_test


def is_graded_scores(ds: xr.Dataset) -> bool:
    """Whether ``ds`` is graded item scores (:func:`bayesrc.data.item_scores`), not right/wrong item counts.

    Examples
    --------
    >>> from bayesrc.data import item_scores, simulate_graded_pair
    >>> sim = simulate_graded_pair(10, 5, seed=1)
    >>> is_graded_scores(item_scores(sim.trials_v1, sim.trials_v2))
    True
    """
    return "score_kind" in ds.attrs and "score" in ds


def scale_ends(scores: xr.Dataset) -> tuple[float, float]:
    """The graded scale's lowest and highest value: an ordinal score's levels over all versions, else 0 and 1."""
    if scores.attrs["score_kind"] == "ordinal":
        levels = scores["level"].values
        return float(levels.min()), float(levels.max())
    return 0.0, 1.0


def scale_span(graded: dict) -> float:
    """The width of a graded scale (``attrs["graded"]`` of :func:`unit_scores`): ``high - low``, or 1 for a scale of
    one level (every score at its floor)."""
    return graded["high"] - graded["low"] if graded["high"] > graded["low"] else 1.0


def add_scale_units(items: pd.DataFrame, graded: dict) -> None:
    """Beside the item table's unit-scale ``p_v1``, ``p_v2`` and ``delta``, the mean scores ``score_v1``,
    ``score_v2`` and their change ``delta_score`` in the scale's own units (in place)."""
    span = scale_span(graded)
    for v in ("v1", "v2"):
        items[f"score_{v}"] = graded["low"] + span * items[f"p_{v}"]
    items["delta_score"] = span * items["delta"]


def unit_scores(scores: xr.Dataset) -> xr.Dataset:
    """Graded item scores as SPEC 2's analysis reads item counts, on the unit scale (see the module docstring):
    ``correct`` (item, version, k) the samples' unit scores (NaN missing), ``p`` the items' mean unit scores,
    ``n_correct`` their sums, ``n_valid`` and ``n_trials`` as given; ``attrs["graded"]`` says the kind and ends.

    Examples
    --------
    >>> from bayesrc.data import item_scores, simulate_graded_pair
    >>> sim = simulate_graded_pair(30, 10, seed=1)
    >>> ds = unit_scores(item_scores(sim.trials_v1, sim.trials_v2))
    >>> ds.attrs["graded"], float(ds["p"].min()) >= 0.0
    ({'kind': 'ordinal', 'low': 1.0, 'high': 5.0}, True)
    """
    low, high = scale_ends(scores)
    graded = {"kind": scores.attrs["score_kind"], "low": low, "high": high}
    unit = (scores["score"] - low) / scale_span(graded)
    n_valid = scores["n_valid"]
    total = unit.sum("k", skipna=True)
    out = xr.Dataset(
        {
            "correct": unit,
            "n_correct": total,
            "n_valid": n_valid,
            "n_trials": scores["n_trials"],
            "p": (total / n_valid.where(n_valid > 0)),
        },
        coords={name: c for name, c in scores.coords.items() if name != "level"},
        attrs={k: v for k, v in scores.attrs.items() if k != "score_kind"},
    )
    out.attrs["graded"] = graded
    return out


def score_no_change_test(
    x1: np.ndarray,
    x2: np.ndarray,
    strata: np.ndarray | None = None,
    *,
    n_permutations: int = 999,
    seed: int | np.random.Generator | np.random.SeedSequence = 0,
) -> dict:
    """Did anything change between two versions' graded scores? The within-item permutation test of
    :func:`bayesrc.classical.calibration.no_change_test` on the sums of each item's scores.

    Null hypothesis: each item's valid scores in the two versions are exchangeable. Given an item's pooled scores
    (``N`` of them, mean ``m``, ``S = sum (x - m)^2``), the sum of ``n1`` of them drawn without replacement has mean
    ``n1 m`` and variance ``n1 (N - n1) S / (N (N - 1))`` (the hypergeometric moments when the scores are 0 / 1);
    its draws re-deal the pooled scores by a random permutation. The item and stratum statistics and their
    combination are the right/wrong test's.

    ``x1``, ``x2``: (item, K) scores (NaN missing); ``strata``: stratum index per item (default one).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(1, 6, (40, 10)).astype(float)
    >>> score_no_change_test(x, rng.permuted(x, axis=1), n_permutations=199)["p_value"] > 0.05
    True
    """
    pooled = np.concatenate([np.asarray(x1, float), np.asarray(x2, float)], axis=1)
    valid = ~np.isnan(pooled)
    n1, total = (~np.isnan(x1)).sum(1).astype(float), valid.sum(1).astype(float)
    values = np.where(valid, pooled, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = values.sum(1) / total
        spread = np.where(valid, (pooled - mean[:, None]) ** 2, 0.0).sum(1)
        var = n1 * (total - n1) * spread / (total * (total - 1.0))
    k1 = x1.shape[1]

    def draw(rng: np.random.Generator, size: int) -> np.ndarray:  # version 1's sums after a random re-deal
        return np.nansum(permute_within_items(pooled, valid, size, rng)[..., :k1], -1)

    return within_item_test(np.nansum(x1, 1), n1 * mean, var, strata, draw, n_permutations=n_permutations, seed=seed)


def paired_tests(delta: np.ndarray) -> dict:
    """Paired tests over items of the items' mean-score changes ``delta`` (NaN ignored): Wilcoxon's signed-rank test
    (zero changes dropped, its normal approximation with ties corrected where exact is not possible) and the sign
    test (items up against items down, exact binomial). Both two-sided.

    Examples
    --------
    >>> out = paired_tests(np.array([0.2, 0.1, -0.1, 0.3, 0.0, 0.4]))
    >>> out["sign"]["up"], out["sign"]["down"], out["wilcoxon"]["n"]
    (4, 1, 5)
    """
    d = np.asarray(delta, float)
    d = d[np.isfinite(d)]
    moved = d[d != 0]
    up, down = int((moved > 0).sum()), int((moved < 0).sum())
    sign_p = float(stats.binomtest(up, up + down).pvalue) if up + down else float("nan")
    if len(moved):
        w = stats.wilcoxon(moved, zero_method="wilcox")
        wilcoxon = {"statistic": float(w.statistic), "p_value": float(w.pvalue), "n": len(moved)}
    else:
        wilcoxon = {"statistic": float("nan"), "p_value": float("nan"), "n": 0}
    return {"wilcoxon": wilcoxon, "sign": {"up": up, "down": down, "p_value": sign_p}}
