"""Paired change model (SPEC section 3; paper 001 sections 2.2, 4.2, 5), twice: NumPyro and PyMC.

Model (item i in domain d; logit scale)::

    mu_theta_d ~ Normal(0, 2)       sigma_theta_d ~ HalfNormal(5)
    theta_i    ~ Normal(mu_theta_d + alpha_g[i], sigma_theta_d)        # item easiness in v1
    shift_d    ~ Normal(0, 1)       sigma_delta_g ~ InverseGamma(2, 0.6)   (one per covariate level; one in all without)
    alpha_g    ~ ZeroSumNormal(1)   (item covariate with levels g, default the correct option's letter:
    gamma_g    ~ ZeroSumNormal(1)    its effect on easiness and on change)
    eta_s      ~ Normal(0, tau)     tau ~ HalfNormal(0.5)   (stratum s = (domain, level): its own change)
    slope      ~ Normal(0, 0.5)     (optional: regression toward the middle, paper 001 s. 4.2)
    delta_i    ~ Normal(shift_d + gamma_g[i] + eta_s[i] + slope * (theta_i - mu_theta_d - alpha_g[i]) / sigma_theta_d,
                        sigma_delta_g[i])
    pi         ~ Beta(4, 1)         changed_i ~ Bernoulli(pi)
    y_i1 ~ Binomial(n_i1, expit(theta_i))
    y_i2 ~ Binomial(n_i2, expit(theta_i + changed_i * delta_i))

Why the covariate (issue 12): on real version changes scored against exact answer
distributions (Gemma-3-270M Q4_K_M vs its Q3_K_M re-quantisation) nearly every item moves a
little, and the direction follows the correct option's letter (the new weights prefer "A":
A-keyed items rise, B-keyed items fall). Domain shifts cannot express that (both directions
sit in every domain), so the model without it put the moves down to noise: it shrank Delta p
about 3x, covered the exact Delta p with 68% of its 90% intervals and called 40% of RCI's
flags false where none were. ``gamma`` pools each letter's common move; ``alpha`` each
letter's easiness (the same exact runs: Gemma answers C-keyed items correctly with p = 0.15 on
average, B-keyed ones with p = 0.51; pooled towards the domain mean instead, C items' v1
accuracy was overestimated and their change mis-signed). The trials carry the
correct letter (``correct_answer``), so it is on by default (``covariate=None`` turns it off,
another item coord can be named instead).

Why these priors and ``eta`` (issue 12, the same exact runs; per-replicate figures from
``benchmarks/truth_default.py``, docs/validation/truth.md):
with K = 10 an item's own deviation from its stratum's change (SD 0.2-0.3 logits in both real
pairs) is far below its binomial noise, so the data hardly identify ``sigma_delta``; under
``HalfNormal(3)`` its posterior sat near 0.13 and the 90% intervals missed 1 item in 5. The
inverse gamma keeps the "changed" component non-local (off a second point mass at no
change; P(sigma_delta < 0.1) = 0.02) and keeps a heavy right tail (a re-trained model's
changes of several logits). ``Beta(4, 1)``: between two real versions nearly every item
moves; under ``Beta(2, 2)`` small systematic moves (a prompt change) were put on the "no
change" spike and RCI's flags called false twice as often as they were. ``eta``: the
letter's effect on change differs between domains (Q4_K_M to Q3_K_M: +1.0 logits for
A-keyed items in one domain, +0.6 in another), which an additive ``shift_d + gamma_g`` mis-centred.
``sigma_delta`` per level: the items' own changes are heteroscedastic by letter (Q4_K_M to
Q3_K_M: SD 0.24 / 0.20 / 0.36 / 0.47 logits about their stratum's change for A / B / C / D
items); one spread fitted mostly to the A and B items left the C and D items' intervals too
narrow (coverage 0.82 on the quantisation, 12 of 14 wrong-sign selections C items in one
replicate) - per level, coverage 0.89 over 20 replicates.

"No change" is a point mass at zero (an unchanged item has the same accuracy in both
versions), "change" the wide normal population with domain mean shifts. NUTS needs
continuous parameters, so the discrete ``changed_i`` is summed out, and ``delta_i`` is
integrated out too (1-D trapezoid quadrature against its normal prior, :func:`z_grid`)::

    p(y_i2 | .) = (1 - pi) Bin(y_i2 | expit(theta_i)) + pi * int Bin(y_i2 | expit(theta_i + delta)) N(delta | .) d delta

Why: with ``delta_i`` as a sampled parameter the mixture weight ``pi`` and ``sigma_delta``
mix very slowly (each item's membership must diffuse through its ``delta_i``; effective
sample sizes of ~100 per 1000 draws in our runs), and a narrow "no change" component
would add a spike NUTS cannot traverse. After sampling, ``changed_i`` and ``delta_i`` are
drawn from their exact conditionals given each posterior draw (:func:`item_conditionals`):
``P(changed_i) = E[r_i]`` with ``r_i`` the component responsibility (Rao-Blackwellised),
``P(real improvement) = E[r_i P(delta_i > 0 | changed, .)]``.
"""

