"""Exact conditional item draws of the collapsed change model (:mod:`bayesrc.bayes.change_collapsed`), after
NUTS has sampled its hyperparameters.

Item draws (:func:`item_draws`), for each posterior draw of the hyperparameters and each
cell, on the same grid as the likelihood (:mod:`bayesrc.bayes.change_grid`): ``r_c = P(changed | data)``
and ``P(delta > 0 | changed, data)`` (Rao-Blackwellised); then per item ``changed_i ~ Bernoulli(r_c)``,
``theta_i | changed_i, data`` by inverse CDF of the piecewise-linear density through the grid's node values,
and ``delta_i | theta_i, changed_i, data`` on 61 standardised nodes on [-6, 6] (the prior
``Normal(m, sigma_delta)`` when ``changed_i = 0``: then ``delta_i`` does not enter the
likelihood). Exact up to grid resolution: P(changed) matches a 2,001 x 1,201-node reference
to 1e-5 and the draws pass KS tests against its marginals (tests/test_bayes_units.py).
:func:`with_item_draws` adds them to a hyperparameter posterior in the full model's layout.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from bayesrc.bayes.change import share_above_zero, store_item_quantities
from bayesrc.bayes.change_grid import Cells, bucket, cell_stats, likelihood_tables, pad_rows
from bayesrc.bayes.change_likelihood import (
    _ops,
    flat_hyper,
    grid_spread,
    node_offsets,
    prior_weights,
    weighted_convolutions,
)
from bayesrc.bayes.compiled import AheadOfTime, kept_compiled
from bayesrc.bayes.draws import ITEM_DRAW_DTYPE
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.samplers import SamplerConfig, progress_bar
from bayesrc.config import precision, prepare_jax

ITEM_DRAW_STEPS_PER_CALL = 25  # item draws: vectorised steps per compiled call (the progress bar's step)
# item draws: posterior draws vectorised per step, up to 4, while draws x items stay below this
ITEM_DRAW_BATCH_ENTRIES = 12_000
# delta_i | theta_i: a piecewise-linear density through 61 nodes (0.2 SD apart)
DRAW_DELTA_NODES, DRAW_DELTA_HALF = 61, 6.0


def _pwlinear_tables(f):
    """Node values (max-scaled) and the normalised CDF over intervals of each row's piecewise-linear
    density through the non-negative node values ``f`` (trapezoid interval masses ``(f_k + f_k+1) / 2``)."""
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    f = f / jnp.maximum(f.max(-1, keepdims=True), 1e-300)
    cdf = jnp.cumsum(0.5 * (f[..., 1:] + f[..., :-1]), -1)
    return f, cdf / jnp.maximum(cdf[..., -1:], 1e-300)


def _pwlinear_draw(f, cdf, rows, u1, u2, x0: float, h: float):
    """One draw per entry of ``rows`` from row ``rows[i]`` of the piecewise-linear density.

    Interval by inverse CDF (one ``searchsorted`` over all rows: row ``r``'s CDF shifted to
    ``[r, r + 1]``); within interval ``k`` the offset ``t`` solves
    ``f_k t + (f_k+1 - f_k) t^2 / 2 = u2 (f_k + f_k+1) / 2``. Returns ``x0 + (k + t) h``.
    """
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

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


def _cell_posteriors(hyper, data):
    """Per cell and grid node, the joint posterior weights of (unchanged, theta_j) and (changed, theta_j),
    and per cell ``P(delta > 0 | changed, data)`` (JAX, one hyperparameter draw; ``data``: :func:`draw_data`)."""
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyper
    ops = _ops("jax")
    x = data["x"]
    prior = prior_weights(ops, x, mu_theta, sigma_theta)
    # per node offset k - j: the change x_k - x_j above 0
    up = share_above_zero(node_offsets(x), x[1] - x[0])
    g, g_up = weighted_convolutions(
        ops, data, mu_theta, sigma_theta, shift, b, sigma_delta, jnp.stack([jnp.ones_like(up), up])
    )
    e2 = data["e2"]
    s, t, u = data["cell_s"], data["cell_t"], data["cell_u"]
    base = prior[s] * data["e1"][u]  # (cell, node)
    w0 = base * (1.0 - pi) * e2[t]
    w1 = base * pi * g[s, t]
    p_up = (base * g_up[s, t]).sum(-1) / jnp.maximum((base * g[s, t]).sum(-1), 1e-300)
    return w0, w1, p_up


def _draws_one(hyper, key, data: dict, fine_v):
    """Item quantities for one hyperparameter draw (JAX; ``data``: :func:`draw_data`; see :func:`item_draws`)."""
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyper
    w0, w1, p_up = _cell_posteriors(hyper, data)
    tot0, tot1 = w0.sum(-1), w1.sum(-1)
    r = tot1 / jnp.maximum(tot0 + tot1, 1e-300)
    item_cell = data["item_cell"]
    n_items = item_cell.shape[0]
    k1, k2, k3, k4, k5, k6 = jax.random.split(key, 6)
    changed = jax.random.uniform(k1, (n_items,)) < r[item_cell]
    # theta_i | changed_i from the node weights (piecewise linear between nodes).
    f, cdf = _pwlinear_tables(jnp.concatenate([w0, w1], 0))  # rows: (changed, cell)
    rows = item_cell + changed * w0.shape[0]
    x = data["x"]
    theta = _pwlinear_draw(
        f, cdf, rows, jax.random.uniform(k2, (n_items,)), jax.random.uniform(k3, (n_items,)), x[0], x[1] - x[0]
    )
    d = data["cell_s"][item_cell]
    m_i = shift[d] + b * (theta - mu_theta[d]) / sigma_theta[d]
    # delta_i | theta_i, changed_i = 1 on a fine standardised grid; the prior when changed_i = 0
    # (delta_i is not in the likelihood).
    spread = grid_spread(_ops("jax"), sigma_delta, x)[d]
    zv = standardised_change_draw(theta + m_i, spread, data["item_y2"], data["item_n2"], changed, fine_v, (k4, k5, k6))
    # stored in single precision (computed in double): half the memory, and the transfer, at 12,000 items
    f = ITEM_DRAW_DTYPE
    # r, p_up per cell
    return theta.astype(f), (m_i + spread * zv).astype(f), changed.astype(jnp.int8), r.astype(f), p_up.astype(f)


def draw_data(cells: Cells) -> dict[str, np.ndarray]:
    """The item draws' data: :func:`~bayesrc.bayes.change_grid.likelihood_tables` (each cell's stratum
    ``cell_s`` among them) and per item (padded to :func:`~bayesrc.bayes.change_grid.bucket` items, as
    cell 0) its cell and version-2 counts.

    Passed to the compiled draw as arguments, not baked into it as constants: one compiled draw
    serves every dataset of the same buckets, in later processes too (JAX's persistent cache).

    Examples
    --------
    >>> from bayesrc.bayes.inputs import ModelInputs
    >>> d = ModelInputs(items=("a", "b", "c"), versions=("v1", "v2"), domains=("x",), dom=np.zeros(3, int),
    ...                 y=np.array([[3, 4], [3, 4], [5, 5]]), n=np.full((3, 2), 10))
    >>> data = draw_data(cell_stats(d))
    >>> data["item_cell"].shape, data["cell_s"].shape == data["weight"].shape, data["item_y2"][:3].tolist()
    ((64,), True, [4.0, 4.0, 5.0])
    """
    tables = likelihood_tables(cells, None, pairs=False)  # convolved by FFT: no band table
    item_cell = pad_rows(cells.item_cell, bucket(cells.item_cell.size))
    return {
        **tables,
        "item_cell": item_cell,
        "item_y2": cells.y2[item_cell],
        "item_n2": cells.n2[item_cell],
    }


def standardised_change_draw(centre, spread, y, n, changed, fine_v, keys):
    """One draw per item of ``z = (delta_i - m_i) / spread_i`` given its easiness (JAX).

    Changed items: from ``Normal(0, 1) Bin(y_i | n_i, expit(centre_i + spread_i z))``, a piecewise-linear
    density through the nodes ``fine_v``; unchanged ones from the prior ``Normal(0, 1)`` (their change
    does not enter the likelihood). ``centre = theta_i + m_i``; ``keys``: three JAX keys.
    """
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp
    from jax.nn import log_sigmoid

    n_items = centre.shape[0]
    xi = centre[:, None] + spread[:, None] * fine_v
    y, n = y[:, None], n[:, None]
    fd, cdfd = _pwlinear_tables(jnp.exp(_max_shift(-0.5 * fine_v**2 + n * log_sigmoid(xi) - (n - y) * xi)))
    hv = fine_v[1] - fine_v[0]
    zv = _pwlinear_draw(
        fd,
        cdfd,
        jnp.arange(n_items),
        jax.random.uniform(keys[0], (n_items,)),
        jax.random.uniform(keys[1], (n_items,)),
        fine_v[0],
        hv,
    )
    return jnp.where(changed, zv, jax.random.normal(keys[2], (n_items,)))


def _max_shift(logf):
    """``logf`` minus each row's maximum (so that its exponential has maximum 1)."""
    return logf - logf.max(-1, keepdims=True)


def item_draws(
    post, cells: Cells, seed: int, batch: int | None = None, progress: bool | None = None
) -> dict[str, np.ndarray]:
    """Exact conditional item draws for every posterior draw (JAX: ``batch`` draws vectorised,
    spread over the JAX devices, in calls of :data:`ITEM_DRAW_STEPS_PER_CALL` steps a progress
    bar follows; ``progress`` as :class:`SamplerConfig`'s). Each draw has its own random key, so
    ``batch`` (default: up to 4, fewer above :data:`ITEM_DRAW_BATCH_ENTRIES` / 4 items, where
    the per-item temporaries of a vectorised step would cost more memory than they save time)
    does not change the draws.

    Returns ``theta, delta, changed`` with shape (chain, draw, item) and ``r, p_up`` with shape
    (chain, draw, cell), in :data:`~bayesrc.bayes.draws.ITEM_DRAW_DTYPE` (``changed``: int8).

    Examples
    --------
    >>> c = item_draws(dt["posterior"].to_dataset(), cell_stats(data), seed=0)   # doctest: +SKIP
    >>> c["changed"].mean((0, 1))   # posterior share of draws in which each item changed  # doctest: +SKIP
    """
    prepare_jax()
    batch = batch or int(np.clip(ITEM_DRAW_BATCH_ENTRIES // max(cells.item_cell.size, 1), 1, 4))
    with precision():  # float64 like the sampler, scoped to this call
        return _item_draws(post, cells, seed, batch, progress)


def _item_draws(post, cells: Cells, seed: int, batch: int, progress: bool | None) -> dict[str, np.ndarray]:
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    n_chain, n_draw = post["pi"].shape
    n_s = n_chain * n_draw
    hyper = flat_hyper(post, cells)
    has_slope = bool(np.any(hyper[4] != 0.0))
    data = jax.device_put(draw_data(cells))  # not jnp.asarray: an eager copy compiles per shape after a release
    n_dev = jax.local_device_count()
    steps = -(-n_s // (batch * n_dev))
    n_calls = -(-steps // ITEM_DRAW_STEPS_PER_CALL)
    chunk = -(-steps // n_calls)  # steps per compiled call: every call the same shape
    pad = n_dev * n_calls * chunk * batch - n_s
    shape = lambda h: h.reshape(n_dev, -1, batch, *h.shape[1:])  # noqa: E731  (device, step, batch, ...)
    hyper = tuple(shape(np.concatenate([h, np.repeat(h[-1:], pad, 0)])) for h in hyper)
    keys = shape(np.asarray(jax.random.split(jax.random.PRNGKey(seed), n_s + pad)))
    run_all, out = kept_compiled(jax, partial(_compiled_draws, jax, has_slope), ("item draws", has_slope)), None
    with progress_bar(progress, n_s, desc="item draws") as bar:
        for i in range(0, n_calls * chunk, chunk):
            got = run_all(*(jax.tree.map(lambda a: a[:, i : i + chunk], t) for t in (hyper, keys)), data)
            if out is None:  # filled in place: a list of parts and their concatenation held the draws twice
                out = [np.empty((n_dev, n_calls * chunk, *v.shape[2:]), v.dtype) for v in got]
            for whole, part in zip(out, got):
                whole[:, i : i + chunk] = part
            bar.update(max(0, min(chunk * batch * n_dev, n_s - i * batch * n_dev)))
    names = ("theta", "delta", "changed", "r", "p_up")  # each (device, step, batch, item or cell), padded
    real = dict.fromkeys(names[:3], cells.item_cell.size) | dict.fromkeys(names[3:], cells.n_cells)
    return {k: v.reshape(n_s + pad, -1)[:n_s, : real[k]].reshape(n_chain, n_draw, -1) for k, v in zip(names, out)}


def _compiled_draws(jax, has_slope: bool) -> AheadOfTime:
    """The item draws of a (device, step, batch) block of hyperparameter draws and keys, compiled for every dataset
    (the data are an argument, the same on every device) and kept across fits (:mod:`bayesrc.bayes.compiled`)."""
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    def run(hyper, keys, data):
        fine_v = jnp.linspace(-DRAW_DELTA_HALF, DRAW_DELTA_HALF, DRAW_DELTA_NODES)

        def one_draw(h, k):
            h = h if has_slope else (*h[:4], 0.0, h[5])  # a float 0.0 slope: the Toeplitz kernel
            return _draws_one(h, k, data, fine_v)

        return jax.lax.map(lambda hk: jax.vmap(one_draw)(*hk), (hyper, keys))

    return AheadOfTime(jax, jax.pmap(run, in_axes=(0, 0, None)))


def with_item_draws(dt, data: ModelInputs, cfg: SamplerConfig, *, slope: bool = False, prior: dict | None = None):
    """A hyperparameter posterior of the collapsed change model with its item draws added (:func:`item_draws`,
    seeded by ``cfg.seed``) in the full model's layout (:func:`bayesrc.bayes.change.store_item_quantities`).

    :func:`bayesrc.bayes.fit` samples without them and adds them once the gate has passed (or the last
    attempt failed): at 12,000 items the draws take as long as the sampling.

    Examples
    --------
    >>> dt = change_collapsed_numpyro(data, items=False)           # doctest: +SKIP
    >>> dt = with_item_draws(dt, data, SamplerConfig())            # doctest: +SKIP
    >>> item_block(dt["posterior"])["dp"].dims                     # doctest: +SKIP
    ('chain', 'draw', 'item')
    """
    post = dt["posterior"].to_dataset()
    cells = cell_stats(data)
    c = item_draws(post, cells, cfg.seed, progress=cfg.progress)
    post["theta"] = (("chain", "draw", "item"), c["theta"])
    return store_item_quantities(dt, post, c, cells.item_cell, slope, prior, collapsed=1)
