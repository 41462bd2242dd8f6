"""Bayesian additive factor model in NumPyro and PyMC: agreement with least squares,
recovery and interval coverage on simulated episodes, the two backends side by side.

Fits use the defaults a user gets (sampler, gate, escalation); the checks allow for the Monte Carlo error.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import data_path

from bayesrc.bayes import GateConfig
from bayesrc.switch import (
    FactorPriors,
    factor_data,
    fit_additive,
    fit_factor_bayes,
    load_switch,
    simulate_switch,
    switch_effects,
)
from bayesrc.switch.bayes import BayesFactorFit, fit_numpyro

WEAK = FactorPriors(pooled=False, scale_sd=1.0, mu_sd=1.0)


@pytest.fixture(scope="module")
def coqa():
    d = load_switch(data_path("switch_matrix_cells.csv")).select("coqa")
    return d, fit_additive(switch_effects(d)["delta"])


@pytest.mark.parametrize("backend", ["numpyro", "pymc"])
def test_weak_prior_posterior_means_agree_with_least_squares(coqa, backend):
    data, ls = coqa
    fit = fit_factor_bayes(data, backend=backend, priors=WEAK, seed=1)  # the defaults a user gets
    post = fit.idata.posterior
    assert post["alpha"].dims[-1] == "prefix" and post["beta"].dims[-1] == "suffix"
    assert list(post["alpha"]["prefix"].to_numpy()) == ls.models
    s = fit.summary()
    for term, ref in (("alpha", ls.alpha), ("beta", ls.beta)):
        sub = s[s["term"] == term].set_index("model")
        # Flat-ish priors + near-equal cell SEs: posterior mean ~ least squares, well
        # inside Monte Carlo error (posterior sd / sqrt(ESS) ~ 0.04 sd).
        z = (sub["mean"] - ref[sub.index]) / sub["sd"]
        assert np.abs(z).max() < 0.3, (term, z.round(2).to_dict())
    mu = s[s["term"] == "mu"].iloc[0]
    assert abs(mu["mean"] - ls.mu) < 0.3 * mu["sd"]
    # the item models' gate (bayesrc.bayes.diagnostics.gate), same keys and non-finite handling
    g = fit.gate()  # the item models' gate and thresholds
    assert g.passed, (g, fit.attempts)
    assert set(fit.diagnostics()) == {
        "max_rhat",
        "min_ess_bulk",
        "min_ess_tail",
        "divergences",
        "passed",
        "thresholds",
        "worst",
    }
    assert {"ess_bulk", "ess_tail", "mcse_mean", "r_hat"} <= set(s.columns)  # per term, from arviz_stats


@pytest.fixture(scope="module")
def episode_fits():
    """Four simulated switch matrices (6 models, 30 episodes, known α, β, γ), fitted with
    NumPyro through bayesrc.bayes.samplers; the first also with PyMC."""
    sims = [
        simulate_switch(6, 30, mu=0.03, sd_alpha=0.04, sd_beta=0.06, tau=0.02, sigma_u=0.15, sigma=0.08, seed=100 + r)
        for r in range(4)
    ]
    fds = [factor_data(s.data) for s in sims]
    fits = [
        BayesFactorFit("numpyro", fd, fit_numpyro(fd, draws=300, tune=300, chains=1, seed=r), level=0.9)
        for r, fd in enumerate(fds)
    ]
    return sims, fits


def _coverage(sim, fit):
    s = fit.summary()
    inside = []
    for term, truth in (("alpha", sim.alpha), ("beta", sim.beta)):
        sub = s[s["term"] == term]
        inside += list((sub["ci_low"].to_numpy() <= truth) & (truth <= sub["ci_high"].to_numpy()))
    cells = fit.cell_effects()
    pos = {m: i for i, m in enumerate(sim.models)}
    true_d = np.array([sim.delta[pos[a], pos[b]] for a, b in zip(cells["prefix"], cells["suffix"])])
    inside += list((cells["ci_low"].to_numpy() <= true_d) & (true_d <= cells["ci_high"].to_numpy()))
    return np.array(inside)


def test_episode_model_recovers_known_factors_with_nominal_coverage(episode_fits):
    sims, fits = episode_fits
    inside = np.concatenate([_coverage(s, f) for s, f in zip(sims, fits)])
    # 4 × (6 α + 6 β + 30 Δ cells) = 168 checks of 90% intervals.
    assert len(inside) == 168
    # nominal 0.90; binomial SD over 168 checks ~0.023 (measured 0.917 with these seeds)
    assert 0.85 <= inside.mean() <= 0.95, inside.mean()
    for sim, fit in zip(sims, fits):
        s = fit.summary()
        beta = s[s["term"] == "beta"]["mean"].to_numpy()
        alpha = s[s["term"] == "alpha"]["mean"].to_numpy()
        assert np.corrcoef(beta, sim.beta)[0, 1] > 0.8
        assert np.corrcoef(alpha, sim.alpha)[0, 1] > 0.6
        assert fit.idata.posterior["u"].dims[-1] == "episode"
        assert fit.idata.posterior["gamma"].dims[-1] == "cell"


def test_pymc_episode_model_matches_numpyro(episode_fits):
    sims, fits = episode_fits
    fd = fits[0].data
    # one chain: agreement only, no gate
    pm_fit = fit_factor_bayes(
        fd, backend="pymc", draws=300, tune=300, chains=1, seed=5, gate=GateConfig(escalate=False)
    )
    a, b = pm_fit.summary(), fits[0].summary()
    # Same model, same priors: posterior means agree within Monte Carlo error.
    diff = np.abs(a["mean"].to_numpy() - b["mean"].to_numpy())
    scale = np.maximum(a["sd"].to_numpy(), b["sd"].to_numpy())
    assert np.max(diff / scale) < 0.6, np.round(diff / scale, 2)
