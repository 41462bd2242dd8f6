"""Fast checks of the Bayesian layer's pure functions (no MCMC)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from bayesrc.bayes import agreement_table, cohen_kappa, model_inputs, select, sufficient_stats
from bayesrc.bayes.change import z_grid
from bayesrc.data import item_counts, simulate_pair


def kappa_reference(a, b):
    """Cohen's kappa from the two label vectors directly (independent of any table)."""
    a, b = np.asarray(a), np.asarray(b)
    labels = np.union1d(a, b)
    p_o = np.mean(a == b)
    p_e = sum(np.mean(a == c) * np.mean(b == c) for c in labels)
    return (p_o - p_e) / (1 - p_e)


def test_cohen_kappa_matches_independent_formula():
    rng = np.random.default_rng(0)
    classes = np.array(["improved", "no_change", "deteriorated"], dtype=object)
    a = classes[rng.integers(0, 3, 400)]
    b = np.where(rng.random(400) < 0.6, a, classes[rng.integers(0, 3, 400)])
    tab = agreement_table(a, b)
    assert tab.to_numpy().sum() == 400
    assert cohen_kappa(tab.to_numpy()) == pytest.approx(kappa_reference(a, b), abs=1e-12)
    assert cohen_kappa(np.diag([5, 7, 3])) == pytest.approx(1.0)


def test_crosscheck_estimates_rcis_sign_and_material_false_discoveries_by_hand():
    """RCI's estimated FDP: mean over RCI's flags of 1 - P(change in the flagged direction), and
    of 1 - P(change of at least delta_min in that direction) for material false discoveries."""
    import pandas as pd

    from bayesrc.bayes.summaries import crosscheck

    items = pd.DataFrame(
        {
            "item_id": ["a", "b", "c", "d"],
            "domain": "x",
            "dp_mean": [0.3, 0.1, -0.2, 0.0],
            "bayes_class": ["improved", "no_change", "deteriorated", "no_change"],
            "p_improve": [0.99, 0.70, 0.01, 0.4],
            "p_deteriorate": [0.01, 0.10, 0.97, 0.4],
            "p_improve_material": [0.95, 0.30, 0.00, 0.1],
            "p_deteriorate_material": [0.00, 0.05, 0.90, 0.1],
        }
    )
    rci = pd.DataFrame(
        {
            "item_id": ["a", "b", "c", "d"],
            "class": ["improved", "improved", "deteriorated", "no_change"],
            "p_v1": [0.2, 0.4, 0.8, 0.5],
            "p_v2": [0.6, 0.8, 0.3, 0.5],
            "n_v1": 10,
            "n_v2": 10,
        }
    )
    cc, _ = crosscheck(items, rci, s_diff=0.15)
    assert cc["rci_n_flagged"] == 3
    assert cc["rci_estimated_fdp"] == pytest.approx(((1 - 0.99) + (1 - 0.70) + (1 - 0.97)) / 3)
    assert cc["rci_estimated_fdp_material"] == pytest.approx(((1 - 0.95) + (1 - 0.30) + (1 - 0.90)) / 3)


def test_change_log_prior_moves_between_priors_as_numpyros_own_densities():
    """Independent code: the NumPyro model's hyperprior sites (log_density) under two prior
    settings differ per draw by what change_log_prior says, every site and setting included
    (InvGamma and HalfNormal sigma_delta, ZeroSumNormal level effects, the slope)."""
    import jax
    import xarray as xr
    from numpyro.infer.util import log_density

    from bayesrc.bayes.change import (
        PRIOR,
        change_log_prior,
        group_effects_numpyro,
        hyperpriors_numpyro,
        prior_arguments,
    )
    from bayesrc.bayes.inputs import interaction_basis

    q = interaction_basis(np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 2, 0, 1, 2]))
    rng = np.random.default_rng(8)
    centred = lambda n: (lambda x: x - x.mean())(rng.normal(0, 0.7, n))  # noqa: E731  a ZeroSumNormal draw
    draws = [
        {
            "mu_theta": rng.normal(0, 1, 2),
            "sigma_theta": rng.gamma(2, 0.5, 2),
            "shift": rng.normal(0, 1, 2),
            "sigma_delta": rng.gamma(2, 0.4, 3),
            "slope": rng.normal(0, 0.3),
            "pi": rng.beta(3, 2),
            "group_level": centred(3),
            "group_shift": centred(3),
            "stratum_shift_sd": rng.gamma(2, 0.2),
            "stratum_shift_z": rng.normal(0, 1, q.shape[1]),
        }
        for _ in range(5)
    ]

    def model(prior):  # the prior as the sampler takes it: traced arguments
        hyperpriors_numpyro(2, True, prior, n_groups=3)
        group_effects_numpyro(3, prior, contrasts=q)

    post = xr.Dataset(
        {
            k: (
                ("chain", "draw", *[f"{k}_dim{i}" for i in range(np.ndim(draws[0][k]))]),
                np.array([[d[k] for d in draws]]),
            )
            for k in draws[0]
        }
    )
    settings = [
        {},
        {
            k: PRIOR[k] * 2.0
            for k in (
                "mu_theta_sd",
                "sigma_theta_sd",
                "shift_sd",
                "sigma_delta_scale",
                "slope_sd",
                "group_level_sd",
                "group_shift_sd",
                "stratum_shift_sd",
            )
        },
        {"pi_a": 1.0, "pi_b": 9.0},
        {"sigma_delta_sd": 0.7},
    ]
    with jax.default_device(jax.devices("cpu")[0]):
        theirs = np.array(
            [[float(log_density(model, (prior_arguments(p),), {}, d)[0]) for d in draws] for p in settings]
        )
    ours = np.array([change_log_prior(post, p) for p in settings])
    assert np.allclose(theirs[1:] - theirs[0], ours[1:] - ours[0], atol=1e-4)
    assert not np.allclose(ours[1:] - ours[0], 0.0)


def test_reweighting_to_another_prior_gives_the_conjugate_posterior():
    """Known answer: draws of pi ~ Beta(5, 2) (prior Beta(4, 1) x likelihood pi (1 - pi)) moved to the
    prior Beta(2, 2) are the posterior Beta(3, 3), mean 1/2; to the fitted prior, the draws themselves.
    Items changed with probability r = pi (upward): P(improve) follows pi's posterior mean."""
    import pandas as pd
    import xarray as xr

    from bayesrc.bayes.change import prior_settings
    from bayesrc.bayes.diagnostics import Diagnostics
    from bayesrc.bayes.fit_result import BayesFit
    from bayesrc.sensitivity.bayesian import fitted_posterior, reweighted_posterior

    rng = np.random.default_rng(5)
    pi = rng.beta(5, 2, size=(4, 4000))
    r = np.repeat(pi[..., None], 2, axis=-1)
    dims = ("chain", "draw", "item")
    post = xr.Dataset(
        {
            "pi": (("chain", "draw"), pi),
            "sigma_delta": (("chain", "draw"), np.full_like(pi, 0.5)),
            "r": (dims, r),
            "p_up": (dims, np.ones_like(r)),
            "dp": (dims, np.where(r > 0.5, 0.1, 0.0)),
        }
    )
    items = pd.DataFrame(
        {
            "item_id": ["a", "b"],
            "p_improve": r.mean((0, 1)),
            "p_deteriorate": [0.0, 0.0],
            "rci_class": ["improved", "no_change"],
        }
    )
    diag = Diagnostics(1.0, 16000.0, 16000.0, 0, True, {"max_rhat": 1.01, "min_ess": 400.0, "max_divergences": 0}, "")
    payload = {
        "model": "change",
        "diagnostics": diag.to_dict(),
        "crosscheck": {"rci_estimated_fdp": 1 - float(pi.mean())},
        "params": {"prior": prior_settings({}), "rope": None, "delta_min": 0.05},
    }
    res = BayesFit(payload, {"items": items}, xr.DataTree.from_dict({"posterior": post}))
    same = reweighted_posterior(res, {})
    own = fitted_posterior(res)
    assert same.pi_mean == pytest.approx(own.pi_mean, abs=1e-12) and same.rci_estimated_fdp == pytest.approx(
        own.rci_estimated_fdp, abs=1e-12
    )
    assert np.allclose(same.items["p_improve"], own.items["p_improve"]) and same.pareto_k == 0.0 and same.gate_passed
    moved = reweighted_posterior(res, {"pi_a": 2.0, "pi_b": 2.0})
    assert moved.pi_mean == pytest.approx(0.5, abs=0.01) and moved.rci_estimated_fdp == pytest.approx(0.5, abs=0.01)
    assert moved.items["p_improve"].tolist() == pytest.approx([0.5, 0.5], abs=0.01)
    assert moved.pareto_k < 0.7 and 400 < moved.ess < 16000 * 0.5 and moved.gate_passed and moved.method == "reweighted"
    # Beta(1, 9) puts the posterior (Beta(2, 10)) where the draws hardly go: the weights fail their gate
    far = reweighted_posterior(res, {"pi_a": 1.0, "pi_b": 9.0})
    assert far.pareto_k > 0.7 and not far.gate_passed


