"""Collapsed paired change model (SPEC section 3), twice: NumPyro and PyMC (nutpie).

Same model and priors as :mod:`bayesrc.bayes.change` (read its docstring), sampled the way
the collapsed beta-binomial is: NUTS on the ``2 D + 2 (+1)`` hyperparameters only, with
every item's ``theta_i``, ``delta_i`` and ``changed_i`` integrated out, then exact
conditional draws of the item quantities.

Given the hyperparameters items are independent and an item's data enter only through the
cell ``c = (d, n1, y1, n2, y2)``; with K = 10 there are at most ``D x 11 x 11`` distinct
cells, whatever the item count. The marginal likelihood of one cell, on the standardised
scales ``theta = mu_theta_d + sigma_theta_d * u`` and ``delta = m(u) + sigma_delta * v``
with ``m(u) = shift_d + slope * u``::

    L(c) = int phi(u) Bin(y1 | n1, expit theta) [ (1 - pi) Bin(y2 | n2, expit theta)
                                                 + pi g(u) ] du
    g(u) = int phi(v) Bin(y2 | n2, expit(theta + m(u) + sigma_delta v)) dv

Both integrals use the trapezoid rule on fixed standardised nodes (``u``: 169 nodes on
[-6.3, 6.3], spacing 0.075; ``v``: 49 nodes on [-6, 6]), in log space (``g`` as one matrix product per trial count, :func:`log_change_integral`). The integrands are
analytic in a strip (the binomial's poles sit at ``theta = +- i pi``), so the trapezoid rule
converges geometrically in the logit-scale spacing ``sigma h``: relative error below 1e-6
while ``sigma_theta <= 6`` and ``0.2 <= sigma_delta <= 4`` (1e-5 at ``sigma_theta = 8``;
tested against ``scipy.integrate.dblquad``, floor / ceiling cells included). ``g`` depends on the data only
through ``(d, n2, y2)``, so it is computed once per such key, not per cell. The total
log-likelihood is ``sum_c w_c log L(c)`` with ``w_c`` the number of items in cell ``c``.

Item draws (:func:`item_draws`), for each posterior draw of the hyperparameters and each
cell: ``r_c = P(changed | data) = pi int phi B1 g / L`` and ``P(delta > 0 | changed, data)``
(Rao-Blackwellised, on the same nodes); then per item ``changed_i ~ Bernoulli(r_c)``,
``u_i | changed_i, data`` by inverse CDF of the piecewise-linear density through the
likelihood's own theta nodes (already computed; spacing 0.075 prior SD) and
``delta_i | theta_i, changed_i, data`` likewise on 121 nodes on [-6, 6] (the prior
``Normal(m, sigma_delta)`` when ``changed_i = 0``: then ``delta_i`` does not enter the
likelihood). Exact up to grid resolution: P(changed) matches a 2,001 x 1,201-node reference
to 1e-5 and the draws pass KS tests against its marginals (tests/test_bayes_units.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from bayesrc.bayes.change import (
    group_draws,
    group_effects_numpyro,
    group_effects_pymc,
    hyperpriors_numpyro,
    hyperpriors_pymc,
    model_dims,
    prior_settings,
    share_above_zero,
    store_item_quantities,
)
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.samplers import SamplerConfig, run_numpyro, run_pymc

THETA_NODES, THETA_HALF = 169, 6.3  # 241 on [-7.5, 7.5] gave the same accuracy at 1.4x the cost
DELTA_NODES, DELTA_HALF = 49, 6.0
DRAW_DELTA_NODES, DRAW_DELTA_HALF = 121, 6.0


def trapezoid_grid(n_nodes: int, half_width: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``u_k`` on [-half, half] and log-weights ``log(h phi(u_k))`` for ``int f(u) phi(u) du``.

    Unnormalised (``sum exp(logw) = 1 - O(phi(half))``): the rule approximates the integral
    against the standard normal itself, so it stays exact for the likelihood.
    """
    u = np.linspace(-half_width, half_width, n_nodes)
    h = u[1] - u[0]
    return u, np.log(h) - 0.5 * u**2 - 0.5 * np.log(2 * np.pi)


