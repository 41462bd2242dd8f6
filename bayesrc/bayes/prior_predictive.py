"""Prior predictive check (issue 31): what a model's priors imply for item accuracies and their
change before it sees the data.

The hyperparameters are drawn from the model's own prior code (NumPyro ``Predictive`` over
:func:`bayesrc.bayes.change.hyperpriors_numpyro` and :func:`~bayesrc.bayes.change.group_effects_numpyro`,
or the beta-binomial's :func:`~bayesrc.bayes.betabinom.hyperpriors_numpyro`), for the fit's own
design (its domains, covariate levels and strata); each draw then gives a new item in every item's
stratum exactly as the posterior predictive does (:func:`bayesrc.bayes.checks.new_item_p`). The
summary is what a reader checks a prior against: the range of item accuracies it allows, the share
of items it expects to move by more than 0.05 or 0.10, and the share changed ``pi``; histograms of
accuracies (beside the observed ``y / n``) and of the change draw the figure
(:func:`bayesrc.bayes.check_figures.prior_predictive_figure`).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import xarray as xr

from bayesrc.bayes import betabinom
from bayesrc.bayes.change import group_effects_numpyro, hyperpriors_numpyro, prior_settings
from bayesrc.bayes.checks import new_item_p
from bayesrc.bayes.compiled import AheadOfTime, kept_compiled
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.config import prepare_jax, releases_jax_caches

PRIOR_PREDICTIVE_ITEMS = 2_000_000  # new items drawn in all (prior draws x the data's items), at most
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
DP_CUTS = (0.05, 0.10)
P_EDGES = np.linspace(0.0, 1.0, 21)
DP_EDGES = np.linspace(-1.0, 1.0, 41)


@releases_jax_caches  # a loop of prior draws (SBC) once ran out of memory mappings: only the kept code stays
def prior_draws(
    data: ModelInputs,
    model: str = "change",
    *,
    slope: bool = False,
    prior: dict | None = None,
    n_draws: int = 1000,
    seed: int = 0,
) -> xr.Dataset:
    """Draws of a model's hyperparameters from their priors, in the posterior's layout (one chain).

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> from bayesrc.bayes import model_inputs
    >>> sim = simulate_pair(40, 10, seed=1)
    >>> draws = prior_draws(model_inputs(item_counts(sim.trials_v1, sim.trials_v2)), n_draws=200)
    >>> draws["pi"].shape
    (1, 200)
    """
    jax = prepare_jax()
    if model not in ("change", "betabinom"):
        raise ValueError(f"model must be 'change' or 'betabinom', got {model!r}")
    structure = model, data.n_domains, data.n_groups, slope, prior_settings(prior), data.stratum_contrasts(), n_draws
    draw = kept_compiled(jax, partial(_compiled_prior_draws, jax, *structure), ("prior draws", *structure))
    with jax.default_device(jax.devices("cpu")[0]):
        draws = draw(jax.random.PRNGKey(seed))
    return xr.Dataset(
        {
            k: (("chain", "draw", *(f"{k}_dim_{i}" for i in range(np.ndim(v) - 1))), np.asarray(v, float)[None])
            for k, v in draws.items()
        }
    )


def _compiled_prior_draws(
    jax, model: str, n_domains: int, n_groups: int, slope: bool, settled: dict, contrasts, n_draws: int
) -> AheadOfTime:
    """``n_draws`` draws of the model's hyperparameters from their priors (the model's own prior code under NumPyro's
    ``Predictive``) as a function of the key, compiled once and kept across calls (:mod:`bayesrc.bayes.compiled`)."""
    from numpyro.infer import Predictive  # deferred: NumPyro and JAX load in seconds (bayes extra)

    def hyperpriors():
        if model == "betabinom":
            betabinom.hyperpriors_numpyro(n_domains)
        else:
            hyperpriors_numpyro(n_domains, slope, settled, n_groups)
            group_effects_numpyro(n_groups, settled, contrasts)

    # Drawn once a fit in milliseconds: compiled for compile time (1.4 s against 2.8 s cold; the summaries' floats
    # round otherwise in their eighth digit).
    return AheadOfTime(jax, jax.jit(Predictive(hyperpriors, num_samples=int(n_draws))), optimized=False)


def prior_predictive(
    data: ModelInputs, model: str = "change", *, slope: bool = False, prior: dict | None = None, seed: int = 0
) -> dict:
    """The prior predictive summary of ``model`` on the design of ``data`` (payload ``prior_predictive``).

    Returns ``n_draws`` (prior draws; fewer for many items, :data:`PRIOR_PREDICTIVE_ITEMS` new items
    in all), ``quantiles`` and at them ``p_v1``, ``p_v2`` (a new item's accuracy per version) and
    ``dp``; ``share_abs_dp_above`` (``{"0.05": ..., "0.1": ...}``: the prior share of items whose
    accuracy moves by more than that); ``share_extreme`` (accuracies below 0.02 or above 0.98);
    ``pi`` (the change model's share changed, at the quantiles); histograms ``hist_p`` (prior, and
    the observed ``y / n`` per version) and ``hist_dp``.

    Examples
    --------
    >>> from bayesrc.data import item_counts, simulate_pair
    >>> from bayesrc.bayes import model_inputs
    >>> sim = simulate_pair(40, 10, seed=1)
    >>> pp = prior_predictive(model_inputs(item_counts(sim.trials_v1, sim.trials_v2)))
    >>> pp["pi"][2] > 0.8 > pp["share_abs_dp_above"]["0.05"]  # most items change, fewer by 0.05 in accuracy
    True
    """
    n_draws = int(np.clip(PRIOR_PREDICTIVE_ITEMS // max(data.n_items, 1), 100, 1000))
    post = prior_draws(data, model, slope=slope, prior=prior, n_draws=n_draws, seed=seed)
    p = new_item_p(post, data, np.random.default_rng(seed), max_draws=n_draws)  # (draw, item, version)
    dp = p[..., 1] - p[..., 0]
    at = lambda x: [float(v) for v in np.quantile(x, QUANTILES)]  # noqa: E731
    hist = lambda x, edges: np.histogram(np.clip(x, edges[0], edges[-1]), edges)[0].tolist()  # noqa: E731
    observed = np.where(data.n > 0, data.y / np.maximum(data.n, 1), np.nan)
    out = {
        "model": model,
        "n_draws": n_draws,
        "quantiles": list(QUANTILES),
        "p_v1": at(p[..., 0]),
        "p_v2": at(p[..., 1]),
        "dp": at(dp),
        "share_abs_dp_above": {f"{c:g}": float((np.abs(dp) > c).mean()) for c in DP_CUTS},
        "share_extreme": float(((p < 0.02) | (p > 0.98)).mean()),
        "hist_p": {
            "edges": P_EDGES.tolist(),
            **{f"prior_v{v + 1}": hist(p[..., v], P_EDGES) for v in range(2)},
            **{f"observed_v{v + 1}": hist(observed[:, v][np.isfinite(observed[:, v])], P_EDGES) for v in range(2)},
        },
        "hist_dp": {"edges": DP_EDGES.tolist(), "prior": hist(dp, DP_EDGES)},
    }
    if "pi" in post:
        out["pi"] = at(post["pi"].values)
    return out
