"""Bayesian additive factor model for switch effects, in PyMC and NumPyro (SPEC section 4).

Same priors in both backends (``FactorPriors``)::

    μ ~ Normal(0, mu_sd)
    σ_α, σ_β, τ ~ HalfNormal(scale_sd)
    α ~ ZeroSumNormal(σ_α)   (dim prefix)      pooled prefix influence, Σα = 0
    β ~ ZeroSumNormal(σ_β)   (dim suffix)      pooled suffix susceptibility, Σβ = 0
    (sampled non-centred, α = σ_α z_α with z_α ~ ZeroSumNormal(1); ``pooled=False``
    fixes σ_α = σ_β = scale_sd)

**Cell data** (published means and 95 % intervals): for each off-diagonal cell

    Δ̂_ab ~ Normal(μ + α_a + β_b + η_b, sqrt(se_ab² − c_b + τ²)),   η_b ~ Normal(0, sqrt(c_b)),

the interaction γ_ab ~ Normal(0, τ) integrated out, with se_ab from the intervals and
c_b = Var(s̄_bb)(1 − ρ) the noise of the baseline every cell of column b shares
(``base_cov`` of :func:`switch_effects`): integrating η_b out gives Cov(Δ̂_ab, Δ̂_cb) = c_b,
so the column's common noise widens β_b instead of being read as susceptibility
(SPEC section 4; η is sampled non-centred).

**Episode data** (episode-level likelihood): every score, diagonal included,

    s_e(a→b) ~ Normal(m_b + u_e + [a≠b](μ + α_a + β_b + γ_ab), σ),
    m_b ~ Normal(0, base_sd),  u_e ~ Normal(0, σ_u),  γ_ab ~ Normal(0, τ),
    σ_u, σ ~ HalfNormal(noise_sd)

(u_e: episode difficulty shared by all cells -- the pairing; γ and u non-centred).
Both return an ArviZ DataTree with named dims ``prefix``, ``suffix``, ``cell``,
``episode``; :func:`diagnostics` reports R-hat, bulk/tail ESS and divergences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd
import xarray as xr

from bayesrc.bayes.diagnostics import gate
from bayesrc.bayes.gating import sample_gated
from bayesrc.bayes.samplers import SamplerConfig, run_numpyro, run_pymc
from bayesrc.bayes.summaries import draws_summary
from bayesrc.config import GateConfig, releases_jax_caches
from bayesrc.switch.data import SwitchData
from bayesrc.switch.matrix import switch_effects

BACKENDS: tuple[str, ...] = ("numpyro", "pymc")


@dataclass(frozen=True)
class FactorPriors:
    """Prior scales of the Bayesian factor model (SPEC 8): μ ~ Normal(0, mu_sd), τ_α, τ_β ~
    HalfNormal(scale_sd), the baseline and noise scales; ``pooled=False`` fixes α, β's scale.

    Examples
    --------
    >>> FactorPriors(scale_sd=0.25).mu_sd
    1.0
    """

    mu_sd: float = 1.0
    scale_sd: float = 0.5
    base_sd: float = 1.0
    noise_sd: float = 1.0
    pooled: bool = True  # False: α, β ~ ZeroSumNormal(scale_sd) with a fixed (weak) scale


@dataclass(frozen=True)
class FactorData:
    """Arrays the models condition on (built by :func:`factor_data`).

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch
    >>> factor_data(simulate_switch(4, 30, seed=3).data).kind
    'episodes'
    """

    kind: str  # "cells" | "episodes"
    models: list[str]
    y: np.ndarray
    prefix_idx: np.ndarray
    suffix_idx: np.ndarray
    se: np.ndarray | None = None  # cells
    base_var: np.ndarray | None = None  # cells: c_b per column (shared-baseline variance)
    episode_idx: np.ndarray | None = None  # episodes
    episodes: list[str] = field(default_factory=list)
    cell_labels: list[str] = field(default_factory=list)  # off-diagonal cells, row-major
    benchmark: str = ""

    @property
    def k(self) -> int:
        return len(self.models)

    @property
    def cell_idx(self) -> np.ndarray:
        """Index of each row's off-diagonal cell (−1 on the diagonal)."""
        k = self.k
        a, b = self.prefix_idx, self.suffix_idx
        idx = a * (k - 1) + b - (b > a)
        return np.where(a == b, -1, idx)