@dataclass(frozen=True)
class Cells:
    """Distinct ``(d, n1, y1, n2, y2)`` cells, their multiplicities and the item -> cell map.

    ``key`` maps each cell to its distinct version-2 key ``(key_dom, key_n, key_y)``. With an
    item covariate, ``dom`` / ``key_dom`` index *strata* (distinct (domain, covariate level)
    pairs) and ``stratum_dom`` / ``stratum_group`` map each stratum to its domain and level;
    the model expands its per-domain and per-level hyperparameters to strata
    (:func:`strata_hyper`), so the quadrature code is the same with or without a covariate.
    """

    dom: np.ndarray
    n1: np.ndarray
    y1: np.ndarray
    n2: np.ndarray
    y2: np.ndarray
    weight: np.ndarray
    key: np.ndarray
    key_dom: np.ndarray
    key_n: np.ndarray
    key_y: np.ndarray
    item_cell: np.ndarray
    stratum_dom: np.ndarray | None = None
    stratum_group: np.ndarray | None = None

    @property
    def n_cells(self) -> int:
        return int(self.weight.size)


def cell_stats(data: ModelInputs) -> Cells:
    """Sufficient statistics of the change model: distinct cells with item counts.

    Without a covariate a cell's first entry is the domain; with one, the stratum (see :class:`Cells`).

    Examples
    --------
    >>> from bayesrc.bayes.inputs import ModelInputs
    >>> d = ModelInputs(items=("a", "b", "c"), versions=("v1", "v2"), domains=("x",), dom=np.zeros(3, int),
    ...                 y=np.array([[3, 4], [3, 4], [5, 5]]), n=np.full((3, 2), 10))
    >>> cells = cell_stats(d)
    >>> cells.n_cells, cells.weight.tolist(), cells.item_cell.tolist()
    (2, [2.0, 1.0], [0, 0, 1])
    """
    strata = None
    if data.n_groups > 1:
        stratum, s_dom, s_grp = data.strata()
        strata = (s_dom, s_grp)
    else:
        stratum = data.dom
    rows = np.stack([stratum, data.n[:, 0], data.y[:, 0], data.n[:, 1], data.y[:, 1]], axis=1)
    cells, item_cell, w = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    keys, key = np.unique(cells[:, [0, 3, 4]], axis=0, return_inverse=True)
    f = lambda a: a.astype(float)  # noqa: E731
    return Cells(
        dom=cells[:, 0], n1=f(cells[:, 1]), y1=f(cells[:, 2]), n2=f(cells[:, 3]), y2=f(cells[:, 4]), weight=f(w),
        key=key.ravel(), key_dom=keys[:, 0], key_n=f(keys[:, 1]), key_y=f(keys[:, 2]), item_cell=item_cell.ravel(),
        stratum_dom=None if strata is None else strata[0], stratum_group=None if strata is None else strata[1],
    )  # fmt: skip


def strata_hyper(cells: Cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta):
    """Per-domain ``mu_theta, sigma_theta, shift`` (+ per-level ``alpha``, ``gamma``, ``sigma_delta`` and
    per-stratum ``eta``) expanded to the cells' strata; without a covariate the strata are the
    domains and the one ``sigma_delta`` is repeated for each. Works on the last axis (numpy, jax
    or pytensor)."""
    if cells.stratum_dom is None:
        return mu_theta, sigma_theta, shift, sigma_delta[..., None] + 0.0 * shift
    sd, sg = cells.stratum_dom, cells.stratum_group
    return mu_theta[..., sd] + alpha[..., sg], sigma_theta[..., sd], shift[..., sd] + gamma[..., sg] + eta, sigma_delta[..., sg]


