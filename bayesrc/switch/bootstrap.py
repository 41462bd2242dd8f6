"""BCa bootstrap intervals for means and paired / unpaired mean differences.

Bias-corrected and accelerated (BCa) percentile interval (Efron & Tibshirani 1993,
ch. 14): with bootstrap replicates θ*_b and jackknife values θ_(i),

    z0 = Φ⁻¹( #{θ*_b < θ̂}/B + ½ #{θ*_b = θ̂}/B )        (ties split: binary scores)
    a  = Σ d_i³ / (6 (Σ d_i²)^{3/2}),   d_i = mean(θ_(·)) − θ_(i)
    α' = Φ( z0 + (z0 + z_α) / (1 − a (z0 + z_α)) )

and the interval is the α'_lo and α'_hi quantiles of θ*. Resampling is vectorised:
one multinomial count matrix W (B × n) gives every replicate mean as x Wᵀ / n, for
every row of x at once. The paired version resamples episodes and keeps the pairing
by bootstrapping the per-episode differences (paper 004 section 2).

Why not ``scipy.stats.bootstrap(method="BCa")``: it draws its own resample indices
(a different random stream for the same seed, so other limits and stars), one
statistic per call (here every row shares one count matrix), z0 is not clipped to
[½/B, 1 − ½/B], and a constant row gives NaN with a warning (here: the point estimate).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import ndtr, ndtri

STAR_LEVELS: tuple[float, ...] = (0.95, 0.99, 0.999)


def resample_counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Multinomial counts (n_boot × n): how often each observation enters each replicate."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)


def _quantile_rows(sorted_boot: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Linear-interpolated quantile q[..., j] of each row of sorted_boot[..., B]."""
    B = sorted_boot.shape[-1]
    pos = np.clip(q, 0.0, 1.0) * (B - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, B - 1)
    w = pos - lo
    a = np.take_along_axis(sorted_boot, lo, axis=-1)
    b = np.take_along_axis(sorted_boot, hi, axis=-1)
    return a + w * (b - a)


def bca_from_replicates(
    theta: np.ndarray, boot: np.ndarray, jack: np.ndarray, levels: Sequence[float] = (0.95,)
) -> tuple[np.ndarray, np.ndarray]:
    """BCa limits for each level: arrays (..., n_levels) of lower and upper limits.

    ``theta`` (...), ``boot`` (..., B) replicates, ``jack`` (..., n) leave-one-out values.
    A degenerate row (all replicates equal) gets the point estimate as both limits.
    """
    theta = np.asarray(theta, float)
    boot = np.asarray(boot, float)
    B = boot.shape[-1]
    t = theta[..., None]
    prop = ((boot < t).sum(-1) + 0.5 * (boot == t).sum(-1)) / B
    prop = np.clip(prop, 0.5 / B, 1 - 0.5 / B)
    z0 = ndtri(prop)
    d = jack.mean(-1, keepdims=True) - jack
    num = (d**3).sum(-1)
    den = 6.0 * (d**2).sum(-1) ** 1.5
    a = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    lv = np.asarray(levels, float)
    za = ndtri(np.concatenate([(1 - lv) / 2, (1 + lv) / 2]))  # (2L,)
    z0e, ae = z0[..., None], a[..., None]
    q = ndtr(z0e + (z0e + za) / (1 - ae * (z0e + za)))
    lims = _quantile_rows(np.sort(boot, axis=-1), q)
    const = boot.max(-1) == boot.min(-1)
    lims = np.where(const[..., None], t, lims)
    L = len(lv)
    return lims[..., :L], lims[..., L:]


def percentile_interval(boot: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Plain percentile interval (for comparisons with BCa)."""
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=-1)
    return lo, hi


def bootstrap_mean(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point estimate, replicates (..., B) and jackknife values (..., n) of the mean of x[..., n]."""
    x = np.asarray(x, float)
    n = x.shape[-1]
    W = resample_counts(n, n_boot, rng)
    boot = x @ W.T / n
    total = x.sum(-1, keepdims=True)
    jack = (total - x) / max(n - 1, 1)
    return x.mean(-1), boot, jack


def bca_mean(
    x: np.ndarray,
    *,
    n_boot: int = 1000,
    levels: Sequence[float] = (0.95,),
    rng: np.random.Generator | int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean of x[..., n] with BCa limits (..., n_levels); rows share the resampling.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(1.0, 1.0, 200)
    >>> m, lo, hi = bca_mean(x, n_boot=2000, rng=1)
    >>> bool(lo[0] < 1.0 < hi[0])
    True
    """
    rng = np.random.default_rng(rng)
    theta, boot, jack = bootstrap_mean(x, n_boot, rng)
    lo, hi = bca_from_replicates(theta, boot, jack, levels)
    return theta, lo, hi


def bca_paired_diff(
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_boot: int = 1000,
    levels: Sequence[float] = (0.95,),
    rng: np.random.Generator | int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mean(x − y) with paired BCa limits: episodes are resampled, pairs stay together.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0); u = rng.normal(0, 1, 150)
    >>> d, lo, hi = bca_paired_diff(u + 0.1, u, n_boot=1000, rng=1)
    >>> round(float(d), 3), bool(lo[0] <= 0.1 <= hi[0])
    (0.1, True)
    """
    return bca_mean(np.asarray(x, float) - np.asarray(y, float), n_boot=n_boot, levels=levels, rng=rng)


def bca_unpaired_diff(
    x: np.ndarray,
    y: np.ndarray,
    *,
    n_boot: int = 1000,
    levels: Sequence[float] = (0.95,),
    rng: np.random.Generator | int | None = None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """mean(x) − mean(y) with BCa limits resampling x and y independently (ignores pairing).

    The jackknife deletes one observation at a time from either sample.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d, lo, hi = bca_unpaired_diff(rng.normal(1, 1, 100), rng.normal(0, 1, 100), n_boot=1000, rng=1)
    >>> bool(lo[0] > 0)
    True
    """
    rng = np.random.default_rng(rng)
    x, y = np.asarray(x, float), np.asarray(y, float)
    tx, bx, jx = bootstrap_mean(x, n_boot, rng)
    ty, by, jy = bootstrap_mean(y, n_boot, rng)
    jack = np.concatenate([jx - ty, tx - jy])
    lo, hi = bca_from_replicates(np.asarray(tx - ty), bx - by, jack, levels)
    return float(tx - ty), lo, hi


def stars_from_limits(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """'*', '**', '***' when the 95 / 99 / 99.9 % interval excludes zero (limits (..., 3))."""
    excl = (lo > 0) | (hi < 0)
    count = excl.sum(-1)
    return np.asarray(["*" * int(c) for c in np.ravel(count)], dtype=object).reshape(count.shape)
