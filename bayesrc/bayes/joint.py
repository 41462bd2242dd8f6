"""Joint collapsed change model of a family of versions (issue 32), twice: NumPyro and PyMC (nutpie).

``V >= 2`` versions of a model answered the same items; the first is the reference. Model
(item i in domain d, each other version v; logit scale)::

    theta_i    ~ Normal(mu_theta_d, sigma_theta_d)           # item easiness, shared by every version
    shift_vd   ~ Normal(0, 1)    sigma_delta_v ~ InverseGamma(2, 0.6)    pi_v ~ Beta(4, 1)
    changed_iv ~ Bernoulli(pi_v)     delta_iv ~ Normal(shift_vd, sigma_delta_v)
    y_i1 ~ Binomial(n_i1, expit(theta_i))
    y_iv ~ Binomial(n_iv, expit(theta_i + changed_iv delta_iv))

each change with the pair model's priors (:data:`bayesrc.bayes.change.PRIOR`,
:func:`~bayesrc.bayes.change.hyperpriors_numpyro` with ``n_changes``), the changes independent
across versions given ``theta_i``. With an item covariate (the correct option's letter ``g``, as in
the pair model) the strata are (domain, letter) pairs: ``theta_i ~ Normal(mu_theta_d + alpha_g,
sigma_theta_d)`` with ``alpha`` shared by the versions, and each other version's change has its own
``gamma_vg`` (per letter), ``eta_vs`` (per stratum, :func:`~bayesrc.bayes.change.group_effects_numpyro`
with ``n_changes``) and spread ``sigma_delta_vg``; :func:`~bayesrc.bayes.change_grid.strata_hyper`
expands them to strata for both models.

Collapsed as the pair model is (:mod:`bayesrc.bayes.change_collapsed`; the numerics in the docstrings of
:mod:`bayesrc.bayes.change_grid` and :mod:`bayesrc.bayes.change_likelihood`): NUTS samples the hyperparameters
only. Given ``theta`` the versions are independent, so an item's marginal likelihood is **one** integral on
the pair model's logit grid::

    L(c) = sum_j w_s(x_j) Bin(y_1 | x_j) prod_{v >= 2} [(1 - pi_v) Bin(y_v | x_j) + pi_v G_v(x_j; y_v)]

with ``w_s`` the prior weights of the nodes (:func:`~bayesrc.bayes.change_likelihood.prior_weights`)
and ``G_v`` the pair model's Gaussian-kernel convolution
(:func:`~bayesrc.bayes.change_likelihood.weighted_convolutions`), one kernel row per (version,
domain). With ``V = 2`` this is the pair model's :func:`~bayesrc.bayes.change_likelihood.cell_loglik`
(tests/test_joint.py: to 1e-8). Items with the same stratum (domain, or (domain, letter)) and the same ``(n, y)`` in
every version share one cell; all versions' outcomes ``(n, y)`` share one binomial table.

Item draws (:func:`family_item_draws`), for each posterior draw of the hyperparameters: ``theta_i``
from its posterior on the grid (piecewise linear between the nodes, as the pair model draws it);
given ``theta_i`` the versions are independent, so each ``changed_iv`` is a Bernoulli draw with
``r_iv = P(changed_iv | theta_i, y_iv)`` (the node values interpolated linearly), and ``delta_iv`` as
the pair model draws it (:func:`~bayesrc.bayes.change_item_draws.standardised_change_draw`). Then
``p_iv = expit(theta_i + changed_iv delta_iv)`` (``p_i1 = expit(theta_i)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

import numpy as np

from bayesrc.bayes.change import (
    group_draws,
    group_effects_numpyro,
    group_effects_pymc,
    hyperpriors_numpyro,
    hyperpriors_pymc,
    prior_arguments,
    prior_settings,
)
from bayesrc.bayes.change_grid import (
    SAMPLER_BAND_DTYPE,
    StrataCells,
    StrataMap,
    binomial_table,
    bucket,
    convolution_tables,
    item_strata,
    logit_grid,
    outcome_bucket,
    pad_rows,
    strata_hyper,
)
from bayesrc.bayes.change_item_draws import (
    DRAW_DELTA_HALF,
    DRAW_DELTA_NODES,
    _pwlinear_draw,
    _pwlinear_tables,
    standardised_change_draw,
)
from bayesrc.bayes.change_likelihood import _ops, grid_spread, prior_weights, weighted_convolutions
from bayesrc.bayes.compiled import AheadOfTime, kept_compiled
from bayesrc.bayes.draws import ITEM_DRAW_DTYPE
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.samplers import SamplerConfig, progress_bar, run_numpyro, run_pymc
from bayesrc.config import precision, prepare_jax

#: The sampled hyperparameters' dims: ``change`` runs over the non-reference versions.
JOINT_DIMS = {
    "mu_theta": ["domain"],
    "sigma_theta": ["domain"],
    "shift": ["change", "domain"],
    "sigma_delta": ["change"],
    "pi": ["change"],
}
#: ... and with an item covariate (its levels ``group``, the (domain, level) ``stratum``, their interaction
#: ``contrast``s).
COVARIATE_DIMS = {
    "sigma_delta": ["change", "group"],
    "group_level": ["group"],
    "group_shift": ["change", "group"],
    "stratum_shift_sd": ["change"],
    "stratum_shift_z": ["change", "contrast"],
    "stratum_shift": ["change", "stratum"],
}
#: What the convergence gate checks (the items are exact conditional draws given these), and with a covariate
#: (``stratum_shift`` is a product of the gated ``stratum_shift_sd`` and ``_z``, 0 in a stratum without a contrast).
JOINT_GATED = ("mu_theta", "sigma_theta", "shift", "sigma_delta", "pi")
COVARIATE_GATED = ("group_level", "group_shift", "stratum_shift_sd", "stratum_shift_z")


def joint_dims(n_groups: int) -> dict[str, list[str]]:
    """The joint model's dims, with the covariate's when there is one (``n_groups > 1``).

    Examples
    --------
    >>> joint_dims(3)["sigma_delta"], joint_dims(1)["sigma_delta"]
    (['change', 'group'], ['change'])
    """
    return JOINT_DIMS | COVARIATE_DIMS if n_groups > 1 else JOINT_DIMS


def joint_gated(n_groups: int) -> list[str]:
    """What the gate checks of a joint fit with ``n_groups`` covariate levels.

    Examples
    --------
    >>> joint_gated(1)
    ['mu_theta', 'sigma_theta', 'shift', 'sigma_delta', 'pi']
    """
    return list(JOINT_GATED) + list(COVARIATE_GATED) * (n_groups > 1)


DRAW_BATCH = 50  # posterior draws per compiled item-draw call


@dataclass(frozen=True, kw_only=True)
class FamilyCells(StrataCells):
    """Distinct ``(domain, n_1..n_V, y_1..y_V)`` cells, their multiplicities and the item -> cell map.

    Examples
    --------
    >>> d = ModelInputs(items=np.array(["a", "b", "c"]), versions=("v1", "v2", "v3"), domains=("x",),
    ...                 dom=np.zeros(3, int), y=np.array([[3, 4, 5], [3, 4, 5], [5, 5, 5]]), n=np.full((3, 3), 10))
    >>> cells = family_cells(d)
    >>> cells.n_cells, cells.weight.tolist(), cells.item_cell.tolist()
    (2, [2.0, 1.0], [0, 0, 1])
    """

    n: np.ndarray  # (cell, version)
    y: np.ndarray  # (cell, version)

    @property
    def n_versions(self) -> int:
        return int(self.n.shape[1])


def family_cells(data: ModelInputs) -> FamilyCells:
    """The joint model's sufficient statistics: items grouped by domain and every version's ``(n, y)``.

    Examples
    --------
    >>> from bayesrc.bayes.inputs import model_inputs
    >>> from bayesrc.data import simulate_family
    >>> fam = simulate_family(50, 10, versions=3, seed=0)
    >>> cells = family_cells(model_inputs(fam.counts, *fam.versions, covariate=None))
    >>> cells.n.shape[1], int(cells.weight.sum())
    (3, 50)
    """
    stratum, strata = item_strata(data)
    n_ver = data.n_versions
    rows = np.concatenate([stratum[:, None], data.n, data.y], axis=1)
    cells, item_cell, w = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    f = lambda a: a.astype(float)  # noqa: E731
    return FamilyCells(
        dom=cells[:, 0],
        n=f(cells[:, 1 : 1 + n_ver]),
        y=f(cells[:, 1 + n_ver :]),
        weight=f(w),
        item_cell=item_cell.ravel(),
        **strata,
    )


def family_tables(cells: FamilyCells, band_dtype=np.float64) -> dict[str, np.ndarray]:
    """Every data-dependent array of the joint likelihood, cells padded to a multiple of 32.

    ``x`` the logit grid; ``e2`` the binomial table (max-scaled rows) over the distinct ``(n, y)``
    outcomes of all versions, named as the pair model's version-2 table so that
    :func:`~bayesrc.bayes.change_likelihood.weighted_convolutions` reads it (with its
    :func:`~bayesrc.bayes.change_grid.convolution_tables`); per cell: its stratum ``cell_s`` (domain, or
    (domain, letter) with the covariate), its rows of that table per version ``e_cell`` (version, cell, node), the
    sum of the rows' log maxima ``lm_cell``, per non-reference version its row ``cell_key = s T + t`` of the
    (stratum, outcome) convolutions, and its ``weight`` (0 on padding). ``band_dtype`` as
    :func:`~bayesrc.bayes.change_grid.likelihood_tables`' (None: no band table, for the consumers that convolve by FFT).

    Examples
    --------
    >>> d = ModelInputs(items=np.array(["a", "b"]), versions=("v1", "v2", "v3"), domains=("x", "z"),
    ...                 dom=np.array([0, 1]), y=np.array([[3, 4, 5], [5, 5, 5]]), n=np.full((2, 3), 10))
    >>> t = family_tables(family_cells(d))
    >>> # 8 outcome rows (3 padded to 8); cell 2 is (z, 5 of 10): 1 x 8 + 2
    >>> t["e_cell"].shape, t["cell_key"][:, :2].tolist()
    ((3, 32, 101), [[1, 10], [2, 10]])
    """
    x = logit_grid(int(cells.n.max()))
    outcomes, t = np.unique(np.stack([cells.n.ravel(), cells.y.ravel()], 1), axis=0, return_inverse=True)
    t = t.reshape(cells.n.shape)
    # padding only to a few shapes: the cells cost every gradient
    n_t, n_c = outcome_bucket(len(outcomes)), -(-cells.n_cells // 32) * 32
    e, lm = binomial_table(x, outcomes[:, 0], outcomes[:, 1])
    tables = {
        "x": x,
        "e2": pad_rows(e, n_t),
        "cell_s": pad_rows(cells.dom, n_c),
        "e_cell": np.stack([pad_rows(e[t[:, v]], n_c) for v in range(cells.n_versions)]),
        "lm_cell": pad_rows(lm[t].sum(1), n_c),
        "cell_key": pad_rows((cells.dom[:, None] * n_t + t[:, 1:]), n_c).T.copy(),
        "weight": pad_rows(cells.weight, n_c),
    }
    return tables | convolution_tables(tables["e2"], band_dtype)


def node_terms(ops, mu_theta, sigma_theta, shift, spread, pi, tables):
    """Per cell and grid node: the reference term ``w_s(x_j) Bin(y_1 | x_j)`` and, per other version,
    the unchanged and changed terms ``(1 - pi_v) Bin(y_v | x_j)`` and ``pi_v G_v(x_j; y_v)``.

    Per stratum (:func:`~bayesrc.bayes.change_grid.strata_hyper`): ``mu_theta, sigma_theta`` (stratum,),
    ``shift`` and the changes' ``spread`` (change, stratum); ``pi`` (change,). The convolutions of every (version,
    stratum) come out of one call of the pair model's
    :func:`~bayesrc.bayes.change_likelihood.weighted_convolutions`, the rows stacked version-major.
    """
    x, e, e_cell, key = tables["x"], tables["e2"], tables["e_cell"], tables["cell_key"]
    n_s, (n_t, n_j) = mu_theta.shape[0], e.shape
    prior = prior_weights(ops, x, mu_theta, sigma_theta)  # (stratum, node)
    ones = np.ones((1, 2 * n_j - 1))
    # (change x stratum, outcome, node)
    g = weighted_convolutions(ops, tables, None, None, shift.reshape((-1,)), 0.0, spread.reshape((-1,)), ones)[0]
    base = prior[tables["cell_s"]] * e_cell[0]
    same = [(1.0 - pi[v]) * e_cell[v + 1] for v in range(key.shape[0])]
    changed = [pi[v] * g[v * n_s : (v + 1) * n_s].reshape((n_s * n_t, n_j))[key[v]] for v in range(key.shape[0])]
    return base, same, changed


def family_loglik(ops, mu_theta, sigma_theta, shift, spread, pi, tables):
    """``log L(c)`` per (padded) cell (the module docstring), binomial coefficients left out;
    hyperparameters per stratum as :func:`node_terms` takes them.

    Examples
    --------
    >>> d = ModelInputs(items=np.array(["a"]), versions=("v1", "v2", "v3"), domains=("x",), dom=np.array([0]),
    ...                 y=np.array([[3, 4, 5]]), n=np.full((1, 3), 10))
    >>> t = family_tables(family_cells(d))
    >>> ll = family_loglik(_ops("numpy"), np.zeros(1), np.ones(1), np.zeros((2, 1)), np.full((2, 1), 0.5),
    ...                    np.full(2, 0.8), t)
    >>> bool(ll[0] < 0)
    True
    """
    base, same, changed = node_terms(ops, mu_theta, sigma_theta, shift, spread, pi, tables)
    like = base
    for s, c in zip(same, changed):
        like = like * (s + c)
    return ops.xp.log(ops.maximum(like.sum(-1), 1e-300)) + tables["lm_cell"]


@cache
def _jax_family_loglik():
    """The weighted sum of the cells' log-likelihoods as one compiled JAX function (compiled apart
    for the reason :func:`bayesrc.bayes.change_likelihood._jax_loglik` gives)."""
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp

    def total(mu_theta, sigma_theta, shift, spread, pi, tables):
        return jnp.sum(tables["weight"] * family_loglik(_ops("jax"), mu_theta, sigma_theta, shift, spread, pi, tables))

    return jax.jit(total)


def family_coords(data: ModelInputs) -> dict[str, list]:
    """The model's coords: ``item``, ``version``, ``domain`` and ``change`` (the non-reference versions)."""
    return data.coords | {"change": list(data.versions[1:])}