def _ops(backend: str) -> SimpleNamespace:
    """The handful of array functions the likelihood needs, for numpy, jax or pytensor."""
    if backend == "numpy":
        from scipy.special import log_expit, logsumexp

        return SimpleNamespace(
            log_sigmoid=log_expit, logsumexp=logsumexp, logaddexp=np.logaddexp, log=np.log, log1p=np.log1p, exp=np.exp, concatenate=np.concatenate,
            stop_gradient=lambda a: a, minimum=np.minimum,
        )  # fmt: skip
    if backend == "jax":
        import jax
        import jax.numpy as jnp
        from jax.nn import log_sigmoid
        from jax.scipy.special import logsumexp

        return SimpleNamespace(
            log_sigmoid=log_sigmoid, logsumexp=logsumexp, logaddexp=jnp.logaddexp, log=jnp.log, log1p=jnp.log1p, exp=jnp.exp, concatenate=jnp.concatenate,
            stop_gradient=jax.lax.stop_gradient, minimum=jnp.minimum,
        )  # fmt: skip
    import pytensor.tensor as pt
    from pytensor.gradient import zero_grad

    return SimpleNamespace(
        log_sigmoid=lambda x: -pt.softplus(-x), logsumexp=pt.logsumexp, logaddexp=pt.logaddexp, log=pt.log, log1p=pt.log1p, exp=pt.exp, concatenate=pt.concatenate,
        stop_gradient=zero_grad, minimum=pt.minimum,
    )  # fmt: skip


def cell_terms(ops, mu_theta, sigma_theta, shift, slope, cells: Cells, grid_u):
    """Per cell and theta node, the terms that do not involve ``delta`` (see module docstring).

    Returns ``(a, l_same, s)`` of shapes (cell, node), (key, node), (stratum, node):
    ``a = log(h phi(u_k)) + log Bin(y1 | n1, expit theta_k)``, ``l_same = log Bin(y2 | theta_k)``
    and ``s = theta_k + m(u_k)``, the centre of the version-2 logit when changed.
    Binomial coefficients are left out (constant), and each binomial term uses one log-sigmoid:
    ``y log expit(x) + (n - y) log expit(-x) = n log expit(x) - (n - y) x``.
    """
    u, lwu = grid_u
    theta = mu_theta[:, None] + sigma_theta[:, None] * u  # (stratum, node)
    lp = ops.log_sigmoid(theta)
    ky, kn, kd = cells.key_y[:, None], cells.key_n[:, None], cells.key_dom
    l_same = kn * lp[kd] - (kn - ky) * theta[kd]
    y1, n1, cd = cells.y1[:, None], cells.n1[:, None], cells.dom
    a = lwu + n1 * lp[cd] - (n1 - y1) * theta[cd]
    return a, l_same, theta + shift[:, None] + slope * u


def change_integrand(ops, s, sigma_delta, key_y, key_n, key_dom, grid_v):
    """Log integrand of ``g`` per (key, theta node, v-node):
    ``log(h phi(v)) + log Bin(y2 | n2, expit(s + sigma_delta v))`` (``log g`` = its logsumexp over v;
    ``sigma_delta`` per stratum)."""
    v, lwv = grid_v
    x = s[key_dom][..., None] + sigma_delta[key_dom][:, None, None] * v
    return lwv + key_n[:, None, None] * ops.log_sigmoid(x) - (key_n - key_y)[:, None, None] * x


FAST_MAX_N = 11  # log_change_integral's product form for n2 <= this (see there)
SIGMA_DELTA_CAP = 20.0  # log_change_integral's spread of changes at most this many logits (see there)


