"""Closed-form resolution diagnostics for paired binary comparisons (SPEC section 5, paper 002).

Every function is vectorised: arguments broadcast against each other like numpy
ufuncs and scalars come back as numpy scalars (0-d results are unwrapped).

Notation: two models A and B scored 0/1 on the same N items, accuracies
``p_a``, ``p_b``, phi (Pearson) correlation ``rho`` of the paired scores,
``delta = p_a - p_b``, and ``K = z_{1-alpha/2} + z_{1-beta}`` with power ``1 - beta``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special, stats

from bayesrc.errors import ParameterError, float_parameter

MULTIPLICITY_METHODS = ("bonferroni", "holm", "bh")
ANYTIME_METHODS = ("normal_mixture", "stitched")


def _out(x: np.ndarray):
    """Unwrap 0-d arrays to numpy scalars so scalar calls give scalars."""
    x = np.asarray(x)
    return x[()] if x.ndim == 0 else x


def _check_open_unit(name: str, x: ArrayLike) -> np.ndarray:
    arr = float_parameter(name, x)
    bad = (arr <= 0) | (arr >= 1)
    if bad.any():
        raise ParameterError(f"must lie strictly between 0 and 1, got {arr[bad].ravel()[0]:g}", field=name)
    return arr


def _check_rho(rho: ArrayLike) -> np.ndarray:
    arr = float_parameter("rho", rho)
    bad = (arr < -1) | (arr > 1)
    if bad.any():
        raise ParameterError(f"a correlation must lie in [-1, 1], got {arr[bad].ravel()[0]:g}", field="rho")
    return arr


def z_sum(alpha: ArrayLike = 0.05, power: ArrayLike = 0.8) -> np.ndarray:
    """``K = z_{1-alpha/2} + z_{power}`` (two-sided level alpha, power 1 - beta).

    Examples
    --------
    >>> round(float(z_sum()), 4)  # 1.96 + 0.8416
    2.8016
    """
    a = _check_open_unit("alpha", alpha)
    pw = _check_open_unit("power", power)
    return _out(stats.norm.isf(a / 2) + stats.norm.ppf(pw))


# ---------------------------------------------------------------------------
# Paired variance, N*, MDE, q
# ---------------------------------------------------------------------------


def joint_probabilities(p_a: ArrayLike, p_b: ArrayLike, rho: ArrayLike) -> np.ndarray:
    """Cell probabilities ``(p11, p10, p01, p00)`` (last axis) of two Bernoullis with phi correlation rho.

    ``p11 = p_a p_b + rho sqrt(p_a q_a p_b q_b)``; ``p10 = p_a - p11`` is the
    discordant cell "A right, B wrong" (McNemar's b), ``p01`` is c.
    Raises ``ParameterError`` when rho is outside the Frechet bounds for the margins.

    Examples
    --------
    >>> joint_probabilities(0.6, 0.5, 0.3).round(4)  # p11, p10, p01, p00
    array([0.3735, 0.2265, 0.1265, 0.2735])
    """
    pa = _check_open_unit("p_a", p_a)
    pb = _check_open_unit("p_b", p_b)
    r = _check_rho(rho)
    pa, pb, r = np.broadcast_arrays(pa, pb, r)
    s = np.sqrt(pa * (1 - pa) * pb * (1 - pb))
    p11 = pa * pb + r * s
    cells = np.stack([p11, pa - p11, pb - p11, 1 - pa - pb + p11], axis=-1)
    bad = (cells < -1e-12).any(axis=-1)
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        lo, hi = rho_bounds(pa.ravel()[i], pb.ravel()[i])
        raise ParameterError(
            f"rho = {r.ravel()[i]:g} is impossible for accuracies {pa.ravel()[i]:g} and {pb.ravel()[i]:g} "
            f"(feasible range [{lo:.4g}, {hi:.4g}])",
            field="rho",
        )
    return np.clip(cells, 0.0, 1.0)


def rho_bounds(p_a: ArrayLike, p_b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Frechet bounds on the phi correlation of two Bernoullis with these margins.

    Examples
    --------
    >>> lo, hi = rho_bounds(0.9, 0.5)
    >>> round(float(lo), 4), round(float(hi), 4)
    (-0.3333, 0.3333)
    """
    pa = np.asarray(p_a, dtype=float)
    pb = np.asarray(p_b, dtype=float)
    s = np.sqrt(pa * (1 - pa) * pb * (1 - pb))
    hi = (np.minimum(pa, pb) - pa * pb) / s
    lo = (np.maximum(0.0, pa + pb - 1) - pa * pb) / s
    return _out(lo), _out(hi)


def paired_variance(p_a: ArrayLike, p_b: ArrayLike, rho: ArrayLike) -> np.ndarray:
    """Variance of the paired difference ``D = X_A - X_B`` (SPEC 5)::

        sigma_D^2 = p_A q_A + p_B q_B - 2 rho sqrt(p_A q_A p_B q_B)

    Equals ``psi - delta^2`` with ``psi = p10 + p01`` the discordant proportion.

    Examples
    --------
    >>> round(float(paired_variance(0.6, 0.5, 0.3)), 4)
    0.343
    """
    cells = joint_probabilities(p_a, p_b, rho)  # validates and checks feasibility
    pa = cells[..., 0] + cells[..., 1]
    pb = cells[..., 0] + cells[..., 2]
    r = np.broadcast_to(_check_rho(rho), pa.shape)
    var = pa * (1 - pa) + pb * (1 - pb) - 2 * r * np.sqrt(pa * (1 - pa) * pb * (1 - pb))
    return _out(np.maximum(var, 0.0))


def _n_star(var: np.ndarray, delta: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``(K sigma_D / |delta|)^2`` with ``inf`` (not a division by zero) where delta = 0."""
    delta = np.abs(delta)
    safe = np.where(delta > 0, delta, 1.0)
    return np.where(delta > 0, k**2 * var / safe**2, np.inf)


def required_n(
    p_a: ArrayLike,
    p_b: ArrayLike,
    rho: ArrayLike,
    alpha: ArrayLike = 0.05,
    power: ArrayLike = 0.8,
) -> np.ndarray:
    """Paired sample size ``N*`` (McNemar-Connor / paired Wald, SPEC 5)::

        N* = ((z_{1-alpha/2} + z_{1-beta}) sigma_D / |delta|)^2,   delta = p_A - p_B

    Continuous (not rounded up; ``ceil`` it for a design). ``delta = 0`` gives
    ``inf``: no finite benchmark resolves a zero difference.

    Examples
    --------
    >>> round(float(required_n(0.62, 0.58, 0.5)))  # 4 pp apart, rho 0.5: about 1,176 paired items
    1176
    """
    var = paired_variance(p_a, p_b, rho)
    delta = np.asarray(p_a, dtype=float) - np.asarray(p_b, dtype=float)
    return _out(_n_star(var, delta, z_sum(alpha, power)))


def resolution_ratio(
    n: ArrayLike,
    p_a: ArrayLike,
    p_b: ArrayLike,
    rho: ArrayLike,
    alpha: ArrayLike = 0.05,
    power: ArrayLike = 0.8,
    inflation: ArrayLike = 1.0,
) -> np.ndarray:
    """Resolution ratio ``q = N / (inflation * N*)``; resolved iff ``q >= 1`` (paper 002).

    ``inflation`` multiplies N* for a stress test (multiplicity, design effect,
    anytime validity). ``q = 0`` where ``delta = 0`` (N* infinite).

    Examples
    --------
    >>> round(float(resolution_ratio(500, 0.62, 0.58, 0.5)), 3)  # 500 items resolve 43% of N*
    0.425
    """
    n_arr = float_parameter("n", n)
    if (n_arr <= 0).any():
        raise ParameterError("the number of items must be positive", field="n")
    n_star = np.asarray(required_n(p_a, p_b, rho, alpha, power)) * np.asarray(inflation, dtype=float)
    return _out(np.where(np.isinf(n_star), 0.0, n_arr / np.where(np.isinf(n_star), 1.0, n_star)))


def mde(
    n: ArrayLike,
    p: ArrayLike,
    rho: ArrayLike,
    alpha: ArrayLike = 0.05,
    power: ArrayLike = 0.8,
    *,
    tol: float = 1e-10,
) -> np.ndarray:
    """Minimum detectable effect at ``n`` paired items: the ``delta`` with ``N*(delta) = n``.

    ``p`` is the mean accuracy of the two models, ``p_A = p + delta/2`` and
    ``p_B = p - delta/2`` (the parametrisation of paper 002, Lemma 1), so
    ``required_n(p + m/2, p - m/2, rho) == n`` for ``m = mde(n, p, rho)``.
    Solved by vectorised bisection (N* falls monotonically in delta). NaN where
    no feasible delta (margins in (0, 1), rho within its Frechet bounds) is
    detectable with ``n`` items.

    Examples
    --------
    >>> round(float(mde(1000, 0.6, 0.5)), 4)  # 1,000 paired items at p = 0.6, rho = 0.5
    0.0434
    """
    n_arr = float_parameter("n", n)
    if (n_arr <= 0).any():
        raise ParameterError("the number of items must be positive", field="n")
    p_arr = _check_open_unit("p", p)
    r_arr = _check_rho(rho)
    k = np.asarray(z_sum(alpha, power))
    n_arr, p_arr, r_arr, k = np.broadcast_arrays(n_arr, p_arr, r_arr, k)

    def nstar(d):
        pa, pb = p_arr + d / 2, p_arr - d / 2
        s = np.sqrt(pa * (1 - pa) * pb * (1 - pb))
        var = pa * (1 - pa) + pb * (1 - pb) - 2 * r_arr * s
        return k**2 * np.maximum(var, 0) / d**2

    def feasible(d):
        pa, pb = p_arr + d / 2, p_arr - d / 2
        s = np.sqrt(pa * (1 - pa) * pb * (1 - pb))
        p11 = pa * pb + r_arr * s
        return (pb - p11 >= -1e-12) & (p11 >= -1e-12) & (1 - pa - pb + p11 >= -1e-12) & (pa - p11 >= -1e-12)

    # Largest feasible delta (feasibility shrinks as delta grows).
    lo = np.zeros_like(p_arr)
    hi = 2 * np.minimum(p_arr, 1 - p_arr) * (1 - 1e-9)
    ok = feasible(hi)
    if not ok.all():
        a, b = np.zeros_like(hi), hi.copy()
        for _ in range(80):
            mid = (a + b) / 2
            f = feasible(mid)
            a, b = np.where(f, mid, a), np.where(f, b, mid)
        hi = np.where(ok, hi, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        detectable = nstar(hi) <= n_arr
        a, b = lo + 1e-15, hi
        for _ in range(200):
            mid = (a + b) / 2
            big = nstar(mid) > n_arr  # too small an effect to resolve
            a, b = np.where(big, mid, a), np.where(big, b, mid)
            if np.all(b - a < tol):
                break
    return _out(np.where(detectable & (hi > 0), (a + b) / 2, np.nan))


# ---------------------------------------------------------------------------
# The single-arm Cohen's h x (1 - rho) shortcut (paper 002, Lemma 1)
# ---------------------------------------------------------------------------


def cohens_h(p_a: ArrayLike, p_b: ArrayLike) -> np.ndarray:
    """Cohen's ``h = 2 arcsin sqrt(p_A) - 2 arcsin sqrt(p_B)``.

    Examples
    --------
    >>> round(float(cohens_h(0.62, 0.58)), 4)
    0.0817
    """
    return _out(2 * np.arcsin(np.sqrt(np.asarray(p_a, float))) - 2 * np.arcsin(np.sqrt(np.asarray(p_b, float))))


def shortcut_n(
    p_a: ArrayLike, p_b: ArrayLike, rho: ArrayLike, alpha: ArrayLike = 0.05, power: ArrayLike = 0.8
) -> np.ndarray:
    """The calculator shortcut: single-arm ``n_h = (K / h)^2`` times ``(1 - rho)``.

    Examples
    --------
    >>> round(float(shortcut_n(0.62, 0.58, 0.5)))  # about half of required_n's 1,176 (Lemma 1)
    588
    """
    pa = _check_open_unit("p_a", p_a)
    pb = _check_open_unit("p_b", p_b)
    r = _check_rho(rho)
    h = np.asarray(cohens_h(pa, pb))
    k = np.asarray(z_sum(alpha, power))
    return _out(np.where(h != 0, (1 - r) * k**2 / np.where(h != 0, h, 1.0) ** 2, np.inf))


def shortcut_ratio(
    p: ArrayLike, delta: ArrayLike, rho: ArrayLike, alpha: ArrayLike = 0.05, power: ArrayLike = 0.8
) -> np.ndarray:
    """``n_shortcut / N*`` at ``p_A = p + delta/2``, ``p_B = p - delta/2`` (paper 002, Lemma 1).

    Tends to 1/2 as ``delta -> 0`` (the shortcut halves the paired sample size):
    ``ratio = 1/2 + C(p, rho) delta^2 + O(delta^4)``, see :func:`shortcut_constant`.
    alpha and power cancel; they are accepted for symmetry with the other calls.

    Examples
    --------
    >>> round(float(shortcut_ratio(0.6, 0.04, 0.5)), 3)
    0.5
    """
    p_arr = _check_open_unit("p", p)
    d = float_parameter("delta", delta)
    if (d == 0).any():
        raise ParameterError(
            "delta = 0: both N* and the shortcut are infinite, their ratio is undefined", field="delta"
        )
    pa, pb = p_arr + d / 2, p_arr - d / 2
    return _out(np.asarray(shortcut_n(pa, pb, rho, alpha, power)) / np.asarray(required_n(pa, pb, rho, alpha, power)))


def shortcut_constant(p: ArrayLike, rho: ArrayLike) -> np.ndarray:
    """Second-order constant of Lemma 1: ``ratio - 1/2 = C(p, rho) delta^2 + O(delta^4)``::

        C(p, rho) = [1 / (6u) - (1 + rho)(1 - 2p)^2 / (16 (1 - rho) u^2)] / 2,   u = p(1 - p)

    ``C(1/2, rho) = 1/3`` for every rho.

    Examples
    --------
    >>> round(float(shortcut_constant(0.5, 0.0)), 4)  # 1/3 at p = 0.5, rho = 0
    0.3333
    """
    p_arr = _check_open_unit("p", p)
    r = _check_rho(rho)
    if (r == 1).any():
        raise ParameterError("rho = 1 leaves no paired variance", field="rho")
    u = p_arr * (1 - p_arr)
    return _out((1 / (6 * u) - (1 + r) * (1 - 2 * p_arr) ** 2 / (16 * (1 - r) * u**2)) / 2)


# ---------------------------------------------------------------------------
# Stress tests: multiplicity, clustering, anytime validity
# ---------------------------------------------------------------------------


def adjusted_alpha(
    m: ArrayLike, method: str = "bonferroni", alpha: ArrayLike = 0.05, rank: ArrayLike | None = None
) -> np.ndarray:
    """Per-comparison level of a multiple-comparison procedure over ``m`` tests.

    ``rank`` (1 = the strongest comparison, smallest p / largest q) picks the step:
    Bonferroni ``alpha/m`` at every rank; Holm (step-down) ``alpha/(m - rank + 1)``;
    Benjamini-Hochberg (step-up) ``rank * alpha / m``. Without ``rank`` the first,
    most stringent step is used, where all three equal ``alpha/m``.

    Examples
    --------
    >>> float(adjusted_alpha(40))  # Bonferroni over 40 comparisons
    0.00125
    """
    if method not in MULTIPLICITY_METHODS:
        raise ParameterError(
            f"unknown method {method!r}; expected one of {', '.join(MULTIPLICITY_METHODS)}", field="method"
        )
    m_arr = float_parameter("m", m)
    if (m_arr < 1).any() or (m_arr != np.round(m_arr)).any():
        raise ParameterError("the number of comparisons must be a positive integer", field="m")
    a = _check_open_unit("alpha", alpha)
    k = np.ones_like(m_arr) if rank is None else float_parameter("rank", rank)
    if ((k < 1) | (k > m_arr) | (k != np.round(k))).any():
        raise ParameterError("rank must be an integer in 1..m", field="rank")
    if method == "bonferroni":
        out = a / m_arr + 0 * k
    elif method == "holm":
        out = a / (m_arr - k + 1)
    else:
        out = k * a / m_arr
    return _out(out)


def multiplicity_inflation(
    m: ArrayLike,
    method: str = "bonferroni",
    alpha: ArrayLike = 0.05,
    power: ArrayLike = 0.8,
    rank: ArrayLike | None = None,
) -> np.ndarray:
    """Factor by which ``N*`` grows when level alpha is split over ``m`` comparisons (paper 002)::

        ((z_{1-alpha'/2} + z_{1-beta}) / (z_{1-alpha/2} + z_{1-beta}))^2

    with ``alpha'`` from :func:`adjusted_alpha` (Bonferroni ``alpha/m``; Holm and BH at
    the given ``rank``, default the first step). Bonferroni, m = 40: about 2.11.

    Examples
    --------
    >>> round(float(multiplicity_inflation(40)), 2)  # paper 002: N* grows 2.11-fold
    2.11
    """
    a_adj = np.asarray(adjusted_alpha(m, method, alpha, rank))
    return _out((np.asarray(z_sum(a_adj, power)) / np.asarray(z_sum(alpha, power))) ** 2)


def design_effect(icc: ArrayLike, cluster_sizes: ArrayLike, *, mean: str = "arithmetic") -> np.ndarray:
    """Design effect ``DE = 1 + (m_bar - 1) ICC(D)`` for items clustered in subjects/domains (SPEC 5).

    ``cluster_sizes``: the sizes of the clusters (last axis), or one number, the mean
    size ``m_bar`` itself. ``mean="arithmetic"`` (SPEC: ``m_bar = N / G``) or
    ``"size_weighted"`` (``sum m_g^2 / N``, the usual choice for unequal clusters, larger).
    Example (paper 002): ICC 0.036, 14 subjects, N = 12,032: ``m_bar = 859.4``, DE = 31.9
    (the paper's 31.5 corresponds to the unrounded ICC of about 0.0355).

    Examples
    --------
    >>> import numpy as np
    >>> round(float(design_effect(0.036, np.full(14, 12032 / 14))), 1)  # MMLU-Pro's 14 subjects
    31.9
    """
    icc_arr = float_parameter("icc", icc)
    if ((icc_arr < -1) | (icc_arr > 1)).any():
        raise ParameterError("an intra-class correlation must lie in [-1, 1]", field="icc")
    sizes = float_parameter("cluster_sizes", cluster_sizes)
    if (sizes <= 0).any():
        raise ParameterError("cluster sizes must be positive", field="cluster_sizes")
    if sizes.ndim == 0:
        m_bar = sizes
    elif mean == "arithmetic":
        m_bar = sizes.mean(axis=-1)
    elif mean == "size_weighted":
        m_bar = (sizes**2).sum(axis=-1) / sizes.sum(axis=-1)
    else:
        raise ParameterError("mean must be 'arithmetic' or 'size_weighted'", field="mean")
    return _out(1 + (m_bar - 1) * icc_arr)


def cluster_icc(values: ArrayLike, clusters: ArrayLike) -> float:
    """One-way ANOVA intra-class correlation ICC(1) of ``values`` (e.g. ``D_i = X_iA - X_iB``) by cluster.

    ``ICC = (MSB - MSW) / (MSB + (n0 - 1) MSW)`` with ``n0 = (N - sum n_g^2 / N) / (G - 1)``
    for unequal cluster sizes; truncated at 0 (a negative estimate means no
    clustering, DE = 1). NaN with fewer than two clusters.

    Examples
    --------
    >>> import numpy as np
    >>> round(float(cluster_icc(np.array([1.0, 1, 0, 0, 1, 0]), np.array([0, 0, 1, 1, 2, 2]))), 3)
    0.5
    """
    y = float_parameter("values", values).ravel()
    g = np.asarray(clusters).ravel()
    if y.size != g.size:
        raise ParameterError(f"{y.size} values but {g.size} cluster labels", field="clusters")
    labels, inv, sizes = np.unique(g, return_inverse=True, return_counts=True)
    n_g, n = labels.size, y.size
    if n_g < 2 or n <= n_g:
        return float("nan")
    means = np.bincount(inv, weights=y) / sizes
    grand = y.mean()
    msb = np.sum(sizes * (means - grand) ** 2) / (n_g - 1)
    msw = np.sum((y - means[inv]) ** 2) / (n - n_g)
    n0 = (n - np.sum(sizes**2) / n) / (n_g - 1)
    denom = msb + (n0 - 1) * msw
    if denom <= 0:
        return 0.0
    return float(max(0.0, (msb - msw) / denom))


def clustered_required_n(
    p_a: ArrayLike,
    p_b: ArrayLike,
    rho: ArrayLike,
    icc: ArrayLike,
    cluster_sizes: ArrayLike,
    alpha: ArrayLike = 0.05,
    power: ArrayLike = 0.8,
    *,
    mean: str = "arithmetic",
) -> np.ndarray:
    """``N*`` under item clustering: the IID ``N*`` times :func:`design_effect`.

    Paper 002: N* = 432 with DE = 31.5 becomes about 13,600 items.

    Examples
    --------
    >>> import numpy as np
    >>> round(float(clustered_required_n(0.62, 0.58, 0.5, 0.036, np.full(14, 100))))
    5365
    """
    de = np.asarray(design_effect(icc, cluster_sizes, mean=mean))
    return _out(np.asarray(required_n(p_a, p_b, rho, alpha, power)) * de)


def _mixture_ratio(alpha: np.ndarray) -> np.ndarray:
    """Optimal ``rho/n`` of the two-sided normal mixture (Howard et al. 2021, via Lambert W)::

    minimise (1 + r)(log(1 + 1/r) + 2 log(1/alpha))  ->  r = 1 / (-W_{-1}(-alpha^2/e) - 1)
    """
    x = -special.lambertw(-(alpha**2) / np.e, k=-1).real
    return 1 / (x - 1)


def anytime_boundary(
    n: ArrayLike,
    alpha: ArrayLike = 0.05,
    method: str = "normal_mixture",
    n_opt: ArrayLike | None = None,
) -> np.ndarray:
    """Time-uniform two-sided boundary ``u(n)`` on the z scale: ``P(exists n: |S_n| / sqrt(n) sigma >= u(n)) <= alpha``.

    It replaces ``z_{1-alpha/2}`` for a leaderboard that is looked at after every
    update (paper 002, anytime-valid stress test; Howard et al. 2021, asymptotic
    confidence sequences of Waudby-Smith et al. for the variance-standardised sum).

    - ``"normal_mixture"`` (default): Robbins' two-sided normal mixture,
      ``u(n) = sqrt((1 + rho/n)(log(1 + n/rho) + 2 log(1/alpha)))``, with the mixture
      width ``rho`` chosen to make the boundary tightest at ``n_opt`` (default ``n``:
      tuned for the benchmark's size, where ``u`` no longer depends on ``n``).
    - ``"stitched"``: Howard et al. (2021, eq. 10) ``1.7 sqrt(log log(2n) + 0.72 log(5.2 / (alpha/2)))``,
      one-sided at alpha/2 per side, valid for ``n >= 2`` with no tuning.

    Examples
    --------
    >>> round(float(anytime_boundary(12032)), 3)  # vs 1.96 for one look
    3.035
    """
    n_arr = float_parameter("n", n)
    a = _check_open_unit("alpha", alpha)
    if method == "normal_mixture":
        if (n_arr <= 0).any():
            raise ParameterError("n must be positive", field="n")
        t = n_arr if n_opt is None else float_parameter("n_opt", n_opt)
        rho = _mixture_ratio(a) * t
        return _out(np.sqrt((1 + rho / n_arr) * (np.log1p(n_arr / rho) + 2 * np.log(1 / a))))
    if method == "stitched":
        if (n_arr < 2).any():
            raise ParameterError("the stitched boundary needs n >= 2", field="n")
        return _out(1.7 * np.sqrt(np.log(np.log(2 * n_arr)) + 0.72 * np.log(5.2 / (a / 2))))
    raise ParameterError(f"unknown boundary {method!r}; expected one of {', '.join(ANYTIME_METHODS)}", field="method")


def anytime_inflation(
    n: ArrayLike,
    alpha: ArrayLike = 0.05,
    power: ArrayLike = 0.8,
    method: str = "normal_mixture",
    n_opt: ArrayLike | None = None,
) -> np.ndarray:
    """``N*`` inflation implied by the anytime-valid boundary at ``n``::

        ((u(n) + z_{1-beta}) / (z_{1-alpha/2} + z_{1-beta}))^2

    (alpha = 0.05, power 0.8: 1.91 for the horizon-tuned normal mixture).
    A pair is resolved under anytime validity iff ``q >= anytime_inflation(N)``.

    Examples
    --------
    >>> round(float(anytime_inflation(12032)), 2)
    1.91
    """
    u = np.asarray(anytime_boundary(n, alpha, method, n_opt))
    zb = stats.norm.ppf(_check_open_unit("power", power))
    return _out(((u + zb) / np.asarray(z_sum(alpha, power))) ** 2)


def anytime_required_n(
    p_a: ArrayLike,
    p_b: ArrayLike,
    rho: ArrayLike,
    alpha: float = 0.05,
    power: float = 0.8,
    method: str = "normal_mixture",
) -> np.ndarray:
    """Smallest ``N`` with ``N >= N* x anytime_inflation(N)`` (the anytime-valid ``N*``).

    For the horizon-tuned normal mixture the inflation does not depend on N, so
    this is ``N* x`` a constant; for the stitched boundary it is solved numerically.

    Examples
    --------
    >>> round(float(anytime_required_n(0.55, 0.5, 0.3)))
    2094
    """
    base = np.asarray(required_n(p_a, p_b, rho, alpha, power), dtype=float)
    if method == "normal_mixture":
        return _out(base * np.asarray(anytime_inflation(2.0, alpha, power, method)))
    out = np.full(base.shape, np.inf)
    for idx in np.ndindex(base.shape):
        b = base[idx]
        if np.isfinite(b):
            f = lambda n: n - b * float(anytime_inflation(n, alpha, power, method))  # noqa: E731
            hi = max(4.0, 4 * b)
            while f(hi) < 0:
                hi *= 2
            out[idx] = optimize.brentq(f, 2.0, hi) if f(2.0) < 0 else 2.0
    return _out(out)