def _numpyro_model(
    tables, prior, *, strata: StrataMap, n_domains: int, n_changes: int, n_groups: int = 1, contrasts=None
):
    import numpyro  # deferred: NumPyro and JAX load in seconds (bayes extra)

    mu_theta, sigma_theta, shift, sigma_delta, _, pi = hyperpriors_numpyro(n_domains, False, prior, n_groups, n_changes)
    alpha, gamma, eta = group_effects_numpyro(n_groups, prior, contrasts, n_changes)
    numpyro.factor(
        "y",
        _jax_family_loglik()(
            *strata_hyper(strata, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta), pi, tables
        ),
    )


def joint_numpyro(
    data: ModelInputs, *, prior: dict | None = None, config: SamplerConfig | None = None, items: bool = True
):
    """Fit the joint change model of ``data``'s versions with NumPyro: NUTS on the hyperparameters,
    exact item draws after (:func:`family_item_draws`; ``items=False``: the hyperparameters only,
    :func:`with_family_item_draws` adds them later). Returns a DataTree.

    Examples
    --------
    >>> from bayesrc.bayes.inputs import model_inputs
    >>> dt = joint_numpyro(model_inputs(fam.counts, *fam.versions, covariate=None))   # doctest: +SKIP
    >>> dt["posterior"]["p"].mean(("chain", "draw", "item"))                         # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    model, args = joint_model_numpyro(data, prior)
    dt = run_numpyro(model, args, cfg, family_coords(data), joint_dims(data.n_groups))
    return with_family_item_draws(dt, data, cfg, prior=prior) if items else dt


def joint_model_numpyro(data: ModelInputs, prior: dict | None = None) -> tuple[Callable, dict]:
    """The NumPyro twin as a model function and its data arguments (the sampler's tables): what
    :func:`joint_numpyro` samples, e.g. for ``numpyro.infer.util.potential_energy``.

    Examples
    --------
    >>> from numpyro.infer.util import log_density
    >>> model, args = joint_model_numpyro(model_inputs(fam.counts, *fam.versions, covariate=None))  # doctest: +SKIP
    >>> log_density(model, (), args, params)  # doctest: +SKIP
    """
    cells = family_cells(data)
    model = partial(
        _numpyro_model,
        strata=cells.strata,
        n_domains=data.n_domains,
        n_changes=data.n_versions - 1,
        n_groups=data.n_groups,
        contrasts=data.stratum_contrasts(),
    )
    return model, {"tables": family_tables(cells, None), "prior": prior_arguments(prior)}  # by FFT: no band


def joint_pymc(
    data: ModelInputs, *, prior: dict | None = None, config: SamplerConfig | None = None, items: bool = True
):
    """The same joint model with PyMC (nutpie); same priors, names and dims as the NumPyro twin
    (``items`` as there).

    Examples
    --------
    >>> dt = joint_pymc(model_inputs(fam.counts, *fam.versions, covariate=None))   # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    dt = run_pymc(joint_model_pymc(data, prior), cfg)
    return with_family_item_draws(dt, data, cfg, prior=prior) if items else dt


def joint_model_pymc(data: ModelInputs, prior: dict | None = None):
    """The PyMC twin as a built ``pymc.Model``: what :func:`joint_pymc` samples.

    Examples
    --------
    >>> model = joint_model_pymc(model_inputs(fam.counts, *fam.versions, covariate=None))  # doctest: +SKIP
    >>> model.compile_logp()(model.initial_point())  # doctest: +SKIP
    """
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)
    import pytensor.tensor as pt

    cells = family_cells(data)
    tables = family_tables(cells, SAMPLER_BAND_DTYPE)
    with pm.Model(coords=family_coords(data)) as model:
        mu_theta, sigma_theta, shift, sigma_delta, _, pi = hyperpriors_pymc(
            False, prior, data.n_groups, per_change=True
        )
        alpha, gamma, eta = group_effects_pymc(data.n_groups, prior, data.stratum_contrasts(), per_change=True)
        ll = family_loglik(
            _ops("pytensor"),
            *strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta),
            pi,
            tables,
        )
        pm.Potential("y", pt.sum(tables["weight"] * ll))
    return model