def log_change_integral(ops, s, sigma_delta, cells: Cells, grid_v):
    """``log g`` per (key, theta node): ``log int phi(v) Bin(y2 | n2, expit(s + sigma_delta v)) dv``.

    ``s``: (stratum, node); ``sigma_delta``: (stratum,). The trapezoid sum over the v-nodes of
    :func:`change_integrand`, computed as one (per-stratum batched) matrix product per trial
    count ``n``: with ``x = s + sigma_delta v``,
    ``p^y q^(n-y) = q^n e^(y s) e^(y sigma_delta v)`` (``p = expit x``; for ``y > n/2`` the
    mirror ``p^n e^(-(n-y) s) e^(-(n-y) sigma_delta v)``), so
    ``sum_v w_v q_v^n e^(y sigma_delta v)`` is a (node, v) @ (v, y) product per stratum. That
    needs log-sigmoids on stratum x node x v instead of exponentials on key x node x v
    (value and gradient of the K = 10 covariate model: 1.7x faster, ``benchmarks/change_likelihood.py``;
    the same sums to rounding). ``e^(k sigma_delta v)`` overflows float64 for ``k sigma_delta v > 709``
    (``k <= 5``, ``|v| <= 6``: ``sigma_delta`` above ~23), so the spread enters capped at
    ``SIGMA_DELTA_CAP`` = 20 logits, on both paths: a spread that wide puts every changed item's
    version-2 accuracy at 0 or 1 whichever it is, and the inverse-gamma prior gives it mass 5e-4
    (uncapped, a per-level spread of 20 items drew such values and made the PSIS-LOO likelihood NaN).
    Only the first factor is scaled (by its maximum over v, ``amax``): the summand at v = 0 is
    then at least ``e^(-6 n sigma_delta)`` and the linear factor at most ``e^(3 n sigma_delta)``,
    so nothing under- or overflows in float64 while ``n sigma_delta < 110`` (``n <= FAST_MAX_N``:
    ``sigma_delta < 10``; beyond that the log-likelihood is ``-inf`` and NUTS rejects the
    point); larger ``n`` sum directly.

    Examples
    --------
    >>> a, l_same, s = cell_terms(_ops("numpy"), mu, sd, shift, 0.0, cells, trapezoid_grid(THETA_NODES, THETA_HALF))  # doctest: +SKIP
    >>> log_g = log_change_integral(_ops("numpy"), s, np.full(len(s), 0.3), cells, trapezoid_grid(DELTA_NODES, DELTA_HALF))  # doctest: +SKIP
    """
    v, lwv = grid_v
    sigma_delta = ops.minimum(sigma_delta, SIGMA_DELTA_CAP)
    sd = sigma_delta[:, None, None]
    x = s[..., None] + sd * v  # (stratum, node, v-node)
    lq = ops.log_sigmoid(-x)
    lp = lq + x  # log expit(x) = log expit(-x) + x: one log-sigmoid, the costly part
    blocks, order = [], []
    for n in np.unique(cells.key_n):
        for upper in (False, True):
            idx = np.flatnonzero((cells.key_n == n) & ((cells.key_y > n / 2) == upper))
            if idx.size == 0:
                continue
            ky, kd = cells.key_y[idx], cells.key_dom[idx]
            if n > FAST_MAX_N:
                blocks.append(ops.logsumexp(change_integrand(ops, s, sigma_delta, ky, np.full(idx.size, n), kd, grid_v), axis=-1))
            else:
                sign = -1.0 if upper else 1.0
                k = n - ky if upper else ky  # the power of the linear factor e^(sign (s + sigma_delta v))
                ks, col = np.unique(k, return_inverse=True)
                la = lwv + n * (lp if upper else lq)  # (stratum, node, v-node)
                lb = sign * sd * v[:, None] * ks  # (stratum, v-node, distinct k)
                amax = ops.stop_gradient(la.max(-1, keepdims=True))  # any shift is exact: no gradient through the max
                logg = ops.log(ops.exp(la - amax) @ ops.exp(lb)) + amax  # (stratum, node, distinct k)
                blocks.append(logg.transpose(0, 2, 1)[kd, col.ravel()] + sign * k[:, None] * s[kd])
            order.append(idx)
    return ops.concatenate(blocks, 0)[np.argsort(np.concatenate(order))]


