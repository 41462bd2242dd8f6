"""Noise decomposition of an accuracy difference: sampling within items (K) vs the item set (N).

Two versions answer the same N items, item i K_i times each; ``x_i = y_i,2 / n_i,2 - y_i,1 / n_i,1``
is the item's observed change and ``D = mean_i x_i`` the accuracy difference. With items drawn
from a population and answers Bernoulli given the item, the law of total variance splits
(eval-arena's split: "data" vs "prediction" variance)::

    Var(D) = [ Var_i(dp_i)  +  E_i( p_i1 q_i1 / K_i1 + p_i2 q_i2 / K_i2 ) ] / N
             \\ item set (N) /   \\------- sampling within items (K) -----/

where ``dp_i = p_i2 - p_i1`` is the item's true change and ``q = 1 - p``. Both parts are
estimated without bias from the counts: ``p̂ (1 - p̂) / (n - 1)`` estimates ``p q / n`` for
each item and version, and the sample variance of the ``x_i`` over items, ``S^2``, estimates
``Var_i(dp_i) + E_i(...)``; so ``S^2 / N`` estimates ``Var(D)``, the mean of the per-item
sampling terms over N its sampling part and the difference its item-set part (which can come
out slightly negative when the items do not differ in their true change; it is then reported
as it is and counted as zero in the shares and the halving figures).

Halving ``Var(D)``: doubling N always does; more samples per item (K multiplied by ``f``)
shrink only the sampling part, so ``f = 2 v / (v - b)`` with ``v`` the sampling part and ``b``
the item-set part, possible only while sampling is more than half of the variance.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from bayesrc.errors import InputError


def within_item_variance(correct: ArrayLike, valid: ArrayLike) -> np.ndarray:
    """Unbiased estimate of ``Var(y / n | item) = p q / n`` per item: ``p̂ (1 - p̂) / (n - 1)``.

    NaN where fewer than two valid answers (the within-item variance is not estimable).

    Examples
    --------
    >>> within_item_variance([5, 10, 3], [10, 10, 1]).round(4).tolist()
    [0.0278, 0.0, nan]
    """
    y, n = np.asarray(correct, float), np.asarray(valid, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = y / n
        return np.where(n >= 2, p * (1 - p) / (n - 1), np.nan)


def halving_factor(sampling: float, items: float) -> float | None:
    """The factor on K (samples per item, N fixed) that halves ``sampling + items``; None if none can.

    More samples shrink only the sampling part ``v``: ``b + v / f = (b + v) / 2`` gives
    ``f = 2 v / (v - b)``, defined while ``v > b`` (``items`` below zero counts as zero).

    Examples
    --------
    >>> halving_factor(1.0, 0.0), halving_factor(3.0, 1.0), halving_factor(1.0, 1.0) is None
    (2.0, 3.0, True)
    """
    b = max(float(items), 0.0)
    v = float(sampling)
    return 2 * v / (v - b) if v > b else None


def noise_decomposition(correct_v1: ArrayLike, valid_v1: ArrayLike, correct_v2: ArrayLike, valid_v2: ArrayLike) -> dict:
    """How much of the variance of the accuracy difference is sampling within items and how much the item set.

    Items with fewer than two valid answers in either version are left out (``n_dropped``).

    Parameters
    ----------
    correct_v1, valid_v1, correct_v2, valid_v2 : per-item correct and valid answer counts of
        the two versions (the same items in the same order).

    Returns
    -------
    dict
        ``n_items``, ``n_dropped``, ``k`` (median valid answers per item and version),
        ``mean_diff`` (D), ``var_total`` (estimated ``Var(D)``), ``se`` (its root),
        ``var_sampling`` and ``var_items`` (the two parts; ``var_items`` may be slightly
        negative), ``share_sampling`` / ``share_items`` (of the total, in [0, 1]),
        ``var_infinite_k`` (what is left with K -> infinity: the item-set part),
        ``n_half`` (N that halves ``Var(D)`` at the same K: 2N), ``k_factor_half`` and
        ``k_half`` (the factor on K and the K that halve it at the same N; None when the
        item-set part is half or more, so that no K can).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.2, 0.8, 4000)
    >>> y1, y2 = rng.binomial(10, p), rng.binomial(10, p)   # no item changes: all noise is sampling
    >>> nd = noise_decomposition(y1, np.full(4000, 10), y2, np.full(4000, 10))
    >>> round(nd["share_sampling"], 1), nd["n_half"], nd["k_half"]  # K = 2 x 10, up to estimation noise
    (1.0, 8000, 21)
    """
    y1, n1, y2, n2 = (np.asarray(a, float).ravel() for a in (correct_v1, valid_v1, correct_v2, valid_v2))
    if not y1.size == n1.size == y2.size == n2.size:
        raise InputError(f"counts of unequal length: {y1.size}, {n1.size}, {y2.size}, {n2.size}", field="counts")
    keep = (n1 >= 2) & (n2 >= 2)
    n = int(keep.sum())
    if n < 2:
        raise InputError(
            f"{n} item(s) with at least two valid answers in both versions; the decomposition needs 2", field="n_valid"
        )
    y1, n1, y2, n2 = y1[keep], n1[keep], y2[keep], n2[keep]
    x = y2 / n2 - y1 / n1
    total = float(x.var(ddof=1) / n)
    sampling = float(np.mean(within_item_variance(y1, n1) + within_item_variance(y2, n2)) / n)
    items = total - sampling
    share = min(max(sampling / total, 0.0), 1.0) if total > 0 else 1.0
    k = float(np.median(np.concatenate([n1, n2])))
    f = halving_factor(sampling, items)
    return {
        "n_items": n,
        "n_dropped": int((~keep).sum()),
        "k": k,
        "mean_diff": float(x.mean()),
        "var_total": total,
        "se": math.sqrt(max(total, 0.0)),
        "var_sampling": sampling,
        "var_items": items,
        "share_sampling": share,
        "share_items": 1.0 - share,
        "var_infinite_k": max(items, 0.0),
        "n_half": 2 * n,
        "k_factor_half": f,
        "k_half": None if f is None else int(math.ceil(f * k - 1e-9)),
    }


def noise_from_counts(counts: xr.Dataset, versions: tuple[str, str] | None = None) -> dict:
    """:func:`noise_decomposition` of a version pair in item counts (:func:`bayesrc.data.item_counts`).

    ``versions``: the pair (default: the first two); the first is the baseline. The result
    also names them (``versions``).

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(200, 10, seed=1)
    >>> nd = noise_from_counts(item_counts(sim.trials_v1, sim.trials_v2))
    >>> nd["n_items"], nd["n_half"], round(nd["share_sampling"] + nd["share_items"], 6)
    (200, 400, 1.0)
    """
    v = [str(s) for s in (versions or counts["version"].values[:2])]
    if len(v) != 2:
        raise InputError(f"need two versions, got {len(v)}", field="version")
    a, b = counts.sel(version=v[0]), counts.sel(version=v[1])
    out = noise_decomposition(a["n_correct"].values, a["n_valid"].values, b["n_correct"].values, b["n_valid"].values)
    return {"versions": v, **out}


def noise_from_items(items) -> dict:
    """:func:`noise_decomposition` from a pair's RCI item table (``p_v1``, ``n_v1``, ``p_v2``, ``n_v2``: accuracy
    and valid answers).

    Examples
    --------
    >>> import pandas as pd
    >>> items = pd.DataFrame({"p_v1": [0.5, 0.2, 0.9], "n_v1": [10, 10, 10], "p_v2": [0.6, 0.2, 0.7],
    ...                       "n_v2": [10, 10, 10]})
    >>> nd = noise_from_items(items)
    >>> nd["n_items"], round(nd["mean_diff"], 4)
    (3, -0.0333)
    """
    n1, n2 = items["n_v1"].to_numpy(float), items["n_v2"].to_numpy(float)
    y1 = np.rint(np.nan_to_num(items["p_v1"].to_numpy(float)) * n1)
    y2 = np.rint(np.nan_to_num(items["p_v2"].to_numpy(float)) * n2)
    return noise_decomposition(y1, n1, y2, n2)


def noise_sentence(nd: dict) -> str:
    """The decomposition in one sentence (summaries and reports).

    Examples
    --------
    >>> import textwrap
    >>> s = noise_sentence({"se": 0.01, "share_sampling": 0.75, "share_items": 0.25, "n_items": 100, "k": 10.0,
    ...                     "n_half": 200, "k_half": 30})
    >>> print(textwrap.fill(s, 100))
    Of the variance of the accuracy difference (SE 0.0100), 75% is sampling noise within items (K = 10)
    and 25% item-set noise (N = 100); halving it takes N = 200 items at this K, or K = 30 samples per
    item at this N.
    """
    k = f"{nd['k']:g}"
    head = (
        f"Of the variance of the accuracy difference (SE {nd['se']:.4f}), "
        f"{nd['share_sampling']:.0%} is sampling noise within items (K = {k}) "
        f"and {nd['share_items']:.0%} item-set noise (N = {nd['n_items']}); "
        f"halving it takes N = {nd['n_half']} items at this K"
    )
    tail = (
        f", or K = {nd['k_half']} samples per item at this N."
        if nd["k_half"] is not None
        else "; no K can at this N (item-set noise is half of it or more)."
    )
    return head + tail