# ---------------------------------------------------------------- exact conditional item draws


def _interpolate(values, k, frac, item_cell):
    """Node values (cell, node) at each item's drawn position: node ``k`` plus ``frac`` of a step."""
    return (1.0 - frac) * values[item_cell, k] + frac * values[item_cell, k + 1]


def _family_draws_one(hyper, key, tables, item_cell, cell_dom, y, n, fine_v):
    """Item quantities for one hyperparameter draw (JAX; see :func:`family_item_draws`):
    ``theta`` (item,), ``p`` (item, version), ``changed``, ``r``, ``delta`` (item, change)."""
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)
    import jax.numpy as jnp

    mu_theta, sigma_theta, shift, spread_s, pi = hyper  # per stratum (strata_hyper)
    ops = _ops("jax")
    base, same, changed = node_terms(ops, mu_theta, sigma_theta, shift, spread_s, pi, tables)
    terms = [s + c for s, c in zip(same, changed)]
    w = base
    for term in terms:
        w = w * term
    x = tables["x"]
    h = x[1] - x[0]
    n_items, n_change = item_cell.shape[0], len(terms)
    keys = jax.random.split(key, 2 + 4 * n_change)
    f, cdf = _pwlinear_tables(w)
    theta = _pwlinear_draw(
        f, cdf, item_cell, jax.random.uniform(keys[0], (n_items,)), jax.random.uniform(keys[1], (n_items,)), x[0], h
    )
    pos = (theta - x[0]) / h
    k = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, x.shape[0] - 2)
    frac = jnp.clip(pos - k, 0.0, 1.0)
    d = cell_dom[item_cell]
    out = {"r": [], "changed": [], "delta": [], "p": [jax.nn.sigmoid(theta)]}
    for v, (term, ch) in enumerate(zip(terms, changed)):
        kv = keys[2 + 4 * v : 6 + 4 * v]
        r = _interpolate(ch / jnp.maximum(term, 1e-300), k, frac, item_cell)  # P(changed | theta, y_v)
        changed_v = jax.random.uniform(kv[0], (n_items,)) < r
        m, spread = shift[v][d], grid_spread(ops, spread_s[v][d], x)
        z = standardised_change_draw(theta + m, spread, y[:, v + 1], n[:, v + 1], changed_v, fine_v, kv[1:])
        delta = m + spread * z
        out["r"].append(r), out["changed"].append(changed_v), out["delta"].append(delta)
        out["p"].append(jax.nn.sigmoid(theta + changed_v * delta))
    dtype = ITEM_DRAW_DTYPE
    stack = lambda a, t=dtype: jnp.stack(a, -1).astype(t)  # noqa: E731
    return theta.astype(dtype), stack(out["p"]), stack(out["changed"], jnp.int8), stack(out["r"]), stack(out["delta"])