def _cell_labels(models: list[str]) -> list[str]:
    return [f"{a} -> {b}" for a in models for b in models if a != b]


def factor_data(data: SwitchData, *, pairing_rho: float = 0.0) -> FactorData:
    """Cell data -> off-diagonal Δ̂ with SEs (see :func:`switch_effects` for
    ``pairing_rho``); episode data -> every score row.

    Examples
    --------
    >>> from bayesrc.switch import simulate_switch, switch_effects
    >>> sim = simulate_switch(4, 30, seed=3)
    >>> fd = factor_data(sim.data)
    >>> fd.models
    ['model-0', 'model-1', 'model-2', 'model-3']
    """
    if len(data.benchmarks) != 1:
        raise ValueError(f"select one benchmark first; have {data.benchmarks}")
    bench = data.benchmarks[0]
    models = data.models[bench]
    pos = {m: i for i, m in enumerate(models)}
    if data.kind == "cells":
        eff = switch_effects(data, pairing_rho=pairing_rho)
        df = eff[["delta", "se"]].to_dataframe().reset_index()
        df = df[(df["prefix"] != df["suffix"]) & np.isfinite(df["delta"])]
        base = np.nan_to_num(eff["base_cov"].to_numpy())
        si = df["suffix"].map(pos).to_numpy()
        se = df["se"].to_numpy(float)
        return FactorData(
            "cells",
            models,
            df["delta"].to_numpy(float),
            df["prefix"].map(pos).to_numpy(),
            si,
            se=se,
            base_var=base,
            cell_labels=_cell_labels(models),
            benchmark=bench,
        )
    df = data.frame
    episodes = list(dict.fromkeys(df["episode"]))
    epos = {e: i for i, e in enumerate(episodes)}
    return FactorData(
        "episodes",
        models,
        df["score"].to_numpy(float),
        df["prefix"].map(pos).to_numpy(),
        df["suffix"].map(pos).to_numpy(),
        episode_idx=df["episode"].map(epos).to_numpy(),
        episodes=episodes,
        cell_labels=_cell_labels(models),
        benchmark=bench,
    )


def _coords(fd: FactorData) -> dict[str, list[str]]:
    coords = {"prefix": fd.models, "suffix": fd.models, "cell": fd.cell_labels}
    if fd.kind == "episodes":
        coords["episode"] = fd.episodes
    return coords


DIMS = {
    "eta": ["suffix"],
    "eta_z": ["suffix"],
    "alpha": ["prefix"],
    "beta": ["suffix"],
    "alpha_z": ["prefix"],
    "beta_z": ["suffix"],
    "gamma": ["cell"],
    "gamma_z": ["cell"],
    "m": ["suffix"],
    "u": ["episode"],
    "u_z": ["episode"],
}