def test_prior_sensitivity_of_rcis_estimated_fdp_matches_the_power_scaled_posterior():
    """Known answer: posterior pi ~ Beta(5, 2) = prior Beta(4, 1) x likelihood pi (1 - pi); an RCI flag whose
    item changed with probability r = pi (upward for sure when changed) is false with 1 - pi. Raising the prior
    to alpha gives the posterior Beta(4 alpha + 1, alpha + 1): E[1 - pi] = 0.364 at alpha = 0.5, 0.286
    unscaled, 0.2 at alpha = 2. A fixed sigma_delta cancels from the weights."""
    import xarray as xr

    from bayesrc.bayes.change import STRUCTURE_SITES, change_log_prior
    from bayesrc.bayes.summaries import rci_fdp_prior_sensitivity

    rng = np.random.default_rng(4)
    pi = rng.beta(5, 2, size=(4, 2000))
    r = np.repeat(pi[..., None], 3, axis=-1)  # three items, the same r
    dims = ("chain", "draw", "item")
    post = xr.Dataset(
        {
            "pi": (("chain", "draw"), pi),
            "sigma_delta": (("chain", "draw"), np.full_like(pi, 0.5)),
            "r": (dims, r),
            "p_up": (dims, np.ones_like(r)),
            "dp": (dims, np.where(r > 0.5, 0.1, 0.0)),
        }
    )
    flags = np.array(["improved", "improved", "no_change"])
    s = rci_fdp_prior_sensitivity(post, flags, change_log_prior(post, sites=STRUCTURE_SITES), alphas=(0.5, 1.0, 2.0))
    assert s["rci_estimated_fdp"] == pytest.approx([1 - 3.5 / 5.5, 1 - 5 / 7, 1 - 8 / 10], abs=0.01)
    # alpha = 1: no reweighting
    assert s["rci_estimated_fdp_material"][1] == pytest.approx(float((pi <= 0.5).mean()), abs=1e-9)
    assert max(s["pareto_k"]) < 0.7 and s["sensitive"] is True
    # no flag: nothing to estimate
    none = rci_fdp_prior_sensitivity(post, np.array(["no_change"] * 3), change_log_prior(post, sites=STRUCTURE_SITES))
    assert none["rci_estimated_fdp"] is None and none["sensitive"] is None


def test_interval_of_rcis_fdp_is_the_binomial_of_independent_false_flags():
    """Known answer: 20 flagged items, each (independently in every draw) unchanged with probability
    0.25, so a draw's false proportion is Binomial(20, 0.25) / 20: 90% interval 0.10-0.40 (its 5% and
    95% quantiles 2 and 8 of 20), mean 0.25 = the Rao-Blackwellised point estimate. A material
    false flag needs |dp| < delta_min too: changed items move by 0.03 on 5 of the 20."""
    import pandas as pd
    import xarray as xr

    from bayesrc.bayes.summaries import crosscheck, direction_draws, flag_errors, rci_fdp_interval

    rng = np.random.default_rng(5)
    changed = rng.random((2, 4000, 20)) >= 0.25
    step = np.where(np.arange(20) < 5, 0.03, 0.2)
    dims = ("chain", "draw", "item")
    post = xr.Dataset(
        {
            "r": (dims, np.full(changed.shape, 0.75)),
            "p_up": (dims, np.ones(changed.shape)),
            "dp": (dims, changed * step),
        }
    )
    flags = np.array(["improved"] * 20)
    got = rci_fdp_interval(post, flags)
    assert got["rci_estimated_fdp_interval90"] == pytest.approx([0.10, 0.40], abs=1e-9)
    # material: 5 items always false, the other 15 false when unchanged: (5 + Binomial(15, 0.25)) / 20
    lo, hi = stats.binom(15, 0.25).ppf([0.05, 0.95])
    assert got["rci_estimated_fdp_material_interval90"] == pytest.approx([(5 + lo) / 20, (5 + hi) / 20], abs=1e-9)
    # the draws' mean is crosscheck's Rao-Blackwellised estimate (up to Monte Carlo error)
    items = pd.DataFrame(
        {
            "item_id": range(20),
            **{k: v.mean(0) for k, v in direction_draws(post, 20).items()},
            "bayes_class": "no_change",
            "domain": "x",
            "dp_mean": 0.1,
        }
    )
    rci = pd.DataFrame({"item_id": range(20), "class": flags, "p_v1": 0.4, "p_v2": 0.6, "n_v1": 10, "n_v2": 10})
    point = crosscheck(items, rci, s_diff=0.1)[0]["rci_estimated_fdp"]
    per_draw, _ = flag_errors(direction_draws(post, 20, rao_blackwell=False), flags)
    assert point == pytest.approx(0.25) and per_draw.mean() == pytest.approx(point, abs=0.005)
    # no flag: no interval
    assert rci_fdp_interval(post, np.array(["no_change"] * 20)) == {
        "rci_estimated_fdp_interval90": None,
        "rci_estimated_fdp_material_interval90": None,
    }


def test_flagged_errors_equal_flag_errors_over_every_items_direction_draws():
    """RCI's false flags per draw from the flagged items' draws alone equal those from every item's,
    with and without Rao-Blackwellisation (the unflagged items' draws are never read)."""
    import xarray as xr

    from bayesrc.bayes.summaries import direction_draws, flag_errors, flagged_errors

    rng = np.random.default_rng(6)
    dims, shape = ("chain", "draw", "item"), (2, 300, 40)
    post = xr.Dataset(
        {
            "r": (dims, rng.random(shape)),
            "p_up": (dims, rng.random(shape)),
            "dp": (dims, rng.normal(0, 0.1, shape) * (rng.random(shape) < 0.5)),
        }
    )
    flags = rng.choice(np.array(["improved", "deteriorated", "no_change", "excluded"], dtype=object), 40)
    for rao_blackwell in (True, False):
        whole = flag_errors(direction_draws(post, 40, delta_min=0.05, rao_blackwell=rao_blackwell), flags)
        got = flagged_errors(post, flags, delta_min=0.05, rao_blackwell=rao_blackwell)
        for a, b in zip(got, whole):
            np.testing.assert_allclose(a, b, rtol=1e-12)
    assert np.isnan(flagged_errors(post, np.array(["no_change"] * 40))[0]).all()


def test_fdr_selection_is_largest_set_with_mean_error_below_q():
    rng = np.random.default_rng(1)
    p_imp = rng.beta(0.5, 0.5, 300) * 0.5
    p_det = rng.beta(0.5, 0.5, 300) * 0.5
    p_imp[:40] = 0.99
    for q in (0.05, 0.10):
        cls, s = select(p_imp, p_det, rule="fdr", fdr=q)
        err = 1 - np.maximum(p_imp, p_det)
        flagged = cls != "no_change"
        assert err[flagged].mean() <= q + 1e-12
        assert s["expected_false"] == pytest.approx(err[flagged].sum())
        # Adding the next-best item would break the bound (largest such set).
        rest = np.sort(err[~flagged])
        if rest.size:
            assert (err[flagged].sum() + rest[0]) / (flagged.sum() + 1) > q
        # Flagged items are the most certain ones.
        if flagged.any() and (~flagged).any():
            assert err[flagged].max() <= err[~flagged].min()
    cls, s = select(p_imp, p_det, rule="threshold", threshold=0.975)
    assert s["n_improved"] == 40 and s["n_deteriorated"] == 0


def test_sufficient_stats_reproduce_betabinomial_likelihood():
    s = simulate_pair(300, 10, seed=3)
    d = model_inputs(item_counts(s.trials_v1, s.trials_v2))
    dd, vv, nn, yy, w = sufficient_stats(d)
    assert w.sum() == 2 * d.n_items and len(w) <= d.n_domains * 2 * 11
    a = np.array([[0.4, 0.7]] * d.n_domains) + np.arange(d.n_domains)[:, None] * 0.1
    b = 1.3 - a / 2
    full = sum(stats.betabinom.logpmf(d.y[:, v], d.n[:, v], a[d.dom, v], b[d.dom, v]).sum() for v in (0, 1))
    from scipy.special import betaln, gammaln

    coef = sum(
        (gammaln(d.n[:, v] + 1) - gammaln(d.y[:, v] + 1) - gammaln(d.n[:, v] - d.y[:, v] + 1)).sum() for v in (0, 1)
    )
    compact = np.sum(w * (betaln(a[dd, vv] + yy, b[dd, vv] + nn - yy) - betaln(a[dd, vv], b[dd, vv])))
    assert compact + coef == pytest.approx(full, rel=1e-10)


def test_conjugate_p_draws_are_the_beta_posterior_of_each_item_and_version():
    """Per (domain, version) block draws vs scipy's Beta(a + y, b + n - y), a and b differing by block."""
    from bayesrc.bayes import conjugate_p

    sim = simulate_pair(12, 6, seed=2, domains=("x", "y", "z"))
    d = model_inputs(item_counts(sim.trials_v1, sim.trials_v2))
    mu = np.array([[0.2, 0.7], [0.5, 0.4], [0.9, 0.1]])  # (domain, version)
    kappa = np.array([[0.5, 3.0], [8.0, 1.0], [2.0, 0.8]])
    n_draw = 3000
    p = conjugate_p(
        np.broadcast_to(mu, (2, n_draw, 3, 2)), np.broadcast_to(kappa, (2, n_draw, 3, 2)), d, np.random.default_rng(5)
    )
    assert p.shape == (2, n_draw, d.n_items, 2)
    for i in range(d.n_items):
        for v in range(2):
            a, b = (mu * kappa)[d.dom[i], v], ((1 - mu) * kappa)[d.dom[i], v]
            ref = stats.beta(a + d.y[i, v], b + d.n[i, v] - d.y[i, v])
            assert stats.kstest(p[:, :, i, v].ravel(), ref.cdf).pvalue > 1e-3, (i, v)


def test_z_grid_integrates_binomial_likelihood():
    """The trapezoid rule of the change model against adaptive quadrature."""
    from scipy.integrate import quad

    z, logw = z_grid()
    for theta, m, s, y, n in [(0.3, 0.5, 3.0, 7, 10), (-6.0, 1.0, 3.0, 10, 10), (4.0, -0.5, 1.5, 0, 10)]:
        f = lambda zz: stats.norm.pdf(zz) * stats.binom.pmf(y, n, expit(theta + m + s * zz))  # noqa: E731
        exact = quad(f, -np.inf, np.inf, points=None, limit=200)[0]
        approx = np.sum(np.exp(logw) * stats.binom.pmf(y, n, expit(theta + m + s * z)))
        assert approx == pytest.approx(exact, rel=1e-4)