from __future__ import annotations

import json
from functools import partial

import numpy as np
from scipy import stats
from scipy.special import expit, log_expit

from bayesrc.bayes.draws import CELL_QUANTITIES, ITEM_DRAW_DTYPE
from bayesrc.bayes.inputs import ModelInputs
from bayesrc.bayes.samplers import SamplerConfig, run_numpyro, run_pymc

PRIOR = {
    "mu_theta_sd": 2.0,
    "sigma_theta_sd": 5.0,
    "shift_sd": 1.0,
    "slope_sd": 0.5,
    "group_shift_sd": 1.0,
    "group_level_sd": 1.0,
    "stratum_shift_sd": 0.5,
    "sigma_delta_shape": 2.0,
    "sigma_delta_scale": 0.6,
    "pi_a": 4.0,
    "pi_b": 1.0,
    "sigma_delta_sd": None,  # set: the HalfNormal(sigma_delta_sd) prior of the model before issue 12 instead
}
DIMS = {
    "mu_theta": ["domain"],
    "sigma_theta": ["domain"],
    "shift": ["domain"],
    "group_shift": ["group"],
    "group_level": ["group"],
    "stratum_shift": ["stratum"],
    "stratum_shift_z": ["contrast"],
    "theta": ["item"],
}
SAMPLED = (
    "mu_theta",
    "sigma_theta",
    "shift",
    "group_shift",
    "group_level",
    "stratum_shift_sd",
    "stratum_shift_z",
    "stratum_shift",
    "sigma_delta",
    "slope",
    "pi",
    "theta",
)
GRID_NODES = 49