# ----------------------------------------------------------------------------- NumPyro
def numpyro_model(
    prefix_idx,
    suffix_idx,
    cell_idx,
    episode_idx=None,
    se=None,
    y=None,
    base_var=None,
    *,
    k: int,
    n_episodes: int = 0,
    priors: FactorPriors = FactorPriors(),
) -> None:
    """The factor model as a NumPyro model function (see module docstring).

    Arrays are arguments (so one compiled sampler serves many data sets of the same
    shape); ``se`` given -> cell likelihood, else the episode likelihood.
    """
    import jax.numpy as jnp  # deferred: NumPyro and JAX load in seconds (bayes extra)
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, priors.mu_sd))
    if priors.pooled:
        s_a = numpyro.sample("sigma_alpha", dist.HalfNormal(priors.scale_sd))
        s_b = numpyro.sample("sigma_beta", dist.HalfNormal(priors.scale_sd))
    else:
        s_a = s_b = priors.scale_sd
    tau = numpyro.sample("tau", dist.HalfNormal(priors.scale_sd))
    # Non-centred: α = σ_α · z, z ~ ZeroSumNormal(1) (same distribution, no funnel).
    alpha = numpyro.deterministic("alpha", s_a * numpyro.sample("alpha_z", dist.ZeroSumNormal(1.0, event_shape=(k,))))
    beta = numpyro.deterministic("beta", s_b * numpyro.sample("beta_z", dist.ZeroSumNormal(1.0, event_shape=(k,))))
    a, b = prefix_idx, suffix_idx
    if se is not None:
        c = jnp.zeros(k) if base_var is None else base_var
        eta = numpyro.deterministic(
            "eta", jnp.sqrt(c) * numpyro.sample("eta_z", dist.Normal(0.0, 1.0).expand([k]).to_event(1))
        )
        within = jnp.clip(se**2 - c[b], 1e-12, None)  # the cell's own noise beyond its column's shared baseline
        numpyro.sample("obs", dist.Normal(mu + alpha[a] + beta[b] + eta[b], jnp.sqrt(within + tau**2)), obs=y)
        return
    gamma_z = numpyro.sample("gamma_z", dist.Normal(0.0, 1.0).expand([k * (k - 1)]).to_event(1))
    gamma = numpyro.deterministic("gamma", tau * gamma_z)
    m = numpyro.sample("m", dist.Normal(0.0, priors.base_sd).expand([k]).to_event(1))
    s_u = numpyro.sample("sigma_u", dist.HalfNormal(priors.noise_sd))
    sigma = numpyro.sample("sigma", dist.HalfNormal(priors.noise_sd))
    u_z = numpyro.sample("u_z", dist.Normal(0.0, 1.0).expand([n_episodes]).to_event(1))
    u = numpyro.deterministic("u", s_u * u_z)
    switch = jnp.where(cell_idx >= 0, mu + alpha[a] + beta[b] + gamma[jnp.maximum(cell_idx, 0)], 0.0)
    numpyro.sample("obs", dist.Normal(m[b] + u[episode_idx] + switch, sigma), obs=y)


def _config(config=None, **sampler):
    """A :class:`bayesrc.bayes.SamplerConfig`: ``config``, or its defaults (every command's) with overrides."""
    return config or SamplerConfig(**sampler)


def fit_numpyro(fd: FactorData, *, priors: FactorPriors = FactorPriors(), config=None, **sampler):
    """NUTS in NumPyro through :func:`bayesrc.bayes.samplers.run_numpyro` (the one sampler
    layer: parallel chains, boolean ``diverging``, compile cache); returns an ArviZ DataTree.

    ``config`` (a :class:`~bayesrc.bayes.SamplerConfig`) or ``draws``, ``tune``, ``chains``,
    ``seed``, ``target_accept`` overriding :class:`~bayesrc.bayes.SamplerConfig`'s defaults.
    """
    model = partial(numpyro_model, k=fd.k, n_episodes=len(fd.episodes), priors=priors)
    kwargs = {
        "prefix_idx": fd.prefix_idx,
        "suffix_idx": fd.suffix_idx,
        "cell_idx": fd.cell_idx,
        "episode_idx": fd.episode_idx,
        "se": fd.se,
        "y": fd.y,
        "base_var": fd.base_var,
    }
    keep = (
        ("alpha", "beta", "alpha_z", "beta_z", "eta", "eta_z")
        if fd.kind == "cells"
        else tuple(k for k in DIMS if not k.startswith("eta"))
    )
    dims = {k: v for k, v in DIMS.items() if k in keep}
    return run_numpyro(model, kwargs, _config(config, **sampler), _coords(fd), dims)