def test_gate_thresholds_on_synthetic_draws():
    """The gate on hand-made chains: well-mixed passes, stuck / divergent ones fail."""
    import xarray as xr

    from bayesrc.bayes import GateConfig, gate

    rng = np.random.default_rng(0)
    good = rng.normal(size=(4, 1000, 3))
    stuck = good.copy()
    stuck[0] += 3.0  # one chain elsewhere: R-hat >> 1.01
    const = np.ones((4, 1000, 1))

    def tree(x, div=0):
        post = xr.Dataset({"a": (("chain", "draw", "k"), x)})
        d = np.zeros((4, 1000), bool)
        d.flat[:div] = True
        return xr.DataTree.from_dict(
            {"posterior": post, "sample_stats": xr.Dataset({"diverging": (("chain", "draw"), d)})}
        )

    assert gate(tree(good), ["a"]).passed
    g = gate(tree(stuck), ["a"])
    assert not g.passed and g.max_rhat > 1.01 and "rhat" in g.worst
    g = gate(tree(good, div=1), ["a"])
    assert not g.passed and g.divergences == 1
    assert gate(tree(good, div=1), ["a"], GateConfig(max_divergences=1)).passed
    assert not gate(tree(const), ["a"]).passed  # undefined R-hat / ESS is a failure, never a pass
    assert not gate(tree(good[:, :100]), ["a"], GateConfig(min_ess=1000)).passed


def _cell_reference(mu, sd, shift, tau, slope, pi, n1, y1, n2, y2, half=10.0):
    """The collapsed change model's cell likelihood by brute force (Simpson's rule on 6,001 x 801
    nodes spanning +-12 SD of each normal): theta ~ Normal(mu, sd), theta + delta ~ Normal(theta + m(theta), tau),
    the binomials beyond +-half logits at their values there (what the grid's end nodes stand for;
    4.5e-5 from the limit)."""
    from scipy.integrate import simpson
    from scipy.special import comb, expit
    from scipy.stats import norm

    def binom(y, n, x):
        p = expit(np.clip(x, -half, half))
        return comb(n, y) * p**y * (1.0 - p) ** (n - y)

    sd_grid, tau = np.hypot(sd, 0.1), np.hypot(tau, 0.1)  # the model's spreads on its grid (grid_spread: step 0.2)
    t = np.linspace(mu - 12 * sd_grid, mu + 12 * sd_grid, 6001)
    v = np.linspace(-12, 12, 801)
    g = np.concatenate(
        [
            simpson(norm.pdf(v) * binom(y2, n2, (c + slope * (c - mu) / sd + shift)[:, None] + tau * v), x=v, axis=1)
            for c in np.array_split(t, 4)
        ]
    )
    prior = norm.pdf(t, mu, sd_grid) * binom(y1, n1, t)
    return simpson(prior * ((1 - pi) * binom(y2, n2, t) + pi * g), x=t)


def _cells(rows):
    """Cells for a list of (n1, y1, n2, y2), one item each, one domain."""
    from bayesrc.bayes.change_grid import cell_stats
    from bayesrc.bayes.inputs import ModelInputs

    a = np.array(rows, int)
    data = ModelInputs(
        y=a[:, [1, 3]],
        n=a[:, [0, 2]],
        dom=np.zeros(len(a), int),
        items=np.arange(len(a)).astype(str),
        versions=("v1", "v2"),
        domains=("d",),
    )
    return cell_stats(data)


@pytest.mark.parametrize(
    "dom, grp",
    [
        ([0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3], [0, 1, 1, 2, 0, 1, 2, 0, 1, 2, 3]),  # the bundled q3 pair's 11 strata
        ([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]),  # a full 2 x 3 design
        ([0, 0, 0, 0], [0, 1, 2, 3]),  # one domain: the levels take up every shift
        ([0, 1, 2], [0, 0, 0]),  # one level
    ],
)
def test_interaction_basis_spans_what_no_domain_or_level_shift_can_make(dom, grp):
    """Orthonormal, orthogonal to every domain and level indicator, and of the dimension left
    over (strata minus the indicators' rank), so ``shift_d + gamma_g + Q z`` reaches every
    per-stratum shift exactly once."""
    from bayesrc.bayes.inputs import interaction_basis

    dom, grp = np.asarray(dom), np.asarray(grp)
    x = np.concatenate([np.eye(dom.max() + 1)[dom], np.eye(grp.max() + 1)[grp]], axis=1)
    q = interaction_basis(dom, grp)
    assert q.shape == (dom.size, dom.size - np.linalg.matrix_rank(x))
    np.testing.assert_allclose(q.T @ q, np.eye(q.shape[1]), atol=1e-12)
    np.testing.assert_allclose(x.T @ q, 0.0, atol=1e-12)
    assert np.linalg.matrix_rank(np.concatenate([x, q], axis=1)) == dom.size


def test_stratum_shift_prior_is_the_normal_shifts_projected_on_the_interactions():
    """The stratum shifts both twins sample have, given ``stratum_shift_sd``, the covariance
    ``sd^2 Q Q'`` of ``Normal(0, sd)`` shifts projected off the domain and level shifts."""
    import pymc as pm
    from jax import random
    from numpyro.infer import Predictive

    from bayesrc.bayes.change import group_effects_numpyro, group_effects_pymc, prior_settings
    from bayesrc.bayes.inputs import interaction_basis

    dom, grp = np.array([0, 0, 1, 1, 2, 2, 2]), np.array([0, 1, 1, 2, 0, 1, 2])
    q = interaction_basis(dom, grp)
    draws = {}

    def model():
        group_effects_numpyro(3, prior_settings(None), q)

    prior = Predictive(model, num_samples=40_000)(random.PRNGKey(0))
    draws["numpyro"] = {k: np.asarray(prior[k]) for k in ("stratum_shift", "stratum_shift_sd")}
    with pm.Model(coords={"group": list("abc"), "stratum": list(range(7)), "contrast": list(range(q.shape[1]))}):
        group_effects_pymc(3, None, q)
        idata = pm.sample_prior_predictive(draws=40_000, random_seed=0, var_names=["stratum_shift", "stratum_shift_sd"])
    draws["pymc"] = {
        k: idata.prior[k].values.reshape(40_000, -1).squeeze() for k in ("stratum_shift", "stratum_shift_sd")
    }
    for name, d in draws.items():
        scaled = d["stratum_shift"] / d["stratum_shift_sd"][:, None]
        np.testing.assert_allclose(np.cov(scaled.T), q @ q.T, atol=0.03, err_msg=name)
        assert stats.kstest(d["stratum_shift_sd"], stats.halfnorm(scale=0.5).cdf).pvalue > 1e-3, name


@pytest.mark.parametrize(
    "mu, sd, shift, tau, slope, rtol",
    [
        (0.5, 1.0, -0.6, 1.0, 0.0, 1e-5),
        (0.0, 0.5, 0.2, 0.5, -0.2, 1e-5),
        (0.0, 2.0, 0.0, 0.2, 0.0, 1e-5),
        (1.0, 1.8, -0.3, 0.25, 0.0, 1e-5),
        (-1.0, 1.5, 1.5, 2.0, 0.3, 1e-5),
        (0.0, 3.0, 0.0, 0.2, 0.0, 1e-5),
        (-2.0, 2.5, 1.5, 2.0, 0.3, 1e-5),
        # a tenth of the items beyond +-10 logits: the tails, lumped on the grid's end nodes, cost 0.1-0.3%
        (-1.0, 5.0, 0.3, 3.0, 0.0, 5e-3),
        (2.0, 6.0, 0.0, 4.0, 0.3, 5e-3),
    ],
)
def test_collapsed_change_cell_likelihood_matches_a_fine_reference(mu, sd, shift, tau, slope, rtol):
    """The logit-grid quadrature of the collapsed change model vs brute force, floor / ceiling cells and an
    item with no valid version-1 response included, with and without the slope: to 1e-5 (grid step 0.2
    logits) while the items spread by at most 3 logits (as on every real benchmark seen)."""
    from scipy.special import comb

    from bayesrc.bayes.change_grid import likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, cell_loglik

    rows = [
        (10, 0, 10, 0),
        (10, 10, 10, 10),
        (10, 0, 10, 10),
        (10, 5, 10, 6),
        (10, 9, 10, 2),
        (10, 1, 7, 7),
        (0, 0, 10, 3),
    ]
    cells = _cells(rows)
    tables = likelihood_tables(cells)
    ll = cell_loglik(
        _ops("numpy"), np.array([mu]), np.array([sd]), np.array([shift]), np.array([tau]), slope, 0.4, tables
    )[: cells.n_cells]
    a = np.stack([cells.n1, cells.y1, cells.n2, cells.y2], 1).astype(int)
    ll += np.log(comb(a[:, 0], a[:, 1]) * comb(a[:, 2], a[:, 3]))  # the model leaves the constant out
    ref = np.array([_cell_reference(mu, sd, shift, tau, slope, 0.4, *map(int, c)) for c in a])
    np.testing.assert_allclose(np.exp(ll), ref, rtol=rtol)