def z_grid(n_nodes: int = GRID_NODES, half_width: float = 6.0) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes and log-weights for integrating against Normal(0, 1) on [-6, 6].

    The integrand (a binomial likelihood in ``delta``) is smooth, so the trapezoid rule
    converges geometrically: with spacing h against a likelihood of width s (about 0.2
    prior SDs at K = 10) the relative error is about exp(-2 pi^2 s^2 / h^2) < 1e-7 at
    49 nodes (h = 0.25). Raise ``GRID_NODES`` for much larger K.
    """
    z = np.linspace(-half_width, half_width, n_nodes)
    logw = -0.5 * z**2
    logw -= np.log(np.exp(logw).sum())  # weights sum to one: a proper discrete prior
    return z, logw


def prior_settings(prior: dict | None = None) -> dict:
    """``PRIOR`` updated with ``prior`` (the prior-sensitivity grid); unknown keys or non-positive
    scales raise ``ValueError``."""
    out = dict(PRIOR)
    for key, value in (prior or {}).items():
        if value is None and key in PRIOR and PRIOR[key] is None:
            continue
        if key not in PRIOR:
            raise ValueError(f"unknown prior setting {key!r}; known: {', '.join(PRIOR)}")
        if not float(value) > 0:
            raise ValueError(f"prior setting {key!r} must be > 0, got {value!r}")
        out[key] = float(value)
    return out


def prior_arguments(prior: dict | None = None) -> dict:
    """:func:`prior_settings` as a sampler's arguments: its numbers as float64 scalars, so that fits under other
    priors (a prior sweep's refits) run one compiled sampler; an unset ``sigma_delta_sd`` stays None, which picks
    the model's structure.

    Examples
    --------
    >>> args = prior_arguments({"pi_a": 1.0})
    >>> float(args["pi_a"]), args["sigma_delta_sd"]
    (1.0, None)
    """
    return {k: None if v is None else np.float64(v) for k, v in prior_settings(prior).items()}


def share_above_zero(delta, spacing):
    """Share of each quadrature node's cell ``[delta - h/2, delta + h/2]`` above zero (numpy or jax).

    ``P(delta > 0)`` from node weights: counting a node near zero as wholly positive or
    negative would be off by up to half a node's weight.
    """
    return (delta / spacing + 0.5).clip(0.0, 1.0)


def _sigma_delta_prior(lib, pr: dict, *name, **dims):
    """``InverseGamma(sigma_delta_shape, sigma_delta_scale)``, or ``HalfNormal(sigma_delta_sd)`` when that is set.

    ``lib`` is ``numpyro.distributions`` (no ``name``) or ``pymc`` (``name``: the variable's name, ``dims``).
    """
    if pr["sigma_delta_sd"] is not None:
        return lib.HalfNormal(*name, pr["sigma_delta_sd"], **dims)
    return lib.InverseGamma(*name, pr["sigma_delta_shape"], pr["sigma_delta_scale"], **dims)


#: The hyperpriors whose density is evaluated per draw (:func:`change_log_prior`); the rest
#: (``stratum_shift_z``, the items) have priors that no prior setting changes.
HYPERPRIOR_SITES = (
    "mu_theta",
    "sigma_theta",
    "shift",
    "group_level",
    "group_shift",
    "stratum_shift_sd",
    "sigma_delta",
    "slope",
    "pi",
)
#: The priors that decide how many items changed and by how much (the fit's own prior-sensitivity check).
STRUCTURE_SITES = ("pi", "sigma_delta")


def change_log_prior(post, prior: dict | None = None, sites: tuple[str, ...] = HYPERPRIOR_SITES) -> np.ndarray:
    """Per posterior draw (chain-major, flat): the log density of the change model's hyperpriors
    under the settings ``prior`` (:func:`prior_settings`), summed over ``sites`` that ``post`` has.

    Differences between two settings are the log importance ratios that move a fit to another
    prior without refitting (:func:`bayesrc.bayes.summaries.psis_weights`): the likelihood, and the
    priors no setting changes, cancel. ``ZeroSumNormal(s)`` over n levels has density
    ``exp(-|x|^2 / 2s^2) / s^(n-1)`` up to a constant (it lives on n - 1 dimensions).

    Examples
    --------
    >>> import xarray as xr
    >>> post = xr.Dataset({"pi": (("chain", "draw"), [[0.5]]), "sigma_delta": (("chain", "draw"), [[0.6]])})
    >>> # log Beta(0.5 | 4, 1) + log InvGamma(0.6 | 2, 0.6)
    >>> round(float(change_log_prior(post, sites=STRUCTURE_SITES)[0]), 4)
    -1.1823
    """
    pr = prior_settings(prior)
    n_draws = post.sizes["chain"] * post.sizes["draw"]

    def zero_sum_normal(x, sd):
        return -0.5 * (x**2).sum(1) / sd**2 - (x.shape[1] - 1) * np.log(sd)

    if pr["sigma_delta_sd"] is not None:
        sigma_delta = partial(stats.halfnorm.logpdf, scale=pr["sigma_delta_sd"])
    else:
        sigma_delta = partial(stats.invgamma.logpdf, a=pr["sigma_delta_shape"], scale=pr["sigma_delta_scale"])
    density = {
        "mu_theta": partial(stats.norm.logpdf, scale=pr["mu_theta_sd"]),
        "sigma_theta": partial(stats.halfnorm.logpdf, scale=pr["sigma_theta_sd"]),
        "shift": partial(stats.norm.logpdf, scale=pr["shift_sd"]),
        "group_level": lambda x: zero_sum_normal(x, pr["group_level_sd"]),
        "group_shift": lambda x: zero_sum_normal(x, pr["group_shift_sd"]),
        "stratum_shift_sd": partial(stats.halfnorm.logpdf, scale=pr["stratum_shift_sd"]),
        "sigma_delta": sigma_delta,
        "slope": partial(stats.norm.logpdf, scale=pr["slope_sd"]),
        "pi": partial(stats.beta.logpdf, a=pr["pi_a"], b=pr["pi_b"]),
    }
    total = np.zeros(n_draws)
    for site in sites:
        if site in post:
            lp = np.asarray(density[site](post[site].values.reshape(n_draws, -1)), float)
            total += lp.reshape(n_draws, -1).sum(1)
    return total


def model_dims(n_groups: int) -> dict:
    """``DIMS``, with ``sigma_delta`` per covariate level when there is an item covariate."""
    return DIMS | {"sigma_delta": ["group"]} if n_groups > 1 else DIMS


def hyperpriors_numpyro(n_domains: int, slope: bool, pr: dict, n_groups: int = 1, n_changes: int | None = None):
    """The hyperpriors of the change model under the prior ``pr`` (:func:`prior_settings`, or
    :func:`prior_arguments` traced as the sampler's arguments), NumPyro; shared by the full and collapsed
    models and the joint model of several versions.

    Returns ``(mu_theta, sigma_theta, shift, sigma_delta, slope, pi)``; ``slope`` is 0.0 when absent;
    ``sigma_delta`` has one entry per covariate level when ``n_groups > 1``, else it is a scalar.
    ``n_changes`` (the joint model, :mod:`bayesrc.bayes.joint`): that many independent changes from
    the reference version, each with the same priors: ``shift`` (change, domain), ``pi`` (change,) and
    ``sigma_delta`` (change,), or (change, group) with a covariate.
    """
    import numpyro  # deferred: NumPyro and JAX load in seconds (bayes extra)
    import numpyro.distributions as dist

    per_change = (lambda d: d) if n_changes is None else (lambda d: d.expand([n_changes]).to_event(1))  # noqa: E731
    mu_theta = numpyro.sample("mu_theta", dist.Normal(0.0, pr["mu_theta_sd"]).expand([n_domains]).to_event(1))
    sigma_theta = numpyro.sample("sigma_theta", dist.HalfNormal(pr["sigma_theta_sd"]).expand([n_domains]).to_event(1))
    shift = numpyro.sample("shift", per_change(dist.Normal(0.0, pr["shift_sd"]).expand([n_domains]).to_event(1)))
    sd_prior = _sigma_delta_prior(dist, pr)
    per_group = (lambda d: d) if n_groups <= 1 else (lambda d: d.expand([n_groups]).to_event(1))  # noqa: E731
    sigma_delta = numpyro.sample("sigma_delta", per_change(per_group(sd_prior)))
    b = numpyro.sample("slope", dist.Normal(0.0, pr["slope_sd"])) if slope else 0.0
    pi = numpyro.sample("pi", per_change(dist.Beta(pr["pi_a"], pr["pi_b"])))
    return mu_theta, sigma_theta, shift, sigma_delta, b, pi


def hyperpriors_pymc(slope: bool, prior: dict | None = None, n_groups: int = 1, per_change: bool = False):
    """The same hyperpriors in PyMC, inside an open ``pm.Model`` with a ``domain`` (and, with
    ``n_groups > 1``, a ``group``) coord; ``per_change``: the joint model's (a ``change`` coord,
    ``shift`` over (change, domain), ``pi`` over change, ``sigma_delta`` over change and group))."""
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)

    pr = prior_settings(prior)
    change = {"dims": "change"} if per_change else {}
    mu_theta = pm.Normal("mu_theta", 0.0, pr["mu_theta_sd"], dims="domain")
    sigma_theta = pm.HalfNormal("sigma_theta", pr["sigma_theta_sd"], dims="domain")
    shift = pm.Normal("shift", 0.0, pr["shift_sd"], dims=("change", "domain") if per_change else "domain")
    sd_dims = tuple(["change"] * per_change + ["group"] * (n_groups > 1))
    sigma_delta = _sigma_delta_prior(pm, pr, "sigma_delta", **({"dims": sd_dims} if sd_dims else {}))
    b = pm.Normal("slope", 0.0, pr["slope_sd"]) if slope else 0.0
    pi = pm.Beta("pi", pr["pi_a"], pr["pi_b"], **change)
    return mu_theta, sigma_theta, shift, sigma_delta, b, pi


def group_effects_numpyro(n_groups: int, pr: dict, contrasts: np.ndarray | None = None, n_changes: int | None = None):
    """Per-level effects of the item covariate (e.g. the correct option's letter), NumPyro.

    Returns ``(alpha, gamma, eta)``: ``alpha ~ ZeroSumNormal(group_level_sd)`` shifts the items'
    easiness, ``gamma ~ ZeroSumNormal(group_shift_sd)`` their change (both sum to zero over
    the levels, so the domain means keep their meaning), and ``eta = stratum_shift_sd_ * Q z``
    (``z ~ Normal(0, 1)`` per contrast, ``stratum_shift_sd_ ~ HalfNormal(stratum_shift_sd)``,
    ``Q = contrasts``: :func:`bayesrc.data.inputs.interaction_basis`) each (domain, level)
    stratum's own change beyond ``shift_d + gamma_g``: the part of ``Normal(0, sd)`` shifts that
    no domain or level shift can take up (that part only widens their priors, by ``sd`` against
    their scale 1), so nothing trades off along a ridge; ``(0.0, 0.0, 0.0)`` with one level.
    ``n_changes`` (the joint model): the change's effects once per change (``gamma`` (change, group),
    ``stratum_shift_sd`` (change,), ``eta`` (change, stratum)); ``alpha`` is the items', shared.
    """
    if n_groups <= 1:
        return 0.0, 0.0, 0.0
    import jax.numpy as jnp  # deferred: NumPyro and JAX load in seconds (bayes extra)
    import numpyro
    import numpyro.distributions as dist

    lead = () if n_changes is None else (n_changes,)
    per_change = lambda d: d.expand(list(lead)).to_event(1) if lead else d  # noqa: E731
    alpha = numpyro.sample("group_level", dist.ZeroSumNormal(pr["group_level_sd"], event_shape=(n_groups,)))
    gamma = numpyro.sample("group_shift", per_change(dist.ZeroSumNormal(pr["group_shift_sd"], event_shape=(n_groups,))))
    if contrasts.shape[1] == 0:
        return alpha, gamma, numpyro.deterministic("stratum_shift", jnp.zeros((*lead, contrasts.shape[0])))
    sd = numpyro.sample("stratum_shift_sd", per_change(dist.HalfNormal(pr["stratum_shift_sd"])))
    z = numpyro.sample("stratum_shift_z", per_change(dist.Normal(0.0, 1.0).expand([contrasts.shape[1]]).to_event(1)))
    eta = sd[:, None] * (z @ jnp.asarray(contrasts).T) if lead else sd * (jnp.asarray(contrasts) @ z)
    return alpha, gamma, numpyro.deterministic("stratum_shift", eta)


def group_effects_pymc(
    n_groups: int, prior: dict | None = None, contrasts: np.ndarray | None = None, per_change: bool = False
):
    """The same in PyMC, inside an open ``pm.Model`` with ``group``, ``stratum`` and ``contrast`` coords
    (``per_change``: the joint model's, and a ``change`` coord)."""
    if n_groups <= 1:
        return 0.0, 0.0, 0.0
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)
    import pytensor.tensor as pt

    pr = prior_settings(prior)
    lead = ("change",) if per_change else ()
    alpha = pm.ZeroSumNormal("group_level", sigma=pr["group_level_sd"], dims="group")
    gamma = pm.ZeroSumNormal("group_shift", sigma=pr["group_shift_sd"], dims=(*lead, "group"))
    if contrasts.shape[1] == 0:
        shape = (len(pm.modelcontext(None).coords["change"]),) * per_change + (contrasts.shape[0],)
        return alpha, gamma, pm.Deterministic("stratum_shift", pt.zeros(shape), dims=(*lead, "stratum"))
    sd = pm.HalfNormal("stratum_shift_sd", pr["stratum_shift_sd"], **({"dims": lead} if lead else {}))
    z = pm.Normal("stratum_shift_z", 0.0, 1.0, dims=(*lead, "contrast"))
    eta = pt.shape_padright(sd) * pt.dot(z, contrasts.T) if lead else sd * pt.dot(contrasts, z)
    return alpha, gamma, pm.Deterministic("stratum_shift", eta, dims=(*lead, "stratum"))


def group_draws(post) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Posterior draws of ``(group_level, group_shift, stratum_shift)`` (zeros of one level
    without a covariate)."""
    zero = np.zeros((*post["pi"].shape, 1))
    return tuple(post[k].values if k in post else zero for k in ("group_level", "group_shift", "stratum_shift"))


def _gather(gamma, idx):
    """``gamma[idx]``, or 0.0 when there is no covariate."""
    return 0.0 if isinstance(gamma, float) else gamma[idx]


def _numpyro_model(
    y,
    n,
    dom,
    z,
    logw,
    prior,
    grp=None,
    stratum=None,
    *,
    n_domains: int,
    slope: bool,
    n_groups: int = 1,
    contrasts=None,
):
    import jax.numpy as jnp  # deferred: NumPyro and JAX load in seconds (bayes extra)
    import numpyro
    import numpyro.distributions as dist
    from jax.nn import log_sigmoid
    from jax.scipy.special import logsumexp

    mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_numpyro(n_domains, slope, prior, n_groups)
    alpha, gamma, eta = group_effects_numpyro(n_groups, prior, contrasts)
    sd_i = jnp.reshape(sigma_delta[grp] if n_groups > 1 else sigma_delta, (-1, 1))  # (item or 1, 1)
    mu_i = mu_theta[dom] + _gather(alpha, grp)
    # Centred: most items carry enough data that the non-centred form mixed worse (ESS of mu_theta ~ 40 vs 1000+).
    theta = numpyro.sample("theta", dist.Normal(mu_i, sigma_theta[dom]).to_event(1))
    m = shift[dom] + _gather(gamma, grp) + _gather(eta, stratum) + b * (theta - mu_i) / sigma_theta[dom]

    def binom(yy, nn, logit):  # binomial log-likelihood without the constant coefficient
        return yy * log_sigmoid(logit) + (nn - yy) * log_sigmoid(-logit)

    y1, n1, y2, n2 = y[:, 0], n[:, 0], y[:, 1:2], n[:, 1:2]
    ll_change = logsumexp(logw + binom(y2, n2, (theta + m)[:, None] + sd_i * z), axis=1)
    ll_same = binom(y2[:, 0], n2[:, 0], theta)
    ll = binom(y1, n1, theta) + jnp.logaddexp(jnp.log1p(-pi) + ll_same, jnp.log(pi) + ll_change)
    numpyro.factor("y", jnp.sum(ll))


def change_numpyro(
    data: ModelInputs, *, slope: bool = False, prior: dict | None = None, config: SamplerConfig | None = None
):
    """Fit the paired change model with NumPyro; returns a DataTree with derived item quantities.

    ``prior`` overrides entries of ``PRIOR`` (see :func:`prior_settings`).

    Examples
    --------
    >>> from bayesrc.bayes.inputs import model_inputs
    >>> dt = change_numpyro(model_inputs(counts), config=SamplerConfig(chains=2))   # doctest: +SKIP
    >>> item_block(dt["posterior"])["dp"].mean(("chain", "draw"))                  # doctest: +SKIP
    """
    cfg = config or SamplerConfig()
    z, logw = z_grid()
    stratum = data.strata()[0] if data.n_groups > 1 else None
    model = partial(
        _numpyro_model,
        n_domains=data.n_domains,
        slope=slope,
        n_groups=data.n_groups,
        contrasts=data.stratum_contrasts(),
    )
    arrays = dict(
        y=data.y, n=data.n, dom=data.dom, z=z, logw=logw, grp=data.grp, stratum=stratum, prior=prior_arguments(prior)
    )
    dt = run_numpyro(model, arrays, cfg, data.coords, model_dims(data.n_groups))
    return _finish(dt, data, cfg.seed, slope, prior)


def change_pymc(
    data: ModelInputs, *, slope: bool = False, prior: dict | None = None, config: SamplerConfig | None = None
):
    """Fit the same model with PyMC (nutpie); same priors, names and dims as the NumPyro twin.

    Examples
    --------
    >>> dt = change_pymc(model_inputs(counts))           # doctest: +SKIP
    """
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)
    import pytensor.tensor as pt

    cfg = config or SamplerConfig()
    y, n = data.y, data.n
    z, logw = z_grid()
    with pm.Model(coords=data.coords) as model:
        mu_theta, sigma_theta, shift, sigma_delta, b, pi = hyperpriors_pymc(slope, prior, data.n_groups)
        alpha, gamma, eta = group_effects_pymc(data.n_groups, prior, data.stratum_contrasts())
        sd_i = (sigma_delta[data.grp] if data.n_groups > 1 else sigma_delta * np.ones(data.n_items))[:, None]
        mu_i = mu_theta[data.dom] + _gather(alpha, data.grp)
        theta = pm.Normal("theta", mu_i, sigma_theta[data.dom], dims="item")
        m = (
            shift[data.dom]
            + _gather(gamma, data.grp)
            + _gather(eta, data.strata()[0])
            + b * (theta - mu_i) / sigma_theta[data.dom]
        )

        def binom(yy, nn, logit):
            return yy * pt.log(pt.sigmoid(logit)) + (nn - yy) * pt.log(pt.sigmoid(-logit))

        y1, n1, y2, n2 = y[:, 0], n[:, 0], y[:, 1:2], n[:, 1:2]
        ll_change = pt.logsumexp(logw + binom(y2, n2, (theta + m)[:, None] + sd_i * z), axis=1)
        ll_same = binom(y2[:, 0], n2[:, 0], theta)
        ll = binom(y1, n1, theta) + pm.math.logaddexp(pt.log1p(-pi) + ll_same, pt.log(pi) + ll_change)
        pm.Potential("y", pt.sum(ll))
    dt = run_pymc(model, cfg)
    return _finish(dt, data, cfg.seed, slope, prior)


def _binom(yy, nn, logit):
    return yy * log_expit(logit) + (nn - yy) * log_expit(-logit)


def item_conditionals(post, data: ModelInputs, rng: np.random.Generator, chunk: int = 64) -> dict[str, np.ndarray]:
    """Exact-conditional item quantities for every posterior draw (numpy, chunked over draws).

    Given the sampled ``theta, pi`` and hyperparameters: the responsibility
    ``r_i = P(changed_i | .)``, ``P(delta_i > 0 | changed_i, .)``, and a draw of
    ``delta_i | changed_i = 1`` and of ``changed_i ~ Bernoulli(r_i)`` (on the same grid as the
    likelihood, jittered within its cell).

    Examples
    --------
    >>> c = item_conditionals(dt["posterior"].to_dataset(), data, np.random.default_rng(0))   # doctest: +SKIP
    >>> c["r"].mean((0, 1))   # P(changed) per item                                          # doctest: +SKIP
    """
    z, logw = z_grid()
    h = z[1] - z[0]
    theta = post["theta"].values
    n_chain, n_draw, n_items = theta.shape
    mu_theta, sigma_theta = post["mu_theta"].values, post["sigma_theta"].values
    shift, sigma_delta, pi = post["shift"].values, post["sigma_delta"].values, post["pi"].values
    b = post["slope"].values if "slope" in post else np.zeros_like(pi)
    alpha, gamma, eta = group_draws(post)
    th = theta.reshape(-1, n_items)
    flat = lambda a: a.reshape(n_chain * n_draw, *a.shape[2:])  # noqa: E731
    mu_t, sd_t, sh, sd_d, pp, bb, gg, aa, ee = map(
        flat, (mu_theta, sigma_theta, shift, sigma_delta, pi, b, gamma, alpha, eta)
    )
    grp = data.grp if gamma.shape[-1] > 1 else np.zeros(n_items, np.int64)
    stratum = data.strata()[0] if eta.shape[-1] > 1 else np.zeros(n_items, np.int64)
    sd_d = sd_d[:, grp] if sd_d.ndim == 2 else np.broadcast_to(sd_d[:, None], th.shape)  # per item
    y2, n2 = data.y[:, 1], data.n[:, 1]
    out = {k: np.empty_like(th) for k in ("r", "p_up", "delta")}
    out["changed"] = np.empty(th.shape, dtype=bool)
    for s0 in range(0, th.shape[0], chunk):
        sl = slice(s0, s0 + chunk)
        t = th[sl]
        m = (
            sh[sl][:, data.dom]
            + gg[sl][:, grp]
            + ee[sl][:, stratum]
            + bb[sl][:, None] * (t - mu_t[sl][:, data.dom] - aa[sl][:, grp]) / sd_t[sl][:, data.dom]
        )
        dgrid = m[..., None] + sd_d[sl][..., None] * z  # (s, item, node)
        lw = logw + _binom(y2[:, None], n2[:, None], t[..., None] + dgrid)
        ll_change = np.logaddexp.reduce(lw, axis=-1)
        ll_same = _binom(y2, n2, t)
        log_odds = np.log(pp[sl])[:, None] - np.log1p(-pp[sl])[:, None] + ll_change - ll_same
        r = expit(log_odds)
        wpost = np.exp(lw - ll_change[..., None])
        up = (wpost * share_above_zero(dgrid, sd_d[sl][..., None] * h)).sum(-1)
        # delta | changed: pick a node by its posterior weight, jitter within the cell.
        cdf = np.cumsum(wpost, axis=-1)
        u = rng.random(t.shape)[..., None]
        k = np.minimum((cdf < u).sum(-1), len(z) - 1)
        zk = z[k] + (rng.random(t.shape) - 0.5) * h
        out["r"][sl], out["p_up"][sl] = r, up
        out["delta"][sl] = m + sd_d[sl] * zk
        out["changed"][sl] = rng.random(t.shape) < r
    return {k: v.reshape(n_chain, n_draw, n_items) for k, v in out.items()}


def store_item_quantities(dt, post, c: dict, item_cell: np.ndarray, slope: bool, prior: dict | None, **attrs):
    """Write ``delta`` and ``changed`` per item and ``r``, ``p_up`` per cell (``r_cell``, ``p_up_cell``,
    with ``item_cell``) into the posterior beside ``theta``: the layout both change-model samplers
    (full and collapsed) share, in :data:`~bayesrc.bayes.draws.ITEM_DRAW_DTYPE` (``changed`` as int8).
    :func:`~bayesrc.bayes.draws.item_block` forms ``p``, ``dp`` and the per-item ``r``, ``p_up`` where read."""
    post["delta"] = (("chain", "draw", "item"), np.asarray(c["delta"], ITEM_DRAW_DTYPE))
    post["changed"] = (("chain", "draw", "item"), np.asarray(c["changed"], np.int8))
    for k in CELL_QUANTITIES:
        post[f"{k}_cell"] = (("chain", "draw", "cell"), np.asarray(c[k], ITEM_DRAW_DTYPE))
    post["item_cell"] = ("item", np.asarray(item_cell, np.int64))
    dt["posterior"] = post
    dt.attrs.update(model="change", slope=int(slope), prior=json.dumps(prior_settings(prior)), **attrs)
    return dt


def _finish(dt, data: ModelInputs, seed: int, slope: bool, prior: dict | None = None):
    """The item draws' stored quantities: delta, changed, r and P(delta > 0 | changed)
    (:func:`store_item_quantities`)."""
    post = dt["posterior"].to_dataset()
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    c = item_conditionals(post, data, rng)  # per item: in the full model r and p_up depend on the sampled theta_i
    return store_item_quantities(dt, post, c, np.arange(data.n_items), slope, prior)
