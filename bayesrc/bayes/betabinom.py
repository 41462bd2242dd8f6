"""Hierarchical beta-binomial per version and domain (SPEC section 3), twice: NumPyro and PyMC.

Model (item i in domain d, version v)::

    logit(mu_dv)  ~ Normal(0, 1.5)            # domain-version mean accuracy
    log(kappa_dv) ~ Normal(1, 1.5)            # concentration (kappa < 1: U-shaped, floor/ceiling items)
    p_iv          ~ Beta(mu_dv kappa_dv, (1 - mu_dv) kappa_dv)
    y_iv          ~ Binomial(n_iv, p_iv)

Two samplers of the same posterior:

* **full**: NUTS over the hyperparameters and every ``p_iv``;
* **collapsed**: NUTS over the hyperparameters only, with the beta-binomial marginal
  likelihood ``y_iv ~ BetaBinomial(n_iv, a_dv, b_dv)``, then for each draw the exact
  conditional ``p_iv | y, a, b ~ Beta(a + y, b + n - y)`` (conjugacy). Exact, and far
  cheaper: 4 D parameters instead of 4 D + 2 I.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from bayesrc.bayes.change_grid import bucket, pad_rows
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.samplers import SamplerConfig, run_numpyro, run_pymc

PRIOR = {"logit_mu_sd": 1.5, "log_kappa_mean": 1.0, "log_kappa_sd": 1.5}
HYPER = ("logit_mu", "log_kappa", "mu", "kappa")
DIMS = {
    "logit_mu": ["domain", "version"],
    "log_kappa": ["domain", "version"],
    "mu": ["domain", "version"],
    "kappa": ["domain", "version"],
    "p": ["item", "version"],
}


def sufficient_stats(data: ModelInputs) -> tuple[np.ndarray, ...]:
    """Distinct (domain, version, n, y) cells and how many items fall in each.

    The collapsed likelihood depends on the data only through these counts, so it is a
    weighted sum over at most ``D x 2 x (K + 1)`` beta-binomial terms whatever the item count.
    The binomial coefficient is constant in the parameters and left out.

    Examples
    --------
    >>> from bayesrc.bayes import model_inputs
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> data = model_inputs(item_counts(sim.trials_v1, sim.trials_v2))
    >>> cells = sufficient_stats(data)
    >>> int(cells[-1].sum()) == 2 * data.n_items  # every (item, version) counted once
    True
    """
    dd = np.repeat(data.dom, 2)
    vv = np.tile([0, 1], data.n_items)
    rows = np.stack([dd, vv, data.n.ravel(), data.y.ravel()], axis=1)
    cells, w = np.unique(rows, axis=0, return_counts=True)
    return cells[:, 0], cells[:, 1], cells[:, 2].astype(float), cells[:, 3].astype(float), w.astype(float)


def padded_cells(data: ModelInputs) -> tuple[np.ndarray, ...]:
    """:func:`sufficient_stats` padded to a shape bucket (:func:`~bayesrc.bayes.change_grid.bucket`) with cells of
    weight 0 (domain 0, version 0, ``n = y = 0``: a term of exactly 0), so that the compiled sampler is kept across
    datasets (:mod:`bayesrc.bayes.compiled`): 38 to 85 distinct cells in the suite's pairs each compiled their own.

    Examples
    --------
    >>> from bayesrc.bayes import model_inputs
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> sim = simulate_pair(60, 10, seed=1)
    >>> cells = padded_cells(model_inputs(item_counts(sim.trials_v1, sim.trials_v2)))
    >>> len(cells[-1]), int(cells[-1].sum())
    (64, 120)
    """
    cells = sufficient_stats(data)
    size = bucket(len(cells[0]))
    return tuple(pad_rows(c, size) for c in cells)


def hyperpriors_numpyro(n_domains: int):
    """The beta-binomial's hyperpriors, NumPyro: ``(mu, kappa)`` per (domain, version); shared by
    the model and its prior draws (:func:`bayesrc.bayes.prior_predictive.prior_draws`)."""
    import jax.numpy as jnp  # deferred: NumPyro and JAX load in seconds (bayes extra)
    import numpyro
    import numpyro.distributions as dist

    logit_mu = numpyro.sample("logit_mu", dist.Normal(0.0, PRIOR["logit_mu_sd"]).expand([n_domains, 2]).to_event(2))
    log_kappa = numpyro.sample(
        "log_kappa", dist.Normal(PRIOR["log_kappa_mean"], PRIOR["log_kappa_sd"]).expand([n_domains, 2]).to_event(2)
    )
    return numpyro.deterministic("mu", jax_expit(logit_mu)), numpyro.deterministic("kappa", jnp.exp(log_kappa))


def _numpyro_model(y, n, dom, n_domains: int, collapsed: bool, suff=None):
    import jax.numpy as jnp  # deferred: NumPyro and JAX load in seconds (bayes extra)
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import betaln

    mu, kappa = hyperpriors_numpyro(n_domains)
    if collapsed:
        # Sufficient statistics: items sharing (domain, version, n, y) share one term.
        dd, vv, nn, yy, w = suff
        aa, bb = (mu * kappa)[dd, vv], ((1.0 - mu) * kappa)[dd, vv]
        numpyro.factor("y", jnp.sum(w * (betaln(aa + yy, bb + nn - yy) - betaln(aa, bb))))
    else:
        a, b = (mu * kappa)[dom], ((1.0 - mu) * kappa)[dom]
        p = numpyro.sample("p", dist.Beta(a, b).to_event(2))
        numpyro.sample("y", dist.Binomial(total_count=n, probs=p).to_event(2), obs=y)


def jax_expit(x):
    import jax  # deferred: JAX loads in ~1.5 s (bayes extra)

    return jax.nn.sigmoid(x)


def betabinom_numpyro(data: ModelInputs, *, collapsed: bool = True, config: SamplerConfig | None = None):
    """Fit the hierarchical beta-binomial with NumPyro; ``p`` (item, version) is always in the posterior.

    Examples
    --------
    >>> dt = betabinom_numpyro(model_inputs(counts), config=SamplerConfig(chains=2, draws=500))  # doctest: +SKIP
    >>> dt["posterior"]["p"].dims  # doctest: +SKIP
    ('chain', 'draw', 'item', 'version')
    """
    cfg = config or SamplerConfig()
    model = partial(_numpyro_model, n_domains=data.n_domains, collapsed=collapsed)
    if collapsed:  # the cells alone, in a shape bucket: data of the same domains run one compiled sampler
        arrays = dict(y=None, n=None, dom=None, suff=padded_cells(data))
    else:
        arrays = dict(y=data.y, n=data.n, dom=data.dom, suff=None)
    dims = DIMS if collapsed else {**DIMS, "y": ["item", "version"]}
    dt = run_numpyro(model, arrays, cfg, data.coords, dims)
    return _finish(dt, data, collapsed, cfg.seed)


def betabinom_pymc(data: ModelInputs, *, collapsed: bool = True, config: SamplerConfig | None = None):
    """Fit the same model with PyMC (nutpie); same priors, names and dims as the NumPyro twin.

    Examples
    --------
    >>> dt = betabinom_pymc(model_inputs(counts), config=SamplerConfig(chains=2, draws=500))  # doctest: +SKIP
    """
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)
    import pytensor.tensor as pt

    cfg = config or SamplerConfig()
    with pm.Model(coords=data.coords) as model:
        logit_mu = pm.Normal("logit_mu", 0.0, PRIOR["logit_mu_sd"], dims=("domain", "version"))
        log_kappa = pm.Normal("log_kappa", PRIOR["log_kappa_mean"], PRIOR["log_kappa_sd"], dims=("domain", "version"))
        mu = pm.Deterministic("mu", pm.math.invlogit(logit_mu), dims=("domain", "version"))
        kappa = pm.Deterministic("kappa", pm.math.exp(log_kappa), dims=("domain", "version"))
        if collapsed:
            dd, vv, nn, yy, w = sufficient_stats(data)
            aa, bb = (mu * kappa)[dd, vv], ((1.0 - mu) * kappa)[dd, vv]
            pm.Potential("y", pt.sum(w * (pt.special.betaln(aa + yy, bb + nn - yy) - pt.special.betaln(aa, bb))))
        else:
            a, b = (mu * kappa)[data.dom], ((1.0 - mu) * kappa)[data.dom]
            p = pm.Beta("p", alpha=a, beta=b, dims=("item", "version"))
            pm.Binomial("y", n=data.n, p=p, observed=data.y, dims=("item", "version"))
    dt = run_pymc(model, cfg)
    return _finish(dt, data, collapsed, cfg.seed)


def conjugate_p(mu: np.ndarray, kappa: np.ndarray, data: ModelInputs, rng: np.random.Generator) -> np.ndarray:
    """Exact conditional draws ``p_iv ~ Beta(a + y, b + n - y)`` for each hyperparameter draw.

    ``mu, kappa``: (chain, draw, domain, version) -> returns (chain, draw, item, version).
    Drawn per (domain, version) block: gathering ``a, b`` to every item first builds four
    (chain, draw, item, version) temporaries and took 2.7x as long at 2,000 items.

    Examples
    --------
    >>> p = conjugate_p(mu, kappa, data, np.random.default_rng(0))  # doctest: +SKIP
    >>> p.shape  # (chain, draw, item, version)  # doctest: +SKIP
    """
    a, b = mu * kappa, (1.0 - mu) * kappa
    out = np.empty((*mu.shape[:2], data.n_items, 2))
    for d in range(mu.shape[2]):
        idx = np.flatnonzero(data.dom == d)
        for v in range(2):
            y, n = data.y[idx, v], data.n[idx, v]
            out[:, :, idx, v] = rng.beta(a[:, :, d, v, None] + y, b[:, :, d, v, None] + (n - y))
    return out


def _finish(dt, data: ModelInputs, collapsed: bool, seed: int):
    """Add the conjugate ``p`` draws (collapsed) to the posterior (:func:`~bayesrc.bayes.draws.item_block` forms
    ``dp``)."""
    post = dt["posterior"].to_dataset()
    if collapsed:
        rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
        p = conjugate_p(post["mu"].values, post["kappa"].values, data, rng)
        post["p"] = (("chain", "draw", "item", "version"), p)
    dt["posterior"] = post
    dt.attrs.update(model="betabinom", collapsed=int(collapsed))
    return dt