def family_item_draws(post, cells: FamilyCells, seed: int, progress: bool | None = None) -> dict[str, np.ndarray]:
    """Exact conditional item draws for every posterior draw of the hyperparameters (JAX, in
    compiled batches of :data:`DRAW_BATCH` draws).

    Returns ``theta`` (chain, draw, item), ``p`` (chain, draw, item, version) and ``changed``,
    ``r = P(changed | theta, data)``, ``delta`` (chain, draw, item, change), in
    :data:`~bayesrc.bayes.draws.ITEM_DRAW_DTYPE` (``changed``: int8).

    Examples
    --------
    >>> c = family_item_draws(dt["posterior"].to_dataset(), family_cells(data), seed=0)   # doctest: +SKIP
    >>> c["changed"].mean((0, 1))   # P(changed) per item and version                     # doctest: +SKIP
    """
    prepare_jax()
    with precision():  # float64 like the sampler, scoped to this call
        return _family_item_draws(post, cells, seed, progress)


def _family_item_draws(post, cells: FamilyCells, seed: int, progress: bool | None) -> dict[str, np.ndarray]:
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    n_chain, n_draw = post["pi"].shape[:2]
    n_s = n_chain * n_draw
    flat = lambda a: np.asarray(a, float).reshape(n_s, *np.shape(a)[2:])  # noqa: E731
    names = ("mu_theta", "sigma_theta", "shift", "sigma_delta")
    mu, sd, shift, sigma_delta = (flat(post[k].values) for k in names)
    alpha, gamma, eta = (flat(g) for g in group_draws(post))
    hyper = [
        *map(np.asarray, strata_hyper(cells, mu, sd, shift, alpha, gamma, eta, sigma_delta)),
        flat(post["pi"].values),
    ]
    pad = (-n_s) % DRAW_BATCH
    hyper = [np.concatenate([h, np.repeat(h[-1:], pad, 0)]) for h in hyper]
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(seed), n_s + pad))
    # the data as arguments, items padded to a bucket (as cell 0): one compiled draw per bucket, not per dataset
    item_cell = pad_rows(cells.item_cell, bucket(cells.item_cell.size))
    data = {
        "tables": family_tables(cells, None),  # convolved by FFT: no band table
        "item_cell": item_cell,
        "cell_dom": cells.dom,
        "y": cells.y[item_cell],
        "n": cells.n[item_cell],
    }
    data = jax.device_put(data)
    batch = kept_compiled(jax, partial(_compiled_family_draws, jax), ("family item draws",))
    parts = []
    with progress_bar(progress, n_s, desc="item draws") as bar:
        for i in range(0, n_s + pad, DRAW_BATCH):
            parts.append(
                [
                    np.asarray(a)
                    for a in batch(tuple(h[i : i + DRAW_BATCH] for h in hyper), keys[i : i + DRAW_BATCH], data)
                ]
            )
            bar.update(min(DRAW_BATCH, n_s - i))
    out = [np.concatenate(a)[:n_s, : cells.item_cell.size] for a in zip(*parts)]
    return {k: v.reshape(n_chain, n_draw, *v.shape[1:]) for k, v in zip(("theta", "p", "changed", "r", "delta"), out)}