def cell_loglik(ops, mu_theta, sigma_theta, shift, sigma_delta, slope, pi, cells: Cells, grid_u=None, grid_v=None):
    """``log L(c)`` per cell: ``logsumexp_k [a_ck + log((1 - pi) B2_same + pi g)]``."""
    grid_u = grid_u or trapezoid_grid(THETA_NODES, THETA_HALF)
    grid_v = grid_v or trapezoid_grid(DELTA_NODES, DELTA_HALF)
    a, l_same, s = cell_terms(ops, mu_theta, sigma_theta, shift, slope, cells, grid_u)
    l2 = ops.logaddexp(ops.log1p(-pi) + l_same, ops.log(pi) + log_change_integral(ops, s, sigma_delta, cells, grid_v))
    return ops.logsumexp(a + l2[cells.key], axis=-1)


def _numpyro_model(cells: Cells, n_domains: int, slope: bool, grid_u, grid_v, prior=None, n_groups: int = 1):
    import jax.numpy as jnp
    import numpyro

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_numpyro(n_domains, slope, prior, n_groups)
    n_strata = 1 if cells.stratum_dom is None else len(cells.stratum_dom)
    alpha, gamma, eta = group_effects_numpyro(n_groups, prior, n_strata)
    ll = cell_loglik(_ops("jax"), *strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta), b, pi, cells, grid_u, grid_v)
    numpyro.factor("y", jnp.sum(cells.weight * ll))


