"""Reliability of per-item accuracy across repeated samples (paper 001, section 2.2).

All functions take the ``item x k`` correctness matrix of one version (1.0 / 0.0,
NaN for missing or not-administered samples).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def spearman_brown(r: np.ndarray | float, factor: np.ndarray | float = 2.0) -> np.ndarray | float:
    """Spearman-Brown prophecy: reliability of a test ``factor`` times as long.

    ``r_new = factor * r / (1 + (factor - 1) * r)``; ``factor = 2`` corrects a
    split-half correlation to full length.

    Examples
    --------
    >>> round(spearman_brown(0.5), 4)  # two halves of r = 0.5 -> full test
    0.6667
    """
    return factor * r / (1.0 + (factor - 1.0) * r)


def k_for_reliability(r_at_k: float, k: int, target: float) -> int | None:
    """Smallest K whose Spearman-Brown projected reliability reaches ``target``.

    Inverts the prophecy: ``K* = K * target (1 - r) / (r (1 - target))``, rounded up
    (as the reference study). ``None`` when ``r`` is not in (0, 1).

    Examples
    --------
    >>> k_for_reliability(0.973, 10, 0.8)  # paper 001: K = 2 suffices for .80
    2
    """
    if not (0.0 < r_at_k < 1.0):
        return None
    return int(np.ceil(k * target * (1.0 - r_at_k) / (r_at_k * (1.0 - target)) - 1e-12))


def _split_masks(n_k: int, n_splits: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_splits, n_k)`` boolean: True where a sample falls in the first half.

    Each split is a uniformly random permutation of the K columns; the first
    ``K // 2`` go to half 1 (with odd K the halves differ by one).
    """
    perms = np.argsort(rng.random((n_splits, n_k)), axis=1)
    mask = np.zeros((n_splits, n_k), dtype=bool)
    np.put_along_axis(mask, perms[:, : n_k // 2], True, axis=1)
    return mask


def _columnwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r of each column pair of ``a`` and ``b`` (items x splits), pairwise complete."""
    w = ~(np.isnan(a) | np.isnan(b))
    if w.all():  # the usual case: no missing half-accuracy, skip the masking
        da, db = a - a.mean(axis=0), b - b.mean(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.einsum("ij,ij->j", da, db) / np.sqrt(
                np.einsum("ij,ij->j", da, da) * np.einsum("ij,ij->j", db, db)
            )
    n = w.sum(axis=0)
    a0, b0 = np.where(w, a, 0.0), np.where(w, b, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ma, mb = a0.sum(0) / n, b0.sum(0) / n
        da, db = np.where(w, a0 - ma, 0.0), np.where(w, b0 - mb, 0.0)
        return (da * db).sum(0) / np.sqrt((da * da).sum(0) * (db * db).sum(0))


def split_half_correlations(correct: np.ndarray, n_splits: int, rng: np.random.Generator) -> np.ndarray:
    """Spearman-Brown corrected split-half reliabilities, one per random split.

    Vectorised: half-accuracies for all splits come from two matrix products
    ``(X @ M) / (V @ M)`` with ``X`` the 0/1 matrix (NaN -> 0), ``V`` the validity
    matrix and ``M`` the ``K x splits`` half-membership matrix.
    """
    x = np.asarray(correct, dtype=float)
    valid = ~np.isnan(x)
    x0 = np.where(valid, x, 0.0)
    m1 = _split_masks(x.shape[1], n_splits, rng).T.astype(float)  # K x S
    m2 = 1.0 - m1
    v = valid.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        h1 = (x0 @ m1) / (v @ m1)
        h2 = (x0 @ m2) / (v @ m2)
    return spearman_brown(_columnwise_pearson(h1, h2))


@dataclass(frozen=True)
class SplitHalfReliability:
    """Median and percentile interval of split-half reliabilities."""

    r_xx: float
    ci: tuple[float, float]
    mean: float
    sd: float
    n_splits: int
    n_items: int
    k: int
    draws: np.ndarray

    def to_dict(self) -> dict:
        return {
            "r_xx": self.r_xx,
            "ci": list(self.ci),
            "mean": self.mean,
            "sd": self.sd,
            "n_splits": self.n_splits,
            "n_items": self.n_items,
            "k": self.k,
        }


def split_half_reliability(
    correct: np.ndarray,
    *,
    n_splits: int = 1000,
    ci: float = 0.95,
    seed: int | np.random.Generator | np.random.SeedSequence = 0,
) -> SplitHalfReliability:
    """Split-half reliability with Spearman-Brown correction (paper 001, section 2.2).

    Over ``n_splits`` random splits of the K samples into two halves, correlate the
    two half-accuracies across items and apply ``2r / (1 + r)``; report the median
    and the central ``ci`` percentile interval.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1, 1, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0.0]])
    >>> round(split_half_reliability(x, n_splits=200, seed=0).r_xx, 3)
    0.828
    """
    x = np.asarray(correct, dtype=float)
    keep = ~np.all(np.isnan(x), axis=1)
    x = x[keep]
    if x.shape[0] < 3 or x.shape[1] < 2:
        nan = float("nan")
        return SplitHalfReliability(nan, (nan, nan), nan, nan, n_splits, int(x.shape[0]), int(x.shape[1]), np.array([]))
    rng = np.random.default_rng(seed)
    r = split_half_correlations(x, n_splits, rng)
    finite = r[np.isfinite(r)]
    if finite.size == 0:  # e.g. every item at floor/ceiling: no variance to correlate
        nan = float("nan")
        return SplitHalfReliability(nan, (nan, nan), nan, nan, n_splits, int(x.shape[0]), int(x.shape[1]), r)
    lo, hi = np.percentile(finite, [50 * (1 - ci), 50 * (1 + ci)])
    return SplitHalfReliability(
        r_xx=float(np.median(finite)),
        ci=(float(lo), float(hi)),
        mean=float(finite.mean()),
        sd=float(finite.std()),
        n_splits=n_splits,
        n_items=int(x.shape[0]),
        k=int(x.shape[1]),
        draws=r,
    )


def icc_1_1(correct: np.ndarray) -> float:
    """ICC(1,1): one-way random effects, single measures (Shrout & Fleiss 1979).

    ``ICC = (MSB - MSW) / (MSB + (n0 - 1) MSW)`` with items as targets and samples
    as measurements. Unbalanced designs (missing samples) use the usual
    ``n0 = (N - sum n_i^2 / N) / (n - 1)``; with K samples everywhere ``n0 = K``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1, 1, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0.0]])
    >>> round(icc_1_1(x), 4)
    0.4074
    """
    x = np.asarray(correct, dtype=float)
    valid = ~np.isnan(x)
    n_i = valid.sum(axis=1)
    x, valid, n_i = x[n_i > 0], valid[n_i > 0], n_i[n_i > 0]
    n_items, big_n = len(n_i), n_i.sum()
    if n_items < 2 or big_n - n_items <= 0:
        return float("nan")
    x0 = np.where(valid, x, 0.0)
    means = x0.sum(axis=1) / n_i
    grand = x0.sum() / big_n
    msb = (n_i * (means - grand) ** 2).sum() / (n_items - 1)
    msw = (np.where(valid, x0 - means[:, None], 0.0) ** 2).sum() / (big_n - n_items)
    n0 = (big_n - (n_i**2).sum() / big_n) / (n_items - 1)
    denom = msb + (n0 - 1.0) * msw
    return float((msb - msw) / denom) if denom > 0 else float("nan")


def icc_1_k(correct: np.ndarray) -> float:
    """ICC(1,K): one-way random effects, average of the K measures (Shrout & Fleiss 1979).

    ``ICC(1,K) = (MSB - MSW) / MSB``: the reliability of an item's mean over its K
    samples, the quantity split-half r_xx (Spearman-Brown corrected to full length)
    estimates, so the two are comparable; ICC(1,1) is the single-sample value.
    Equals ``spearman_brown(ICC(1,1), n0)`` (``n0 = K`` when balanced).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1, 1, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0.0]])
    >>> round(icc_1_k(x), 4)  # = 4 r / (1 + 3 r) with r = ICC(1,1)
    0.7333
    """
    icc1 = icc_1_1(correct)
    x = np.asarray(correct, dtype=float)
    n_i = (~np.isnan(x)).sum(axis=1)
    n_i = n_i[n_i > 0]
    if not np.isfinite(icc1) or n_i.size < 2:
        return float("nan")
    big_n = n_i.sum()
    n0 = (big_n - (n_i**2).sum() / big_n) / (n_i.size - 1)
    return float(spearman_brown(icc1, n0))


def reliability_vs_k(
    correct: np.ndarray,
    ks: Sequence[int] | None = None,
    *,
    n_splits: int = 200,
    seed: int | np.random.Generator | np.random.SeedSequence = 0,
) -> dict[int, SplitHalfReliability]:
    """Split-half reliability using only the first ``k`` samples, for each ``k``.

    Answers "what would K = k have given?" (paper 001, section 5.3.1). Default
    ``ks``: every even K from 2 up to the design K, and K itself.

    Examples
    --------
    >>> import numpy as np
    >>> x = (np.random.default_rng(0).random((100, 10)) < np.linspace(0.1, 0.9, 100)[:, None]).astype(float)
    >>> sorted(reliability_vs_k(x, [2, 10], n_splits=50))
    [2, 10]
    """
    x = np.asarray(correct, dtype=float)
    n_k = x.shape[1]
    if ks is None:
        ks = sorted({*range(2, n_k + 1, 2), n_k} - {0, 1})
    rng = np.random.default_rng(seed)
    return {int(k): split_half_reliability(x[:, :k], n_splits=n_splits, seed=rng) for k in ks if 2 <= k <= n_k}
