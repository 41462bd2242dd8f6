"""The LOO checks on every fit (issue 31): PSIS-LOO per item, Pareto k and LOO-PIT; the posterior predictive
check is :mod:`bayesrc.bayes.ppc`.

:func:`loo_checks`: PSIS-LOO over items (:func:`bayesrc.bayes.change_likelihood.unit_loglik`, the collapsed
marginal likelihood of an item's two counts, computed once per unit of items with the same likelihood: a cell of
the change model, a distinct (domain, counts) of the beta-binomial), Pareto k per item (items above
:data:`K_THRESHOLD` listed), and LOO-PIT of each item's change ``y2 - y1`` against new items drawn
from its stratum's population (:func:`new_item_p`: given the hyperparameters, the leave-one-out
predictive of an item is that of a new item of its stratum), and its ECDF against uniform with a
simultaneous band (:func:`pit_ecdf_band`). :mod:`bayesrc.bayes.model_comparison` ranks fits by ELPD.

Pure numpy (and ``arviz_stats`` for PSIS); no JAX, PyMC or plotting here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit
from scipy.stats import kstest

from bayesrc.bayes.change_grid import cell_stats, logit_grid
from bayesrc.bayes.change_likelihood import _ops, flat_hyper, grid_spread, unit_loglik
from bayesrc.bayes.diagnostics import mean_relative_ess
from bayesrc.bayes.draws import item_slices, thin_index
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.ppc import MAX_PPC_DRAWS, thin_draws
from bayesrc.config import release_memory

K_THRESHOLD = 0.7  # Pareto k above which an item's PSIS-LOO estimate is unreliable
LOO_BLOCK = 500  # items (or cells) per block of the LOO checks: each (draw, item) array ~8 MB at 2,000 draws


def new_item_p(
    post, data: ModelInputs, rng: np.random.Generator, max_draws: int = MAX_PPC_DRAWS, items: slice = slice(None)
) -> np.ndarray:
    """Accuracies (draw, item, 2) of a *new* item in each item's stratum (of the items ``items``),
    one per posterior draw of the hyperparameters.

    Change model: ``theta ~ Normal(mu_s, sigma_s)``, ``changed ~ Bernoulli(pi)``,
    ``delta ~ Normal(m_s(theta), sigma_delta_s)`` (spreads as on the likelihood's grid,
    :func:`bayesrc.bayes.change_likelihood.grid_spread`); beta-binomial: ``p_v ~ Beta(mu kappa,
    (1 - mu) kappa)`` per version. The leave-one-out predictive of an item given the
    hyperparameters (the input of LOO-PIT).

    Examples
    --------
    >>> p_new = new_item_p(fit.posterior["posterior"].to_dataset(), data, np.random.default_rng(0))  # doctest: +SKIP
    """
    if "sigma_delta" not in post:
        # (draw, domain, version)
        mu, kappa = thin_draws(post["mu"].values, max_draws), thin_draws(post["kappa"].values, max_draws)
        dom = data.dom[items]
        a, b = (mu * kappa)[:, dom, :], ((1.0 - mu) * kappa)[:, dom, :]
        return rng.beta(a, b)
    cells = cell_stats(data)
    idx = thin_index(post["pi"].size, max_draws)
    mu, sigma, shift, sd, slope, pi = (h[idx] for h in flat_hyper(post, cells))  # per stratum of the cells
    stratum = cells.dom[cells.item_cell][items]
    x = logit_grid(int(data.n.max()))
    ops = _ops("numpy")
    sigma, sd = grid_spread(ops, sigma, x), grid_spread(ops, sd, x)
    # In place, in the order of theta = m + s z, delta = centre + sd z', p2 = expit(theta + changed delta):
    # the same numbers with a third of the temporaries (draw x item arrays: 190 MB each at 12,000 items).
    m_s, s_s = mu[:, stratum], sigma[:, stratum]
    theta = rng.standard_normal(m_s.shape)
    theta *= s_s
    theta += m_s
    centre = shift[:, stratum]
    if np.any(slope != 0.0):
        centre = centre + slope[:, None] * (theta - m_s) / s_s
    del m_s, s_s
    delta = rng.standard_normal(theta.shape)
    delta *= sd[:, stratum]
    delta += centre
    del centre
    delta *= rng.random(theta.shape) < pi[:, None]  # changed
    delta += theta
    out = np.empty((*theta.shape, 2))
    expit(theta, out=out[..., 0])
    expit(delta, out=out[..., 1])
    return out


def loo_pit_change(
    log_weights: np.ndarray,
    pareto_k: np.ndarray,
    p_new: np.ndarray,
    data: ModelInputs,
    rng: np.random.Generator,
    items: slice = slice(None),
) -> np.ndarray:
    """LOO-PIT of the change ``y2 - y1`` of the items ``items`` (randomised for ties): ``arviz_stats.loo_pit``
    with their PSIS log weights (chain, draw, item) and Pareto k, and new-item replicates ``p_new``
    (draw, item, 2; :func:`new_item_p`, draws evenly thinned from the posterior's).

    Examples
    --------
    >>> pit = loo_pit_change(lw, k, new_item_p(post, data, rng), data, rng)  # doctest: +SKIP
    """
    import arviz_stats as azs  # deferred: arviz_stats loads in ~3 s (bayes extra)

    y, n = data.y[items], data.n[items]
    y_new = rng.binomial(n[None], p_new)
    t_new = (y_new[..., 1] - y_new[..., 0])[None].astype(float)  # (chain=1, draw, item)
    del y_new
    lw = np.asarray(log_weights).reshape(-1, t_new.shape[-1])  # chains flattened, as new_item_p thins them
    lw = lw[np.linspace(0, lw.shape[0] - 1, p_new.shape[0]).round().astype(int)][None]
    dims = ("chain", "draw", "item")
    dt = xr.DataTree.from_dict(
        {
            # one chain: r_eff 1
            "posterior": xr.Dataset({"draw_index": (("chain", "draw"), np.arange(t_new.shape[1], dtype=float)[None])}),
            "posterior_predictive": xr.Dataset({"y": (dims, t_new)}),
            "observed_data": xr.Dataset({"y": (("item",), (y[:, 1] - y[:, 0]).astype(float))}),
            "log_likelihood": xr.Dataset({"y": (dims, np.broadcast_to(0.0, t_new.shape))}),  # unread: no memory
        }
    )
    out = azs.loo_pit(
        dt,
        var_names="y",
        log_weights=xr.Dataset({"y": (dims, lw)}),
        pareto_k=xr.Dataset({"y": (("item",), np.asarray(pareto_k, float))}),
        random_state=rng,
    )
    return np.asarray(out["y"].values, float)


def psis_loo_items(ll: np.ndarray, reff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PSIS-LOO of each item from its log-likelihood draws ``ll`` (chain, draw, item), through
    ``arviz_stats``: ``elpd_i``, ``p_loo_i``, Pareto ``k`` and the smoothed log weights (chain, draw, item)."""
    # deferred: arviz_stats loads in ~3 s (bayes extra)
    import arviz_stats  # noqa: F401  (registers xarray's .azstats accessor)

    da = xr.DataArray(ll, dims=("chain", "draw", "item"))
    lw, k = da.azstats.psislw(r_eff=reff, dim=["chain", "draw"])
    elpd_i, k, p_i = da.azstats.loo(sample_dims=["chain", "draw"], r_eff=reff, log_weights=lw, pareto_k=k)
    return elpd_i.values, p_i.values, k.values, lw.transpose("chain", "draw", "item").values


def unit_psis(post, data: ModelInputs, block: int = LOO_BLOCK) -> tuple[np.ndarray, ...]:
    """PSIS-LOO of each likelihood unit (:func:`bayesrc.bayes.change_likelihood.unit_loglik`), ``block``
    units at a time: ``elpd``, ``p_loo``, Pareto ``k``, the smoothed log weights (chain, draw, unit)
    and each item's unit.

    Examples
    --------
    >>> elpd_u, p_u, k_u, lw_u, item_unit = unit_psis(post, data)  # doctest: +SKIP
    """
    ll, item_unit = unit_loglik(post, data)
    reff = mean_relative_ess(post)
    parts = []
    for units in item_slices(ll.shape[-1], block):
        release_memory()  # the last block's temporaries stay on glibc's free lists unless handed back
        parts.append(psis_loo_items(ll[..., units], reff))
    elpd, p_loo, k, lw = (np.concatenate(c, axis=-1) for c in zip(*parts))
    return elpd, p_loo, k, lw, item_unit


def loo_checks(
    dt,
    data: ModelInputs,
    item_ids: Sequence[str],
    *,
    seed: int = 0,
    k_threshold: float = K_THRESHOLD,
    block: int = LOO_BLOCK,
) -> tuple[dict, pd.DataFrame]:
    """PSIS-LOO over items, Pareto k per item and LOO-PIT of the per-item change for one fit.

    PSIS runs once per unit of the likelihood (:func:`unit_psis`: a cell of the change model, whose
    items have the same likelihood, so the same PSIS-LOO), LOO-PIT ``block`` items at a time (the
    (draw, item) arrays of the new-item replicates and LOO-PIT are held for one block only); the
    totals (ELPD, its SE, effective parameters) come from the per-item values as ``arviz_stats.loo``
    computes them.

    Returns the ``loo`` payload (ELPD, its SE, effective parameters, the items whose k exceeds
    ``k_threshold``) and a table per item (``elpd_loo``, ``pareto_k``, ``loo_pit``) in ``data``'s item order.

    Examples
    --------
    >>> payload, per_item = loo_checks(res.posterior, model_inputs(counts), res.items["item_id"])  # doctest: +SKIP
    """
    # deferred: arviz_stats loads in ~3 s (bayes extra)
    import arviz_stats  # noqa: F401  (registers xarray's .azstats accessor)

    post = dt["posterior"].to_dataset()
    elpd_u, p_u, k_u, lw_u, item_unit = unit_psis(post, data, block)
    elpd_i, p_i, k = elpd_u[item_unit], p_u[item_unit], k_u[item_unit]
    rng_new, rng_pit = (np.random.default_rng(np.random.SeedSequence([seed, stream])) for stream in (33, 32))
    pit = np.concatenate(
        [
            loo_pit_change(
                lw_u[..., item_unit[items]],
                k[items],
                new_item_p(post, data, rng_new, items=items),
                data,
                rng_pit,
                items,
            )
            for items in item_slices(data.n_items, block)
        ]
    )
    elpd, se, p_loo, _ = xr.DataArray(elpd_i, dims=["item"]).azstats.loo_summary(xr.DataArray(p_i, dims=["item"]))
    ids = np.asarray(item_ids).astype(str)
    high = np.flatnonzero(k > k_threshold)
    payload = {
        "elpd": float(elpd),
        "se": float(se),
        "p_loo": float(p_loo),
        "n_items": int(data.n_items),
        "n_draws": int(lw_u.shape[0] * lw_u.shape[1]),
        "k_threshold": k_threshold,
        "pareto_k_max": float(np.nanmax(k)) if k.size else None,
        "n_high_k": int(high.size),
        "high_k_items": ids[high[np.argsort(-k[high])]].tolist(),
        "loo_pit_ks_p": _uniform_ks_p(pit),
    }
    return payload, pd.DataFrame({"item_id": ids, "elpd_loo": elpd_i, "pareto_k": k, "loo_pit": pit})


def _uniform_ks_p(pit: np.ndarray) -> float | None:
    """Kolmogorov-Smirnov p-value of LOO-PIT values against uniform (None when there are none)."""
    pit = pit[np.isfinite(pit)]
    return float(kstest(pit, "uniform").pvalue) if pit.size else None


def pit_ecdf_band(
    pit: np.ndarray, *, prob: float = 0.95, max_points: int = 200, n_simulations: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """ECDF of PIT values minus the uniform CDF, with a simultaneous ``prob`` band for uniform PIT.

    The band holds the whole difference curve (at every evaluation point at once) with
    probability ``prob`` when the values are uniform (Säilynoja, Bürkner and Vehtari 2022's
    simulation method: ``arviz_stats.ecdf_utils``), at up to ``max_points`` evenly spaced points.
    NaN values (items without a PIT) are left out.

    Returns
    -------
    pandas.DataFrame
        One row per point: ``x``, ``ecdf_diff`` (ECDF(x) - x), ``lower``, ``upper`` (the band,
        as differences from x) and ``outside`` (the curve leaves the band there).

    Examples
    --------
    >>> band = pit_ecdf_band(np.random.default_rng(1).uniform(size=500))
    >>> bool(band["outside"].any()), list(band.columns)
    (False, ['x', 'ecdf_diff', 'lower', 'upper', 'outside'])
    """
    # deferred: arviz_stats loads in ~3 s (bayes extra)
    from arviz_stats.ecdf_utils import compute_ecdf, get_pointwise_confidence_band, simulate_confidence_bands

    pit = np.asarray(pit, float)
    pit = pit[np.isfinite(pit)]
    n = pit.size
    if n < 2:
        raise ValueError(f"a PIT ECDF band needs at least 2 values, got {n}")
    m = min(n, max_points + 1)
    x = np.arange(1, m) / m
    pointwise = simulate_confidence_bands(n, 1, x, prob, n_simulations, np.random.default_rng(seed))
    lower, upper = get_pointwise_confidence_band(pointwise, n, x)
    ecdf = compute_ecdf(pit, x)
    return pd.DataFrame(
        {
            "x": x,
            "ecdf_diff": ecdf - x,
            "lower": lower - x,
            "upper": upper - x,
            "outside": (ecdf < lower) | (ecdf > upper),
        }
    )


def loo_warnings(loo_payload: Mapping, max_named: int = 5) -> list[str]:
    """A warning naming the items whose Pareto k is above the threshold (none if no item is).

    Examples
    --------
    >>> loo_warnings({"n_high_k": 2, "high_k_items": ["a", "b"], "k_threshold": 0.7})[0][:60]
    'PSIS-LOO: 2 items have Pareto k above 0.7 (a, b): their leav'
    """
    n = int(loo_payload.get("n_high_k") or 0)
    if not n:
        return []
    ids = list(loo_payload["high_k_items"])
    named = ", ".join(ids[:max_named]) + (f" and {n - max_named} more" if n > max_named else "")
    return [
        f"PSIS-LOO: {n} item{'s have' if n > 1 else ' has'} Pareto k above {loo_payload['k_threshold']:g} "
        f"({named}): their leave-one-out "
        "estimates are unreliable (the posterior moves a lot without them); "
        "treat ELPD comparisons of this fit with care"
    ]