def change_collapsed_numpyro(data: ModelInputs, *, slope: bool = False, prior: dict | None = None, config: SamplerConfig | None = None):
    """Collapsed change model with NumPyro: NUTS on the hyperparameters, exact item draws after.

    Examples
    --------
    >>> from bayesrc.bayes.inputs import model_inputs
    >>> dt = change_collapsed_numpyro(model_inputs(counts))   # doctest: +SKIP
    >>> dt["posterior"]["pi"].mean()                          # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    cells = cell_stats(data)
    grids = dict(grid_u=trapezoid_grid(THETA_NODES, THETA_HALF), grid_v=trapezoid_grid(DELTA_NODES, DELTA_HALF))
    kwargs = dict(cells=cells, n_domains=data.n_domains, slope=slope, prior=prior_settings(prior), n_groups=data.n_groups, **grids)
    dims = {k: v for k, v in model_dims(data.n_groups).items() if k != "theta"}  # theta is not sampled here
    dt = run_numpyro(_numpyro_model, kwargs, cfg, data.coords, dims)
    return _finish(dt, cells, cfg.seed, slope, prior)


def change_collapsed_pymc(data: ModelInputs, *, slope: bool = False, prior: dict | None = None, config: SamplerConfig | None = None):
    """The same collapsed model with PyMC (nutpie); same priors, names and dims as the NumPyro twin.

    Examples
    --------
    >>> dt = change_collapsed_pymc(model_inputs(counts))   # doctest: +SKIP
    """
    import pymc as pm
    import pytensor.tensor as pt

    cfg = config or SamplerConfig()
    cells = cell_stats(data)
    with pm.Model(coords=data.coords) as model:
        mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_pymc(slope, prior, data.n_groups)
        alpha, gamma, eta = group_effects_pymc(data.n_groups, prior)
        strata = strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta)
        grid_u, grid_v = trapezoid_grid(THETA_NODES, THETA_HALF), trapezoid_grid(DELTA_NODES, DELTA_HALF)
        ll = cell_loglik(_ops("pytensor"), *strata, b, pi, cells, grid_u, grid_v)
        pm.Potential("y", pt.sum(cells.weight * ll))
    dt = run_pymc(model, cfg)
    return _finish(dt, cells, cfg.seed, slope, prior)


# ---------------------------------------------------------------- exact conditional item draws


def _pwlinear_tables(logf):
    """Node values ``f`` (max-scaled) and the normalised CDF over intervals of each row's
    piecewise-linear density (trapezoid interval masses ``(f_k + f_k+1) / 2``)."""
    import jax.numpy as jnp

    f = jnp.exp(logf - logf.max(-1, keepdims=True))
    cdf = jnp.cumsum(0.5 * (f[..., 1:] + f[..., :-1]), -1)
    return f, cdf / cdf[..., -1:]


def _pwlinear_draw(f, cdf, rows, u1, u2, x0: float, h: float):
    """One draw per entry of ``rows`` from row ``rows[i]`` of the piecewise-linear density.

    Interval by inverse CDF (one ``searchsorted`` over all rows: row ``r``'s CDF shifted to
    ``[r, r + 1]``); within interval ``k`` the offset ``t`` solves
    ``f_k t + (f_k+1 - f_k) t^2 / 2 = u2 (f_k + f_k+1) / 2``. Returns ``x0 + (k + t) h``.
    """
    import jax.numpy as jnp

    n_int = cdf.shape[-1]
    flat = (jnp.arange(cdf.shape[0])[:, None] + cdf).ravel()
    pos = jnp.searchsorted(flat, rows + u1 * (1.0 - 1e-12), side="left")
    k = jnp.clip(pos - rows * n_int, 0, n_int - 1)
    fa, fb = f[rows, k], f[rows, k + 1]
    c = u2 * 0.5 * (fa + fb)
    # Stable root of (fb - fa) / 2 t^2 + fa t - c = 0 (t = u2 when the density is flat).
    t = 2.0 * c / (fa + jnp.sqrt(jnp.maximum(fa**2 + 2.0 * (fb - fa) * c, 0.0)))
    t = jnp.where(fa + fb > 0, jnp.clip(t, 0.0, 1.0), u2)
    return x0 + (k + t) * h


def _draws_one(hyper, key, cells, item_cell, grids):
    """Item quantities for one hyperparameter draw (JAX; see :func:`item_draws`)."""
    import jax
    import jax.numpy as jnp
    from jax.nn import log_sigmoid
    from jax.scipy.special import logsumexp

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyper
    grid_u, grid_v, fine_v = grids
    ops = _ops("jax")
    a, l_same, s = cell_terms(ops, mu_theta, sigma_theta, shift, b, cells, grid_u)
    l_change_v = change_integrand(ops, s, sigma_delta, cells.key_y, cells.key_n, cells.key_dom, grid_v)
    # log g and P(delta > 0 | changed, theta_k) from one pass of exponentials over the v-nodes.
    top = l_change_v.max(-1, keepdims=True)
    e = jnp.exp(l_change_v - top)
    total = e.sum(-1)
    l_change = top[..., 0] + jnp.log(total)
    u, v = grid_u[0], grid_v[0]
    sd_v = sigma_delta[:, None, None]
    delta = (shift[:, None] + b * u)[:, :, None] + sd_v * v  # (stratum, node, v-node)
    p_up_node = jnp.sum(e * share_above_zero(delta, sd_v * (v[1] - v[0]))[cells.key_dom], -1) / total  # (key, node)
    # Joint log density of (changed, u) per cell on the theta nodes; r_c and P(up) Rao-Blackwellised.
    l0 = a + jnp.log1p(-pi) + l_same[cells.key]
    l1 = a + jnp.log(pi) + l_change[cells.key]
    L0, L1 = logsumexp(l0, -1), logsumexp(l1, -1)
    r = jax.nn.sigmoid(L1 - L0)
    p_up = jnp.sum(jnp.exp(l1 - L1[:, None]) * p_up_node[cells.key], -1)
    # changed_i, then u_i | changed_i from the same node densities (piecewise linear between nodes).
    k1, k2, k3, k4, k5, k6 = jax.random.split(key, 6)
    n_items = item_cell.shape[0]
    changed = jax.random.uniform(k1, (n_items,)) < r[item_cell]
    f, cdf = _pwlinear_tables(jnp.concatenate([l0, l1], 0))  # rows: (changed, cell)
    rows = item_cell + changed * cells.dom.shape[0]
    zu = _pwlinear_draw(f, cdf, rows, jax.random.uniform(k2, (n_items,)), jax.random.uniform(k3, (n_items,)), u[0], u[1] - u[0])
    d = cells.dom[item_cell]
    theta = mu_theta[d] + sigma_theta[d] * zu
    m_i = shift[d] + b * zu
    # delta_i | theta_i, changed_i = 1 on a fine v grid; the prior when changed_i = 0 (delta_i is not in the likelihood).
    xi = (theta + m_i)[:, None] + sigma_delta[d][:, None] * fine_v
    y2, n2 = cells.y2[item_cell][:, None], cells.n2[item_cell][:, None]
    fd, cdfd = _pwlinear_tables(-0.5 * fine_v**2 + n2 * log_sigmoid(xi) - (n2 - y2) * xi)
    hv = fine_v[1] - fine_v[0]
    zv = _pwlinear_draw(fd, cdfd, jnp.arange(n_items), jax.random.uniform(k4, (n_items,)), jax.random.uniform(k5, (n_items,)), fine_v[0], hv)
    zv = jnp.where(changed, zv, jax.random.normal(k6, (n_items,)))
    return theta, m_i + sigma_delta[d] * zv, changed, r[item_cell], p_up[item_cell]


def item_draws(post, cells: Cells, seed: int, batch: int = 4) -> dict[str, np.ndarray]:
    """Exact conditional item draws for every posterior draw (JAX: ``batch`` draws vectorised,
    spread over the JAX devices).

    Returns ``theta, delta, changed, r, p_up`` with shape (chain, draw, item).

    Examples
    --------
    >>> c = item_draws(dt["posterior"].to_dataset(), cell_stats(data), seed=0)   # doctest: +SKIP
    >>> c["changed"].mean((0, 1))   # posterior share of draws in which each item changed  # doctest: +SKIP
    """
    from bayesrc.config import precision, prepare_jax

    prepare_jax()
    with precision():  # float64 like the sampler, scoped to this call
        return _item_draws(post, cells, seed, batch)


def flat_hyper(post, cells: Cells) -> list[np.ndarray]:
    """The likelihood's hyperparameters per posterior draw, chains flattened: ``mu_theta, sigma_theta,
    shift, sigma_delta`` expanded to the cells' strata (:func:`strata_hyper`), then ``slope`` (0 when
    absent) and ``pi``; each (chain x draw, ...)."""
    n_chain, n_draw = post["pi"].shape
    flat = lambda a: np.asarray(a, float).reshape(n_chain * n_draw, *np.shape(a)[2:])  # noqa: E731
    slope = post["slope"].values if "slope" in post else np.zeros((n_chain, n_draw))
    strata = strata_hyper(cells, *(post[k].values for k in ("mu_theta", "sigma_theta", "shift")), *group_draws(post), post["sigma_delta"].values)
    return [flat(h) for h in (*strata, slope, post["pi"].values)]


def _item_draws(post, cells: Cells, seed: int, batch: int) -> dict[str, np.ndarray]:
    import jax
    import jax.numpy as jnp

    n_chain, n_draw = post["pi"].shape
    n_s = n_chain * n_draw
    hyper = flat_hyper(post, cells)
    cj = Cells(**{k: None if getattr(cells, k) is None else jnp.asarray(getattr(cells, k)) for k in Cells.__dataclass_fields__})
    grids = (
        tuple(map(jnp.asarray, trapezoid_grid(THETA_NODES, THETA_HALF))),
        tuple(map(jnp.asarray, trapezoid_grid(DELTA_NODES, DELTA_HALF))),
        jnp.linspace(-DRAW_DELTA_HALF, DRAW_DELTA_HALF, DRAW_DELTA_NODES),
    )
    item_cell = jnp.asarray(cells.item_cell)
    n_dev = jax.local_device_count()
    pad = (-n_s) % (batch * n_dev)
    shape = lambda h: h.reshape(n_dev, -1, batch, *h.shape[1:])  # noqa: E731  (device, step, batch, ...)
    hyper = tuple(shape(np.concatenate([h, np.repeat(h[-1:], pad, 0)])) for h in hyper)
    keys = shape(np.asarray(jax.random.split(jax.random.PRNGKey(seed), n_s + pad)))

    def run(hyper, keys):
        one = jax.vmap(lambda h, k: _draws_one(h, k, cj, item_cell, grids))
        return jax.lax.map(lambda hk: one(*hk), (hyper, keys))

    out = jax.pmap(run)(hyper, keys)
    names = ("theta", "delta", "changed", "r", "p_up")
    return {k: np.asarray(v).reshape(n_s + pad, -1)[:n_s].reshape(n_chain, n_draw, -1) for k, v in zip(names, out)}


def _finish(dt, cells: Cells, seed: int, slope: bool, prior: dict | None):
    """Item draws, then ``p`` (item, version), ``dp`` and the change quantities in the full model's layout."""
    post = dt["posterior"].to_dataset()
    c = item_draws(post, cells, seed)
    post["theta"] = (("chain", "draw", "item"), c["theta"])
    return store_item_quantities(dt, post, c["theta"], c, slope, prior, collapsed=1)