def _compiled_family_draws(jax) -> AheadOfTime:
    """A batch of the family's item draws, compiled for every dataset of the same buckets (the data are an argument)
    and kept across fits (:mod:`bayesrc.bayes.compiled`)."""
    import jax.numpy as jnp  # deferred: JAX loads in ~1.5 s (bayes extra)

    def one(h, k, d):
        return _family_draws_one(h, k, **d, fine_v=jnp.linspace(-DRAW_DELTA_HALF, DRAW_DELTA_HALF, DRAW_DELTA_NODES))

    return AheadOfTime(jax, jax.jit(jax.vmap(one, in_axes=(0, 0, None))))


def with_family_item_draws(dt, data: ModelInputs, cfg: SamplerConfig, *, prior: dict | None = None):
    """A hyperparameter posterior of the joint model with its item draws added (seeded by ``cfg.seed``):
    ``theta``, ``p`` (item, version), ``changed``, ``r``, ``delta`` (item, change). As for a pair,
    :func:`bayesrc.bayes.fit` adds them once, after the gate.

    Examples
    --------
    >>> dt = with_family_item_draws(joint_numpyro(data, items=False), data, SamplerConfig())   # doctest: +SKIP
    """
    post = dt["posterior"].to_dataset()
    c = family_item_draws(post, family_cells(data), cfg.seed, progress=cfg.progress)
    post["theta"] = (("chain", "draw", "item"), c["theta"])
    post["p"] = (("chain", "draw", "item", "version"), c["p"])
    for k in ("changed", "r", "delta"):
        post[k] = (("chain", "draw", "item", "change"), c[k])
    dt["posterior"] = post
    dt.attrs.update(model="change", joint=1, collapsed=1, prior=json.dumps(prior_settings(prior)))
    return dt