# ----------------------------------------------------------------------------- PyMC
def pymc_model(fd: FactorData, priors: FactorPriors = FactorPriors()):
    """The factor model as a PyMC model (same priors as :func:`numpyro_model`)."""
    import pymc as pm  # deferred: PyMC loads in ~2 s (bayes extra)
    import pytensor.tensor as pt

    with pm.Model(coords=_coords(fd)) as model:
        mu = pm.Normal("mu", 0.0, priors.mu_sd)
        if priors.pooled:
            s_a = pm.HalfNormal("sigma_alpha", priors.scale_sd)
            s_b = pm.HalfNormal("sigma_beta", priors.scale_sd)
        else:
            s_a = s_b = priors.scale_sd
        tau = pm.HalfNormal("tau", priors.scale_sd)
        alpha = pm.Deterministic("alpha", s_a * pm.ZeroSumNormal("alpha_z", sigma=1.0, dims="prefix"), dims="prefix")
        beta = pm.Deterministic("beta", s_b * pm.ZeroSumNormal("beta_z", sigma=1.0, dims="suffix"), dims="suffix")
        a, b = fd.prefix_idx, fd.suffix_idx
        if fd.kind == "cells":
            c = np.zeros(fd.k) if fd.base_var is None else np.asarray(fd.base_var, float)
            eta = pm.Deterministic("eta", np.sqrt(c) * pm.Normal("eta_z", 0.0, 1.0, dims="suffix"), dims="suffix")
            within = np.clip(fd.se**2 - c[b], 1e-12, None)  # the cell's own noise beyond its column's shared baseline
            pm.Normal("obs", mu + alpha[a] + beta[b] + eta[b], pt.sqrt(within + tau**2), observed=fd.y)
            return model
        gamma_z = pm.Normal("gamma_z", 0.0, 1.0, dims="cell")
        gamma = pm.Deterministic("gamma", tau * gamma_z, dims="cell")
        m = pm.Normal("m", 0.0, priors.base_sd, dims="suffix")
        s_u = pm.HalfNormal("sigma_u", priors.noise_sd)
        sigma = pm.HalfNormal("sigma", priors.noise_sd)
        u_z = pm.Normal("u_z", 0.0, 1.0, dims="episode")
        u = pm.Deterministic("u", s_u * u_z, dims="episode")
        cidx = fd.cell_idx
        off = (cidx >= 0).astype(float)
        switch = off * (mu + alpha[a] + beta[b] + gamma[np.maximum(cidx, 0)])
        pm.Normal("obs", m[b] + u[fd.episode_idx] + switch, sigma, observed=fd.y)
    return model


def fit_pymc(fd: FactorData, *, priors: FactorPriors = FactorPriors(), config=None, **sampler):
    """NUTS in PyMC (nutpie) through :func:`bayesrc.bayes.samplers.run_pymc`; returns an ArviZ DataTree."""
    return run_pymc(pymc_model(fd, priors), _config(config, **sampler))


# ----------------------------------------------------------------------------- results
GATED = ("mu", "alpha", "beta", "tau")


def diagnostics(idata, var_names: tuple[str, ...] = GATED, config: GateConfig | None = None):
    """The convergence gate of :func:`bayesrc.bayes.diagnostics.gate` on ``var_names``
    (same keys, thresholds (``config``, default the item models' :class:`GateConfig`) and non-finite
    handling as the item models)."""
    return gate(idata, list(var_names), config)