def pointwise_loglik(post, cells: Cells, batch: int = 64):
    """Per-item log marginal likelihood ``log L(c_i)`` for every posterior draw: (chain, draw, item).

    The collapsed model's likelihood of an item given the hyperparameters (theta, delta and
    changed integrated out, binomial coefficients left out as everywhere), the input of PSIS-LOO
    (:func:`loo`) for comparing change-model variants with each other and with the collapsed
    beta-binomial, whose marginal leaves out the same constants.
    """
    from bayesrc.config import precision, prepare_jax

    prepare_jax()
    with precision():  # float64 like the sampler: in float32 e^(k sigma_delta v) overflows past sigma_delta ~ 3
        return _pointwise_loglik(post, cells, batch)


def _pointwise_loglik(post, cells: Cells, batch: int):
    import jax
    import jax.numpy as jnp

    n_chain, n_draw = post["pi"].shape
    n_s = n_chain * n_draw
    hyper = flat_hyper(post, cells)
    gu = tuple(map(jnp.asarray, trapezoid_grid(THETA_NODES, THETA_HALF)))
    gv = tuple(map(jnp.asarray, trapezoid_grid(DELTA_NODES, DELTA_HALF)))
    # numpy cells: the likelihood groups its keys by trial count when it is traced
    one = jax.jit(jax.vmap(lambda m, s, sh, sdd, b, p: cell_loglik(_ops("jax"), m, s, sh, sdd, b, p, cells, gu, gv)))
    out = np.concatenate([np.asarray(one(*(h[i : i + batch] for h in hyper))) for i in range(0, n_s, batch)])
    return out[:, cells.item_cell].reshape(n_chain, n_draw, -1)


def loo(dt, data: ModelInputs):
    """PSIS-LOO of a collapsed change-model or beta-binomial fit (``arviz_stats.loo``), per item.

    Change model: :func:`pointwise_loglik`; beta-binomial (collapsed): the sum over versions of
    each item's beta-binomial marginal. Returns the ``arviz_stats`` ELPD object.
    """
    import arviz_stats as azs
    import xarray as xr
    from scipy.special import betaln

    post = dt["posterior"].to_dataset()
    if "sigma_delta" in post:
        ll = pointwise_loglik(post, cell_stats(data))
    else:
        mu, kappa = post["mu"].values, post["kappa"].values  # (chain, draw, domain, version)
        a, b = (mu * kappa)[:, :, data.dom, :], ((1 - mu) * kappa)[:, :, data.dom, :]
        ll = (betaln(a + data.y, b + data.n - data.y) - betaln(a, b)).sum(-1)
    dt = dt.copy()
    dt["log_likelihood"] = xr.Dataset({"y": (("chain", "draw", "item"), ll)})
    return azs.loo(dt, var_name="y")