@pytest.mark.parametrize("sigma_delta", [0.05, 0.3, 4.0, 60.0])
def test_collapsed_change_kernel_toeplitz_form_equals_the_direct_one(sigma_delta):
    """Without the slope the change kernel is built from one row of offsets; with a zero slope
    passed as an array (the general path) it must be the same matrix; rows stay normalised,
    finite, from a spread of a quarter of the grid's step to far above its width, two strata."""
    from bayesrc.bayes.change_grid import likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, change_kernel

    tables = likelihood_tables(_cells([(10, 4, 10, 6), (10, 0, 10, 1)]))
    args = (np.array([0.2, -1.0]), np.array([1.5, 2.0]), np.array([0.37, -2.2]))
    sd = np.array([sigma_delta, 2 * sigma_delta])
    toeplitz = change_kernel(_ops("numpy"), tables, *args, 0.0, sd)
    general = change_kernel(_ops("numpy"), tables, *args, np.float64(0.0), sd)
    assert np.isfinite(toeplitz).all()
    np.testing.assert_allclose(toeplitz, general, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(toeplitz.sum(-1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("shift", [-12.0, -0.37, 0.0, 2.2, 25.0])
@pytest.mark.parametrize("sigma_delta", [0.05, 0.3, 4.0, 60.0])
def test_collapsed_change_convolution_band_form_equals_the_kernel_product(sigma_delta, shift):
    """The slope-free likelihood applies the change kernel as its row of offsets times the
    binomials, by FFT (``e2_spectra``) or term by term over their band table (``e2_band``); both must equal the
    normalised kernel matrix times the binomials, and the path that forms the kernel (tables without the band
    table), from a spread of a quarter of the grid's step to far above its width, kernels centred beyond the grid
    included: term by term to a relative 1e-10, by FFT to 1e-14 of the convolutions' scale (1)."""
    from bayesrc.bayes.change_grid import likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, change_kernel, weighted_convolutions

    ops, tables = (
        _ops("numpy", spectral=False),
        likelihood_tables(_cells([(10, 4, 10, 6), (10, 0, 10, 1), (10, 10, 7, 7)])),
    )
    assert "e2_band" in tables
    args = (
        np.array([0.2, -1.0]),
        np.array([1.5, 2.0]),
        np.array([shift, 0.5 * shift + 0.1]),
        0.0,
        np.array([sigma_delta, 2 * sigma_delta]),
    )
    ones = np.ones((1, 2 * tables["x"].size - 1))  # no weighting: G = K @ e2
    band = weighted_convolutions(ops, tables, *args, ones)[0]
    formed = weighted_convolutions(ops, {k: v for k, v in tables.items() if k != "e2_band"}, *args, ones)[0]
    product = np.tensordot(change_kernel(ops, tables, *args), tables["e2"], axes=[[2], [1]]).transpose(0, 2, 1)
    spectral = weighted_convolutions(_ops("numpy"), tables, *args, ones)[0]
    assert np.isfinite(band).all() and (spectral >= 0).all()
    np.testing.assert_allclose(band, formed, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(band, product, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(spectral, product, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("slope", [0.0, 0.4])
@pytest.mark.parametrize("sigma_delta", [0.05, 0.5, 30.0])
def test_collapsed_change_weighted_convolutions_equal_the_weighted_kernel_product(sigma_delta, slope):
    """The item draws' ``P(delta > 0)`` weights the change kernel by the share of each node's cell
    above zero, a function of the change ``x_k - x_j``: it must equal the kernel matrix times that
    weight matrix times the binomials, tails on the end nodes included, with and without the slope (without it
    by FFT, to 1e-14 of the convolutions' scale, and term by term, to a relative 1e-10)."""
    from bayesrc.bayes.change import share_above_zero
    from bayesrc.bayes.change_grid import likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, change_kernel, weighted_convolutions

    ops, tables = _ops("numpy"), likelihood_tables(_cells([(10, 4, 10, 6), (10, 0, 10, 1), (10, 10, 7, 7)]))
    x = tables["x"]
    n, h = x.size, x[1] - x[0]
    up = share_above_zero((np.arange(2 * n - 1) - (n - 1)) * h, h)
    args = (
        np.array([0.2, -1.0]),
        np.array([1.5, 2.0]),
        np.array([-0.8, 9.0]),
        slope if slope == 0.0 else np.float64(slope),
        np.array([sigma_delta, 2 * sigma_delta]),
    )
    kern = change_kernel(ops, tables, *args)
    up_matrix = share_above_zero(x[None, :] - x[:, None], h)
    want = np.tensordot(np.stack([kern, kern * up_matrix]), tables["e2"], axes=[[3], [1]]).transpose(0, 1, 3, 2)
    for spectral in (True, False):
        got = weighted_convolutions(_ops("numpy", spectral), tables, *args, np.stack([np.ones_like(up), up]))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14 if spectral and slope == 0.0 else 1e-300)


@pytest.mark.parametrize("shift", [-7.0, 0.4, 6.5])
def test_collapsed_change_likelihood_gradient_is_finite_and_matches_finite_differences(shift):
    """The sampler's gradient where rows of the change kernel are centred far beyond the grid
    (a narrow change: every exponential of such a row under 1e-300 relative to the kernel's peak).
    Such rows once divided 0 by 0 in the gradient: NaN, which NUTS reports as a divergence
    (60-item simulated pairs diverged in about one fit in four)."""
    import jax
    import jax.numpy as jnp

    from bayesrc.bayes.change_grid import likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, cell_loglik
    from bayesrc.config import precision

    def loglik(v):  # v: mu, log sigma_theta, shift, log sigma_delta, logit pi
        ll = cell_loglik(
            _ops("jax"), v[:1], jnp.exp(v[1:2]), v[2:3], jnp.exp(v[3:4]), 0.0, jax.nn.sigmoid(v[4]), tables
        )
        return jnp.sum(tables["weight"] * ll)

    with precision():  # float64, as in a fit
        tables = jax.tree.map(jnp.asarray, likelihood_tables(_cells([(10, 4, 10, 6), (10, 0, 10, 1), (10, 10, 10, 9)])))
        v = jnp.array([0.7, np.log(0.2), shift, np.log(0.22), 1.2])
        grad = np.asarray(jax.grad(loglik)(v))
        eps = 1e-5
        fd = [(loglik(v.at[i].add(eps)) - loglik(v.at[i].add(-eps))) / (2 * eps) for i in range(v.size)]
    assert np.isfinite(grad).all()
    np.testing.assert_allclose(grad, np.asarray(fd), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("sigma_delta", [0.05, 0.4, 3.0])
def test_collapsed_change_sampler_band_precision_keeps_the_likelihood_and_gradient(sigma_delta):
    """The samplers' band table is float32 (SAMPLER_BAND_DTYPE): the summed log-likelihood and its
    gradient must stay within 1e-6 (relative) of the float64 tables' on a dataset with floor,
    ceiling and large-change cells, 11 outcomes, 8 strata, narrow to wide changes."""
    import jax
    import jax.numpy as jnp

    from bayesrc.bayes.change_grid import SAMPLER_BAND_DTYPE, cell_stats, likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, cell_loglik
    from bayesrc.bayes.inputs import ModelInputs
    from bayesrc.config import precision

    assert np.dtype(SAMPLER_BAND_DTYPE) == np.float32
    rng = np.random.default_rng(5)
    y = np.concatenate([rng.integers(0, 11, (200, 2)), [[0, 0], [10, 10], [0, 10], [10, 0]]])
    data = ModelInputs(
        y=y,
        n=np.full_like(y, 10),
        dom=np.arange(len(y)) % 8,
        items=np.arange(len(y)).astype(str),
        versions=("v1", "v2"),
        domains=tuple("abcdefgh"),
    )
    cells = cell_stats(data)

    def loglik(v, tables):  # v: 8 mu, 8 log sigma_theta, 8 shift, 8 log sigma_delta, logit pi
        ll = cell_loglik(
            _ops("jax"), v[:8], jnp.exp(v[8:16]), v[16:24], jnp.exp(v[24:32]), 0.0, jax.nn.sigmoid(v[32]), tables
        )
        return jnp.sum(tables["weight"] * ll)

    with precision():
        v = jnp.asarray(
            np.concatenate(
                [
                    rng.normal(0, 1, 8),
                    np.log(rng.uniform(0.5, 2.5, 8)),
                    rng.normal(0, 1, 8),
                    np.full(8, np.log(sigma_delta)),
                    [0.5],
                ]
            )
        )
        got = [
            jax.value_and_grad(loglik)(v, jax.tree.map(jnp.asarray, likelihood_tables(cells, dt)))
            for dt in (np.float64, SAMPLER_BAND_DTYPE)
        ]
    (v64, g64), (v32, g32) = got
    assert np.isfinite(float(v32)) and np.isfinite(np.asarray(g32)).all()
    assert abs(float(v32) - float(v64)) <= 1e-6 * abs(float(v64))
    np.testing.assert_allclose(np.asarray(g32), np.asarray(g64), rtol=1e-6, atol=1e-6 * float(np.abs(g64).max()))


@pytest.mark.parametrize("band_dtype", [np.float64, np.float32])
def test_collapsed_change_likelihood_by_pair_equals_the_dense_band_product(band_dtype):
    """The slope-free likelihood's band product by FFT over the cells' (stratum, outcome) pairs only
    (``pair_tables``) gives each cell the log-likelihood and the gradient of the product term by term over every
    pair (the tables without them, the band in float64 and in the samplers' float32), floor / ceiling cells,
    narrow to wide changes, kernels centred beyond the grid."""
    import jax
    import jax.numpy as jnp

    from bayesrc.bayes.change_grid import cell_stats, likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, cell_loglik
    from bayesrc.bayes.inputs import ModelInputs
    from bayesrc.config import precision

    rng = np.random.default_rng(7)
    y = np.concatenate([rng.integers(0, 11, (90, 2)), [[0, 0], [10, 10], [0, 10], [10, 0]]])
    n = np.full_like(y, 10)
    n[:5, 1] = 7  # a few items with fewer valid answers: more outcomes than pairs
    data = ModelInputs(
        y=y,
        n=n,
        dom=np.arange(len(y)) % 6,
        items=np.arange(len(y)).astype(str),
        versions=("v1", "v2"),
        domains=tuple("abcdef"),
    )
    cells = cell_stats(data)
    tables = likelihood_tables(cells, band_dtype)
    n_pairs = len(np.unique(np.stack([cells.dom, tables["cell_t"][: cells.n_cells]], 1), axis=0))
    assert "pair_band" in tables and n_pairs < cells.n_strata * tables["e2"].shape[0]
    dense = likelihood_tables(cells, band_dtype, pairs=False)

    def loglik(v, t, spectral):  # v: 6 mu, 6 log sigma_theta, 6 shift, 6 log sigma_delta, logit pi
        ll = cell_loglik(
            _ops("jax", spectral), v[:6], jnp.exp(v[6:12]), v[12:18], jnp.exp(v[18:24]), 0.0, jax.nn.sigmoid(v[24]), t
        )
        return jnp.sum(t["weight"] * ll), ll

    for shift, log_sd in ((0.3, np.log(0.05)), (-1.0, np.log(0.8)), (12.0, np.log(0.2)), (0.0, np.log(4.0))):
        v = np.concatenate(
            [
                rng.normal(0, 1, 6),
                np.log(rng.uniform(0.3, 2.5, 6)),
                shift + rng.normal(0, 0.3, 6),
                np.full(6, log_sd),
                [0.4],
            ]
        )
        with precision():
            (total_p, ll_p), g_p = jax.value_and_grad(loglik, has_aux=True)(
                jnp.asarray(v), jax.tree.map(jnp.asarray, tables), True
            )
            (total_d, ll_d), g_d = jax.value_and_grad(loglik, has_aux=True)(
                jnp.asarray(v), jax.tree.map(jnp.asarray, dense), False
            )
        real = slice(0, cells.n_cells)  # padded cells have weight 0, and each path gives them another cell's value
        np.testing.assert_allclose(
            np.asarray(ll_p)[real], np.asarray(ll_d)[real], rtol=1e-6 if band_dtype == np.float32 else 1e-12, atol=1e-9
        )
        assert np.isclose(float(total_p), float(total_d), rtol=1e-6 if band_dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(np.asarray(g_p), np.asarray(g_d), rtol=1e-6, atol=1e-6 * float(np.abs(g_d).max()))


@pytest.mark.parametrize("k", [10, 40])
def test_band_product_by_fft_keeps_every_cell_a_posterior_can_reach(k):
    """The band product by FFT (NumPy's and JAX's likelihood) against the same product term by term in float64
    (over the dense band, ``pairs=False``), at 200 random hyperparameters over the priors' range (spreads 0.05-4.5,
    changes' spread 0.01-5, shifts to +-6): log L agrees to 1e-7 for every cell whose likelihood is above e^-20 of
    its rows' maxima; below that the FFT's absolute round-off (~1e-16 of a row's scale) may dominate the sums, and
    the likelihood stays finite. Real fits' posteriors keep every cell far above e^-20
    (``benchmarks/fft_band.py``)."""
    from bayesrc.bayes.change_grid import cell_stats, likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, cell_loglik
    from bayesrc.bayes.inputs import ModelInputs

    rng = np.random.default_rng(3)
    y = np.concatenate([rng.integers(0, k + 1, (120, 2)), [[0, 0], [k, k], [0, k], [k, 0], [1, k - 1]]])
    data = ModelInputs(
        y=y, n=np.full_like(y, k), dom=np.arange(len(y)) % 4, items=np.arange(len(y)).astype(str),
        versions=("v1", "v2"), domains=tuple("abcd"),
    )  # fmt: skip
    cells = cell_stats(data)
    fft, dense = likelihood_tables(cells), likelihood_tables(cells, pairs=False)
    assert "pair_spectra" in fft and "pair_spectra" not in dense
    real = slice(0, cells.n_cells)
    rows_max = (dense["lm1"][dense["cell_u"]] + dense["lm2"][dense["cell_t"]])[real]
    ops, terms, errors, reached = _ops("numpy"), _ops("numpy", spectral=False), [], []
    for _ in range(200):
        hyper = (
            rng.normal(0, 2, 4), np.exp(rng.uniform(-3, 1.5, 4)), rng.normal(0, 2, 4),
            np.full(4, np.exp(rng.uniform(np.log(0.01), np.log(5)))), 0.0, rng.uniform(0.001, 0.9),
        )  # fmt: skip
        by_fft, by_terms = cell_loglik(ops, *hyper, fft)[real], cell_loglik(terms, *hyper, dense)[real]
        assert np.isfinite(by_fft).all()
        errors.append(np.abs(by_fft - by_terms)), reached.append(by_terms - rows_max > -20)
    errors, reached = np.concatenate(errors), np.concatenate(reached)
    assert errors[reached].max() <= 1e-7 and reached.mean() > 0.6, (errors[reached].max(), reached.mean())


def test_collapsed_change_likelihood_is_the_same_whatever_the_padding():
    """Cells padded to shape buckets add nothing: the padded tables give each real cell the
    log-likelihood that a direct logsumexp over the grid's nodes gives it."""
    from scipy.special import log_expit, logsumexp

    from bayesrc.bayes.change_grid import likelihood_tables
    from bayesrc.bayes.change_likelihood import _ops, cell_loglik, change_kernel, prior_weights

    rows = [(10, y1, 10, y2) for y1 in (0, 3, 10) for y2 in (1, 9)] + [(8, 2, 9, 4)]
    cells = _cells(rows)
    tables = likelihood_tables(cells)
    assert tables["weight"].size > cells.n_cells and tables["weight"][cells.n_cells :].sum() == 0
    mu, sd, shift, tau, pi = -0.4, 1.7, 0.5, 0.6, 0.3
    ll = cell_loglik(_ops("numpy"), np.array([mu]), np.array([sd]), np.array([shift]), np.array([tau]), 0.0, pi, tables)
    x = tables["x"]
    lb = lambda n, y, t: n * log_expit(t) - (n - y) * t  # noqa: E731
    lp = np.log(prior_weights(_ops("numpy"), x, np.array([mu]), np.array([sd])))[0]
    with np.errstate(divide="ignore"):
        lk = np.log(change_kernel(_ops("numpy"), tables, None, None, np.array([shift]), 0.0, np.array([tau])))[0]
    for c in range(cells.n_cells):
        n1, y1, n2, y2 = cells.n1[c], cells.y1[c], cells.n2[c], cells.y2[c]
        lg = logsumexp(lk + lb(n2, y2, x)[None, :], axis=1)
        direct = logsumexp(lp + lb(n1, y1, x) + np.logaddexp(np.log1p(-pi) + lb(n2, y2, x), np.log(pi) + lg))
        assert np.isclose(ll[c], direct, rtol=1e-12, atol=1e-9), c
    assert np.isfinite(ll).all()


def test_collapsed_change_item_draws_match_a_fine_grid_reference():
    """Per-item draws given fixed hyperparameters vs the exact conditionals on 2,001 x 1,201 nodes:
    P(changed) to 1e-5, and the draws of u = (theta - mu) / sigma_theta and, for changed draws,
    v = (delta - shift) / sigma_delta pass a KS test against the reference marginals."""
    import xarray as xr
    from scipy.special import log_expit, logsumexp

    from bayesrc.bayes.change_item_draws import item_draws

    mu, sd, shift, tau, pi = 0.3, 2.0, 0.4, 1.5, 0.4  # the normals' mass inside the grid's +-10 logits
    rows = [(10, 5, 10, 5), (10, 2, 10, 9), (10, 10, 10, 10), (10, 0, 10, 1)]
    n_draw = 4000
    const = lambda v, dims=("chain", "draw"): (dims, np.full((1, n_draw, *np.shape(v)), v))  # noqa: E731
    post = xr.Dataset(
        {
            "mu_theta": const([mu], ("chain", "draw", "domain")),
            "sigma_theta": const([sd], ("chain", "draw", "domain")),
            "shift": const([shift], ("chain", "draw", "domain")),
            "sigma_delta": const(tau),
            "pi": const(pi),
        }
    )
    cells = _cells(rows)
    out = item_draws(post, cells, seed=3)
    for name, values in item_draws(
        post, cells, seed=3, batch=1
    ).items():  # each draw has its own key: the batch changes nothing
        np.testing.assert_array_equal(values, out[name], err_msg=name)
    assert out["r"].shape[-1] == out["p_up"].shape[-1] == cells.n_cells  # per cell; the items' columns below
    sd, tau = np.hypot(sd, 0.1), np.hypot(tau, 0.1)  # the model's spreads on its grid (grid_spread: step 0.2)
    u, v = np.linspace(-9, 9, 2001), np.linspace(-8, 8, 1201)
    for i, (n1, y1, n2, y2) in enumerate(rows):
        theta = mu + sd * u
        b1 = y1 * log_expit(theta) + (n1 - y1) * log_expit(-theta)
        x = theta[:, None] + shift + tau * v
        l2c = -0.5 * v**2 + y2 * log_expit(x) + (n2 - y2) * log_expit(-x)  # (u, v), up to constants
        lg = logsumexp(l2c, axis=1) + np.log(v[1] - v[0]) - 0.5 * np.log(2 * np.pi)
        same = -0.5 * u**2 + b1 + np.log1p(-pi) + y2 * log_expit(theta) + (n2 - y2) * log_expit(-theta)
        chg = -0.5 * u**2 + b1 + np.log(pi) + lg
        r_ref = 1.0 / (1.0 + np.exp(logsumexp(same) - logsumexp(chg)))
        np.testing.assert_allclose(out["r"][0, :, cells.item_cell[i]], r_ref, rtol=1e-5)
        # Reference marginal of u (mixture over changed), and of v given changed.
        fu = np.exp(np.logaddexp(same, chg) - np.logaddexp(same, chg).max())
        cdf_u = np.cumsum(fu) / fu.sum()
        zu = (out["theta"][0, :, i] - mu) / sd
        assert stats.kstest(zu, lambda q: np.interp(q, u, cdf_u)).pvalue > 0.01, i
        jv = -0.5 * u[:, None] ** 2 + b1[:, None] + l2c
        fv = np.exp(logsumexp(jv, axis=0) - logsumexp(jv, axis=0).max())
        cdf_v = np.cumsum(fv) / fv.sum()
        ch = out["changed"][0, :, i].astype(bool)
        assert abs(ch.mean() - r_ref) < 4 * np.sqrt(r_ref * (1 - r_ref) / n_draw)
        zv = (out["delta"][0, ch, i] - shift) / tau
        assert stats.kstest(zv, lambda q: np.interp(q, v, cdf_v)).pvalue > 0.01, i
        # Unchanged draws carry delta from its prior (it does not enter the likelihood).
        assert stats.kstest((out["delta"][0, ~ch, i] - shift) / tau, "norm").pvalue > 0.01, i


@pytest.mark.parametrize("prior_seed", [0, 1])
def test_item_draws_given_the_drawn_hyperparameters_rank_uniformly(prior_seed):
    """Simulation-based calibration of the collapsed model's item level (the part NUTS does not
    sample): hyperparameters from the priors (on a 2-domain design with 4 covariate levels), 2,000
    items from them as the posterior predictive draws new items (``new_item_p``), counts at K = 10,
    then 99 conditional item draws per item given those hyperparameters. Items are independent given
    the hyperparameters, so each item's rank of its drawn accuracies among its 99 draws is one SBC
    rank: uniform on 0..99 for p_v1, p_v2 and their change if the conditional sampler is right."""
    from dataclasses import replace

    from scipy.special import expit

    from bayesrc.bayes import ModelInputs
    from bayesrc.bayes.change_grid import cell_stats
    from bayesrc.bayes.change_item_draws import item_draws
    from bayesrc.bayes.checks import new_item_p
    from bayesrc.bayes.prior_predictive import prior_draws

    n_items, k = 2000, 10
    rng = np.random.default_rng(prior_seed)
    dom, grp = np.arange(n_items) % 2, (np.arange(n_items) // 2) % 4
    y0 = np.zeros((n_items, 2), np.int64)
    design = ModelInputs(
        y=y0,
        n=np.full_like(y0, k),
        dom=dom,
        items=np.array([f"i{i}" for i in range(n_items)]),
        versions=("v1", "v2"),
        domains=("a", "b"),
        group=grp,
        groups=tuple("ABCD"),
        covariate="letter",
    )
    truth = prior_draws(design, "change", n_draws=1, seed=100 + prior_seed)
    p_true = new_item_p(truth, design, rng, max_draws=1)[0]  # (item, version)
    data = replace(design, y=rng.binomial(design.n, p_true))
    draws = item_draws(truth.isel(draw=[0] * 99), cell_stats(data), seed=prior_seed)
    # The likelihood's grid spans +-10 logits, the priors do not: ranks are taken on logits clipped
    # to +-8, where the grid is exact (beyond, truth and draws tie and the tie is broken at random).
    clip = lambda x: expit(np.clip(x, -8.0, 8.0))  # noqa: E731
    p1 = clip(draws["theta"][0].astype(float))
    p2 = clip(draws["theta"][0].astype(float) + draws["changed"][0] * draws["delta"][0].astype(float))
    with np.errstate(divide="ignore"):
        t1, t2 = (
            clip(np.log(p_true[:, 0]) - np.log1p(-p_true[:, 0])),
            clip(np.log(p_true[:, 1]) - np.log1p(-p_true[:, 1])),
        )
    for name, d, t in (("p_v1", p1, t1), ("p_v2", p2, t2), ("dp", p2 - p1, t2 - t1)):
        # 0..99 per item; ties (dp = 0 when unchanged) broken at random
        ranks = (d < t).sum(0) + rng.integers(0, (d == t).sum(0) + 1)
        hist = np.bincount(ranks // 10, minlength=10)
        assert stats.chisquare(hist).pvalue > 0.001, (name, hist.tolist())


def _ar1(rng, phi: float, shape: tuple[int, ...]) -> np.ndarray:
    e = rng.normal(size=shape)
    x = np.empty(shape)
    x[..., 0] = e[..., 0]
    for t in range(1, shape[-1]):
        x[..., t] = phi * x[..., t - 1] + e[..., t]
    return x


def _diagnostic_cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    cases = {f"ar1 {phi}": _ar1(rng, phi, (12, 4, 301)) for phi in (-0.7, 0.0, 0.5, 0.95, 0.995)}
    cases["one chain off"] = _ar1(rng, 0.3, (6, 4, 200)) + np.array([0.0, 0.0, 0.0, 1.5])[:, None]
    cases["three values"] = rng.integers(0, 3, size=(8, 4, 300)).astype(float)
    cases["antithetic"] = np.tile([1.0, -1.0], (3, 4, 100)) + 1e-3 * rng.normal(size=(3, 4, 200))
    cases["constant"] = np.ones((2, 4, 100))
    cases["one chain"] = rng.normal(size=(3, 1, 100))
    cases["a NaN draw"] = rng.normal(size=(2, 4, 100))
    cases["a NaN draw"][0, 1, 5] = np.nan
    cases["five draws"] = rng.normal(size=(3, 2, 5))
    # more entries than a chunk (diagnostics.ENTRY_CHUNK): computed a chunk at a time, on several threads
    cases["150 entries"] = np.concatenate([_ar1(rng, phi, (30, 4, 301)) for phi in (-0.5, 0.0, 0.5, 0.9, 0.99)])
    cases["150 entries"][70, 2, 10] = np.nan
    return cases


@pytest.mark.parametrize("case", list(_diagnostic_cases()))
def test_vectorised_convergence_diagnostics_equal_arviz_stats(case):
    """The gate's R-hat, bulk and tail ESS and the mean's MCSE, computed for all entries at once,
    equal arviz-stats' per-entry loops (independent code) to rounding, NaN where it gives NaN."""
    import arviz_stats as azs
    import xarray as xr

    from bayesrc.bayes.diagnostics import convergence, mcse_mean

    x = _diagnostic_cases()[case]
    da = xr.DataArray(x, dims=("entry", "chain", "draw"))
    ref = {
        "r_hat": azs.rhat(da),
        "ess_bulk": azs.ess(da, method="bulk"),
        "ess_tail": azs.ess(da, method="tail"),
        "mcse": azs.mcse(da, method="mean"),
    }
    ours = convergence(x) | {"mcse": mcse_mean(x)}
    for key, expected in ref.items():
        np.testing.assert_allclose(ours[key], expected.values, rtol=1e-12, equal_nan=True, err_msg=key)


def test_average_ranks_equal_scipys_rankdata_with_ties_and_nans():
    """The gate's ranks (one unstable sort, ties resolved in the rows that have them) are scipy's average ranks
    (independent code), a row with a NaN NaN throughout as scipy's."""
    from scipy.stats import rankdata

    from bayesrc.bayes.diagnostics import _average_ranks

    rng = np.random.default_rng(3)
    rows = rng.normal(size=(50, 400))
    rows[:20] = rng.integers(0, 5, size=(20, 400))  # many ties
    rows[20:25, ::3] = 0.25  # runs of one tied value among distinct ones
    rows[25, 7] = np.nan
    rows[26] = 1.0  # all tied
    np.testing.assert_array_equal(_average_ranks(rows), rankdata(rows, method="average", axis=-1))


def test_loo_relative_efficiency_equals_arviz_stats_default():
    """The r_eff given to arviz-stats' loo equals the one it computes itself (independent code): the
    mean ESS of every entry of every posterior variable (scalars, items, an int8 one), over the draws."""
    import xarray as xr
    from arviz_stats.loo.loo_helper import _get_r_eff

    from bayesrc.bayes.diagnostics import mean_relative_ess

    rng = np.random.default_rng(3)
    post = xr.Dataset(
        {
            "pi": (("chain", "draw"), _ar1(rng, 0.6, (4, 300))),
            "p": (("chain", "draw", "item", "version"), rng.beta(2, 3, size=(4, 300, 7, 2))),
            "dp": (("chain", "draw", "item"), _ar1(rng, 0.3, (7, 4, 300)).transpose(1, 2, 0)),
            "changed": (("chain", "draw", "item"), rng.integers(0, 2, size=(4, 300, 7)).astype(np.int8)),
        }
    )
    assert mean_relative_ess(post) == pytest.approx(
        _get_r_eff(xr.DataTree.from_dict({"posterior": post}), 1200), rel=1e-12
    )
    # Beyond max_entries, every k-th entry: within 2% of the mean over all (items mixing from iid to rho 0.8).
    rho = np.linspace(0.0, 0.8, 3000)
    x = np.stack([_ar1(rng, r, (4, 300)) for r in rho], -1)
    many = xr.Dataset(
        {
            "pi": (("chain", "draw"), _ar1(rng, 0.6, (4, 300))),
            "theta": (("chain", "draw", "item"), x),
            "p": (("chain", "draw", "item"), x[..., ::-1]),
        }
    )
    exact = mean_relative_ess(many, max_entries=10_000)
    assert mean_relative_ess(many, max_entries=500) == pytest.approx(exact, rel=0.02) and exact == pytest.approx(
        _get_r_eff(xr.DataTree.from_dict({"posterior": many}), 1200), rel=1e-12
    )


def test_sample_gated_escalates_by_what_failed():
    """A gate failed on R-hat alone is retried with twice the draws from the same warm-up and
    target acceptance; one failed on divergences with longer warm-up at 0.95; a passed gate stops."""
    import arviz_base as azb

    from bayesrc.bayes.gating import sample_gated
    from bayesrc.config import GateConfig, SamplerConfig

    def sampler(outcomes):
        seen = []

        def run(config):
            seen.append(config)
            kind = outcomes[len(seen) - 1]
            rng = np.random.default_rng(len(seen))
            x = rng.normal(size=(config.chains, config.draws)) + (
                np.arange(config.chains)[:, None] if kind == "stuck" else 0.0
            )
            div = np.zeros(x.shape, bool)
            div[0, 0] = kind == "divergent"
            return azb.from_dict({"posterior": {"a": x}, "sample_stats": {"diverging": div}})

        return run, seen

    limits = GateConfig()  # the defaults a user gets
    first = SamplerConfig(chains=4, tune=500, draws=500, seed=3)
    run, seen = sampler(["stuck", "divergent", "ok"])
    _, diag, attempts, last = sample_gated(run, ["a"], first, limits)
    assert [(c.tune, c.draws, c.target_accept, c.seed) for c in seen] == [
        (500, 500, 0.85, 3),
        (500, 1000, 0.85, 4),
        (2000, 2000, 0.99, 5),
    ]
    assert [a["passed"] for a in attempts] == [False, False, True] and diag.passed and last == seen[-1]
    run, seen = sampler(["divergent", "ok"])
    assert [a["passed"] for a in sample_gated(run, ["a"], first, limits)[2]] == [False, True] and (
        seen[1].tune,
        seen[1].target_accept,
    ) == (1000, 0.95)
    run, seen = sampler(["stuck"])
    assert len(sample_gated(run, ["a"], first, GateConfig(escalate=False))[2]) == 1


def test_numpyro_chains_go_on_while_short_and_continue_exactly():
    """Two chains of 100 draws cannot reach an ESS of 400: the sampler continues them in steps of
    100 up to ``max_draws``, from where they were: the draws equal one run of that length (same
    seed), and with ``max_draws = draws`` nothing is added."""
    import numpyro
    import numpyro.distributions as dist

    from bayesrc.bayes.samplers import run_numpyro
    from bayesrc.config import SamplerConfig

    def model(scale):
        numpyro.sample("a", dist.Normal(0.0, scale).expand([2]).to_event(1))

    def draws(**kw):
        dt = run_numpyro(model, {"scale": np.array(1.0)}, SamplerConfig(chains=2, tune=100, seed=4, **kw), {}, {})
        return dt["posterior"]["a"].values

    went_on, whole, alone = (
        draws(draws=100, max_draws=300),
        draws(draws=300, max_draws=300),
        draws(draws=100, max_draws=100),
    )
    assert went_on.shape == whole.shape == (2, 300, 2) and alone.shape == (2, 100, 2)
    np.testing.assert_array_equal(went_on, whole)
    np.testing.assert_array_equal(alone, whole[:, :100])


def test_numpyro_chains_start_where_numpyros_own_search_for_initial_points_starts_them():
    """The sampler draws its chains' initial points itself (NumPyro's search for them compiles the potential and its
    gradient once more) and must start each chain where ``numpyro.infer.util.initialize_model`` would: its first
    uniform draw, or where that one's potential is not finite (a wall at ``x[0] = 0.5``; seed 0's first draw is
    past it), the next valid one. Independent code: NumPyro's own search on the same keys."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer.util import initialize_model

    from bayesrc.bayes import samplers
    from bayesrc.config import SamplerConfig, precision, prepare_jax

    jax = prepare_jax()

    def model(scale):
        x = numpyro.sample("x", dist.Normal(0.0, scale).expand([3]).to_event(1))
        numpyro.sample("s", dist.HalfNormal(1.0))
        numpyro.factor("wall", jnp.where(x[0] < 0.5, 0.0, -jnp.inf))

    data, n = {"scale": jnp.asarray(1.0)}, jax.local_device_count()
    with precision():
        keys = jax.random.split(jax.random.PRNGKey(0), 2 * n)
        cfg = SamplerConfig(chains=n, tune=10, draws=10, seed=0)
        sampler = samplers._sampler(jax, model, data, cfg, chunk=10, burn=10)
        first, next_keys = sampler.initial_points(keys[n:])
        state = samplers._started(jax, sampler, keys[:n], first, next_keys, data)
        numpyros = initialize_model(keys[n:], model, model_kwargs=data, dynamic_args=True).param_info.z
    assert list(sampler.prototype) == ["x", "s"] and (np.asarray(first["x"])[:, 0] >= 0.5).any()  # a redraw
    for name in sampler.prototype:
        np.testing.assert_array_equal(np.asarray(state.z[name]), np.asarray(numpyros[name]))
    assert np.isfinite(np.asarray(state.potential_energy)).all()


def test_numpyro_later_rounds_reuse_the_first_rounds_adaptation(monkeypatch):
    """With more chains than devices, the chains of a later round start from their own initial points with the first
    round's mass matrix and step size and run a burn-in of ``REUSED_METRIC_BURN_IN`` transitions (adapting the step
    size only) instead of the warm-up; they then draw from the target: on a normal with scales 1 and 50 (which the
    unit mass matrix they would start from fits badly), every chain's draws have the target's scales, and the later
    rounds' chains take no more leapfrog steps per draw than the first round's."""
    import jax
    import numpyro
    import numpyro.distributions as dist

    from bayesrc.bayes import samplers
    from bayesrc.config import SamplerConfig

    def model(scale):
        numpyro.sample("a", dist.Normal(0.0, scale).to_event(1))

    lengths, advance_chunks = [], samplers._advance_chunks
    monkeypatch.setattr(samplers, "_advance_chunks", lambda *a: lengths.append(a[3]) or advance_chunks(*a))
    n_dev = min(4, jax.local_device_count())
    cfg = SamplerConfig(chains=2 * n_dev, tune=300, draws=500, max_draws=500, seed=3, progress=False)
    dt = samplers.run_numpyro(model, {"scale": np.array([1.0, 50.0])}, cfg, {}, {})
    # one call per round: warm-up, then burn-in, and the draws
    assert lengths == [800, samplers.REUSED_METRIC_BURN_IN + 500]
    a = dt["posterior"]["a"].values
    assert a.shape == (2 * n_dev, 500, 2) and not dt["sample_stats"]["diverging"].values.any()
    np.testing.assert_allclose(a.std(axis=1), np.broadcast_to([1.0, 50.0], (2 * n_dev, 2)), rtol=0.25)
    steps = dt["sample_stats"]["n_steps"].values.mean(axis=1)
    assert steps[n_dev:].max() <= 1.5 * steps[:n_dev].mean()


def test_numpyro_later_rounds_warm_up_on_their_own_after_a_poor_first_round(monkeypatch):
    """A first round whose draws diverged, or whose trees ran to the maximum depth, gives no adaptation to reuse (a
    stuck chain's step size collapses, and a chain started from it took 1,023 leapfrog steps a transition): the later
    rounds then warm up on their own, as every round did before."""
    import numpyro
    import numpyro.distributions as dist

    from bayesrc.bayes import samplers
    from bayesrc.config import SamplerConfig

    cfg = SamplerConfig(tune=300, draws=500, max_tree_depth=10)
    healthy = (None, np.zeros((2, 800), bool), np.full((2, 800), 7))
    diverged = (None, healthy[1].copy(), healthy[2])
    diverged[1][1, 400] = True
    saturated = (None, healthy[1], np.full((2, 800), 1023))
    early = (None, diverged[1] * 0 | (np.arange(800) == 5), healthy[2])  # in the warm-up: not a draw
    assert samplers._adapted_well([healthy], 300, cfg) and samplers._adapted_well([early], 300, cfg)
    assert not samplers._adapted_well([diverged], 300, cfg) and not samplers._adapted_well([saturated], 300, cfg)

    def model(scale):
        numpyro.sample("a", dist.Normal(0.0, scale).to_event(1))

    lengths, advance_chunks = [], samplers._advance_chunks
    monkeypatch.setattr(samplers, "_advance_chunks", lambda *a: lengths.append(a[3]) or advance_chunks(*a))
    monkeypatch.setattr(samplers, "_adapted_well", lambda calls, skip, cfg: False)
    import jax

    two_rounds = SamplerConfig(
        chains=2 * jax.local_device_count(), tune=300, draws=500, max_draws=500, seed=3, progress=False
    )
    dt = samplers.run_numpyro(model, {"scale": np.array([1.0, 50.0])}, two_rounds, {}, {})
    assert lengths == [800, 800] and dt["posterior"].sizes["draw"] == 500


def test_numpyro_rounds_warm_up_on_their_own_where_the_warm_up_is_no_longer_than_the_burn_in(monkeypatch):
    """With a warm-up of ``REUSED_METRIC_BURN_IN`` transitions or fewer a burn-in saves nothing: every round, and every
    fit in a ``shared_adaptation`` block, warms up on its own, and no adaptation is carried over."""
    import jax
    import numpyro
    import numpyro.distributions as dist

    from bayesrc.bayes import samplers
    from bayesrc.config import SamplerConfig

    def model(scale):
        numpyro.sample("a", dist.Normal(0.0, scale).to_event(1))

    def carried(*a):
        raise AssertionError("an adaptation was carried over")

    monkeypatch.setattr(samplers, "_with_metric", carried)
    tune = samplers.REUSED_METRIC_BURN_IN
    chains = 2 * jax.local_device_count()
    cfg = SamplerConfig(chains=chains, tune=tune, draws=100, max_draws=100, seed=3, progress=False)
    with samplers.shared_adaptation():
        for seed in (3, 4):
            dt = samplers.run_numpyro(model, {"scale": np.array([1.0, 2.0])}, replace(cfg, seed=seed), {}, {})
            assert dt.attrs["shared_adaptation"] == 0 and dt["posterior"].sizes["draw"] == 100


def test_numpyro_fits_in_a_shared_adaptation_block_start_from_an_earlier_fits_adaptation(monkeypatch):
    """Inside ``shared_adaptation`` a fit of the same shape starts from an earlier fit's mass matrix and step size
    and runs a burn-in of ``REUSED_METRIC_BURN_IN`` transitions instead of the warm-up, and still draws from its own
    target (scales 2 and 100 after a fit at 1 and 50); a fit of another shape, a retry under ``own_adaptation`` and
    a fit outside the block warm up on their own."""
    import jax
    import numpyro
    import numpyro.distributions as dist

    from bayesrc.bayes import samplers
    from bayesrc.config import SamplerConfig

    def model(scale):
        numpyro.sample("a", dist.Normal(0.0, scale).to_event(1))

    lengths, advance_chunks = [], samplers._advance_chunks
    monkeypatch.setattr(samplers, "_advance_chunks", lambda *a: lengths.append(a[3]) or advance_chunks(*a))
    n_dev = min(4, jax.local_device_count())
    cfg = SamplerConfig(chains=n_dev, tune=300, draws=500, max_draws=500, seed=3, progress=False)  # one round
    run = lambda scale, seed=3: samplers.run_numpyro(model, {"scale": np.array(scale)}, replace(cfg, seed=seed), {}, {})
    with samplers.shared_adaptation():
        first = run([1.0, 50.0])
        second = run([2.0, 100.0], seed=4)
        with samplers.own_adaptation():
            run([1.0, 50.0])
        run([1.0, 50.0, 3.0])  # another shape
    run([2.0, 100.0], seed=4)
    burn = samplers.REUSED_METRIC_BURN_IN
    assert lengths == [800, burn + 500, 800, 800, 800]
    assert (first.attrs["shared_adaptation"], second.attrs["shared_adaptation"]) == (0, 1)
    a = second["posterior"]["a"].values
    assert a.shape == (n_dev, 500, 2) and not second["sample_stats"]["diverging"].values.any()
    np.testing.assert_allclose(a.std(axis=1), np.broadcast_to([2.0, 100.0], (n_dev, 2)), rtol=0.25)
    steps = [dt["sample_stats"]["n_steps"].values.mean() for dt in (first, second)]
    assert steps[1] <= 1.5 * steps[0]


@pytest.mark.parametrize("progress", [True, False])
def test_progress_bar_appears_after_its_delay_unless_turned_off(progress, capsys):
    """Fits and sweeps (sensitivity, truth) show a bar once they take over 2 s; ``progress=False``
    (``--no-progress``) never does."""
    import time

    from bayesrc.bayes.samplers import progress_bar

    with progress_bar(progress, 3, desc="truth", unit="replicate") as bar:
        for _ in range(3):
            time.sleep(0.8)
            bar.update()
    err = capsys.readouterr().err
    assert ("truth" in err and "replicate" in err) == progress, err


def test_progress_bar_in_a_notebook_without_ipywidgets_is_text_and_warns_nothing(monkeypatch, capsys):
    """In a Jupyter kernel without ipywidgets the bar is tqdm's text bar, with no "IProgress not found" warning
    (tqdm.auto's, which put this machine's site-packages path into the rendered docs); with ipywidgets, the widget."""
    import importlib.util
    import sys
    import types
    import warnings

    from tqdm.std import tqdm as text_bar

    from bayesrc.bayes import samplers

    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ipywidgets" else real_find_spec(name, *a)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with samplers.progress_bar(None, 3) as bar:
            shown = not bar.disable  # a kernel is running
            bar.update(3)
    assert type(bar) is text_bar and shown
    assert "IProgress" not in capsys.readouterr().err


def test_fit_refuses_bad_arguments_before_it_samples(monkeypatch):
    """A bad ``delta_min``, or an RCI result of another pair, is refused before minutes of sampling."""
    import importlib

    from bayesrc.classical import reliable_change

    fit_module = importlib.import_module("bayesrc.bayes.fit")  # the module: bayesrc.bayes.fit is also the function

    def no_sampling(*args, **kwargs):
        raise AssertionError("sampled before the arguments were checked")

    monkeypatch.setattr(fit_module, "sample_gated", no_sampling)
    sim = simulate_pair(30, 10, seed=2)
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    with pytest.raises(ValueError, match="delta_min"):
        fit_module.fit(counts, selection=fit_module.SelectionConfig(delta_min=1.5))
    swapped = reliable_change(counts, "model-v2", "model-v1", n_splits=20, n_permutations=20, n_null=0)
    with pytest.raises(ValueError, match="classical result compares"):
        fit_module.fit(counts, rci=swapped)
    with pytest.raises(ValueError, match="not both"):
        fit_module.fit(counts, rci=swapped, rci_kwargs={"n_splits": 20})


def test_item_draws_come_once_after_the_gate(monkeypatch):
    """``fit`` samples the collapsed change model without its item draws and adds them once, after
    the gate (at 12,000 items they take as long as the sampling): none for an attempt the gate
    turned down, and the last attempt's hyperparameter draws with its seed."""
    from bayesrc.bayes import change_item_draws, fit, gating, with_item_draws
    from bayesrc.config import SamplerConfig

    sim = simulate_pair(30, 10, seed=0)
    counts = item_counts(sim.trials_v1, sim.trials_v2)
    cfg = SamplerConfig(chains=2, draws=60, tune=60, seed=2, progress=False)
    calls, real = [], change_item_draws.item_draws
    monkeypatch.setattr(change_item_draws, "item_draws", lambda *a, **k: calls.append(1) or real(*a, **k))
    # One retry of the same shapes, whatever failed (the default escalation's longer chains each compile
    # a sampler of their own: 197 s of the suite for what two attempts show as well).
    same = ({"tune": 1, "draws": 1, "target_accept": 0.0},)
    monkeypatch.setattr(gating, "ESCALATION", {"divergences": same, "mixing": same})
    res = fit(counts, config=cfg, checks=False)  # 2 x 60 draws cannot reach an ESS of 400: the gate escalates
    last = res.payload["attempts"][-1]
    assert (
        len(res.payload["attempts"]) == 2 and calls == [1] and res.posterior["posterior"].sizes["draw"] == last["draws"]
    )
    items = ["theta", "delta", "changed", "r_cell", "p_up_cell", "item_cell"]
    hyper = res.posterior.copy()
    hyper["posterior"] = res.posterior["posterior"].to_dataset().drop_vars(items)
    again = with_item_draws(hyper, model_inputs(counts), SamplerConfig(seed=last["seed"], progress=False))["posterior"]
    for name in items:
        np.testing.assert_array_equal(again[name].values, res.posterior["posterior"][name].values)


def test_item_block_forms_what_fits_stored_before_and_reads_those_fits_as_they_are():
    """A change fit stores theta, delta, changed per item and r, p_up per cell; item_block forms p,
    dp and the per-item r, p_up (against an independent float64 formula), and gives the same from a
    fit saved with them stored per item. A beta-binomial fit stores p; dp is formed."""
    import xarray as xr

    from bayesrc.bayes import item_block
    from bayesrc.bayes.draws import thinned_draws
    from bayesrc.bayes.ppc import thin_draws

    rng = np.random.default_rng(0)
    dims, cell_dims, n_cells = ("chain", "draw", "item"), ("chain", "draw", "cell"), 7
    theta, delta = (rng.normal(0, 2, (2, 50, 30)).astype(np.float32) for _ in range(2))
    changed = (rng.random(theta.shape) < 0.3).astype(np.int8)
    item_cell = rng.integers(0, n_cells, 30)
    r_cell, p_up_cell = (rng.random((2, 50, n_cells)).astype(np.float32) for _ in range(2))
    p = np.stack([expit(theta.astype(float)), expit(theta.astype(float) + changed * delta.astype(float))], -1)
    stored = xr.Dataset(
        {
            "theta": (dims, theta),
            "delta": (dims, delta),
            "changed": (dims, changed),
            "pi": (("chain", "draw"), rng.random((2, 50))),
            "r_cell": (cell_dims, r_cell),
            "p_up_cell": (cell_dims, p_up_cell),
            "item_cell": ("item", item_cell),
        }
    )
    older = stored.drop_vars(["r_cell", "p_up_cell", "item_cell"]).assign(
        p=((*dims, "version"), p),
        dp=(dims, p[..., 1] - p[..., 0]),
        r=(dims, r_cell[..., item_cell]),
        p_up=(dims, p_up_cell[..., item_cell]),
    )
    items = [3, 1, 4, 29]
    formed, read = item_block(stored, items), item_block(older, items)
    for name in ("p", "dp", "r", "p_up"):
        assert formed[name].dims == read[name].dims and formed[name].dtype == np.float32, name
        np.testing.assert_allclose(formed[name].values, read[name].values, rtol=2e-6, atol=2e-7, err_msg=name)
    assert "r_cell" not in formed and formed["pi"].equals(stored["pi"])
    np.testing.assert_array_equal(item_block(stored)["r"].values, r_cell[..., item_cell])
    betabinom = item_block(xr.Dataset({"p": ((*dims, "version"), p)}), slice(0, 5))
    np.testing.assert_array_equal(betabinom["dp"].values, p[:, :, :5, 1] - p[:, :, :5, 0])
    # The draws the posterior predictive check replicates, gathered without forming the others.
    np.testing.assert_array_equal(thinned_draws(stored, 37)["theta"].values, thin_draws(theta, 37))
    np.testing.assert_array_equal(thinned_draws(stored, 1000)["theta"].values, thin_draws(theta, 1000))


def test_pymc_sampling_leaves_stderr_to_the_progress_bar_and_errors():
    """PyMC names its sampler and variables at INFO on stderr ("NUTS[nutpie]: [mu]") from its own log
    handler, which pytest's log capture displaces, hence a fresh process: ``run_pymc`` keeps that log
    off, so a command that then fails prints its one error line alone."""
    import subprocess
    import sys

    code = """
import pymc as pm
from bayesrc.bayes.samplers import SamplerConfig, run_pymc
with pm.Model() as model:
    pm.Normal("mu")
run_pymc(model, SamplerConfig(chains=1, draws=50, tune=50, progress=False))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "NUTS" not in res.stderr and "Sampling" not in res.stderr, res.stderr