@dataclass
class BayesFactorFit:
    """A Bayesian factor-model fit: DataTree plus tidy summaries.

    Examples
    --------
    >>> res = fit_factor_numpyro(factor_data(sim.data))  # doctest: +SKIP
    >>> res.summary()[["term", "mean", "ci_low", "ci_high"]]  # doctest: +SKIP
    """

    backend: str
    data: FactorData
    idata: object
    level: float = 0.95
    attempts: list = field(default_factory=list)  # one record per sampling attempt (gate values, settings)

    def posterior(self, name: str) -> xr.DataArray:
        da = self.idata.posterior[name]
        return da if isinstance(da, xr.DataArray) else xr.DataArray(da)

    def summary(self) -> pd.DataFrame:
        """term, model, mean, sd, ci_low, ci_high (equal-tailed, ``level``), ess_bulk, ess_tail,
        mcse_mean, r_hat for μ, τ, α and β (arviz_stats)."""
        parts = []
        for name in ("mu", "tau", "alpha", "beta"):
            t = draws_summary(self.posterior(name), prob=self.level)
            dim = {"alpha": "prefix", "beta": "suffix"}.get(name)
            t.insert(0, "model", t.pop(dim).astype(str) if dim else "")
            t.insert(0, "term", name)
            parts.append(t)
        return pd.concat(parts, ignore_index=True)

    def cell_draws(self) -> xr.DataArray:
        """Draws of each off-diagonal Δ_ab = μ + α_a + β_b (+ γ_ab with episode data), dims (chain, draw, cell)."""
        post = self.idata.posterior
        a = self.posterior("alpha").rename(prefix="p_")
        b = self.posterior("beta").rename(suffix="s_")
        d = self.posterior("mu") + a + b  # chain x draw x prefix x suffix
        k = self.data.k
        off = ~np.eye(k, dtype=bool)
        pi, si = np.nonzero(off)  # row-major over a != b, the order of the gamma cells
        cells = d.isel(p_=xr.DataArray(pi, dims="cell"), s_=xr.DataArray(si, dims="cell")).drop_vars(
            ["p_", "s_"], errors="ignore"
        )
        cells = cells.assign_coords(cell=self.data.cell_labels)
        if "gamma" in post:
            cells = cells + self.posterior("gamma").assign_coords(cell=self.data.cell_labels)
        return cells

    def cell_effects(self) -> pd.DataFrame:
        """Posterior of each off-diagonal Δ_ab: prefix, suffix, mean, sd, ci_low, ci_high, ess_bulk, ...
        (arviz_stats)."""
        t = draws_summary(self.cell_draws(), prob=self.level)
        k = self.data.k
        pi, si = np.nonzero(~np.eye(k, dtype=bool))
        m = self.data.models
        t.insert(0, "suffix", [m[j] for j in si])
        t.insert(0, "prefix", [m[i] for i in pi])
        return t.drop(columns="cell")

    def gate(self, config: GateConfig | None = None):
        """The convergence gate (:func:`bayesrc.bayes.diagnostics.gate`, ``config`` default
        :class:`GateConfig`'s) of μ, α, β, τ."""
        return diagnostics(self.idata, config=config)

    def diagnostics(self) -> dict:
        return self.gate().to_dict()

    def plot_forest(self, var_names: tuple[str, ...] = ("alpha", "beta"), **kwargs):
        """Forest plot (arviz-plots) of the prefix and suffix factors; returns the PlotCollection."""
        import arviz_plots as azp  # deferred: arviz_plots loads matplotlib, ~4 s (bayes extra)

        kwargs.setdefault("backend", "matplotlib")
        return azp.plot_forest(self.idata, var_names=list(var_names), combined=True, **kwargs)

    def to_dict(self) -> dict:
        s = self.summary()
        g = self.gate()
        out: dict = {
            "backend": self.backend,
            "likelihood": self.data.kind,
            "level": self.level,
            "diagnostics": g.to_dict(),
            "passed": g.passed,
        }
        cols = [c for c in s.columns if c not in ("term", "model")]
        for term in ("mu", "tau"):
            r = s[s["term"] == term].iloc[0]
            out[term] = {c: r[c] for c in cols}
        for term in ("alpha", "beta"):
            sub = s[s["term"] == term]
            out[term] = {r["model"]: {c: r[c] for c in cols} for _, r in sub.iterrows()}
        out["terms"] = {
            f"{r['term']}[{r['model']}]" if r["model"] else r["term"]: {c: r[c] for c in cols} for _, r in s.iterrows()
        }
        out["cells"] = self.cell_effects().to_dict(orient="records")
        return out


@releases_jax_caches
def fit_factor_bayes(
    data: SwitchData | FactorData,
    *,
    backend: str = "numpyro",
    priors: FactorPriors = FactorPriors(),
    config=None,
    gate: GateConfig | None = None,
    **sampler,
) -> BayesFactorFit:
    """Fit the Bayesian additive model with ``backend`` in {"numpyro", "pymc"}.

    Sampler settings: ``config`` (a :class:`bayesrc.bayes.SamplerConfig`) or keyword overrides of
    :class:`~bayesrc.bayes.SamplerConfig`'s defaults (``draws``, ``tune``, ``chains``, ``seed``,
    ``target_accept``). Gated like the item models (R-hat <= 1.01, ESS >= 400, no divergences on
    mu, alpha, beta, tau; ``gate``, a :class:`GateConfig`, default its defaults); a failed gate is sampled
    again with longer warm-up, more draws and a higher target acceptance (unless ``gate.escalate`` is off;
    :func:`bayesrc.bayes.gating.escalated_config`), every attempt in ``attempts``.

    Examples
    --------
    >>> from bayesrc.switch import load_switch, fit_factor_bayes
    >>> fit = fit_factor_bayes(load_switch("cells.csv").select("coqa"), draws=500)   # doctest: +SKIP
    >>> fit.summary(); fit.plot_forest()                                            # doctest: +SKIP
    """
    fd = data if isinstance(data, FactorData) else factor_data(data)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    fn = fit_numpyro if backend == "numpyro" else fit_pymc
    idata, _, attempts, _ = sample_gated(
        partial(fn, fd, priors=priors), list(GATED), _config(config, **sampler), gate or GateConfig()
    )
    return BayesFactorFit(backend, fd, idata, attempts=attempts)
