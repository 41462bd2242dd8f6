"""Collapsed paired change model (SPEC section 3), twice: NumPyro and PyMC (nutpie).

Same model and priors as :mod:`bayesrc.bayes.change` (read its docstring), sampled the way
the collapsed beta-binomial is: NUTS on the hyperparameters only, with every item's
``theta_i``, ``delta_i`` and ``changed_i`` integrated out, then exact conditional draws of
the item quantities. Given the hyperparameters items are independent, and an item's data enter
only through its cell ``c = (s, n1, y1, n2, y2)`` (``s`` its stratum: domain, or (domain, covariate level)).

The parts, each module's docstring with its method and numerics:

* :mod:`bayesrc.bayes.change_grid`: the data side: the fixed logit grid both integrals run on, the
  cells, and every binomial term as a constant of the data, padded to shape buckets;
* :mod:`bayesrc.bayes.change_likelihood`: a cell's marginal likelihood, what the sampler evaluates
  (prior weights, change kernel, convolutions: :func:`~bayesrc.bayes.change_likelihood.cell_loglik`),
  and a fit's per-cell log-likelihood for PSIS-LOO;
* :mod:`bayesrc.bayes.change_item_draws`: the exact conditional item draws after sampling
  (:func:`~bayesrc.bayes.change_item_draws.with_item_draws`);
* this module: the NumPyro and PyMC models and their entry points.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from bayesrc.bayes.change import (
    group_effects_numpyro,
    group_effects_pymc,
    hyperpriors_numpyro,
    hyperpriors_pymc,
    model_dims,
    prior_arguments,
)
from bayesrc.bayes.change_grid import SAMPLER_BAND_DTYPE, StrataMap, cell_stats, likelihood_tables, strata_hyper
from bayesrc.bayes.change_item_draws import with_item_draws
from bayesrc.bayes.change_likelihood import _jax_loglik, _ops, cell_loglik
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.samplers import SamplerConfig, run_numpyro, run_pymc


def _numpyro_model(tables, prior, *, strata: StrataMap, n_domains: int, slope: bool, n_groups: int = 1, contrasts=None):
    import numpyro  # deferred: NumPyro and JAX load in seconds (bayes extra)

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_numpyro(n_domains, slope, prior, n_groups)
    alpha, gamma, eta = group_effects_numpyro(n_groups, prior, contrasts)
    per_stratum = strata_hyper(strata, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta)
    numpyro.factor("y", _jax_loglik(slope)(*per_stratum, b, pi, tables))


def change_collapsed_numpyro(
    data: ModelInputs,
    *,
    slope: bool = False,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    items: bool = True,
):
    """Collapsed change model with NumPyro: NUTS on the hyperparameters, exact item draws after
    (``items=False``: the hyperparameters only; :func:`~bayesrc.bayes.change_item_draws.with_item_draws`
    adds the items later).

    Examples
    --------
    >>> from bayesrc.bayes.inputs import model_inputs
    >>> dt = change_collapsed_numpyro(model_inputs(counts))   # doctest: +SKIP
    >>> dt["posterior"]["pi"].mean()                          # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    model, args = collapsed_model_numpyro(data, slope=slope, prior=prior)
    dims = {k: v for k, v in model_dims(data.n_groups).items() if k != "theta"}  # theta is not sampled here
    dt = run_numpyro(model, args, cfg, data.coords, dims)
    return with_item_draws(dt, data, cfg, slope=slope, prior=prior) if items else dt


def collapsed_model_numpyro(
    data: ModelInputs, *, slope: bool = False, prior: dict | None = None
) -> tuple[Callable, dict]:
    """The NumPyro twin as a model function and its data arguments (the sampler's tables): what
    :func:`change_collapsed_numpyro` samples, e.g. for ``numpyro.infer.util.potential_energy``.

    Examples
    --------
    >>> model, args = collapsed_model_numpyro(model_inputs(counts))   # doctest: +SKIP
    """
    cells = cell_stats(data)
    model = partial(
        _numpyro_model,
        strata=cells.strata,
        n_domains=data.n_domains,
        slope=slope,
        n_groups=data.n_groups,
        contrasts=data.stratum_contrasts(),
    )
    return model, {"tables": likelihood_tables(cells, None), "prior": prior_arguments(prior)}  # by FFT: no band


def change_collapsed_pymc(
    data: ModelInputs,
    *,
    slope: bool = False,
    prior: dict | None = None,
    config: SamplerConfig | None = None,
    items: bool = True,
):
    """The same collapsed model with PyMC (nutpie); same priors, names and dims as the NumPyro twin
    (``items`` as there).

    Examples
    --------
    >>> dt = change_collapsed_pymc(model_inputs(counts))   # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    dt = run_pymc(collapsed_model_pymc(data, slope=slope, prior=prior), cfg)
    return with_item_draws(dt, data, cfg, slope=slope, prior=prior) if items else dt


def collapsed_model_pymc(data: ModelInputs, *, slope: bool = False, prior: dict | None = None):
    """The PyMC twin as a built ``pymc.Model``: what :func:`change_collapsed_pymc` samples.

    Examples
    --------
    >>> model = collapsed_model_pymc(model_inputs(counts))   # doctest: +SKIP
    >>> model.compile_logp()(model.initial_point())        # doctest: +SKIP
    """
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)
    import pytensor.tensor as pt

    cells = cell_stats(data)
    tables = likelihood_tables(cells, SAMPLER_BAND_DTYPE)
    with pm.Model(coords=data.coords) as model:
        mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_pymc(slope, prior, data.n_groups)
        alpha, gamma, eta = group_effects_pymc(data.n_groups, prior, data.stratum_contrasts())
        strata = strata_hyper(cells, mu_theta, sigma_theta, shift, alpha, gamma, eta, sigma_delta)
        ll = cell_loglik(_ops("pytensor"), *strata, b, pi, tables)
        pm.Potential("y", pt.sum(tables["weight"] * ll))
    return model
